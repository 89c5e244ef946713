"""A call that waits ends within its budget, however slow the backend's reads are.

The budget (`wait_seconds`, clamped to ITO_TRAINING_MAX_WAIT_S, 55 s by default) counts from the
start of the call: the reads before the wait spend it, no poll starts once it is spent, and each
poll's reads get what is left of it as their deadline. Every read of a waiting call, from the
first, ends within the cap, so the call answers before a client's default request timeout (60 s in
the TypeScript SDK). First on the simulated clock of tests/test_waiting.py (exact, no sleeping),
then against the reference backend with its delay faults and a one-second cap.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest

from ito_training_mcp.backend.client import BackendClient, BudgetSpent
from ito_training_mcp.envelope import Envelope
from ito_training_mcp.service.waiting import wait_until

from .conftest import ClientFactory, World
from .test_waiting import SimulatedClock, stage_position


class Reads:
    """A fake backend read on the simulated clock that honours the deadline it is given, as the backend
    client does: a read slower than its deadline stops at the deadline with `BudgetSpent`."""

    def __init__(self, clock: SimulatedClock, latency_s: list[float], states: list[int] | None = None) -> None:
        self.clock = clock
        self.latency_s = latency_s
        self.states = states or [0]
        self.started: list[tuple[float, float | None]] = []  # (when, deadline given)

    async def fetch(self, deadline_s: float | None) -> int:
        index = len(self.started)
        self.started.append((self.clock.now(), deadline_s))
        latency = self.latency_s[min(index, len(self.latency_s) - 1)]
        if deadline_s is not None and latency > deadline_s:
            await self.clock.sleep(deadline_s)
            raise BudgetSpent("GET", "/v1/x", gate=None, mutation=False, sent=True, deadline_s=deadline_s)
        await self.clock.sleep(latency)
        return self.states[min(index, len(self.states) - 1)]


async def _wait(reads: Reads, budget_s: float, *, started: float | None = None, interval_s: float = 1.0) -> Any:
    async def main() -> Any:
        return await wait_until(reads.fetch, lambda s: s >= 4, stage_position, budget_s=budget_s,
                                interval_s=interval_s, progress=None, clock=reads.clock, started=started)

    return await reads.clock.run(main)


async def test_each_poll_gets_what_is_left_of_the_budget_and_none_starts_after_it() -> None:
    clock = SimulatedClock()
    reads = Reads(clock, latency_s=[0.0, 0.7])
    # Two seconds went on reads before the wait (credential, identity): they are spent from the budget.
    waited = await _wait(reads, budget_s=10, started=-2.0)
    assert waited.timed_out is True and waited.waited_s == 10
    first, *polls = reads.started
    assert first == (0.0, None)  # the first read is bounded by the caller (the cap), not here
    assert polls
    for at, deadline in polls:
        assert deadline is not None and 0 < deadline == pytest.approx(10 - (at + 2.0))
        assert at < 8.0  # none starts once the budget (10 s from t = -2) is spent
    assert clock.now() <= 8.0


async def test_a_poll_slower_than_what_is_left_ends_the_wait_with_the_last_state_read() -> None:
    clock = SimulatedClock()
    reads = Reads(clock, latency_s=[0.0, 0.0, 100.0], states=[1, 2, 3])
    waited = await _wait(reads, budget_s=10)
    assert waited.last == 2 and waited.timed_out is True and waited.waited_s == 10
    assert len(reads.started) == 3
    assert clock.now() == pytest.approx(10.0)  # the slow read was abandoned exactly when the budget ran out


async def test_a_first_read_that_spends_the_budget_means_no_poll() -> None:
    clock = SimulatedClock()
    reads = Reads(clock, latency_s=[12.0], states=[1])
    waited = await _wait(reads, budget_s=10)
    assert waited.last == 1 and waited.timed_out is True and waited.waited_s == 10
    assert len(reads.started) == 1


# ---------------------------------------------------------------------- against the reference backend

CAPPED = {"ITO_TRAINING_MAX_WAIT_S": "1", "ITO_TRAINING_TIMEOUT_S": "10"}


def _budget_refusal(envelope: Envelope) -> None:
    assert envelope.ok is False and envelope.error is not None, envelope.to_json()
    assert envelope.error.code.value == "BACKEND_TIMEOUT" and envelope.error.retryable is True
    assert envelope.error.details is not None and envelope.error.details["budget_spent"] is True
    assert envelope.error.details["deadline_s"] <= 1
    assert "ITO_TRAINING_MAX_WAIT_S" in envelope.error.message


@contextmanager
def deadlines_given(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[float, float | None, float | None]]]:
    """Record each poll deadline handed to the backend client, with what was left of the call's cap
    before and what the client's exchanges get inside the poll."""
    seen: list[tuple[float, float | None, float | None]] = []
    within = BackendClient.within

    @contextmanager
    def spy(self: BackendClient, seconds: float | None) -> Iterator[None]:
        before = self.remaining_s()
        with within(self, seconds):
            if seconds is not None:
                seen.append((seconds, before, self.remaining_s()))
            yield

    monkeypatch.setattr(BackendClient, "within", spy)
    yield seen


async def test_a_slow_identity_read_cannot_push_confirmation_status_past_the_cap(
    world: World, manifest_path: str
) -> None:
    service = world.service(**CAPPED)
    plan = await service.plan_training(world.booking, manifest_path)
    assert plan.ok and plan.data is not None, plan.to_json()
    request_id = plan.data["confirmation_request"]["request_id"]
    world.op.fault("GET /v1/me", "delay", seconds=1.5)  # longer than the whole 1 s cap
    before = len(world.backend_requests())
    envelope = await service.confirmation_status(request_id, wait_seconds=30)
    _budget_refusal(envelope)
    after = world.backend_requests()[before:]
    assert not any("/v1/confirmation-requests/" in r["path"] for r in after), after  # no read started late


async def test_a_slow_first_read_cannot_push_training_status_past_the_cap(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    from .test_lifecycle import create_run

    run_id = await create_run(connect, world, manifest_path)
    world.op.fault("GET /v1/training-runs/{run_id}", "delay", seconds=1.5)
    _budget_refusal(await world.service(**CAPPED).training_status(run_id, wait_seconds=30))


async def test_a_slow_poll_ends_the_wait_with_the_current_state_within_the_budget(
    connect: ClientFactory, world: World, manifest_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .test_lifecycle import create_run

    run_id = await create_run(connect, world, manifest_path)
    notified: list[str] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        notified.append(str(message))
        if len(notified) == 1:  # the first state is read: every read after it is slow
            await anyio.to_thread.run_sync(
                lambda: world.op.fault("GET /v1/training-runs/{run_id}", "delay", times=20, seconds=1.5))

    with deadlines_given(monkeypatch) as seen:
        envelope = await world.service(**CAPPED).training_status(run_id, wait_seconds=30, progress=progress)
    assert envelope.ok is True and envelope.data is not None, envelope.to_json()
    assert envelope.data["state"] == "queued" and envelope.data["run_id"] == run_id
    assert envelope.data["wait"] == {**envelope.data["wait"], "limit_s": 1, "clamped": True, "timed_out": True}
    assert seen, "a poll was made"
    for given, cap_left, inside in seen:  # each poll's deadline is what was left of the budget, never more
        assert cap_left is not None and inside is not None
        assert 0 < given <= 1 and given <= cap_left and inside <= given


async def test_without_a_wait_the_cap_does_not_bound_a_read(world: World, connect: ClientFactory,
                                                             manifest_path: str) -> None:
    from .test_lifecycle import create_run

    run_id = await create_run(connect, world, manifest_path)
    world.op.fault("GET /v1/training-runs/{run_id}", "delay", seconds=1.5)
    envelope = await world.service(**CAPPED).training_status(run_id)
    assert envelope.ok is True, envelope.to_json()


async def test_a_wait_that_spends_its_budget_on_another_calls_shared_read_says_so(
    world: World, manifest_path: str
) -> None:
    """A waiting call that joins another call's cold identity read (single flight) and runs out of its
    own budget first is refused for its budget, not for a backend deadline it never reached."""
    warm = world.service(**CAPPED)
    plan = await warm.plan_training(world.booking, manifest_path)
    assert plan.ok and plan.data is not None, plan.to_json()
    request_id = plan.data["confirmation_request"]["request_id"]
    cold = world.service(**CAPPED)  # its own caches: capabilities and identity are cold
    world.op.fault("GET /v1/me", "delay", seconds=2.5)
    before = len(world.backend_requests())
    results: dict[str, Envelope] = {}

    async def leader() -> None:  # no wait: its reads keep the normal 10 s deadline
        results["leader"] = await cold.confirmation_status(request_id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(leader)
        with anyio.fail_after(10):  # the leader's identity read has reached the backend
            while not any(r["path"] == "/v1/me" for r in world.backend_requests()[before:]):
                await anyio.sleep(0.01)
        results["waiter"] = await cold.confirmation_status(request_id, wait_seconds=30)
    waiter = results["waiter"]
    _budget_refusal(waiter)
    assert waiter.error is not None and waiter.error.details is not None
    assert waiter.error.details["waited_for"] == "identity"
    assert "another call's identity request" in waiter.error.message
    assert waiter.live_api_contacted is True  # its own capabilities read (gate 3 looks at the extra operations)
    assert results["leader"].ok, results["leader"].to_json()
    assert sum(r["path"] == "/v1/me" for r in world.backend_requests()[before:]) == 1  # shared, never re-sent
