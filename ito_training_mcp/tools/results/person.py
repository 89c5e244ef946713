"""The `data` of the person's step: the plan (with its checks, estimate and parallelism), a request for
the person's confirmation, and its status."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from ito_training_mcp.tools.results.pieces import EXACT, Id, Money, Sha256, Timestamp, Wait
from ito_training_mcp.tools.results.review import FullReview, LeftOut, ManifestReview

RequestAction = Literal["training.create", "training.cancel", "training.cleanup", "training.restart"]
RequestStatus = Literal["pending", "confirmed", "declined", "expired"]
ReviewUrl = Annotated[str, Field(
    json_schema_extra={"format": "uri"},
    description="Where the user reviews and decides, at the Itô desk. Carries no sign-in: they sign in themselves.",
)]


@EXACT
class PlanCheck(TypedDict):
    name: str
    status: Literal["passed", "failed"]
    reason: str | None
    message: str | None


@EXACT
class EstimateLine(TypedDict):
    name: str
    gpu_hours: float
    usd: Money


@EXACT
class Estimate(TypedDict):
    usd: Money
    gpu_hours: float
    basis: Annotated[str, Field(description="How the backend computed the estimate. An estimate, not a cap.")]
    stages: Annotated[list[EstimateLine] | None, Field(
        description="One line per stage, in run order (the ladder pre-check for custom data has its own).")]


@EXACT
class Parallelism(TypedDict):
    gpus: int
    data: int
    tensor: int
    pipeline: int
    sharding: str
    precision: Annotated[str, Field(description="bf16, or fp8 where the GPUs support it.")]
    reasons: list[str]


@EXACT
class OpenedRequest(TypedDict):
    request_id: Id
    action: Literal["training.create"]
    status: Literal["pending"]
    review_url: ReviewUrl
    expires_at: Timestamp
    max_cost_usd: Money


@EXACT
class Elicitation(TypedDict):
    """Present when the review link was offered through the client (URL-mode elicitation)."""

    mode: Literal["url"]
    user_action: Annotated[
        Literal["accept", "decline", "cancel", "unanswered"],
        Field(description="What the user did with the offered link. Never a confirmation."),
    ]
    request_id: Id


@EXACT
class PlanData(TypedDict):
    """plan_training."""

    plan_id: Id
    booking_id: Id
    account_id: Id
    manifest_sha256: Sha256
    valid: Annotated[bool, Field(description="True iff every server-side check passed; only then is a request open.")]
    checks: list[PlanCheck]
    failed_checks: list[str]
    estimate: Estimate | None
    parallelism: Annotated[Parallelism | None, Field(
        description="The parallelism and precision the backend chose, and why (a wasteful one is a failed check).")]
    confirmation_request: OpenedRequest | None
    max_cost_usd: Money
    created_at: Timestamp
    review: ManifestReview
    review_text: str
    left_out: LeftOut
    full_review: FullReview
    size_bytes: int
    schema_version: Literal["ito.training.manifest.v1"]
    elicitation: NotRequired[Elicitation]


@EXACT
class RequestData(TypedDict):
    """request_confirmation."""

    request_id: Id
    action: Literal["training.cancel", "training.cleanup", "training.restart"]
    status: Literal["pending"]
    review_url: ReviewUrl
    expires_at: Timestamp
    run_id: Id
    booking_id: Id
    max_cost_usd: Annotated[Money, Field(
        description="What the user confirms spending: 0.00 for a cancel or cleanup; a restart's repeated steps.")]
    elicitation: NotRequired[Elicitation]


@EXACT
class ConfirmationStatusData(TypedDict):
    """confirmation_status."""

    request_id: Id
    action: RequestAction
    status: RequestStatus
    confirmation_ref: Annotated[Id | None, Field(description="Set only when status is confirmed.")]
    next_tool: Annotated[
        Literal["submit_training", "cancel_training", "cleanup_training", "restart_training"] | None,
        Field(description="The tool to call with confirmation_ref, when confirmed."),
    ]
    booking_id: Id
    run_id: Id | None
    plan_id: Id | None
    manifest_sha256: Sha256 | None
    max_cost_usd: Money
    review_url: ReviewUrl
    expires_at: Timestamp
    decided_at: Timestamp | None
    wait: Wait
