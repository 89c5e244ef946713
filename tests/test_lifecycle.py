"""The six lifecycle tools (contract §2, §3 "Cancel and cleanup", §7) through a real MCP client
against the reference backend on loopback.

Runs are created through `submit_training` and driven by the operator API (advance, fail_gate,
finish, revoke, faults); waits are synchronised on progress notifications and on the operator's
view of the backend, never on sleeps. The backend's request log and database are the judges of
what was sent and what changed.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import anyio
import pytest

from ito_training_mcp.doors.cli import main as cli
from ito_training_mcp.service import TrainingService
from ito_training_reference.harness import OperatorError

from .conftest import ClientFactory, World


@pytest.fixture
def mode() -> str:
    """Network behaviour does not depend on the MCP protocol era; the wait test runs in both eras."""
    return "auto"


RUN_PATH = "/v1/training-runs/{}"
CHECKPOINT_STORAGE = "s3://acme-ml-checkpoints/atlas-8b-support/"  # examples/manifest.json
STAGES = ["data_prep", "ladder", "sft", "dpo"]  # fine_tune on custom data, post_training sft, dpo
CANCEL_ROUTE = "POST /v1/training-runs/{run_id}/cancel"
WAIT_S = 20  # a wait that should never run out: the run is driven to its end from the progress callback

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


def new_key(label: str = "lifecycle") -> str:
    return f"{label}-{uuid.uuid4().hex}"


def unwrap(world: World, result: Any) -> dict[str, Any]:
    """The envelope of a tool result, checked for the MCP mapping and for the token."""
    envelope = result.structured_content
    assert envelope is not None
    assert result.is_error is (not envelope["ok"])
    assert json.loads(result.content[0].text) == envelope
    assert ("data" in envelope) != ("error" in envelope)
    assert world.token not in json.dumps(envelope)
    return dict(envelope)


async def call(connect: ClientFactory, world: World, tool: str, arguments: dict[str, Any], *,
               service: TrainingService | None = None, progress: Progress | None = None) -> dict[str, Any]:
    async with connect(service=service or world.service()) as client:
        result = await client.call_tool(tool, arguments, progress_callback=progress)
    return unwrap(world, result)


async def create_run(connect: ClientFactory, world: World, manifest_path: str, key: str | None = None) -> str:
    """digest -> the user confirms the digest -> submit; returns the new run's id."""
    key = key or new_key("submit")
    async with connect(service=world.service()) as client:
        digest = unwrap(world, await client.call_tool("digest_manifest", {"manifest_path": manifest_path}))
        ref = world.confirm(digest["data"]["sha256"])
        submitted = unwrap(world, await client.call_tool("submit_training", {
            "booking_id": world.booking, "manifest_path": manifest_path, "confirmation_ref": ref,
            "idempotency_key": key,
        }))
    assert submitted["ok"] is True, submitted
    assert submitted["data"]["created"] is True
    return str(submitted["data"]["run_id"])


def action_confirm(world: World, action: str, run_id: str | None, *, expires_in_s: float = 600) -> str:
    """The user's out-of-band confirmation of a cancel or cleanup of one run."""
    return str(world.op.confirmation(world.account, action, world.booking, "0.00", run_id=run_id,
                                     expires_in_s=expires_in_s)["ref"])


def mutation_args(run_id: str, ref: str, key: str) -> dict[str, Any]:
    return {"run_id": run_id, "confirmation_ref": ref, "idempotency_key": key}


def op_run(world: World, run_id: str) -> dict[str, Any]:
    return next(r for r in world.op.runs() if r["run_id"] == run_id)


def confirmation_row(world: World, ref: str) -> dict[str, Any]:
    return world.backend.query("SELECT consumed_at, consumed_by FROM confirmations WHERE ref = ?", (ref,))[0]


def posts(world: World) -> list[dict[str, Any]]:
    return [r for r in world.backend_requests() if r["method"] == "POST"]


def without_wait(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "wait"}


# ---------------------------------------------------------------------- training_status


async def test_status_by_run_id_and_by_key_is_the_backends_own_view(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    key = new_key("status")
    run_id = await create_run(connect, world, manifest_path, key)
    world.op.advance(run_id)
    world.op.advance(run_id)  # data_prep passed with evals, the ladder running

    by_id = await call(connect, world, "training_status", {"run_id": run_id})
    by_key = await call(connect, world, "training_status", {"idempotency_key": key})
    for envelope in (by_id, by_key):
        assert envelope["ok"] is True and envelope["live_api_contacted"] is True
        assert envelope["data"]["wait"]["requested_s"] == 0 and envelope["data"]["wait"]["timed_out"] is False
    assert without_wait(by_id["data"]) == without_wait(by_key["data"])

    data = by_id["data"]
    assert data["found"] is True and data["terminal"] is False and data["failed_gates"] == []
    assert data["booking_id"] == world.booking and data["run_id"] == run_id and data["idempotency_key"] == key
    assert re.fullmatch(r"[0-9a-f]{64}", data["manifest_sha256"])
    assert data["state"] == "running"
    backend_view = op_run(world, run_id)
    for name in ("run_id", "booking_id", "account_id", "manifest_sha256", "idempotency_key", "state"):
        assert data[name] == backend_view[name], name
    assert data["stages"] == backend_view["stages"]  # exactly as reported, JSON types included
    assert [s["name"] for s in data["stages"]] == STAGES
    assert data["stages"][0]["gate"]["status"] == "passed" and data["stages"][0]["gate"]["evals"]
    assert [s["gate"]["status"] for s in data["stages"][1:]] == ["pending", "pending", "pending"]
    assert [s["gate"]["battery"]["name"] for s in data["stages"]] == ["data-prep-v1", "ladder-150m-v1", "sft-v1",
                                                                     "dpo-v1"]
    assert data["proposed_actions"] == [] and data["interruptions"] == []


async def test_stage_evals_keep_the_backends_json_types(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.advance(run_id)
    world.op.advance(run_id)
    world.op.fail_gate(run_id, evals={"loss": 3.75, "tokens_seen": 1200})
    envelope = await call(connect, world, "training_status", {"run_id": run_id})
    assert envelope["data"]["stages"] == op_run(world, run_id)["stages"]


async def test_status_of_an_unused_key_is_found_false(connect: ClientFactory, world: World) -> None:
    envelope = await call(connect, world, "training_status", {"idempotency_key": new_key("never-used")})
    assert envelope["ok"] is True and envelope["live_api_contacted"] is True
    assert envelope["data"]["found"] is False
    assert envelope["data"]["run_id"] is None and envelope["data"]["state"] is None
    assert world.backend.run_count() == 0


BAD_STATUS_ARGUMENTS: list[dict[str, Any]] = [
    {},                                                              # neither
    {"run_id": "run_x", "idempotency_key": "a-key-of-sixteen-chars"},  # both
    {"wait_seconds": 5},                                             # still neither
    {"run_id": "run_x", "wait_seconds": 601},
    {"run_id": "run_x", "wait_seconds": -1},
]


async def test_status_arguments_are_checked_before_anything_is_sent(connect: ClientFactory, world: World) -> None:
    world.op.clear_requests()
    async with connect(service=world.service()) as client:
        for arguments in BAD_STATUS_ARGUMENTS:
            envelope = unwrap(world, await client.call_tool("training_status", arguments))
            assert envelope["error"]["code"] == "INVALID_INPUT", arguments
            assert envelope["error"]["gate"] == "input"
            assert envelope["live_api_contacted"] is False
    assert world.backend_requests() == []


async def test_another_tenants_run_is_indistinguishable_from_a_missing_one(
    connect: ClientFactory, backend: Any, world: World, manifest_path: str
) -> None:
    other = World(backend)  # a second account, token and booking on the same backend
    their_key = new_key("theirs")
    foreign = await create_run(connect, other, manifest_path, their_key)
    other.op.advance(foreign)
    before = op_run(world, foreign)
    missing = "run_does_not_exist_0001"
    for tool in ("training_status", "training_logs", "training_metrics", "list_checkpoints"):
        theirs = await call(connect, world, tool, {"run_id": foreign})
        nobodys = await call(connect, world, tool, {"run_id": missing})
        assert theirs["error"]["code"] == "RUN_NOT_FOUND", (tool, theirs)
        assert theirs["live_api_contacted"] is True
        assert theirs["error"] == nobodys["error"], tool
        assert theirs["notice"] == nobodys["notice"], tool
        assert foreign not in json.dumps(theirs)
    theirs = await call(connect, world, "training_status", {"idempotency_key": their_key})
    nobodys = await call(connect, world, "training_status", {"idempotency_key": new_key("nobodys")})
    assert theirs["data"]["found"] is False and nobodys["data"]["found"] is False
    assert theirs["notice"] == nobodys["notice"] and foreign not in json.dumps(theirs)
    # Even with a cancel confirmation this account holds for that id, nothing is learnt or changed.
    ref = action_confirm(world, "training.cancel", foreign)
    cancel = await call(connect, world, "cancel_training", mutation_args(foreign, ref, new_key("cancel")))
    assert cancel["error"]["code"] == "RUN_NOT_FOUND"
    assert op_run(world, foreign) == before
    # The owner still sees it.
    assert (await call(connect, other, "training_status", {"run_id": foreign}))["data"]["state"] == "running"


# ---------------------------------------------------------------------- waiting


@pytest.mark.parametrize(("mode", "outcome"), [("auto", "finish"), ("auto", "fail_gate"), ("legacy", "finish")])
async def test_wait_follows_the_run_to_its_end(
    connect: ClientFactory, world: World, manifest_path: str, outcome: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    seen: list[tuple[float, float | None, str | None]] = []
    drive = world.op.finish if outcome == "finish" else world.op.fail_gate

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))
        if len(seen) == 1:  # the server has looked once: now the run moves on, behind its back
            await anyio.to_thread.run_sync(drive, run_id)

    started = time.monotonic()
    envelope = await call(connect, world, "training_status", {"run_id": run_id, "wait_seconds": WAIT_S},
                          progress=progress)
    elapsed = time.monotonic() - started
    state = "succeeded" if outcome == "finish" else "gate_failed"
    assert envelope["ok"] is True, envelope
    assert envelope["data"]["state"] == state and envelope["data"]["terminal"] is True
    assert envelope["data"]["wait"]["timed_out"] is False and envelope["data"]["wait"]["requested_s"] == WAIT_S
    assert elapsed < 5, elapsed
    assert len(seen) >= 2
    values = [v for v, _, _ in seen]
    assert all(a < b for a, b in itertools.pairwise(values)), values
    stages = len(envelope["data"]["stages"])
    assert all(total == stages for _, total, _ in seen)  # the bar is the run's stages, not the seconds waited
    if outcome == "finish":
        assert values[-1] == stages  # a finished run fills the bar
    else:
        assert values[-1] < 1  # the first stage's gate failed: no stage passed
    assert all(message and run_id in message for _, _, message in seen)
    assert "queued" in str(seen[0][2])
    assert state in str(seen[-1][2])
    assert world.token not in json.dumps(seen)


async def test_wait_ends_at_its_deadline_on_a_run_that_never_moves(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    started = time.monotonic()
    envelope = await call(connect, world, "training_status", {"run_id": run_id, "wait_seconds": 1},
                          progress=progress)
    elapsed = time.monotonic() - started
    assert envelope["ok"] is True
    assert envelope["data"]["wait"]["timed_out"] is True
    assert envelope["data"]["wait"]["waited_s"] >= 1
    assert envelope["data"]["state"] == "queued" and envelope["data"]["terminal"] is False
    assert "still in progress" in envelope["notice"]
    assert 1.0 <= elapsed < 2.5, elapsed
    assert seen and all(a < b for a, b in itertools.pairwise(seen)) and seen[-1] <= 1
    gets = [r for r in world.backend_requests() if r["path"] == RUN_PATH.format(run_id)]
    assert 2 <= len(gets) <= 40  # polled, with backoff, not spun


async def test_revocation_mid_wait_stops_at_once(connect: ClientFactory, world: World, manifest_path: str) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.clear_requests()
    revoked: list[bool] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        if not revoked:
            revoked.append(True)
            await anyio.to_thread.run_sync(world.op.revoke, world.token_id)

    started = time.monotonic()
    envelope = await call(connect, world, "training_status", {"run_id": run_id, "wait_seconds": WAIT_S},
                          progress=progress)
    assert time.monotonic() - started < 5
    assert envelope["error"]["code"] == "CREDENTIAL_REVOKED", envelope
    assert envelope["live_api_contacted"] is True
    assert envelope["error"]["retryable"] is False
    log = world.backend_requests()
    assert log[-1]["status"] == 401 and log[-1]["path"] == RUN_PATH.format(run_id)
    assert [r["status"] for r in log].count(401) == 1  # nothing was sent after the 401
    assert all(r["method"] == "GET" for r in log)
    assert "/v1/me" not in [r["path"] for r in log]  # no login, no identity probe


# ---------------------------------------------------------------------- a failed gate is final


async def test_a_failed_gate_is_reported_and_final(
    connect: ClientFactory, world: World, manifest_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    for _ in range(3):
        world.op.advance(run_id)  # data_prep and the ladder passed, sft running
    evals = {"loss": 3.75, "eval_loss": 4.5, "score/acme-support-heldout": 0.125}
    world.op.fail_gate(run_id, evals=evals)

    envelope = await call(connect, world, "training_status", {"run_id": run_id})
    assert envelope["ok"] is True
    data = envelope["data"]
    assert data["state"] == "gate_failed" and data["terminal"] is True
    assert data["failed_gates"] == ["sft"]
    sft = next(s for s in data["stages"] if s["name"] == "sft")
    assert sft["gate"]["status"] == "failed"
    assert {k: Decimal(str(v)) for k, v in sft["gate"]["evals"].items()} == {k: Decimal(str(v)) for k, v in evals.items()}
    assert data["stages"][0]["gate"]["status"] == "passed"
    assert [s["state"] for s in data["stages"]] == ["passed", "passed", "failed", "skipped"]
    assert data["stages"] == op_run(world, run_id)["stages"]
    assert "override" in envelope["notice"] and "failed_gates" in envelope["notice"]

    for name, value in world.env.items():
        monkeypatch.setenv(name, value)
    out, err = io.StringIO(), io.StringIO()
    code = await anyio.to_thread.run_sync(
        lambda: cli.run(["status", "--run", run_id, "--json"], stdout=out, stderr=err))
    assert code == 0, out.getvalue()
    printed = json.loads(out.getvalue())
    assert printed["ok"] is True
    assert printed["data"]["state"] == "gate_failed" and printed["data"]["failed_gates"] == ["sft"]
    assert without_wait(printed["data"]) == without_wait(data)
    assert world.token not in out.getvalue() + err.getvalue()

    with pytest.raises(OperatorError) as refused:
        world.op.advance(run_id)
    assert refused.value.status == 409
    again = await call(connect, world, "training_status", {"run_id": run_id})
    assert without_wait(again["data"]) == without_wait(data)


# ---------------------------------------------------------------------- logs


async def test_log_pages_hold_every_line_exactly_once_in_order(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.advance(run_id)
    world.op.advance(run_id)
    world.op.finish(run_id)
    everything = await call(connect, world, "training_logs", {"run_id": run_id, "limit": 1000})
    assert everything["ok"] is True and everything["data"]["next_cursor"] is None
    lines = everything["data"]["lines"]
    assert len(lines) >= 10
    assert all(set(line) == {"ts", "stage", "message"} for line in lines)
    assert lines[-1]["message"].endswith("run succeeded")
    stored = world.backend.query("SELECT message FROM run_logs WHERE run_id = ? ORDER BY id", (run_id,))
    assert [line["message"] for line in lines] == [row["message"] for row in stored]

    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    async with connect(service=world.service()) as client:
        while True:
            arguments: dict[str, Any] = {"run_id": run_id, "limit": 3}
            if cursor is not None:
                arguments["cursor"] = cursor
            page = unwrap(world, await client.call_tool("training_logs", arguments))
            assert page["ok"] is True, page
            pages += 1
            assert len(page["data"]["lines"]) <= 3
            seen.extend(page["data"]["lines"])
            cursor = page["data"]["next_cursor"]
            if cursor is None:
                assert "latest" in page["notice"]
                break
            assert "next_cursor" in page["notice"]
            assert pages < 100
    assert seen == lines
    assert pages == -(-len(lines) // 3)


BAD_LOG_ARGUMENTS: list[tuple[dict[str, Any], str]] = [
    ({"cursor": "not a cursor!"}, "cursor"),
    ({"cursor": "x" * 513}, "cursor"),
    ({"limit": 0}, "limit"),
    ({"limit": 1001}, "limit"),
    ({"limit": "ten"}, "limit"),
    ({"limit": True}, "limit"),
]


async def test_bad_log_paging_arguments_are_refused_locally(connect: ClientFactory, world: World) -> None:
    world.op.clear_requests()
    async with connect(service=world.service()) as client:
        for arguments, argument in BAD_LOG_ARGUMENTS:
            envelope = unwrap(world, await client.call_tool("training_logs", {"run_id": "run_anything", **arguments}))
            assert envelope["error"]["code"] == "INVALID_INPUT", arguments
            assert envelope["error"]["details"]["argument"] == argument
            assert envelope["live_api_contacted"] is False
    assert world.backend_requests() == []


async def test_a_cursor_the_backend_calls_malformed_is_invalid_input(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    envelope = await call(connect, world, "training_logs", {"run_id": run_id, "cursor": "not-a-cursor"})
    assert envelope["error"]["code"] == "INVALID_INPUT"


async def test_a_token_in_a_log_line_is_redacted(connect: ClientFactory, world: World, manifest_path: str) -> None:
    run_id = await create_run(connect, world, manifest_path)
    leaked = "ghp_" + "Zq7Xw2Lk9Pm4Rt6Yv8Bn1Cd3Fg5Hj0Ks2Ld4"
    assert len(leaked) == 40 and leaked[4:].isalnum()
    world.op.fault("GET /v1/training-runs/{run_id}/logs", "json_patch", patch={"lines": [
        {"ts": "2026-11-29T20:00:00Z", "stage": "sft", "message": f"pushing with token {leaked} to the hub"},
        {"ts": "2026-11-29T20:00:01Z", "stage": "sft", "message": "an ordinary line"},
    ]})
    envelope = await call(connect, world, "training_logs", {"run_id": run_id})
    assert envelope["ok"] is True
    assert leaked not in json.dumps(envelope)
    first, second = envelope["data"]["lines"]
    assert "redacted" in first["message"] and first["stage"] == "sft"
    assert second["message"] == "an ordinary line"


# ---------------------------------------------------------------------- metrics and checkpoints


async def test_metrics_and_checkpoints_after_advancing(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    for _ in range(4):  # start, pass data_prep, pass the ladder, pass sft
        world.op.advance(run_id)
    metrics = await call(connect, world, "training_metrics", {"run_id": run_id})
    assert metrics["ok"] is True and metrics["live_api_contacted"] is True
    m = metrics["data"]
    assert m["run_id"] == run_id
    for name in ("goodput", "interruption_rate", "checkpoint_bandwidth_gbps", "loss"):
        assert isinstance(m[name], float), name
    assert isinstance(m["step"], int) and not isinstance(m["step"], bool) and m["step"] > 0
    assert isinstance(m["cost_usd_to_date"], str)
    assert re.fullmatch(r"[0-9]+(\.[0-9]+)?", m["cost_usd_to_date"])
    assert Decimal("0") < Decimal(m["cost_usd_to_date"]) <= Decimal("1200.00")

    found = await call(connect, world, "list_checkpoints", {"run_id": run_id})
    assert found["ok"] is True
    checkpoints = found["data"]["checkpoints"]
    assert len(checkpoints) == 2
    for c in checkpoints:
        assert set(c) >= {"checkpoint_id", "step", "created_at", "size_bytes", "uri"}
        assert isinstance(c["step"], int) and isinstance(c["size_bytes"], int) and c["size_bytes"] > 0
        assert c["uri"].startswith(CHECKPOINT_STORAGE), c["uri"]
        assert run_id in c["uri"]
    assert [c["step"] for c in checkpoints] == sorted(c["step"] for c in checkpoints)
    assert checkpoints[-1]["step"] == m["step"]


# ---------------------------------------------------------------------- cancel_training


async def test_cancel_without_a_confirmation_sends_nothing(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.clear_requests()
    envelope = await call(connect, world, "cancel_training", mutation_args(run_id, "", new_key("cancel")))
    assert envelope["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert envelope["live_api_contacted"] is False
    assert world.backend_requests() == []
    assert op_run(world, run_id)["state"] == "queued"


async def test_cancel_with_an_expired_confirmation_changes_nothing(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    ref = action_confirm(world, "training.cancel", run_id, expires_in_s=-1)
    world.op.clear_requests()
    envelope = await call(connect, world, "cancel_training", mutation_args(run_id, ref, new_key("cancel")))
    assert envelope["error"]["code"] == "CONFIRMATION_EXPIRED"
    assert envelope["live_api_contacted"] is True
    assert [(r["path"], r["status"]) for r in posts(world)] == [(RUN_PATH.format(run_id) + "/cancel", 410)]
    assert op_run(world, run_id)["state"] == "queued"
    assert confirmation_row(world, ref)["consumed_at"] is None


async def test_cancel_confirmations_are_bound_to_action_and_run(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    other_run = await create_run(connect, world, manifest_path)
    submit_ref = world.backend.query("SELECT ref FROM confirmations WHERE consumed_by = ?", (run_id,))[0]["ref"]
    wrong = {
        "action": action_confirm(world, "training.cleanup", run_id),
        "run": action_confirm(world, "training.cancel", other_run),
        "action-submit": submit_ref,
    }
    world.op.clear_requests()
    for reason, ref in wrong.items():
        envelope = await call(connect, world, "cancel_training", mutation_args(run_id, ref, new_key("cancel")))
        assert envelope["error"]["code"] == "CONFIRMATION_MISMATCH", (reason, envelope)
        assert envelope["error"]["gate"] == "confirmation"
        assert envelope["error"]["details"]["reason"] == reason.split("-")[0]
    assert posts(world) == []
    assert op_run(world, run_id)["state"] == "queued" and op_run(world, other_run)["state"] == "queued"


async def test_cancel_then_replay_then_reuse(connect: ClientFactory, world: World, manifest_path: str) -> None:
    run_a = await create_run(connect, world, manifest_path)
    run_b = await create_run(connect, world, manifest_path)
    world.op.advance(run_a)
    key, ref = new_key("cancel"), action_confirm(world, "training.cancel", run_a)

    cancelled = await call(connect, world, "cancel_training", mutation_args(run_a, ref, key))
    assert cancelled["ok"] is True, cancelled
    data = cancelled["data"]
    assert data["state"] == "cancelled" and data["run_id"] == run_a
    assert data["action"] == "cancel" and data["recovered_after_ambiguous_response"] is False
    assert "booking" in cancelled["notice"]
    assert op_run(world, run_a)["state"] == "cancelled"
    assert all(s["state"] in ("skipped", "passed") for s in op_run(world, run_a)["stages"])
    assert confirmation_row(world, ref)["consumed_by"] == run_a

    replay = await call(connect, world, "cancel_training", mutation_args(run_a, ref, key))
    assert replay["ok"] is True
    assert replay["data"] == data

    world.op.clear_requests()
    reused = await call(connect, world, "cancel_training", mutation_args(run_a, ref, new_key("cancel")))
    assert reused["error"]["code"] == "CONFIRMATION_CONSUMED"
    on_b = await call(connect, world, "cancel_training", mutation_args(run_b, ref, new_key("cancel")))
    assert on_b["error"]["code"] == "CONFIRMATION_MISMATCH"
    assert [r["path"] for r in posts(world)] == [RUN_PATH.format(run_a) + "/cancel"]  # none for run B
    assert op_run(world, run_b)["state"] == "queued"

    again = await call(connect, world, "cancel_training",
                       mutation_args(run_a, action_confirm(world, "training.cancel", run_a), new_key("cancel")))
    assert again["error"]["code"] == "RUN_NOT_CANCELLABLE"
    cancelled_lines = world.backend.query(
        "SELECT COUNT(*) AS n FROM run_logs WHERE run_id = ? AND message LIKE 'run cancelled%'", (run_a,))
    assert cancelled_lines[0]["n"] == 1


async def test_a_cancel_result_names_the_cancels_own_key(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    key = new_key("cancel")
    envelope = await call(connect, world, "cancel_training",
                          mutation_args(run_id, action_confirm(world, "training.cancel", run_id), key))
    assert envelope["ok"] is True
    assert envelope["data"]["idempotency_key"] == key


async def test_a_cancel_replayed_after_cleanup_returns_its_first_answer(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    key, ref = new_key("cancel"), action_confirm(world, "training.cancel", run_id)
    first = await call(connect, world, "cancel_training", mutation_args(run_id, ref, key))
    cleaned = await call(connect, world, "cleanup_training", mutation_args(
        run_id, action_confirm(world, "training.cleanup", run_id), new_key("cleanup")))
    assert cleaned["ok"] is True
    replay = await call(connect, world, "cancel_training", mutation_args(run_id, ref, key))
    assert replay["ok"] is True
    assert replay["data"]["state"] == first["data"]["state"] == "cancelled"
    assert replay["data"]["updated_at"] == first["data"]["updated_at"]


async def test_a_finished_run_is_not_cancellable(connect: ClientFactory, world: World, manifest_path: str) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.finish(run_id)
    ref = action_confirm(world, "training.cancel", run_id)
    envelope = await call(connect, world, "cancel_training", mutation_args(run_id, ref, new_key("cancel")))
    assert envelope["error"]["code"] == "RUN_NOT_CANCELLABLE"
    assert envelope["live_api_contacted"] is True
    assert op_run(world, run_id)["state"] == "succeeded"
    assert confirmation_row(world, ref)["consumed_at"] is None


async def test_lifecycle_refusals_give_a_lifecycle_next_step(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.advance(run_id)
    notices: dict[str, str] = {}
    for label, tool, ref in [
        ("cancel-required", "cancel_training", ""),
        ("cancel-expired", "cancel_training", action_confirm(world, "training.cancel", run_id, expires_in_s=-1)),
        ("cancel-mismatch", "cancel_training", action_confirm(world, "training.cleanup", run_id)),
        ("cleanup-run-active", "cleanup_training", action_confirm(world, "training.cleanup", run_id)),
    ]:
        envelope = await call(connect, world, tool, mutation_args(run_id, ref, new_key("next-step")))
        assert envelope["ok"] is False
        notices[label] = envelope["notice"]
    for label, notice in notices.items():
        assert "submit_training" not in notice and "digest" not in notice, (label, notice)
        assert "manifest" not in notice, (label, notice)


# ---------------------------------------------------------------------- an ambiguous cancel


@pytest.mark.parametrize(("kind", "params"), [
    ("drop", {"when": "after"}),
    ("drop", {"when": "before"}),
    ("error", {"status": 503, "when": "after"}),
], ids=["drop-after", "drop-before", "503-after"])
async def test_an_ambiguous_cancel_takes_effect_exactly_once(
    connect: ClientFactory, world: World, manifest_path: str, kind: str, params: dict[str, Any]
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.advance(run_id)
    key, ref = new_key("cancel"), action_confirm(world, "training.cancel", run_id)
    world.op.fault(CANCEL_ROUTE, kind, **params)
    world.op.clear_requests()
    envelope = await call(connect, world, "cancel_training", mutation_args(run_id, ref, key))
    assert envelope["ok"] is True, envelope
    assert envelope["data"]["state"] == "cancelled"
    assert envelope["data"]["recovered_after_ambiguous_response"] is True
    cancel_posts = posts(world)
    assert len(cancel_posts) == 2 and {r["idempotency_key"] for r in cancel_posts} == {key}
    assert_cancelled_once(world, run_id, ref, key)


async def test_a_cancel_that_stays_ambiguous_is_outcome_unknown(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    key, ref = new_key("cancel"), action_confirm(world, "training.cancel", run_id)
    world.op.fault(CANCEL_ROUTE, "drop", times=20, when="after")
    world.op.clear_requests()
    envelope = await call(connect, world, "cancel_training", mutation_args(run_id, ref, key))
    assert envelope["error"]["code"] == "SUBMISSION_OUTCOME_UNKNOWN", envelope
    assert "training_status" in envelope["notice"]
    assert envelope["error"]["details"]["idempotency_key"] == key
    cancel_posts = posts(world)
    assert 2 <= len(cancel_posts) <= 11 and {r["idempotency_key"] for r in cancel_posts} == {key}
    assert_cancelled_once(world, run_id, ref, key)
    world.op.clear_faults()
    status = await call(connect, world, "training_status", {"run_id": run_id})
    assert status["data"]["state"] == "cancelled"


def assert_cancelled_once(world: World, run_id: str, ref: str, key: str) -> None:
    assert op_run(world, run_id)["state"] == "cancelled"
    lines = world.backend.query(
        "SELECT COUNT(*) AS n FROM run_logs WHERE run_id = ? AND message LIKE 'run cancelled%'", (run_id,))
    assert lines[0]["n"] == 1
    assert confirmation_row(world, ref)["consumed_by"] == run_id
    keys = world.backend.query("SELECT action FROM idempotency WHERE idempotency_key = ?", (key,))
    assert keys == [{"action": "training.cancel"}]


# ---------------------------------------------------------------------- cleanup_training


async def test_cleanup_refuses_a_run_that_is_still_active(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.advance(run_id)
    ref = action_confirm(world, "training.cleanup", run_id)
    envelope = await call(connect, world, "cleanup_training", mutation_args(run_id, ref, new_key("cleanup")))
    assert envelope["error"]["code"] == "VALIDATION_REJECTED"
    assert envelope["error"]["details"]["reason"] == "run_active"
    assert op_run(world, run_id)["state"] == "running"
    assert confirmation_row(world, ref)["consumed_at"] is None


@pytest.mark.parametrize("ending", ["finish", "cancel"])
async def test_cleanup_after_the_end_never_touches_the_booking(
    connect: ClientFactory, world: World, manifest_path: str, ending: str
) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.advance(run_id)
    if ending == "finish":
        world.op.finish(run_id)
    else:
        cancelled = await call(connect, world, "cancel_training", mutation_args(
            run_id, action_confirm(world, "training.cancel", run_id), new_key("cancel")))
        assert cancelled["ok"] is True
    booking_before = world.op.get_booking(world.booking)
    eligibility_before = await call(connect, world, "check_training_availability", {"booking_id": world.booking})
    assert eligibility_before["ok"] is True

    key, ref = new_key("cleanup"), action_confirm(world, "training.cleanup", run_id)
    cleaned = await call(connect, world, "cleanup_training", mutation_args(run_id, ref, key))
    assert cleaned["ok"] is True, cleaned
    data = cleaned["data"]
    assert data["cleaned"] and all(isinstance(item, str) for item in data["cleaned"])
    assert data["booking_untouched"] is True and data["run_id"] == run_id and data["action"] == "cleanup"
    assert "booking" in cleaned["notice"]
    assert op_run(world, run_id)["state"] == "cleaned_up"

    booking_after = world.op.get_booking(world.booking)
    assert booking_after["state"] == booking_before["state"] == "completed"
    assert booking_after["updated_at_epoch"] == booking_before["updated_at_epoch"]
    assert booking_after == booking_before
    eligibility_after = await call(connect, world, "check_training_availability", {"booking_id": world.booking})
    assert eligibility_after["ok"] is True

    def answer(envelope: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in envelope["data"]["booking"].items() if k != "checked_at"}

    assert answer(eligibility_after) == answer(eligibility_before)
    assert answer(eligibility_after)["eligible"] is True

    replay = await call(connect, world, "cleanup_training", mutation_args(run_id, ref, key))
    assert replay["ok"] is True
    assert replay["data"]["cleaned"] == data["cleaned"]
    assert replay["data"] == data
    assert world.backend.query("SELECT COUNT(*) AS n FROM idempotency WHERE idempotency_key = ?", (key,))[0]["n"] == 1


async def test_cleanup_needs_its_own_confirmation(connect: ClientFactory, world: World, manifest_path: str) -> None:
    run_id = await create_run(connect, world, manifest_path)
    world.op.finish(run_id)
    world.op.clear_requests()
    cancel_ref = action_confirm(world, "training.cancel", run_id)
    envelope = await call(connect, world, "cleanup_training", mutation_args(run_id, cancel_ref, new_key("cleanup")))
    assert envelope["error"]["code"] == "CONFIRMATION_MISMATCH"
    assert envelope["error"]["details"]["reason"] == "action"
    empty = await call(connect, world, "cleanup_training", mutation_args(run_id, "", new_key("cleanup")))
    assert empty["error"]["code"] == "CONFIRMATION_REQUIRED" and empty["live_api_contacted"] is False
    assert posts(world) == []
    assert op_run(world, run_id)["state"] == "succeeded"
