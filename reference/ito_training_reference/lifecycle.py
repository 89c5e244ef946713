"""Run lifecycle: what advance / fail-gate / finish / cancel / cleanup do, and the incidents a run can
meet on the way (an interruption, a loss spike and the restart a person may confirm for it).

Pure functions over a `RunRecord`; `store.py` loads and saves it in one transaction. Nothing
trains: every number is a deterministic function of the stages passed and the incidents met, so
tests and demos see the same evals, checkpoints and metrics every time.

Steps and checkpoints. Each training stage (every stage but data_prep and the ladder, see
`curriculum.py`) spans `STAGE_INTERVALS` x the manifest's `interval_steps` of the model's own
steps; a checkpoint is written at every multiple of `interval_steps` the run passes, and the
store keeps the last `retain_last` of them.

Incidents. An interruption (injected on demand, or every `every_steps` steps) happens half an
interval after the run's position: the backend detects it after `detect_s`, resumes from the last
checkpoint after `resume_s`, and the steps since that checkpoint are run again. A loss spike pauses
the running stage and records a proposal to restart from the last checkpoint before the spike;
nothing moves a paused stage but a person's decision: `restart` (confirmed, through
`POST .../restart`) or `decline` (the request declined: the stage continues where it paused).
Goodput and the interruption rate follow from the incidents (`telemetry`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from typing import Any

from . import curriculum

TERMINAL_STATES = frozenset({"gate_failed", "succeeded", "failed", "cancelled", "cleaned_up"})
CANCELLABLE_STATES = frozenset({"queued", "validating", "running"})
CLEANED_RESOURCES = ("containers", "scratch_volumes", "staged_data")
STAGE_INTERVALS = 2  # checkpoint intervals per training stage
METRIC_POINTS_PER_STAGE = 4
INITIAL_LOSS = 2.6
SECONDS_PER_STEP = 2.0  # the simulated time of one optimizer step, for goodput
DETECT_S, RESUME_S = 150.0, 420.0  # an interruption's detection and resume times unless given
DETECT_TARGET_S, RESUME_TARGET_S = 600.0, 900.0  # the skill's targets: detect < 10 min, resume < 15 min
SPIKE_FACTOR = 3.0
MAX_KEPT_INCIDENTS = 20  # per run, the most recent interruptions and decided proposals kept for reports
MAX_CROSSINGS = 8  # interruptions the rate may cause within one stage
MAX_SHOWN_INTERRUPTIONS = 5  # in the run object (status); the metrics count them all


@dataclass(frozen=True)
class Plan:
    """What the run needs from its manifest, kept so the manifest bytes need not be stored.

    `stage_usd` is the estimate's cost of each stage, in run order: what the run accrues as each
    gate passes. Runs recorded before it existed have none and accrue the confirmed maximum
    spread evenly over their stages. `gpus` and `layout` are the booking's GPU count and the
    parallelism chosen for it (`parallelism.Layout.as_json`)."""

    target: str
    parameter_count: int
    checkpoint_storage: str
    interval_steps: int
    retain_last: int
    suite: str
    max_incremental_usd: str
    stage_usd: tuple[str, ...] = ()
    gpus: int = 0
    layout: dict[str, Any] = field(default_factory=dict)

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

    def cost_after(self, passed: int, stages: int, extra: str = "0.00") -> str:
        """Cost accrued once `passed` of `stages` gates have passed, plus `extra` (steps run again after a
        restart): the estimate's stages so far, never more than the confirmed maximum."""
        cap = Decimal(self.max_incremental_usd)
        if self.stage_usd:
            accrued = sum((Decimal(v) for v in self.stage_usd[:passed]), Decimal("0"))
        else:
            accrued = (cap * passed / max(stages, 1)).quantize(Decimal("0.01"), rounding=ROUND_DOWN)
        return f"{min(accrued + Decimal(extra), cap):.2f}"


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
    events: dict[str, Any] = field(default_factory=dict)
    rewound_to: int | None = None  # the chart's points after this step are dropped: those steps run again
    new_logs: list[tuple[str | None, str]] = field(default_factory=list)
    new_checkpoints: list[Checkpoint] = field(default_factory=list)
    new_metrics: list[tuple[int, float | None, float]] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def paused(self) -> bool:
        return any(s["state"] == "paused" for s in self.stages)

    @property
    def proposal(self) -> dict[str, Any] | None:
        """The pending restart proposal, if any."""
        found = self.events.get("proposal")
        return found if isinstance(found, dict) and found.get("status") == "pending" else None

    def public(self, fmt: Callable[[float], str]) -> dict[str, Any]:
        """The contract's run object, with its pending proposals and recent interruptions; `fmt` renders
        timestamps."""
        proposal = self.proposal
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
            "proposed_actions": [] if proposal is None else [proposal_view(proposal, fmt)],
            "interruptions": [interruption_view(i, fmt)
                              for i in self.events.get("interruptions", [])[-MAX_SHOWN_INTERRUPTIONS:]],
        }


class LifecycleError(Exception):
    """The requested transition does not exist from the run's state (operator 409)."""


class UnknownStage(LifecycleError):
    """fail-gate named a stage this run does not have (operator 422)."""


class StageNotAhead(LifecycleError):
    """fail-gate named a stage that has already passed (operator 409)."""


class RunPaused(LifecycleError):
    """The run's stage is paused on a restart proposal: only a person's decision (or a cancel) moves it."""


class NotRunning(LifecycleError):
    """No running stage of the kind asked for (an interruption needs one; a spike, a training stage)."""


class NotRestartable(LifecycleError):
    """No pending restart proposal of that id (public 422 `no_restart_proposed`)."""


def _passed_count(rec: RunRecord) -> int:
    return sum(1 for s in rec.stages if s["state"] == "passed")


def _current(rec: RunRecord) -> int | None:
    for i, s in enumerate(rec.stages):
        if s["state"] in ("running", "paused"):
            return i
    return None


def _training(name: str) -> bool:
    return name not in curriculum.NOT_TRAINING


def _bounds(rec: RunRecord, index: int) -> tuple[int, int]:
    """The model steps the training stage at `index` spans."""
    span = STAGE_INTERVALS * rec.plan.interval_steps
    end = span * sum(1 for s in rec.stages[:index + 1] if _training(s["name"]))
    return end - span, end


def _usd(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):.2f}"


# -- telemetry ----------------------------------------------------------------------------------------
def _time_spent(rec: RunRecord, step: int) -> tuple[float, float]:
    """The run's simulated seconds at `step`: useful (the steps that count) and in all (plus the steps run
    again after interruptions and restarts, and every interruption's detection and resume time)."""
    events = rec.events
    useful = step * SECONDS_PER_STEP
    again = (int(events.get("steps_lost", 0)) + int(events.get("repeated_steps", 0))) * SECONDS_PER_STEP
    return useful, useful + again + float(events.get("detect_s", 0.0)) + float(events.get("resume_s", 0.0))


def _goodput(rec: RunRecord, step: int) -> float:
    """The useful share of the time spent: 1.0 once started with nothing lost, 0.0 before the run starts."""
    useful, spent = _time_spent(rec, step)
    if spent == 0:
        return 0.0 if rec.state == "queued" else 1.0
    return round(useful / spent, 4)


def _refresh(rec: RunRecord) -> None:
    """Goodput, and interruptions per hour of the time spent."""
    rec.goodput = _goodput(rec, rec.step)
    hours = _time_spent(rec, rec.step)[1] / 3600
    count = int(rec.events.get("interruption_count", 0))
    rec.interruption_rate = round(count / hours, 4) if hours > 0 and count else 0.0


def _cost(rec: RunRecord) -> None:
    rec.cost_usd_to_date = rec.plan.cost_after(_passed_count(rec), len(rec.stages),
                                               rec.events.get("repeated_usd", "0.00"))


def metrics(rec: RunRecord, fmt: Callable[[float], str]) -> dict[str, Any]:
    """The metrics answer: the contract's six, the interruptions with their detection and resume times,
    and the RL stage's trainer/rollout split once it has started."""
    events = rec.events
    count = int(events.get("interruption_count", 0))
    kept = events.get("interruptions", [])
    summary = {
        "count": count, "steps_lost": int(events.get("steps_lost", 0)),
        "mean_detect_s": round(events.get("detect_s", 0.0) / count, 1) if count else None,
        "mean_resume_s": round(events.get("resume_s", 0.0) / count, 1) if count else None,
        "max_detect_s": events.get("max_detect_s"), "max_resume_s": events.get("max_resume_s"),
        "detect_target_s": DETECT_TARGET_S, "resume_target_s": RESUME_TARGET_S,
        "within_targets": (events.get("max_detect_s", 0.0) < DETECT_TARGET_S
                           and events.get("max_resume_s", 0.0) < RESUME_TARGET_S),
        "last": interruption_view(kept[-1], fmt) if kept else None,
    }
    return {
        "goodput": rec.goodput, "interruption_rate": rec.interruption_rate,
        "checkpoint_bandwidth_gbps": rec.checkpoint_bandwidth_gbps, "step": rec.step, "loss": rec.loss,
        "cost_usd_to_date": rec.cost_usd_to_date, "interruptions": summary,
        "rl": curriculum.rl_split(rec.stages, rec.plan.gpus) if rec.plan.gpus else None,
    }


def interruption_view(item: dict[str, Any], fmt: Callable[[float], str]) -> dict[str, Any]:
    return {**{k: v for k, v in item.items() if k != "at"}, "at": fmt(item["at"]),
            "within_targets": item["detect_s"] < DETECT_TARGET_S and item["resume_s"] < RESUME_TARGET_S}


def proposal_view(item: dict[str, Any], fmt: Callable[[float], str]) -> dict[str, Any]:
    shown = {k: v for k, v in item.items() if k not in ("proposed_at", "decided_at", "checkpoint_loss")}
    shown["proposed_at"] = fmt(item["proposed_at"])
    return shown


# -- steps, metric points and checkpoints --------------------------------------------------------------
def _checkpoint(rec: RunRecord, step: int, now: float) -> Checkpoint:
    return Checkpoint(checkpoint_id=f"{rec.run_id}.ckpt-{step}", step=step, created_at=now,
                      size_bytes=rec.plan.parameter_count * 2,
                      uri=f"{rec.plan.checkpoint_storage.rstrip('/')}/{rec.run_id}/step-{step}")


def _advance_to(rec: RunRecord, step: int, loss: float, now: float) -> None:
    """Move the model from `rec.step` to `step`: the chart's points on the way (loss falls geometrically
    towards `loss`, with a small deterministic wobble) and a checkpoint at every multiple of the interval."""
    start_step, start_loss = rec.step, rec.loss if rec.loss is not None else INITIAL_LOSS
    if step <= start_step:
        return
    for i in range(1, METRIC_POINTS_PER_STAGE + 1):
        at = start_step + (step - start_step) * i // METRIC_POINTS_PER_STAGE
        fraction = i / METRIC_POINTS_PER_STAGE
        point = round(start_loss * (loss / start_loss) ** fraction * (1 + 0.02 * ((at // 7) % 3 - 1)), 4)
        rec.new_metrics.append((at, loss if i == METRIC_POINTS_PER_STAGE else point, _goodput(rec, at)))
    interval = rec.plan.interval_steps
    first = (start_step // interval + 1) * interval
    for at in range(first, step + 1, interval)[: STAGE_INTERVALS + 1]:
        rec.new_checkpoints.append(_checkpoint(rec, at, now))
        rec.new_logs.append((None, f"checkpoint saved at step {at}"))
    rec.step = step


def _rewind(rec: RunRecord, step: int) -> None:
    """Back to `step`: the chart's points after it go (those steps run again); those written since stay."""
    rec.rewound_to = step if rec.rewound_to is None else min(rec.rewound_to, step)
    rec.new_metrics = [point for point in rec.new_metrics if point[0] <= step]


def _keep(rec: RunRecord, key: str, item: dict[str, Any]) -> None:
    rec.events[key] = [*rec.events.get(key, []), item][-MAX_KEPT_INCIDENTS:]


# -- the stage transitions -----------------------------------------------------------------------------
def _start(rec: RunRecord, index: int) -> None:
    rec.stages[index]["state"] = "running"
    rec.new_logs.append((rec.stages[index]["name"], f"stage {rec.stages[index]['name']} started"))


def _pass_current(rec: RunRecord, index: int, now: float, every_steps: int | None) -> None:
    stage = rec.stages[index]
    name = stage["name"]
    trained = sum(1 for s in rec.stages if s["state"] == "passed" and _training(s["name"]))
    evals = curriculum.passing_evals(name, rec.plan.suite, trained + 1)
    if _training(name):
        start, end = _bounds(rec, index)
        if every_steps:
            due = range((max(rec.step, start) // every_steps + 1) * every_steps, end + 1, every_steps)
            for at in due[:MAX_CROSSINGS]:
                _interrupt_at(rec, index, at, now, DETECT_S, RESUME_S, "rate")
        _advance_to(rec, end, evals["loss"], now)
        rec.loss = evals["loss"]
    stage["state"] = "passed"
    stage["gate"] = {**stage["gate"], "status": "passed", "evals": evals}
    k = _passed_count(rec)
    rec.checkpoint_bandwidth_gbps = round(12.5 + 0.25 * k, 2)
    _cost(rec)
    _refresh(rec)
    shown = " ".join(f"{key}={value}" for key, value in evals.items())
    rec.new_logs.append((name, f"stage {name} gate passed ({stage['gate'].get('battery', {}).get('name', 'evals')}): "
                               f"{shown}"))


def advance(rec: RunRecord, now: float, every_steps: int | None = None) -> None:
    """queued -> running (first stage running); running -> pass the current gate, start the next.
    `every_steps`: the backend's interruption rate (one every that many model steps), if set."""
    if rec.terminal:
        raise LifecycleError(rec.state)
    if rec.paused:
        raise RunPaused(rec.run_id)
    current = _current(rec)
    if current is None:
        rec.state = "running"
        rec.new_logs.append((None, "run started"))
        _start(rec, 0)
        _refresh(rec)
        return
    _pass_current(rec, current, now, every_steps)
    if current + 1 < len(rec.stages):
        _start(rec, current + 1)
    else:
        rec.state = "succeeded"
        rec.new_logs.append((None, "all stage gates passed; run succeeded"))


def finish(rec: RunRecord, now: float, every_steps: int | None = None) -> None:
    """Pass every remaining stage; bounded by the stage count."""
    if rec.terminal:
        raise LifecycleError(rec.state)
    for _ in range(2 * len(rec.stages) + 2):
        if rec.terminal:
            return
        advance(rec, now, every_steps)


def fail_gate(rec: RunRecord, evals: dict[str, float] | None, stage_name: str | None = None,
              now: float = 0.0) -> None:
    """Fail a stage's gate: the run ends in gate_failed, which nothing overrides.

    Without `stage_name` the current stage fails (the first one if the run is queued). With it,
    the stages before it pass first (as `advance` would), then that stage fails.
    """
    if rec.terminal:
        raise LifecycleError(rec.state)
    if rec.paused:
        raise RunPaused(rec.run_id)
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
    found = evals if evals is not None else curriculum.failing_evals(stage["name"], rec.plan.suite)
    stage["gate"] = {**stage["gate"], "status": "failed", "evals": found}
    for later in rec.stages[current + 1:]:
        later["state"] = "skipped"
    rec.state = "gate_failed"
    rec.new_logs.append((stage["name"], f"stage {stage['name']} gate failed; run ended in gate_failed"))


def cancel(rec: RunRecord, now: float = 0.0) -> None:
    for stage in rec.stages:
        if stage["state"] in ("pending", "running", "paused"):
            stage["state"] = "skipped"
    proposal = rec.proposal
    if proposal is not None:
        _settle(rec, proposal, "withdrawn", now)
    rec.state = "cancelled"
    rec.new_logs.append((None, "run cancelled at the account's request"))


def cleanup(rec: RunRecord) -> list[str]:
    """Release the run's compute-side resources. The booking is never part of this."""
    if rec.state == "cleaned_up":
        return []
    rec.state = "cleaned_up"
    rec.new_logs.append((None, "cleanup released containers, scratch volumes and staged data; booking untouched"))
    return list(CLEANED_RESOURCES)


# -- incidents -----------------------------------------------------------------------------------------
def _running(rec: RunRecord) -> int:
    """The running (not paused) stage's index, or LifecycleError."""
    if rec.terminal:
        raise LifecycleError(rec.state)
    if rec.paused:
        raise RunPaused(rec.run_id)
    current = _current(rec)
    if current is None:
        raise NotRunning(rec.state)
    return current


def _interrupt_at(rec: RunRecord, index: int, at: int, now: float, detect_s: float, resume_s: float,
                  cause: str) -> None:
    """A failure at step `at` of the stage at `index`: checkpoints up to it were written; the run resumes
    from the last of them and runs the steps since again."""
    name = rec.stages[index]["name"]
    if _training(name):
        _advance_to(rec, at, rec.loss if rec.loss is not None else INITIAL_LOSS, now)
        resumed = (at // rec.plan.interval_steps) * rec.plan.interval_steps
    else:
        at = resumed = rec.step
    lost = at - resumed
    count = int(rec.events.get("interruption_count", 0)) + 1
    checkpoint = f"{rec.run_id}.ckpt-{resumed}" if resumed > 0 and _training(name) else None
    _keep(rec, "interruptions", {
        "interruption_id": f"{rec.run_id}.int-{count}", "at": now, "stage": name, "step": at,
        "resumed_from_step": resumed, "checkpoint_id": checkpoint, "steps_lost": lost,
        "detect_s": detect_s, "resume_s": resume_s, "cause": cause,
    })
    events = rec.events
    events["interruption_count"] = count
    events["steps_lost"] = int(events.get("steps_lost", 0)) + lost
    events["detect_s"] = float(events.get("detect_s", 0.0)) + detect_s
    events["resume_s"] = float(events.get("resume_s", 0.0)) + resume_s
    events["max_detect_s"] = max(float(events.get("max_detect_s", 0.0)), detect_s)
    events["max_resume_s"] = max(float(events.get("max_resume_s", 0.0)), resume_s)
    rec.step = resumed
    _rewind(rec, resumed)
    where = f"checkpoint at step {resumed}" if checkpoint else "the start of the stage"
    rec.new_logs.append((name, f"interruption at step {at} ({cause}): detected after {detect_s:g} s, resumed from "
                               f"{where} after {resume_s:g} s; {lost} step(s) run again"))
    _refresh(rec)


def interrupt(rec: RunRecord, now: float, detect_s: float = DETECT_S, resume_s: float = RESUME_S) -> None:
    """An interruption injected now, half an interval past the run's position in its running stage."""
    index = _running(rec)
    start, end = _bounds(rec, index)
    at = min(end - 1, max(rec.step, start) + max(1, rec.plan.interval_steps // 2))
    _interrupt_at(rec, index, max(at, start + 1), now, detect_s, resume_s, "injected")


def spike(rec: RunRecord, now: float, factor: float = SPIKE_FACTOR) -> None:
    """A loss spike in the running training stage: the stage pauses and the backend proposes a restart
    from the last checkpoint before the spike. It never restarts by itself."""
    index = _running(rec)
    stage = rec.stages[index]
    if not _training(stage["name"]):
        raise NotRunning(stage["name"])
    interval = rec.plan.interval_steps
    start, end = _bounds(rec, index)
    at = min(end - 1, max(rec.step, start + interval) + max(1, interval // 2))
    before = rec.loss if rec.loss is not None else INITIAL_LOSS
    _advance_to(rec, at - 1, before, now)
    back = ((at - 1) // interval) * interval  # the last checkpoint strictly before the spike
    spiked = round(before * factor, 4)
    rec.new_metrics.append((at, spiked, _goodput(rec, at)))
    rec.step, rec.loss = at, spiked
    stage["state"] = "paused"
    repeated = at - back
    stage_usd = Decimal(rec.plan.stage_usd[index]) if index < len(rec.plan.stage_usd) else Decimal("0")
    cost = _usd(stage_usd * repeated / (STAGE_INTERVALS * interval))
    number = len(rec.events.get("proposals", [])) + 1
    checkpoint = f"{rec.run_id}.ckpt-{back}" if back > 0 else None
    rec.events["proposal"] = {
        "proposal_id": f"{rec.run_id}.restart-{number}", "action": "training.restart", "reason": "loss_spike",
        "status": "pending", "stage": stage["name"], "spike_step": at, "spike_loss": spiked, "loss_before": before,
        "checkpoint_id": checkpoint, "checkpoint_step": back, "checkpoint_loss": before,
        "repeated_steps": repeated, "repeated_cost_usd": cost, "proposed_at": now,
    }
    rec.new_logs.append((stage["name"], f"loss spike at step {at}: loss {spiked} (was {before}); stage "
                                        f"{stage['name']} paused. Proposed: restart from step {back} "
                                        f"({checkpoint or 'the start'}), running {repeated} step(s) again "
                                        f"(about ${cost}); nothing happens until a person decides"))
    _refresh(rec)


def _settle(rec: RunRecord, proposal: dict[str, Any], status: str, now: float) -> None:
    decided = {**proposal, "status": status, "decided_at": now}
    rec.events["proposal"] = decided
    _keep(rec, "proposals", decided)


def restart(rec: RunRecord, proposal_id: str, now: float) -> dict[str, Any]:
    """Carry out a confirmed restart: back to the proposed checkpoint, the stage running again, the
    repeated steps' cost added to the run's. Returns the settled proposal."""
    proposal = rec.proposal
    if rec.terminal or proposal is None or proposal["proposal_id"] != proposal_id:
        raise NotRestartable(rec.run_id)
    index = next(i for i, s in enumerate(rec.stages) if s["state"] == "paused")
    rec.stages[index]["state"] = "running"
    rec.advanced_at = now  # the run clock counts from the decision: a paused stage did not advance
    rec.step, rec.loss = int(proposal["checkpoint_step"]), float(proposal["checkpoint_loss"])
    _rewind(rec, rec.step)
    rec.events["repeated_steps"] = int(rec.events.get("repeated_steps", 0)) + int(proposal["repeated_steps"])
    rec.events["repeated_usd"] = _usd(Decimal(rec.events.get("repeated_usd", "0.00"))
                                      + Decimal(proposal["repeated_cost_usd"]))
    _settle(rec, proposal, "accepted", now)
    _cost(rec)
    _refresh(rec)
    rec.new_metrics.append((rec.step, rec.loss, rec.goodput))  # the chart resumes at the checkpoint
    rec.new_logs.append((rec.stages[index]["name"], f"restarted from step {rec.step} as confirmed; "
                                                    f"{proposal['repeated_steps']} step(s) run again "
                                                    f"(about ${proposal['repeated_cost_usd']})"))
    return dict(rec.events["proposal"])


def decline(rec: RunRecord, proposal_id: str, now: float) -> None:
    """The person declined the restart: the stage continues from where it paused, nothing repeated."""
    proposal = rec.proposal
    if rec.terminal or proposal is None or proposal["proposal_id"] != proposal_id:
        return
    index = next(i for i, s in enumerate(rec.stages) if s["state"] == "paused")
    rec.stages[index]["state"] = "running"
    rec.advanced_at = now  # the run clock counts from the decision: a paused stage did not advance
    _settle(rec, proposal, "declined", now)
    rec.new_logs.append((rec.stages[index]["name"], f"restart declined; stage {rec.stages[index]['name']} "
                                                    f"continues from step {rec.step}"))
