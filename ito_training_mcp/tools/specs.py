"""What each tool is, for agents: name, description, honest hints, the argument schema and the result's.

Pure metadata with no MCP import, so the MCP door, the CLI, the docs tests and the snapshot test
all read the same text. Adding a tool is one `ToolSpec` here (its `Arguments`, built from the
gate-0 rules in `input_schemas.py`, and its typed `data` model from `output_schemas.py`) plus the
core method of the same name; the door registers whatever `ALL_TOOLS` lists. The runtime checks
live in `inputs.py`, so that refusals are envelopes that never echo a value; the published
schemas accept exactly what those checks accept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ito_training_mcp.tools import arguments as arg
from ito_training_mcp.tools.arguments import Arguments
from ito_training_mcp.tools.results import (
    AvailabilityData,
    CancelData,
    CheckpointsData,
    CleanupData,
    ConfirmationStatusData,
    DigestData,
    LogsData,
    MetricsData,
    PlanData,
    RequestData,
    RestartData,
    StatusData,
    SubmissionData,
    envelope_schema,
)

_BOOKING = "Id of a completed Itô booking, as the backend knows it. Never an RFQ, quote, node IP or SSH host."
_MANIFEST = (
    "Absolute, normalised path of the reviewed manifest JSON file (ito.training.manifest.v1), owned by the "
    "user, not writable by others, no symlinks anywhere on the path (at most 4096 characters)."
)
_CONFIRMATION = (
    "Opaque reference that confirmation_status returns once the user confirmed this plan (plan_training) at the "
    "Itô desk, or that the user gives you. It is not a credential and authorises nothing by itself. Until you "
    "have one, leave it out (or empty): the call is then refused with CONFIRMATION_REQUIRED and its notice says "
    "what to do. Never invent one."
)
_KEY = (
    "Stable idempotency key chosen once per intended run (16-255 chars of A-Z a-z 0-9 . _ : -). Reuse the "
    "same key, with the same manifest, for every retry; never mint a new key after an error."
)
_RUN = "Run id returned by submit_training or training_status."


def _mutation_arguments(action: str) -> Arguments:
    return Arguments(
        properties={
            "run_id": arg.identifier(_RUN),
            "confirmation_ref": arg.confirmation_ref(
                f"Reference that confirmation_status returns once the user confirmed training.{action} of this run "
                "at the Itô desk (request_confirmation opens that request; no other confirmation covers it). "
                "Leave it out (or empty) until you have one: the call is then refused with "
                "CONFIRMATION_REQUIRED. Never invent one."
            ),
            "idempotency_key": arg.idempotency_key(_KEY.replace("run", "action")),
        },
        required=("run_id", "idempotency_key"),
    )


CHECK_ARGS = Arguments(
    properties={"booking_id": arg.identifier(_BOOKING + " Optional: with it, eligibility is checked too.",
                                             optional=True)},
)
DIGEST_ARGS = Arguments(properties={"manifest_path": arg.manifest_path(_MANIFEST)}, required=("manifest_path",))
SUBMIT_ARGS = Arguments(
    properties={
        "booking_id": arg.identifier(_BOOKING),
        "manifest_path": arg.manifest_path(_MANIFEST),
        "confirmation_ref": arg.confirmation_ref(_CONFIRMATION),
        "idempotency_key": arg.idempotency_key(_KEY),
    },
    required=("booking_id", "manifest_path", "idempotency_key"),
)
STATUS_ARGS = Arguments(
    properties={
        "run_id": arg.identifier(_RUN + " Give exactly one of run_id or idempotency_key.", optional=True),
        "idempotency_key": arg.idempotency_key(
            "The idempotency key of a submit whose outcome is unknown. Give exactly one of run_id or "
            "idempotency_key.", optional=True,
        ),
        "wait_seconds": arg.wait_seconds(
            "Poll until the run reaches a terminal state or this many seconds pass (0-600; default 0). One call "
            "waits at most the server's ITO_TRAINING_MAX_WAIT_S (default 55); call again to keep following."
        ),
    },
    exactly_one_of=("run_id", "idempotency_key"),
)
RUN_ARGS = Arguments(properties={"run_id": arg.identifier(_RUN)}, required=("run_id",))
PLAN_ARGS = Arguments(
    properties={"booking_id": arg.identifier(_BOOKING), "manifest_path": arg.manifest_path(_MANIFEST)},
    required=("booking_id", "manifest_path"),
)
REQUEST_ARGS = Arguments(
    properties={
        "action": arg.one_of_strings(
            ("training.cancel", "training.cleanup", "training.restart"),
            "What the user is asked to confirm for this run: training.restart only for a restart the backend "
            "proposed (training_status data.proposed_actions). A run's creation is confirmed through plan_training.",
        ),
        "run_id": arg.identifier(_RUN),
    },
    required=("action", "run_id"),
)
CONFIRMATION_STATUS_ARGS = Arguments(
    properties={
        "request_id": arg.identifier("request_id of a confirmation request from plan_training or "
                                     "request_confirmation."),
        "wait_seconds": arg.wait_seconds(
            "Poll until the user has decided or this many seconds pass (0-600; default 0), with progress "
            "notifications. One call waits at most the server's ITO_TRAINING_MAX_WAIT_S (default 55); call again to "
            "keep waiting."
        ),
    },
    required=("request_id",),
)
LOGS_ARGS = Arguments(
    properties={
        "run_id": arg.identifier(_RUN),
        "cursor": arg.cursor("next_cursor from the previous page; leave it out to start from the first line."),
        "limit": arg.log_limit("Lines per page (1-1000; default 200)."),
    },
    required=("run_id",),
)


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
    arguments: Arguments
    data: Any  # the typed model of `data` on success (a TypedDict, or a union of them)
    hints: Hints
    reports_progress: bool = False

    @property
    def argument_names(self) -> frozenset[str]:
        return self.arguments.names

    def input_schema(self) -> dict[str, Any]:
        return self.arguments.schema(f"{self.name}Arguments")

    def output_schema(self) -> dict[str, Any]:
        return envelope_schema(self.name, self.data)


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
        "digest_manifest, plan_training or submit_training. Read-only: it creates nothing. Today training is "
        "unavailable unless a canonical backend is configured: TRAINING_UNAVAILABLE then means tell the user the "
        "capability is missing and return control; never substitute a local trainer, SSH, a browser flow or "
        "a purchase." + _REFUSAL + _NEVER
    ),
    arguments=CHECK_ARGS,
    data=AvailabilityData,
    hints=Hints(read_only=True, destructive=False, idempotent=True, open_world=True),
)

DIGEST = ToolSpec(
    name="digest_manifest",
    title="Digest a training manifest",
    description=(
        "Read a training manifest file securely, validate it against ito.training.manifest.v1, scan it for "
        "credentials, and return its SHA-256 with a review summary of exactly what it asks for (model and "
        "revision, target, data and decontamination, post-training recipe, budget, checkpoints). Show the user "
        "data.review_text and data.sha256, then call plan_training to have the backend check the plan and open "
        "the confirmation request the user decides at the Itô desk. Local only: it never contacts the backend and "
        "creates nothing." + _REFUSAL
    ),
    arguments=DIGEST_ARGS,
    data=DigestData,
    hints=Hints(read_only=True, destructive=False, idempotent=True, open_world=False),
)

SUBMIT = ToolSpec(
    name="submit_training",
    title="Submit a confirmed training run",
    description=(
        "Create one training run on a completed Itô booking from a manifest the user reviewed and confirmed. "
        "This spends money. Call it only after plan_training and the user's confirmation at the Itô desk, with "
        "the confirmation_ref that confirmation_status returned (status confirmed) and the same manifest file. "
        "Choose one idempotency_key per intended run and "
        "reuse it for every retry: the same key returns the same run (created: false) and never a second "
        "one. On SUBMISSION_OUTCOME_UNKNOWN or IDEMPOTENCY_IN_FLIGHT call training_status with the same "
        "idempotency_key; never submit with a new key after an error. Every gate is enforced by the server "
        "and the backend." + _REFUSAL + _NEVER
    ),
    arguments=SUBMIT_ARGS,
    data=SubmissionData,
    hints=Hints(read_only=False, destructive=False, idempotent=True, open_world=True),
)

_READ = Hints(read_only=True, destructive=False, idempotent=True, open_world=True)

STATUS = ToolSpec(
    name="training_status",
    title="Training run status",
    description=(
        "Report a training run's state and every stage with its eval gate (its named eval battery and results) "
        "exactly as the backend reports them, its recent interruptions, and any action the backend proposes for the "
        "user to decide (data.proposed_actions: a restart from a checkpoint after a loss spike). Give run_id, or the "
        "idempotency_key of a submit whose outcome was unknown (this is how to recover after "
        "SUBMISSION_OUTCOME_UNKNOWN; found: false means no run exists for that key). With wait_seconds it polls "
        "until the run finishes, a proposal waits for the user, or the time is up, sending progress notifications "
        "whose value is the run's position (stages passed, out of all stages). "
        "Read-only. A failed gate is final: report it, never work around it. CREDENTIAL_REVOKED stops the wait at "
        "once; never start a login." + _REFUSAL
    ),
    arguments=STATUS_ARGS,
    data=StatusData,
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
    arguments=LOGS_ARGS,
    data=LogsData,
    hints=_READ,
)

METRICS = ToolSpec(
    name="training_metrics",
    title="Training run metrics",
    description=(
        "A run's current metrics as the backend reports them: goodput, interruption rate, checkpoint bandwidth, "
        "step, loss, cost to date (decimal USD), its interruptions with their detection and resume times against "
        "the targets, and for the RL stage the trainer/rollout split and rollout staleness. Read-only." + _REFUSAL
    ),
    arguments=RUN_ARGS,
    data=MetricsData,
    hints=_READ,
)

CHECKPOINTS = ToolSpec(
    name="list_checkpoints",
    title="List training checkpoints",
    description="A run's checkpoints (id, step, time, size, storage URI). Read-only." + _REFUSAL,
    arguments=RUN_ARGS,
    data=CheckpointsData,
    hints=_READ,
)

CANCEL = ToolSpec(
    name="cancel_training",
    title="Cancel a training run",
    description=(
        "Cancel a running training run. Needs its own confirmation for training.cancel of this run (not the submit "
        "confirmation): call request_confirmation, show the user the review_url, learn their decision with "
        "confirmation_status, then call this with the returned confirmation_ref and this action's own idempotency "
        "key: a retry with the same key returns the same result. A finished run is RUN_NOT_CANCELLABLE. Never "
        "touches the booking."
        + _REFUSAL + _NEVER
    ),
    arguments=_mutation_arguments("cancel"),
    data=CancelData,
    hints=Hints(read_only=False, destructive=True, idempotent=True, open_world=True),
)

CLEANUP = ToolSpec(
    name="cleanup_training",
    title="Clean up a finished training run",
    description=(
        "Remove a finished run's artefacts and report exactly what was cleaned. Needs its own confirmation for "
        "training.cleanup of this run (request_confirmation, the user decides at the Itô desk, confirmation_status "
        "returns the confirmation_ref) and its own idempotency key. It never releases or modifies the booking: that "
        "is a separate economic action this product does not take."
        + _REFUSAL + _NEVER
    ),
    arguments=_mutation_arguments("cleanup"),
    data=CleanupData,
    hints=Hints(read_only=False, destructive=True, idempotent=True, open_world=True),
)

RESTART = ToolSpec(
    name="restart_training",
    title="Restart a run from the proposed checkpoint",
    description=(
        "Restart a run from the checkpoint the backend proposed after a loss spike (training_status "
        "data.proposed_actions), once the user confirmed it. Never on your own: the backend proposes, only the "
        "user decides. Needs its own confirmation for training.restart of this run: call request_confirmation, show "
        "the user the review_url (the desk shows the spike, the checkpoint and the cost of the steps run again), "
        "learn their decision with confirmation_status, then call this with the returned confirmation_ref and this "
        "action's own idempotency key: a retry with the same key returns the same result. Without a pending "
        "proposal it is VALIDATION_REJECTED (reason no_restart_proposed). Never touches the booking."
        + _REFUSAL + _NEVER
    ),
    arguments=_mutation_arguments("restart"),
    data=RestartData,
    hints=Hints(read_only=False, destructive=True, idempotent=True, open_world=True),
)

_OPENS = Hints(read_only=False, destructive=False, idempotent=False, open_world=True)

PLAN = ToolSpec(
    name="plan_training",
    title="Plan a training run for the user's confirmation",
    description=(
        "Have the backend check a manifest for a completed booking without creating anything (capacity, fabric, "
        "parallelism, data policy, checkpoint storage, budget), choose the parallelism and precision "
        "(data.parallelism, with reasons), estimate its cost stage by stage (custom data gets a ladder pre-check "
        "line), and open a pending confirmation request for it. Runs the same local and entitlement checks as "
        "submit_training and sends the exact bytes it digested. "
        "data.valid false: the failed checks say what to fix, no request was opened. data.valid true: show the user "
        "data.confirmation_request.review_url; they sign in at the Itô desk themselves (the link carries no "
        "sign-in) and confirm or decline there. Then call confirmation_status with the request_id, and once it is "
        "confirmed call submit_training with the returned confirmation_ref and one stable idempotency_key. Each call "
        "opens a new request: do not repeat it while one is pending. Spends nothing." + _REFUSAL + _NEVER
    ),
    arguments=PLAN_ARGS,
    data=PlanData,
    hints=_OPENS,
)

REQUEST = ToolSpec(
    name="request_confirmation",
    title="Ask the user to confirm a cancel, cleanup or restart",
    description=(
        "Open a pending confirmation request for cancelling (training.cancel), cleaning up (training.cleanup) or "
        "restarting (training.restart: only the restart the backend proposed in training_status "
        "data.proposed_actions, and only if the user wants it) a run. Show the user data.review_url; they sign in "
        "at the Itô desk themselves and confirm or decline there. Then call confirmation_status with "
        "data.request_id, and once it is confirmed call cancel_training, cleanup_training or restart_training with "
        "the returned confirmation_ref and that action's own idempotency key. Changes nothing by itself; each call "
        "opens a new request." + _REFUSAL + _NEVER
    ),
    arguments=REQUEST_ARGS,
    data=RequestData,
    hints=_OPENS,
)

CONFIRMATION_STATUS = ToolSpec(
    name="confirmation_status",
    title="Confirmation request status",
    description=(
        "Whether the user has decided a confirmation request at the Itô desk: pending, confirmed (with the "
        "confirmation_ref to pass to data.next_tool), declined (stop: the user said no; never ask again unprompted) "
        "or expired (ask the user whether to plan again). With wait_seconds it polls until the user decides, "
        "sending progress notifications. Read-only; the reference it returns authorises nothing by itself."
        + _REFUSAL
    ),
    arguments=CONFIRMATION_STATUS_ARGS,
    data=ConfirmationStatusData,
    hints=_READ,
    reports_progress=True,
)

CORE_TOOLS: tuple[ToolSpec, ...] = (CHECK, DIGEST, SUBMIT)
CONFIRMATION_TOOLS: tuple[ToolSpec, ...] = (PLAN, REQUEST, CONFIRMATION_STATUS)
LIFECYCLE_TOOLS: tuple[ToolSpec, ...] = (STATUS, LOGS, METRICS, CHECKPOINTS, CANCEL, CLEANUP, RESTART)
ALL_TOOLS: tuple[ToolSpec, ...] = CORE_TOOLS + CONFIRMATION_TOOLS + LIFECYCLE_TOOLS
# Tools whose result may open a confirmation request with a review link the door can offer.
OFFERS_REVIEW: frozenset[str] = frozenset({PLAN.name, REQUEST.name})
TOOLS_BY_NAME: dict[str, ToolSpec] = {spec.name: spec for spec in ALL_TOOLS}
