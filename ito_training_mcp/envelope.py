"""The envelope every tool and CLI command returns, and the registry of error codes.

This module is the single source of truth for codes, the gates that raise them, whether a
retry can help, and the one next step an agent is told to take. Tools, the CLI and the
documentation tests all read it from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Gate(StrEnum):
    """The gates of contract §3, in order. `error.gate` names the one that refused."""

    INPUT = "input"
    AVAILABILITY = "availability"
    MANIFEST = "manifest"
    CAPABILITIES = "capabilities"
    ENTITLEMENT = "entitlement"
    IDEMPOTENCY = "idempotency"
    CONFIRMATION = "confirmation"
    CREATE = "create"


class ErrorCode(StrEnum):
    """Stable error codes (contract §4). Never rename one: agents and tests match on them."""

    INVALID_INPUT = "INVALID_INPUT"
    TRAINING_UNAVAILABLE = "TRAINING_UNAVAILABLE"
    LIFECYCLE_INCOMPLETE = "LIFECYCLE_INCOMPLETE"
    CONFIG_INVALID = "CONFIG_INVALID"
    MANIFEST_PATH_INVALID = "MANIFEST_PATH_INVALID"
    MANIFEST_NOT_FOUND = "MANIFEST_NOT_FOUND"
    MANIFEST_SYMLINK = "MANIFEST_SYMLINK"
    MANIFEST_NOT_REGULAR = "MANIFEST_NOT_REGULAR"
    MANIFEST_UNSAFE_OWNER = "MANIFEST_UNSAFE_OWNER"
    MANIFEST_UNSAFE_PERMISSIONS = "MANIFEST_UNSAFE_PERMISSIONS"
    MANIFEST_TOO_LARGE = "MANIFEST_TOO_LARGE"
    MANIFEST_CHANGED = "MANIFEST_CHANGED"
    MANIFEST_INVALID_JSON = "MANIFEST_INVALID_JSON"
    MANIFEST_SCHEMA = "MANIFEST_SCHEMA"
    MANIFEST_SECRET = "MANIFEST_SECRET"  # noqa: S105 - a code name, not a secret
    AUTH_MISSING = "AUTH_MISSING"
    AUTH_REJECTED = "AUTH_REJECTED"
    AUTH_FORBIDDEN = "AUTH_FORBIDDEN"
    CREDENTIAL_REVOKED = "CREDENTIAL_REVOKED"
    BOOKING_NOT_FOUND = "BOOKING_NOT_FOUND"
    BOOKING_NOT_ELIGIBLE = "BOOKING_NOT_ELIGIBLE"
    ENTITLEMENT_STALE = "ENTITLEMENT_STALE"
    CONFIRMATION_REQUIRED = "CONFIRMATION_REQUIRED"
    CONFIRMATION_NOT_FOUND = "CONFIRMATION_NOT_FOUND"
    CONFIRMATION_EXPIRED = "CONFIRMATION_EXPIRED"
    CONFIRMATION_CONSUMED = "CONFIRMATION_CONSUMED"
    CONFIRMATION_MISMATCH = "CONFIRMATION_MISMATCH"
    DIGEST_MISMATCH = "DIGEST_MISMATCH"
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    IDEMPOTENCY_IN_FLIGHT = "IDEMPOTENCY_IN_FLIGHT"
    SUBMISSION_OUTCOME_UNKNOWN = "SUBMISSION_OUTCOME_UNKNOWN"
    VALIDATION_REJECTED = "VALIDATION_REJECTED"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    RUN_NOT_FOUND = "RUN_NOT_FOUND"
    RUN_NOT_CANCELLABLE = "RUN_NOT_CANCELLABLE"
    BACKEND_UNREACHABLE = "BACKEND_UNREACHABLE"
    BACKEND_TIMEOUT = "BACKEND_TIMEOUT"
    BACKEND_INVALID_RESPONSE = "BACKEND_INVALID_RESPONSE"
    BACKEND_ERROR = "BACKEND_ERROR"
    RATE_LIMITED = "RATE_LIMITED"
    # Extension (docs/contract-notes.md): a defect in this server, never a gate decision.
    INTERNAL_ERROR = "INTERNAL_ERROR"


@dataclass(frozen=True)
class CodeInfo:
    """What the registry knows about a code: where it belongs and what the agent does next."""

    group: str
    retryable: bool
    next_step: str


_STOP = "Stop: do not retry with other arguments and do not work around this refusal. "
_FIX_MANIFEST = (
    "Ask the user to fix the manifest file, then call digest_manifest again and show them the new "
    "review summary."
)
_CONFIRM_AGAIN = (
    "Ask the user whether they want to confirm again. If yes: call plan_training for this booking and "
    "manifest, show them the new review_url (they decide at the Itô desk), learn the decision with "
    "confirmation_status, then call submit_training again with the new confirmation_ref and the same "
    "idempotency_key."
)
_NO_SUBSTITUTE = (
    "Never substitute a local trainer, an SSH session, a browser flow or a compute purchase."
)

CODES: dict[ErrorCode, CodeInfo] = {
    ErrorCode.INVALID_INPUT: CodeInfo(
        "input", False,
        "Hand control back; ask the user for the correct value of the argument named in error.details "
        "instead of guessing one.",
    ),
    ErrorCode.TRAINING_UNAVAILABLE: CodeInfo(
        "availability", False,
        "Tell the user managed training is not available on Itô yet (the missing capability is named "
        "in error.message) and return control to the calling agent. " + _NO_SUBSTITUTE,
    ),
    ErrorCode.LIFECYCLE_INCOMPLETE: CodeInfo(
        "availability", False,
        "Tell the user the backend lacks the lifecycle operations listed in error.details, so training "
        "cannot be submitted safely; return control to the calling agent. " + _NO_SUBSTITUTE,
    ),
    ErrorCode.CONFIG_INVALID: CodeInfo(
        "availability", False,
        "Tell the user which setting is invalid (error.details.setting); only they can fix the server's "
        "environment. Nothing was sent.",
    ),
    ErrorCode.MANIFEST_PATH_INVALID: CodeInfo(
        "manifest", False,
        "Ask the user for the absolute, normalised path of the reviewed manifest (no '.', '..', "
        "symlinks, and inside ITO_TRAINING_MANIFEST_ROOTS when that is set).",
    ),
    ErrorCode.MANIFEST_NOT_FOUND: CodeInfo(
        "manifest", False,
        "Nothing readable exists at that path. Ask the user for the correct absolute path of the reviewed manifest.",
    ),
    ErrorCode.MANIFEST_SYMLINK: CodeInfo(
        "manifest", False,
        "Ask the user for the real path of the manifest: symlinks are refused anywhere on the path.",
    ),
    ErrorCode.MANIFEST_NOT_REGULAR: CodeInfo("manifest", False, _FIX_MANIFEST),
    ErrorCode.MANIFEST_UNSAFE_OWNER: CodeInfo(
        "manifest", False,
        "Ask the user to own the manifest file themselves (and the directories above it, or root).",
    ),
    ErrorCode.MANIFEST_UNSAFE_PERMISSIONS: CodeInfo(
        "manifest", False,
        "Ask the user to remove group/other write permission (and extra hard links) from the manifest "
        "and the directories above it, e.g. chmod 600 on the file.",
    ),
    ErrorCode.MANIFEST_TOO_LARGE: CodeInfo("manifest", False, _FIX_MANIFEST),
    ErrorCode.MANIFEST_CHANGED: CodeInfo(
        "manifest", False,
        "The file changed while it was read. Ask the user to finish editing it, then digest it again.",
    ),
    ErrorCode.MANIFEST_INVALID_JSON: CodeInfo("manifest", False, _FIX_MANIFEST),
    ErrorCode.MANIFEST_SCHEMA: CodeInfo("manifest", False, _FIX_MANIFEST),
    ErrorCode.MANIFEST_SECRET: CodeInfo(
        "manifest", False,
        "Tell the user the manifest holds something that looks like a credential at the JSON pointer(s) "
        "in error.details; they must remove it (and rotate it if it was real). Never copy, print or "
        "move the value.",
    ),
    ErrorCode.AUTH_MISSING: CodeInfo(
        "auth", False,
        "Tell the user no Itô credential is configured for this server: they set ITO_API_KEY or "
        "ITO_TOKEN_FILE in its environment. Never ask for a token in chat or pass one as an argument.",
    ),
    ErrorCode.AUTH_REJECTED: CodeInfo(
        "auth", False,
        "Tell the user the backend rejected the configured credential; they must check it out of band. "
        "Do not start a login.",
    ),
    ErrorCode.AUTH_FORBIDDEN: CodeInfo(
        "auth", False,
        "Tell the user the credential is not allowed to do this; only the account owner can change that.",
    ),
    ErrorCode.CREDENTIAL_REVOKED: CodeInfo(
        "auth", False,
        "The credential is revoked or expired. Stop now: no retry, no polling, no login. Hand control "
        "back; the user provides a new credential out of band.",
    ),
    ErrorCode.BOOKING_NOT_FOUND: CodeInfo(
        "entitlement", False,
        "Tell the user the backend knows no such booking for this account; ask them for the booking id "
        "of a completed Itô booking. Harness memory, quotes or SSH access are not proof of a booking.",
    ),
    ErrorCode.BOOKING_NOT_ELIGIBLE: CodeInfo(
        "entitlement", False,
        "Tell the user the booking cannot be used for training (reason in error.details.reason). " +
        _NO_SUBSTITUTE,
    ),
    ErrorCode.ENTITLEMENT_STALE: CodeInfo(
        "entitlement", True,
        "The backend's eligibility answer was too old to trust. Call check_training_availability with "
        "the booking id again later; if it persists, hand control back.",
    ),
    ErrorCode.CONFIRMATION_REQUIRED: CodeInfo(
        "confirmation", False,
        "No confirmation_ref yet. Call plan_training with this booking_id and manifest_path, show the user "
        "the review_url it returns (they review and confirm at the Itô desk, signing in themselves), call "
        "confirmation_status with the request_id to get their decision and, once confirmed, the "
        "confirmation_ref; then call submit_training with it and the same idempotency_key.",
    ),
    ErrorCode.CONFIRMATION_NOT_FOUND: CodeInfo("confirmation", False, _CONFIRM_AGAIN),
    ErrorCode.CONFIRMATION_EXPIRED: CodeInfo("confirmation", False, _CONFIRM_AGAIN),
    ErrorCode.CONFIRMATION_CONSUMED: CodeInfo(
        "confirmation", False,
        "That confirmation was already used. If you are retrying a submit, call training_status with "
        "the same idempotency_key first; otherwise " + _CONFIRM_AGAIN[0].lower() + _CONFIRM_AGAIN[1:],
    ),
    ErrorCode.CONFIRMATION_MISMATCH: CodeInfo("confirmation", False, _CONFIRM_AGAIN),
    ErrorCode.DIGEST_MISMATCH: CodeInfo(
        "confirmation", False,
        "The manifest bytes differ from what the user confirmed. Call digest_manifest again and show the "
        "user the new summary; if they want this version, call plan_training on it so they can review and "
        "confirm the new digest at the Itô desk (confirmation_status, then submit_training with the new "
        "confirmation_ref).",
    ),
    ErrorCode.IDEMPOTENCY_CONFLICT: CodeInfo(
        "idempotency", False,
        "This idempotency key already belongs to a run with a different manifest. Hand control back; "
        "use a new key only if the user explicitly wants a separate, new run.",
    ),
    ErrorCode.IDEMPOTENCY_IN_FLIGHT: CodeInfo(
        "idempotency", True,
        "A submission with this key is still being processed. Call training_status with the same "
        "idempotency_key; never submit again with a new key.",
    ),
    ErrorCode.SUBMISSION_OUTCOME_UNKNOWN: CodeInfo(
        "idempotency", True,
        "The submission may or may not have created a run. Call training_status with the same "
        "idempotency_key to find out; never submit with a new key.",
    ),
    ErrorCode.VALIDATION_REJECTED: CodeInfo(
        "server validation", False,
        "Tell the user why the backend rejected the request (error.message, error.details.reason); they "
        "change the manifest or the booking, then digest_manifest and plan_training again.",
    ),
    ErrorCode.BUDGET_EXCEEDED: CodeInfo(
        "server validation", False,
        "Tell the user the plan exceeds the budget; only they can change it in the manifest, then "
        "digest_manifest and plan_training again for a new confirmation.",
    ),
    ErrorCode.RUN_NOT_FOUND: CodeInfo(
        "run", False, "Ask the user for the right run id; this account has no run with that id.",
    ),
    ErrorCode.RUN_NOT_CANCELLABLE: CodeInfo(
        "run", False, "The run already finished or is being cancelled; report its state to the user.",
    ),
    ErrorCode.BACKEND_UNREACHABLE: CodeInfo(
        "transport", True, "The backend could not be reached; nothing was sent. Tell the user and try later.",
    ),
    ErrorCode.BACKEND_TIMEOUT: CodeInfo(
        "transport", True, "The backend did not answer in time. Tell the user; try again later.",
    ),
    ErrorCode.BACKEND_INVALID_RESPONSE: CodeInfo(
        "transport", False,
        "The backend answered with something this client does not accept. Tell the user; do not retry.",
    ),
    ErrorCode.BACKEND_ERROR: CodeInfo(
        "transport", True,
        "Tell the user the backend reported an error (error.details.status). Only if error.retryable is true may "
        "the same call be tried again later; for a submit, call training_status with the same idempotency_key first.",
    ),
    ErrorCode.RATE_LIMITED: CodeInfo(
        "transport", True,
        "The backend is rate limiting this account (error.details.reason says why when it is known). Tell the "
        "user; wait (error.details.retry_after_s when present) before making the same call again.",
    ),
    ErrorCode.INTERNAL_ERROR: CodeInfo(
        "internal", False,
        "This server hit a defect and refused to continue. Tell the user; do not work around it.",
    ),
}

CONTRACT_CODES: tuple[ErrorCode, ...] = tuple(c for c in ErrorCode if c is not ErrorCode.INTERNAL_ERROR)


class ErrorInfo(BaseModel):
    """The `error` member of a refusal. Never holds file content, tokens, headers or raw bodies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: ErrorCode = Field(description="Stable error code (contract §4).")
    message: str = Field(description="Safe, human-readable explanation. Never contains secrets.")
    retryable: bool = Field(description="True only when the same call may succeed later unchanged.")
    gate: Gate | None = Field(description="The gate that refused (contract §3), or null.")
    details: dict[str, Any] | None = Field(
        default=None, description="Structured, non-secret specifics (setting names, JSON pointers, reasons)."
    )


class Envelope(BaseModel):
    """The result of every tool and CLI command. `ok: false` means stop and hand control back."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ok: bool = Field(description="True iff the operation succeeded. False: stop, do not work around it.")
    live_api_contacted: bool = Field(
        description="True iff at least one request left this process for the Itô backend during this call."
    )
    notice: str = Field(description="Plain-language instruction for the agent, with the one next step.")
    data: dict[str, Any] | None = Field(default=None, description="The result, present iff ok.")
    error: ErrorInfo | None = Field(default=None, description="The refusal, present iff not ok.")

    @model_validator(mode="after")
    def _exactly_one_of_data_or_error(self) -> Envelope:
        if self.ok != (self.data is not None) or self.ok == (self.error is not None):
            raise ValueError("an envelope holds data iff ok and error iff not ok")
        return self

    def to_dict(self) -> dict[str, Any]:
        """The wire form: exactly one of `data` / `error`, JSON-safe."""
        wire = self.model_dump(mode="json", exclude={"data", "error"})
        if self.ok:
            wire["data"] = self.model_dump(mode="json", include={"data"})["data"]
        else:
            wire["error"] = self.model_dump(mode="json", include={"error"})["error"]
        return wire

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, sort_keys=False)


def success(data: dict[str, Any], *, notice: str, live_api_contacted: bool) -> Envelope:
    return Envelope(ok=True, live_api_contacted=live_api_contacted, notice=notice, data=data)


def refusal(
    code: ErrorCode,
    message: str,
    *,
    live_api_contacted: bool,
    gate: Gate | None,
    details: dict[str, Any] | None = None,
    retryable: bool | None = None,
    next_step: str | None = None,
) -> Envelope:
    """A refusal envelope; `next_step` replaces the registry's when the situation is more specific."""
    info = CODES[code]
    notice = f"{_STOP}{next_step or info.next_step}"
    return Envelope(
        ok=False,
        live_api_contacted=live_api_contacted,
        notice=notice,
        error=ErrorInfo(
            code=code,
            message=message,
            retryable=info.retryable if retryable is None else retryable,
            gate=gate,
            details=details or None,
        ),
    )
