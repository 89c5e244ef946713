"""What each tool is, for agents: name, description, honest hints, and the argument schema.

Pure metadata with no MCP import, so the MCP adapter, the CLI, the docs tests and the
snapshot test all read the same text. The argument models exist to publish a precise input
schema (`additionalProperties: false`, patterns shared with gate 0); the runtime checks live in
`inputs.py` so that refusals are envelopes that never echo a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .inputs import ID_PATTERN, KEY_PATTERN, MAX_LOG_LIMIT, MAX_WAIT_SECONDS

_BOOKING = "Id of a completed Itô booking, as the backend knows it. Never an RFQ, quote, node IP or SSH host."
_MANIFEST = (
    "Absolute, normalised path of the reviewed manifest JSON file (ito.training.manifest.v1), owned by the "
    "user, not writable by others, no symlinks anywhere on the path."
)
_CONFIRMATION = (
    "Opaque reference of the confirmation the user created out of band for exactly this digest. It is not a "
    "credential and authorises nothing by itself; empty means the user has not confirmed yet (refused with "
    "CONFIRMATION_REQUIRED)."
)
# An empty reference is a valid call that the server refuses with CONFIRMATION_REQUIRED, so the
# published schema admits it: a client validating arguments must still reach that refusal.
OPTIONAL_ID_PATTERN = r"^[A-Za-z0-9._:-]{0,128}$"
_KEY = (
    "Stable idempotency key chosen once per intended run (16-255 chars of A-Z a-z 0-9 . _ : -). Reuse the "
    "same key, with the same manifest, for every retry; never mint a new key after an error."
)
_RUN = "Run id returned by submit_training or training_status."


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckArgs(_Args):
    booking_id: str | None = Field(
        default=None, pattern=ID_PATTERN, description=_BOOKING + " Optional: with it, eligibility is checked too."
    )


class DigestArgs(_Args):
    manifest_path: str = Field(description=_MANIFEST, max_length=4096)


class SubmitArgs(_Args):
    booking_id: str = Field(pattern=ID_PATTERN, description=_BOOKING)
    manifest_path: str = Field(description=_MANIFEST, max_length=4096)
    confirmation_ref: str = Field(pattern=OPTIONAL_ID_PATTERN, description=_CONFIRMATION)
    idempotency_key: str = Field(pattern=KEY_PATTERN, description=_KEY)


class StatusArgs(_Args):
    run_id: str | None = Field(default=None, pattern=ID_PATTERN, description=_RUN + " Give this or idempotency_key.")
    idempotency_key: str | None = Field(
        default=None, pattern=KEY_PATTERN,
        description="The idempotency key of a submit whose outcome is unknown. Give this or run_id.",
    )
    wait_seconds: int | None = Field(
        default=None, ge=0, le=MAX_WAIT_SECONDS,
        description="Poll until the run reaches a terminal state or this many seconds pass (0-600; default 0).",
    )


class RunArgs(_Args):
    run_id: str = Field(pattern=ID_PATTERN, description=_RUN)


class LogsArgs(RunArgs):
    cursor: str | None = Field(default=None, max_length=512, description="next_cursor from the previous page.")
    limit: int | None = Field(default=None, ge=1, le=MAX_LOG_LIMIT, description="Lines per page (1-1000; default 200).")


class RunMutationArgs(RunArgs):
    confirmation_ref: str = Field(
        pattern=OPTIONAL_ID_PATTERN,
        description="Reference of the confirmation the user created out of band for this action on this run; "
                    "empty means the user has not confirmed yet (refused with CONFIRMATION_REQUIRED).",
    )
    idempotency_key: str = Field(pattern=KEY_PATTERN, description=_KEY.replace("run", "action"))


@dataclass(frozen=True)
class Hints:
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    arguments: type[_Args]
    hints: Hints
    reports_progress: bool = False

    @property
    def argument_names(self) -> frozenset[str]:
        return frozenset(self.arguments.model_fields)

    def input_schema(self) -> dict[str, Any]:
        schema = self.arguments.model_json_schema()
        schema["title"] = f"{self.name}Arguments"
        return schema


_REFUSAL = (
    " A result with ok: false means stop: do not retry with other arguments, do not work around it, tell the "
    "user what the notice says and hand control back."
)
_NEVER = (
    " This tool never books, releases or pays for compute, never accepts a credential, and has no override."
)

CHECK = ToolSpec(
    name="check_training_availability",
    title="Check Itô training availability",
    description=(
        "Check whether managed ML training (pre-training, fine-tuning, RL) is available on Itô and, with "
        "booking_id, whether that completed booking is eligible for it right now. Call this first, before "
        "digest_manifest or submit_training. Read-only: it creates nothing. Today training is unavailable "
        "unless a canonical backend is configured: TRAINING_UNAVAILABLE then means tell the user the "
        "capability is missing and return control; never substitute a local trainer, SSH, a browser flow or "
        "a purchase." + _REFUSAL + _NEVER
    ),
    arguments=CheckArgs,
    hints=Hints(read_only=True, destructive=False, idempotent=True, open_world=True),
)

DIGEST = ToolSpec(
    name="digest_manifest",
    title="Digest a training manifest",
    description=(
        "Read a training manifest file securely, validate it against ito.training.manifest.v1, scan it for "
        "credentials, and return its SHA-256 with a review summary of exactly what it asks for (model and "
        "revision, target, data and decontamination, post-training recipe, budget, checkpoints). Call it "
        "before asking the user to confirm: show them data.review_text and data.sha256; they confirm that "
        "digest out of band. Local only: it never contacts the backend and creates nothing." + _REFUSAL
    ),
    arguments=DigestArgs,
    hints=Hints(read_only=True, destructive=False, idempotent=True, open_world=False),
)

SUBMIT = ToolSpec(
    name="submit_training",
    title="Submit a confirmed training run",
    description=(
        "Create one training run on a completed Itô booking from a manifest the user reviewed and confirmed. "
        "This spends money. Call it only after digest_manifest, once the user has confirmed that exact digest "
        "out of band and given you the confirmation_ref. Choose one idempotency_key per intended run and "
        "reuse it for every retry: the same key returns the same run (created: false) and never a second "
        "one. On SUBMISSION_OUTCOME_UNKNOWN or IDEMPOTENCY_IN_FLIGHT call training_status with the same "
        "idempotency_key; never submit with a new key after an error. Every gate is enforced by the server "
        "and the backend." + _REFUSAL + _NEVER
    ),
    arguments=SubmitArgs,
    hints=Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
)

_READ = Hints(read_only=True, destructive=False, idempotent=True, open_world=True)

STATUS = ToolSpec(
    name="training_status",
    title="Training run status",
    description=(
        "Report a training run's state and every stage with its eval gate and results exactly as the backend "
        "reports them. Give run_id, or the idempotency_key of a submit whose outcome was unknown (this is how "
        "to recover after SUBMISSION_OUTCOME_UNKNOWN; found: false means no run exists for that key). With "
        "wait_seconds it polls until the run finishes or the time is up, sending progress notifications. "
        "Read-only. A failed gate is final: report it, never work around it. CREDENTIAL_REVOKED stops the wait at "
        "once; never start a login." + _REFUSAL
    ),
    arguments=StatusArgs,
    hints=_READ,
    reports_progress=True,
)

LOGS = ToolSpec(
    name="training_logs",
    title="Training run logs",
    description=(
        "Page through a run's log lines, oldest first: pass next_cursor back as cursor to continue; every line "
        "appears exactly once across pages. Lines that look like they hold a credential are redacted. Read-only."
        + _REFUSAL
    ),
    arguments=LogsArgs,
    hints=_READ,
)

METRICS = ToolSpec(
    name="training_metrics",
    title="Training run metrics",
    description=(
        "A run's current metrics as the backend reports them: goodput, interruption rate, checkpoint bandwidth, "
        "step, loss and cost to date (decimal USD). Read-only." + _REFUSAL
    ),
    arguments=RunArgs,
    hints=_READ,
)

CHECKPOINTS = ToolSpec(
    name="list_checkpoints",
    title="List training checkpoints",
    description="A run's checkpoints (id, step, time, size, storage URI). Read-only." + _REFUSAL,
    arguments=RunArgs,
    hints=_READ,
)

CANCEL = ToolSpec(
    name="cancel_training",
    title="Cancel a training run",
    description=(
        "Cancel a running training run. Needs its own confirmation, created by the user out of band for "
        "training.cancel of this run (not the submit confirmation), and its own idempotency key: a retry with the "
        "same key returns the same result. A finished run is RUN_NOT_CANCELLABLE. Never touches the booking."
        + _REFUSAL + _NEVER
    ),
    arguments=RunMutationArgs,
    hints=Hints(read_only=False, destructive=True, idempotent=True, open_world=True),
)

CLEANUP = ToolSpec(
    name="cleanup_training",
    title="Clean up a finished training run",
    description=(
        "Remove a finished run's artefacts and report exactly what was cleaned. Needs its own confirmation, "
        "created by the user out of band for training.cleanup of this run, and its own idempotency key. It never "
        "releases or modifies the booking: that is a separate economic action this product does not take."
        + _REFUSAL + _NEVER
    ),
    arguments=RunMutationArgs,
    hints=Hints(read_only=False, destructive=True, idempotent=True, open_world=True),
)

CORE_TOOLS: tuple[ToolSpec, ...] = (CHECK, DIGEST, SUBMIT)
LIFECYCLE_TOOLS: tuple[ToolSpec, ...] = (STATUS, LOGS, METRICS, CHECKPOINTS, CANCEL, CLEANUP)
ALL_TOOLS: tuple[ToolSpec, ...] = CORE_TOOLS + LIFECYCLE_TOOLS
