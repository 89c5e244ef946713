"""The review page's content: what exactly a person confirms or declines.

A create request is rendered from the plan's stored manifest bytes, parsed here by the backend
(never from text an agent supplied): model, size, revision, target, each data reference with its
decontamination provenance, the recipe, the budget, the checkpoint policy, the description, the
booking, the server-side checks, the estimate and the digest, then the whole document as stored.
Confirm is offered only when the stored bytes still hash to the request's digest, parse with the
manifest schema, and every server-side check passed. Cancel and cleanup requests show the run,
its state, what the action does, and that the booking is untouched.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

from ... import strict_json
from ...errors import ManifestRefusal
from ...manifest import parse_manifest
from .. import lifecycle, reviews
from ..lifecycle import RunRecord
from ..store import Store, rfc3339
from .render import Markup, definition_list, esc, h, join, table

MISSING = Markup('<span class="empty">(not given)</span>')


def status_badge(status: str) -> Markup:
    return h('<span class="status {}">{}</span>', status, status)


def money(value: object) -> Markup:
    return h('<span class="money">${}</span>', value)


def _field(document: Any, *path: str | int) -> Any:
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


def _size(count: Any) -> Markup:
    if isinstance(count, bool) or not isinstance(count, int):
        return esc(count)
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if count >= scale:
            return h("{} ({}{} parameters)", f"{count:,}", f"{count / scale:.3g}", unit)
    return h("{} parameters", f"{count:,}")


def _booking(store: Store, booking_id: str) -> Markup:
    row = store.booking(booking_id)
    if row is None:
        return h('<p class="error-box">Booking {} is not on record.</p>', booking_id)
    gpus = int(row["nodes"]) * int(row["gpus_per_node"])
    return definition_list([
        ("Booking", h("<code>{}</code>", row["booking_id"])), ("State", row["state"]),
        ("GPUs", f"{row['nodes']} node(s) × {row['gpus_per_node']} {row['gpu']} = {gpus} GPU(s)"),
        ("Fabric", row["fabric"]), ("Region", row["region"]), ("Term ends", rfc3339(row["term_ends_at"])),
    ])


def _checks(plan: sqlite3.Row) -> Markup:
    checks = json.loads(plan["checks"])
    return table(["Check", "Result", "Why"], [
        (c["name"], status_badge(c["status"]), c["message"] or "") for c in checks])


def _estimate(plan: sqlite3.Row) -> Markup:
    if plan["estimate"] is None:
        return Markup('<p class="empty">No estimate: the manifest could not be read.</p>')
    estimate = json.loads(plan["estimate"])
    return definition_list([("Estimated cost", money(estimate["usd"])), ("GPU-hours", estimate["gpu_hours"]),
                            ("How", estimate["basis"])])


def _data_refs(document: Any) -> Markup:
    refs = document.get("data") if isinstance(document, dict) else None
    if not isinstance(refs, list) or not refs:
        return Markup('<p class="error-box">No data references.</p>')
    rows = []
    for i in range(len(refs)):
        rows.append((
            _field(refs, i, "name"), h("<code>{}</code>", _field(refs, i, "uri")), _field(refs, i, "revision"),
            h("{}<br>against: {}<br>report: <code>{}</code><br>checked: {}",
              _field(refs, i, "decontamination", "method"), _field(refs, i, "decontamination", "eval_suites"),
              _field(refs, i, "decontamination", "report"), _field(refs, i, "decontamination", "checked_at")),
        ))
    return table(["Dataset", "Location", "Revision", "Decontamination"], rows)


def create_review(store: Store, request: sqlite3.Row) -> tuple[Markup, bool]:
    """The content for a training.create request, and whether Confirm may be offered."""
    plan = reviews.plan(store, request["plan_id"]) if request["plan_id"] else None
    if plan is None or plan["account_id"] != request["account_id"]:
        return Markup('<p class="error-box">The plan behind this request is not on record.</p>'), False
    raw = bytes(plan["manifest"])
    problems: list[Markup] = []
    digest = hashlib.sha256(raw).hexdigest()
    if digest != request["manifest_sha256"]:
        problems.append(Markup("The stored manifest no longer matches the digest this request is for."))
    try:
        document: Any = strict_json.loads(raw)
    except strict_json.StrictJSONError as exc:
        document = None
        problems.append(h("The stored manifest is not strict JSON ({}).", exc.reason))
    if document is not None:
        try:
            parse_manifest(raw)
        except ManifestRefusal as refusal:
            problems.append(h("The manifest does not pass ito.training.manifest.v1 ({}).", refusal.code.value))
    if not plan["valid"]:
        problems.append(Markup("A server-side check failed (see below)."))
    doc = document if isinstance(document, dict) else {}
    recipe = doc.get("post_training")
    steps = (join((esc(s) for s in recipe), " → ") if recipe else Markup("none")) if isinstance(recipe, list) \
        else _field(doc, "post_training")
    parts = [
        h('<section class="summary"><p>The agent asks to <strong>start training</strong> on booking <code>{}</code>. '
          'Confirming allows this one run of exactly this manifest to spend at most {} on top of what the booking '
          'has already spent.</p></section>', request["booking_id"], money(request["max_cost_usd"])),
    ]
    if problems:
        parts.append(h('<div class="error-box"><strong>Do not confirm.</strong> {}</div>', join(
            h("<p>{}</p>", p) for p in problems)))
    parts += [
        h("<h2>Model</h2><section>{}</section>", definition_list([
            ("Name", _field(doc, "model", "name")), ("Size", _size(_field(doc, "model", "parameter_count"))),
            ("Revision", h("<code>{}</code>", _field(doc, "model", "revision"))),
            ("Training target", _field(doc, "target")), ("Post-training recipe", steps),
        ])),
        h("<h2>Data</h2><section>{}</section>", _data_refs(doc)),
        h("<h2>Budget</h2><section>{}</section>", definition_list([
            ("Budget ceiling for the run", money(_field(doc, "budget", "ceiling_usd"))),
            ("Most this submission may add", money(_field(doc, "budget", "max_incremental_cost_usd"))),
            ("You confirm up to", money(request["max_cost_usd"])),
        ])),
        h("<h2>Checkpoints</h2><section>{}</section>", definition_list([
            ("Every", h("{} steps", _field(doc, "checkpoints", "interval_steps"))),
            ("Keep the last", _field(doc, "checkpoints", "retain_last")),
            ("Written to", h("<code>{}</code>", _field(doc, "checkpoints", "storage"))),
        ])),
        h('<h2>Description</h2><section><p class="multiline">{}</p></section>',
          esc(doc["description"], multiline=True) if isinstance(doc.get("description"), str)
          else _field(doc, "description")),
        h("<h2>Booking</h2><section>{}</section>", _booking(store, request["booking_id"])),
        h("<h2>Server-side checks</h2><section>{}</section>", _checks(plan)),
        h("<h2>Estimate</h2><section>{}</section>", _estimate(plan)),
        h("<h2>Digest</h2><section>{}</section>", definition_list([
            ("Manifest SHA-256", h('<code class="digest">{}</code>', request["manifest_sha256"])),
            ("Stored bytes", f"{len(raw):,} bytes; their SHA-256 "
                             f"{'matches' if digest == request['manifest_sha256'] else 'DIFFERS'}"),
        ])),
        h("<h2>The manifest exactly as stored</h2><section><pre>{}</pre></section>",
          esc(raw.decode("utf-8", "replace"), multiline=True)),
    ]
    return join(parts), not problems


def _stages(rec: RunRecord) -> Markup:
    return table(["Stage", "State", "Gate", "Evals"], [
        (s["name"], status_badge(s["state"]), status_badge(s["gate"]["status"]),
         ", ".join(f"{k}={v}" for k, v in s["gate"]["evals"].items())) for s in rec.stages])


def run_review(store: Store, request: sqlite3.Row) -> tuple[Markup, bool]:
    """The content for a training.cancel / training.cleanup request, and whether Confirm may be offered."""
    rec = store.run(request["run_id"]) if request["run_id"] else None
    if rec is None or rec.account_id != request["account_id"]:
        return Markup('<p class="error-box">The run behind this request is not on record.</p>'), False
    cancel = request["action"] == "training.cancel"
    possible = rec.state in lifecycle.CANCELLABLE_STATES if cancel else rec.terminal
    what = (Markup("<strong>cancel</strong> run") if cancel else Markup("<strong>clean up</strong> run"))
    effect = (Markup("Cancelling stops the run now: stages that have not passed are skipped. Checkpoints already "
                     "written are kept.") if cancel else
              h("Cleanup releases the run's {} (compute-side resources only). Checkpoints are kept, as the "
                "manifest's retention says.", ", ".join(r.replace("_", " ") for r in lifecycle.CLEANED_RESOURCES)))
    parts = [
        h('<section class="summary"><p>The agent asks to {} <code>{}</code>. It costs nothing '
          '(you confirm {}).</p><p>{}</p><p><strong>The booking <code>{}</code> is untouched</strong>: it is not '
          'released, modified or refunded.</p></section>', what, rec.run_id, money(request["max_cost_usd"]),
          effect, rec.booking_id),
    ]
    if not possible:
        parts.append(h('<div class="error-box">The run is {} now, so this {} could not be carried out.</div>',
                       rec.state, "cancel" if cancel else "cleanup"))
    parts += [
        h("<h2>The run</h2><section>{}{}</section>", definition_list([
            ("Run", h("<code>{}</code>", rec.run_id)), ("State", status_badge(rec.state)),
            ("Manifest SHA-256", h('<code class="digest">{}</code>', rec.manifest_sha256)),
            ("Started", rfc3339(rec.created_at)), ("Cost so far", money(rec.cost_usd_to_date)),
        ]), _stages(rec)),
        h("<h2>Booking</h2><section>{}</section>", _booking(store, rec.booking_id)),
    ]
    return join(parts), possible


def stages_table(rec: RunRecord) -> Markup:
    return _stages(rec)
