"""The `data` of the tools that read or change a run: availability, submit, status, logs, metrics,
checkpoints, cancel, restart and cleanup."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from ito_training_mcp.tools.results.pieces import (
    EXACT,
    PROPOSED,
    Booking,
    Id,
    Interruption,
    Key,
    Money,
    ProposedAction,
    RunState,
    Sha256,
    Stage,
    Timestamp,
    Wait,
)


@EXACT
class AvailabilityData(TypedDict):
    """check_training_availability."""

    available: Literal[True]
    contract_version: str
    operations: list[str]
    booking: Booking | None
    account_id: NotRequired[Id]



@EXACT
class SubmissionData(TypedDict):
    """submit_training."""

    booking_id: Id
    run_id: Id
    manifest_sha256: Sha256
    idempotency_key: Key
    state: RunState
    created: bool
    recovered_after_ambiguous_response: bool
    account_id: Id
    created_at: Timestamp
    updated_at: Timestamp


@EXACT
class RunStatusData(TypedDict):
    """training_status, when the run exists."""

    run_id: Id
    booking_id: Id
    account_id: Id
    manifest_sha256: Sha256
    idempotency_key: Key
    state: RunState
    created_at: Timestamp
    updated_at: Timestamp
    stages: list[Stage]
    proposed_actions: Annotated[list[ProposedAction], PROPOSED]
    interruptions: list[Interruption]
    found: Literal[True]
    terminal: bool
    failed_gates: list[str]
    wait: Wait


@EXACT
class NoRunData(TypedDict):
    """training_status by idempotency key, when no run exists for it."""

    found: Literal[False]
    idempotency_key: Key
    run_id: None
    state: None


StatusData = RunStatusData | NoRunData


@EXACT
class LogLine(TypedDict):
    ts: Timestamp
    stage: str | None
    message: str


@EXACT
class LogsData(TypedDict):
    """training_logs."""

    run_id: Id
    lines: list[LogLine]
    next_cursor: Annotated[str, Field(pattern=r"^[A-Za-z0-9._:=-]+$")] | None


@EXACT
class InterruptionSummary(TypedDict):
    count: int
    steps_lost: int
    mean_detect_s: float | None
    mean_resume_s: float | None
    max_detect_s: float | None
    max_resume_s: float | None
    detect_target_s: float
    resume_target_s: float
    within_targets: bool
    last: Interruption | None


@EXACT
class RlSplit(TypedDict):
    algorithm: str
    stability_fixes: list[str]
    trainer_gpus: int
    rollout_gpus: int
    colocated: bool
    staleness_steps: Annotated[int, Field(description="How many policy versions the rollouts lag the trainer.")]
    staleness_bound_steps: int
    within_bound: bool


@EXACT
class MetricsData(TypedDict):
    """training_metrics."""

    run_id: Id
    goodput: float | None
    interruption_rate: Annotated[float | None, Field(description="Interruptions per hour of the run's time.")]
    checkpoint_bandwidth_gbps: float | None
    step: int | None
    loss: float | None
    cost_usd_to_date: Money | None
    interruptions: Annotated[InterruptionSummary | None, Field(
        description="Interruptions: how many, their detection and resume times against the targets, the last one.")]
    rl: Annotated[RlSplit | None, Field(description="The RL stage's trainer/rollout split and rollout staleness.")]


@EXACT
class Checkpoint(TypedDict):
    checkpoint_id: Id
    step: int
    created_at: Timestamp
    size_bytes: int
    uri: str


@EXACT
class CheckpointsData(TypedDict):
    """list_checkpoints."""

    run_id: Id
    checkpoints: list[Checkpoint]


@EXACT
class CancelData(TypedDict):
    """cancel_training: the run as it now is (training_status shows its stages), and this action's own key."""

    run_id: Id
    booking_id: Id
    account_id: Id
    manifest_sha256: Sha256
    state: RunState
    created_at: Timestamp
    updated_at: Timestamp
    found: Literal[True]
    terminal: bool
    failed_gates: list[str]
    submit_idempotency_key: Key
    action: Literal["cancel"]
    idempotency_key: Key
    recovered_after_ambiguous_response: bool


@EXACT
class RestartData(TypedDict):
    """restart_training: the run as it now is (resumed from the checkpoint), and this action's own key."""

    run_id: Id
    booking_id: Id
    account_id: Id
    manifest_sha256: Sha256
    state: RunState
    created_at: Timestamp
    updated_at: Timestamp
    proposed_actions: Annotated[list[ProposedAction], PROPOSED]
    found: Literal[True]
    terminal: bool
    failed_gates: list[str]
    submit_idempotency_key: Key
    action: Literal["restart"]
    idempotency_key: Key
    recovered_after_ambiguous_response: bool


@EXACT
class CleanupData(TypedDict):
    """cleanup_training."""

    cleaned: list[str]
    booking_untouched: Literal[True]
    action: Literal["cleanup"]
    run_id: Id
    idempotency_key: Key
    recovered_after_ambiguous_response: bool
