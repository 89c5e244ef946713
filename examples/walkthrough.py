"""A walkthrough with real processes: `ito-training backend` (the reference backend) in one process,
`ito-training-mcp` in another, and this script as the MCP client and the person at the desk.

    .venv/bin/python examples/walkthrough.py

Unlike `make demo` (which starts the reference backend in-process), everything here goes over real
sockets and pipes, exactly as a harness would run it. The backend's operator API (loopback only,
its own token in a 0600 file) stands in for what the person does at the Itô desk.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Desk:
    """The person's out-of-band actions, through the reference backend's operator API."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(base_url=f"{url}/operator", headers={"Authorization": f"Bearer {token}"}, timeout=10)

    def post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.http.post(path, json=body or {})
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result


def start_backend(workdir: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    port = free_port()
    token_file = workdir / "operator-token"
    process = subprocess.Popen(
        [str(BIN / "ito-training"), "backend", "--port", str(port), "--db", str(workdir / "backend.sqlite3"),
         "--operator-token-file", str(token_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # bounded readiness poll
        try:
            if httpx.get(f"{url}/v1/capabilities", timeout=1).status_code == 200 and token_file.exists():
                return process, url, token_file.read_text().strip()
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the reference backend did not start")


def step(name: str, envelope: dict[str, Any], *fields: str) -> dict[str, Any]:
    status = "ok" if envelope["ok"] else f"refused {envelope['error']['code']}"
    shown = {f: envelope["data"].get(f) for f in fields} if envelope["ok"] else {}
    print(f"{name:<44} {status:<28} {json.dumps(shown)}")
    return envelope


async def walk(url: str, desk: Desk, workdir: Path) -> bool:
    account = desk.post("/accounts")["account_id"]
    api_token = desk.post("/tokens", {"account_id": account})["token"]
    token_file = workdir / "ito-token"
    token_file.write_text(api_token)
    token_file.chmod(0o600)
    booking = desk.post("/bookings", {"account_id": account, "nodes": 2, "gpus_per_node": 8,
                                      "fabric": "infiniband"})["booking_id"]
    manifest = workdir / "manifest.json"
    shutil.copyfile(REPO / "examples" / "manifest.json", manifest)
    manifest.chmod(0o600)

    env = {"ITO_API_URL": url, "ITO_TOKEN_FILE": str(token_file)}
    params = StdioServerParameters(command=str(BIN / "ito-training-mcp"), env=env)
    async with Client(stdio_client(params)) as mcp:
        async def call(tool: str, **arguments: Any) -> dict[str, Any]:
            result = await mcp.call_tool(tool, arguments)
            assert result.structured_content is not None
            return result.structured_content

        step("check_training_availability", await call("check_training_availability", booking_id=booking),
             "available")
        digest = step("digest_manifest", await call("digest_manifest", manifest_path=str(manifest)), "sha256")
        sha = digest["data"]["sha256"]
        submit = {"booking_id": booking, "manifest_path": str(manifest), "idempotency_key": "walkthrough-run-0001"}
        step("submit_training (not yet confirmed)", await call("submit_training", confirmation_ref="", **submit))
        ref = desk.post("/confirmations", {"account_id": account, "action": "training.create", "booking_id": booking,
                                           "manifest_sha256": sha, "max_cost_usd": "1500.00"})["ref"]
        print(f"{'[desk] confirmed the digest':<44} {ref}")
        created = step("submit_training", await call("submit_training", confirmation_ref=ref, **submit),
                       "run_id", "created")
        run_id = created["data"]["run_id"]
        step("submit_training (again)", await call("submit_training", confirmation_ref=ref, **submit), "created")
        desk.post(f"/runs/{run_id}/advance")
        desk.post(f"/runs/{run_id}/advance")
        step("training_status", await call("training_status", run_id=run_id), "state")
        step("training_logs", await call("training_logs", run_id=run_id, limit=3), "next_cursor")
        step("training_metrics", await call("training_metrics", run_id=run_id), "step", "cost_usd_to_date")
        step("list_checkpoints", await call("list_checkpoints", run_id=run_id))
        cancel_ref = desk.post("/confirmations", {"account_id": account, "action": "training.cancel",
                                                  "booking_id": booking, "run_id": run_id,
                                                  "max_cost_usd": "0.00"})["ref"]
        cancelled = step("cancel_training", await call("cancel_training", run_id=run_id, confirmation_ref=cancel_ref,
                                                       idempotency_key="walkthrough-cancel-0001"), "state")
        cleanup_ref = desk.post("/confirmations", {"account_id": account, "action": "training.cleanup",
                                                   "booking_id": booking, "run_id": run_id,
                                                   "max_cost_usd": "0.00"})["ref"]
        cleaned = step("cleanup_training", await call("cleanup_training", run_id=run_id, confirmation_ref=cleanup_ref,
                                                      idempotency_key="walkthrough-cleanup-0001"),
                       "cleaned", "booking_untouched")
    return bool(created["data"]["created"] and cancelled["ok"] and cleaned["ok"]
                and cleaned["data"]["booking_untouched"])


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="ito-walkthrough-"))
    os.chmod(workdir, 0o700)
    process, url, operator_token = start_backend(workdir)
    try:
        print(f"reference backend (pid {process.pid}) at {url}; MCP server over stdio\n")
        ok = anyio.run(walk, url, Desk(url, operator_token), workdir)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    print("\nwalkthrough " + ("completed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
