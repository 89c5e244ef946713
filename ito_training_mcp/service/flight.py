"""Single-flight: at most one request per key in flight; concurrent callers share its answer.

Sixty-four cold submits arriving together would otherwise send sixty-four identical capability and
identity requests. With a flight per key, the first caller (the leader) sends the request; the
others wait for its answer, bounded, and take it. Rules:

- An answer -- success or refusal -- is shared only with the callers that waited on that flight.
  Nothing is remembered after it lands; caching is the caller's business (and caches successes only).
- If the leader is cancelled (its client went away), its flight ends without an answer and one of
  the waiters becomes the next leader: a cancelled call never strands or fails the others.
- A waiter waits at most `wait_s`; then it gives up with the refusal `on_timeout()` builds.
- Anything other than a `Refusal` raised by the leader (a defect) is not shared: each waiter
  retries as a leader, so a defect stays one call's `INTERNAL_ERROR`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio

from ito_training_mcp.errors import Refusal

T = TypeVar("T")


@dataclass
class _Flight(Generic[T]):
    done: anyio.Event = field(default_factory=anyio.Event)
    value: T | None = None
    refusal: Refusal | None = None
    answered: bool = False


class SingleFlight(Generic[T]):
    """One in-flight computation per key. Safe within one event loop (no locks needed)."""

    def __init__(self) -> None:
        self._flights: dict[Hashable, _Flight[T]] = {}

    def in_flight(self, key: Hashable) -> bool:
        return key in self._flights

    async def run(
        self,
        key: Hashable,
        fetch: Callable[[], Awaitable[T]],
        *,
        wait_s: float,
        on_timeout: Callable[[], Refusal],
    ) -> T:
        while True:
            flight = self._flights.get(key)
            if flight is None:
                return await self._lead(key, fetch)
            with anyio.move_on_after(wait_s) as scope:
                await flight.done.wait()
            if scope.cancelled_caught:
                raise on_timeout()
            if flight.answered:
                if flight.refusal is not None:
                    raise _copy(flight.refusal)
                return flight.value  # type: ignore[return-value]  # answered without refusal: a value
            # The leader was cancelled or hit a defect: try again, possibly as the next leader.

    async def _lead(self, key: Hashable, fetch: Callable[[], Awaitable[T]]) -> T:
        flight: _Flight[T] = _Flight()
        self._flights[key] = flight
        try:
            value = await fetch()
        except Refusal as refusal:
            flight.refusal, flight.answered = refusal, True
            raise
        else:
            flight.value, flight.answered = value, True
            return value
        finally:
            # Runs on success, refusal, defect and cancellation alike: the flight is over.
            del self._flights[key]
            flight.done.set()


def _copy(refusal: Refusal) -> Refusal:
    """Each waiter raises its own exception object of the same class (callers may amend the one
    they catch, e.g. with a next step)."""
    twin = type(refusal).__new__(type(refusal), *refusal.args)
    twin.__dict__.update(refusal.__dict__)
    twin.details = dict(refusal.details) if refusal.details is not None else None
    return twin
