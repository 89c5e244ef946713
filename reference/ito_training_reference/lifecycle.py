"""Run lifecycle: the stage plan and what advance / fail-gate / finish / cancel / cleanup do.

Pure functions over a `RunRecord`; `store.py` loads and saves it in one transaction. Nothing
trains: every number is a deterministic function of how many stages have passed, so tests
and demos see the same evals, checkpoints and metrics every time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal
from typing import Any

TERMINAL_STATES = frozenset({"gate_failed", "succeeded", "failed", "cancelled", "cleaned_up"})
CANCELLABLE_STATES = frozenset({"queued", "validating", "running"})
CLEANED_RESOURCES = ("containers", "scratch_volumes", "staged_data")
_TARGET_STAGES = {
    "pretrain": ("pretrain", "mid_train", "long_context"),
    "continued_pretrain": ("continued_pretrain", "long_context"),
    "fine_tune": (),
    "rl": (),
}


@dataclass(frozen=True)
class Plan:
    """What the run needs from its manifest, kept so the manifest bytes need not be stored.

    `stage_usd` is the estimate's cost of each stage, in run order: what the run accrues as each
    gate passes. Runs recorded before it existed have none and accrue the confirmed maximum
    spread evenly over their stages."""

    target: str
    parameter_count: int
    checkpoint_storage: str
    interval_steps: int
    retain_last: int
    suite: str
    max_incremental_usd: str
    stage_usd: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {**self.__dict__, "stage_usd": list(self.stage_usd)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        known["stage_usd"] = tuple(str(v) for v in known.get("stage_usd", ()))
        return cls(**known)

    @property
    def estimate_usd(self) -> str | None:
        return f"{sum((Decimal(v) for v in self.stage_usd), Decimal('0')):.2f}" if self.stage_usd else None

    def cost_after(self, passed: int, stages: int) -> str:
        """Cost accrued once `passed` of `stages` gates have passed: the estimate's stages so far,
        never more than the confirmed maximum."""
        cap = Decimal(self.max_incremental_usd)
        if self.stage_usd:
            accrued = sum((Decimal(v) for v in self.stage_usd[:passed]), Decimal("0"))
        else:
            accrued = (cap * passed / max(stages, 1)).quantize(Decimal("0.01"), rounding=ROUND_DOWN)
        return f"{min(accrued, cap):.2f}"


@dataclass
class Checkpoint:
    checkpoint_id: str
    step: int
    created_at: float
    size_bytes: int
    uri: str


@dataclass
class RunRecord:
    run_id: str
    account_id: str
    booking_id: str
    manifest_sha256: str
    idempotency_key: str
    state: str
    stages: list[dict[str, Any]]
    plan: Plan
    step: int = 0
    loss: float | None = None
    cost_usd_to_date: str = "0.00"
    goodput: float = 0.0
    interruption_rate: float = 0.0
    checkpoint_bandwidth_gbps: float = 0.0
    created_at: float = 0.0
    updated_at: float = 0.0
    advanced_at: float = 0.0
    new_logs: list[tuple[str | None, str]] = field(default_factory=list)
    new_checkpoints: list[Checkpoint] = field(default_factory=list)
    new_metrics: list[tuple[int, float | None, float]] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def public(self, fmt: Callable[[float], str]) -> dict[str, Any]:
        """The contract's run object; `fmt` renders timestamps."""
        return {
            "run_id": self.run_id,
            "booking_id": self.booking_id,
            "account_id": self.account_id,
            "manifest_sha256": self.manifest_sha256,
            "idempotency_key": self.idempotency_key,
            "state": self.state,
            "created_at": fmt(self.created_at),
            "updated_at": fmt(self.updated_at),
            "stages": self.stages,
        }


class LifecycleError(Exception):
    """The requested transition does not exist from the run's state (operator 409)."""


class UnknownStage(LifecycleError):
    """fail-gate named a stage this run does not have (operator 422)."""


class StageNotAhead(LifecycleError):
    """fail-gate named a stage that has already passed (operator 409)."""


def stage_names(target: str, post_training: list[str]) -> list[str]:
    names = ["data_prep", *_TARGET_STAGES[target], *post_training]
    if target == "rl" and "rlvr" not in post_training:
        names.append("rlvr")
    return names


def new_stages(names: list[str]) -> list[dict[str, Any]]:
    return [{"name": n, "state": "pending", "gate": {"status": "pending", "evals": {}}} for n in names]


def _passed_count(rec: RunRecord) -> int:
    return sum(1 for s in rec.stages if s["state"] == "passed")


def _current(rec: RunRecord) -> int | None:
    for i, s in enumerate(rec.stages):
        if s["state"] == "running":
            return i
    return None


def passing_evals(plan: Plan, k: int) -> dict[str, float]:
    """Evals of the k-th passed stage (k >= 1): loss falls, the suite score rises."""
    loss = round(2.6 * 0.82**k, 4)
    return {
        "loss": loss,
        "eval_loss": round(loss * 1.04 + 0.02, 4),
        f"score/{plan.suite}": round(min(0.95, 0.35 + 0.06 * k), 4),
    }


def failing_evals(plan: Plan) -> dict[str, float]:
    return {"loss": 4.2, "eval_loss": 5.1, f"score/{plan.suite}": 0.12}


METRIC_POINTS_PER_STAGE = 4
INITIAL_LOSS = 2.6


def _metric_points(rec: RunRecord, step: int, loss: float) -> None:
    """Points between the previous step and this gate, for the desk's chart: loss falls
    geometrically from the previous gate's value, goodput wobbles deterministically below 1."""
    start_step, start_loss = rec.step, rec.loss if rec.loss is not None else INITIAL_LOSS
    for i in range(1, METRIC_POINTS_PER_STAGE + 1):
        at = start_step + (step - start_step) * i // METRIC_POINTS_PER_STAGE
        fraction = i / METRIC_POINTS_PER_STAGE
        point_loss = round(start_loss * (loss / start_loss) ** fraction * (1 + 0.02 * ((at // 7) % 3 - 1)), 4)
        goodput = round(0.93 + 0.01 * ((at // 11) % 5), 4)
        rec.new_metrics.append((at, loss if i == METRIC_POINTS_PER_STAGE else point_loss, goodput))


def _start(rec: RunRecord, index: int) -> None:
    rec.stages[index]["state"] = "running"
    rec.new_logs.append((rec.stages[index]["name"], f"stage {rec.stages[index]['name']} started"))


def _pass_current(rec: RunRecord, index: int, now: float) -> None:
    stage = rec.stages[index]
    k = _passed_count(rec) + 1
    evals = passing_evals(rec.plan, k)
    stage["state"] = "passed"
    stage["gate"] = {"status": "passed", "evals": evals}
    step = k * rec.plan.interval_steps * 2
    ckpt = Checkpoint(
        checkpoint_id=f"{rec.run_id}.ckpt-{step}",
        step=step,
        created_at=now,
        size_bytes=rec.plan.parameter_count * 2,
        uri=f"{rec.plan.checkpoint_storage.rstrip('/')}/{rec.run_id}/step-{step}",
    )
    rec.new_checkpoints.append(ckpt)
    _metric_points(rec, step, evals["loss"])
    rec.step = step
    rec.loss = evals["loss"]
    rec.goodput = round(0.97 - 0.005 * (k % 4), 4)
    rec.interruption_rate = round(0.001 * (k % 3), 4)
    rec.checkpoint_bandwidth_gbps = round(12.5 + 0.25 * k, 2)
    rec.cost_usd_to_date = rec.plan.cost_after(k, len(rec.stages))
    name = stage["name"]
    rec.new_logs.append((name, f"stage {name} gate passed: loss={evals['loss']} eval_loss={evals['eval_loss']}"))
    rec.new_logs.append((name, f"checkpoint saved at step {step}"))


def advance(rec: RunRecord, now: float) -> None:
    """queued -> running (first stage running); running -> pass the current gate, start the next."""
    if rec.terminal:
        raise LifecycleError(rec.state)
    current = _current(rec)
    if current is None:
        rec.state = "running"
        rec.new_logs.append((None, "run started"))
        _start(rec, 0)
        return
    _pass_current(rec, current, now)
    if current + 1 < len(rec.stages):
        _start(rec, current + 1)
    else:
        rec.state = "succeeded"
        rec.new_logs.append((None, "all stage gates passed; run succeeded"))


def finish(rec: RunRecord, now: float) -> None:
    """Pass every remaining stage; bounded by the stage count."""
    if rec.terminal:
        raise LifecycleError(rec.state)
    for _ in range(2 * len(rec.stages) + 2):
        if rec.terminal:
            return
        advance(rec, now)


def fail_gate(rec: RunRecord, evals: dict[str, float] | None, stage_name: str | None = None,
              now: float = 0.0) -> None:
    """Fail a stage's gate: the run ends in gate_failed, which nothing overrides.

    Without `stage_name` the current stage fails (the first one if the run is queued). With it,
    the stages before it pass first (as `advance` would), then that stage fails.
    """
    if rec.terminal:
        raise LifecycleError(rec.state)
    if stage_name is not None:
        names = [s["name"] for s in rec.stages]
        if stage_name not in names:
            raise UnknownStage(stage_name)
        target = names.index(stage_name)
        if rec.stages[target]["state"] != "pending" and _current(rec) != target:
            raise StageNotAhead(stage_name)
        for _ in range(2 * len(rec.stages) + 2):
            if _current(rec) == target:
                break
            advance(rec, now)
    current = _current(rec)
    if current is None:
        rec.state = "running"
        _start(rec, 0)
        current = 0
    stage = rec.stages[current]
    stage["state"] = "failed"
    stage["gate"] = {"status": "failed", "evals": evals if evals is not None else failing_evals(rec.plan)}
    for later in rec.stages[current + 1:]:
        later["state"] = "skipped"
    rec.state = "gate_failed"
    rec.new_logs.append((stage["name"], f"stage {stage['name']} gate failed; run ended in gate_failed"))


def cancel(rec: RunRecord) -> None:
    for stage in rec.stages:
        if stage["state"] in ("pending", "running"):
            stage["state"] = "skipped"
    rec.state = "cancelled"
    rec.new_logs.append((None, "run cancelled at the account's request"))


def cleanup(rec: RunRecord) -> list[str]:
    """Release the run's compute-side resources. The booking is never part of this."""
    if rec.state == "cleaned_up":
        return []
    rec.state = "cleaned_up"
    rec.new_logs.append((None, "cleanup released containers, scratch volumes and staged data; booking untouched"))
    return list(CLEANED_RESOURCES)
