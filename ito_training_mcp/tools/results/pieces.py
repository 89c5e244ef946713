"""The pieces several tools' `data` share: scalar formats, a run's stages, gates and interruptions, a
proposal the backend makes, a booking, a wait.

Every model is a closed TypedDict (`EXACT`): the core returns plain dicts, and these describe them
exactly (every key the core always sends is required, optional keys are `NotRequired`). Only what the
backend relays verbatim stays open: a stage gate's `evals`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict  # pydantic needs this one on Python < 3.12

from ito_training_mcp.gates.inputs import ID_PATTERN, KEY_PATTERN

EXACT = with_config(ConfigDict(extra="forbid"))

Id = Annotated[str, Field(pattern=ID_PATTERN)]
Key = Annotated[str, Field(pattern=KEY_PATTERN)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"}, description="RFC 3339, UTC.")]
Money = Annotated[str, Field(pattern=r"^-?[0-9]+(\.[0-9]+)?$", description="Decimal USD, as a string.")]
RunState = Literal[
    "queued", "validating", "running", "gate_failed", "succeeded", "failed", "cancelling", "cancelled", "cleaned_up"
]



@EXACT
class Battery(TypedDict):
    name: str
    evals: Annotated[list[str], Field(description="The evals this battery always runs.")]


@EXACT
class StageGate(TypedDict):
    status: Literal["pending", "passed", "failed"]
    evals: Annotated[dict[str, Any], Field(description="The backend's eval results, exactly as reported.")]
    battery: Annotated[Battery | None, Field(description="The gate's fixed, named eval battery.")]


@EXACT
class Stage(TypedDict):
    name: str
    state: str
    gate: StageGate


@EXACT
class Interruption(TypedDict):
    interruption_id: Id
    at: Timestamp
    stage: str
    step: int
    resumed_from_step: Annotated[int, Field(description="The checkpoint's step the run resumed from.")]
    checkpoint_id: Id | None
    steps_lost: Annotated[int, Field(description="Steps since that checkpoint, run again.")]
    detect_s: Annotated[float, Field(description="Seconds until the backend detected it (target: under 600).")]
    resume_s: Annotated[float, Field(description="Seconds until the run resumed (target: under 900).")]
    within_targets: bool
    cause: str


@EXACT
class ProposedAction(TypedDict):
    """Proposed by the backend, decided only by the user: training.restart after a loss spike."""

    proposal_id: Id
    action: Annotated[str, Field(description="training.restart: ask with request_confirmation, then restart_training.")]
    reason: str
    status: str
    stage: str
    spike_step: int
    spike_loss: float
    loss_before: float
    checkpoint_id: Id | None
    checkpoint_step: Annotated[int, Field(description="Where the restart would resume.")]
    repeated_steps: int
    repeated_cost_usd: Money
    proposed_at: Timestamp


PROPOSED = Field(description="Actions the backend proposes for the user to decide (never automatic).")


@EXACT
class GpuTopology(TypedDict):
    gpu: str
    nodes: int
    gpus_per_node: int


@EXACT
class Booking(TypedDict):
    booking_id: Id
    account_id: Id
    eligible: bool
    reason: str | None
    gpu_topology: GpuTopology
    region: str
    fabric: str
    term_ends_at: Timestamp
    checked_at: Timestamp


@EXACT
class Wait(TypedDict):
    requested_s: Annotated[int, Field(description="wait_seconds as asked.")]
    limit_s: Annotated[int, Field(description="The most one call waits on this server (ITO_TRAINING_MAX_WAIT_S).")]
    clamped: Annotated[bool, Field(description="True when wait_seconds was above limit_s and was cut to it.")]
    waited_s: float
    timed_out: Annotated[bool, Field(description="True when the wait ended before the awaited change.")]
