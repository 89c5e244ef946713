"""The public `ito.training.v1` API (contract §7, docs/contract.md) as the reference backend answers it.

Every route is a `V1Route`: fault pick-up -> auth -> (keyed POSTs) key check and in-flight
reservation -> before-fault -> handler -> delivery with after-fault. The in-flight reservation
is held until the reply has been sent, so a concurrent request with the same key is 409
`idempotency_in_flight` for the whole life of the first one, stalls included.

Keyed POSTs read their (capped) body right after the reservation, before any injected delay, so
a client that times out does not stop the work. Handlers then never await: each create's checks
and its transaction see no interleaved request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ito_training_mcp.backend import origin_proof
from ito_training_mcp.gates.inputs import ID_PATTERN, KEY_PATTERN

from . import curriculum, faults, lifecycle, policy
from .errors import ApiError, invalid_request
from .lifecycle import RunRecord
from .state import Backend
from .store import Store, new_id, rfc3339
from .wire import MAX_REQUEST_BYTES, Reply, bearer, only_keys, parse_object, read_body

READ, WRITE = "training:read", "training:write"
_ID_RE = re.compile(ID_PATTERN)
_KEY_RE = re.compile(KEY_PATTERN)
_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
_CURSOR_RE = re.compile(r"^log-([0-9]{1,18})$")
_LIMIT_RE = re.compile(r"^[0-9]{1,4}$")
LOG_LIMIT_DEFAULT, LOG_LIMIT_MAX = 200, 1000
CREATE_FIELDS = ("booking_id", "confirmation_ref", "manifest_sha256", "manifest_b64")


@dataclass(frozen=True)
class Principal:
    account_id: str
    token_id: str


@dataclass
class Ctx:
    request: Request
    principal: Principal
    key: str = ""
    body: bytes = b""

    @property
    def account_id(self) -> str:
        return self.principal.account_id

    def path(self, name: str) -> str:
        return str(self.request.path_params[name])


Handler = Callable[[Backend, Ctx], Awaitable[Reply]]


def authenticate(backend: Backend, request: Request, scope: str) -> Principal:
    token = bearer(request)
    row = None if token is None else backend.store.token(token)
    if row is None:
        raise ApiError(401, "unauthorized", "A valid bearer token is required.",
                       headers={"WWW-Authenticate": 'Bearer realm="ito"'})
    expired = row["expires_at"] is not None and row["expires_at"] <= backend.store.clock()
    if row["revoked_at"] is not None or expired:
        raise ApiError(401, "credential_revoked", "The token was revoked or has expired.",
                       headers={"WWW-Authenticate": 'Bearer realm="ito", error="invalid_token"'})
    if scope not in str(row["scopes"]).split():
        raise ApiError(403, "forbidden", f"The token lacks the {scope} scope.",
                       headers={"WWW-Authenticate": 'Bearer error="insufficient_scope"'})
    return Principal(row["account_id"], row["token_id"])


class V1Route:
    """An ASGI endpoint wrapping one handler with auth, key reservation and fault injection."""

    def __init__(self, backend: Backend, route: str, handler: Handler, *, scope: str | None, keyed: bool = False):
        self.backend, self.route, self.handler, self.scope, self.keyed = backend, route, handler, scope, keyed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fault = self.backend.faults.take(self.route)
        log_entry = scope.get("ito.request_log")
        if isinstance(log_entry, dict):
            log_entry["route"] = self.route
            log_entry["fault"] = None if fault is None else fault.kind
        held: list[tuple[str, str]] = []
        request = Request(scope, receive)
        try:
            reply = faults.preempt(fault) or await self._process(request, fault, held)
            if fault is not None and fault.kind == "drop":
                await _drain(request)  # so the abort is a clean FIN, not an RST over unread bytes
            await faults.deliver(send, reply, fault)
        except ClientDisconnect:  # the client left before sending its body: nobody to answer
            return
        finally:
            for slot in held:
                self.backend.in_flight.discard(slot)

    async def _process(self, request: Request, fault: faults.Fault | None, held: list[tuple[str, str]]) -> Reply:
        backend = self.backend
        try:
            backend.catch_up()
            if self.scope is None:
                placeholder = await faults.before(fault)
                return placeholder or await self.handler(backend, Ctx(request, Principal("", "")))
            ctx = Ctx(request, authenticate(backend, request, self.scope))
            if self.keyed:
                ctx.key = _reserve(backend, request, ctx.account_id, held)
                # Read before any injected delay: a client that gives up meanwhile does not stop the work.
                ctx.body = await read_body(request)
            placeholder = await faults.before(fault)
            return placeholder or await self.handler(backend, ctx)
        except ApiError as exc:
            return Reply.error(exc)


async def _drain(request: Request) -> None:
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_REQUEST_BYTES:
                return
    except (RuntimeError, ClientDisconnect):  # already consumed, or the client is gone
        return


def _reserve(backend: Backend, request: Request, account_id: str, held: list[tuple[str, str]]) -> str:
    key = request.headers.get("idempotency-key")
    if key is None or not _KEY_RE.fullmatch(key):
        raise ApiError(400, "idempotency_key_invalid",
                       "The Idempotency-Key header must be 16-255 characters of A-Z a-z 0-9 . _ : -.")
    slot = (account_id, key)
    if slot in backend.in_flight:
        raise ApiError(409, "idempotency_in_flight",
                       "A request with this Idempotency-Key is still being processed; query its status.")
    backend.in_flight.add(slot)
    held.append(slot)
    return key


# -- helpers -------------------------------------------------------------------------------------
def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def field_id(body: dict[str, Any], name: str) -> str:
    value = body[name]
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise invalid_request(f"{name} must be 1-128 characters of A-Z a-z 0-9 . _ : -.")
    return value


def own_run(backend: Backend, account_id: str, run_id: str) -> RunRecord:
    rec = backend.store.run(run_id) if _ID_RE.fullmatch(run_id) else None
    if rec is None or rec.account_id != account_id:
        raise ApiError(404, "run_not_found", "No such run for this account.")
    return rec


def _own_run(backend: Backend, ctx: Ctx) -> RunRecord:
    return own_run(backend, ctx.account_id, ctx.path("run_id"))


def no_restart_proposed(rec: RunRecord) -> ApiError:
    return ApiError(422, "validation_rejected", f"Run {rec.run_id} has no pending restart proposal: the backend "
                    "proposes a restart only after a loss spike, and each proposal is decided once.",
                    reason="no_restart_proposed")


def manifest_and_booking(store: Store, account_id: str, booking_id: str, encoded: str,
                         digest: str) -> tuple[bytes, sqlite3.Row]:
    """A plan's or a create's manifest bytes, which must hash to `digest`, and the account's booking (its
    eligibility is the caller's to judge, at its own reading of the clock)."""
    try:
        manifest_bytes = base64.b64decode(encoded, validate=True)
    except ValueError:
        raise ApiError(422, "digest_mismatch", "manifest_b64 is not standard base64.",
                       reason="invalid_base64") from None
    if sha256_hex(manifest_bytes) != digest:
        raise ApiError(422, "digest_mismatch", "The SHA-256 of manifest_b64 is not manifest_sha256.")
    booking = store.booking(booking_id)
    if booking is None or booking["account_id"] != account_id:
        raise ApiError(404, "booking_not_found", "No such booking for this account.")
    return manifest_bytes, booking


def eligibility(row: sqlite3.Row, now: float) -> tuple[bool, str | None]:
    if row["state"] != "completed":
        return False, str(row["state"])
    if row["term_ends_at"] <= now:
        return False, "expired"
    return True, None


def _own_confirmation(backend: Backend, ref: str, account_id: str) -> sqlite3.Row:
    row = backend.store.confirmation(ref) if _ID_RE.fullmatch(ref) else None
    if row is None or row["account_id"] != account_id:
        raise ApiError(404, "confirmation_not_found", "No such confirmation for this account.")
    return row


def _usable(conf: sqlite3.Row, now: float) -> None:
    if conf["consumed_at"] is not None:
        raise ApiError(409, "confirmation_consumed", "The confirmation has already been used.")
    if conf["expires_at"] <= now:
        raise ApiError(410, "confirmation_expired", "The confirmation has expired.")


def confirmation_view(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "ref": row["ref"], "account_id": row["account_id"], "action": row["action"],
        "booking_id": row["booking_id"], "run_id": row["run_id"], "manifest_sha256": row["manifest_sha256"],
        "max_cost_usd": row["max_cost_usd"], "expires_at": rfc3339(row["expires_at"]),
        "consumed": row["consumed_at"] is not None,
    }


# -- handlers ------------------------------------------------------------------------------------
async def capabilities(backend: Backend, ctx: Ctx) -> Reply:
    return Reply(200, backend.capabilities())


async def origin_proof_answer(backend: Backend, ctx: Ctx) -> Reply:
    """`GET /v1/origin-proof?nonce=N&token_handle=H` (no credential): proof that this listener is the
    backend of the token with handle H, for the address the request arrived on (the socket's local
    address, never a header). See ito_training_mcp/backend/origin_proof.py."""
    nonce, handle = (ctx.request.query_params.get(name) for name in ("nonce", "token_handle"))
    if nonce is None or handle is None or not _DIGEST_RE.fullmatch(nonce) or not _DIGEST_RE.fullmatch(handle):
        raise invalid_request("nonce and token_handle must each be 64 lowercase hex characters.")
    row = backend.store.token_by_handle(handle)
    if row is None:
        raise ApiError(404, "token_unknown", "This backend issued no token with that handle.")
    server = ctx.request.scope.get("server")
    if not server:
        raise ApiError(500, "internal_error", "The address this request arrived on is unknown.")
    where = origin_proof.authority(str(server[0]), int(server[1]))
    return Reply(200, {"proof": origin_proof.proof(bytes.fromhex(row["token_sha256"]), nonce, where)})


async def me(backend: Backend, ctx: Ctx) -> Reply:
    return Reply(200, {"account_id": ctx.account_id})


async def booking_eligibility(backend: Backend, ctx: Ctx) -> Reply:
    booking_id = ctx.path("id")
    row = backend.store.booking(booking_id) if _ID_RE.fullmatch(booking_id) else None
    if row is None or row["account_id"] != ctx.account_id:
        raise ApiError(404, "booking_not_found", "No such booking for this account.")
    now = backend.store.clock()
    eligible, reason = eligibility(row, now)
    return Reply(200, {
        "booking_id": row["booking_id"], "account_id": row["account_id"], "eligible": eligible, "reason": reason,
        "gpu_topology": {"gpu": row["gpu"], "nodes": row["nodes"], "gpus_per_node": row["gpus_per_node"]},
        "region": row["region"], "fabric": row["fabric"], "term_ends_at": rfc3339(row["term_ends_at"]),
        "checked_at": rfc3339(now + row["checked_at_offset_s"]),
    })


async def get_confirmation(backend: Backend, ctx: Ctx) -> Reply:
    return Reply(200, confirmation_view(_own_confirmation(backend, ctx.path("ref"), ctx.account_id)))


async def runs_by_key(backend: Backend, ctx: Ctx) -> Reply:
    key = ctx.request.query_params.get("idempotency_key")
    if key is None or not _KEY_RE.fullmatch(key):
        raise invalid_request("The idempotency_key query parameter must be 16-255 characters of A-Z a-z 0-9 . _ : -.")
    rec = backend.store.run_for_key(ctx.account_id, key)
    return Reply(200, {"runs": [] if rec is None else [rec.public(rfc3339)]})


async def create_run(backend: Backend, ctx: Ctx) -> Reply:
    body = parse_object(ctx.body)
    only_keys(body, CREATE_FIELDS)
    booking_id, ref = field_id(body, "booking_id"), field_id(body, "confirmation_ref")
    digest, encoded = body["manifest_sha256"], body["manifest_b64"]
    if not isinstance(digest, str) or not _DIGEST_RE.fullmatch(digest):
        raise invalid_request("manifest_sha256 must be 64 lowercase hex characters.")
    if not isinstance(encoded, str):
        raise invalid_request("manifest_b64 must be a string.")
    # No await from here on: checks and the transaction are atomic w.r.t. other requests.
    store, account_id = backend.store, ctx.account_id
    fingerprint = sha256_hex(f"{booking_id}\n{digest}")
    existing = store.key_record(account_id, ctx.key)
    if existing is not None:
        replayed = store.run(existing["run_id"])
        if existing["action"] != "training.create" or existing["fingerprint"] != fingerprint or replayed is None:
            raise ApiError(422, "idempotency_conflict",
                           "This Idempotency-Key was used for a different request; use the original request.")
        return Reply(200, replayed.public(rfc3339))
    manifest_bytes, booking = manifest_and_booking(store, account_id, booking_id, encoded, digest)
    now = store.clock()
    eligible, reason = eligibility(booking, now)
    if not eligible:
        raise ApiError(403, "booking_not_eligible", "The booking is not eligible for training.", reason=reason)
    conf = _own_confirmation(backend, ref, account_id)
    _usable(conf, now)
    if conf["action"] != "training.create" or conf["booking_id"] != booking_id:
        raise ApiError(422, "confirmation_mismatch", "The confirmation is for another action or booking.")
    if conf["manifest_sha256"] != digest:
        raise ApiError(422, "digest_mismatch", "The confirmation is for a different manifest digest.")
    account = store.account(account_id)
    assert account is not None  # a token's account always exists (foreign key)
    manifest = policy.validate(manifest_bytes, booking, account, conf["max_cost_usd"])
    plan, names = policy.plan_for(manifest, booking)
    rec = RunRecord(
        run_id=new_id("run"), account_id=account_id, booking_id=booking_id, manifest_sha256=digest,
        idempotency_key=ctx.key, state="queued", stages=curriculum.new_stages(names, plan.suite), plan=plan,
        created_at=now, updated_at=now, advanced_at=now,
    )
    rec.new_logs.append((None, f"run queued with {len(names)} stage(s): {' -> '.join(names)}"))
    with store.tx() as conn:
        if not store.consume_confirmation(conn, ref, rec.run_id, now):
            raise ApiError(409, "confirmation_consumed", "The confirmation has already been used.")
        store.insert_run(conn, rec)
        store.insert_key(conn, account_id, ctx.key, action="training.create", fingerprint=fingerprint,
                         run_id=rec.run_id, response=None, now=now)
    return Reply(201, rec.public(rfc3339))


async def get_run(backend: Backend, ctx: Ctx) -> Reply:
    return Reply(200, _own_run(backend, ctx).public(rfc3339))


def _log_params(request: Request) -> tuple[int, int]:
    cursor, limit = request.query_params.get("cursor") or None, request.query_params.get("limit")
    after = 0
    if cursor is not None:
        match = _CURSOR_RE.fullmatch(cursor)
        if match is None:
            raise invalid_request("cursor is malformed; pass back next_cursor unchanged.")
        after = int(match.group(1))
    size = LOG_LIMIT_DEFAULT
    if limit is not None:
        if not _LIMIT_RE.fullmatch(limit) or not 1 <= int(limit) <= LOG_LIMIT_MAX:
            raise invalid_request(f"limit must be an integer from 1 to {LOG_LIMIT_MAX}.")
        size = int(limit)
    return after, size


async def run_logs(backend: Backend, ctx: Ctx) -> Reply:
    rec = _own_run(backend, ctx)
    after, limit = _log_params(ctx.request)
    rows = backend.store.log_page(rec.run_id, after, limit + 1)
    page = rows[:limit]
    lines = [{"ts": rfc3339(r["ts"]), "stage": r["stage"], "message": r["message"]} for r in page]
    next_cursor = f"log-{page[-1]['id']}" if len(rows) > limit else None
    return Reply(200, {"lines": lines, "next_cursor": next_cursor})


async def run_metrics(backend: Backend, ctx: Ctx) -> Reply:
    return Reply(200, lifecycle.metrics(_own_run(backend, ctx), rfc3339))


async def run_checkpoints(backend: Backend, ctx: Ctx) -> Reply:
    rec = _own_run(backend, ctx)
    return Reply(200, {"checkpoints": [
        {"checkpoint_id": c.checkpoint_id, "step": c.step, "created_at": rfc3339(c.created_at),
         "size_bytes": c.size_bytes, "uri": c.uri}
        for c in backend.store.checkpoints(rec.run_id)
    ]})


def _run_action(action: str) -> Handler:
    """Cancel, cleanup and restart: same key/confirmation rules as create, bound to the run (a restart's
    confirmation also to the backend's proposal)."""

    async def handler(backend: Backend, ctx: Ctx) -> Reply:
        body = parse_object(ctx.body)
        only_keys(body, ("confirmation_ref",))
        ref = field_id(body, "confirmation_ref")
        store = backend.store
        rec = _own_run(backend, ctx)
        fingerprint = sha256_hex(f"{action}\n{rec.run_id}")
        existing = store.key_record(ctx.account_id, ctx.key)
        if existing is not None:
            if existing["action"] != action or existing["fingerprint"] != fingerprint:
                raise ApiError(422, "idempotency_conflict",
                               "This Idempotency-Key was used for a different request; use the original request.")
            if existing["response"] is not None:
                return Reply(200, json.loads(existing["response"]))
            return Reply(200, rec.public(rfc3339))
        now = store.clock()
        conf = _own_confirmation(backend, ref, ctx.account_id)
        _usable(conf, now)
        if conf["action"] != action or conf["run_id"] != rec.run_id:
            raise ApiError(422, "confirmation_mismatch", "The confirmation is for another action or run.")
        response: dict[str, Any] | None = None
        if action == "training.cancel":
            if rec.state not in lifecycle.CANCELLABLE_STATES:
                raise ApiError(409, "run_not_cancellable", f"A run in state {rec.state} cannot be cancelled.")
            lifecycle.cancel(rec, now)
        elif action == "training.restart":
            proposal = rec.proposal
            if proposal is None:
                raise no_restart_proposed(rec)
            if conf["proposal_id"] != proposal["proposal_id"]:
                raise ApiError(422, "confirmation_mismatch", "The confirmation is for another restart proposal.")
            lifecycle.restart(rec, proposal["proposal_id"], now)
        else:
            if not rec.terminal:
                raise ApiError(422, "validation_rejected", "Cancel the run or let it finish before cleanup.",
                               reason="run_active")
            response = {"run_id": rec.run_id, "cleaned": lifecycle.cleanup(rec), "booking_untouched": True}
        with store.tx() as conn:
            if not store.consume_confirmation(conn, ref, rec.run_id, now):
                raise ApiError(409, "confirmation_consumed", "The confirmation has already been used.")
            store.save_run(conn, rec, now)
            # Store what this request answered, so a replay with the same key gets the same result
            # even after the run has moved on (e.g. a cancel replayed after cleanup).
            answer = response if response is not None else rec.public(rfc3339)
            store.insert_key(conn, ctx.account_id, ctx.key, action=action, fingerprint=fingerprint,
                             run_id=rec.run_id, response=answer, now=now)
        return Reply(200, answer)

    return handler


def routes(backend: Backend) -> list[Route]:
    table: list[tuple[str, str, Handler, str | None, bool]] = [
        ("GET", "/v1/capabilities", capabilities, None, False),
        ("GET", origin_proof.PROOF_PATH, origin_proof_answer, None, False),
        ("GET", "/v1/me", me, READ, False),
        ("GET", "/v1/bookings/{id}/training-eligibility", booking_eligibility, READ, False),
        ("GET", "/v1/confirmations/{ref}", get_confirmation, READ, False),
        ("GET", "/v1/training-runs", runs_by_key, READ, False),
        ("POST", "/v1/training-runs", create_run, WRITE, True),
        ("GET", "/v1/training-runs/{run_id}", get_run, READ, False),
        ("GET", "/v1/training-runs/{run_id}/logs", run_logs, READ, False),
        ("GET", "/v1/training-runs/{run_id}/metrics", run_metrics, READ, False),
        ("GET", "/v1/training-runs/{run_id}/checkpoints", run_checkpoints, READ, False),
        ("POST", "/v1/training-runs/{run_id}/cancel", _run_action("training.cancel"), WRITE, True),
        ("POST", "/v1/training-runs/{run_id}/cleanup", _run_action("training.cleanup"), WRITE, True),
        ("POST", "/v1/training-runs/{run_id}/restart", _run_action("training.restart"), WRITE, True),
    ]
    # One Route per (method, path): Starlette prefers a full match over a path-only one.
    return [
        Route(path, endpoint=V1Route(backend, f"{method} {path}", handler, scope=scope, keyed=keyed), methods=[method])
        for method, path, handler, scope, keyed in table
    ]
