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

from ito_training_mcp.egress.audit import MAX_LINE_BYTES
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


def unusable_trail(problem: str, tmp_path: Path) -> str:
    """A path for ITO_TRAINING_AUDIT_LOG that must be refused, of the named kind."""
    target = tmp_path / "audit.jsonl"
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    if problem in ("loose_mode", "symlink", "other_owner", "hard_link"):
        (real / "audit.jsonl").write_text("")
        (real / "audit.jsonl").chmod(0o644 if problem == "loose_mode" else 0o600)
    if problem == "loose_mode":
        return str(real / "audit.jsonl")
    if problem == "symlink":
        target.symlink_to(real / "audit.jsonl")
    elif problem == "symlinked_parent":
        (tmp_path / "linked").symlink_to(real, target_is_directory=True)
        return str(tmp_path / "linked" / "audit.jsonl")
    elif problem == "group_writable_parent":
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o770)
        return str(shared / "audit.jsonl")
    elif problem == "directory":
        target.mkdir()
    elif problem in ("fifo_without_reader", "fifo_with_reader"):
        os.mkfifo(target, 0o600)
    elif problem == "socket":
        import socket

        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
        sock.close()
    elif problem == "hard_link":
        os.link(real / "audit.jsonl", target)
    elif problem == "other_owner":
        if os.geteuid() != 0:
            pytest.skip("needs root to chown")
        os.chown(real / "audit.jsonl", 12345, -1)
        return str(real / "audit.jsonl")
    elif problem == "missing_parent":
        return str(tmp_path / "nowhere" / "audit.jsonl")
    elif problem in ("/dev/null", "/proc/self/attr/current", "/proc/self/fd/2", "/sys/kernel/notes", "/"):
        return problem
    elif problem == "relative":
        return "audit.jsonl"
    return str(target)


# A FIFO without a reader is tested in a server process below: in this process, a blocking open would hang
# the test run itself rather than fail it.
UNUSABLE = ["loose_mode", "symlink", "symlinked_parent", "group_writable_parent", "relative", "directory",
            "fifo_with_reader", "socket", "hard_link", "other_owner", "missing_parent",
            "/dev/null", "/proc/self/attr/current", "/proc/self/fd/2", "/sys/kernel/notes", "/"]


@pytest.mark.parametrize("problem", UNUSABLE)
async def test_an_unusable_trail_refuses_every_call_up_front(
    world: World, tmp_path: Path, manifest_path: str, problem: str
) -> None:
    path = unusable_trail(problem, tmp_path)
    reader = None
    if problem == "fifo_with_reader":
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
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
    if reader is not None:
        assert os.read(reader, 100) == b""  # nothing was written into the pipe
        os.close(reader)
    assert world.backend_requests() == []
    assert world.backend.run_count() == 0
    if problem == "symlinked_parent":
        assert not (tmp_path / "real" / "audit.jsonl").exists()  # nothing was created through the link


@pytest.mark.parametrize(("problem", "mode"), [("fifo_without_reader", "auto"), ("fifo_without_reader", "legacy"),
                                               ("fifo_with_reader", "legacy"), ("symlinked_parent", "auto")])
async def test_the_server_process_keeps_answering_with_an_unusable_trail(
    tmp_path: Path, manifest_path: str, problem: str, mode: str
) -> None:
    """A real server process: a FIFO as the trail used to block its event loop in open(2) forever."""
    import sys
    import tempfile

    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    path = unusable_trail(problem, tmp_path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK) if problem == "fifo_with_reader" else None
    params = StdioServerParameters(command=sys.executable, args=["-m", "ito_training_mcp"],
                                   env={"ITO_TRAINING_AUDIT_LOG": path})
    codes = []
    with tempfile.TemporaryFile("w+") as errlog, anyio.fail_after(60):  # a hang fails the test, never the suite
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            for _ in range(3):
                result = await client.call_tool("digest_manifest", {"manifest_path": manifest_path})
                assert result.structured_content is not None
                codes.append(result.structured_content["error"]["code"])
            assert len((await client.list_tools()).tools) >= 3  # and it still speaks the protocol
    if reader is not None:
        os.close(reader)
    assert codes == ["CONFIG_INVALID"] * 3


async def test_the_trail_is_opened_off_the_event_loop(tmp_path: Path, manifest_path: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from ito_training_mcp.egress.audit import AuditLog

    threads: list[int] = []
    real_open = AuditLog.open

    def recording_open(self: AuditLog) -> int:
        threads.append(threading.get_ident())
        return real_open(self)

    monkeypatch.setattr(AuditLog, "open", recording_open)
    service = TrainingService({"ITO_TRAINING_AUDIT_LOG": str(tmp_path / "audit.jsonl")})
    assert (await service.digest_manifest(manifest_path)).ok
    assert len(threads) == 2  # the check before the call and the line after it
    assert threading.get_ident() not in threads


async def test_concurrent_calls_append_whole_lines(tmp_path: Path, manifest_path: str) -> None:
    trail = tmp_path / "audit.jsonl"
    service = TrainingService({"ITO_TRAINING_AUDIT_LOG": str(trail)})
    async with anyio.create_task_group() as tg:
        for _ in range(40):
            tg.start_soon(service.digest_manifest, manifest_path)
    entries = lines(trail)
    assert len(entries) == 40
    assert {e["tool"] for e in entries} == {"digest_manifest"}
