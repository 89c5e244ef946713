"""The review page's content: what exactly a person confirms or declines.

A create request is rendered from the plan's stored manifest bytes, parsed here by the backend
(never from text an agent supplied): what is asked and the money (the amount confirmed next to
the estimate, the manifest's budget, what the booking has spent), model, size, revision, target,
each data reference with its decontamination provenance, the recipe, the checkpoint policy, the
description, the booking, the server-side checks, the estimate and the digest, then the whole
document as stored. Confirm is offered only when the stored bytes still hash to the request's
digest, parse with the manifest schema, and every server-side check passed. Other requests and
runs of exactly the same manifest on the booking are pointed out. Cancel and cleanup requests
show the run, its state, what the action does once the agent sends it, and that the booking is
untouched. A restart request shows what the backend proposes after a loss spike: the spike on the
loss chart, the checkpoint it would return to, the steps run again and their cost, and what
declining does; Confirm only while that proposal is still the run's pending one. The decision
block itself is built by the page (`decision.py`), after all of this.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from ito_training_mcp.errors import ManifestRefusal
from ito_training_mcp.gates.manifest import strict_json
from ito_training_mcp.gates.manifest.schema import parse_manifest

from .. import lifecycle, reviews
from ..store import Store, rfc3339
from . import facts
from .facts import field as _field
from .facts import money
from .render import Markup, chart, definition_list, esc, h, join


@dataclass(frozen=True)
class Review:
    """What the page shows before the decision, whether Confirm may be offered, and warnings the
    decision block repeats."""

    content: Markup
    confirmable: bool
    warnings: list[Markup] = field(default_factory=list)


def _money_section(store: Store, request: sqlite3.Row, doc: dict[str, Any], plan: sqlite3.Row) -> Markup:
    """One sentence for what confirming allows, then the estimate and what the booking spent: the three
    amounts never read as a contradiction."""
    found = facts.estimate_of(plan)
    return definition_list([
        ("You confirm", h('at most {} for this run, within the manifest\'s {} ceiling. <span class="hint">The most '
                          'is the manifest\'s max_incremental_cost_usd; the ceiling (ceiling_usd) bounds the run\'s '
                          'whole cost and is checked against the account\'s limit.</span>',
                          money(request["max_cost_usd"]), money(_field(doc, "budget", "ceiling_usd")))),
        ("Estimate", h('The backend estimates {}. <span class="hint">An estimate, never a cap: the run stops at '
                       'the amount you confirm.</span>', money(found["usd"])) if found is not None
         else Markup("There is no estimate.")),
        ("Spent on this booking so far", facts.booking_spend(store, request["account_id"], request["booking_id"])),
    ])


def _parse(raw: bytes, request: sqlite3.Row, plan: sqlite3.Row) -> tuple[dict[str, Any], list[Markup]]:
    problems: list[Markup] = []
    if hashlib.sha256(raw).hexdigest() != request["manifest_sha256"]:
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
    return (document if isinstance(document, dict) else {}), problems


def _purged(store: Store, request: sqlite3.Row, plan: sqlite3.Row, warnings: list[Markup]) -> Review:
    parts = [
        h('<section class="summary"><p>The agent asked to <strong>start training</strong> on booking <code>{}</code> '
          'with at most {}.</p></section>', request["booking_id"], money(request["max_cost_usd"])),
        h('<div class="notice">The stored manifest bytes of this request were deleted on {}, a retention period '
          'after the request was decided or expired. Only the digest, the server-side checks and the estimate '
          'remain.</div>', rfc3339(plan["manifest_purged_at"])),
        h("<h2>Booking</h2><section>{}</section>", facts.booking(store, request["booking_id"])),
        h("<h2>Server-side checks</h2><section>{}</section>", facts.checks(plan)),
        h("<h2>Estimate</h2><section>{}</section>", facts.estimate(plan, request["max_cost_usd"])),
        h("<h2>Digest</h2><section>{}</section>", definition_list([
            ("Manifest SHA-256", h('<code class="digest">{}</code>', request["manifest_sha256"])),
            ("Stored bytes", "deleted")])),
    ]
    return Review(join(parts), False, warnings)


def create_review(store: Store, request: sqlite3.Row) -> Review:
    """The content for a training.create request, whether Confirm may be offered, and warnings."""
    plan = reviews.plan(store, request["plan_id"]) if request["plan_id"] else None
    if plan is None or plan["account_id"] != request["account_id"]:
        return Review(Markup('<p class="error-box">The plan behind this request is not on record.</p>'), False)
    warnings = facts.same_manifest(store, request)
    if plan["manifest_purged_at"] is not None:
        return _purged(store, request, plan, warnings)
    raw = bytes(plan["manifest"])
    doc, problems = _parse(raw, request, plan)
    digest = hashlib.sha256(raw).hexdigest()
    recipe = doc.get("post_training")
    steps = (join((esc(s) for s in recipe), " → ") if recipe else Markup("none")) if isinstance(recipe, list) \
        else _field(doc, "post_training")
    found = facts.estimate_of(plan)
    estimated = Markup("") if found is None else h(" The backend estimates {} of that.", money(found["usd"]))
    parts = [
        h('<section class="summary"><p>The agent asks to <strong>start training</strong> on booking <code>{}</code>. '
          'Confirming allows one run of exactly this manifest to spend at most {} on top of what the booking '
          'has already spent.{}</p></section>', request["booking_id"], money(request["max_cost_usd"]), estimated),
    ]
    if warnings:
        parts.append(h('<div class="notice" id="same-manifest"><strong>Check before you confirm.</strong> {}</div>',
                       join(h("<p>{}</p>", w) for w in warnings)))
    if problems:
        parts.append(h('<div class="error-box"><strong>Do not confirm.</strong> {}</div>', join(
            h("<p>{}</p>", p) for p in problems)))
    parts += [
        h("<h2>Money</h2><section>{}</section>", _money_section(store, request, doc, plan)),
        h("<h2>Model</h2><section>{}</section>", definition_list([
            ("Name", _field(doc, "model", "name")), ("Size", facts.size(_field(doc, "model", "parameter_count"))),
            ("Revision", h("<code>{}</code>", _field(doc, "model", "revision"))),
            ("Training target", _field(doc, "target")), ("Post-training recipe", steps),
        ])),
        h("<h2>Data</h2><section>{}</section>", facts.data_refs(doc)),
        h("<h2>Checkpoints</h2><section>{}</section>", definition_list([
            ("Every", h("{} steps", _field(doc, "checkpoints", "interval_steps"))),
            ("Keep the last", _field(doc, "checkpoints", "retain_last")),
            ("Written to", h("<code>{}</code>", _field(doc, "checkpoints", "storage"))),
        ])),
        h('<h2>Description</h2><section><p class="multiline">{}</p></section>',
          esc(doc["description"], multiline=True) if isinstance(doc.get("description"), str)
          else _field(doc, "description")),
        h("<h2>Booking</h2><section>{}</section>", facts.booking(store, request["booking_id"])),
        h("<h2>Server-side checks</h2><section>{}</section>", facts.checks(plan)),
        h("<h2>Parallelism and precision</h2><section>{}</section>", facts.parallelism(
            json.loads(plan["parallelism"]) if plan["parallelism"] else None)),
        h("<h2>Estimate</h2><section>{}</section>", facts.estimate(plan, request["max_cost_usd"])),
        h("<h2>Digest</h2><section>{}</section>", definition_list([
            ("Manifest SHA-256", h('<code class="digest">{}</code>', request["manifest_sha256"])),
            ("Stored bytes", f"{len(raw):,} bytes; their SHA-256 "
                             f"{'matches' if digest == request['manifest_sha256'] else 'DIFFERS'}"),
        ])),
        h("<h2>The manifest exactly as stored</h2><section><pre>{}</pre></section>",
          esc(raw.decode("utf-8", "replace"), multiline=True)),
    ]
    return Review(join(parts), not problems, warnings)


def run_review(store: Store, request: sqlite3.Row) -> Review:
    """The content for a training.cancel / training.cleanup request, and whether Confirm may be offered."""
    rec = store.run(request["run_id"]) if request["run_id"] else None
    if rec is None or rec.account_id != request["account_id"]:
        return Review(Markup('<p class="error-box">The run behind this request is not on record.</p>'), False)
    cancel = request["action"] == "training.cancel"
    possible = rec.state in lifecycle.CANCELLABLE_STATES if cancel else rec.terminal
    what = (Markup("<strong>cancel</strong> run") if cancel else Markup("<strong>clean up</strong> run"))
    effect = (Markup("Confirming allows the agent (or <code>ito-training cancel</code>) to cancel this run. The run "
                     "stops when that cancel is sent, not when you press Confirm: until then it keeps running and "
                     "its cost keeps accruing. When the cancel arrives, stages that have not passed are skipped; "
                     "checkpoints already written are kept.") if cancel else
              h("Confirming allows the agent (or ito-training cleanup) to clean up this run; cleanup happens when "
                "that request is sent, not when you press Confirm. Cleanup releases the run's {} (compute-side "
                "resources only). Checkpoints are kept, as the manifest's retention says.",
                ", ".join(r.replace("_", " ") for r in lifecycle.CLEANED_RESOURCES)))
    parts = [
        h('<section class="summary"><p>The agent asks to {} <code>{}</code>. It costs nothing '
          '(you confirm {}).</p><p>{}</p><p><strong>The booking <code>{}</code> is untouched</strong>: it is not '
          'released, modified or refunded.</p></section>', what, rec.run_id, money(request["max_cost_usd"]), effect,
          rec.booking_id),
    ]
    if not possible:
        parts.append(h('<div class="error-box">The run is {} now, so this {} could not be carried out.</div>',
                       rec.state, "cancel" if cancel else "cleanup"))
    parts += [
        h("<h2>The run</h2><section>{}{}</section>", definition_list([
            ("Run", h("<code>{}</code>", rec.run_id)), ("State", facts.status_badge(rec.state)),
            ("Manifest SHA-256", h('<code class="digest">{}</code>', rec.manifest_sha256)),
            ("Started", rfc3339(rec.created_at)), ("Cost so far", facts.run_cost(rec)),
        ]), facts.stages(rec)),
        h("<h2>Booking</h2><section>{}</section>", facts.booking(store, rec.booking_id)),
    ]
    return Review(join(parts), possible)


def restart_review(store: Store, request: sqlite3.Row) -> Review:
    """The content for a training.restart request: the proposal it is bound to, on the loss chart."""
    rec = store.run(request["run_id"]) if request["run_id"] else None
    if rec is None or rec.account_id != request["account_id"]:
        return Review(Markup('<p class="error-box">The run behind this request is not on record.</p>'), False)
    proposals = [*rec.events.get("proposals", []), *([rec.proposal] if rec.proposal else [])]
    found = next((p for p in reversed(proposals) if p["proposal_id"] == request["proposal_id"]), None)
    if found is None:
        return Review(Markup('<p class="error-box">The restart proposal behind this request is not on record.</p>'),
                      False)
    possible = reviews.still_possible(request, rec)
    points = [(int(p["step"]), p["loss"], float(p["goodput"])) for p in store.metric_history(rec.run_id)]
    parts = [
        h('<section class="summary"><p>The backend paused run <code>{}</code> after a loss spike and proposes to '
          '<strong>restart it from step {}</strong>; the agent asks you to confirm. Running the {} step(s) again '
          'costs about {} (you confirm up to {}).</p><p><strong>The booking <code>{}</code> is untouched.</strong>'
          '</p></section>', rec.run_id, found["checkpoint_step"], found["repeated_steps"],
          money(found["repeated_cost_usd"]), money(request["max_cost_usd"]), rec.booking_id),
    ]
    if not possible:
        parts.append(h('<div class="error-box">This proposal is no longer pending (it is {}; the run is {}), so the '
                       'restart could not be carried out.</div>', found.get("status", "settled"), rec.state))
    parts += [
        h("<h2>The proposal</h2><section>{}</section>", facts.proposal(rec, found)),
        h("<h2>Loss and goodput</h2><section>{}</section>", chart(points, facts.chart_marks(rec))),
        h("<h2>The run</h2><section>{}{}</section>", definition_list([
            ("Run", h("<code>{}</code>", rec.run_id)), ("State", facts.status_badge(rec.state)),
            ("Step", rec.step), ("Cost so far", facts.run_cost(rec)),
        ]), facts.stages(rec)),
        h("<h2>Booking</h2><section>{}</section>", facts.booking(store, rec.booking_id)),
    ]
    return Review(join(parts), possible)


def review_of(store: Store, request: sqlite3.Row) -> Review:
    if request["action"] == "training.create":
        return create_review(store, request)
    if request["action"] == "training.restart":
        return restart_review(store, request)
    return run_review(store, request)
