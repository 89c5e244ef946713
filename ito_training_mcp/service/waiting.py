"""Waiting for the backend, with progress that means progress (`training_status`, `confirmation_status`).

A wait polls until what it waits for settles (a run ends, a person decides) or its budget is spent.
Progress notifications report *where the thing is*, never how long the call has waited:

- a run: the number of stages whose gate passed, plus one half while the next stage is running,
  out of the number of stages;
- a confirmation request: 0 while pending, 1 once decided, out of 1.

MCP requires each notification's value to be larger than the last. A notification is sent when the
position changes, and at least every `HEARTBEAT_S` seconds while nothing changes -- also while a
slow backend request is in flight. A heartbeat repeats the last position plus a tiny epsilon that
grows with each heartbeat but stays below `HEARTBEAT_SPAN` (0.001): positions are multiples of one
half, so a heartbeat never reaches the next real position, and the value keeps meaning position.

Bounds: the caller clamps the budget (`ITO_TRAINING_MAX_WAIT_S`) and counts it from the start of
the call (`started`), so the time the backend took to answer the reads before the wait and the
first read is spent from the budget, not added to it. Polls are spaced by the configured interval,
growing by half each time up to ten times that interval and never beyond `HEARTBEAT_S`. No poll
starts once the budget is spent, and each poll's reads get what is left of it as their deadline
(`fetch(remaining_s)`; the service hands it to the backend client), so a slow read ends the wait
with the last state read rather than overrunning: a call that waits ends within its budget. (The
reads before the first state is known are bounded by the caller, by the server's cap.) The clock
is injectable: tests run a simulated minute of waiting without sleeping through it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import anyio

from ito_training_mcp.backend.client import BudgetSpent
from ito_training_mcp.service.base import Progress

log = logging.getLogger("ito_training_mcp")

HEARTBEAT_S = 5.0
HEARTBEAT_SPAN = 0.001
POLL_GROWTH = 1.5
POLL_GROWTH_LIMIT = 10.0  # the interval never grows beyond this multiple of the configured one

T = TypeVar("T")


@dataclass(frozen=True)
class Position:
    """Where the awaited thing is: `value` out of `total` (None when unknown), and words for it."""

    value: float
    total: float | None
    message: str


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The real clock: `time.monotonic` and `anyio.sleep`."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


@dataclass(frozen=True)
class Waited(Generic[T]):
    last: T
    waited_s: float
    timed_out: bool


def heartbeat_value(base: float, beats: int) -> float:
    """The value of the `beats`-th heartbeat (1-based) after the real position `base`: strictly
    increasing in `beats`, always below `base + HEARTBEAT_SPAN`."""
    return base + HEARTBEAT_SPAN * beats / (beats + 1)


class Reporter:
    """Sends progress notifications whose values strictly increase and mean position.

    A failing progress channel (a client that went away) never fails the call: reporting stops.
    """

    def __init__(self, progress: Progress, clock: Clock) -> None:
        self._progress = progress
        self._clock = clock
        self._lock = anyio.Lock()
        self._position: Position | None = None
        self._base = 0.0
        self._last: float | None = None
        self._beats = 0
        self._broken = False
        self.last_sent_at = clock.now()
        self.sent = 0

    async def observe(self, position: Position) -> None:
        """Report a newly read position: at once if it moved or its words changed."""
        async with self._lock:
            previous, self._position = self._position, position
            if self._last is None or position.value > self._last:
                self._base, self._beats = position.value, 0
                await self._send(position.value, position)
            elif previous is None or position.message != previous.message:
                await self._send(self._heartbeat(), position)

    async def heartbeat(self, note: str) -> None:
        """Nothing moved: repeat the position, a hair further on, with a note."""
        async with self._lock:
            if self._position is None:
                self.last_sent_at = self._clock.now()
                return
            position = self._position
            await self._send(self._heartbeat(), Position(position.value, position.total, f"{position.message}; {note}"))

    def _heartbeat(self) -> float:
        self._beats += 1
        return heartbeat_value(self._base, self._beats)

    async def _send(self, value: float, position: Position) -> None:
        self.last_sent_at = self._clock.now()
        if self._broken:
            return
        self._last = value
        try:
            await self._progress(value, position.total, position.message)
        except Exception as exc:  # the channel is gone; the call itself goes on
            self._broken = True
            log.info("progress reporting stopped (%s)", type(exc).__name__)
        else:
            self.sent += 1


async def _beat(reporter: Reporter, clock: Clock, started: float, budget_s: float, heartbeat_s: float) -> None:
    """At least one notification every `heartbeat_s` seconds, whatever the poll loop is doing."""
    while True:
        delay = reporter.last_sent_at + heartbeat_s - clock.now()
        if delay > 0:
            await clock.sleep(delay)
            continue
        waited = min(clock.now() - started, budget_s)
        await reporter.heartbeat(f"still waiting ({waited:.0f} s of at most {budget_s:g} s)")


Fetch = Callable[[float | None], Awaitable[T]]


async def wait_until(
    fetch: Fetch[T],
    settled: Callable[[T], bool],
    describe: Callable[[T], Position],
    *,
    budget_s: float,
    interval_s: float,
    progress: Progress | None,
    clock: Clock | None = None,
    heartbeat_s: float | None = None,
    started: float | None = None,
) -> Waited[T]:
    """Fetch once; with a budget, poll until `settled` or the budget is spent, reporting position.

    `fetch(deadline_s)` reads the current state; a poll passes what is left of the budget as
    `deadline_s` (the first read passes None: the caller bounds it). `started` is when the call
    began, on `clock` (default: now); the budget counts from there. A refusal raised by `fetch` (a
    revoked credential, say) ends the wait at once and propagates, except `BudgetSpent` during a
    poll, which ends the wait with the last state read. Progress is reported only when the call
    waits (`budget_s > 0`).
    """
    clock = clock or MonotonicClock()
    heartbeat_s = HEARTBEAT_S if heartbeat_s is None else heartbeat_s
    started = clock.now() if started is None else started
    current = await fetch(None)
    if budget_s <= 0:
        return Waited(current, 0.0, False)
    reporter = Reporter(progress, clock) if progress is not None else None
    if reporter is not None:
        await reporter.observe(describe(current))
    if settled(current):
        return Waited(current, min(clock.now() - started, budget_s), False)

    failure: Exception | None = None
    timed_out = False
    async with anyio.create_task_group() as group:
        if reporter is not None:
            group.start_soon(_beat, reporter, clock, started, budget_s, heartbeat_s)
        try:
            current, timed_out = await _poll(fetch, settled, describe, reporter, clock, started, current,
                                             budget_s=budget_s, interval_s=interval_s, heartbeat_s=heartbeat_s)
        except Exception as exc:  # re-raised below, unwrapped from the task group
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return Waited(current, min(clock.now() - started, budget_s), timed_out)


async def _poll(
    fetch: Fetch[T],
    settled: Callable[[T], bool],
    describe: Callable[[T], Position],
    reporter: Reporter | None,
    clock: Clock,
    started: float,
    current: T,
    *,
    budget_s: float,
    interval_s: float,
    heartbeat_s: float,
) -> tuple[T, bool]:
    """The poll loop: returns the last state read and whether the budget ran out first."""

    interval = min(interval_s, heartbeat_s)
    ceiling = min(interval_s * POLL_GROWTH_LIMIT, heartbeat_s)
    while True:
        remaining = budget_s - (clock.now() - started)
        if remaining <= 0:
            return current, True
        await clock.sleep(min(interval, remaining))
        remaining = budget_s - (clock.now() - started)
        if remaining <= 0:  # no poll starts once the budget is spent
            return current, True
        try:
            # A read may be abandoned, never a mutation; the backend client gets the same deadline.
            with anyio.move_on_after(remaining) as scope:
                current = await fetch(remaining)
        except BudgetSpent:
            return current, True
        if scope.cancelled_caught:
            return current, True
        if reporter is not None:
            await reporter.observe(describe(current))
        if settled(current):
            return current, False
        interval = min(interval * POLL_GROWTH, ceiling)


def wait_data(requested_s: int, limit_s: int, waited: Waited[Any]) -> dict[str, Any]:
    """`data.wait`: what was asked, the server's limit, whether it clamped the ask, and what happened."""
    return {
        "requested_s": requested_s,
        "limit_s": limit_s,
        "clamped": requested_s > limit_s,
        "waited_s": round(waited.waited_s, 3),
        "timed_out": waited.timed_out,
    }
