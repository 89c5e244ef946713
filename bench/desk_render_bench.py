"""Another request's latency while the reference backend's desk renders a 1 MiB manifest's review page.

The backend runs as its own process (`python -m ito_training_reference`). This process plays two clients at
once: a person opening the review page of a plan whose manifest is just under 1 MiB, and an agent asking
`GET /v1/capabilities` over and over until the page has arrived. The row with a goal is the slowest such
request as a share of the render it overlapped: 1.0 means it waited for the whole render.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from common import Row, summary_ms
from manifests import realistic_manifest

from ito_training_reference import OperatorClient, Person

READY_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 60.0
GOAL_SHARE = 0.25


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(db: str, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "ito_training_reference", "--db", db, "--port", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the reference backend did not start") from None
            time.sleep(0.05)  # polling a port that is not yet open: there is no event to wait on


def rows(quick: bool = False) -> list[Row]:
    renders, idle_n = (3, 50) if quick else (8, 200)
    manifest = realistic_manifest()
    with tempfile.TemporaryDirectory(prefix="ito-desk-bench-") as tmp:
        db, port = str(Path(tmp) / "backend.sqlite3"), _free_port()
        proc = _start(db, port)
        url = f"http://127.0.0.1:{port}"
        try:
            with OperatorClient(url, Path(db + ".operator-token").read_text().strip()) as op:
                account = op.account()
                _, token = op.token(account)
                booking = op.booking(account, nodes=2, gpus_per_node=8, fabric="infiniband")["booking_id"]
                person = Person(str(op.login_link(account)["url"])).sign_in()
            headers = {"Authorization": f"Bearer {token}"}
            with person, httpx.Client(base_url=url, trust_env=False, headers=headers,
                                      timeout=HTTP_TIMEOUT_S) as agent:
                planned = agent.post("/v1/training-plans", json={
                    "booking_id": booking, "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
                    "manifest_b64": base64.b64encode(manifest).decode()})
                planned.raise_for_status()
                page = f"/desk/requests/{planned.json()['confirmation_request']['request_id']}"

                def ask() -> float:
                    started = time.perf_counter()
                    agent.get("/v1/capabilities").raise_for_status()
                    return time.perf_counter() - started

                for _ in range(10):
                    ask()
                idle = [ask() for _ in range(idle_n)]
                render_s: list[float] = []
                during: list[float] = []
                shares: list[float] = []

                def open_page(done: threading.Event, timing: list[float]) -> None:
                    started = time.perf_counter()
                    try:
                        person.get(page).raise_for_status()
                    finally:
                        timing.append(time.perf_counter() - started)
                        done.set()

                for _ in range(renders):
                    done, timing = threading.Event(), list[float]()
                    reader = threading.Thread(target=open_page, args=(done, timing))
                    reader.start()
                    these: list[float] = []
                    while not done.is_set():
                        these.append(ask())
                    reader.join()
                    render_s += timing
                    during += these
                    shares.append(max(these) / timing[0])
        finally:
            proc.terminate()
            proc.wait(10)
    share, render = statistics.median(shares), statistics.median(render_s)
    idle_p50, during_p50 = statistics.median(idle), statistics.median(during)
    return [
        Row("desk", "slowest request while a 1 MiB review renders, share of the render", share, "share",
            f"<= {GOAL_SHARE:g}", share <= GOAL_SHARE,
            f"{share * render * 1000:.0f} ms of a {render * 1000:.0f} ms render",
            raw={"manifest_bytes": len(manifest), "renders": summary_ms(render_s), "shares": shares,
                 "idle": summary_ms(idle), "during": summary_ms(during)},
            summary="desk: slowest request while a 1 MiB review renders"),
        Row("desk", "request p50 during a render vs idle", during_p50 / idle_p50, "x",
            detail=f"{during_p50 * 1000:.1f} ms vs {idle_p50 * 1000:.1f} ms"),
    ]
