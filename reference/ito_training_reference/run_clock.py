"""The run clock: reference runs move by themselves, whether or not anyone asks.

With `auto_advance_s` set, every active run passes one stage per that many seconds of the store's
clock (`Backend.catch_up`, deterministic in the clock's value however often it runs). Every request
catches up first -- API, operator and desk pages alike -- so no answer shows a run behind its
clock; and a task started with the server catches up every `tick_s` meanwhile, so runs also finish
(and meet the interruption rate) while nobody looks. Each catch-up is bounded (at most
`store.MAX_AUTO_ADVANCES` stages per run); the task stops with the server. Tests inject a clock,
move it, and step it with `POST /operator/clock/tick` instead of waiting.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from .state import Backend

MIN_TICK_S, MAX_TICK_S = 0.05, 1.0
log = logging.getLogger("ito_training_mcp.reference_backend")


def tick_s(auto_advance_s: float) -> float:
    """How often the task catches up: a quarter of the advance interval, within [0.05, 1] s."""
    return min(MAX_TICK_S, max(MIN_TICK_S, auto_advance_s / 4))


async def _tick(backend: Backend, period_s: float) -> None:
    while True:
        await anyio.sleep(period_s)
        try:
            backend.catch_up()
        except Exception as exc:  # a failed tick must not stop the clock or the server: the next one retries
            log.error("run clock: catch-up failed (%s)", type(exc).__name__)


@asynccontextmanager
async def running(backend: Backend) -> AsyncIterator[None]:
    """The server's lifespan: the clock's task while the server runs (none without `auto_advance_s`)."""
    async with anyio.create_task_group() as group:
        if backend.auto_advance_s is not None:
            group.start_soon(_tick, backend, tick_s(backend.auto_advance_s))
        try:
            yield
        finally:
            group.cancel_scope.cancel()
