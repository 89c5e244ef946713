"""The real server over streamable HTTP: `python -m ito_training_mcp --transport streamable-http` as a
subprocess on a free loopback port, pointed at the reference backend, and every tool called through
`Client("http://127.0.0.1:N/mcp")` in both protocol eras (2026-07-28 via "auto", 2025-11-25 via
"legacy"). One server process serves both eras; each era makes its own run with its own keys and
confirmations. Readiness is a bounded poll of the port, never a fixed sleep.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from ito_training_mcp.tools.specs import ALL_TOOLS

from .conftest import EXAMPLE_MANIFEST, World

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
ERA_TIMEOUT_S = 30.0
ERA = {"auto": "2026-07-28", "legacy": "2025-11-25"}  # what each client mode must negotiate with this server


def free_port() -> int:
    """A port the kernel just handed out on loopback (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without any ITO_* setting, plus the given ones."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ITO_")} | extra


def wait_until_listening(proc: subprocess.Popen[bytes], port: int, stderr_path: Path) -> None:
    """Bounded readiness poll: connect to the port until it accepts, the process dies, or time runs out."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode} before listening:\n"
                                 + stderr_path.read_text(errors="replace"))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"the server did not listen on port {port} within {READY_TIMEOUT_S} s") from None
            time.sleep(0.05)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_S)


@pytest.fixture(scope="module")
def http_world() -> Iterator[World]:
    from ito_training_reference import ReferenceBackend

    with ReferenceBackend() as backend:
        yield World(backend)


@pytest.fixture(scope="module")
def http_manifest(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("http-manifests")
    directory.chmod(0o700)
    path = directory / "manifest.json"
    path.write_bytes(EXAMPLE_MANIFEST.read_bytes())
    path.chmod(0o600)
    return str(path)


@pytest.fixture(scope="module")
def http_server(http_world: World, http_manifest: str,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The server subprocess on a free port, reading manifests under the test manifest's directory;
    yields its /mcp URL and the file its stderr goes to."""
    port = free_port()
    stderr_path = tmp_path_factory.mktemp("http-server") / "stderr.log"
    env = server_env({**http_world.env, "ITO_TRAINING_POLL_INTERVAL_S": "0.05",
                      "ITO_TRAINING_MANIFEST_ROOTS": str(Path(http_manifest).parent)})
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ito_training_mcp", "--transport", "streamable-http",
             "--host", "127.0.0.1", "--port", str(port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
        )
    try:
        wait_until_listening(proc, port, stderr_path)
        yield f"http://127.0.0.1:{port}/mcp", stderr_path
    finally:
        stop(proc)


def envelope_of(world: World, result: Any) -> dict[str, Any]:
    """The tool result is a proper envelope: structuredContent, the same JSON as text, isError == not ok."""
    envelope = result.structured_content
    assert isinstance(envelope, dict), result
    assert {"ok", "live_api_contacted", "notice"} <= envelope.keys()
    assert isinstance(envelope["ok"], bool) and isinstance(envelope["live_api_contacted"], bool)
    assert isinstance(envelope["notice"], str) and envelope["notice"]
    assert result.is_error is (not envelope["ok"])
    assert ("data" in envelope) != ("error" in envelope)
    assert len(result.content) == 1 and json.loads(result.content[0].text) == envelope
    assert world.token not in json.dumps(envelope)
    return dict(envelope)


def new_key(label: str) -> str:
    return f"http-{label}-{uuid.uuid4().hex}"


def action_confirm(world: World, action: str, run_id: str) -> str:
    return str(world.op.confirmation(world.account, action, world.booking, "0.00", run_id=run_id)["ref"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_tool_over_streamable_http(
    mode: str, http_server: tuple[str, Path], http_world: World, http_manifest: str
) -> None:
    url, stderr_path = http_server
    world = http_world
    called: set[str] = set()

    with anyio.fail_after(ERA_TIMEOUT_S):
        async with Client(url, mode=mode) as client:

            async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                called.add(tool)
                envelope = envelope_of(world, await client.call_tool(tool, arguments))
                assert envelope["ok"] is True, (tool, envelope)
                return envelope

            assert client.protocol_version == ERA[mode]
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert listed == {spec.name for spec in ALL_TOOLS}

            check = await call("check_training_availability", {"booking_id": world.booking})
            assert check["live_api_contacted"] is True
            assert check["data"]["available"] is True and check["data"]["booking"]["eligible"] is True

            digest = await call("digest_manifest", {"manifest_path": http_manifest})
            assert digest["live_api_contacted"] is False
            sha256 = digest["data"]["sha256"]
            assert len(sha256) == 64

            key = new_key(f"submit-{mode}")
            submit_args = {"booking_id": world.booking, "manifest_path": http_manifest,
                           "confirmation_ref": world.confirm(sha256), "idempotency_key": key}
            created = await call("submit_training", submit_args)
            assert created["data"]["created"] is True and created["data"]["idempotency_key"] == key
            run_id = created["data"]["run_id"]
            again = await call("submit_training", submit_args)
            assert again["data"]["created"] is False and again["data"]["run_id"] == run_id
            assert world.backend.runs_for_key(world.account, key) == 1

            world.op.advance(run_id)  # the run starts: data_prep running, a log line written
            status = await call("training_status", {"run_id": run_id})
            assert status["data"]["run_id"] == run_id and status["data"]["state"] == "running"

            logs = await call("training_logs", {"run_id": run_id})
            assert logs["data"]["run_id"] == run_id and isinstance(logs["data"]["lines"], list)

            metrics = await call("training_metrics", {"run_id": run_id})
            assert metrics["data"]["run_id"] == run_id

            checkpoints = await call("list_checkpoints", {"run_id": run_id})
            assert checkpoints["data"]["run_id"] == run_id and isinstance(checkpoints["data"]["checkpoints"], list)

            # A restart the backend proposes after a loss spike, confirmed by the person (headless here).
            for _ in range(3):
                world.op.advance(run_id)  # data_prep and the ladder pass; sft runs
            proposal = world.op.spike(run_id)["proposed_actions"][0]
            restart_ref = world.op.confirmation(world.account, "training.restart", world.booking,
                                                proposal["repeated_cost_usd"], run_id=run_id,
                                                proposal_id=proposal["proposal_id"])["ref"]
            restarted = await call("restart_training", {"run_id": run_id, "confirmation_ref": restart_ref,
                                                        "idempotency_key": new_key(f"restart-{mode}")})
            assert restarted["data"]["action"] == "restart" and restarted["data"]["proposed_actions"] == []

            # The person's step: a plan and a cancel request, each decided by the person at the desk.
            plan = await call("plan_training", {"booking_id": world.booking, "manifest_path": http_manifest})
            request_id = plan["data"]["confirmation_request"]["request_id"]
            assert plan["data"]["valid"] is True and "elicitation" not in plan["data"]  # no capability declared
            opened = await call("request_confirmation", {"action": "training.cancel", "run_id": run_id})
            person = world.backend.person(world.account)
            await anyio.to_thread.run_sync(person.sign_in)
            await anyio.to_thread.run_sync(person.decline, request_id)
            cancel_ref = await anyio.to_thread.run_sync(person.confirm, opened["data"]["request_id"])
            declined = await call("confirmation_status", {"request_id": request_id, "wait_seconds": 5})
            assert declined["data"]["status"] == "declined"
            confirmed = await call("confirmation_status", {"request_id": opened["data"]["request_id"]})
            assert confirmed["data"]["confirmation_ref"] == cancel_ref
            cancelled = await call("cancel_training", {"run_id": run_id, "confirmation_ref": cancel_ref,
                                                       "idempotency_key": new_key(f"cancel-{mode}")})
            assert cancelled["data"]["action"] == "cancel" and cancelled["data"]["state"] == "cancelled"

            cleanup_ref = action_confirm(world, "training.cleanup", run_id)
            cleaned = await call("cleanup_training", {"run_id": run_id, "confirmation_ref": cleanup_ref,
                                                      "idempotency_key": new_key(f"cleanup-{mode}")})
            assert cleaned["data"]["action"] == "cleanup" and cleaned["data"]["booking_untouched"] is True
            assert cleaned["data"]["cleaned"]

    assert called == {spec.name for spec in ALL_TOOLS}
    assert world.token not in stderr_path.read_text(errors="replace")


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.com"])
def test_a_non_loopback_host_is_refused_fast(host: str) -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "ito_training_mcp", "--transport", "streamable-http", "--host", host,
         "--port", str(free_port())],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=server_env({}), timeout=30,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    assert "loopback" in proc.stderr
    assert elapsed < 5.0  # refused before the MCP SDK is even imported
