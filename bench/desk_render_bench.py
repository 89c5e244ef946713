"""Another request's latency while the desk renders a 1 MiB manifest's review page.

    .venv/bin/python bench/desk_render_bench.py            # prints the rows, writes nothing
    .venv/bin/python bench/desk_render_bench.py --quick

The reference backend runs as its own process (`python -m ito_training_reference`), as in use; this
process is the clients: a person who opens the review page of a plan whose manifest is just under
1 MiB, and, at the same time, an agent asking `GET /v1/capabilities` over and over until the page
has arrived. The baseline is the same request's latency with nothing else going on, measured in
the same run. The review is rendered in a worker thread of the backend, so the event loop keeps
answering: the request waits for the GIL (which the render hands over every few milliseconds),
never for the whole render. The row with a goal is the slowest request during a render as a share
of that render: 1.0 when the loop renders (the request waits for all of it), a few hundredths off it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from common import Result, Row, ratio, summary
from digest_bench import MIB, long_references_manifest

from ito_training_reference import OperatorClient, Person, reviews
from ito_training_reference.store import Store

READY_TIMEOUT_S = 30.0
GOAL_SHARE = 0.25  # the slowest request while a page renders, against the render itself


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
            time.sleep(0.05)


def _review_request(db: str, account: str, booking: str, manifest: bytes) -> str:
    """A pending create request over `manifest`, written into the backend's database."""
    store = Store(db)
    try:
        checks = [{"name": n, "status": "passed", "reason": None, "message": None}
                  for n in ("manifest", "capacity", "fabric", "data_policy", "checkpoint_storage", "budget")]
        _, request = reviews.create_plan(
            store, account_id=account, booking_id=booking, manifest_sha256=hashlib.sha256(manifest).hexdigest(),
            manifest=manifest, checks=checks, estimate={"usd": "1.00", "gpu_hours": 1.0, "basis": "bench"},
            max_cost_usd="1200.00")
        assert request is not None
        return str(request["request_id"])
    finally:
        store.close()


def bench_desk_render(quick: bool = False) -> Result:
    renders, idle_n = (3, 50) if quick else (8, 200)
    manifest = long_references_manifest(MIB - 256)
    with tempfile.TemporaryDirectory(prefix="ito-desk-bench-") as tmp:
        db, port = str(Path(tmp) / "backend.sqlite3"), _free_port()
        proc = _start(db, port)
        url = f"http://127.0.0.1:{port}"
        try:
            op = OperatorClient(url, Path(db + ".operator-token").read_text().strip())
            account = op.account()
            booking = op.booking(account, nodes=2)["booking_id"]
            page = f"/desk/requests/{_review_request(db, account, booking, manifest)}"
            person = Person(str(op.login_link(account)["url"])).sign_in()
            with person, httpx.Client(base_url=url, trust_env=False) as agent:
                def ask() -> float:
                    started = time.perf_counter()
                    assert agent.get("/v1/capabilities").status_code == 200
                    return (time.perf_counter() - started) * 1000

                for _ in range(10):
                    ask()  # warm
                idle = [ask() for _ in range(idle_n)]
                render_ms: list[float] = []
                during: list[float] = []
                slowest: list[float] = []

                def open_page(done: threading.Event, timing: list[float]) -> None:
                    started = time.perf_counter()
                    try:
                        assert person.get(page).status_code == 200
                    finally:
                        timing.append((time.perf_counter() - started) * 1000)
                        done.set()

                for _ in range(renders):
                    done = threading.Event()
                    timing: list[float] = []
                    reader = threading.Thread(target=open_page, args=(done, timing))
                    reader.start()
                    these: list[float] = []
                    while not done.is_set():
                        these.append(ask())
                    reader.join()
                    render_ms += timing
                    during += these
                    slowest.append(max(these) / timing[0])
            op.close()
        finally:
            proc.terminate()
            proc.wait(10)
    idle_median, during_median = statistics.median(idle), statistics.median(during)
    share, render_median = statistics.median(slowest), statistics.median(render_ms)
    rows = [
        Row("the slowest GET /v1/capabilities while a 1 MiB review page renders, as a share of that render "
            "(median of renders; 1.0: it waited for the whole render)", share * render_median, render_median, "ms",
            share, f"<= {GOAL_SHARE:g}", share <= GOAL_SHARE),
        Row("median (ms), GET /v1/capabilities while a 1 MiB review page renders; ratio to the same request idle "
            "(reported only: the GIL turns the render hands over)", during_median, idle_median, "ms",
            ratio(during_median, idle_median), "", None),
        Row("median (ms), the 1 MiB review page itself (reported only)", render_median, None, "ms", None, "", None),
    ]
    return Result("desk_render", "Another request while the desk renders a big review", rows,
                  raw={"idle_ms": summary(idle), "during_ms": summary(during), "render_ms": summary(render_ms),
                       "manifest_bytes": len(manifest), "requests_during": len(during)})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    result = bench_desk_render(quick=args.quick)
    for row in result.rows:
        shown = f"{row.subject:.3f} {row.unit}"
        if row.ratio is not None:
            shown += f" (baseline {row.baseline:.3f} {row.unit}, ratio {row.ratio:.3f})"
        verdict = "" if row.passed is None else (" ok" if row.passed else " MISSED")
        print(f"{row.measure}: {shown} goal {row.goal}{verdict}")
    print(json.dumps(result.raw, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
