"""Pieces of the review pages: money, badges, manifest fields, the booking and what it has spent,
the checks, the estimate, the parallelism chosen, the data references, other requests or runs of
the same manifest, and a run's stages, incidents (interruptions, a proposed restart) and RL split."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal, InvalidOperation
from typing import Any

from .. import lifecycle
from ..store import Store, rfc3339
from .render import Markup, definition_list, esc, h, join, table

MISSING = Markup('<span class="empty">(not given)</span>')
MAX_RELATED = 5


def status_badge(status: str) -> Markup:
    return h('<span class="status {}">{}</span>', status, status)


def money_text(value: object) -> str:
    """"$14,000.00" for a decimal amount; anything else as given (escaped where it is shown)."""
    if isinstance(value, str | int | Decimal) and not isinstance(value, bool):
        try:
            amount = Decimal(value)
        except (InvalidOperation, ValueError):
            return str(value)
        if amount.is_finite():
            return f"${amount:,.2f}"
    return str(value)


def money(value: object) -> Markup:
    """An amount that never wraps inside (the stylesheet keeps `.money` on one line)."""
    if isinstance(value, Markup):
        return value
    return h('<span class="money">{}</span>', money_text(value))


def field(document: Any, *path: str | int) -> Any:
    node = document
    for key in path:
        if isinstance(key, int):
            if not isinstance(node, list) or key >= len(node):
                return MISSING
        elif not isinstance(node, dict) or key not in node:
            return MISSING
        node = node[key]
    if node is None:
        return MISSING
    if isinstance(node, list):
        return join((esc(item) for item in node), ", ") if node else Markup('<span class="empty">(none)</span>')
    return node


def size(count: Any) -> Markup:
    if isinstance(count, bool) or not isinstance(count, int):
        return esc(count)
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if count >= scale:
            return h("{} ({}{} parameters)", f"{count:,}", f"{count / scale:.3g}", unit)
    return h("{} parameters", f"{count:,}")


def booking(store: Store, booking_id: str) -> Markup:
    row = store.booking(booking_id)
    if row is None:
        return h('<p class="error-box">Booking {} is not on record.</p>', booking_id)
    gpus = int(row["nodes"]) * int(row["gpus_per_node"])
    return definition_list([
        ("Booking", h("<code>{}</code>", row["booking_id"])), ("State", row["state"]),
        ("GPUs", f"{row['nodes']} node(s) × {row['gpus_per_node']} {row['gpu']} = {gpus} GPU(s)"),
        ("Fabric", row["fabric"]), ("Region", row["region"]), ("Term ends", rfc3339(row["term_ends_at"])),
    ])


def booking_spend(store: Store, account_id: str, booking_id: str) -> Markup:
    """What training runs recorded by this backend have cost on the booking so far; the booking's
    other spend is not known here, and the text says so."""
    if store.booking(booking_id) is None:
        return Markup("not known (the booking is not on record)")
    rows = store.rows("SELECT cost_usd_to_date FROM runs WHERE account_id = ? AND booking_id = ?",
                      (account_id, booking_id))
    try:
        total = sum((Decimal(r["cost_usd_to_date"]) for r in rows), Decimal("0"))
    except (InvalidOperation, ValueError):
        return Markup("not known (a run's cost is unreadable)")
    other = "any other spend on the booking is not known to the desk"
    if not rows:
        return h("{}: no training run on this booking is recorded here; {}", money(f"{total:.2f}"), other)
    return h("{} by {} training run(s) recorded here; {}", money(f"{total:.2f}"), len(rows), other)


def checks(plan: sqlite3.Row) -> Markup:
    found = json.loads(plan["checks"])
    return table(["Check", "Result", "Why"], [
        (c["name"], status_badge(c["status"]), c["message"] or "") for c in found])


def estimate_of(plan: sqlite3.Row) -> dict[str, Any] | None:
    return None if plan["estimate"] is None else dict(json.loads(plan["estimate"]))


def estimate(plan: sqlite3.Row, confirmed_max: object) -> Markup:
    found = estimate_of(plan)
    if found is None:
        return Markup('<p class="empty">No estimate: the manifest could not be read.</p>')
    rows: list[tuple[str, object]] = [
        ("Estimated cost", h("{} of at most {}", money(found["usd"]), money(confirmed_max))),
        ("GPU-hours", found["gpu_hours"]), ("How", found["basis"]),
    ]
    stages = found.get("stages")
    parts = [definition_list(rows)]
    if isinstance(stages, list) and stages:
        parts.append(table(["Stage", "GPU-hours", "Estimated cost"], [
            (s.get("name", ""), s.get("gpu_hours", ""), money(s.get("usd", ""))) for s in stages
            if isinstance(s, dict)]))
        parts.append(Markup('<p class="hint">A run accrues its cost stage by stage, as each stage gate passes, '
                            'and never more than the amount you confirm.</p>'))
    return join(parts)


def data_refs(document: Any) -> Markup:
    refs = document.get("data") if isinstance(document, dict) else None
    if not isinstance(refs, list) or not refs:
        return Markup('<p class="error-box">No data references.</p>')
    rows = []
    for i in range(len(refs)):
        rows.append((
            field(refs, i, "name"), h("<code>{}</code>", field(refs, i, "uri")), field(refs, i, "revision"),
            h("{}<br>against: {}<br>report: <code>{}</code><br>checked: {}",
              field(refs, i, "decontamination", "method"), field(refs, i, "decontamination", "eval_suites"),
              field(refs, i, "decontamination", "report"), field(refs, i, "decontamination", "checked_at")),
        ))
    return table(["Dataset", "Location", "Revision", "Decontamination"], rows)


def _conf_state(store: Store, ref: str | None, now: float) -> str:
    conf = store.confirmation(ref) if ref else None
    if conf is None:
        return "its confirmation is not on record"
    if conf["consumed_by"] is not None:
        return f"its confirmation was used by {conf['consumed_by']}"
    if conf["expires_at"] <= now:
        return "its confirmation expired unused"
    return f"its confirmation has not been used yet (usable until {rfc3339(conf['expires_at'])})"


def same_manifest(store: Store, request: sqlite3.Row) -> list[Markup]:
    """Warnings: runs of exactly this manifest on this booking, and other confirmed create requests
    for it (one intent must not silently become two paid runs)."""
    now = store.clock()
    account, booking_id, digest = request["account_id"], request["booking_id"], request["manifest_sha256"]
    runs = store.rows("SELECT run_id, state FROM runs WHERE account_id = ? AND booking_id = ? AND manifest_sha256 = ? "
                      "ORDER BY created_at DESC LIMIT ?", (account, booking_id, digest, MAX_RELATED))
    confirmed = store.rows(
        "SELECT request_id, decided_at, confirmation_ref FROM confirmation_requests WHERE account_id = ? "
        "AND booking_id = ? AND manifest_sha256 = ? AND action = 'training.create' AND status = 'confirmed' "
        "AND request_id != ? ORDER BY decided_at DESC LIMIT ?",
        (account, booking_id, digest, request["request_id"], MAX_RELATED))
    found = [h("A run for this exact manifest already exists on this booking: <code>{}</code>, state {}.",
               r["run_id"], status_badge(r["state"])) for r in runs]
    found += [h("This exact manifest was already confirmed for this booking: request <code>{}</code> on {}; {}.",
                r["request_id"], rfc3339(r["decided_at"]), _conf_state(store, r["confirmation_ref"], now))
              for r in confirmed]
    return found


def stages(rec: lifecycle.RunRecord) -> Markup:
    """Each stage, its gate, the gate's named eval battery and its results."""
    def battery(gate: dict[str, Any]) -> Markup:
        found = gate.get("battery")
        if not isinstance(found, dict):
            return MISSING
        return h('{}<br><span class="hint">{}</span>', found.get("name", ""),
                 ", ".join(map(str, found.get("evals", []))))

    return table(["Stage", "State", "Gate", "Eval battery", "Results"], [
        (s["name"], status_badge(s["state"]), status_badge(s["gate"]["status"]), battery(s["gate"]),
         ", ".join(f"{k}={v}" for k, v in s["gate"]["evals"].items()) or "—") for s in rec.stages])


def parallelism(layout: Any) -> Markup:
    """The layout the backend chose (data, tensor, pipeline, sharding, precision) and why."""
    if not isinstance(layout, dict) or not layout:
        return Markup('<p class="empty">Not recorded for this run.</p>')
    return join([definition_list([
        ("Precision", layout.get("precision", "")),
        ("Degrees", h("data {} × tensor {} × pipeline {} on {} GPU(s)", layout.get("data"), layout.get("tensor"),
                      layout.get("pipeline"), layout.get("gpus"))),
        ("Sharding", {"none": "none", "within_node": "FSDP within each node, replicated across nodes"}.get(
            str(layout.get("sharding")), str(layout.get("sharding")))),
    ]), h("<ul>{}</ul>", join(h("<li>{}</li>", reason) for reason in layout.get("reasons", [])))])


def interruptions(rec: lifecycle.RunRecord) -> Markup:
    """Each recent interruption with its detection and resume times against the targets, and what they cost."""
    found = rec.events.get("interruptions", [])
    summary = h("Goodput {}; {} interruption(s), {} per hour; {} step(s) run again. Targets: detect within {} min, "
                "resume within {} min.", rec.goodput, rec.events.get("interruption_count", 0), rec.interruption_rate,
                rec.events.get("steps_lost", 0), int(lifecycle.DETECT_TARGET_S // 60),
                int(lifecycle.RESUME_TARGET_S // 60))
    rows = [(rfc3339(i["at"]), i["stage"],
             h("at {}, resumed from {} ({} run again)", i["step"], i["resumed_from_step"], i["steps_lost"]),
             h("{} s / {} s", f"{i['detect_s']:g}", f"{i['resume_s']:g}"),
             status_badge("passed" if i["detect_s"] < lifecycle.DETECT_TARGET_S
                          and i["resume_s"] < lifecycle.RESUME_TARGET_S else "failed"), i["cause"])
            for i in reversed(found)]
    return join([h("<p>{}</p>", summary), table(
        ["Time", "Stage", "Steps", "Detected / resumed after", "Within targets", "Cause"], rows,
        empty="No interruptions.")])


def rl_split(rec: lifecycle.RunRecord) -> Markup | None:
    found = lifecycle.metrics(rec, rfc3339)["rl"]
    if found is None:
        return None
    return definition_list([
        ("Algorithm", h("{} with the DAPO fixes: {}", found["algorithm"].upper(),
                        ", ".join(f.replace("_", " ") for f in found["stability_fixes"]))),
        ("GPUs", h("{} training, {} generating rollouts{}", found["trainer_gpus"], found["rollout_gpus"],
                   " (shared)" if found["colocated"] else "")),
        ("Rollout staleness", h("{} step(s) behind the trainer, bound {}", found["staleness_steps"],
                                found["staleness_bound_steps"])),
    ])


def chart_marks(rec: lifecycle.RunRecord) -> list[tuple[int, str, str]]:
    """Where the loss spiked and where a proposed restart would return to, for the chart."""
    marks: list[tuple[int, str, str]] = []
    proposals = [*rec.events.get("proposals", []), *([rec.proposal] if rec.proposal else [])]
    for p in proposals[-3:]:
        marks.append((int(p["spike_step"]), "spike", f"loss spike, step {p['spike_step']}"))
        if p.get("status") == "pending":
            marks.append((int(p["checkpoint_step"]), "checkpoint", f"restart from step {p['checkpoint_step']}"))
    return marks


def proposal(rec: lifecycle.RunRecord, found: dict[str, Any]) -> Markup:
    """What the backend proposes, in words: the spike, the checkpoint, the repeated steps and their cost."""
    return definition_list([
        ("What happened", h("The loss spiked to {} at step {} in stage {} (it was {}). The stage is paused; nothing "
                            "happens until you decide.", found["spike_loss"], found["spike_step"], found["stage"],
                            found["loss_before"])),
        ("Restart from", h("checkpoint <code>{}</code> at step {}, the last one before the spike",
                           found["checkpoint_id"] or "(the start of the stage)", found["checkpoint_step"])),
        ("Steps run again", h("{} (steps {} to {})", found["repeated_steps"], found["checkpoint_step"],
                              found["spike_step"])),
        ("Their cost", h("about {}, on top of the run's {} so far", money(found["repeated_cost_usd"]),
                         money(rec.cost_usd_to_date))),
        ("If you decline", "The stage continues from the spike, nothing is run again; the run can still be "
                           "cancelled on its own request."),
    ])


def run_cost(rec: lifecycle.RunRecord) -> Markup:
    estimate_usd = rec.plan.estimate_usd
    if estimate_usd is None:
        return h("{} (at most {})", money(rec.cost_usd_to_date), money(rec.plan.max_incremental_usd))
    return h("{} of an estimated {} (at most {})", money(rec.cost_usd_to_date), money(estimate_usd),
             money(rec.plan.max_incremental_usd))
