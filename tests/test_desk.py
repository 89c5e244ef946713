"""The desk over real HTTP: sign-in links, sessions, CSRF, API tokens refused, tenancy, review
pages, decisions, escaping, and the runs pages. The person is `rb.person(account)`: plain httpx
doing what a browser does (the real browser is in test_desk_browser.py)."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from ito_training_reference import DeskError, Person, ReferenceBackend, reviews
from ito_training_reference.desk import session as desk_session
from ito_training_reference.store import Store

from .test_reference_backend import DOC, MANIFEST, sha

HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY", "referrer-policy": "strict-origin", "cache-control": "no-store",
    "x-content-type-options": "nosniff",
}
HOSTILE = {
    "description": "rename \u202etxt.exe\u202c, isolate \u2066x\u2069, bell \u0007, esc \u001b[31mred\u001b[0m, "
                   "zero\u200bwidth, bom\ufeff, line\u2028sep, nbsp\u00a0here <script>alert(1)</script> & \"q\"\nok",
    "model": {**DOC["model"], "name": "org/\u202emodel</td><b>x"},
}
HIDDEN = ["\u202e", "\u202c", "\u2066", "\u2069", "\u0007", "\u001b", "\u200b", "\ufeff", "\u2028", "\u00a0"]


class Clock:
    """The backend's clock, movable by tests (real time plus an offset)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture(scope="module")
def rb() -> Iterator[ReferenceBackend]:
    with ReferenceBackend() as backend:
        yield backend


@dataclass
class Tenant:
    rb: ReferenceBackend
    account_id: str
    token: str
    booking_id: str
    api: httpx.Client

    def plan_body(self, manifest: bytes = MANIFEST) -> dict[str, str]:
        return {"booking_id": self.booking_id, "manifest_sha256": sha(manifest),
                "manifest_b64": base64.b64encode(manifest).decode()}

    def plan(self, manifest: bytes = MANIFEST) -> dict[str, Any]:
        response = self.api.post("/v1/training-plans", json=self.plan_body(manifest))
        assert response.status_code in (200, 201), response.text  # 200: the same manifest's pending request
        return dict(response.json())

    def request_id(self, manifest: bytes = MANIFEST) -> str:
        return str(self.plan(manifest)["confirmation_request"]["request_id"])

    def status(self, request_id: str) -> str:
        return str(self.api.get(f"/v1/confirmation-requests/{request_id}").json()["status"])

    def run(self, ref: str, key: str) -> httpx.Response:
        return self.api.post("/v1/training-runs", headers={"Idempotency-Key": key}, json={
            "booking_id": self.booking_id, "confirmation_ref": ref, "manifest_sha256": sha(MANIFEST),
            "manifest_b64": base64.b64encode(MANIFEST).decode()})

    def person(self) -> Person:
        return self.rb.person(self.account_id)

    @classmethod
    @contextmanager
    def opened(cls, rb: ReferenceBackend) -> Iterator[Tenant]:
        """A new account with an API token and a booking, and a client for the API as that account."""
        account = rb.op.account()
        _, token = rb.op.token(account)
        booking = rb.op.booking(account, nodes=2)["booking_id"]
        with httpx.Client(base_url=rb.url, headers={"Authorization": f"Bearer {token}"}, trust_env=False) as api:
            yield cls(rb, account, token, booking, api)


@pytest.fixture
def make_tenant(rb: ReferenceBackend) -> Iterator[Any]:
    with ExitStack() as stack:
        yield lambda: stack.enter_context(Tenant.opened(rb))


@pytest.fixture
def tenant(make_tenant: Any) -> Tenant:
    return make_tenant()  # type: ignore[no-any-return]


def variant(n: int) -> bytes:
    """Another valid manifest (another digest): planning the same one twice answers the same request."""
    return json.dumps({**DOC, "description": f"{DOC['description']} (variant {n})"}, indent=2).encode()


def insert_request(rb: ReferenceBackend, account_id: str, booking_id: str, manifest: bytes, *,
                   digest: str | None = None) -> str:
    """A create request over `manifest`, written straight into the store (the API would refuse some)."""
    store = Store(rb.db_path)
    try:
        checks = [{"name": n, "status": "passed", "reason": None, "message": None}
                  for n in ("manifest", "capacity", "fabric", "data_policy", "checkpoint_storage", "budget")]
        _, request = reviews.create_plan(store, account_id=account_id, booking_id=booking_id,
                                         manifest_sha256=digest or sha(manifest), manifest=manifest, checks=checks,
                                         estimate={"usd": "1.00", "gpu_hours": 1.0, "basis": "test"},
                                         max_cost_usd="1200.00")
        assert request is not None
        return str(request["request_id"])
    finally:
        store.close()


def csrf_of(person: Person, request_id: str) -> str:
    path = f"/desk/requests/{request_id}"
    return person.form(path, f"{path}/confirm")["csrf"]


def browser_headers(client: httpx.Client) -> dict[str, str]:
    """What a browser sends with a form post from one of the desk's own pages."""
    return {"Origin": str(client.base_url).rstrip("/"), "Sec-Fetch-Site": "same-origin"}


def post_form(client: httpx.Client, path: str, fields: dict[str, str], *, browser: bool = True,
              **headers: str) -> httpx.Response:
    """A form post; as a browser would send it from the desk's own page unless `browser` is False."""
    sent = {**(browser_headers(client) if browser else {}), **headers}
    return client.post(path, content="&".join(f"{k}={v}" for k, v in fields.items()).encode(),
                       headers={"Content-Type": "application/x-www-form-urlencoded", **sent})


# -- sign-in ------------------------------------------------------------------------------------------
def test_sign_in_link_is_single_use_and_opening_it_does_not_use_it(rb: ReferenceBackend, tenant: Tenant) -> None:
    url = rb.op.login_link(tenant.account_id)["url"]
    path = httpx.URL(url).path
    with httpx.Client(base_url=rb.url, trust_env=False) as browser:
        for _ in range(2):  # a link preview or prefetcher opening it does not burn it
            page = browser.get(path)
            assert page.status_code == 200 and f"Sign in as {tenant.account_id}" in page.text
            assert "Set-Cookie" not in page.headers
        signed_in = post_form(browser, path, {})
        assert signed_in.status_code == 303 and signed_in.headers["location"] == "/desk/"
        cookie = signed_in.headers["set-cookie"]
        assert re.fullmatch(r"ito_desk_session=[A-Za-z0-9_-]{43}; Path=/desk; HttpOnly; SameSite=Strict; "
                            r"Max-Age=3[56][0-9]{2}", cookie), cookie  # one hour
        secret = cookie.split(";")[0].split("=", 1)[1]
        rows = rb.query("SELECT session_sha256, session_id FROM desk_sessions WHERE account_id = ?",
                        (tenant.account_id,))
        assert rows == [{"session_sha256": hashlib.sha256(secret.encode()).hexdigest(),
                         "session_id": rows[0]["session_id"]}]  # stored hashed only
        with httpx.Client(base_url=rb.url, trust_env=False, cookies={"ito_desk_session": secret}) as other_tab:
            assert tenant.account_id in other_tab.get("/desk/").text
        for attempt in (browser.get(path), post_form(browser, path, {})):  # used: a clear error, no session
            assert attempt.status_code == 410 and "already been used" in attempt.text
            assert "set-cookie" not in attempt.headers
    link_rows = rb.query("SELECT * FROM desk_login_links WHERE account_id = ?", (tenant.account_id,))
    assert len(link_rows) == 1 and path.rsplit("/", 1)[1] not in json.dumps(link_rows)


def test_expired_unknown_and_malformed_links(rb: ReferenceBackend, tenant: Tenant) -> None:
    store = Store(rb.db_path)
    try:
        expired, _ = desk_session.mint_link(store, tenant.account_id, ttl_s=-1)
    finally:
        store.close()
    with httpx.Client(base_url=rb.url, trust_env=False) as browser:
        for secret, status, words in ((expired, 410, "expired"), ("A" * 43, 400, "not a valid"),
                                      ("not%20valid", 400, "not a valid"), ("x" * 300, 400, "not a valid")):
            for response in (browser.get(f"/desk/sign-in/{secret}"), post_form(browser, f"/desk/sign-in/{secret}", {})):
                assert response.status_code == status and words in response.text, secret
                assert "set-cookie" not in response.headers
    with pytest.raises(Exception, match="404"):
        rb.op.login_link("acct-that-does-not-exist")


def test_security_headers_on_every_desk_response(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    request_id = tenant.request_id()
    with httpx.Client(base_url=rb.url, trust_env=False) as anonymous:
        responses = [person.get("/desk/"), person.get(f"/desk/requests/{request_id}"), person.get("/desk/runs"),
                     person.get("/desk/static/desk.css"), person.get("/desk/nope"), anonymous.get("/desk/"),
                     anonymous.get("/desk/sign-in/x"), anonymous.get("/desk/", headers={"Authorization": "Bearer x"}),
                     person.client.get(f"/desk/requests/{request_id}/confirm")]
    for response in responses:
        for name, value in HEADERS.items():
            assert response.headers.get(name) == value, (response.url, name)
    assert [r.status_code for r in responses] == [200, 200, 200, 200, 404, 401, 400, 401, 405]
    assert responses[3].headers["content-type"].startswith("text/css")
    assert all(r.headers["content-type"] == "text/html; charset=utf-8" for i, r in enumerate(responses) if i != 3)
    assert all("<script" not in r.text for r in responses)


def test_the_desk_root_without_a_slash_redirects(rb: ReferenceBackend) -> None:
    with httpx.Client(base_url=rb.url, trust_env=False) as browser:
        response = browser.get("/desk")
        assert response.status_code == 303 and response.headers["location"] == "/desk/"


def test_not_signed_in_shows_nothing(rb: ReferenceBackend, tenant: Tenant) -> None:
    request_id = tenant.request_id()
    with httpx.Client(base_url=rb.url, trust_env=False, cookies={"ito_desk_session": "forged-value"}) as anonymous:
        for path in ("/desk/", f"/desk/requests/{request_id}", "/desk/runs", "/desk/runs/run_x"):
            response = anonymous.get(path)
            assert response.status_code == 401 and "Not signed in" in response.text
            assert tenant.account_id not in response.text and request_id not in response.text.replace(path, "")
        response = post_form(anonymous, f"/desk/requests/{request_id}/confirm", {"csrf": "x"})
        assert response.status_code == 401
    assert tenant.status(request_id) == "pending"


# -- API credentials never act at the desk ----------------------------------------------------------
def test_api_tokens_are_refused_even_with_a_valid_session(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    request_id = tenant.request_id()
    csrf = csrf_of(person, request_id)
    bearer = {"Authorization": f"Bearer {tenant.token}"}
    for method, path in (("GET", "/desk/"), ("GET", f"/desk/requests/{request_id}"), ("GET", "/desk/runs")):
        response = person.client.request(method, path, headers=bearer)
        assert response.status_code == 401 and "API credentials refused" in response.text
    response = post_form(person.client, f"/desk/requests/{request_id}/confirm", {"csrf": csrf}, **bearer)
    assert response.status_code == 401
    response = post_form(person.client, f"/desk/requests/{request_id}/confirm", {"csrf": csrf},
                         Authorization=f"Basic {base64.b64encode(b'u:p').decode()}")
    assert response.status_code == 401
    assert tenant.status(request_id) == "pending"
    with httpx.Client(base_url=rb.url, trust_env=False, headers=bearer) as api_only:  # no session at all
        assert api_only.get(f"/desk/requests/{request_id}").status_code == 401
        assert api_only.get(f"/v1/confirmation-requests/{request_id}").status_code == 200


# -- CSRF and origins -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "fields", "headers", "status"), [
    ("no token", {}, {}, 403),
    ("empty token", {"csrf": ""}, {}, 403),
    ("wrong token", {"csrf": "0" * 64}, {}, 403),
    ("foreign origin", "csrf", {"Origin": "http://127.0.0.1:1"}, 403),
    ("cross-site fetch", "csrf", {"Sec-Fetch-Site": "cross-site"}, 403),
    ("same-site other port", "csrf", {"Sec-Fetch-Site": "same-site"}, 403),
    ("not a form", "csrf-json", {}, 400),
    ("repeated field", "csrf-twice", {}, 400),
])
def test_forged_decisions_are_refused(rb: ReferenceBackend, tenant: Tenant, name: str, fields: Any,
                                      headers: dict[str, str], status: int) -> None:
    person = tenant.person().sign_in()
    request_id = tenant.request_id()
    csrf = csrf_of(person, request_id)
    path = f"/desk/requests/{request_id}/confirm"
    if fields == "csrf-json":
        response = person.client.post(path, json={"csrf": csrf}, headers=browser_headers(person.client))
    elif fields == "csrf-twice":
        response = person.client.post(path, content=f"csrf={csrf}&csrf={csrf}".encode(),
                                      headers={"Content-Type": "application/x-www-form-urlencoded",
                                               **browser_headers(person.client)})
    else:
        response = post_form(person.client, path, {"csrf": csrf} if fields == "csrf" else fields, **headers)
    assert response.status_code == status, response.text
    assert tenant.status(request_id) == "pending"
    assert rb.query("SELECT COUNT(*) AS n FROM confirmations WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 0


def test_another_sessions_token_and_an_oversized_form_are_refused(rb: ReferenceBackend, tenant: Tenant) -> None:
    first, second = tenant.person().sign_in(), tenant.person().sign_in()
    request_id = tenant.request_id()
    response = post_form(first.client, f"/desk/requests/{request_id}/confirm", {"csrf": csrf_of(second, request_id)})
    assert response.status_code == 403
    response = post_form(first.client, f"/desk/requests/{request_id}/confirm",
                         {"csrf": csrf_of(first, request_id), "pad": "x" * 10_000})
    assert response.status_code == 413
    assert tenant.status(request_id) == "pending"
    # The browser's own form post (Origin: null under no-referrer, same-origin fetch) is accepted.
    response = post_form(first.client, f"/desk/requests/{request_id}/decline", {"csrf": csrf_of(first, request_id)},
                         Origin="null", **{"Sec-Fetch-Site": "same-origin"})
    assert response.status_code == 303 and tenant.status(request_id) == "declined"


# -- tenancy ------------------------------------------------------------------------------------------
def test_other_accounts_requests_and_runs_are_not_found(rb: ReferenceBackend, tenant: Tenant, make_tenant: Any
                                                        ) -> None:
    other = make_tenant().person().sign_in()
    request_id = tenant.request_id(variant(1))
    mine = tenant.person().sign_in()
    ref = mine.confirm(tenant.request_id())
    run_id = tenant.run(ref, "desk-tenancy-key-0001").json()["run_id"]
    for path in (f"/desk/requests/{request_id}", f"/desk/runs/{run_id}", "/desk/requests/creq_missing",
                 "/desk/runs/run_missing", "/desk/requests/bad%20id"):
        response = other.get(path)
        assert response.status_code == 404 and "no such" in response.text.lower(), path
        assert tenant.account_id not in response.text
    csrf = other.form("/desk/", "/desk/sign-out")["csrf"]  # a real token, for its own page's forms only
    for verb in ("confirm", "decline"):
        assert post_form(other.client, f"/desk/requests/{request_id}/{verb}", {"csrf": csrf}).status_code == 403
    assert tenant.status(request_id) == "pending"
    assert request_id not in other.get("/desk/").text and run_id not in other.get("/desk/runs").text
    assert request_id in mine.get("/desk/").text and run_id in mine.get("/desk/runs").text


# -- decisions ----------------------------------------------------------------------------------------
def test_confirm_at_the_desk_then_create_with_the_ref(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    assert person.account_id == tenant.account_id
    request_id = tenant.request_id()
    assert person.pending()[0] == request_id
    # A second tab opened on the same review before the decision: its forms' token stays unused.
    forms = person.forms(f"/desk/requests/{request_id}")
    other_tab = {verb: forms[f"/desk/requests/{request_id}/{verb}"]["csrf"] for verb in ("confirm", "decline")}
    ref = person.confirm(request_id)
    view = tenant.api.get(f"/v1/confirmation-requests/{request_id}").json()
    assert view["status"] == "confirmed" and view["confirmation_ref"] == ref
    decided = rb.op.confirmation_requests(tenant.account_id, "confirmed")[0]
    session_id = rb.query("SELECT session_id FROM desk_sessions WHERE account_id = ?", (tenant.account_id,))[0]
    assert (decided["decided_via"], decided["decided_by"]) == ("desk", session_id["session_id"])
    assert tenant.run(ref, "desk-confirm-key-0001").status_code == 201
    assert request_id not in person.pending()
    page = person.get(f"/desk/requests/{request_id}").text
    assert ref in page and "confirmation-ref" in page and 'action="/desk/requests/' not in page
    with pytest.raises(DeskError) as err:
        person.confirm(request_id)  # no button any more
    assert "no confirm button" in str(err.value)
    # The other tab's Confirm: its token is good, the request is not pending any more.
    response = post_form(person.client, f"/desk/requests/{request_id}/confirm", {"csrf": other_tab["confirm"]})
    assert response.status_code == 409 and "Already decided" in response.text
    # Both forms of a page share its single-use token: the other tab's Decline is now refused as used.
    assert other_tab["decline"] == other_tab["confirm"]
    response = post_form(person.client, f"/desk/requests/{request_id}/decline", {"csrf": other_tab["decline"]})
    assert response.status_code == 403 and "already used" in response.text
    assert rb.query("SELECT COUNT(*) AS n FROM confirmations WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 1


def test_decline_creates_nothing(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    request_id = tenant.request_id()
    person.decline(request_id)
    assert tenant.status(request_id) == "declined"
    assert "You declined this" in person.get(f"/desk/requests/{request_id}").text
    assert rb.query("SELECT COUNT(*) AS n FROM confirmations WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 0


def test_an_expired_request_cannot_be_decided() -> None:
    clock = Clock()
    with ReferenceBackend(request_ttl_s=300, clock=clock) as rb:
        account = rb.op.account()
        _, token = rb.op.token(account)
        booking = rb.op.booking(account)["booking_id"]
        with httpx.Client(base_url=rb.url, headers={"Authorization": f"Bearer {token}"}, trust_env=False) as api:
            t = Tenant(rb, account, token, booking, api)
            request_id = t.request_id()
            person = t.person().sign_in()
            forms = person.forms(f"/desk/requests/{request_id}")  # opened while pending
            clock.advance(301)
            page = person.get(f"/desk/requests/{request_id}").text
            assert "expired undecided" in page and "/confirm" not in page
            response = post_form(person.client, f"/desk/requests/{request_id}/confirm",
                                 forms[f"/desk/requests/{request_id}/confirm"])
            assert response.status_code == 410 and "expired undecided" in response.text
            assert t.status(request_id) == "expired"


def test_cancel_and_cleanup_reviews(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    run_id = tenant.run(person.confirm(tenant.request_id()), "desk-cancel-key-0001").json()["run_id"]
    rb.op.advance(run_id)
    cancel = tenant.api.post("/v1/confirmation-requests", json={"action": "training.cancel", "run_id": run_id}).json()
    page = person.get(f"/desk/requests/{cancel['request_id']}").text
    assert "cancel</strong> run" in page and run_id in page and "is untouched" in page and tenant.booking_id in page
    assert "data_prep" in page and "running" in page
    ref = person.confirm(cancel["request_id"])
    response = tenant.api.post(f"/v1/training-runs/{run_id}/cancel", json={"confirmation_ref": ref},
                               headers={"Idempotency-Key": "desk-cancel-key-0002"})
    assert response.json()["state"] == "cancelled"
    cleanup = tenant.api.post("/v1/confirmation-requests", json={"action": "training.cleanup", "run_id": run_id}).json()
    page = person.get(f"/desk/requests/{cleanup['request_id']}").text
    assert "clean up</strong> run" in page and "containers, scratch volumes, staged data" in page
    assert "is untouched" in page and "Checkpoints are kept" in page
    person.confirm(cleanup["request_id"])
    # A cancel request whose run ends before the person decides can no longer be confirmed.
    second = tenant.run(person.confirm(tenant.request_id()), "desk-cancel-key-0003").json()["run_id"]
    late = tenant.api.post("/v1/confirmation-requests", json={"action": "training.cancel", "run_id": second}).json()
    rb.op.finish(second)
    page = person.get(f"/desk/requests/{late['request_id']}").text
    assert "could not be carried out" in page and 'class="confirm"' not in page and 'class="decline"' in page


# -- what the page shows --------------------------------------------------------------------------------
def test_the_create_review_shows_everything_the_person_confirms(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    plan = tenant.plan()
    page = html.unescape(person.get(f"/desk/requests/{plan['confirmation_request']['request_id']}").text)
    expected = [
        DOC["model"]["name"], "8,030,261,248", "8.03B", DOC["model"]["revision"], DOC["target"], "sft → dpo",
        "$4,800.00", "$1,200.00", "500 steps", DOC["checkpoints"]["storage"], DOC["description"],
        tenant.booking_id, "2 node(s) × 8 H100-80GB = 16 GPU(s)", plan["estimate"]["usd"],
        plan["estimate"]["basis"], plan["manifest_sha256"], "their SHA-256 matches",
    ]
    for ref in DOC["data"]:
        decon = ref["decontamination"]
        expected += [ref["name"], ref["uri"], ref["revision"], decon["method"], ", ".join(decon["eval_suites"]),
                     decon["report"], decon["checked_at"]]
    expected += [c["name"] for c in plan["checks"]]
    for text in expected:
        assert text in page, text
    assert page.count('class="confirm"') == 1  # once, at the very end: after every fact
    assert page.index('class="confirm"') > page.index("The manifest exactly as stored")
    assert page.index('class="decline"') > page.index("The manifest exactly as stored")


def test_a_request_whose_stored_bytes_do_not_match_cannot_be_confirmed(rb: ReferenceBackend, tenant: Tenant) -> None:
    request_id = insert_request(rb, tenant.account_id, tenant.booking_id, MANIFEST, digest="0" * 64)
    person = tenant.person().sign_in()
    page = person.get(f"/desk/requests/{request_id}").text
    assert "Do not confirm" in page and "no longer matches" in page and 'class="confirm"' not in page
    assert "cannot be confirmed" in page.split('id="decision"')[1]
    # The bytes change after the page offered Confirm: the decision is checked again and refused.
    other = insert_request(rb, tenant.account_id, tenant.booking_id, variant(2))
    confirm = person.forms(f"/desk/requests/{other}")[f"/desk/requests/{other}/confirm"]
    store = Store(rb.db_path)
    try:
        with store.tx() as conn:
            conn.execute("UPDATE plans SET manifest = ? WHERE request_id = ?", (MANIFEST, other))
    finally:
        store.close()
    response = post_form(person.client, f"/desk/requests/{other}/confirm", confirm)
    assert response.status_code == 409 and tenant.status(other) == "pending"
    person.decline(request_id)  # declining is always possible


def test_hostile_strings_are_shown_inert_and_visible(rb: ReferenceBackend, tenant: Tenant) -> None:
    manifest = json.dumps({**DOC, **HOSTILE}, indent=1, ensure_ascii=False).encode()
    request_id = insert_request(rb, tenant.account_id, tenant.booking_id, manifest)
    person = tenant.person().sign_in()
    page = person.get(f"/desk/requests/{request_id}").text
    for char in HIDDEN:
        assert char not in page, f"U+{ord(char):04X} reached the page"
        assert f"⟨U+{ord(char):04X}⟩" in page
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "</td><b>x" not in page and "&lt;/td&gt;&lt;b&gt;x" in page
    assert "&amp; &quot;q&quot;" in page
    # The raw manifest pane shows the bytes as stored, escaped the same way.
    assert page.count("⟨U+202E⟩") >= 4


def test_parse_failures_are_shown_not_confirmable(rb: ReferenceBackend, tenant: Tenant) -> None:
    for manifest, words in ((b'{"schema_version": 1, "a": 1, "a": 2}', "not strict JSON"),
                            (json.dumps({**DOC, "surprise": "\u202e"}).encode(), "does not pass")):
        request_id = insert_request(rb, tenant.account_id, tenant.booking_id, manifest)
        page = tenant.person().sign_in().get(f"/desk/requests/{request_id}").text
        assert words in page and 'class="confirm"' not in page and "\u202e" not in page


# -- runs and sign-out -------------------------------------------------------------------------------
def test_runs_pages_and_the_chart(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    run_id = tenant.run(person.confirm(tenant.request_id()), "desk-runs-key-00001").json()["run_id"]
    page = person.get(f"/desk/runs/{run_id}").text
    assert "No metrics yet" in page and "<svg" not in page
    for _ in range(5):  # start; data_prep, the ladder, sft pass; dpo passes
        rb.op.advance(run_id)
    page = person.get(f"/desk/runs/{run_id}").text
    assert page.count("<polyline") == 2 and 'class="series loss"' in page and 'class="series goodput"' in page
    loss_points = re.search(r'class="series loss" points="([^"]+)"', page)
    assert loss_points is not None and len(loss_points.group(1).split()) == 8  # two training stages x 4 points
    for text in ("data_prep", "ladder-150m-v1", "sft", "passed", "succeeded", "score/mmlu",
                 "checkpoint saved at step 2000", "step-2000", "$280.00", "fp8"):
        assert text in page, text
    assert run_id in person.get("/desk/runs").text


def test_sign_out_ends_the_session(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    assert post_form(person.client, "/desk/sign-out", {}).status_code == 403  # needs the CSRF token too
    person.sign_out()
    response = person.get("/desk/")
    assert response.status_code == 401
    assert rb.query("SELECT revoked_at IS NOT NULL AS revoked FROM desk_sessions WHERE account_id = ?",
                    (tenant.account_id,)) == [{"revoked": 1}]


def test_the_cookie_is_secure_behind_an_https_public_url() -> None:
    with ReferenceBackend(public_url="https://desk.example") as rb:
        account = rb.op.account()
        link = rb.op.login_link(account)["url"]
        assert link.startswith("https://desk.example/desk/sign-in/")
        with httpx.Client(base_url=rb.url, trust_env=False) as browser:
            response = post_form(browser, httpx.URL(link).path, {}, Origin="https://desk.example")
            assert response.status_code == 303
            # Secure, and a __Host- name: nothing served over plain http (another port) can set or replace it.
            assert re.fullmatch(r"__Host-ito_desk_session=[A-Za-z0-9_-]{43}; Path=/; Secure; HttpOnly; "
                                r"SameSite=Strict; Max-Age=3[56][0-9]{2}", response.headers["set-cookie"])
            secret = response.headers["set-cookie"].split(";")[0].split("=", 1)[1]
            headers = {"Cookie": f"__Host-ito_desk_session={secret}"}
            assert account in browser.get("/desk/", headers=headers).text
            plain = browser.get("/desk/", headers={"Cookie": f"ito_desk_session={secret}"})
            assert plain.status_code == 401  # the plain-http name is not read over https


def test_a_new_sign_in_replaces_the_previous_session(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    old = person.client.cookies.get("ito_desk_session")
    link = rb.op.login_link(tenant.account_id)["url"]
    response = post_form(person.client, httpx.URL(link).path, {})
    assert response.status_code == 303
    with httpx.Client(base_url=rb.url, trust_env=False, cookies={"ito_desk_session": str(old)}) as stale:
        assert stale.get("/desk/").status_code == 401


def test_every_character_that_draws_as_nothing_is_shown_as_its_code_point_on_the_desk() -> None:
    """The desk escapes the product's whole `invisible` class (Hangul fillers, variation selectors,
    tags, braille blank ...), not only controls and format characters."""
    from ito_training_mcp.scanner import INVISIBLE as INVISIBLE_POINTS
    from ito_training_reference.desk.render import esc

    for point in sorted(INVISIBLE_POINTS):
        shown = esc(f"org/m{chr(point)}odel")
        assert chr(point) not in shown, hex(point)
        assert f"⟨U+{point:04X}⟩" in shown, hex(point)
