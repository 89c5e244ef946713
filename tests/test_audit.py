"""The opt-in audit trail: one bounded JSON line per call, 0600, appended, never a secret."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from ito_training_mcp.audit import MAX_LINE_BYTES
from ito_training_mcp.service import TrainingService

from .conftest import CANARY_GITHUB, CANARY_TOKEN, ClientFactory, World, WriteFile


@pytest.fixture
def mode() -> str:
    return "auto"


def lines(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    assert all(len(line) + 1 <= MAX_LINE_BYTES for line in raw.split(b"\n"))
    return [json.loads(line) for line in raw.splitlines()]


async def test_no_trail_unless_configured(tmp_path: Path, manifest_path: str) -> None:
    env = await TrainingService({}).digest_manifest(manifest_path)
    assert env.ok
    assert list(tmp_path.glob("**/audit*")) == []


async def test_one_line_per_call_with_ids_and_no_secrets(
    connect: ClientFactory, tmp_path: Path, write_file: WriteFile, example_document: dict[str, Any],
    manifest_path: str,
) -> None:
    trail = tmp_path / "audit.jsonl"
    secret_manifest = write_file({**example_document, "description": CANARY_GITHUB})
    service = TrainingService({"ITO_TRAINING_AUDIT_LOG": str(trail), "ITO_API_KEY": CANARY_TOKEN})
    async with connect(service=service) as client:
        await client.call_tool("check_training_availability", {"booking_id": "bk_1"})
        await client.call_tool("digest_manifest", {"manifest_path": manifest_path})
        await client.call_tool("digest_manifest", {"manifest_path": secret_manifest})
        await client.call_tool("submit_training", {"booking_id": "bk_1", "manifest_path": manifest_path,
                                                   "confirmation_ref": "", "idempotency_key": "audit-key-00000001"})
        await client.call_tool("check_training_availability", {"token": CANARY_TOKEN})
    assert stat.S_IMODE(trail.stat().st_mode) == 0o600
    text = trail.read_text()
    assert CANARY_TOKEN not in text
    assert CANARY_GITHUB not in text
    assert example_document["model"]["name"] not in text  # no manifest content
    entries = lines(trail)
    assert [e["tool"] for e in entries] == ["check_training_availability", "digest_manifest", "digest_manifest",
                                            "submit_training", "check_training_availability"]
    assert [e["code"] for e in entries] == ["TRAINING_UNAVAILABLE", None, "MANIFEST_SECRET",
                                            "CONFIRMATION_REQUIRED", "INVALID_INPUT"]
    assert entries[0]["booking_id"] == "bk_1" and entries[0]["gate"] == "availability"
    assert entries[1]["manifest_sha256"] == hashlib.sha256(Path(manifest_path).read_bytes()).hexdigest()
    assert entries[3]["idempotency_key"] == "audit-key-00000001" and entries[3]["gate"] == "input"
    assert all(e["live_api_contacted"] is False for e in entries)


async def test_a_submit_through_the_backend_is_recorded(
    connect: ClientFactory, world: World, tmp_path: Path, manifest_path: str
) -> None:
    trail = tmp_path / "audit.jsonl"
    sha = hashlib.sha256(Path(manifest_path).read_bytes()).hexdigest()
    ref = world.confirm(sha)
    async with connect(service=world.service(ITO_TRAINING_AUDIT_LOG=str(trail))) as client:
        result = await client.call_tool("submit_training", {
            "booking_id": world.booking, "manifest_path": manifest_path, "confirmation_ref": ref,
            "idempotency_key": "audit-submit-key-0001"})
    run_id = result.structured_content["data"]["run_id"]
    [entry] = lines(trail)
    assert entry["ok"] is True and entry["live_api_contacted"] is True
    assert (entry["run_id"], entry["booking_id"], entry["manifest_sha256"], entry["confirmation_ref"]) == (
        run_id, world.booking, sha, ref)
    assert entry["created"] is True
    assert world.token not in trail.read_text()


@pytest.mark.parametrize("problem", ["loose_mode", "symlink", "relative", "directory", "other_owner"])
async def test_an_unusable_trail_refuses_every_call_up_front(
    world: World, tmp_path: Path, manifest_path: str, problem: str
) -> None:
    target = tmp_path / "audit.jsonl"
    if problem == "loose_mode":
        target.write_text("")
        target.chmod(0o644)
    elif problem == "symlink":
        real = tmp_path / "real.jsonl"
        real.write_text("")
        real.chmod(0o600)
        target.symlink_to(real)
    elif problem == "directory":
        target.mkdir()
    elif problem == "other_owner":
        if os.geteuid() != 0:
            pytest.skip("needs root to chown")
        target.write_text("")
        target.chmod(0o600)
        os.chown(target, 12345, -1)
    path = "audit.jsonl" if problem == "relative" else str(target)
    world.op.clear_requests()
    service = world.service(ITO_TRAINING_AUDIT_LOG=path)
    sha = hashlib.sha256(Path(manifest_path).read_bytes()).hexdigest()
    for envelope in [
        await service.check_training_availability(world.booking),
        await service.submit_training(world.booking, manifest_path, world.confirm(sha), "audit-refused-key-0001"),
    ]:
        assert envelope.error is not None
        assert envelope.error.code.value == "CONFIG_INVALID"
        assert envelope.error.details == {"setting": "ITO_TRAINING_AUDIT_LOG", "problem": envelope.error.details["problem"]}
        assert envelope.live_api_contacted is False
    assert world.backend_requests() == []
    assert world.backend.run_count() == 0


async def test_concurrent_calls_append_whole_lines(tmp_path: Path, manifest_path: str) -> None:
    trail = tmp_path / "audit.jsonl"
    service = TrainingService({"ITO_TRAINING_AUDIT_LOG": str(trail)})
    async with anyio.create_task_group() as tg:
        for _ in range(40):
            tg.start_soon(service.digest_manifest, manifest_path)
    entries = lines(trail)
    assert len(entries) == 40
    assert {e["tool"] for e in entries} == {"digest_manifest"}
