"""Operator API (`/operator/...`): the human's desk actions, and the test/demo controls.

Not part of the canonical API. It answers only a loopback client presenting the operator token
(compared in constant time); anything else gets the same 404 as an unknown path, so the API's
existence is not disclosed.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ito_training_mcp.gates.inputs import ID_PATTERN

from . import lifecycle, policy, reviews
from .desk import session as desk_session
from .errors import ApiError, invalid_request, not_found
from .lifecycle import LifecycleError, NotRunning, RunPaused, RunRecord, StageNotAhead, UnknownStage
from .operator_auth import NONCE_PATH, RESPONSE_HEADER, SCHEME, Verifier, parse
from .public import READ, WRITE, confirmation_view
from .state import Backend
from .store import new_id, rfc3339
from .wire import JSON_TYPE, Reply, bearer, is_loopback, json_object, only_keys, send_reply

log = logging.getLogger("uvicorn.error")  # the server's error log (stderr), within its log budget
_ID_RE = re.compile(ID_PATTERN)
_MONEY_RE = re.compile(r"^(0|[1-9][0-9]{0,8})(\.[0-9]{1,2})?$")
_LABEL_RE = re.compile(r"^[A-Za-z0-9._:/+-]{1,64}$")
_EVAL_KEY_RE = re.compile(r"^[A-Za-z0-9._:/-]{1,64}$")
_STAGE_RE = re.compile(r"^[a-z_]{1,64}$")
MAX_LISTED = 1000
BOOKING_STATES = ("completed", "expired", "revoked", "released", "incomplete")
ACTIONS = ("training.create", "training.cancel", "training.cleanup", "training.restart")
TEN_YEARS_S = 10 * 365 * 86400


MAX_SIGNED_BODY = 1024 * 1024


class OperatorGuard:
    """Loopback client and a request signed with the operator token (operator_auth.py), or the bare
    operator bearer token when the backend allows it (`Backend.allow_operator_bearer`, each use logged);
    otherwise a 404 indistinguishable from a missing path. `GET /operator/nonce` answers any loopback
    client: a nonce to sign one request with."""

    def __init__(self, backend: Backend, app: ASGIApp) -> None:
        self.backend, self.app = backend, app
        self.verifier = Verifier(backend.operator_token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if not is_loopback(client[0] if client else None):
            await send_reply(send, Reply.error(not_found()))
            return
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        if scope["method"] == "GET" and raw_path == NONCE_PATH and not scope.get("query_string"):
            await send_reply(send, Reply(200, {"nonce": self.verifier.issue()}))
            return
        request = Request(scope)
        header = request.headers.get("authorization", "")
        if header.startswith(SCHEME + " "):
            await self._signed(scope, receive, send, request, raw_path, parse(header))
            return
        token = bearer(request)
        if (token is None or not self.backend.allow_operator_bearer
                or not hmac.compare_digest(token.encode(), self.backend.operator_token.encode())):
            await send_reply(send, Reply.error(not_found()))
            return
        log.warning("operator API: %s %s authorised by the bare operator bearer token (--allow-operator-bearer); "
                    "the token travels with every such request: prefer signed requests (ito-training desk)",
                    scope["method"], scope["path"][:200])
        await self.app(scope, receive, send)

    async def _signed(self, scope: Scope, receive: Receive, send: Send, request: Request, raw_path: str,
                      signed: tuple[str, str] | None) -> None:
        """A signed request: the nonce is used up before anything else (so a made-up header, or an
        announced body too large, costs nothing), then the body is read and the signature checked; the
        answer carries a signature of its own over the nonce, the status and the body."""
        length = request.headers.get("content-length", "0")
        if (signed is None or not self.verifier.take(signed[0])
                or not length.isascii() or not length.isdigit() or int(length) > MAX_SIGNED_BODY):
            await send_reply(send, Reply.error(not_found()))
            return
        nonce, sig = signed
        body = await _body(receive)
        query = scope.get("query_string") or b""
        target = raw_path + ("?" + query.decode("latin-1") if query else "")
        server = scope.get("server")
        if body is None or not self.verifier.verify(nonce, sig, scope["method"], target,
                                                    (str(server[0]), int(server[1])) if server else None, body):
            await send_reply(send, Reply.error(not_found()))
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def signing_send(message: Message) -> None:  # operator answers are small JSON
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] == "http.response.body" and start is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                content = b"".join(chunks)
                mac = self.verifier.sign_response(nonce, int(start["status"]), content)
                headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                headers += [(b"content-length", str(len(content)).encode()),
                            (RESPONSE_HEADER.encode(), mac.encode())]
                await send({**start, "headers": headers})
                await send({"type": "http.response.body", "body": content, "more_body": False})
                return
            await send(message)

        await self.app(scope, _replay(body), signing_send)


async def _body(receive: Receive) -> bytes | None:
    """The whole request body, or None past MAX_SIGNED_BODY."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_SIGNED_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


# -- field validation ----------------------------------------------------------------------------
def _id(body: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise invalid_request(f"{name} must be 1-128 characters of A-Z a-z 0-9 . _ : -.")
    return value


def _number(body: dict[str, Any], name: str, low: float, high: float, default: float | None) -> float | None:
    value = body.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise invalid_request(f"{name} must be a number.")
    if not low <= value <= high:
        raise invalid_request(f"{name} must be between {low} and {high}.")
    return float(value)


def _int(body: dict[str, Any], name: str, low: int, high: int, default: int) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid_request(f"{name} must be an integer from {low} to {high}.")
    return value


def _label(body: dict[str, Any], name: str, default: str) -> str:
    value = body.get(name, default)
    if not isinstance(value, str) or not _LABEL_RE.fullmatch(value):
        raise invalid_request(f"{name} must be 1-64 characters of A-Z a-z 0-9 . _ : / + -.")
    return value


def _money(body: dict[str, Any], name: str, default: str | None = None) -> str:
    value = body.get(name, default)
    if not isinstance(value, str) or not _MONEY_RE.fullmatch(value):
        raise invalid_request(f'{name} must be a decimal string such as "1500.00".')
    return f"{Decimal(value):.2f}"


def _labels(body: dict[str, Any], name: str, default: tuple[str, ...]) -> list[str]:
    value = body.get(name, list(default))
    if (not isinstance(value, list) or not 0 < len(value) <= 32
            or not all(isinstance(v, str) and 0 < len(v) <= 256 for v in value)):
        raise invalid_request(f"{name} must be a list of 1-32 short strings.")
    return list(value)


def _run_view(rec: RunRecord) -> dict[str, Any]:
    return rec.public(rfc3339)


def booking_view(row: Any) -> dict[str, Any]:
    return {
        "booking_id": row["booking_id"], "account_id": row["account_id"], "state": row["state"], "gpu": row["gpu"],
        "nodes": row["nodes"], "gpus_per_node": row["gpus_per_node"], "region": row["region"],
        "fabric": row["fabric"], "term_ends_at": rfc3339(row["term_ends_at"]),
        "checked_at_offset_s": row["checked_at_offset_s"], "created_at": rfc3339(row["created_at"]),
        "updated_at": rfc3339(row["updated_at"]), "updated_at_epoch": row["updated_at"],
    }


def account_view(row: Any) -> dict[str, Any]:
    return {
        "account_id": row["account_id"], "budget_limit_usd": row["budget_limit_usd"],
        "allowed_data_schemes": json.loads(row["data_schemes"]),
        "allowed_checkpoint_prefixes": json.loads(row["checkpoint_prefixes"]), "created_at": rfc3339(row["created_at"]),
    }


def token_view(row: Any, now: float) -> dict[str, Any]:
    """Never the token itself (the store does not have it)."""
    expired = row["expires_at"] is not None and row["expires_at"] <= now
    return {
        "token_id": row["token_id"], "account_id": row["account_id"], "scopes": str(row["scopes"]).split(),
        "expires_at": None if row["expires_at"] is None else rfc3339(row["expires_at"]),
        "revoked": row["revoked_at"] is not None, "expired": expired, "created_at": rfc3339(row["created_at"]),
    }


def _decision_error(kind: str) -> ApiError:
    if kind == "not_found":
        return ApiError(404, "request_not_found", "No such confirmation request.")
    if kind == "expired":
        return ApiError(410, "request_expired", "The confirmation request has expired undecided.")
    return ApiError(409, "request_decided", "The confirmation request was already decided.")


class OperatorApi:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.store = backend.store

    def _account(self, body: dict[str, Any]) -> str:
        account_id = _id(body, "account_id")
        assert account_id is not None
        if self.store.account(account_id) is None:
            raise ApiError(404, "account_not_found", "No such account.")
        return account_id

    async def accounts(self, request: Request) -> Reply:
        body = await json_object(request, allow_empty=True)
        only_keys(body, (), ("account_id", "budget_limit_usd", "allowed_data_schemes", "allowed_checkpoint_prefixes"))
        account_id = _id(body, "account_id", required=False) or new_id("acct")
        created = self.store.create_account(
            account_id,
            budget_limit_usd=_money(body, "budget_limit_usd", policy.DEFAULT_BUDGET_LIMIT_USD),
            data_schemes=_labels(body, "allowed_data_schemes", policy.DEFAULT_DATA_SCHEMES),
            checkpoint_prefixes=_labels(body, "allowed_checkpoint_prefixes", policy.DEFAULT_CHECKPOINT_PREFIXES),
        )
        if not created:
            raise ApiError(409, "account_exists", "That account already exists.")
        return Reply(201, {"account_id": account_id})

    async def tokens(self, request: Request) -> Reply:
        body = await json_object(request)
        only_keys(body, ("account_id",), ("scopes", "expires_in_s"))
        account_id = self._account(body)
        scopes = body.get("scopes", [READ, WRITE])
        if not isinstance(scopes, list) or not all(s in (READ, WRITE) for s in scopes):
            raise invalid_request(f"scopes must be a list drawn from {READ} and {WRITE}.")
        expires_in_s = _number(body, "expires_in_s", -TEN_YEARS_S, TEN_YEARS_S, None)
        token_id, token = self.store.create_token(account_id, sorted(set(scopes)), expires_in_s)
        return Reply(201, {"token_id": token_id, "token": token})

    async def revoke(self, request: Request) -> Reply:
        token_id = str(request.path_params["token_id"])
        if not self.store.revoke_token(token_id):
            raise ApiError(404, "token_not_found", "No such token.")
        return Reply(200, {"token_id": token_id, "revoked": True})

    async def create_booking(self, request: Request) -> Reply:
        body = await json_object(request)
        only_keys(body, ("account_id",), ("booking_id", "state", "gpu", "nodes", "gpus_per_node", "region", "fabric",
                                          "term_ends_in_s", "checked_at_offset_s"))
        account_id = self._account(body)
        state = body.get("state", "completed")
        if state not in BOOKING_STATES:
            raise invalid_request(f"state must be one of {', '.join(BOOKING_STATES)}.")
        booking_id = _id(body, "booking_id", required=False) or new_id("bk")
        now = self.store.clock()
        term = _number(body, "term_ends_in_s", -TEN_YEARS_S, TEN_YEARS_S, 7 * 86400)
        offset = _number(body, "checked_at_offset_s", -30 * 86400, 86400, 0)
        assert term is not None
        assert offset is not None
        created = self.store.insert_booking({
            "booking_id": booking_id, "account_id": account_id, "state": state,
            "gpu": _label(body, "gpu", "H100-80GB"), "nodes": _int(body, "nodes", 1, 1024, 1),
            "gpus_per_node": _int(body, "gpus_per_node", 1, 16, 8), "region": _label(body, "region", "eu-central-1"),
            "fabric": _label(body, "fabric", "infiniband"), "term_ends_at": now + term, "checked_at_offset_s": offset,
        })
        if not created:
            raise ApiError(409, "booking_exists", "That booking already exists.")
        return Reply(201, booking_view(self.store.booking(booking_id)))

    async def get_booking(self, request: Request) -> Reply:
        row = self.store.booking(str(request.path_params["booking_id"]))
        if row is None:
            raise ApiError(404, "booking_not_found", "No such booking.")
        return Reply(200, booking_view(row))

    async def confirmations(self, request: Request) -> Reply:
        body = await json_object(request)
        only_keys(body, ("account_id", "action", "booking_id", "max_cost_usd"),
                  ("ref", "run_id", "manifest_sha256", "expires_in_s", "proposal_id"))
        account_id = self._account(body)
        if body["action"] not in ACTIONS:
            raise invalid_request(f"action must be one of {', '.join(ACTIONS)}.")
        digest = body.get("manifest_sha256")
        if digest is not None and (not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest)):
            raise invalid_request("manifest_sha256 must be 64 lowercase hex characters.")
        expires_in_s = _number(body, "expires_in_s", -TEN_YEARS_S, TEN_YEARS_S, 600)
        assert expires_in_s is not None
        ref = _id(body, "ref", required=False) or new_id("cnf")
        created = self.store.insert_confirmation({
            "ref": ref, "account_id": account_id, "action": body["action"], "booking_id": _id(body, "booking_id"),
            "run_id": _id(body, "run_id", required=False), "manifest_sha256": digest,
            "max_cost_usd": _money(body, "max_cost_usd"), "expires_at": self.store.clock() + expires_in_s,
            "proposal_id": _id(body, "proposal_id", required=False),
        })
        if not created:
            raise ApiError(409, "confirmation_exists", "That confirmation ref already exists.")
        row = self.store.confirmation(ref)
        assert row is not None
        return Reply(201, confirmation_view(row))

    def _query_id(self, request: Request, name: str) -> str | None:
        value = request.query_params.get(name)
        if value is not None and not _ID_RE.fullmatch(value):
            raise invalid_request(f"{name} must be 1-128 characters of A-Z a-z 0-9 . _ : -.")
        return value

    async def list_accounts(self, request: Request) -> Reply:
        rows = self.store.rows("SELECT * FROM accounts ORDER BY created_at, account_id LIMIT ?", (MAX_LISTED,))
        return Reply(200, {"accounts": [account_view(r) for r in rows]})

    async def list_tokens(self, request: Request) -> Reply:
        account_id = self._query_id(request, "account_id")
        rows = self.store.rows(
            "SELECT * FROM tokens WHERE (? IS NULL OR account_id = ?) ORDER BY created_at, token_id LIMIT ?",
            (account_id, account_id, MAX_LISTED))
        return Reply(200, {"tokens": [token_view(r, self.store.clock()) for r in rows]})

    async def list_bookings(self, request: Request) -> Reply:
        account_id = self._query_id(request, "account_id")
        rows = self.store.rows(
            "SELECT * FROM bookings WHERE (? IS NULL OR account_id = ?) ORDER BY created_at, booking_id LIMIT ?",
            (account_id, account_id, MAX_LISTED))
        return Reply(200, {"bookings": [booking_view(r) for r in rows]})

    async def list_requests(self, request: Request) -> Reply:
        account_id = self._query_id(request, "account_id")
        status = request.query_params.get("status")
        if status is not None and status not in reviews.STATUSES:
            raise invalid_request(f"status must be one of {', '.join(reviews.STATUSES)}.")
        now, base = self.store.clock(), self.backend.base_url(request.scope)
        rows = reviews.list_requests(self.store, account_id=account_id, status=status)
        return Reply(200, {"requests": [reviews.operator_request_view(r, now, base) for r in rows]})

    def _decide(self, confirm: bool) -> Callable[[Request], Awaitable[Reply]]:
        async def endpoint(request: Request) -> Reply:
            body = await json_object(request, allow_empty=True)
            only_keys(body, (), ("decided_by",))
            by = _label(body, "decided_by", "operator")
            request_id = str(request.path_params["request_id"])
            try:
                row = reviews.decide(self.store, request_id, confirm=confirm, via="operator", by=by,
                                     settings=self.backend.reviews)
            except reviews.DecisionError as exc:
                raise _decision_error(exc.kind) from None
            return Reply(200, reviews.operator_request_view(row, self.store.clock(),
                                                            self.backend.base_url(request.scope)))

        return endpoint

    async def login_link(self, request: Request) -> Reply:
        body = await json_object(request)
        only_keys(body, ("account_id",))
        account_id = self._account(body)
        secret, expires_at = desk_session.mint_link(self.store, account_id)
        url = f"{self.backend.base_url(request.scope)}/desk/sign-in/{secret}"
        return Reply(201, {"account_id": account_id, "url": url, "expires_at": rfc3339(expires_at)})

    async def capabilities(self, request: Request) -> Reply:
        body = await json_object(request)
        only_keys(body, ("available", "operations"))
        operations = body["operations"]
        if not isinstance(body["available"], bool):
            raise invalid_request("available must be a boolean.")
        if (not isinstance(operations, list) or len(operations) > 32
                or not all(isinstance(o, str) and 0 < len(o) <= 64 for o in operations)):
            raise invalid_request("operations must be a list of at most 32 short strings.")
        self.store.put_setting("capabilities", {"available": body["available"], "operations": operations})
        return Reply(200, self.backend.capabilities())

    async def add_fault(self, request: Request) -> Reply:
        fault = self.backend.faults.add(await json_object(request))
        return Reply(201, {"fault_id": fault.fault_id})

    async def list_faults(self, request: Request) -> Reply:
        return Reply(200, {"faults": self.backend.faults.pending()})

    async def clear_faults(self, request: Request) -> Reply:
        return Reply(200, {"cleared": self.backend.faults.clear()})

    async def requests(self, request: Request) -> Reply:
        return Reply(200, {"requests": [dict(e) for e in list(self.backend.requests)]})

    async def clear_requests(self, request: Request) -> Reply:
        count = len(self.backend.requests)
        self.backend.requests.clear()
        return Reply(200, {"cleared": count})

    async def in_flight(self, request: Request) -> Reply:
        slots = sorted(self.backend.in_flight)
        return Reply(200, {"in_flight": [{"account_id": a, "idempotency_key": k} for a, k in slots]})

    async def runs(self, request: Request) -> Reply:
        self.backend.catch_up()
        return Reply(200, {"runs": [_run_view(r) for r in self.store.all_runs()]})

    async def tick(self, request: Request) -> Reply:
        """Step the run clock once, as of the store's clock (tests move an injected clock, then tick)."""
        return Reply(200, {"moved": self.backend.catch_up()})

    def _transition(self, change: Callable[[RunRecord], None]) -> Callable[[Request], Awaitable[Reply]]:
        async def endpoint(request: Request) -> Reply:
            try:
                rec = self.store.transition(str(request.path_params["run_id"]), change)
            except UnknownStage:
                raise ApiError(422, "stage_not_found", "The run has no stage of that name.") from None
            except NotRunning:
                raise ApiError(409, "run_not_running", "The run has no running stage of that kind (an "
                               "interruption needs a running stage; a loss spike, a training stage).") from None
            except RunPaused:
                raise ApiError(409, "run_paused", "The run's stage is paused on a restart proposal: only the "
                                                  "person's decision (or a cancel) moves it.") from None
            except StageNotAhead:
                raise ApiError(409, "stage_passed", "That stage has already passed.") from None
            except LifecycleError:
                raise ApiError(409, "run_terminal", "The run is in a terminal state.") from None
            if rec is None:
                raise ApiError(404, "run_not_found", "No such run.")
            return Reply(200, _run_view(rec))

        return endpoint

    async def fail_gate(self, request: Request) -> Reply:
        body = await json_object(request, allow_empty=True)
        only_keys(body, (), ("evals", "stage"))
        stage = body.get("stage")
        if stage is not None and (not isinstance(stage, str) or not _STAGE_RE.fullmatch(stage)):
            raise invalid_request("stage must be a stage name such as sft.")
        evals = body.get("evals")
        if evals is not None and (
            not isinstance(evals, dict) or len(evals) > 32
            or not all(isinstance(k, str) and _EVAL_KEY_RE.fullmatch(k) for k in evals)
            or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                       for v in evals.values())
        ):
            raise invalid_request("evals must map at most 32 short names to finite numbers.")
        clock = self.store.clock
        return await self._transition(lambda rec: lifecycle.fail_gate(rec, evals, stage, clock()))(request)

    async def interrupt(self, request: Request) -> Reply:
        body = await json_object(request, allow_empty=True)
        only_keys(body, (), ("detect_s", "resume_s"))
        detect = _number(body, "detect_s", 0, 86400, lifecycle.DETECT_S)
        resume = _number(body, "resume_s", 0, 86400, lifecycle.RESUME_S)
        assert detect is not None
        assert resume is not None
        clock = self.store.clock
        return await self._transition(lambda rec: lifecycle.interrupt(rec, clock(), detect, resume))(request)

    async def spike(self, request: Request) -> Reply:
        body = await json_object(request, allow_empty=True)
        only_keys(body, (), ("factor",))
        factor = _number(body, "factor", 1.5, 100, lifecycle.SPIKE_FACTOR)
        assert factor is not None
        clock = self.store.clock
        return await self._transition(lambda rec: lifecycle.spike(rec, clock(), factor))(request)

    def router(self) -> Router:
        clock, every = self.store.clock, self.backend.interrupt_every_steps
        table: list[tuple[str, str, Callable[[Request], Awaitable[Reply]]]] = [
            ("POST", "/accounts", self.accounts),
            ("GET", "/accounts", self.list_accounts),
            ("POST", "/tokens", self.tokens),
            ("GET", "/tokens", self.list_tokens),
            ("POST", "/tokens/{token_id}/revoke", self.revoke),
            ("POST", "/bookings", self.create_booking),
            ("GET", "/bookings", self.list_bookings),
            ("GET", "/bookings/{booking_id}", self.get_booking),
            ("POST", "/confirmations", self.confirmations),
            ("GET", "/confirmation-requests", self.list_requests),
            ("POST", "/confirmation-requests/{request_id}/confirm", self._decide(True)),
            ("POST", "/confirmation-requests/{request_id}/decline", self._decide(False)),
            ("POST", "/desk/login-links", self.login_link),
            ("PUT", "/capabilities", self.capabilities),
            ("POST", "/faults", self.add_fault),
            ("GET", "/faults", self.list_faults),
            ("DELETE", "/faults", self.clear_faults),
            ("GET", "/requests", self.requests),
            ("DELETE", "/requests", self.clear_requests),
            ("GET", "/in-flight", self.in_flight),
            ("GET", "/runs", self.runs),
            ("POST", "/runs/{run_id}/advance", self._transition(lambda rec: lifecycle.advance(rec, clock(), every))),
            ("POST", "/runs/{run_id}/fail-gate", self.fail_gate),
            ("POST", "/runs/{run_id}/finish", self._transition(lambda rec: lifecycle.finish(rec, clock(), every))),
            ("POST", "/runs/{run_id}/interrupt", self.interrupt),
            ("POST", "/runs/{run_id}/spike", self.spike),
            ("POST", "/clock/tick", self.tick),
        ]
        return Router(routes=[Route(path, _endpoint(fn), methods=[method]) for method, path, fn in table])


def _endpoint(fn: Callable[[Request], Awaitable[Reply]]) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            reply = await fn(request)
        except ApiError as exc:
            reply = Reply.error(exc)
        return Response(reply.content(), status_code=reply.status,
                        headers={"Cache-Control": "no-store", **reply.headers}, media_type=JSON_TYPE)

    return endpoint
