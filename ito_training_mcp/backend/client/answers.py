"""What a backend answer means: a 2xx body validated against its model, anything else a refusal.

A body is strict JSON of a JSON media type, validated against `backend/models.py`; anything else is
`BACKEND_INVALID_RESPONSE`. An error is trusted only where its code and its status agree (`_ERROR_CODES`);
a 401 that says the token is invalid marks it revoked for the life of the process.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ito_training_mcp.backend import wire as backend_wire
from ito_training_mcp.backend.client.refusals import BackendRefusal, invalid, remember_revoked
from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.backend.models import ErrorBody
from ito_training_mcp.envelope import ErrorCode, Gate
from ito_training_mcp.gates.manifest import strict_json

M = TypeVar("M", bound=BaseModel)

_SAFE_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_INVALID_TOKEN = re.compile(r'error\s*=\s*"?invalid_token"?', re.IGNORECASE)
_INSUFFICIENT_SCOPE = re.compile(r'error\s*=\s*"?insufficient_scope"?', re.IGNORECASE)

# Backend error codes -> our codes. The status must agree, or the response is not trusted.
_ERROR_CODES: dict[str, tuple[frozenset[int], ErrorCode]] = {
    "booking_not_found": (frozenset({404}), ErrorCode.BOOKING_NOT_FOUND),
    "booking_not_eligible": (frozenset({403, 409, 422}), ErrorCode.BOOKING_NOT_ELIGIBLE),
    "confirmation_not_found": (frozenset({404}), ErrorCode.CONFIRMATION_NOT_FOUND),
    "confirmation_expired": (frozenset({410}), ErrorCode.CONFIRMATION_EXPIRED),
    "confirmation_consumed": (frozenset({409}), ErrorCode.CONFIRMATION_CONSUMED),
    "confirmation_mismatch": (frozenset({422}), ErrorCode.CONFIRMATION_MISMATCH),
    "digest_mismatch": (frozenset({422}), ErrorCode.DIGEST_MISMATCH),
    "idempotency_conflict": (frozenset({422}), ErrorCode.IDEMPOTENCY_CONFLICT),
    "idempotency_in_flight": (frozenset({409}), ErrorCode.IDEMPOTENCY_IN_FLIGHT),
    "validation_rejected": (frozenset({422}), ErrorCode.VALIDATION_REJECTED),
    "budget_exceeded": (frozenset({402}), ErrorCode.BUDGET_EXCEEDED),
    "run_not_found": (frozenset({404}), ErrorCode.RUN_NOT_FOUND),
    "run_not_cancellable": (frozenset({409}), ErrorCode.RUN_NOT_CANCELLABLE),
}
_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.BOOKING_NOT_FOUND: "The backend knows no such booking for this account.",
    ErrorCode.BOOKING_NOT_ELIGIBLE: "The backend says this booking is not eligible for training.",
    ErrorCode.CONFIRMATION_NOT_FOUND: "The backend knows no such confirmation for this account.",
    ErrorCode.CONFIRMATION_EXPIRED: "The confirmation has expired.",
    ErrorCode.CONFIRMATION_CONSUMED: "The confirmation was already used.",
    ErrorCode.CONFIRMATION_MISMATCH: "The confirmation does not match this action, account, booking or run.",
    ErrorCode.DIGEST_MISMATCH: "The manifest digest differs from the one the user confirmed.",
    ErrorCode.IDEMPOTENCY_CONFLICT: "This idempotency key is already bound to a different request.",
    ErrorCode.IDEMPOTENCY_IN_FLIGHT: "A request with this idempotency key is still being processed.",
    ErrorCode.VALIDATION_REJECTED: "The backend's validation rejected the request.",
    ErrorCode.BUDGET_EXCEEDED: "The request exceeds the budget the backend allows.",
    ErrorCode.RUN_NOT_FOUND: "This account has no run with that id.",
    ErrorCode.RUN_NOT_CANCELLABLE: "The run can no longer be cancelled.",
}


def parse_json(body: bytes, content_type: str) -> Any:
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise ValueError("not JSON")
    return strict_json.loads(body, decimal_fractions=False)


def validate(model: type[M], body: bytes, content_type: str, *, gate: Gate | None, mutation: bool) -> M:
    try:
        return model.model_validate(parse_json(body, content_type))
    except (ValueError, ValidationError):
        raise invalid(
            f"The backend's response does not match the {model.__name__} schema of ito.training.v1.",
            gate, mutation,
        ) from None


def error_body(body: bytes, content_type: str) -> ErrorBody | None:
    try:
        return ErrorBody.model_validate(parse_json(body, content_type))
    except (ValueError, ValidationError):
        return None


def refusal_for(
    status: int,
    body: bytes,
    content_type: str,
    www_authenticate: str,
    retry_after: str | None,
    *,
    gate: Gate | None,
    mutation: bool,
    credential: Credential | None,
) -> BackendRefusal:
    error = error_body(body, content_type)
    code = error.error.code if error else None
    details: dict[str, Any] = {"status": status}
    if code and _SAFE_CODE.fullmatch(code):
        details["backend_code"] = code
    if error and error.error.reason and _SAFE_CODE.fullmatch(error.error.reason):
        details["reason"] = error.error.reason

    if status == 401:
        if _INVALID_TOKEN.search(www_authenticate) or code == "credential_revoked":
            if credential is not None:
                remember_revoked(credential)
            return BackendRefusal(
                ErrorCode.CREDENTIAL_REVOKED,
                "The backend says the credential is revoked or expired. Nothing further was sent.",
                gate=gate, details=details,
            )
        return BackendRefusal(ErrorCode.AUTH_REJECTED, "The backend rejected the credential.", gate=gate,
                              details=details)
    if status == 403 and (code in (None, "forbidden", "insufficient_scope")
                          or _INSUFFICIENT_SCOPE.search(www_authenticate)):
        return BackendRefusal(ErrorCode.AUTH_FORBIDDEN, "The credential is not allowed to do this.",
                              gate=gate, details=details)
    if code in _ERROR_CODES and status in _ERROR_CODES[code][0]:
        ours = _ERROR_CODES[code][1]
        return BackendRefusal(ours, _MESSAGES[ours], gate=gate, details=details,
                              ambiguous=ours is ErrorCode.IDEMPOTENCY_IN_FLIGHT)
    if status == 429:
        if retry_after and backend_wire.ASCII_COUNT.fullmatch(retry_after):
            details["retry_after_s"] = min(int(retry_after), 86_400)
        return BackendRefusal(ErrorCode.RATE_LIMITED, "The backend is rate limiting this account.", gate=gate,
                              details=details)
    if status >= 500:
        return BackendRefusal(ErrorCode.BACKEND_ERROR, f"The backend failed with status {status}.", gate=gate,
                              details=details, ambiguous=mutation, retryable=True)
    return BackendRefusal(ErrorCode.BACKEND_ERROR, f"The backend refused the request with status {status}.",
                          gate=gate, details=details, retryable=False)
