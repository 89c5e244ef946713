"""Whatever the network does, at most one run per key, and every call ends in bounded time.

Faults are injected by the reference backend on `POST /v1/training-runs`; the backend's own
database is the judge of how many runs exist. Revocation is injected between gates by a
transport that revokes the token right after a chosen response, deterministically.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from ito_training_mcp.service import TrainingService

from .conftest import ClientFactory, World


@pytest.fixture
def mode() -> str:
    """Network behaviour does not depend on the MCP protocol era; both eras run in test_mcp_core and below."""
    return "auto"

DEADLINE_S = 1.0
MARGIN_S = 3.0
ROUTE = "POST /v1/training-runs"


def sha_of(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def fast_world(backend: Any) -> World:
    return World(backend, timeout_s=DEADLINE_S)


FAULTS: list[tuple[str, dict[str, Any]]] = [
    ("delay", {"seconds": 2}),
    ("stall", {"seconds": 2}),
    ("drip", {"interval_s": 0.3, "chunks": 5}),
    ("error", {"status": 503, "when": "before"}),
    ("error", {"status": 500, "when": "after"}),
    ("drop", {"when": "before"}),
    ("drop", {"when": "after"}),
    ("malformed", {"when": "after"}),
    ("oversized", {"bytes": 3 * 1024 * 1024}),
]  # A redirect is an answer, not a lost response: tests/test_backend_hostile.py


@pytest.mark.parametrize(("kind", "params"), FAULTS, ids=[f"{k}-{p.get('when', '')}" for k, p in FAULTS])
async def test_faults_on_create_never_make_a_second_run(
    connect: ClientFactory, fast_world: World, manifest_path: str, kind: str, params: dict[str, Any]
) -> None:
    world = fast_world
    key = f"fault-{kind}-{params.get('when', 'x')}-key-01"
    ref = world.confirm(sha_of(manifest_path))
    world.op.fault(ROUTE, kind, **params)
    arguments = {"booking_id": world.booking, "manifest_path": manifest_path, "confirmation_ref": ref,
                 "idempotency_key": key}
    async with connect(service=world.service()) as client:
        started = time.monotonic()
        result = await client.call_tool("submit_training", arguments)
        elapsed = time.monotonic() - started
        envelope = result.structured_content
        assert elapsed < DEADLINE_S + MARGIN_S, f"{kind} took {elapsed:.2f}s"
        assert envelope["live_api_contacted"] is True
        if envelope["ok"]:
            assert envelope["data"]["idempotency_key"] == key
        else:
            assert envelope["error"]["code"] == "SUBMISSION_OUTCOME_UNKNOWN", envelope
            assert envelope["error"]["details"]["idempotency_key"] == key
            assert "training_status" in envelope["notice"]

        # Let anything the backend is still processing finish, then count runs in its database.
        await anyio.to_thread.run_sync(lambda: world.op.wait_in_flight(key, 10.0, present=False))
        assert world.backend.runs_for_key(world.account, key) == 1

        # The agent's recovery path: status by key finds the one run; a resubmit returns it.
        status = (await client.call_tool("training_status", {"idempotency_key": key})).structured_content
        assert status["ok"] is True and status["data"]["found"] is True
        again = (await client.call_tool("submit_training", arguments)).structured_content
        assert again["ok"] is True and again["data"]["created"] is False
        assert again["data"]["run_id"] == status["data"]["run_id"]
    assert world.backend.runs_for_key(world.account, key) == 1
    assert world.backend.run_count() == 1


async def test_a_redirect_is_never_followed(connect: ClientFactory, fast_world: World, manifest_path: str) -> None:
    """The redirect target is a second reference backend: it must see nothing, above all no token."""
    from ito_training_reference import ReferenceBackend

    world = fast_world
    with ReferenceBackend() as elsewhere:
        world.op.fault("GET /v1/me", "redirect", location=f"{elsewhere.url}/v1/me")
        env = (await _call(connect, world, "check_training_availability", {"booking_id": world.booking}))
        assert env["error"]["code"] == "BACKEND_INVALID_RESPONSE"
        assert elsewhere.op.requests() == []


async def _call(connect: ClientFactory, world: World, tool: str, arguments: dict[str, Any],
                service: TrainingService | None = None) -> dict[str, Any]:
    async with connect(service=service or world.service()) as client:
        result = await client.call_tool(tool, arguments)
    assert result.structured_content is not None
    return result.structured_content


# ---------------------------------------------------------------------- revocation between gates


class RevokeAfter(httpx.AsyncHTTPTransport):
    """Revoke the token right after the response to the first request whose path matches."""

    def __init__(self, world: World, path_prefix: str) -> None:
        super().__init__()
        self.world, self.path_prefix, self.done = world, path_prefix, False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if not self.done and request.url.path.startswith(self.path_prefix):
            self.done = True
            await anyio.to_thread.run_sync(self.world.op.revoke, self.world.token_id)
        return response


@pytest.mark.parametrize("after", [
    "/v1/capabilities", "/v1/me", "/v1/bookings/", "/v1/training-runs", "/v1/confirmations/",
])
async def test_revocation_between_gates_stops_at_once(
    connect: ClientFactory, world: World, manifest_path: str, after: str
) -> None:
    ref = world.confirm(sha_of(manifest_path))
    world.op.clear_requests()
    service = TrainingService(world.env, transport=RevokeAfter(world, after))
    env = await _call(connect, world, "submit_training", {
        "booking_id": world.booking, "manifest_path": manifest_path, "confirmation_ref": ref,
        "idempotency_key": "revocation-test-key-01",
    }, service=service)
    assert env["error"]["code"] == "CREDENTIAL_REVOKED"
    assert env["live_api_contacted"] is True
    requests = world.backend_requests()
    assert requests[-1]["status"] == 401, "the 401 must be the last request the backend saw"
    assert [r["status"] for r in requests].count(401) == 1
    assert world.backend.run_count() == 0


# ---------------------------------------------------------------------- concurrency


async def test_64_concurrent_submits_over_16_keys_make_exactly_16_runs(
    connect: ClientFactory, backend: Any, manifest_path: str
) -> None:
    world = World(backend, timeout_s=10.0)
    sha = sha_of(manifest_path)
    keys = [f"concurrent-key-{i:02d}-abcdef" for i in range(16)]
    refs = {key: world.confirm(sha) for key in keys}
    results: list[dict[str, Any]] = []

    async with connect(service=world.service()) as client:
        async def one(key: str) -> None:
            result = await client.call_tool("submit_training", {
                "booking_id": world.booking, "manifest_path": manifest_path, "confirmation_ref": refs[key],
                "idempotency_key": key,
            })
            results.append(result.structured_content)

        async with anyio.create_task_group() as tg:
            for i in range(64):
                tg.start_soon(one, keys[i % 16])

    assert len(results) == 64
    assert backend.run_count() == 16
    for key in keys:
        assert backend.runs_for_key(world.account, key) == 1
    ok = [r for r in results if r["ok"]]
    assert sum(1 for r in ok if r["data"]["created"]) <= 16
    for r in results:
        if not r["ok"]:  # a loser of a race may be told to check status; never anything worse
            assert r["error"]["code"] in {"IDEMPOTENCY_IN_FLIGHT", "SUBMISSION_OUTCOME_UNKNOWN",
                                          "CONFIRMATION_CONSUMED"}, r
    run_ids = {r["data"]["idempotency_key"]: r["data"]["run_id"] for r in ok}
    assert len(set(run_ids.values())) == len(run_ids)
