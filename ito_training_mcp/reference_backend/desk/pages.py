"""The desk's routes, mounted at `/desk`, and the checks every request passes first.

Before any page: a request carrying an `Authorization` header is refused (API credentials can
never act here). Every POST must come from the desk's own pages: `Sec-Fetch-Site`, when the
browser sends it, must be same-origin; `Origin`, when sent and not "null", must be this desk's
origin (with `Referrer-Policy: no-referrer` browsers send "null" for their own forms); the body
is a small urlencoded form; and, once signed in, it must carry the session's CSRF token. Pages
need a session (cookie) except the sign-in page and the stylesheet. Another account's request or
run is a 404 exactly like a missing one. Every response carries the security headers of
`render.SECURITY_HEADERS` (strict CSP, no framing, no referrer, no caching).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from ...inputs import ID_PATTERN
from .. import reviews
from ..state import Backend
from ..store import rfc3339
from . import review, session
from .render import SECURITY_HEADERS, Markup, chart, definition_list, document, esc, form, h, join, link, table

_ID_RE = re.compile(ID_PATTERN)
MAX_FORM_BYTES = 8 * 1024
RECENT_DECIDED = 20
RECENT_LOG_LINES = 50
Endpoint = Callable[[Request], Awaitable[Response]]


class DeskError(Exception):
    """Answered as an HTML error page with this status; the text is fixed, never request content."""

    def __init__(self, status: int, title: str, message: str, *, retry_path: str | None = None) -> None:
        super().__init__(f"{status} {title}")
        self.status, self.title, self.message, self.retry_path = status, title, message, retry_path


def _html(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, media_type="text/html; charset=utf-8",
                    headers={**SECURITY_HEADERS, **(headers or {})})


def _error_page(exc: DeskError) -> Response:
    body = h('<div class="error-box"><p>{}</p></div>', exc.message)
    if exc.retry_path is not None:
        body = join([body, h('<p>Already signed in? A page opened from another site arrives without your session '
                             'cookie: <a href="{}">continue to this page</a>.</p>', exc.retry_path)])
    return _html(document(exc.title, body), exc.status)


def _redirect(path: str, headers: dict[str, str] | None = None) -> Response:
    return Response(status_code=303, headers={**SECURITY_HEADERS, "Location": path, **(headers or {})})


class DeskApp:
    """ASGI app for everything under /desk."""

    def __init__(self, backend: Backend) -> None:
        self.backend, self.store = backend, backend.store
        files = resources.files(__package__)
        self._static = {"desk.css": (files.joinpath("desk.css").read_bytes(), "text/css; charset=utf-8"),
                        "favicon.svg": (files.joinpath("favicon.svg").read_bytes(), "image/svg+xml")}
        routes: list[tuple[str, str, Endpoint]] = [
            ("GET", "/", self.pending),
            ("GET", "/sign-in/{secret}", self.sign_in_page),
            ("POST", "/sign-in/{secret}", self.sign_in),
            ("POST", "/sign-out", self.sign_out),
            ("GET", "/requests/{request_id}", self.request_page),
            ("POST", "/requests/{request_id}/confirm", self._decide(True)),
            ("POST", "/requests/{request_id}/decline", self._decide(False)),
            ("GET", "/runs", self.runs),
            ("GET", "/runs/{run_id}", self.run_page),
            ("GET", "/static/{name}", self.static),
        ]
        self.router = Router(routes=[Route(path, self._guarded(fn), methods=[method]) for method, path, fn in routes],
                             default=self._not_found)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - the backend serves no websockets
            return
        request = Request(scope, receive)
        try:
            self._screen(request)
            await self.router(scope, receive, send)
            return
        except DeskError as exc:
            response = _error_page(exc)
        except HTTPException as exc:
            response = _error_page(DeskError(exc.status_code, "Not available", "This page does not accept that."))
        await response(scope, receive, send)

    async def _not_found(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _error_page(DeskError(404, "Not found", "There is no such page."))(scope, receive, send)

    # -- checks every request passes ---------------------------------------------------------------
    def _origins(self, request: Request) -> set[str]:
        allowed = {f"{request.url.scheme}://{request.headers.get('host', '')}"}
        if self.backend.public_url:
            allowed.add(self.backend.public_url)
        return allowed

    def _screen(self, request: Request) -> None:
        if "authorization" in request.headers:
            raise DeskError(401, "API credentials refused",
                            "The desk does not accept API tokens or any Authorization header. A person signs in "
                            "with a single-use link from the operator.")
        if request.method == "POST":
            fetch_site = request.headers.get("sec-fetch-site")
            origin = request.headers.get("origin")
            if fetch_site is not None and fetch_site != "same-origin":
                raise DeskError(403, "Refused", "Forms are accepted only from the desk's own pages.")
            # Under Referrer-Policy: no-referrer browsers send "Origin: null" even on same-origin form posts,
            # so "null" proves nothing either way; Sec-Fetch-Site and the CSRF token decide then.
            if origin is not None and origin != "null" and origin not in self._origins(request):
                raise DeskError(403, "Refused", "Forms are accepted only from the desk's own pages.")

    def _guarded(self, fn: Endpoint) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            try:
                return await fn(request)
            except DeskError as exc:
                return _error_page(exc)
            except ClientDisconnect:
                return Response(status_code=400)  # never sent: the client is gone

        return endpoint

    def _session(self, request: Request) -> session.Session:
        found = session.session_for(self.store, request.cookies.get(session.COOKIE_NAME))
        if found is None:
            raise DeskError(401, "Not signed in",
                            "Sign in with the single-use link your operator gives you "
                            "(ito-training desk login-link --account ID).", retry_path=request.url.path)
        return found

    async def _form(self, request: Request) -> dict[str, str]:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/x-www-form-urlencoded":
            raise DeskError(400, "Bad form", "The form was not sent as a form.")
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_FORM_BYTES):
            raise DeskError(413, "Form too large", "The form is larger than the desk accepts.")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                raise DeskError(413, "Form too large", "The form is larger than the desk accepts.")
        try:
            fields = parse_qs(body.decode("ascii"), keep_blank_values=True, strict_parsing=False, max_num_fields=8)
        except (UnicodeDecodeError, ValueError):
            raise DeskError(400, "Bad form", "The form could not be read.") from None
        if any(len(values) != 1 for values in fields.values()):
            raise DeskError(400, "Bad form", "The form repeats a field.")
        return {key: values[0] for key, values in fields.items()}

    async def _checked_post(self, request: Request) -> session.Session:
        current = self._session(request)
        fields = await self._form(request)
        if not session.csrf_ok(current, fields.get("csrf")):
            raise DeskError(403, "Refused", "The form's security token is missing or wrong. Reload the page and "
                                            "try again.")
        return current

    def _page(self, title: str, body: Markup, current: session.Session, status: int = 200) -> Response:
        return _html(document(title, body, account=current.account_id, csrf=current.csrf), status)

    # -- sign-in ------------------------------------------------------------------------------------
    async def sign_in_page(self, request: Request) -> Response:
        secret = str(request.path_params["secret"])
        state, account_id = session.link_state(self.store, secret)
        if state != "usable" or account_id is None:
            raise _link_error(state)
        body = h('<section><p>This single-use link signs you in to the desk as account <strong>{}</strong>. '
                 'Opening it did not use it; signing in does.</p>'
                 '<form method="post" action="{}"><button type="submit" class="primary">Sign in as {}</button>'
                 '</form></section>', account_id, f"/desk/sign-in/{secret}", account_id)
        return _html(document("Sign in", body))

    async def sign_in(self, request: Request) -> Response:
        secret = str(request.path_params["secret"])
        await self._form(request)
        previous = session.session_for(self.store, request.cookies.get(session.COOKIE_NAME))
        started = session.sign_in(self.store, secret)
        if not isinstance(started, session.Session):
            raise _link_error(started)
        if previous is not None:
            session.sign_out(self.store, previous)
        https = request.url.scheme == "https" or (self.backend.public_url or "").startswith("https://")
        secure = "; Secure" if https else ""
        cookie = (f"{session.COOKIE_NAME}={started.secret}; Path=/desk; HttpOnly; SameSite=Strict; "
                  f"Max-Age={int(started.expires_at - self.store.clock())}{secure}")
        return _redirect("/desk/", {"Set-Cookie": cookie})

    async def sign_out(self, request: Request) -> Response:
        current = await self._checked_post(request)
        session.sign_out(self.store, current)
        cookie = f"{session.COOKIE_NAME}=; Path=/desk; HttpOnly; SameSite=Strict; Max-Age=0"
        return _html(document("Signed out", Markup("<p>You are signed out.</p>")), headers={"Set-Cookie": cookie})

    # -- requests -----------------------------------------------------------------------------------
    def _own_request(self, request: Request, current: session.Session) -> Any:
        request_id = str(request.path_params["request_id"])
        row = reviews.request(self.store, request_id) if _ID_RE.fullmatch(request_id) else None
        if row is None or row["account_id"] != current.account_id:
            raise DeskError(404, "Not found", "There is no such request for your account.")
        return row

    async def pending(self, request: Request) -> Response:
        current = self._session(request)
        now = self.store.clock()
        pending = reviews.list_requests(self.store, account_id=current.account_id, status="pending")
        decided = [r for r in reviews.list_requests(self.store, account_id=current.account_id)
                   if reviews.status_of(r, now) != "pending"][:RECENT_DECIDED]

        def rows(found: list[Any]) -> list[tuple[object, ...]]:
            return [(link(f"/desk/requests/{r['request_id']}", r["request_id"]), _action(r["action"]),
                     h("<code>{}</code>", r["run_id"] or r["booking_id"]), review.money(r["max_cost_usd"]),
                     review.status_badge(reviews.status_of(r, now)), rfc3339(r["expires_at"])) for r in found]

        header = ["Request", "Asks to", "Run / booking", "Up to", "Status", "Expires"]
        body = join([
            h("<p>Requests from agents acting for account <strong>{}</strong>. Open one to review exactly what "
              "would happen, then confirm or decline it.</p>", current.account_id),
            h("<h2>Waiting for you</h2><section>{}</section>", table(header, rows(pending), empty="Nothing waiting.")),
            h("<h2>Recently decided</h2><section>{}</section>", table(header, rows(decided), empty="None yet.")),
        ])
        return self._page("Pending requests", body, current)

    async def request_page(self, request: Request) -> Response:
        current = self._session(request)
        row = self._own_request(request, current)
        now = self.store.clock()
        status = reviews.status_of(row, now)
        if row["action"] == "training.create":
            content, confirmable = review.create_review(self.store, row)
        else:
            content, confirmable = review.run_review(self.store, row)
        base = f"/desk/requests/{row['request_id']}"
        if status == "pending":
            actions = [form(f"{base}/decline", current.csrf, "Decline", css="decline")]
            if confirmable:
                actions.insert(0, form(f"{base}/confirm", current.csrf, "Confirm", css="confirm"))
            decision = h('<p>Expires {} unless you decide.</p><div class="actions">{}</div>',
                         rfc3339(row["expires_at"]), join(actions))
        elif status == "confirmed":
            decision = h('<div class="ref-box"><p>You confirmed this on {}. Give the agent this confirmation '
                         'reference:</p><p><code id="confirmation-ref">{}</code></p><p>It records your decision for '
                         'exactly this request; it expires {} and works once.</p></div>',
                         rfc3339(row["decided_at"]), row["confirmation_ref"], _confirmation_expiry(self.store, row))
        elif status == "declined":
            decision = h('<div class="notice">You declined this on {}. Nothing was confirmed.</div>',
                         rfc3339(row["decided_at"]))
        else:
            decision = Markup('<div class="notice">This request expired undecided. The agent must ask again.</div>')
        body = join([
            definition_list([("Request", h("<code>{}</code>", row["request_id"])), ("Asks to", _action(row["action"])),
                             ("Status", review.status_badge(status)), ("Asked", rfc3339(row["created_at"]))]),
            decision, content,
            decision if status == "pending" else Markup(""),
        ])
        return self._page("Review request", body, current)

    def _decide(self, confirm: bool) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            current = await self._checked_post(request)
            request_id = str(request.path_params["request_id"])
            if not _ID_RE.fullmatch(request_id):
                raise DeskError(404, "Not found", "There is no such request for your account.")
            if confirm:
                row = self._own_request(request, current)
                maker = review.create_review if row["action"] == "training.create" else review.run_review
                if not maker(self.store, row)[1]:
                    raise DeskError(409, "Cannot confirm", "This request cannot be confirmed; decline it instead.")
            try:
                reviews.decide(self.store, request_id, confirm=confirm, via="desk", by=current.session_id,
                               account_id=current.account_id, settings=self.backend.reviews)
            except reviews.DecisionError as exc:
                raise _decision_error(exc.kind) from None
            return _redirect(f"/desk/requests/{request_id}")

        return endpoint

    # -- runs ---------------------------------------------------------------------------------------
    async def runs(self, request: Request) -> Response:
        current = self._session(request)
        found = self.store.runs_of(current.account_id)
        body = table(["Run", "Booking", "State", "Started", "Updated"], [
            (link(f"/desk/runs/{r.run_id}", r.run_id), h("<code>{}</code>", r.booking_id),
             review.status_badge(r.state), rfc3339(r.created_at), rfc3339(r.updated_at)) for r in found],
            empty="No runs yet.")
        return self._page("Runs", h("<section>{}</section>", body), current)

    async def run_page(self, request: Request) -> Response:
        current = self._session(request)
        run_id = str(request.path_params["run_id"])
        rec = self.store.run(run_id) if _ID_RE.fullmatch(run_id) else None
        if rec is None or rec.account_id != current.account_id:
            raise DeskError(404, "Not found", "There is no such run for your account.")
        points = [(int(p["step"]), p["loss"], float(p["goodput"])) for p in self.store.metric_history(rec.run_id)]
        logs = self.store.rows("SELECT ts, stage, message FROM run_logs WHERE run_id = ? ORDER BY id DESC LIMIT ?",
                               (rec.run_id, RECENT_LOG_LINES))
        checkpoints = self.store.checkpoints(rec.run_id)
        body = join([
            h("<section>{}</section>", definition_list([
                ("Run", h("<code>{}</code>", rec.run_id)), ("State", review.status_badge(rec.state)),
                ("Booking", h("<code>{}</code>", rec.booking_id)),
                ("Manifest SHA-256", h('<code class="digest">{}</code>', rec.manifest_sha256)),
                ("Step", rec.step), ("Loss", "—" if rec.loss is None else rec.loss),
                ("Goodput", rec.goodput), ("Cost so far", review.money(rec.cost_usd_to_date)),
            ])),
            h("<h2>Stage gates</h2><section>{}</section>", review.stages_table(rec)),
            h("<h2>Loss and goodput</h2><section>{}</section>", chart(points)),
            h("<h2>Checkpoints</h2><section>{}</section>", table(["Step", "Written", "Size", "Location"], [
                (c.step, rfc3339(c.created_at), f"{c.size_bytes:,} bytes", h("<code>{}</code>", c.uri))
                for c in checkpoints], empty="No checkpoints yet.")),
            h("<h2>Latest log lines</h2><section>{}</section>", table(["Time", "Stage", "Message"], [
                (rfc3339(line["ts"]), line["stage"] or "", line["message"]) for line in logs], empty="No log lines.")),
        ])
        return self._page(f"Run {rec.run_id}", body, current)

    async def static(self, request: Request) -> Response:
        found = self._static.get(str(request.path_params["name"]))
        if found is None:
            raise DeskError(404, "Not found", "There is no such page.")
        return Response(found[0], media_type=found[1], headers=SECURITY_HEADERS)


def _action(action: str) -> Markup:
    return esc({"training.create": "start training", "training.cancel": "cancel a run",
                "training.cleanup": "clean up a run"}.get(action, action))


def _confirmation_expiry(store: Any, row: Any) -> str:
    conf = store.confirmation(row["confirmation_ref"]) if row["confirmation_ref"] else None
    return "—" if conf is None else rfc3339(conf["expires_at"])


def _link_error(state: str) -> DeskError:
    if state == "used":
        return DeskError(410, "Link already used", "This sign-in link has already been used. Links work once; ask "
                                                   "your operator for a new one.")
    if state == "expired":
        return DeskError(410, "Link expired", "This sign-in link has expired. Ask your operator for a new one.")
    return DeskError(400, "Invalid link", "This is not a valid sign-in link.")


def _decision_error(kind: str) -> DeskError:
    if kind == "decided":
        return DeskError(409, "Already decided", "This request has already been confirmed or declined.")
    if kind == "expired":
        return DeskError(410, "Expired", "This request expired undecided. The agent must ask again.")
    return DeskError(404, "Not found", "There is no such request for your account.")


def routes(backend: Backend) -> list[Any]:
    """`/desk` and everything under it."""
    from starlette.routing import Mount

    async def to_root(request: Request) -> Response:
        return _redirect("/desk/")

    return [Route("/desk", to_root, methods=["GET"]), Mount("/desk", app=DeskApp(backend))]
