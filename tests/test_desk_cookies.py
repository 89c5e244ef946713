"""Cookie tossing at the desk: cookies do not keep ports apart, so any page served from another port of
the same host can set cookies the desk receives.

The attack: a page on another loopback port sets `ito_desk_session=x; Path=/`, which the browser then
sends beside the real one: the person was signed out, and each new sign-in link was used up for
nothing; a tossed `ito_desk_return` chose where the person landed after signing in. Now a desk cookie
name sent twice is refused before anything else (no link is used) and the copy the desk did not set
is removed; the return-path cookie is signed; a session is bound to the origin it was signed in on.
Over real HTTP, then in Chromium with a real attacker page on another port.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx
import pytest

from ito_training_reference import ReferenceBackend
from ito_training_reference.desk import session as desk_session
from ito_training_reference.store import Store

from .test_desk import browser_headers, post_form
from .test_desk_browser import Account, browser, page  # noqa: F401 - the browser tests' fixtures


@pytest.fixture(scope="module")
def rb() -> Iterator[ReferenceBackend]:
    with ReferenceBackend() as backend:
        yield backend


def _signed_in(rb: ReferenceBackend, account: str) -> tuple[httpx.Client, str]:
    client = httpx.Client(base_url=rb.url, trust_env=False, follow_redirects=False)
    path = httpx.URL(rb.op.login_link(account)["url"]).path
    assert post_form(client, path, {}).status_code == 303
    return client, str(client.cookies["ito_desk_session"])


def test_a_duplicated_session_cookie_is_refused_and_the_foreign_copy_removed(rb: ReferenceBackend) -> None:
    account = rb.op.account()
    client, secret = _signed_in(rb, account)
    try:
        tossed = client.get("/desk/", headers={"Cookie": f"ito_desk_session={secret}; ito_desk_session=tossed"})
        assert tossed.status_code == 400 and "Conflicting desk cookies" in tossed.text
        cleared = tossed.headers.get_list("set-cookie")
        assert "ito_desk_session=; Path=/; Max-Age=0" in cleared
        assert not any("Path=/desk;" in c for c in cleared)  # the desk's own copy stays
        # The person is still signed in once the foreign copy is gone.
        back = client.get("/desk/", headers={"Cookie": f"ito_desk_session={secret}"})
        assert back.status_code == 200 and account in back.text
    finally:
        client.close()


def test_a_tossed_cookie_never_uses_up_a_sign_in_link(rb: ReferenceBackend) -> None:
    account = rb.op.account()
    secret = httpx.URL(rb.op.login_link(account)["url"]).path.rsplit("/", 1)[1]
    with httpx.Client(base_url=rb.url, trust_env=False, follow_redirects=False) as client:
        refused = client.post(f"/desk/sign-in/{secret}", content=b"", headers={
            "Content-Type": "application/x-www-form-urlencoded", **browser_headers(client),
            "Cookie": "ito_desk_session=a; ito_desk_session=b"})
        assert refused.status_code == 400
        assert desk_session.link_state(Store(rb.db_path), secret)[0] == "usable"
        assert post_form(client, f"/desk/sign-in/{secret}", {}).status_code == 303


@pytest.mark.parametrize("tossed", ["/desk/runs", "/desk/runs.0123456789abcdef0123456789abcdef"])
def test_a_return_path_cookie_the_desk_did_not_sign_is_ignored(rb: ReferenceBackend, tossed: str) -> None:
    account = rb.op.account()
    path = httpx.URL(rb.op.login_link(account)["url"]).path
    with httpx.Client(base_url=rb.url, trust_env=False, follow_redirects=False) as client:
        signed = client.post(path, content=b"", headers={
            "Content-Type": "application/x-www-form-urlencoded", **browser_headers(client),
            "Cookie": f"ito_desk_return={tossed}"})
        assert signed.status_code == 303 and signed.headers["location"] == "/desk/"


def test_a_session_is_refused_on_another_origin(tmp_path: Any) -> None:
    store = Store(str(tmp_path / "desk.sqlite3"))
    try:
        store.create_account("acct_o", budget_limit_usd="100.00", data_schemes=["s3"], checkpoint_prefixes=["s3://x/"])
        link, _ = desk_session.mint_link(store, "acct_o")
        started = desk_session.sign_in(store, link, origin="http://127.0.0.1:8765")
        assert isinstance(started, desk_session.Session)
        assert desk_session.session_for(store, started.secret, origin="http://127.0.0.1:8765") is not None
        assert desk_session.session_for(store, started.secret, origin="http://127.0.0.1:9999") is None
        assert desk_session.session_for(store, started.secret, origin="https://desk.example") is None
    finally:
        store.close()


# ---------------------------------------------------------------------- in a real browser


class _Tosser(BaseHTTPRequestHandler):
    """The attacker's page, on another port of the same host: it sets cookies with the desk's names."""

    PAGE: ClassVar[bytes] = (b"<!doctype html><title>cat pictures</title><script>"
                             b"document.cookie = 'ito_desk_session=tossed; Path=/';"
                             b"document.cookie = 'ito_desk_return=/desk/runs; Path=/';"
                             b"</script><p id='done'>done</p>")

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(self.PAGE)))
        self.end_headers()
        self.wfile.write(self.PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def tosser() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Tosser)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _toss(page: Any, tosser: str) -> None:  # noqa: F811 - the fixture's value
    page.goto(tosser)
    page.wait_for_selector("#done")


def test_a_page_on_another_port_cannot_sign_the_person_out_or_burn_links(page: Any, rb: ReferenceBackend,  # noqa: F811
                                                                         tosser: str) -> None:
    account = Account(rb)
    try:
        page.goto(rb.op.login_link(account.account_id)["url"])
        page.click("text=Sign in as")
        page.wait_for_url(f"{rb.url}/desk/")

        _toss(page, tosser)
        answer = page.goto(f"{rb.url}/desk/")
        assert answer is not None and answer.status == 400 and "Conflicting desk cookies" in page.title()
        page.click("text=Continue")
        page.wait_for_url(f"{rb.url}/desk/")
        assert account.account_id in page.inner_text("nav")  # still signed in

        # A fresh link while a tossed copy sits in the browser: it is not used up, and it signs in;
        # the tossed return path does not choose where the person lands.
        _toss(page, tosser)
        link = rb.op.login_link(account.account_id)["url"]
        page.goto(link)
        assert "Conflicting desk cookies" in page.title()
        page.click("text=Continue")
        page.click("text=Sign in as")
        page.wait_for_url(f"{rb.url}/desk/")
        assert account.account_id in page.inner_text("nav")
    finally:
        account.api.close()
