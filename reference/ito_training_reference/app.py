"""`create_app`: the reference backend as one Starlette application.

Routes: the public `/v1` API (public.py) and the operator API under `/operator` (operator.py,
behind its guard). A small ASGI middleware records every `/v1` call (method, path, status,
fault) for tests: never headers, never bodies.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import plans, public, reviews, run_clock
from .desk import pages as desk_pages
from .errors import ApiError, not_found
from .faults import install_log_filter
from .operator import OperatorApi, OperatorGuard
from .state import RECENT_SIGN_IN_S, Backend, DeskSettings
from .store import Store
from .wire import JSON_TYPE, Reply

MIN_OPERATOR_TOKEN_CHARS = 16
MAX_AUTO_ADVANCE_S = 3600.0
MAX_TTL_S = 7 * 86400.0


class RequestLog:
    """Appends an entry when a /v1 request arrives (status null) and fills in the status sent."""

    def __init__(self, app: ASGIApp, backend: Backend) -> None:
        self.app, self.backend = app, backend

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope["path"]).startswith("/v1"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        key = headers.get(b"idempotency-key")
        entry: dict[str, object] = {
            "method": scope["method"], "path": scope["path"],
            "query": bytes(scope.get("query_string", b"")).decode("latin-1")[:1024],
            "idempotency_key": None if key is None else key.decode("latin-1")[:255],
            "route": None, "fault": None, "status": None,
        }
        scope["ito.request_log"] = entry
        self.backend.requests.append(entry)

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            await send(message)

        await self.app(scope, receive, recording_send)


def _reply(reply: Reply) -> Response:
    return Response(reply.content(), status_code=reply.status,
                    headers={"Cache-Control": "no-store", **reply.headers}, media_type=JSON_TYPE)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 404:
        return _reply(Reply.error(not_found()))
    if status == 405:
        return _reply(Reply.error(ApiError(405, "method_not_allowed", "Method not allowed on this path.")))
    return _reply(Reply.error(ApiError(status, "http_error", "The request could not be handled.")))


async def _client_gone(request: Request, exc: Exception) -> Response:
    """The client left (or its body deadline passed) mid-request: nobody to answer; no error log."""
    return Response(status_code=400)  # never sent: the connection is already gone


async def _internal_error(request: Request, exc: Exception) -> Response:
    return _reply(Reply.error(ApiError(500, "internal_error", "The reference backend hit an internal error.")))


def _public_url(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value)
    if (parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password
            or parts.query or parts.fragment or parts.path not in ("", "/") or re.search(r"[\x00-\x20\x7f]", value)):
        raise ValueError("public_url must be an http(s) origin such as https://desk.example")
    return value.rstrip("/")


def create_app(
    db_path: str, *, operator_token: str, auto_advance_s: float | None = None, public_url: str | None = None,
    request_ttl_s: float = reviews.REQUEST_TTL_S, confirmation_ttl_s: float = reviews.CONFIRMATION_TTL_S,
    plan_retention_s: float = reviews.PLAN_RETENTION_S, recent_sign_in_s: float = RECENT_SIGN_IN_S,
    clock: Callable[[], float] | None = None, interrupt_every_steps: int | None = None,
    allow_operator_bearer: bool = False,
) -> Starlette:
    """Build the app over the SQLite database at `db_path` (created if missing).

    `public_url` is the origin people use to reach this backend (review and sign-in links); by
    default it is the address each connection came in on. The two TTLs bound how long a pending
    confirmation request stays open and how long a confirmation made at the desk stays usable.
    `plan_retention_s` is how long a plan's manifest bytes are kept once its request was decided
    or expired; `recent_sign_in_s` how recent a desk sign-in must be to Confirm. `clock` (epoch
    seconds; default the real time) lets tests move time. `auto_advance_s` starts the run clock
    (run_clock.py): one stage per that many seconds; `interrupt_every_steps` interrupts every run
    once per that many model steps (the detection and resume times are `lifecycle.DETECT_S` and
    `RESUME_S`). `allow_operator_bearer` accepts the bare operator token as a bearer on the operator API
    (each use logged); by default only signed requests are.
    """
    for name, ttl in (("request_ttl_s", request_ttl_s), ("confirmation_ttl_s", confirmation_ttl_s)):
        if not (math.isfinite(ttl) and -MAX_TTL_S <= ttl <= MAX_TTL_S):
            raise ValueError(f"{name} must be a finite number of seconds up to {MAX_TTL_S}")
    for name, span in (("plan_retention_s", plan_retention_s), ("recent_sign_in_s", recent_sign_in_s)):
        if not (math.isfinite(span) and 0 <= span <= MAX_TTL_S):
            raise ValueError(f"{name} must be a finite number of seconds from 0 to {MAX_TTL_S}")
    if len(operator_token) < MIN_OPERATOR_TOKEN_CHARS:
        raise ValueError(f"operator_token must be at least {MIN_OPERATOR_TOKEN_CHARS} characters")
    if auto_advance_s is not None and not (
        math.isfinite(auto_advance_s) and 0 < auto_advance_s <= MAX_AUTO_ADVANCE_S
    ):
        raise ValueError(f"auto_advance_s must be in (0, {MAX_AUTO_ADVANCE_S}]")
    if interrupt_every_steps is not None and not 1 <= interrupt_every_steps <= 10**9:
        raise ValueError("interrupt_every_steps must be an integer from 1 to 1000000000")
    install_log_filter()
    store = Store(db_path) if clock is None else Store(db_path, clock)
    backend = Backend(store=store, operator_token=operator_token, allow_operator_bearer=allow_operator_bearer,
                      auto_advance_s=auto_advance_s,
                      interrupt_every_steps=interrupt_every_steps, public_url=_public_url(public_url),
                      reviews=reviews.Settings(request_ttl_s=request_ttl_s, confirmation_ttl_s=confirmation_ttl_s,
                                               plan_retention_s=plan_retention_s),
                      desk=DeskSettings(recent_sign_in_s=recent_sign_in_s))
    operator_app = OperatorGuard(backend, OperatorApi(backend).router())
    app = Starlette(
        routes=[*public.routes(backend), *plans.routes(backend), *desk_pages.routes(backend),
                Mount("/operator", app=operator_app)],
        middleware=[Middleware(RequestLog, backend=backend)],
        exception_handlers={HTTPException: _http_error, ClientDisconnect: _client_gone, Exception: _internal_error},
        lifespan=lambda _app: run_clock.running(backend),
    )
    app.state.backend = backend
    return app
