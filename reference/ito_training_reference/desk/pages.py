"""The desk's routes, mounted at `/desk`.

Every request first passes `guard.screen` (no API credentials; POSTs only from the desk's own
pages in a browser). Pages need a session except the sign-in page and the static files; a page
opened without one answers 401 and remembers (in a short-lived cookie) where the person wanted
to go, so signing in returns them there. Every form carries the page's single-use form token;
Confirm also needs a recent sign-in (`session.DeskSettings.recent_sign_in_s`). Another account's
request or run is a 404 exactly like a missing one. Every response carries the security headers
of `render.SECURITY_HEADERS` (strict CSP, no framing, origin-only referrer, no caching).

A review is rendered in a worker thread (`_review`): parsing and escaping a mebibyte of manifest
takes a good fraction of a second, and the event loop keeps answering every other request
meanwhile. At most `RENDERS_AT_ONCE` renders run at a time; further ones wait their turn.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Mount, Route, Router
from starlette.types import Receive, Scope, Send

from ito_training_mcp.gates.inputs import ID_PATTERN

from .. import reviews
from ..state import Backend
from ..store import rfc3339
from . import decision, facts, review, session
from .guard import PageError, error_page, html, is_https, origin_of, read_form, redirect, screen, set_cookie
from .render import SECURITY_HEADERS, Markup, chart, definition_list, document, form, h, join, link, table

_ID_RE = re.compile(ID_PATTERN)
RENDERS_AT_ONCE = 2
RECENT_DECIDED = 20
RECENT_LOG_LINES = 50
RETURN_COOKIE_S = 30 * 60
SIGN_OUT = "/desk/sign-out"
DECLINE_PLANS = "/desk/decline-plans"
Endpoint = Callable[[Request], Awaitable[Response]]


class DeskApp:
    """ASGI app for everything under /desk."""

    def __init__(self, backend: Backend) -> None:
        self.backend, self.store, self.settings = backend, backend.store, backend.desk
        files = resources.files(__package__)
        self._static = {"desk.css": (files.joinpath("desk.css").read_bytes(), "text/css; charset=utf-8"),
                        "favicon.svg": (files.joinpath("favicon.svg").read_bytes(), "image/svg+xml")}
        routes: list[tuple[str, str, Endpoint]] = [
            ("GET", "/", self.pending),
            ("GET", "/sign-in/{secret}", self.sign_in_page),
            ("POST", "/sign-in/{secret}", self.sign_in),
            ("POST", "/sign-out", self.sign_out),
            ("POST", "/decline-plans", self.decline_plans),
            ("GET", "/requests/{request_id}", self.request_page),
            ("POST", "/requests/{request_id}/confirm", self._decide(True)),
            ("POST", "/requests/{request_id}/decline", self._decide(False)),
            ("GET", "/runs", self.runs),
            ("GET", "/runs/{run_id}", self.run_page),
            ("GET", "/static/{name}", self.static),
        ]
        self.router = Router(routes=[Route(path, self._guarded(fn), methods=[method]) for method, path, fn in routes],
                             default=self._not_found)
        self._renders: anyio.CapacityLimiter | None = None  # made on first use, inside the event loop

    async def _review(self, row: Any) -> review.Review:
        """The review of a request, built off the event loop (see the module docstring)."""
        if self._renders is None:
            self._renders = anyio.CapacityLimiter(RENDERS_AT_ONCE)
        return await anyio.to_thread.run_sync(review.review_of, self.store, row, limiter=self._renders)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # pragma: no cover - the backend serves no websockets
            return
        request = Request(scope, receive)
        try:
            screen(request, self.backend)
            self.backend.catch_up()  # the run clock: no page shows a run behind it
            await self.router(scope, receive, send)
            return
        except PageError as exc:
            response = error_page(exc)
        except HTTPException as exc:
            response = error_page(PageError(exc.status_code, "Not available", "This page does not accept that."))
        await response(scope, receive, send)

    async def _not_found(self, scope: Scope, receive: Receive, send: Send) -> None:
        await error_page(PageError(404, "Not found", "There is no such page."))(scope, receive, send)

    def _guarded(self, fn: Endpoint) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            try:
                return await fn(request)
            except PageError as exc:
                return error_page(exc)
            except ClientDisconnect:
                return Response(status_code=400)  # never sent: the client is gone

        return endpoint

    # -- sessions, cookies and forms ----------------------------------------------------------------
    def _https(self, request: Request) -> bool:
        return is_https(request, self.backend)

    def _return_cookie(self, request: Request, path: str) -> dict[str, str]:
        """Remember where the person wanted to go, for after sign-in (a desk page path only)."""
        target = session.safe_next(path)
        if target is None:
            return {}
        _, name = session.cookie_names(self._https(request))
        value = session.sign_return(self.backend.desk_key, origin_of(request, self.backend), target)
        return {"Set-Cookie": set_cookie(name, value, RETURN_COOKIE_S, self._https(request))}

    def _session(self, request: Request) -> session.Session:
        name, _ = session.cookie_names(self._https(request))
        found = session.session_for(self.store, request.cookies.get(name), self.settings.session_idle_s,
                                    origin=origin_of(request, self.backend))
        if found is None:
            remember = self._return_cookie(request, request.url.path) if request.method == "GET" else {}
            raise PageError(
                401, "Not signed in",
                "You are not signed in here. Open the single-use sign-in link your operator gives you; after "
                "signing in you come back to this page.",
                extra=Markup('<p class="hint">For the operator: <code>ito-training desk login-link --account '
                             'ACCOUNT</code> mints a sign-in link for one account.</p>'),
                retry_path=request.url.path, headers=remember)
        return found

    async def _checked_post(self, request: Request) -> session.Session:
        """A POST from a page of this session: its single-use form token, for exactly this action."""
        current = self._session(request)
        fields = await read_form(request)
        if not session.use_form_token(self.store, current, fields.get("csrf"), request.url.path):
            raise PageError(403, "Refused", "The form's security token is missing, wrong or already used. Open the "
                                            "page again and decide there.")
        return current

    def _token(self, current: session.Session, *actions: str) -> str:
        return session.mint_form_token(self.store, current, [SIGN_OUT, *actions])

    def _page(self, title: str, body: Markup, current: session.Session, token: str, status: int = 200,
              headers: dict[str, str] | None = None) -> Response:
        return html(document(title, body, account=current.account_id, token=token), status, headers)

    # -- sign-in ------------------------------------------------------------------------------------
    async def sign_in_page(self, request: Request) -> Response:
        secret = str(request.path_params["secret"])
        state, account_id = session.link_state(self.store, secret)
        if state != "usable" or account_id is None:
            raise _link_error(state)
        target = session.safe_next(request.query_params.get("next"))
        hidden = [("next", target)] if target is not None else []
        body = h('<section><p>This single-use link signs you in to the desk as account <strong>{}</strong>. '
                 'Opening it did not use it; signing in does.</p>{}</section>', account_id,
                 form(f"/desk/sign-in/{secret}", None, f"Sign in as {account_id}", css="primary", hidden=hidden))
        return html(document("Sign in", body))

    async def sign_in(self, request: Request) -> Response:
        secret = str(request.path_params["secret"])
        fields = await read_form(request)
        https = self._https(request)
        name, return_name = session.cookie_names(https)
        origin = origin_of(request, self.backend)
        previous = session.session_for(self.store, request.cookies.get(name), self.settings.session_idle_s,
                                       origin=origin, touch=False)
        started = session.sign_in(self.store, secret, self.settings.session_ttl_s, origin=origin)
        if not isinstance(started, session.Session):
            raise _link_error(started)
        if previous is not None:
            session.sign_out(self.store, previous)
        target = (session.safe_next(fields.get("next"))
                  or session.signed_return(self.backend.desk_key, origin, request.cookies.get(return_name))
                  or "/desk/")
        response = redirect(target)
        response.headers.append("Set-Cookie", set_cookie(
            name, started.secret, round(started.expires_at - self.store.clock()), https))
        if return_name in request.cookies:
            response.headers.append("Set-Cookie", set_cookie(return_name, "", 0, https))
        return response

    async def sign_out(self, request: Request) -> Response:
        current = await self._checked_post(request)
        session.sign_out(self.store, current)
        https = self._https(request)
        name, _ = session.cookie_names(https)
        return html(document("Signed out", Markup("<p>You are signed out.</p>")),
                    headers={"Set-Cookie": set_cookie(name, "", 0, https)})

    # -- requests -----------------------------------------------------------------------------------
    def _own_request(self, request: Request, current: session.Session) -> Any:
        request_id = str(request.path_params["request_id"])
        row = reviews.request(self.store, request_id) if _ID_RE.fullmatch(request_id) else None
        if row is None or row["account_id"] != current.account_id:
            raise PageError(404, "Not found", "There is no such request for your account.")
        return row

    async def pending(self, request: Request) -> Response:
        current = self._session(request)
        now = self.store.clock()
        pending = reviews.list_requests(self.store, account_id=current.account_id, status="pending")
        decided = [r for r in reviews.list_requests(self.store, account_id=current.account_id)
                   if reviews.status_of(r, now) != "pending"][:RECENT_DECIDED]

        def rows(found: list[Any]) -> list[tuple[object, ...]]:
            return [(link(f"/desk/requests/{r['request_id']}", r["request_id"]), _action(r["action"]),
                     h("<code>{}</code>", r["run_id"] or r["booking_id"]),
                     h("<code>{}…</code>", (r["manifest_sha256"] or "")[:12]), facts.money(r["max_cost_usd"]),
                     facts.status_badge(reviews.status_of(r, now)), rfc3339(r["created_at"]),
                     rfc3339(r["expires_at"])) for r in found]

        header = ["Request", "Asks to", "Run / booking", "Manifest", "Up to", "Status", "Asked", "Expires"]
        plans = sum(r["action"] == "training.create" for r in pending)
        token = self._token(current, DECLINE_PLANS) if plans else self._token(current)
        decline_all = Markup("") if not plans else h(
            '<section class="decline-all"><p>{} training plan(s) are waiting. Too many to review, or not yours to '
            'start? Decline every waiting training plan at once; requests to cancel or clean up a run stay here for '
            'you to decide.</p>{}</section>', plans,
            form(DECLINE_PLANS, token, f"Decline all {plans} waiting training plans", css="decline"))
        body = join([
            h("<p>Requests from agents acting for account <strong>{}</strong>. Open one to review exactly what "
              "would happen, then confirm or decline it at the end of its page.</p>", current.account_id),
            h("<h2>Waiting for you</h2><section>{}</section>", table(header, rows(pending), empty="Nothing waiting.")),
            decline_all,
            h("<h2>Recently decided</h2><section>{}</section>", table(header, rows(decided), empty="None yet.")),
        ])
        return self._page("Pending requests", body, current, token)

    async def decline_plans(self, request: Request) -> Response:
        """Decline every pending training plan of this account in one action (cancel and cleanup requests
        stay pending): a person facing a flood of plans clears it without opening each one."""
        current = await self._checked_post(request)
        reviews.decline_pending_plans(self.store, current.account_id, via="desk", by=current.session_id)
        return redirect("/desk/")

    async def request_page(self, request: Request) -> Response:
        current = self._session(request)
        row = self._own_request(request, current)
        now = self.store.clock()
        status = reviews.status_of(row, now)
        found = await self._review(row)
        base = f"/desk/requests/{row['request_id']}"
        headers: dict[str, str] = {}
        intro = Markup("")
        if status == "pending":
            recent = current.recent(now, self.settings.recent_sign_in_s)
            offer_confirm = found.confirmable and recent
            token = self._token(current, f"{base}/decline", *([f"{base}/confirm"] if offer_confirm else []))
            estimate_usd = _estimate_usd(self.store, row)
            block = decision.pending(row, token=token, confirmable=found.confirmable, recent=recent,
                                     current=current, window_s=self.settings.recent_sign_in_s,
                                     warnings=found.warnings, estimate_usd=estimate_usd)
            intro = Markup('<p class="hint">Read everything on this page first: Confirm and Decline are at the end, '
                           'after the facts (<a href="#decision">jump there</a>).</p>')
            if found.confirmable and not recent:
                headers = self._return_cookie(request, base)
        else:
            token = self._token(current)
            block = decision.decided(self.store, row, status)
        body = join([
            definition_list([("Request", h("<code>{}</code>", row["request_id"])), ("Asks to", _action(row["action"])),
                             ("Status", facts.status_badge(status)), ("Asked", rfc3339(row["created_at"]))]),
            intro, found.content, block,
        ])
        page = await anyio.to_thread.run_sync(
            functools.partial(document, "Review request", body, account=current.account_id, token=token),
            limiter=self._renders)
        return html(page, 200, headers)

    def _decide(self, confirm: bool) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            current = await self._checked_post(request)
            request_id = str(request.path_params["request_id"])
            if not _ID_RE.fullmatch(request_id):
                raise PageError(404, "Not found", "There is no such request for your account.")
            if confirm:
                row = self._own_request(request, current)
                if not current.recent(self.store.clock(), self.settings.recent_sign_in_s):
                    base = f"/desk/requests/{request_id}"
                    raise PageError(403, "Sign in again to confirm", "Nothing was confirmed: your sign-in is not "
                                    "recent enough to confirm.",
                                    extra=decision.sign_in_again(current, self.settings.recent_sign_in_s),
                                    headers=self._return_cookie(request, base))
                if not (await self._review(row)).confirmable:
                    raise PageError(409, "Cannot confirm", "This request cannot be confirmed; decline it instead.")
            try:
                reviews.decide(self.store, request_id, confirm=confirm, via="desk", by=current.session_id,
                               account_id=current.account_id, settings=self.backend.reviews)
            except reviews.DecisionError as exc:
                raise _decision_error(exc.kind) from None
            return redirect(f"/desk/requests/{request_id}")

        return endpoint

    # -- runs ---------------------------------------------------------------------------------------
    async def runs(self, request: Request) -> Response:
        current = self._session(request)
        found = self.store.runs_of(current.account_id)
        body = table(["Run", "Booking", "State", "Cost so far", "Started", "Updated"], [
            (link(f"/desk/runs/{r.run_id}", r.run_id), h("<code>{}</code>", r.booking_id),
             facts.status_badge(r.state), facts.money(r.cost_usd_to_date), rfc3339(r.created_at),
             rfc3339(r.updated_at)) for r in found], empty="No runs yet.")
        return self._page("Runs", h("<section>{}</section>", body), current, self._token(current))

    async def run_page(self, request: Request) -> Response:
        current = self._session(request)
        run_id = str(request.path_params["run_id"])
        rec = self.store.run(run_id) if _ID_RE.fullmatch(run_id) else None
        if rec is None or rec.account_id != current.account_id:
            raise PageError(404, "Not found", "There is no such run for your account.")
        points = [(int(p["step"]), p["loss"], float(p["goodput"])) for p in self.store.metric_history(rec.run_id)]
        logs = self.store.rows("SELECT ts, stage, message FROM run_logs WHERE run_id = ? ORDER BY id DESC LIMIT ?",
                               (rec.run_id, RECENT_LOG_LINES))
        checkpoints = self.store.checkpoints(rec.run_id)
        rl = facts.rl_split(rec)
        body = join([
            self._proposal_box(rec, current),
            h("<section>{}</section>", definition_list([
                ("Run", h("<code>{}</code>", rec.run_id)), ("State", facts.status_badge(rec.state)),
                ("Booking", h("<code>{}</code>", rec.booking_id)),
                ("Manifest SHA-256", h('<code class="digest">{}</code>', rec.manifest_sha256)),
                ("Step", rec.step), ("Loss", "—" if rec.loss is None else rec.loss),
                ("Goodput", rec.goodput), ("Interruption rate", h("{} per hour", rec.interruption_rate)),
                ("Cost so far", facts.run_cost(rec)),
            ])),
            h("<h2>Stage gates</h2><section>{}</section>", facts.stages(rec)),
            h("<h2>Loss and goodput</h2><section>{}</section>", chart(points, facts.chart_marks(rec))),
            h("<h2>Interruptions</h2><section>{}</section>", facts.interruptions(rec)),
            h("<h2>Parallelism and precision</h2><section>{}</section>", facts.parallelism(rec.plan.layout)),
            Markup("") if rl is None else h("<h2>Reinforcement learning</h2><section>{}</section>", rl),
            h("<h2>Checkpoints</h2><section>{}</section>", table(["Step", "Written", "Size", "Location"], [
                (c.step, rfc3339(c.created_at), f"{c.size_bytes:,} bytes", h("<code>{}</code>", c.uri))
                for c in checkpoints], empty="No checkpoints yet.")),
            h("<h2>Latest log lines</h2><section>{}</section>", table(["Time", "Stage", "Message"], [
                (rfc3339(line["ts"]), line["stage"] or "", line["message"]) for line in logs], empty="No log lines.")),
        ])
        return self._page(f"Run {rec.run_id}", body, current, self._token(current))

    def _proposal_box(self, rec: Any, current: session.Session) -> Markup:
        """A pending restart proposal, first on the run's page, with its request when the agent opened one."""
        found = rec.proposal
        if found is None:
            return Markup("")
        asked = self.store.row(
            "SELECT request_id FROM confirmation_requests WHERE account_id = ? AND run_id = ? AND proposal_id = ? "
            "AND status = 'pending' AND expires_at > ? ORDER BY created_at DESC LIMIT 1",
            (current.account_id, rec.run_id, found["proposal_id"], self.store.clock()))
        where = (h('<p>The agent asked for your decision: <a href="/desk/requests/{}">review the restart request</a>.'
                   '</p>', asked["request_id"]) if asked is not None else
                 Markup("<p>No restart request yet: the agent asks for one (request_confirmation with "
                        "training.restart); it then appears under Pending requests.</p>"))
        return h('<div class="notice" id="proposal"><strong>Restart proposed.</strong>{}{}</div>',
                 facts.proposal(rec, found), where)

    async def static(self, request: Request) -> Response:
        found = self._static.get(str(request.path_params["name"]))
        if found is None:
            raise PageError(404, "Not found", "There is no such page.")
        return Response(found[0], media_type=found[1], headers=SECURITY_HEADERS)


def _estimate_usd(store: Any, row: Any) -> str | None:
    plan = reviews.plan(store, row["plan_id"]) if row["plan_id"] else None
    found = None if plan is None else facts.estimate_of(plan)
    return None if found is None else str(found["usd"])


def _action(action: str) -> Markup:
    return h("{}", {"training.create": "start training", "training.cancel": "cancel a run",
                    "training.cleanup": "clean up a run", "training.restart": "restart a run"}.get(action, action))


def _link_error(state: str) -> PageError:
    if state == "used":
        return PageError(410, "Link already used", "This sign-in link has already been used. Links work once; ask "
                                                   "your operator for a new one.")
    if state == "expired":
        return PageError(410, "Link expired", "This sign-in link has expired. Ask your operator for a new one.")
    return PageError(400, "Invalid link", "This is not a valid sign-in link.")


def _decision_error(kind: str) -> PageError:
    if kind == "decided":
        return PageError(409, "Already decided", "This request has already been confirmed or declined.")
    if kind == "expired":
        return PageError(410, "Expired", "This request expired undecided. The agent must ask again.")
    return PageError(404, "Not found", "There is no such request for your account.")


def routes(backend: Backend) -> list[Any]:
    """`/desk` and everything under it."""

    async def to_root(request: Request) -> Response:
        return redirect("/desk/")

    return [Route("/desk", to_root, methods=["GET"]), Mount("/desk", app=DeskApp(backend))]
