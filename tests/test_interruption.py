"""A call cut short still leaves its audit line, and the CLI still ends with an envelope.

The attack (or accident): a submit cancelled by the MCP client (`notifications/cancelled`) or
interrupted with Ctrl-C while its create request is in flight created a run, but the audit trail
had no line for it and the CLI printed a traceback. The defence: the runner catches the
cancellation, writes the line shielded and bounded (`outcome: interrupted`, and
`submission_outcome: unknown` when a mutating request may have been sent), and re-raises; the CLI
turns the interrupt into a refusal envelope and exit code 1.

The stall is the reference backend's fault injection: a `delay` on the create holds the request
after the backend reserved its key, so the tests synchronise on the backend's in-flight view.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from ito_training_mcp.service import TrainingService

from .conftest import ClientFactory, World

CREATE = "POST /v1/training-runs"


def sha_of(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def audit_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def wait_for_request(world: World, fragment: str, timeout_s: float = 20.0) -> None:
    """Block until the backend has received a request whose path contains `fragment` (it logs on arrival)."""
    import time

    deadline = time.monotonic() + timeout_s
    while not any(fragment in r["path"] for r in world.op.requests()):
        assert time.monotonic() < deadline, f"the backend never saw {fragment}"
        time.sleep(0.02)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_submit_cancelled_by_the_client_is_audited_as_interrupted(
    connect: ClientFactory, world: World, manifest_path: str, tmp_path: Path
) -> None:
    trail = tmp_path / "audit.jsonl"
    key = f"cancelled-submit-{os.urandom(4).hex()}"
    ref = world.confirm(sha_of(manifest_path))
    world.op.fault(CREATE, "delay", seconds=30)
    service = world.service(ITO_TRAINING_AUDIT_LOG=str(trail), ITO_TRAINING_TIMEOUT_S="60")
    async with connect(service=service) as client:
        async with anyio.create_task_group() as tg:

            async def submit() -> None:
                await client.call_tool("submit_training", {
                    "booking_id": world.booking, "manifest_path": manifest_path, "confirmation_ref": ref,
                    "idempotency_key": key})

            tg.start_soon(submit)
            await anyio.to_thread.run_sync(world.op.wait_in_flight, key, 20.0)  # the create is stalled inside
            tg.cancel_scope.cancel()  # the client gives up: notifications/cancelled
        # The server keeps answering after the cancellation.
        status = (await client.call_tool("training_status", {"idempotency_key": key})).structured_content
        assert status is not None and status["ok"] is True, status
    interrupted = [e for e in audit_lines(trail) if e["tool"] == "submit_training"]
    assert len(interrupted) == 1, audit_lines(trail)
    line = interrupted[0]
    assert line["outcome"] == "interrupted"
    assert line["submission_outcome"] == "unknown"
    assert line["code"] == "SUBMISSION_OUTCOME_UNKNOWN" and line["ok"] is False
    assert line["idempotency_key"] == key and line["booking_id"] == world.booking
    assert line["live_api_contacted"] is True
    assert world.token not in trail.read_text()


async def test_a_call_cancelled_before_any_mutation_says_nothing_was_sent(
    world: World, manifest_path: str, tmp_path: Path
) -> None:
    trail = tmp_path / "audit.jsonl"
    key = f"cancelled-early-{os.urandom(4).hex()}"
    world.op.fault("GET /v1/me", "delay", seconds=30)
    seen: list[Any] = []
    service = TrainingService({**world.env, "ITO_TRAINING_AUDIT_LOG": str(trail), "ITO_TRAINING_TIMEOUT_S": "60"},
                              on_interrupted=seen.append)
    ref = world.confirm(sha_of(manifest_path))
    async with anyio.create_task_group() as tg:
        tg.start_soon(service.submit_training, world.booking, manifest_path, ref, key)
        await anyio.to_thread.run_sync(wait_for_request, world, "/v1/me")
        tg.cancel_scope.cancel()
    [line] = audit_lines(trail)
    assert line["outcome"] == "interrupted" and "submission_outcome" not in line
    assert line["code"] == "BACKEND_TIMEOUT"
    [envelope] = seen
    assert envelope.error.details == {"interrupted": True}
    assert world.backend.run_count() == 0


async def test_a_cancel_interrupted_in_flight_points_at_the_run_and_its_key(
    world: World, manifest_path: str, tmp_path: Path
) -> None:
    trail = tmp_path / "audit.jsonl"
    seen: list[Any] = []
    service = TrainingService({**world.env, "ITO_TRAINING_AUDIT_LOG": str(trail), "ITO_TRAINING_TIMEOUT_S": "60"},
                              on_interrupted=seen.append)
    created = await service.submit_training(world.booking, manifest_path, world.confirm(sha_of(manifest_path)),
                                            f"interrupt-cancel-submit-{os.urandom(4).hex()}")
    assert created.ok and created.data is not None, created.to_json()
    run_id = str(created.data["run_id"])
    ref = str(world.op.confirmation(world.account, "training.cancel", world.booking, "0.00", run_id=run_id)["ref"])
    key = f"interrupt-cancel-{os.urandom(4).hex()}"
    world.op.fault("POST /v1/training-runs/{run_id}/cancel", "delay", seconds=30)
    async with anyio.create_task_group() as tg:
        tg.start_soon(service.cancel_training, run_id, ref, key)
        await anyio.to_thread.run_sync(world.op.wait_in_flight, key, 20.0)
        tg.cancel_scope.cancel()
    [envelope] = seen
    assert envelope.error.code.value == "SUBMISSION_OUTCOME_UNKNOWN"
    assert f"run_id {run_id}" in envelope.notice and "cancel_training" in envelope.notice and key in envelope.notice
    line = audit_lines(trail)[-1]
    assert (line["tool"], line["outcome"], line["submission_outcome"]) == ("cancel_training", "interrupted", "unknown")
    assert line["action"] == "cancel" and line["idempotency_key"] == key


def _cli(env: dict[str, str], *argv: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    return subprocess.Popen(
        [sys.executable, "-c", "from ito_training_mcp.doors.cli.main import main; raise SystemExit(main())", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**clean, **env},
    )


@pytest.mark.parametrize("json_output", [True, False], ids=["json", "human"])
def test_ctrl_c_during_a_stalled_create_ends_with_an_envelope(
    world: World, manifest_path: str, tmp_path: Path, json_output: bool
) -> None:
    trail = tmp_path / "audit.jsonl"
    key = f"sigint-submit-{os.urandom(4).hex()}"
    ref = world.confirm(sha_of(manifest_path))
    world.op.fault(CREATE, "delay", seconds=30)
    env = {**world.env, "ITO_TRAINING_AUDIT_LOG": str(trail), "ITO_TRAINING_TIMEOUT_S": "60"}
    argv = ["train", "--booking", world.booking, "--manifest", manifest_path, "--confirmation-ref", ref,
            "--idempotency-key", key, *(["--json"] if json_output else [])]
    process = _cli(env, *argv)
    try:
        world.op.wait_in_flight(key, 20.0)  # the create is stalled inside the backend
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, stdout + stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    if json_output:
        envelope = json.loads(stdout)
        assert envelope["ok"] is False
        assert envelope["error"]["code"] == "SUBMISSION_OUTCOME_UNKNOWN"
        assert envelope["error"]["details"]["idempotency_key"] == key
        assert envelope["error"]["details"]["submission_outcome"] == "unknown"
        # The CLI names its own verb and flag, with the key filled in (tests/test_cli_next_steps.py).
        assert f"ito-training status --idempotency-key {key}" in envelope["notice"]
        assert "new key" in envelope["notice"]
    else:
        assert stdout.startswith("REFUSED SUBMISSION_OUTCOME_UNKNOWN")
        assert f"Next command: ito-training status --idempotency-key {key}" in stdout
    [line] = audit_lines(trail)
    assert (line["tool"], line["outcome"], line["submission_outcome"]) == ("submit_training", "interrupted", "unknown")
    assert world.token not in stdout + stderr + trail.read_text()


def test_ctrl_c_before_the_mutation_says_nothing_changed(world: World, manifest_path: str, tmp_path: Path) -> None:
    trail = tmp_path / "audit.jsonl"
    key = f"sigint-early-{os.urandom(4).hex()}"
    world.op.fault("GET /v1/bookings/{id}/training-eligibility", "delay", seconds=30)
    env = {**world.env, "ITO_TRAINING_AUDIT_LOG": str(trail), "ITO_TRAINING_TIMEOUT_S": "60"}
    process = _cli(env, "train", "--booking", world.booking, "--manifest", manifest_path, "--confirmation-ref",
                   "cf-1", "--idempotency-key", key, "--json")
    try:
        wait_for_request(world, "/training-eligibility")
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, stdout + stderr
    assert "Traceback" not in stderr, stderr
    envelope = json.loads(stdout)
    assert envelope["error"]["details"] == {"interrupted": True}
    assert "Nothing was created" in envelope["error"]["message"]
    [line] = audit_lines(trail)
    assert line["outcome"] == "interrupted" and "submission_outcome" not in line
    assert world.backend.run_count() == 0


def test_a_closed_stdout_is_not_a_traceback(manifest_path: str) -> None:
    """`ito-training digest ... | head -c 1`: the reader went away before the envelope was written."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    process = subprocess.Popen(
        [sys.executable, "-c", "from ito_training_mcp.doors.cli.main import main; raise SystemExit(main())",
         "digest", "--manifest", manifest_path, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # long before the interpreter has started and written anything
    stderr = process.stderr.read().decode()
    process.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert process.returncode == 1
