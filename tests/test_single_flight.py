"""Cold concurrency without stampedes: one capabilities and one identity request in flight at a time.

Sixty-four concurrent submits through a fresh server used to send sixty-four `GET /v1/capabilities`
and sixty-four `GET /v1/me`. Now the first call's request is shared with the calls that arrive while
it is in flight; its answer -- success or refusal -- goes to them only, never to later calls; a
cancelled leader hands over to a waiter; a waiter waits a bounded time.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio import wait_all_tasks_blocked

from ito_training_mcp.envelope import ErrorCode, Gate
from ito_training_mcp.errors import Refusal
from ito_training_mcp.service import TrainingService
from ito_training_mcp.service.flight import SingleFlight

from .conftest import World


def sha_of(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


async def test_64_cold_submits_send_one_capabilities_and_one_identity_request(
    backend: Any, manifest_path: str
) -> None:
    world = World(backend, timeout_s=20.0)
    keys = [f"stampede-key-{i:02d}-abcdef" for i in range(16)]
    refs = {key: world.confirm(sha_of(manifest_path)) for key in keys}
    service = world.service(ITO_TRAINING_CAPABILITIES_TTL_S="60")  # a fresh server: both caches cold
    world.op.clear_requests()
    results: list[Any] = []

    async def one(key: str) -> None:
        results.append(await service.submit_training(world.booking, manifest_path, refs[key], key))

    async with anyio.create_task_group() as tg:
        for i in range(64):
            tg.start_soon(one, keys[i % 16])
    by_route = Counter(f"{r['method']} {r['path']}" for r in world.backend_requests())
    assert by_route["GET /v1/capabilities"] == 1, by_route
    assert by_route["GET /v1/me"] == 1, by_route
    assert backend.run_count() == 16
    assert all(r.ok or r.error.code.value in {"IDEMPOTENCY_IN_FLIGHT", "SUBMISSION_OUTCOME_UNKNOWN",
                                               "CONFIRMATION_CONSUMED"} for r in results)


class GatedBackend(httpx.AsyncBaseTransport):
    """Capabilities answers wait until released, then answer with the next scripted status."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.release = anyio.Event()
        self.capability_requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        trace = request.extensions.get("trace")
        if trace is not None:
            await trace("http11.send_request_headers.started", {})
        assert request.url.path == "/v1/capabilities", request.url
        self.capability_requests += 1
        status = self.statuses.pop(0)
        await self.release.wait()
        if status != 200:
            return httpx.Response(status, json={"error": {"code": "unavailable", "message": "down"}})
        return httpx.Response(200, json={"contract_version": "ito.training.v1", "training": {
            "available": True, "operations": ["create", "status", "logs", "metrics", "checkpoints", "cancel",
                                              "cleanup"]}})


def gated_service(transport: GatedBackend) -> TrainingService:
    return TrainingService({"ITO_API_URL": "http://127.0.0.1:9", "ITO_TRAINING_CAPABILITIES_TTL_S": "60",
                            "ITO_TRAINING_TIMEOUT_S": "30"}, transport=transport)


async def test_a_failed_flight_is_shared_with_its_waiters_only() -> None:
    transport = GatedBackend([503, 200])
    service = gated_service(transport)
    codes: list[str] = []

    async def check() -> None:
        envelope = await service.check_training_availability()
        codes.append(envelope.error.code.value if envelope.error else "ok")

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(check)
        await wait_all_tasks_blocked()  # the leader is inside its request; seven calls wait on its flight
        transport.release.set()
    assert transport.capability_requests == 1
    assert codes == ["BACKEND_ERROR"] * 8
    # The refusal was not remembered: the next call asks again, and succeeds.
    again = await service.check_training_availability()
    assert again.ok, again.to_json()
    assert transport.capability_requests == 2
    # And the success is cached for the window: no third request.
    assert (await service.check_training_availability()).ok
    assert transport.capability_requests == 2


async def test_a_cancelled_leader_hands_over_to_a_waiter() -> None:
    transport = GatedBackend([200, 200])
    service = gated_service(transport)
    outcome: list[bool] = []
    async with anyio.create_task_group() as tg:
        leader = anyio.CancelScope()

        async def lead() -> None:
            with leader:
                await service.check_training_availability()

        async def follow() -> None:
            outcome.append((await service.check_training_availability()).ok)

        tg.start_soon(lead)
        await wait_all_tasks_blocked()
        tg.start_soon(follow)
        await wait_all_tasks_blocked()
        leader.cancel()  # the leader's client went away mid-request
        await wait_all_tasks_blocked()  # the follower took over and is inside its own request
        transport.release.set()
    assert outcome == [True]
    assert transport.capability_requests == 2


async def test_a_waiter_waits_a_bounded_time() -> None:
    flights: SingleFlight[str] = SingleFlight()
    never = anyio.Event()

    async def stuck() -> str:
        await never.wait()
        return "never"

    def timeout() -> Refusal:
        return Refusal(ErrorCode.BACKEND_TIMEOUT, "waited too long", gate=Gate.CAPABILITIES)

    refused: list[ErrorCode] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(flights.run, "origin", stuck, wait_s=60.0, on_timeout=timeout))

        async def waiter() -> None:
            try:
                await flights.run("origin", stuck, wait_s=0.01, on_timeout=timeout)
            except Refusal as r:
                refused.append(r.code)

        await wait_all_tasks_blocked()
        await waiter()
        tg.cancel_scope.cancel()
    assert refused == [ErrorCode.BACKEND_TIMEOUT]
    assert not flights.in_flight("origin")  # the cancelled leader cleaned up after itself


@pytest.mark.parametrize("ttl", ["0", "60"])
async def test_sequential_calls_are_never_coalesced(world: World, ttl: str) -> None:
    """Single-flight joins calls that overlap; with caching off, every sequential call still asks."""
    service = world.service(ITO_TRAINING_CAPABILITIES_TTL_S=ttl)
    world.op.clear_requests()
    for _ in range(3):
        assert (await service.check_training_availability(world.booking)).ok
    by_route = Counter(r["path"] for r in world.backend_requests())
    expected = 3 if ttl == "0" else 1
    assert by_route["/v1/capabilities"] == expected and by_route["/v1/me"] == expected, by_route
