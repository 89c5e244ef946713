"""The configured credential is never accepted as (part of) an argument.

The attack: the token given as `idempotency_key`, `run_id`, a booking id, a confirmation reference,
a cursor or inside a manifest path matches the id pattern and no provider shape, so it passed gate 0,
went into URLs and headers, and into the audit log in clear. The defence: gate 0 compares every
argument with the credentials this process already holds in memory (`ITO_API_KEY`, any credential
resolved before) without reading a credential; right after the credential is resolved (after gate
3), every argument of the call is compared again, so an `ITO_TOKEN_FILE` credential is covered
before anything that carries an argument is sent and before the audit line is written.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from ito_training_mcp.backend import credentials
from ito_training_mcp.service import TrainingService

from .conftest import ClientFactory, World


def sha_of(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cases(world: World, manifest_path: str, token: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(argument, tool, arguments): the token, alone or inside a longer value, in every string argument."""
    submit = {"booking_id": world.booking, "manifest_path": manifest_path, "confirmation_ref": "cf-ok-1",
              "idempotency_key": "credential-test-key-01"}
    mutation = {"run_id": "run-1", "confirmation_ref": "cf-ok-1", "idempotency_key": "credential-test-key-02"}
    return [
        ("booking_id", "check_training_availability", {"booking_id": token}),
        ("booking_id", "submit_training", {**submit, "booking_id": f"bk:{token}"}),
        ("idempotency_key", "submit_training", {**submit, "idempotency_key": token}),
        ("idempotency_key", "submit_training", {**submit, "idempotency_key": f"retry-1:{token}"}),
        ("confirmation_ref", "submit_training", {**submit, "confirmation_ref": token}),
        ("manifest_path", "digest_manifest", {"manifest_path": f"/tmp/{token}/manifest.json"}),
        ("run_id", "training_status", {"run_id": token}),
        ("idempotency_key", "training_status", {"idempotency_key": token}),
        ("run_id", "training_logs", {"run_id": f"{token}.x"}),
        ("cursor", "training_logs", {"run_id": "run-1", "cursor": f"c={token}"}),
        ("run_id", "training_metrics", {"run_id": token}),
        ("run_id", "list_checkpoints", {"run_id": token}),
        ("idempotency_key", "cancel_training", {**mutation, "idempotency_key": token}),
        ("confirmation_ref", "cleanup_training", {**mutation, "confirmation_ref": token}),
        ("run_id", "cleanup_training", {**mutation, "run_id": token}),
    ]


def assert_refused_as_credential(envelope: dict[str, Any], argument: str, token: str) -> None:
    assert envelope["ok"] is False, envelope
    assert envelope["error"]["code"] == "INVALID_INPUT", envelope
    assert envelope["error"]["details"] == {"argument": argument, "problem": "looks_like_credential"}
    assert token not in json.dumps(envelope)


async def test_the_configured_key_is_refused_at_gate_0_without_reading_a_credential(
    connect: ClientFactory, world: World, manifest_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    real = credentials.resolve_credential
    monkeypatch.setattr(credentials, "resolve_credential", lambda env: reads.append(1) or real(env))
    trail = tmp_path / "audit.jsonl"
    world.op.clear_requests()
    async with connect(service=world.service(ITO_TRAINING_AUDIT_LOG=str(trail))) as client:
        for argument, tool, arguments in cases(world, manifest_path, world.token):
            result = await client.call_tool(tool, arguments)
            envelope = result.structured_content
            assert envelope is not None
            assert_refused_as_credential(envelope, argument, world.token)
            assert envelope["live_api_contacted"] is False, (tool, argument)
    assert reads == [], "gate 0 resolved the credential"
    assert world.backend_requests() == [], "something was sent"
    text = trail.read_text()
    assert world.token not in text
    assert len(text.splitlines()) == len(cases(world, manifest_path, world.token))


async def test_a_token_file_credential_is_refused_before_any_argument_is_sent(
    connect: ClientFactory, world: World, manifest_path: str, tmp_path: Path
) -> None:
    """Gate 0 cannot know a token-file credential; the re-check right after resolving it can."""
    token_file = tmp_path / "token"
    token_file.write_text(world.token)
    token_file.chmod(0o600)
    trail = tmp_path / "audit.jsonl"
    env = {k: v for k, v in world.env.items() if k != "ITO_API_KEY"}
    service = TrainingService({**env, "ITO_TOKEN_FILE": str(token_file), "ITO_TRAINING_AUDIT_LOG": str(trail)})
    ref = world.confirm(sha_of(manifest_path))
    key = f"k:{world.token}"
    async with connect(service=service) as client:
        world.op.clear_requests()
        result = await client.call_tool("submit_training", {
            "booking_id": world.booking, "manifest_path": manifest_path, "confirmation_ref": ref,
            "idempotency_key": key})
        envelope = result.structured_content
        assert envelope is not None
        assert_refused_as_credential(envelope, "idempotency_key", world.token)
        assert envelope["live_api_contacted"] is True  # the capabilities request, which carries no argument
        assert [r["path"] for r in world.backend_requests()] == ["/v1/capabilities"]
        for tool, arguments in [("training_status", {"idempotency_key": key}),
                                ("training_logs", {"run_id": "run-1", "cursor": world.token}),
                                ("cancel_training", {"run_id": world.token, "confirmation_ref": ref,
                                                     "idempotency_key": "cancel-key-000000001"})]:
            world.op.clear_requests()
            envelope = (await client.call_tool(tool, arguments)).structured_content
            assert envelope is not None
            assert envelope["error"]["details"]["problem"] == "looks_like_credential", envelope
            # Now that the credential was resolved once, gate 0 knows it: at most the capabilities request.
            assert {r["path"] for r in world.backend_requests()} <= {"/v1/capabilities"}
    assert world.backend.run_count() == 0
    text = trail.read_text()
    assert world.token not in text
    assert "<redacted>" in text  # the identifier it arrived in is recorded, masked
    entries = [json.loads(line) for line in text.splitlines()]
    assert {e["code"] for e in entries} == {"INVALID_INPUT"}


async def test_an_argument_name_holding_the_key_is_masked(connect: ClientFactory, world: World) -> None:
    async with connect(service=world.service()) as client:
        envelope = (await client.call_tool("check_training_availability", {world.token: "x"})).structured_content
    assert envelope is not None
    assert envelope["error"]["details"]["unexpected"] == ["<redacted>"]
    assert world.token not in json.dumps(envelope)


async def test_ordinary_arguments_still_pass(connect: ClientFactory, world: World, manifest_path: str) -> None:
    """The comparison is with the credential, not a guess: ids that merely resemble tokens are fine."""
    async with connect(service=world.service()) as client:
        envelope = (await client.call_tool("check_training_availability",
                                           {"booking_id": world.booking})).structured_content
        assert envelope is not None and envelope["ok"] is True, envelope
        status = (await client.call_tool("training_status",
                                         {"idempotency_key": world.token[:20] + "-other"})).structured_content
        assert status is not None and status["ok"] is True and status["data"]["found"] is False
