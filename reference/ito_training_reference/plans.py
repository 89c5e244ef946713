"""The person's step in the public API: training plans and confirmation requests.

`POST /v1/training-plans` validates a manifest server-side without creating anything, estimates
its cost and, when every check passes, opens a pending `training.create` confirmation request.
While such a request is pending (undecided, unexpired) for the same account, booking and digest,
planning the same manifest again answers that request (and its plan, 200) instead of opening a
second one: one intent is one request. `POST /v1/confirmation-requests` opens one for cancelling
or cleaning up a run, or for restarting it from the checkpoint the backend proposed after a loss
spike (bound to that proposal, for the cost of the steps run again), or answers the one already pending
for that run and action. Only plans count against the account's quota of pending requests: cancelling a
run (stopping its spend) can never be refused because an agent opened many plans. Nothing here confirms
anything: only a person at the desk (or the operator API, headless) decides a request. Neither POST is
keyed.
"""

from __future__ import annotations

import re

from starlette.routing import Route

from ito_training_mcp.gates.inputs import ID_PATTERN

from . import lifecycle, policy, reviews
from .errors import ApiError, invalid_request
from .public import (
    READ,
    WRITE,
    Ctx,
    Handler,
    V1Route,
    eligibility,
    field_id,
    manifest_and_booking,
    no_restart_proposed,
    own_run,
)
from .state import Backend
from .wire import Reply, only_keys, parse_object, read_body

_ID_RE = re.compile(ID_PATTERN)
_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
PLAN_FIELDS = ("booking_id", "manifest_sha256", "manifest_b64")
REQUEST_ACTIONS = ("training.cancel", "training.cleanup", "training.restart")


def _too_many(backend: Backend, account_id: str) -> None:
    if reviews.pending_plans(backend.store, account_id, backend.store.clock()) >= reviews.MAX_PENDING_PER_ACCOUNT:
        raise ApiError(409, "too_many_pending_requests",
                       f"This account already has {reviews.MAX_PENDING_PER_ACCOUNT} pending training plans to "
                       "confirm; decide them (the desk can decline them all at once) or let some expire first.")


async def create_plan(backend: Backend, ctx: Ctx) -> Reply:
    body = parse_object(await read_body(ctx.request))
    only_keys(body, PLAN_FIELDS)
    booking_id = field_id(body, "booking_id")
    digest, encoded = body["manifest_sha256"], body["manifest_b64"]
    if not isinstance(digest, str) or not _DIGEST_RE.fullmatch(digest):
        raise invalid_request("manifest_sha256 must be 64 lowercase hex characters.")
    if not isinstance(encoded, str):
        raise invalid_request("manifest_b64 must be a string.")
    # No await from here on.
    store, account_id = backend.store, ctx.account_id
    manifest_bytes, booking = manifest_and_booking(store, account_id, booking_id, encoded, digest)
    eligible, reason = eligibility(booking, store.clock())
    if not eligible:
        raise ApiError(403, "booking_not_eligible", "The booking is not eligible for training.", reason=reason)
    account = store.account(account_id)
    assert account is not None  # a token's account always exists (foreign key)
    manifest, checks = policy.evaluate(manifest_bytes, booking, account)
    valid = manifest is not None and all(c["status"] == "passed" for c in checks)
    base = backend.base_url(ctx.request.scope)
    if valid:
        now = store.clock()
        pending = reviews.pending_create(store, account_id, booking_id, digest, now)
        opened = None if pending is None or pending["plan_id"] is None else reviews.plan(store, pending["plan_id"])
        if pending is not None and opened is not None:  # the same intent, still waiting: the same request
            return Reply(200, reviews.plan_view(opened, reviews.request_view(pending, now, base)))
        _too_many(backend, account_id)
    estimate = None if manifest is None else policy.estimate(manifest, booking)
    layout = None if manifest is None else policy.layout(manifest, booking).as_json()
    max_cost = f"{manifest.budget.max_incremental_cost_usd:.2f}" if valid and manifest is not None else None
    plan, request = reviews.create_plan(
        store, account_id=account_id, booking_id=booking_id, manifest_sha256=digest, manifest=manifest_bytes,
        checks=checks, estimate=estimate, max_cost_usd=max_cost, settings=backend.reviews, parallelism=layout,
    )
    view = None if request is None else reviews.request_view(request, store.clock(), base)
    return Reply(201, reviews.plan_view(plan, view))


async def create_request(backend: Backend, ctx: Ctx) -> Reply:
    body = parse_object(await read_body(ctx.request))
    only_keys(body, ("action", "run_id"))
    action = body["action"]
    if action not in REQUEST_ACTIONS:
        raise invalid_request("action must be training.cancel, training.cleanup or training.restart; create requests "
                              "come from plans.")
    run_id = field_id(body, "run_id")
    rec = own_run(backend, ctx.account_id, run_id)
    if action == "training.cancel" and rec.state not in lifecycle.CANCELLABLE_STATES:
        raise ApiError(409, "run_not_cancellable", f"A run in state {rec.state} cannot be cancelled.")
    if action == "training.cleanup" and not rec.terminal:
        raise ApiError(422, "validation_rejected", "Cancel the run or let it finish before cleanup.",
                       reason="run_active")
    proposal = rec.proposal
    if action == "training.restart" and proposal is None:
        raise no_restart_proposed(rec)
    pending = reviews.pending_for_run(backend.store, ctx.account_id, rec.run_id, action, backend.store.clock())
    if pending is not None:  # the same intent, still waiting: the same request (never refused for a quota)
        return Reply(200, reviews.request_view(pending, backend.store.clock(), backend.base_url(ctx.request.scope)))
    row = reviews.create_run_request(
        backend.store, account_id=ctx.account_id, action=action, run_id=rec.run_id, booking_id=rec.booking_id,
        manifest_sha256=rec.manifest_sha256, settings=backend.reviews,
        proposal_id=None if proposal is None else proposal["proposal_id"],
        max_cost_usd="0.00" if proposal is None else proposal["repeated_cost_usd"],
    )
    return Reply(201, reviews.request_view(row, backend.store.clock(), backend.base_url(ctx.request.scope)))


async def get_request(backend: Backend, ctx: Ctx) -> Reply:
    request_id = ctx.path("request_id")
    row = reviews.request(backend.store, request_id) if _ID_RE.fullmatch(request_id) else None
    if row is None or row["account_id"] != ctx.account_id:
        raise ApiError(404, "confirmation_not_found", "No such confirmation request for this account.")
    moot = row["status"] == "pending" and row["run_id"] is not None and not reviews.still_possible(
        row, own_run(backend, ctx.account_id, row["run_id"]))
    return Reply(200, reviews.request_view(row, backend.store.clock(), backend.base_url(ctx.request.scope),
                                           moot=moot))


def routes(backend: Backend) -> list[Route]:
    table: list[tuple[str, str, Handler, str]] = [
        ("POST", "/v1/training-plans", create_plan, WRITE),
        ("POST", "/v1/confirmation-requests", create_request, WRITE),
        ("GET", "/v1/confirmation-requests/{request_id}", get_request, READ),
    ]
    return [Route(path, endpoint=V1Route(backend, f"{method} {path}", handler, scope=scope), methods=[method])
            for method, path, handler, scope in table]

