"""What every benchmark reports: rows, each a figure against a goal, and the statistics behind them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Row:
    """One line of the printed table and of results.json.

    `value` is the figure the goal is about: a ratio to a baseline of the same run (unit "x" or "share"),
    or an absolute bound where the goal is one (ms, bytes, MiB, count). `detail` says what it was made of.
    """

    group: str
    name: str
    value: float
    unit: str
    goal: str = ""
    passed: bool | None = None  # None: reported, no goal
    detail: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    summary: str = ""  # the line of the README's table this row counts towards (the worst row of a line shows)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """n, p50, p99 and max of durations given in seconds, in milliseconds."""
    ms = [s * 1000.0 for s in seconds]
    return {"n": len(ms), "p50": round(percentile(ms, 50), 3), "p99": round(percentile(ms, 99), 3),
            "max": round(max(ms), 3)}
