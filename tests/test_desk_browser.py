"""The desk in a real browser: Debian's Chromium driven by Playwright (no browser download).

`make browser` (and .ci/run) installs Chromium. Its absence is a failure, not a skip, unless
ITO_SKIP_BROWSER=1 is set explicitly. ITO_CHROMIUM names another Chromium binary. One browser
for the module, a fresh context (cookie jar) per test; screenshots go to each test's tmp dir.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpx
import pytest
from mcp import Client

from ito_training_mcp.doors.mcp.server import build_server
from ito_training_reference import ReferenceBackend

from .conftest import World, WriteFile
from .test_desk import HIDDEN, HOSTILE, insert_request
from .test_reference_backend import DOC, MANIFEST, sha

# Read at import: the autouse clean_env fixture removes ITO_* variables before each test runs.
SKIP = os.environ.get("ITO_SKIP_BROWSER") == "1"
CHROMIUM = os.environ.get("ITO_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-sync", "--disable-quic", "--disable-dev-shm-usage"]
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not Path(CHROMIUM).exists():
        if SKIP:
            pytest.skip("ITO_SKIP_BROWSER=1: no browser tests")
        pytest.fail(f"Browser tests need Playwright (pip install -e '.[dev]') and Chromium at {CHROMIUM}: run "
                    "`make browser` (as root: apt-get install -y chromium), or set ITO_SKIP_BROWSER=1 to skip them.")
    flags = FLAGS + (["--no-sandbox"] if os.geteuid() == 0 else [])
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=flags)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def rb() -> Iterator[ReferenceBackend]:
    with ReferenceBackend() as backend:
        yield backend


class Account:
    def __init__(self, rb: ReferenceBackend) -> None:
        self.rb = rb
        self.account_id = rb.op.account()
        _, self.token = rb.op.token(self.account_id)
        self.booking_id = rb.op.booking(self.account_id, nodes=2)["booking_id"]
        self.api = httpx.Client(base_url=rb.url, headers={"Authorization": f"Bearer {self.token}"}, trust_env=False)

    def request_id(self) -> str:
        body = {"booking_id": self.booking_id, "manifest_sha256": sha(MANIFEST),
                "manifest_b64": base64.b64encode(MANIFEST).decode()}
        return str(self.api.post("/v1/training-plans", json=body).json()["confirmation_request"]["request_id"])

    def request(self, request_id: str) -> dict[str, Any]:
        return dict(self.api.get(f"/v1/confirmation-requests/{request_id}").json())


@pytest.fixture
def account(rb: ReferenceBackend) -> Iterator[Account]:
    found = Account(rb)
    yield found
    found.api.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    problems: list[str] = []
    tab.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    tab.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    tab.problems = problems
    yield tab
    context.close()


def sign_in(page: Any, rb: ReferenceBackend, account: Account) -> None:
    page.goto(rb.op.login_link(account.account_id)["url"])
    assert f"Sign in as {account.account_id}" in page.inner_text("button")
    page.click("button")
    page.wait_for_url(f"{rb.url}/desk/")


def test_sign_in_review_confirm_and_see_the_ref(page: Any, rb: ReferenceBackend, account: Account,
                                               tmp_path: Path) -> None:
    request_id = account.request_id()
    page.goto(rb.op.login_link(account.account_id)["url"])
    page.screenshot(path=str(tmp_path / "1-sign-in.png"))
    page.click("text=Sign in as")
    page.wait_for_url(f"{rb.url}/desk/")
    assert account.account_id in page.inner_text("nav")
    page.screenshot(path=str(tmp_path / "2-pending.png"))
    page.click(f"a[href='/desk/requests/{request_id}']")
    page.wait_for_url(f"{rb.url}/desk/requests/{request_id}")
    body = page.inner_text("main")
    for text in (DOC["model"]["name"], DOC["model"]["revision"], "sft → dpo", "$1,200.00", "$4,800.00",
                 "$280.00 of at most $1,200.00", DOC["data"][0]["decontamination"]["method"], sha(MANIFEST),
                 "Parallelism and precision", "data 16 × tensor 1 × pipeline 1 on 16 GPU(s)", "fp8: H100-80GB",
                 "FSDP within each node", "ladder\t32.0\t$80.00", "ladder of 4 ~150M-parameter proxy runs"):
        assert text in body, text
    # The stylesheet loaded under the CSP: the Confirm button is styled.
    assert page.eval_on_selector("button.confirm", "b => getComputedStyle(b).backgroundColor") == "rgb(27, 122, 61)"
    page.screenshot(path=str(tmp_path / "3-review.png"), full_page=True)
    page.locator("button.confirm").first.click()
    page.wait_for_selector("#confirmation-ref")
    ref = page.inner_text("#confirmation-ref")
    page.screenshot(path=str(tmp_path / "4-confirmed.png"))
    seen = account.request(request_id)
    assert seen["status"] == "confirmed" and seen["confirmation_ref"] == ref
    assert page.problems == []
    # The cookie is the browser's own: HttpOnly, SameSite=Strict, path /desk.
    cookies = page.context.cookies()
    assert [(c["name"], c["httpOnly"], c["sameSite"], c["path"]) for c in cookies] == [
        ("ito_desk_session", True, "Strict", "/desk")]


def test_decline(page: Any, rb: ReferenceBackend, account: Account, tmp_path: Path) -> None:
    request_id = account.request_id()
    sign_in(page, rb, account)
    page.goto(f"{rb.url}/desk/requests/{request_id}")
    page.locator("button.decline").first.click()
    page.wait_for_selector("text=You declined this")
    page.screenshot(path=str(tmp_path / "declined.png"))
    assert account.request(request_id)["status"] == "declined"
    assert page.locator("button.confirm").count() == 0


def test_reused_and_expired_links(page: Any, rb: ReferenceBackend, account: Account, tmp_path: Path) -> None:
    link = rb.op.login_link(account.account_id)["url"]
    page.goto(link)
    page.click("button")
    page.wait_for_url(f"{rb.url}/desk/")
    response = page.goto(link)
    assert response.status == 410 and "already been used" in page.inner_text("main")
    page.screenshot(path=str(tmp_path / "used.png"))
    from ito_training_reference.desk.session import mint_link
    from ito_training_reference.store import Store

    store = Store(rb.db_path)
    try:
        expired, _ = mint_link(store, account.account_id, ttl_s=-1)
    finally:
        store.close()
    fresh = page.context.browser.new_context()
    try:
        tab = fresh.new_page()
        response = tab.goto(f"{rb.url}/desk/sign-in/{expired}")
        assert response.status == 410 and "expired" in tab.inner_text("main")
        assert tab.locator("button").count() == 0 and fresh.cookies() == []
    finally:
        fresh.close()


class _HtmlPage(BaseHTTPRequestHandler):
    """A quiet page server for the tests' other sites: `send_html` answers 200 with the body."""

    def send_html(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _AttackPage(_HtmlPage):
    target = ""
    as_link = False  # a plain link to `target` (a chat app showing review_url) instead of a forged form

    def do_GET(self) -> None:
        if self.as_link:
            body = f'<!doctype html><a id="review" href="{self.target}">review</a>'.encode()
        else:
            body = (f'<!doctype html><form id="f" method="post" action="{self.target}">'
                    '<input type="hidden" name="csrf" value="forged"></form>'
                    '<script>document.getElementById("f").submit()</script>').encode()
        self.send_html(body)


@pytest.fixture
def attacker(rb: ReferenceBackend) -> Iterator[tuple[ThreadingHTTPServer, int]]:
    _AttackPage.as_link = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AttackPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize("attacker_host", ["localhost", "127.0.0.1"])  # cross-site; same-site but cross-origin
def test_a_forged_cross_origin_form_post_is_refused(page: Any, rb: ReferenceBackend, account: Account,
                                                    attacker: tuple[ThreadingHTTPServer, int], attacker_host: str,
                                                    tmp_path: Path) -> None:
    request_id = account.request_id()
    sign_in(page, rb, account)  # the victim is signed in
    _AttackPage.target = f"{rb.url}/desk/requests/{request_id}/confirm"
    page.goto(f"http://{attacker_host}:{attacker[1]}/")
    page.wait_for_url(_AttackPage.target)
    page.wait_for_load_state()
    page.screenshot(path=str(tmp_path / f"forged-from-{attacker_host}.png"))
    text = page.inner_text("main")
    assert "Not signed in" in text or "Refused" in text
    assert account.request(request_id)["status"] == "pending"


def test_a_review_url_opened_from_another_site(page: Any, rb: ReferenceBackend, account: Account,
                                              attacker: tuple[ThreadingHTTPServer, int], tmp_path: Path) -> None:
    """SameSite=Strict keeps the cookie off a navigation that starts on another site; the page says so
    and its same-site link carries the session."""
    request_id = account.request_id()
    sign_in(page, rb, account)
    _AttackPage.target, _AttackPage.as_link = f"{rb.url}/desk/requests/{request_id}", True
    page.goto(f"http://localhost:{attacker[1]}/")
    with page.expect_navigation() as navigation:
        page.click("#review")
    assert navigation.value.status == 401 and "Not signed in" in page.inner_text("main")
    page.screenshot(path=str(tmp_path / "from-elsewhere.png"))
    page.click("text=continue to this page")
    page.wait_for_selector("button.confirm")
    assert request_id in page.inner_text("main")


def test_a_post_without_the_token_is_refused(page: Any, rb: ReferenceBackend, account: Account,
                                             tmp_path: Path) -> None:
    request_id = account.request_id()
    sign_in(page, rb, account)
    page.goto(f"{rb.url}/desk/requests/{request_id}")
    # Strip the hidden token from the real form (DevTools ignores the page's CSP), then submit it.
    page.evaluate("document.querySelectorAll('input[name=csrf]').forEach(i => i.remove())")
    with page.expect_navigation() as navigation:
        page.locator("button.confirm").first.click()
    assert navigation.value.status == 403
    assert "security token is missing, wrong or already used" in page.inner_text("main")
    page.screenshot(path=str(tmp_path / "no-token.png"))
    assert account.request(request_id)["status"] == "pending"


def test_an_api_token_is_refused_at_the_desk(browser: Any, rb: ReferenceBackend, account: Account,
                                             tmp_path: Path) -> None:
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {account.token}"})
    try:
        tab = context.new_page()
        for path in ("/desk/", f"/desk/requests/{account.request_id()}"):
            response = tab.goto(f"{rb.url}{path}")
            assert response.status == 401 and "API credentials refused" in tab.inner_text("main")
        tab.screenshot(path=str(tmp_path / "api-token.png"))
    finally:
        context.close()


def test_hostile_manifest_strings_render_inert(page: Any, rb: ReferenceBackend, account: Account,
                                               tmp_path: Path) -> None:
    manifest = json.dumps({**DOC, **HOSTILE}, indent=1, ensure_ascii=False).encode()
    request_id = insert_request(rb, account.account_id, account.booking_id, manifest)  # as the API would refuse
    sign_in(page, rb, account)
    page.goto(f"{rb.url}/desk/requests/{request_id}")
    page.screenshot(path=str(tmp_path / "hostile.png"), full_page=True)
    text = page.inner_text("body")
    for char in HIDDEN:
        assert char not in text, f"U+{ord(char):04X} rendered"
        assert f"⟨U+{ord(char):04X}⟩" in text
    assert "<script>alert(1)</script>" in text  # shown as text, not run
    assert page.locator("script").count() == 0 and page.locator("main b").count() == 0
    assert page.problems == []  # no dialog opened, no CSP violation


def test_the_runs_page_chart_renders(page: Any, rb: ReferenceBackend, account: Account, tmp_path: Path) -> None:
    ref = rb.op.confirm_request(account.request_id())["confirmation_ref"]
    run = account.api.post("/v1/training-runs", headers={"Idempotency-Key": "browser-chart-key-01"}, json={
        "booking_id": account.booking_id, "confirmation_ref": ref, "manifest_sha256": sha(MANIFEST),
        "manifest_b64": base64.b64encode(MANIFEST).decode()}).json()
    for _ in range(4):  # data_prep and the ladder train nothing: sft is the first stage on the chart
        rb.op.advance(run["run_id"])
    sign_in(page, rb, account)
    page.goto(f"{rb.url}/desk/runs")
    page.click(f"a[href='/desk/runs/{run['run_id']}']")
    chart = page.locator("figure.chart svg")
    chart.wait_for()
    box = chart.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 100
    lines = page.locator("figure.chart polyline")
    assert lines.count() == 2
    for i in range(2):
        line_box = lines.nth(i).bounding_box()
        assert line_box is not None and line_box["width"] > 100  # drawn across the chart
    assert page.eval_on_selector("polyline.loss", "p => getComputedStyle(p).stroke") == "rgb(194, 65, 12)"
    chart.screenshot(path=str(tmp_path / "chart.png"))
    page.screenshot(path=str(tmp_path / "run.png"), full_page=True)
    assert page.problems == []


class _OtherPort(_HtmlPage):
    """Another local program's web server on another loopback port. Browsers scope cookies by host,
    not port, so a same-site navigation to its own /desk/ path carries the desk's session cookie."""

    seen: ClassVar[list[str]] = []
    arrived: ClassVar[threading.Event] = threading.Event()

    def do_GET(self) -> None:
        if self.path.startswith("/desk/"):
            type(self).seen.append(self.headers.get("Cookie") or "")
            type(self).arrived.set()
            body = b"<!doctype html><p>loading</p>"
        else:  # the link the person opened: bounce to this server's own /desk/ path, no script needed
            body = b'<!doctype html><meta http-equiv="refresh" content="0;url=/desk/requests/x">'
        self.send_html(body)


def _form_token(html: str) -> str | None:
    marker = 'name="csrf" value="'
    return html.split(marker, 1)[1].split('"', 1)[0] if marker in html else None


def test_a_session_cookie_seen_by_another_loopback_port_cannot_confirm(browser: Any, tmp_path: Path) -> None:
    """Regression (review R1.1): over plain http the cookie reaches any port of the host; whoever
    copies it must still not confirm: a POST that no browser page sent is refused, and Confirm needs a
    sign-in within the last 10 minutes (the residual window is documented in docs/threat-model.md)."""
    from .test_desk import Clock

    clock = Clock()
    _OtherPort.seen, _OtherPort.arrived = [], threading.Event()
    other = ThreadingHTTPServer(("127.0.0.1", 0), _OtherPort)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    context = browser.new_context()
    context.set_default_timeout(TIMEOUT_MS)
    try:
        with ReferenceBackend(clock=clock) as backend:
            account = Account(backend)
            request_id = account.request_id()
            tab = context.new_page()
            tab.goto(backend.op.login_link(account.account_id)["url"])
            tab.click("button")
            tab.wait_for_url(f"{backend.url}/desk/")
            tab.goto(f"http://127.0.0.1:{other.server_address[1]}/")
            assert _OtherPort.arrived.wait(TIMEOUT_MS / 1000)
            # the screenshot once the bounced page has loaded (taken mid-navigation, Chromium refused it)
            tab.wait_for_url(f"http://127.0.0.1:{other.server_address[1]}/desk/requests/x")
            tab.wait_for_load_state("load")
            tab.screenshot(path=str(tmp_path / "other-port.png"))
            # The residual fact of plain http: the other port did receive the cookie.
            assert "ito_desk_session=" in _OtherPort.seen[0], "the browser no longer leaks it: update the docs"
            cookie = _OtherPort.seen[0].split("ito_desk_session=", 1)[1].split(";")[0]
            review = f"/desk/requests/{request_id}"
            with httpx.Client(base_url=backend.url, trust_env=False, follow_redirects=False,
                              headers={"Cookie": f"ito_desk_session={cookie}"}) as thief:
                # 1. The review page's own token, posted the way a program posts (no browser headers).
                token = _form_token(thief.get(review).text)
                assert token is not None
                plain = thief.post(f"{review}/confirm", content=f"csrf={token}".encode(),
                                   headers={"Content-Type": "application/x-www-form-urlencoded"})
                assert plain.status_code == 403 and "Forms are accepted only from the desk" in plain.text
                # 2. Browser headers forged, once the sign-in is no longer recent: no Confirm offered, none taken.
                clock.advance(11 * 60)
                page = thief.get(review).text
                assert 'class="confirm"' not in page
                forged = thief.post(f"{review}/confirm", content=f"csrf={token}".encode(), headers={
                    "Content-Type": "application/x-www-form-urlencoded", "Origin": backend.url,
                    "Sec-Fetch-Site": "same-origin"})
                assert forged.status_code == 403 and "Sign in again to confirm" in forged.text
            assert account.request(request_id)["status"] == "pending"
            assert account.request(request_id)["confirmation_ref"] is None
            account.api.close()
    finally:
        context.close()
        other.shutdown()
        other.server_close()
        thread.join(10)


def test_the_review_reads_well_at_400px(browser: Any, rb: ReferenceBackend, account: Account,
                                        tmp_path: Path) -> None:
    """A phone-width window: nothing scrolls sideways, amounts never wrap, the decision comes last."""
    context = browser.new_context(viewport={"width": 400, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    try:
        tab = context.new_page()
        request_id = account.request_id()
        tab.goto(rb.op.login_link(account.account_id)["url"])
        tab.click("button")
        tab.wait_for_url(f"{rb.url}/desk/")
        tab.screenshot(path=str(tmp_path / "pending-400.png"), full_page=True)
        tab.goto(f"{rb.url}/desk/requests/{request_id}")
        tab.locator("button.confirm").wait_for()
        tab.screenshot(path=str(tmp_path / "review-400.png"), full_page=True)
        assert (tmp_path / "review-400.png").stat().st_size > 0
        assert tab.evaluate("document.documentElement.scrollWidth") <= 400
        amounts = tab.locator(".money")
        assert amounts.count() >= 2
        # One line box per amount: "$1,200.00" is never broken across lines.
        assert tab.eval_on_selector_all(".money", "els => els.every(e => e.getClientRects().length === 1)")
        assert "$1,200.00" in tab.inner_text("main")
        # Every fact is above the buttons: the decision is the last section of the page.
        assert tab.eval_on_selector_all(
            "main section", "s => s[s.length - 1].querySelector('button.confirm') !== null")
        box = tab.locator("button.confirm").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 400
    finally:
        context.close()


def _tool(world: World, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One call through a real MCP client, in an event loop of its own on another thread (Playwright's sync
    API runs one in this thread)."""

    async def go() -> dict[str, Any]:
        async with Client(build_server(world.service()), mode="auto") as client:
            result = await client.call_tool(tool, arguments)
        assert result.structured_content is not None
        return dict(result.structured_content)

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, go).result(timeout=60)


def test_a_loss_spike_restart_proposed_by_the_backend_and_confirmed_by_the_person(
    page: Any, rb: ReferenceBackend, write_file: WriteFile, example_bytes: bytes, tmp_path: Path
) -> None:
    """spike -> the proposal in training_status -> request_confirmation -> the person confirms at the desk in
    the browser, seeing the spike on the chart, the checkpoint and the cost -> restart_training -> the run
    resumes from that checkpoint."""
    world = World(rb)
    manifest_path = write_file(example_bytes)
    ref = world.confirm(_tool(world, "digest_manifest", {"manifest_path": manifest_path})["data"]["sha256"])
    run_id = _tool(world, "submit_training", {"booking_id": world.booking, "manifest_path": manifest_path,
                                              "confirmation_ref": ref,
                                              "idempotency_key": "browser-restart-submit-01"})["data"]["run_id"]
    for _ in range(4):
        rb.op.advance(run_id)  # data_prep, the ladder and sft passed; dpo running from step 1000
    rb.op.interrupt(run_id, detect_s=180, resume_s=540)
    rb.op.spike(run_id)  # the reference backend's on-demand loss spike

    status = _tool(world, "training_status", {"run_id": run_id})
    [proposal] = status["data"]["proposed_actions"]
    assert (proposal["spike_step"], proposal["checkpoint_step"], proposal["repeated_cost_usd"]) == (
        1750, 1500, "20.00")
    opened = _tool(world, "request_confirmation", {"action": "training.restart", "run_id": run_id})
    assert opened["ok"] is True, opened

    page.goto(rb.op.login_link(world.account)["url"])
    page.click("button")
    page.wait_for_url(f"{rb.url}/desk/")
    page.goto(f"{rb.url}/desk/runs/{run_id}")
    run_page = page.inner_text("main")
    for text in ("Restart proposed", "review the restart request", "Interruptions", "180 s", "540 s",
                 "dpo-v1", "reward_margin", "Parallelism and precision", "loss spike, step 1750"):
        assert text in run_page, text
    page.screenshot(path=str(tmp_path / "run-paused.png"), full_page=True)
    page.click("text=review the restart request")
    page.wait_for_url(opened["data"]["review_url"])
    review = page.inner_text("main")
    for text in ("restart a run", "restart it from step 1500", "The loss spiked to", "at step 1750 in stage dpo",
                 f"{run_id}.ckpt-1500", "250 (steps 1500 to 1750)", "about $20.00", "If you decline",
                 "The booking", "untouched"):
        assert text in review, text
    assert page.locator("figure.chart line.mark.spike").count() == 1
    assert page.locator("figure.chart line.mark.checkpoint").count() == 1
    assert page.eval_on_selector("line.mark.spike", "m => getComputedStyle(m).stroke") == "rgb(180, 35, 24)"
    page.locator("figure.chart").screenshot(path=str(tmp_path / "restart-chart.png"))
    page.screenshot(path=str(tmp_path / "restart-review.png"), full_page=True)
    page.locator("button.confirm").first.click()
    page.wait_for_selector("#confirmation-ref")
    page.screenshot(path=str(tmp_path / "restart-confirmed.png"))
    assert "the run resumes from the checkpoint only then" in page.inner_text("main")

    learned = _tool(world, "confirmation_status", {"request_id": opened["data"]["request_id"]})
    assert learned["data"]["status"] == "confirmed" and learned["data"]["next_tool"] == "restart_training"
    assert learned["data"]["confirmation_ref"] == page.inner_text("#confirmation-ref")
    restarted = _tool(world, "restart_training", {"run_id": run_id, "confirmation_ref": learned["data"][
        "confirmation_ref"], "idempotency_key": f"restart-{opened['data']['request_id']}"})
    assert restarted["ok"] is True and restarted["data"]["proposed_actions"] == []
    metrics = _tool(world, "training_metrics", {"run_id": run_id})["data"]
    assert metrics["step"] == 1500 and metrics["loss"] == proposal["loss_before"]
    page.goto(f"{rb.url}/desk/runs/{run_id}")
    after = page.inner_text("main")
    assert "restarted from step 1500 as confirmed; 250 step(s) run again (about $20.00)" in after
    assert "Restart proposed" not in after
    page.screenshot(path=str(tmp_path / "run-restarted.png"), full_page=True)
    assert page.problems == []
