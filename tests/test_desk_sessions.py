"""Desk sessions over real HTTP, with the backend's clock moved by the test: the recent-sign-in
rule for Confirm, single-use form tokens, session lifetimes, the POST origin rule, and the return
to the page first opened after signing in (never anywhere else)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urlencode

import httpx
import pytest

from ito_training_reference import ReferenceBackend, state
from ito_training_reference.desk import session as desk_session

from .test_desk import Clock, Tenant, browser_headers, post_form, variant


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def rb(clock: Clock) -> Iterator[ReferenceBackend]:
    with ReferenceBackend(clock=clock) as backend:
        yield backend


@pytest.fixture
def tenant(rb: ReferenceBackend) -> Iterator[Tenant]:
    with Tenant.opened(rb) as opened:
        yield opened


def browser(rb: ReferenceBackend) -> httpx.Client:
    return httpx.Client(base_url=rb.url, trust_env=False, follow_redirects=False)


def sign_in(rb: ReferenceBackend, client: httpx.Client, account: str, **fields: str) -> httpx.Response:
    """Open a fresh sign-in link in `client` and submit its form (with `fields`, e.g. next)."""
    path = httpx.URL(rb.op.login_link(account)["url"]).path
    assert client.get(path).status_code == 200
    return post_form(client, path, fields)


def review(request_id: str) -> str:
    return f"/desk/requests/{request_id}"


# -- recent sign-in ---------------------------------------------------------------------------------
def test_confirm_needs_a_recent_sign_in_and_signing_in_again_returns_to_the_review(
        rb: ReferenceBackend, clock: Clock, tenant: Tenant) -> None:
    request_id = tenant.request_id()
    with browser(rb) as tab:
        assert sign_in(rb, tab, tenant.account_id).status_code == 303
        early = tab.get(review(request_id))
        assert 'class="confirm"' in early.text
        confirm_form = early.text  # a page opened while the sign-in was recent
        token = confirm_form.split('name="csrf" value="', 1)[1].split('"', 1)[0]

        clock.advance(state.RECENT_SIGN_IN_S + 1)  # 10 minutes and a second: the session itself lives on
        page = tab.get(review(request_id))
        assert page.status_code == 200
        decision = page.text.split('id="decision"')[1]
        assert 'class="confirm"' not in page.text and 'class="decline"' in decision
        assert "To confirm, sign in again" in decision and "last 10 minutes" in decision
        assert f"For the operator: <code>ito-training desk login-link --account {tenant.account_id}</code>" in decision
        assert re.fullmatch(rf"ito_desk_return={review(request_id)}\.[0-9a-f]{{32}}; Path=/desk; HttpOnly; "
                            r"SameSite=Strict; Max-Age=1800", page.headers["set-cookie"])  # signed by the desk

        # A Confirm form from before is refused now: nothing is confirmed without a recent sign-in.
        refused = post_form(tab, f"{review(request_id)}/confirm", {"csrf": token})
        assert refused.status_code == 403 and "Sign in again to confirm" in refused.text
        assert tenant.status(request_id) == "pending"

        # A fresh link from the operator, opened in the same browser: back to the review, Confirm offered.
        again = sign_in(rb, tab, tenant.account_id)
        assert again.status_code == 303 and again.headers["location"] == review(request_id)
        assert "ito_desk_return=;" in "".join(again.headers.get_list("set-cookie"))
        tab.cookies.delete("ito_desk_return")  # httpx keeps an emptied cookie: drop it as a browser would
        page = tab.get(review(request_id))
        forms = page.text.split('id="decision"')[1]
        token = forms.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        confirmed = post_form(tab, f"{review(request_id)}/confirm", {"csrf": token})
        assert confirmed.status_code == 303 and tenant.status(request_id) == "confirmed"


def test_declining_needs_no_fresh_sign_in_and_the_window_is_configurable() -> None:
    clock = Clock()
    with ReferenceBackend(clock=clock, recent_sign_in_s=60) as rb:
        account = rb.op.account()
        _, token = rb.op.token(account)
        booking = rb.op.booking(account)["booking_id"]
        with httpx.Client(base_url=rb.url, headers={"Authorization": f"Bearer {token}"}, trust_env=False) as api:
            t = Tenant(rb, account, token, booking, api)
            first, second = t.request_id(), t.request_id(variant(3))
            person = t.person().sign_in()
            assert 'class="confirm"' in person.get(review(first)).text
            clock.advance(61)
            page = person.get(review(first)).text
            assert 'class="confirm"' not in page and "last 1 minute," in page
            person.decline(second)
            assert t.status(second) == "declined"
    for bad in (-1.0, float("nan"), 8 * 86400.0):
        with pytest.raises(ValueError, match="recent_sign_in_s"), ReferenceBackend(recent_sign_in_s=bad):
            pass


# -- single-use form tokens -----------------------------------------------------------------------
def test_form_tokens_work_once_for_their_session_and_their_forms(rb: ReferenceBackend, tenant: Tenant) -> None:
    first, second = tenant.request_id(), tenant.request_id(variant(4))
    person, other = tenant.person().sign_in(), tenant.person().sign_in()
    stolen = person.forms(review(first))  # a copy of the page, say from a screenshot or another tab
    token = stolen[f"{review(first)}/decline"]["csrf"]
    assert token == stolen[f"{review(first)}/confirm"]["csrf"] == stolen["/desk/sign-out"]["csrf"]
    stored = rb.query("SELECT token_sha256, actions FROM desk_form_tokens")
    assert token not in str(stored)  # only its digest is kept
    # Not for another session of the same account, not for another request's forms.
    assert post_form(other.client, f"{review(first)}/decline", {"csrf": token}).status_code == 403
    assert post_form(person.client, f"{review(second)}/decline", {"csrf": token}).status_code == 403
    # Used once (the person declines on that page) ...
    assert post_form(person.client, f"{review(first)}/decline", {"csrf": token}).status_code == 303
    # ... it cannot be replayed, not even for the page's other forms.
    for action in (f"{review(first)}/confirm", f"{review(first)}/decline", "/desk/sign-out"):
        replayed = post_form(person.client, action, {"csrf": token})
        assert replayed.status_code == 403 and "already used" in replayed.text
    assert tenant.status(first) == "declined" and tenant.status(second) == "pending"
    # Signing out ends the session's unused tokens with it.
    spare = person.forms(review(second))[f"{review(second)}/confirm"]["csrf"]
    person.sign_out()
    assert rb.query("SELECT COUNT(*) AS n FROM desk_form_tokens WHERE token_sha256 = ?",
                    (desk_session._digest(spare),))[0]["n"] == 0


def test_form_tokens_per_session_are_bounded(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    first = person.form("/desk/", "/desk/sign-out")["csrf"]
    for _ in range(desk_session.MAX_FORM_TOKENS_PER_SESSION + 5):
        person.get("/desk/runs")
    session_id = rb.query("SELECT session_id FROM desk_sessions WHERE account_id = ? ORDER BY created_at DESC",
                          (tenant.account_id,))[0]["session_id"]
    count = rb.query("SELECT COUNT(*) AS n FROM desk_form_tokens WHERE session_id = ?", (session_id,))[0]["n"]
    assert count == desk_session.MAX_FORM_TOKENS_PER_SESSION
    assert post_form(person.client, "/desk/sign-out", {"csrf": first}).status_code == 403  # the oldest went first


# -- session lifetime -----------------------------------------------------------------------------
def test_sessions_end_when_idle_and_after_an_hour(rb: ReferenceBackend, clock: Clock, tenant: Tenant) -> None:
    with browser(rb) as idle:
        signed = sign_in(rb, idle, tenant.account_id)
        assert "Max-Age=3600" in signed.headers["set-cookie"]
        clock.advance(state.SESSION_IDLE_S - 5)
        assert idle.get("/desk/").status_code == 200  # activity keeps it going ...
        clock.advance(state.SESSION_IDLE_S - 5)
        assert idle.get("/desk/").status_code == 200
        clock.advance(state.SESSION_IDLE_S)  # ... a quarter of an hour without any ends it
        assert idle.get("/desk/").status_code == 401
    with browser(rb) as busy:
        sign_in(rb, busy, tenant.account_id)
        for _ in range(6):  # active every 10 minutes, but sessions end an hour after sign-in
            clock.advance(600)
            busy.get("/desk/")
        assert busy.get("/desk/").status_code == 401


# -- where POSTs may come from --------------------------------------------------------------------------
@pytest.mark.parametrize(("headers", "accepted"), [
    ({}, False),  # neither header: not a browser's form post
    ({"Origin": "null"}, False),
    ({"Origin": "ORIGIN"}, True),  # a browser that sends no Sec-Fetch-Site (plain http to a LAN host)
    ({"Sec-Fetch-Site": "same-origin"}, True),
    ({"Sec-Fetch-Site": "same-origin", "Origin": "null"}, True),
    ({"Sec-Fetch-Site": "same-origin", "Origin": "ORIGIN"}, True),
    ({"Sec-Fetch-Site": "same-site", "Origin": "ORIGIN"}, False),  # another port of this host
    ({"Sec-Fetch-Site": "none", "Origin": "ORIGIN"}, False),
    ({"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:1"}, False),
    ({"Origin": "http://localhost:1"}, False),
])
def test_posts_are_accepted_only_from_the_desks_own_pages(rb: ReferenceBackend, tenant: Tenant,
                                                          headers: dict[str, str], accepted: bool) -> None:
    request_id = tenant.request_id()
    person = tenant.person().sign_in()
    token = person.form(review(request_id), f"{review(request_id)}/decline")["csrf"]
    sent = {k: (str(person.client.base_url).rstrip("/") if v == "ORIGIN" else v) for k, v in headers.items()}
    response = post_form(person.client, f"{review(request_id)}/decline", {"csrf": token}, browser=False, **sent)
    assert response.status_code == (303 if accepted else 403), response.text
    assert tenant.status(request_id) == ("declined" if accepted else "pending")


# -- back to the page first opened ----------------------------------------------------------------------
def test_signing_in_returns_to_the_page_first_opened(rb: ReferenceBackend, tenant: Tenant) -> None:
    request_id = tenant.request_id()
    with browser(rb) as tab:
        first = tab.get(review(request_id))
        assert first.status_code == 401
        assert re.fullmatch(rf"ito_desk_return={review(request_id)}\.[0-9a-f]{{32}}; Path=/desk; HttpOnly; "
                            r"SameSite=Strict; Max-Age=1800", first.headers["set-cookie"])  # signed by the desk
        text = first.text
        assert "Open the single-use sign-in link your operator gives you" in text
        # The operator's command is labelled as the operator's, not shown as something the person runs.
        assert "For the operator: <code>ito-training desk login-link --account ACCOUNT</code>" in text
        signed = sign_in(rb, tab, tenant.account_id)
        assert signed.status_code == 303 and signed.headers["location"] == review(request_id)
    with browser(rb) as tab:  # nothing remembered: the pending list
        assert sign_in(rb, tab, tenant.account_id).headers["location"] == "/desk/"
    with browser(rb) as tab:  # a link that names where to go (?next=), carried by its form
        path = httpx.URL(rb.op.login_link(tenant.account_id)["url"]).path
        page = tab.get(path, params={"next": "/desk/runs"})
        assert '<input type="hidden" name="next" value="/desk/runs">' in page.text
        assert post_form(tab, path, {"next": "/desk/runs"}).headers["location"] == "/desk/runs"


HOSTILE_NEXT = [
    "https://evil.example/", "//evil.example/desk/", "/\\evil.example", "/desk/../v1/me", "/desk/requests/../../x",
    "/desk/requests/..", "/desk/requests/x?y=1", "/desk/requests/x#f", "javascript:alert(1)", "/desk/requests/a%2f..",
    "/desk/runs/x/y", "/v1/me", "/desk/sign-out", "/desk/sign-in/abc", "/desk/static/desk.css", " /desk/", "/desk",
    "/desk/requests/x\r\nSet-Cookie:a=b", "/desk/requests/\u202ex", "/desk/requests/" + "a" * 200, "",
]


@pytest.mark.parametrize("where", ["field", "cookie", "query"])
def test_the_return_path_never_leaves_the_desks_pages(rb: ReferenceBackend, tenant: Tenant, where: str) -> None:
    for hostile in HOSTILE_NEXT:
        assert desk_session.safe_next(hostile) is None, hostile
        if where == "cookie" and (any(c in hostile for c in "\r\n;") or not hostile.isascii()):
            continue  # not something a Cookie header can carry
        with browser(rb) as tab:
            path = httpx.URL(rb.op.login_link(tenant.account_id)["url"]).path
            if where == "query":
                page = tab.get(path, params={"next": hostile})
                assert page.status_code == 200 and 'name="next"' not in page.text, hostile
                continue
            fields = {"next": hostile} if where == "field" else {}
            headers = {"Content-Type": "application/x-www-form-urlencoded", **browser_headers(tab)}
            if where == "cookie":
                headers["Cookie"] = f"ito_desk_return={hostile}"
            response = tab.post(path, content=urlencode(fields).encode("ascii"), headers=headers)
            assert response.status_code == 303 and response.headers["location"] == "/desk/", hostile
