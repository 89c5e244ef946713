"""Pydantic models of every `ito.training.v1` response (contract §7).

The backend is outside our trust boundary: a response that does not validate against these
models is `BACKEND_INVALID_RESPONSE`, never a guess. Unknown fields are ignored (the contract
says clients must), known fields are typed strictly: ids and digests by pattern, timestamps as
RFC 3339 UTC, money as decimal strings, counts as integers, flags as real booleans.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator

from ito_training_mcp.errors import ConfigRefusal
from ito_training_mcp.gates.config import parse_endpoint
from ito_training_mcp.gates.inputs import ID_PATTERN, KEY_PATTERN
from ito_training_mcp.scanner import text_kinds

CONTRACT_VERSION = "ito.training.v1"
REQUIRED_OPERATIONS = ("create", "status", "logs", "metrics", "checkpoints", "cancel", "cleanup")
# The person's step (plans, confirmation requests): required on top of the seven by plan_training,
# request_confirmation and confirmation_status only.
CONFIRMATION_OPERATIONS = ("plan", "confirmation_requests")
# Restarting a run from a checkpoint the backend proposed: required by restart_training (and by asking for it).
RESTART_OPERATION = "restart"
MAX_REVIEW_URL_CHARS = 2048
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")
_DECIMAL = re.compile(r"^-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,6})?$")


def _timestamp(value: object) -> datetime:
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ValueError("must be an RFC 3339 timestamp")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except (ValueError, OverflowError):  # e.g. 0001-01-01T00:00:00+01:00 leaves the representable range
        raise ValueError("must be a representable RFC 3339 timestamp") from None


def _decimal_string(value: object) -> Decimal:
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        raise ValueError("must be a decimal string")
    try:
        return Decimal(value)
    except InvalidOperation:  # pragma: no cover - the pattern guarantees a decimal
        raise ValueError("must be a decimal string") from None


def _finite_number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError("must be a number")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range, e.g. 10**400
        raise ValueError("must be a finite number") from None
    if not math.isfinite(number):
        raise ValueError("must be finite")
    return number


def _review_url(value: object) -> str:
    """Where the person reviews a request: an absolute https URL (http only to a literal loopback
    host), no userinfo, query or fragment, a normalised path, bounded length -- the rule for
    ITO_API_URL -- and nothing that looks like a credential. A URL that could carry a sign-in token is
    refused: the review URL is never pre-authenticated. (That its path names the request's own page
    is checked with the request: `review_path_names`.)"""

    if not isinstance(value, str) or len(value) > MAX_REVIEW_URL_CHARS or value != value.strip():
        raise ValueError("must be an absolute URL")
    try:
        endpoint = parse_endpoint(value)
    except ConfigRefusal:
        raise ValueError("must be an absolute https URL without userinfo, query or fragment") from None
    if not endpoint.path or text_kinds(value):
        raise ValueError("must name a review page and hold no credential")
    return value


# A path segment before the request id: lowercase words of letters only, joined by single hyphens, at
# most 32 characters (`desk`, `review-requests`). No digits and no length to hide an encoded secret in.
_REVIEW_SEGMENT = re.compile(r"(?=[a-z-]{1,32}$)[a-z]+(?:-[a-z]+)*")
MAX_REVIEW_SEGMENTS = 4
# Words that name a page which signs someone in: a path through one of them is no review page, even
# when the last segment is the request's id (a backend that named a request after a sign-in secret).
SIGN_IN_WORDS = frozenset({"auth", "authorize", "callback", "invite", "key", "login", "log-in", "logon", "magic",
                           "magic-link", "oauth", "secret", "session", "sign-in", "signin", "sso", "token", "verify"})


def review_path_names(url: str, request_id: str) -> bool:
    """Is the path of this (already checked) review URL the page of `request_id`: up to
    `MAX_REVIEW_SEGMENTS` lowercase words, none a sign-in word, then `/<request_id>` and nothing after?
    A sign-in link (`/desk/sign-in/<secret>`) is not: its last segment is not this request's id, a
    secret is no word, and `sign-in` is a sign-in word."""
    segments = urlsplit(url).path.split("/")
    words = segments[1:-1]
    return (len(segments) >= 2 and segments[0] == "" and segments[-1] == request_id
            and len(words) <= MAX_REVIEW_SEGMENTS
            and all(_REVIEW_SEGMENT.fullmatch(word) and word not in SIGN_IN_WORDS for word in words))


Timestamp = Annotated[datetime, BeforeValidator(_timestamp)]
ReviewUrl = Annotated[str, BeforeValidator(_review_url)]
Money = Annotated[Decimal, BeforeValidator(_decimal_string)]
Number = Annotated[float, BeforeValidator(_finite_number)]
Id = Annotated[str, Field(pattern=ID_PATTERN)]
Key = Annotated[str, Field(pattern=KEY_PATTERN)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Text = Annotated[StrictStr, Field(max_length=4096)]
Code = Annotated[StrictStr, Field(max_length=128)]


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class TrainingCapabilities(_Response):
    available: StrictBool
    operations: list[Code] = Field(max_length=256)


class Capabilities(_Response):
    contract_version: Code
    training: TrainingCapabilities


class OriginProof(_Response):
    """`GET /v1/origin-proof` (an extension; `origin_proof.py`)."""

    proof: Sha256


class Me(_Response):
    account_id: Id


class GpuTopology(_Response):
    gpu: Text
    nodes: StrictInt = Field(ge=0, le=1_000_000)
    gpus_per_node: StrictInt = Field(ge=0, le=1024)


class Eligibility(_Response):
    booking_id: Id
    account_id: Id
    eligible: StrictBool
    reason: Code | None = None
    gpu_topology: GpuTopology
    region: Text
    fabric: Text
    term_ends_at: Timestamp
    checked_at: Timestamp


class Confirmation(_Response):
    ref: Id
    account_id: Id
    action: Code
    booking_id: Id | None = None
    run_id: Id | None = None
    manifest_sha256: Sha256 | None = None
    max_cost_usd: Money
    expires_at: Timestamp
    consumed: StrictBool


class RunState(StrEnum):
    QUEUED = "queued"
    VALIDATING = "validating"
    RUNNING = "running"
    GATE_FAILED = "gate_failed"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    CLEANED_UP = "cleaned_up"


TERMINAL_STATES = frozenset(
    {RunState.GATE_FAILED, RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.CLEANED_UP}
)


class Battery(_Response):
    """A stage gate's fixed, named eval battery."""

    name: Code
    evals: list[Code] = Field(max_length=64)


class StageGate(_Response):
    status: Literal["pending", "passed", "failed"]
    evals: dict[str, Any] = Field(default_factory=dict, max_length=256)
    battery: Battery | None = None


class Stage(_Response):
    name: Code
    state: Code
    gate: StageGate


class Interruption(_Response):
    """One interruption of a run: where it struck, what was run again, how long detection and resume took."""

    interruption_id: Id
    at: Timestamp
    stage: Code
    step: StrictInt = Field(ge=0)
    resumed_from_step: StrictInt = Field(ge=0)
    checkpoint_id: Id | None = None
    steps_lost: StrictInt = Field(ge=0)
    detect_s: Number = Field(ge=0)
    resume_s: Number = Field(ge=0)
    within_targets: StrictBool
    cause: Code


class ProposedAction(_Response):
    """An action the backend proposes and only a person may confirm: a restart from a checkpoint after a
    loss spike (`training.restart`)."""

    proposal_id: Id
    action: Code
    reason: Code
    status: Code
    stage: Code
    spike_step: StrictInt = Field(ge=0)
    spike_loss: Number
    loss_before: Number
    checkpoint_id: Id | None = None
    checkpoint_step: StrictInt = Field(ge=0)
    repeated_steps: StrictInt = Field(ge=0)
    repeated_cost_usd: Money
    proposed_at: Timestamp


class Run(_Response):
    run_id: Id
    booking_id: Id
    account_id: Id
    manifest_sha256: Sha256
    idempotency_key: Key
    state: RunState
    created_at: Timestamp
    updated_at: Timestamp
    stages: list[Stage] = Field(max_length=64)
    proposed_actions: list[ProposedAction] = Field(default_factory=list, max_length=8)
    interruptions: list[Interruption] = Field(default_factory=list, max_length=64)

    @property
    def pending_restart(self) -> ProposedAction | None:
        return next((p for p in self.proposed_actions if p.action == "training.restart" and p.status == "pending"),
                    None)

    def as_data(self) -> dict[str, Any]:
        """The run as the envelope reports it: the backend's own words, JSON-safe."""
        return self.model_dump(mode="json")


class RunList(_Response):
    runs: list[Run] = Field(max_length=1)


class LogLine(_Response):
    ts: Timestamp
    stage: Code | None = None
    message: Text


class Logs(_Response):
    lines: list[LogLine] = Field(max_length=1000)
    next_cursor: Annotated[StrictStr, Field(max_length=512, pattern=r"^[A-Za-z0-9._:=-]+$")] | None = None


class InterruptionSummary(_Response):
    count: StrictInt = Field(ge=0)
    steps_lost: StrictInt = Field(ge=0)
    mean_detect_s: Number | None = None
    mean_resume_s: Number | None = None
    max_detect_s: Number | None = None
    max_resume_s: Number | None = None
    detect_target_s: Number
    resume_target_s: Number
    within_targets: StrictBool
    last: Interruption | None = None


class RlSplit(_Response):
    """The RL stage: the algorithm and its stability fixes, the trainer/rollout split, rollout staleness."""

    algorithm: Code
    stability_fixes: list[Code] = Field(max_length=16)
    trainer_gpus: StrictInt = Field(ge=0)
    rollout_gpus: StrictInt = Field(ge=0)
    colocated: StrictBool
    staleness_steps: StrictInt = Field(ge=0)
    staleness_bound_steps: StrictInt = Field(ge=0)
    within_bound: StrictBool


class Metrics(_Response):
    goodput: Number | None = None
    interruption_rate: Number | None = None
    checkpoint_bandwidth_gbps: Number | None = None
    step: StrictInt | None = Field(default=None, ge=0)
    loss: Number | None = None
    cost_usd_to_date: Money | None = None
    interruptions: InterruptionSummary | None = None
    rl: RlSplit | None = None


class CheckpointInfo(_Response):
    checkpoint_id: Id
    step: StrictInt = Field(ge=0)
    created_at: Timestamp
    size_bytes: StrictInt = Field(ge=0)
    uri: Text


class Checkpoints(_Response):
    checkpoints: list[CheckpointInfo] = Field(max_length=10_000)


class CleanupResult(_Response):
    run_id: Id
    cleaned: list[Text] = Field(max_length=1000)
    booking_untouched: StrictBool


# ---------------------------------------------------------------------- the person's step


RequestAction = Literal["training.create", "training.cancel", "training.cleanup", "training.restart"]
RequestStatus = Literal["pending", "confirmed", "declined", "expired"]


class ConfirmationRequest(_Response):
    """A confirmation request: what a person decides at the desk. `confirmation_ref` is set iff confirmed."""

    request_id: Id
    account_id: Id
    action: RequestAction
    status: RequestStatus
    booking_id: Id
    run_id: Id | None = None
    plan_id: Id | None = None
    manifest_sha256: Sha256 | None = None
    max_cost_usd: Money
    review_url: ReviewUrl
    expires_at: Timestamp
    created_at: Timestamp
    decided_at: Timestamp | None = None
    confirmation_ref: Id | None = None

    @model_validator(mode="after")
    def _ref_iff_confirmed(self) -> ConfirmationRequest:
        if (self.confirmation_ref is not None) != (self.status == "confirmed"):
            raise ValueError("confirmation_ref is set iff the request is confirmed")
        if not review_path_names(self.review_url, self.request_id):
            raise ValueError("review_url must be the page of this request")
        return self


class PlanCheck(_Response):
    name: Code
    status: Literal["passed", "failed"]
    reason: Code | None = None
    message: Annotated[StrictStr, Field(max_length=1024)] | None = None


class EstimateLine(_Response):
    name: Code
    gpu_hours: Number = Field(ge=0)
    usd: Money


class Estimate(_Response):
    usd: Money
    gpu_hours: Number = Field(ge=0)
    basis: Annotated[StrictStr, Field(max_length=1024)]
    stages: list[EstimateLine] | None = Field(default=None, max_length=64)


class Parallelism(_Response):
    """The layout the backend chose for the model on the booking, and why."""

    gpus: StrictInt = Field(ge=0)
    data: StrictInt = Field(ge=0)
    tensor: StrictInt = Field(ge=0)
    pipeline: StrictInt = Field(ge=0)
    sharding: Code
    precision: Code
    reasons: list[Annotated[StrictStr, Field(max_length=1024)]] = Field(max_length=16)


class Plan(_Response):
    """A training plan: the backend's own validation of the manifest bytes, its estimate, and (iff every
    check passed) the pending `training.create` request it opened."""

    plan_id: Id
    account_id: Id
    booking_id: Id
    manifest_sha256: Sha256
    valid: StrictBool
    checks: list[PlanCheck] = Field(min_length=1, max_length=32)
    estimate: Estimate | None = None
    parallelism: Parallelism | None = None
    confirmation_request: ConfirmationRequest | None = None
    created_at: Timestamp

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        if self.valid != all(check.status == "passed" for check in self.checks):
            raise ValueError("valid must say whether every check passed")
        if self.valid != (self.confirmation_request is not None):
            raise ValueError("a request is opened iff the plan is valid")
        return self


class ErrorDetail(_Response):
    code: Code
    message: StrictStr | None = None
    reason: Code | None = None


class ErrorBody(_Response):
    error: ErrorDetail
