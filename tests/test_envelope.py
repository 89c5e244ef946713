"""The envelope and the code registry: one shape, every contract code, a stop notice on every refusal."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ito_training_mcp.envelope import CODES, CONTRACT_CODES, Envelope, ErrorCode, Gate, refusal, success

# Contract §4, copied here on purpose: a rename in the package must fail this test.
CONTRACT_TABLE = """
INVALID_INPUT TRAINING_UNAVAILABLE LIFECYCLE_INCOMPLETE CONFIG_INVALID MANIFEST_PATH_INVALID MANIFEST_NOT_FOUND
MANIFEST_SYMLINK MANIFEST_NOT_REGULAR MANIFEST_UNSAFE_OWNER MANIFEST_UNSAFE_PERMISSIONS MANIFEST_TOO_LARGE
MANIFEST_CHANGED MANIFEST_INVALID_JSON MANIFEST_SCHEMA MANIFEST_SECRET AUTH_MISSING AUTH_REJECTED AUTH_FORBIDDEN
CREDENTIAL_REVOKED BOOKING_NOT_FOUND BOOKING_NOT_ELIGIBLE ENTITLEMENT_STALE CONFIRMATION_REQUIRED
CONFIRMATION_NOT_FOUND CONFIRMATION_EXPIRED CONFIRMATION_CONSUMED CONFIRMATION_MISMATCH DIGEST_MISMATCH
IDEMPOTENCY_CONFLICT IDEMPOTENCY_IN_FLIGHT SUBMISSION_OUTCOME_UNKNOWN VALIDATION_REJECTED BUDGET_EXCEEDED
RUN_NOT_FOUND RUN_NOT_CANCELLABLE BACKEND_UNREACHABLE BACKEND_TIMEOUT BACKEND_INVALID_RESPONSE BACKEND_ERROR
RATE_LIMITED
""".split()


def test_registry_holds_exactly_the_contract_codes() -> None:
    assert [c.value for c in CONTRACT_CODES] == CONTRACT_TABLE
    assert set(CODES) == set(ErrorCode)


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_refusal_notice_says_stop_and_gives_a_next_step(code: ErrorCode) -> None:
    env = refusal(code, "m", live_api_contacted=False, gate=None)
    assert env.notice.startswith("Stop:")
    assert len(env.notice) > len("Stop: ") + 40
    wire = env.to_dict()
    assert set(wire) == {"ok", "live_api_contacted", "notice", "error"}
    assert wire["error"]["code"] == code.value
    assert set(wire["error"]) == {"code", "message", "retryable", "gate", "details"}


def test_success_has_data_and_no_error_member() -> None:
    env = success({"x": 1}, notice="n", live_api_contacted=True)
    assert env.to_dict() == {"ok": True, "live_api_contacted": True, "notice": "n", "data": {"x": 1}}
    assert json.loads(env.to_json()) == env.to_dict()


def test_envelope_refuses_inconsistent_shapes() -> None:
    with pytest.raises(ValidationError):
        Envelope(ok=True, live_api_contacted=False, notice="n")
    with pytest.raises(ValidationError):
        Envelope(ok=False, live_api_contacted=False, notice="n", data={})
    ok = success({}, notice="n", live_api_contacted=False)
    bad = refusal(ErrorCode.INVALID_INPUT, "m", live_api_contacted=False, gate=Gate.INPUT)
    with pytest.raises(ValidationError):
        Envelope(ok=True, live_api_contacted=False, notice="n", data={}, error=bad.error)
    assert ok.ok and not bad.ok


def test_gates_are_in_contract_order() -> None:
    assert [g.value for g in Gate] == [
        "input", "availability", "manifest", "capabilities", "entitlement", "idempotency", "confirmation", "create",
    ]
