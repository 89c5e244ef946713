"""The full gated submit (contract §3 gates 3-7) through a real MCP client against the reference
backend on loopback. Every refusal asserts its code, whether the backend was contacted, how many
requests reached it, and how many runs exist in its database afterwards."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from ito_training_mcp.backend import credentials
from ito_training_mcp.service import TrainingService

from .conftest import ClientFactory, World, WriteFile


@pytest.fixture
def mode() -> str:
    """Network behaviour does not depend on the MCP protocol era; both eras run in test_mcp_core and below."""
    return "auto"

KEY = "submit-flow-key-000001"


async def call(connect: ClientFactory, world: World, tool: str, arguments: dict[str, Any],
               **env: str) -> dict[str, Any]:
    async with connect(service=world.service(**env)) as client:
        result = await client.call_tool(tool, arguments)
    envelope = result.structured_content
    assert envelope is not None
    assert result.is_error is (not envelope["ok"])
    assert world.token not in json.dumps(envelope)
    return envelope


def submit_args(world: World, path: str, ref: str, key: str = KEY, booking: str | None = None) -> dict[str, Any]:
    return {"booking_id": booking or world.booking, "manifest_path": path, "confirmation_ref": ref,
            "idempotency_key": key}


def sha_of(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------- the happy path


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_full_flow_creates_exactly_one_run(connect: ClientFactory, world: World, manifest_path: str) -> None:
    check = await call(connect, world, "check_training_availability", {})
    assert check["ok"] is True and check["live_api_contacted"] is True
    assert check["data"]["available"] is True and check["data"]["booking"] is None

    eligible = await call(connect, world, "check_training_availability", {"booking_id": world.booking})
    assert eligible["ok"] is True
    assert eligible["data"]["booking"]["eligible"] is True
    assert eligible["data"]["booking"]["gpu_topology"] == {"gpu": "H100", "nodes": 2, "gpus_per_node": 8} or \
        eligible["data"]["booking"]["gpu_topology"]["nodes"] == 2

    digest = await call(connect, world, "digest_manifest", {"manifest_path": manifest_path})
    sha = digest["data"]["sha256"]

    world.op.clear_requests()
    unconfirmed = await call(connect, world, "submit_training", submit_args(world, manifest_path, ""))
    assert unconfirmed["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert unconfirmed["live_api_contacted"] is False
    assert world.backend_requests() == []

    ref = world.confirm(sha)
    first = await call(connect, world, "submit_training", submit_args(world, manifest_path, ref))
    assert first["ok"] is True, first
    data = first["data"]
    assert data["created"] is True
    assert data["manifest_sha256"] == sha and data["booking_id"] == world.booking
    assert data["idempotency_key"] == KEY and data["state"] == "queued"
    assert "stages" not in data  # training_status shows them

    again = await call(connect, world, "submit_training", submit_args(world, manifest_path, ref))
    assert again["ok"] is True
    assert again["data"]["created"] is False
    assert again["data"]["run_id"] == data["run_id"]
    assert world.backend.run_count() == 1
    consumed = world.backend.query("SELECT consumed_by FROM confirmations WHERE ref = ?", (ref,))
    assert consumed[0]["consumed_by"] is not None


async def test_the_bytes_sent_are_the_bytes_hashed(connect: ClientFactory, world: World, manifest_path: str) -> None:
    sent: list[dict[str, Any]] = []

    class Recording(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.method == "POST":
                sent.append(json.loads(request.content))
            return await super().handle_async_request(request)

    raw = Path(manifest_path).read_bytes()
    service = TrainingService(world.env, transport=Recording())
    async with connect(service=service) as client:
        result = await client.call_tool("submit_training", submit_args(world, manifest_path,
                                                                       world.confirm(hashlib.sha256(raw).hexdigest())))
    assert result.structured_content["ok"] is True
    assert len(sent) == 1
    assert base64.b64decode(sent[0]["manifest_b64"]) == raw
    assert sent[0]["manifest_sha256"] == hashlib.sha256(raw).hexdigest()


async def test_check_and_digest_never_create_a_workload(connect: ClientFactory, world: World,
                                                        manifest_path: str) -> None:
    for _ in range(3):
        assert (await call(connect, world, "check_training_availability", {"booking_id": world.booking}))["ok"]
        assert (await call(connect, world, "digest_manifest", {"manifest_path": manifest_path}))["ok"]
    assert world.backend.run_count() == 0
    methods = {r["method"] for r in world.backend_requests()}
    assert methods == {"GET"}


# ---------------------------------------------------------------------- gates 3 and auth


@pytest.fixture
def credential_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    real = credentials.resolve_credential

    def counting(env: Any) -> Any:
        reads.append(1)
        return real(env)

    monkeypatch.setattr(credentials, "resolve_credential", counting)
    return reads


@pytest.mark.parametrize(("available", "operations", "code"), [
    (False, ["create", "status", "logs", "metrics", "checkpoints", "cancel", "cleanup"], "TRAINING_UNAVAILABLE"),
    (True, ["create", "status", "logs", "metrics"], "LIFECYCLE_INCOMPLETE"),
])
async def test_capabilities_gate_refuses_before_the_credential(
    connect: ClientFactory, world: World, manifest_path: str, credential_reads: list[int],
    available: bool, operations: list[str], code: str,
) -> None:
    world.op.capabilities(available, operations)
    world.op.clear_requests()
    for tool, args in [("check_training_availability", {"booking_id": world.booking}),
                       ("submit_training", submit_args(world, manifest_path, "cf_x"))]:
        env = await call(connect, world, tool, args)
        assert env["error"]["code"] == code
        assert env["error"]["gate"] == "capabilities"
        assert env["live_api_contacted"] is True
    assert [r["path"] for r in world.backend_requests()] == ["/v1/capabilities", "/v1/capabilities"]
    assert credential_reads == []
    if code == "LIFECYCLE_INCOMPLETE":
        assert env["error"]["details"]["missing_operations"] == ["checkpoints", "cancel", "cleanup"]


async def test_no_credential_is_auth_missing_after_capabilities(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    world.op.clear_requests()
    env = await call(connect, world, "submit_training", submit_args(world, manifest_path, "cf_x"), ITO_API_KEY="")
    assert env["error"]["code"] == "AUTH_MISSING"
    assert [r["path"] for r in world.backend_requests()] == ["/v1/capabilities"]


async def test_token_file_is_used_when_it_is_safe(
    connect: ClientFactory, world: World, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(world.token + "\n")
    token_file.chmod(0o600)
    ok = await call(connect, world, "check_training_availability", {"booking_id": world.booking},
                    ITO_API_KEY="", ITO_TOKEN_FILE=str(token_file))
    assert ok["ok"] is True
    token_file.chmod(0o640)
    loose = await call(connect, world, "check_training_availability", {"booking_id": world.booking},
                       ITO_API_KEY="", ITO_TOKEN_FILE=str(token_file))
    assert loose["error"]["code"] == "AUTH_MISSING"
    assert loose["error"]["details"]["problem"] == "file_mode_0600"


async def test_unknown_token_is_auth_rejected(connect: ClientFactory, world: World) -> None:
    env = await call(connect, world, "check_training_availability", {"booking_id": world.booking},
                     ITO_API_KEY="not-a-real-token-1234")
    assert env["error"]["code"] == "AUTH_REJECTED"


async def test_revoked_token_is_credential_revoked_and_never_sent_again(
    connect: ClientFactory, world: World
) -> None:
    world.op.revoke(world.token_id)
    service = world.service()
    async with connect(service=service) as client:
        first = (await client.call_tool("check_training_availability", {"booking_id": world.booking}))
        world.op.clear_requests()
        second = (await client.call_tool("check_training_availability", {"booking_id": world.booking}))
    assert first.structured_content["error"]["code"] == "CREDENTIAL_REVOKED"
    assert second.structured_content["error"]["code"] == "CREDENTIAL_REVOKED"
    assert "/v1/me" not in [r["path"] for r in world.backend_requests()]


async def test_read_only_token_cannot_create(connect: ClientFactory, world: World, manifest_path: str) -> None:
    _, read_only = world.op.token(world.account, scopes=["training:read"])
    ref = world.confirm(sha_of(manifest_path))
    env = await call(connect, world, "submit_training", submit_args(world, manifest_path, ref), ITO_API_KEY=read_only)
    assert env["error"]["code"] == "AUTH_FORBIDDEN"
    assert world.backend.run_count() == 0


# ---------------------------------------------------------------------- gate 4 entitlement


async def test_another_tenants_booking_is_not_found(connect: ClientFactory, world: World) -> None:
    other = world.op.account()
    foreign = world.op.booking(other)["booking_id"]
    env = await call(connect, world, "check_training_availability", {"booking_id": foreign})
    assert env["error"]["code"] == "BOOKING_NOT_FOUND"
    assert env["error"]["gate"] == "entitlement"
    missing = await call(connect, world, "check_training_availability", {"booking_id": "bk_does_not_exist"})
    assert missing["error"]["code"] == "BOOKING_NOT_FOUND"


@pytest.mark.parametrize("state", ["expired", "revoked", "released", "incomplete"])
async def test_ineligible_booking_states(connect: ClientFactory, world: World, manifest_path: str, state: str) -> None:
    booking = world.op.booking(world.account, state=state)["booking_id"]
    ref = world.confirm(sha_of(manifest_path), booking=booking)
    world.op.clear_requests()
    env = await call(connect, world, "submit_training", submit_args(world, manifest_path, ref, booking=booking))
    assert env["error"]["code"] == "BOOKING_NOT_ELIGIBLE"
    assert env["error"]["details"]["reason"] == state
    paths = [r["path"] for r in world.backend_requests()]
    assert paths == ["/v1/capabilities", "/v1/me", f"/v1/bookings/{booking}/training-eligibility"]
    assert world.backend.run_count() == 0


async def test_stale_eligibility_is_refused(connect: ClientFactory, world: World) -> None:
    booking = world.op.booking(world.account, checked_at_offset_s=-900)["booking_id"]
    env = await call(connect, world, "check_training_availability", {"booking_id": booking})
    assert env["error"]["code"] == "ENTITLEMENT_STALE"
    assert env["error"]["details"]["age_s"] >= 899


@pytest.mark.parametrize(("patch", "reason"), [
    ({"account_id": "acct_someone_else"}, "mismatch"),
    ({"booking_id": "bk_another"}, "mismatch"),
    ({"term_ends_at": "2020-01-01T00:00:00Z"}, "expired"),
])
async def test_eligibility_not_bound_to_us_is_refused(
    connect: ClientFactory, world: World, patch: dict[str, Any], reason: str
) -> None:
    world.op.fault("GET /v1/bookings/{id}/training-eligibility", "json_patch", patch=patch)
    env = await call(connect, world, "check_training_availability", {"booking_id": world.booking})
    assert env["error"]["code"] == "BOOKING_NOT_ELIGIBLE"
    assert env["error"]["details"]["reason"] == reason


# ---------------------------------------------------------------------- gate 5 idempotency


async def test_same_key_with_another_manifest_is_a_conflict(
    connect: ClientFactory, world: World, manifest_path: str, write_file: WriteFile, example_document: dict[str, Any]
) -> None:
    first = await call(connect, world, "submit_training",
                       submit_args(world, manifest_path, world.confirm(sha_of(manifest_path))))
    assert first["ok"] is True
    other = write_file({**example_document, "description": "a different plan"})
    env = await call(connect, world, "submit_training", submit_args(world, other, world.confirm(sha_of(other))))
    assert env["error"]["code"] == "IDEMPOTENCY_CONFLICT"
    assert env["error"]["details"]["run_id"] == first["data"]["run_id"]
    assert world.backend.run_count() == 1


# ---------------------------------------------------------------------- gate 6 confirmation attacks


def _attack(world: World, sha: str, kind: str) -> str:
    if kind == "expired":
        return world.confirm(sha, expires_in_s=-1)
    if kind == "other_account":
        other = world.op.account()
        other_booking = world.op.booking(other)["booking_id"]
        return world.confirm(sha, account=other, booking=other_booking)
    if kind == "other_booking":
        return world.confirm(sha, booking=world.op.booking(world.account)["booking_id"])
    if kind == "other_digest":
        return world.confirm("0" * 64)
    if kind == "wrong_action":
        return world.confirm(sha, action="training.cancel")
    if kind == "cost_above_confirmed":
        return world.confirm(sha, max_cost="100.00")
    if kind == "unknown":
        return "cf_never_issued"
    raise AssertionError(kind)


@pytest.mark.parametrize(("kind", "code"), [
    ("expired", "CONFIRMATION_EXPIRED"),
    ("other_account", "CONFIRMATION_NOT_FOUND"),
    ("other_booking", "CONFIRMATION_MISMATCH"),
    ("other_digest", "DIGEST_MISMATCH"),
    ("wrong_action", "CONFIRMATION_MISMATCH"),
    ("cost_above_confirmed", "CONFIRMATION_MISMATCH"),
    ("unknown", "CONFIRMATION_NOT_FOUND"),
])
async def test_confirmation_attacks_create_nothing(
    connect: ClientFactory, world: World, manifest_path: str, kind: str, code: str
) -> None:
    ref = _attack(world, sha_of(manifest_path), kind)
    env = await call(connect, world, "submit_training", submit_args(world, manifest_path, ref))
    assert env["error"]["code"] == code
    assert env["error"]["gate"] == "confirmation"
    assert env["live_api_contacted"] is True
    assert "POST" not in {r["method"] for r in world.backend_requests()}
    assert world.backend.run_count() == 0


async def test_a_consumed_confirmation_cannot_be_replayed_for_a_new_run(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    ref = world.confirm(sha_of(manifest_path))
    assert (await call(connect, world, "submit_training", submit_args(world, manifest_path, ref)))["ok"]
    replay = await call(connect, world, "submit_training",
                        submit_args(world, manifest_path, ref, key="another-key-for-replay-01"))
    assert replay["error"]["code"] == "CONFIRMATION_CONSUMED"
    assert world.backend.run_count() == 1


async def test_manifest_rewritten_after_digest_is_digest_mismatch(
    connect: ClientFactory, world: World, manifest_path: str, example_document: dict[str, Any]
) -> None:
    digest = await call(connect, world, "digest_manifest", {"manifest_path": manifest_path})
    ref = world.confirm(digest["data"]["sha256"])
    rewritten = {**example_document, "budget": {"ceiling_usd": "4800.00", "max_incremental_cost_usd": "1400.00"}}
    Path(manifest_path).write_text(json.dumps(rewritten, indent=2))
    os.chmod(manifest_path, 0o600)
    env = await call(connect, world, "submit_training", submit_args(world, manifest_path, ref))
    assert env["error"]["code"] == "DIGEST_MISMATCH"
    assert world.backend.run_count() == 0


# ---------------------------------------------------------------------- gate 7 server validation


async def test_server_validation_rejects_capacity(
    connect: ClientFactory, world: World, write_file: WriteFile, example_document: dict[str, Any]
) -> None:
    huge = {**example_document, "model": {**example_document["model"], "parameter_count": 400_000_000_000}}
    path = write_file(huge)
    env = await call(connect, world, "submit_training", submit_args(world, path, world.confirm(sha_of(path))))
    assert env["error"]["code"] == "VALIDATION_REJECTED"
    assert env["error"]["details"]["reason"] == "capacity"
    assert world.backend.run_count() == 0


async def test_server_validation_rejects_budget(connect: ClientFactory, backend: Any, manifest_path: str) -> None:
    world = World(backend)
    poor = backend.op.account(budget_limit_usd="1000.00")
    world.account = poor
    world.token_id, world.token = backend.op.token(poor)
    world.booking = backend.op.booking(poor, nodes=2, gpus_per_node=8, fabric="infiniband")["booking_id"]
    world.env["ITO_API_KEY"] = world.token
    env = await call(connect, world, "submit_training",
                     submit_args(world, manifest_path, world.confirm(sha_of(manifest_path))))
    assert env["error"]["code"] == "BUDGET_EXCEEDED"
    assert backend.run_count() == 0


# ---------------------------------------------------------------------- secrets


async def test_the_token_never_appears_in_envelopes_logs_or_stderr(
    connect: ClientFactory, world: World, manifest_path: str,
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    outputs = []
    ref = world.confirm(sha_of(manifest_path))
    for tool, args in [("check_training_availability", {"booking_id": world.booking}),
                       ("submit_training", submit_args(world, manifest_path, ref)),
                       ("submit_training", submit_args(world, manifest_path, "cf_missing", key="other-key-000000001"))]:
        outputs.append(json.dumps(await call(connect, world, tool, args)))
    world.op.revoke(world.token_id)
    outputs.append(json.dumps(await call(connect, world, "check_training_availability", {"booking_id": world.booking})))
    captured = capsys.readouterr()
    everything = "\n".join([*outputs, caplog.text, captured.out, captured.err])
    assert world.token not in everything
    assert "Authorization" not in caplog.text
