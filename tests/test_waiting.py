"""Waits report progress that means progress, at least every few seconds, within bounded time.

The waiter (`service/waiting.py`) runs here on a simulated clock: a minute of waiting on a backend
that sometimes takes seven seconds to answer passes in milliseconds, and every property is checked
in simulated seconds (no wall clock). The clock advances only when every task is blocked, to the
earliest pending sleep, so the order of events is exactly the one real time would give.

At the end, the real thing: `training_status` and `confirmation_status` through a real MCP client
(both protocol eras) against the reference backend, with the run advanced by the operator and the
person confirming at the desk mid-wait, synchronised on the notifications themselves.
"""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ito_training_mcp.envelope import ErrorCode, Gate
from ito_training_mcp.errors import Refusal
from ito_training_mcp.service import waiting
from ito_training_mcp.service.waiting import HEARTBEAT_S, HEARTBEAT_SPAN, Position, heartbeat_value, wait_until

from .conftest import ClientFactory, World

Seen = list[tuple[float, float | None, str | None, float]]


class SimulatedClock:
    """Simulated time: `sleep` parks the task; once every task has run as far as it can (no new task
    parked for `SETTLE` scheduler rounds; nothing here does I/O), time jumps to the earliest parked
    deadline and wakes that task. No real sleeping anywhere."""

    SETTLE = 25

    def __init__(self) -> None:
        self.t = 0.0
        self._parked: list[tuple[float, int, anyio.Event]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        woken = anyio.Event()
        heapq.heappush(self._parked, (self.t + max(seconds, 0.0), next(self._order), woken))
        await woken.wait()

    async def _settle(self) -> None:
        quiet, parked = 0, len(self._parked)
        while quiet < self.SETTLE:
            await anyio.lowlevel.checkpoint()
            quiet = quiet + 1 if len(self._parked) == parked else 0
            parked = len(self._parked)

    async def run(self, main: Callable[[], Awaitable[Any]]) -> Any:
        outcome: list[Any] = []
        failure: list[Exception] = []

        async def drive() -> None:
            while True:
                await self._settle()
                if self._parked:
                    deadline, _, woken = heapq.heappop(self._parked)
                    self.t = max(self.t, deadline)
                    woken.set()

        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            try:
                outcome.append(await main())
            except Exception as exc:  # re-raised below, unwrapped
                failure.append(exc)
            group.cancel_scope.cancel()
        if failure:
            raise failure[0]
        return outcome[0]


@dataclass
class Script:
    """A fake backend read: each fetch returns the next state, after a simulated latency."""

    clock: SimulatedClock
    states: list[int]
    latency_s: list[float] = field(default_factory=list)
    fetched: list[float] = field(default_factory=list)

    async def fetch(self, deadline_s: float | None = None) -> int:
        index = len(self.fetched)
        self.fetched.append(self.clock.now())
        if index < len(self.latency_s) and self.latency_s[index] > 0:
            await self.clock.sleep(self.latency_s[index])
        return self.states[min(index, len(self.states) - 1)]


def stage_position(passed: int) -> Position:
    return Position(float(passed), 4.0, f"run r1: {passed}/4 stages passed")


async def run_wait(script: Script, budget_s: float, interval_s: float = 2.0,
                   progress: bool = True) -> tuple[Any, Seen]:
    seen: Seen = []

    async def record(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message, script.clock.now()))

    async def main() -> Any:
        return await wait_until(script.fetch, lambda s: s >= 4, stage_position, budget_s=budget_s,
                                interval_s=interval_s, progress=record if progress else None, clock=script.clock)

    return await script.clock.run(main), seen


def assert_progress_means_position(seen: Seen, positions: set[float]) -> None:
    values = [value for value, _, _, _ in seen]
    assert all(a < b for a, b in itertools.pairwise(values)), values
    for value, total, _, _ in seen:
        base = max(p for p in positions if p <= value)
        assert value - base < HEARTBEAT_SPAN, (value, base)  # a position, or a hair past the last one
        assert total == 4.0


async def test_a_simulated_minute_on_a_slow_backend_reports_at_least_every_five_seconds() -> None:
    clock = SimulatedClock()
    # The run stays at 1 stage for a while, then moves; some reads take 7 s (longer than a heartbeat).
    script = Script(clock, states=[0, 1, 1, 2, 2, 3], latency_s=[0, 0, 7, 0, 7, 0, 12])
    waited, seen = await run_wait(script, budget_s=60)
    assert waited.timed_out is True and waited.waited_s == 60
    assert_progress_means_position(seen, {0.0, 1.0, 2.0, 3.0})
    stamps = [0.0] + [at for _, _, _, at in seen] + [60.0]
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert max(gaps) <= HEARTBEAT_S, gaps  # also during the 7 s and 12 s reads
    assert any("still waiting" in str(message) for _, _, message, _ in seen)
    # Real positions are reported as they are read, exactly.
    assert {1.0, 2.0, 3.0} <= {value for value, _, _, _ in seen}
    # Polls are spaced by the interval, growing, never beyond the heartbeat; bounded in number.
    polls = [b - a for a, b in itertools.pairwise(script.fetched)]
    assert all(gap >= 2.0 for gap in polls) and len(script.fetched) <= 60 / 2.0 + 1


async def test_the_wait_ends_as_soon_as_the_thing_settles() -> None:
    clock = SimulatedClock()
    script = Script(clock, states=[0, 2, 4])
    waited, seen = await run_wait(script, budget_s=600, interval_s=1.0)
    assert waited.last == 4 and waited.timed_out is False
    assert waited.waited_s < 5
    assert [value for value, _, _, _ in seen] == [0.0, 2.0, 4.0]  # nothing but real positions


async def test_the_poll_interval_grows_but_never_beyond_the_heartbeat() -> None:
    clock = SimulatedClock()
    script = Script(clock, states=[0])
    await run_wait(script, budget_s=120, interval_s=1.0)
    gaps = [b - a for a, b in itertools.pairwise(script.fetched)]
    assert gaps[0] == 1.0 and gaps[1] == 1.5
    assert max(gaps) == min(10 * 1.0, HEARTBEAT_S)


async def test_no_budget_means_one_read_and_no_progress() -> None:
    clock = SimulatedClock()
    script = Script(clock, states=[1])
    waited, seen = await run_wait(script, budget_s=0)
    assert waited.last == 1 and waited.waited_s == 0 and len(script.fetched) == 1 and seen == []


async def test_a_refusal_ends_the_wait_at_once_and_is_not_wrapped() -> None:
    clock = SimulatedClock()
    calls: list[float] = []

    async def fetch(deadline_s: float | None) -> int:
        calls.append(clock.now())
        if len(calls) == 3:
            raise Refusal(ErrorCode.CREDENTIAL_REVOKED, "revoked", gate=Gate.CAPABILITIES)
        return 0

    async def main() -> Any:
        return await wait_until(fetch, lambda s: False, stage_position, budget_s=60, interval_s=1.0,
                                progress=None, clock=clock)

    with pytest.raises(Refusal) as refused:  # the refusal itself, not an exception group
        await clock.run(main)
    assert refused.value.code is ErrorCode.CREDENTIAL_REVOKED
    assert len(calls) == 3


async def test_a_broken_progress_channel_does_not_break_the_wait() -> None:
    clock = SimulatedClock()
    script = Script(clock, states=[0, 1, 4])
    sent: list[float] = []

    async def broken(value: float, total: float | None, message: str | None) -> None:
        sent.append(value)
        raise RuntimeError("client went away")

    async def main() -> Any:
        return await wait_until(script.fetch, lambda s: s >= 4, stage_position, budget_s=60, interval_s=1.0,
                                progress=broken, clock=clock)

    waited = await clock.run(main)
    assert waited.last == 4 and sent == [0.0]  # one failed send, then reporting stopped


@given(base=st.integers(0, 64).map(lambda n: n / 2), beats=st.integers(1, 100_000))
def test_heartbeats_increase_and_never_reach_the_next_position(base: float, beats: int) -> None:
    assert base < heartbeat_value(base, beats) < heartbeat_value(base, beats + 1) < base + HEARTBEAT_SPAN
    assert base + HEARTBEAT_SPAN < base + 0.5  # positions are multiples of one half


# ---------------------------------------------------------------------- over MCP, against the reference backend


async def _manifest_run(connect: ClientFactory, world: World, manifest_path: str) -> str:
    from .test_lifecycle import create_run

    return await create_run(connect, world, manifest_path)


async def test_training_status_progress_is_the_runs_position(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    """The operator advances the run each time a notification arrives; the bar follows its stages."""
    run_id = await _manifest_run(connect, world, manifest_path)
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))
        if "succeeded" not in str(message) and "still waiting" not in str(message):
            await anyio.to_thread.run_sync(world.op.advance, run_id)

    async with connect(service=world.service()) as client:
        result = await client.call_tool("training_status", {"run_id": run_id, "wait_seconds": 30},
                                        progress_callback=progress)
    envelope = result.structured_content
    assert envelope is not None and envelope["ok"] is True, envelope
    assert envelope["data"]["state"] == "succeeded"
    stages = [stage["name"] for stage in envelope["data"]["stages"]]
    values = [value for value, _, _ in seen]
    assert all(a < b for a, b in itertools.pairwise(values)), values
    assert all(total == len(stages) for _, total, _ in seen)
    # queued (0), each stage running (k + 0.5) and passed (k + 1): the bar is the run's position.
    expected = [0.0] + [k + 0.5 for k in range(len(stages))] + [float(len(stages))]
    assert values == expected, values
    assert "queued" in str(seen[0][2])
    for stage, (_, _, message) in zip(stages, seen[1:], strict=False):
        assert f"stage \"{stage}\"" in str(message) and "running" in str(message)
    assert any("step" in str(message) for _, _, message in seen)  # the metrics step refines the words
    assert "succeeded" in str(seen[-1][2])
    assert world.token not in json.dumps(seen)


async def test_heartbeats_arrive_while_a_backend_read_is_slow(
    connect: ClientFactory, world: World, manifest_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read slower than the heartbeat still yields notifications: the heartbeat does not wait for polls."""
    run_id = await _manifest_run(connect, world, manifest_path)
    monkeypatch.setattr(waiting, "HEARTBEAT_S", 0.05)
    seen: list[str] = []
    finished = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(str(message))
        if len(seen) == 1:  # the next read of the run is held for a second
            await anyio.to_thread.run_sync(
                lambda: world.op.fault("GET /v1/training-runs/{run_id}", "delay", times=1, seconds=1.0))
        if sum("still waiting" in m for m in seen) == 3 and not finished.is_set():
            finished.set()
            await anyio.to_thread.run_sync(world.op.finish, run_id)

    async with connect(service=world.service()) as client:
        result = await client.call_tool("training_status", {"run_id": run_id, "wait_seconds": 30},
                                        progress_callback=progress)
    assert result.structured_content is not None and result.structured_content["data"]["state"] == "succeeded"
    assert finished.is_set()  # three heartbeats came while the first read was held for a second


async def test_confirmation_status_progress_goes_from_pending_to_decided(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    """The person signs in and confirms at the desk while the agent waits; the bar goes 0 -> 1 of 1."""
    async with connect(service=world.service()) as client:
        plan = (await client.call_tool("plan_training", {"booking_id": world.booking,
                                                         "manifest_path": manifest_path})).structured_content
        assert plan is not None and plan["ok"] is True, plan
        request_id = plan["data"]["confirmation_request"]["request_id"]
        person = world.backend.person(world.account)
        await anyio.to_thread.run_sync(person.sign_in)
        seen: list[tuple[float, float | None, str | None]] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append((value, total, message))
            if len(seen) == 1:  # the agent is waiting: now the person decides
                await anyio.to_thread.run_sync(person.confirm, request_id)

        result = await client.call_tool("confirmation_status", {"request_id": request_id, "wait_seconds": 30},
                                        progress_callback=progress)
    envelope = result.structured_content
    assert envelope is not None and envelope["ok"] is True, envelope
    assert envelope["data"]["status"] == "confirmed" and envelope["data"]["confirmation_ref"]
    assert envelope["data"]["wait"]["timed_out"] is False
    assert [(value, total) for value, total, _ in seen] == [(0.0, 1.0), (1.0, 1.0)]
    assert "pending" in str(seen[0][2]) and "confirmed" in str(seen[1][2])
    assert all(request_id in str(message) for _, _, message in seen)
