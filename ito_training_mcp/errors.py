"""One exception hierarchy for every refusal the core can raise.

Gates raise a `Refusal`; the operation runner turns it into an envelope. Messages are built
only from fixed text and values this package produced or validated (setting names, JSON
pointers, check names) -- never from file content, tokens, headers or backend bodies -- so an
exception is safe to log and to show even when it escapes by mistake.
"""

from __future__ import annotations

from typing import Any

from ito_training_mcp.envelope import CODES, Envelope, ErrorCode, Gate, refusal


class Refusal(Exception):
    """A gate refused. Carries exactly what the envelope's `error` member will say."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        gate: Gate | None,
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
        next_step: str | None = None,
    ) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.gate = gate
        self.details = details
        self.retryable = CODES[code].retryable if retryable is None else retryable
        self.next_step = next_step

    def envelope(self, *, live_api_contacted: bool) -> Envelope:
        return refusal(
            self.code, self.message, live_api_contacted=live_api_contacted, gate=self.gate,
            details=self.details, retryable=self.retryable, next_step=self.next_step,
        )


class InputRefusal(Refusal):
    """Gate 0: an argument is malformed."""

    def __init__(self, message: str, *, argument: str, problem: str) -> None:
        super().__init__(
            ErrorCode.INVALID_INPUT,
            message,
            gate=Gate.INPUT,
            details={"argument": argument, "problem": problem},
        )


class ConfigRefusal(Refusal):
    """A setting in the server's environment is invalid. Names the setting, never its value."""

    def __init__(self, setting: str, problem: str, *, gate: Gate = Gate.AVAILABILITY) -> None:
        super().__init__(
            ErrorCode.CONFIG_INVALID,
            f"The setting {setting} is invalid: {problem}. Nothing was sent.",
            gate=gate,
            details={"setting": setting, "problem": problem},
        )


class ManifestRefusal(Refusal):
    """Gate 2: the manifest file or its content failed a check. Names the check, not the content."""

    def __init__(
        self, code: ErrorCode, message: str, *, check: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(code, message, gate=Gate.MANIFEST, details={"check": check, **(details or {})})
