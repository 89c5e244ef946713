"""Gate 2's turns and one of its value rules, each tried on its own.

Gate 2 reads one manifest at a time, off the event loop; a call that gets no turn within the wait is
refused RATE_LIMITED (retryable, nothing sent), and so is a read of a whole review, which parses the kept
bytes again. A URI must be ASCII, so that a look-alike letter cannot
make a reviewer read one host while the backend fetches another.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from ito_training_mcp.doors.mcp.server import build_server
from ito_training_mcp.gates.config import ManifestSettings
from ito_training_mcp.gates.manifest.digest import DigestedManifest, ManifestGate
from ito_training_mcp.service import TrainingService

from .conftest import WriteFile


async def test_a_manifest_that_gets_no_turn_is_refused_and_nothing_is_sent(manifest_path: str) -> None:
    service = TrainingService({})
    gate = ManifestGate(limit=1, wait_s=0.3)
    service._manifests = gate  # a short wait, so the test need not sit through the default
    entered, release = threading.Event(), threading.Event()

    def hold(_: DigestedManifest) -> None:  # runs in the worker thread while the turn is held
        entered.set()
        release.wait(10)

    async with anyio.create_task_group() as tg:
        tg.start_soon(gate.digest, manifest_path, ManifestSettings.from_env({}), hold)
        await anyio.to_thread.run_sync(entered.wait, 10)
        env = await service.digest_manifest(manifest_path)
        release.set()
    assert env.error is not None and env.error.code.value == "RATE_LIMITED", env
    assert env.error.retryable is True and env.live_api_contacted is False
    assert (env.error.details or {})["reason"] == "manifest_reads_busy"
    after = await service.digest_manifest(manifest_path)  # the turn is free again
    assert after.ok, after


async def test_a_whole_review_waits_for_its_turn_too(manifest_path: str) -> None:
    """The whole review is the kept bytes through gate 2 again: it takes a turn like any manifest read."""
    service = TrainingService({})
    gate = ManifestGate(limit=1, wait_s=0.3)
    service._manifests = gate
    entered, release = threading.Event(), threading.Event()

    def hold(_: DigestedManifest) -> None:
        entered.set()
        release.wait(10)

    async with Client(build_server(service)) as client:
        digest = await client.call_tool("digest_manifest", {"manifest_path": manifest_path})
        uri = digest.structured_content["data"]["full_review"]["resource"]  # type: ignore[index]
        async with anyio.create_task_group() as tg:
            tg.start_soon(gate.digest, manifest_path, ManifestSettings.from_env({}), hold)
            await anyio.to_thread.run_sync(entered.wait, 10)
            with pytest.raises(MCPError, match="busy reading other manifests"):
                await client.read_resource(uri)
            release.set()
        read = await client.read_resource(uri)  # the turn is free again
    assert "review" in read.contents[0].text.lower()  # type: ignore[union-attr]


async def test_a_uri_with_a_look_alike_letter_is_refused(write_file: WriteFile,
                                                        example_document: dict[str, Any]) -> None:
    doc = copy.deepcopy(example_document)
    doc["data"][0]["uri"] = "s3://acme-ml-d\u0430ta/support/"  # Cyrillic a in the bucket name
    env = await TrainingService({}).digest_manifest(write_file(doc))
    assert env.error is not None and env.error.code.value == "MANIFEST_SCHEMA", env
    assert env.live_api_contacted is False
    problems = (env.error.details or {})["problems"]
    assert any(p["pointer"] == "/data/0/uri" and "must be ASCII" in p["problem"] for p in problems), problems
