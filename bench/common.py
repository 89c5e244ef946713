"""What every benchmark reports: rows of a table, each a ratio against a baseline of the same run."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Row:
    """One line of the printed table and of results.json."""

    measure: str
    subject: float
    baseline: float | None
    unit: str
    ratio: float | None
    goal: str
    passed: bool | None  # None: reported only, no goal


@dataclass
class Result:
    name: str
    title: str
    rows: list[Row]
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        verdicts = [r.passed for r in self.rows if r.passed is not None]
        return None if not verdicts else all(verdicts)


# ---------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    pos = (len(ordered) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ratio(subject: float, baseline: float) -> float:
    return subject / baseline if baseline > 0 else float("inf")


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
    }
