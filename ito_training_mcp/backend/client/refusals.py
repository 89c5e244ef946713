"""The refusals the backend client raises, and what the process remembers of a revoked token.

`BackendRefusal` carries whether a request may have been processed without a trustworthy answer
(`ambiguous`: look the outcome up by idempotency key, never resend blindly) and whether the backend
answered with a redirect. `BudgetSpent` ends an exchange that the call's time budget cut short.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.envelope import ErrorCode, Gate
from ito_training_mcp.errors import Refusal

_revoked_fingerprints: set[str] = set()


def fingerprint(credential: Credential) -> str:
    """A one-way fingerprint of a credential, for in-memory records keyed by identity."""
    return hashlib.sha256(credential.authorization().encode()).hexdigest()


def is_known_revoked(credential: Credential) -> bool:
    return fingerprint(credential) in _revoked_fingerprints


def remember_revoked(credential: Credential) -> None:
    """The backend said this token is revoked: it is never sent again by this process."""
    _revoked_fingerprints.add(fingerprint(credential))


class BackendRefusal(Refusal):
    """A refusal that came from (or on the way to) the backend.

    `ambiguous` is True when the request may have been processed although no trustworthy
    answer arrived: the caller must look the outcome up by idempotency key, never resend blindly.

    `redirected` is True when the backend answered with a 3xx. That is an answer, not a lost
    response: it is never ambiguous, never followed and never resent. After a redirected mutation
    the caller may look the outcome up once, so the agent learns whether it took effect.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        gate: Gate | None,
        ambiguous: bool = False,
        redirected: bool = False,
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
        next_step: str | None = None,
    ) -> None:
        super().__init__(code, message, gate=gate, details=details, retryable=retryable, next_step=next_step)
        self.ambiguous = ambiguous
        self.redirected = redirected


class BudgetSpent(BackendRefusal):
    """An exchange stopped (or was not started) because the call's time budget ran out, not because
    the backend exceeded its own deadline. A wait treats it as the end of the wait."""

    def __init__(self, method: str, path: str, *, gate: Gate | None, mutation: bool, sent: bool,
                 deadline_s: float) -> None:
        super().__init__(
            ErrorCode.BACKEND_TIMEOUT,
            f"This call's time budget (ITO_TRAINING_MAX_WAIT_S) ran out before the backend answered {method} "
            f"{path}. The backend was slow; nothing was changed by this read.",
            gate=gate, ambiguous=sent and mutation, retryable=True,
            details={"deadline_s": round(deadline_s, 3), "budget_spent": True},
            next_step="Make the same call again (with a smaller wait_seconds if this repeats).",
        )


def invalid(message: str, gate: Gate | None, mutation: bool) -> BackendRefusal:
    return BackendRefusal(ErrorCode.BACKEND_INVALID_RESPONSE, message, gate=gate, ambiguous=mutation)


def redirect(status: int, gate: Gate | None, mutation: bool) -> BackendRefusal:
    """A 3xx is the backend's answer: refused, never followed, never resent, never ambiguous."""
    then = (" For a submit, cancel or cleanup, call training_status (same idempotency_key or run_id) once the "
            "setting is fixed, to learn whether it took effect, before trying again.") if mutation else ""
    return BackendRefusal(
        ErrorCode.BACKEND_INVALID_RESPONSE,
        f"The backend answered with a redirect (status {status}), which this client never follows; nothing "
        "was re-sent. Check that ITO_API_URL points at the API origin itself.",
        gate=gate, ambiguous=False, redirected=True,
        details={"status": status, "setting": "ITO_API_URL"},
        next_step=("Tell the user the backend answered with a redirect: ITO_API_URL must point at the API "
                   "origin itself, not at an address that redirects. Do not retry until the setting is fixed."
                   + then),
    )


def origin_unproven(gate: Gate | None) -> BackendRefusal:
    return BackendRefusal(
        ErrorCode.BACKEND_INVALID_RESPONSE,
        "The listener at ITO_API_URL (plain http) did not prove that it is the backend the API token belongs to, "
        "so the token was not sent.",
        gate=gate, retryable=False, details={"reason": "origin_unproven", "setting": "ITO_API_URL"},
        next_step=("Tell the user the program listening at ITO_API_URL did not prove that it is the Itô backend: "
                   "another program may hold that port, or the backend does not offer the origin proof that plain "
                   "http needs. The API token was not sent. They should check what listens there, or use an https "
                   "ITO_API_URL. Do not retry until they have."),
    )
