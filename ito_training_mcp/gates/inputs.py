"""Gate 0: every argument well formed before anything else happens (contract §3).

The same patterns feed the published MCP input schemas (`tools/specs.py`) and the runtime
checks here, so the schema an agent reads and the check the server applies cannot drift.
Refusals never echo a value: an agent may have put something secret where an id belongs.

No argument may hold a credential: neither a provider token shape (the manifest scanner's
`text_kinds`) nor the configured credential itself. The configured one is checked twice, because
gate 0 must not read a credential (the token file is opened only after gate 3): at gate 0 against
the credentials this process already holds in memory (every one it resolved before, and the value
of `ITO_API_KEY` in its environment), and again right after the credential is resolved, before any
request that carries an argument and before the audit line (`CredentialGuard.recheck`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ito_training_mcp.envelope import ErrorCode, Gate
from ito_training_mcp.errors import InputRefusal, Refusal
from ito_training_mcp.scanner import text_kinds

ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"
KEY_PATTERN = r"^[A-Za-z0-9._:-]{16,255}$"
_ID_RE = re.compile(ID_PATTERN)
_KEY_RE = re.compile(KEY_PATTERN)
_ARG_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_WAIT_SECONDS = 600
MAX_LOG_LIMIT = 1000


def _credential_refusal(argument: str) -> InputRefusal:
    return InputRefusal(
        f"The argument {argument} looks like a credential. Credentials are never tool arguments; "
        "the server reads them from its own environment.",
        argument=argument,
        problem="looks_like_credential",
    )


class CredentialGuard:
    """The configured credentials one call must not accept as (part of) an argument, and every
    argument the call accepted, so they can be checked again once the credential is resolved."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self._known = tuple(value for value in known if value)
        self._accepted: list[tuple[str, str]] = []

    def holds_known(self, value: str) -> bool:
        return any(secret in value for secret in self._known)

    def accept(self, value: str, argument: str) -> None:
        if self.holds_known(value):
            raise _credential_refusal(argument)
        self._accepted.append((argument, value))

    def recheck(self, holds_credential: Callable[[str], bool]) -> None:
        """After the credential is resolved: refuse the call if any accepted argument holds it."""
        for argument, value in self._accepted:
            if holds_credential(value):
                raise _credential_refusal(argument)


_guard: ContextVar[CredentialGuard | None] = ContextVar("ito_training_credential_guard", default=None)


@contextmanager
def guarding(guard: CredentialGuard) -> Iterator[CredentialGuard]:
    """Every argument validated inside this block (one tool call) is checked and remembered by `guard`."""
    token = _guard.set(guard)
    try:
        yield guard
    finally:
        _guard.reset(token)


def current_guard() -> CredentialGuard | None:
    return _guard.get()


def _looks_like_credential(value: str) -> bool:

    guard = _guard.get()
    return bool(text_kinds(value)) or (guard is not None and guard.holds_known(value))


def _no_configured_credential(value: str, argument: str) -> None:
    guard = _guard.get()
    if guard is not None:
        guard.accept(value, argument)


def _no_credential(value: str, argument: str) -> None:

    if text_kinds(value):
        raise _credential_refusal(argument)
    _no_configured_credential(value, argument)


def identifier(value: object, argument: str) -> str:
    """A booking id, run id or confirmation ref: 1-128 chars of [A-Za-z0-9._:-], not all dots."""
    if not isinstance(value, str):
        raise InputRefusal(f"The argument {argument} must be a string.", argument=argument, problem="type")
    if not _ID_RE.fullmatch(value) or set(value) == {"."}:
        raise InputRefusal(
            f"The argument {argument} must be 1-128 characters of A-Z a-z 0-9 . _ : - (and not only dots).",
            argument=argument,
            problem="format",
        )
    _no_credential(value, argument)
    return value


def optional_identifier(value: object, argument: str) -> str | None:
    return None if value is None else identifier(value, argument)


def idempotency_key(value: object, argument: str = "idempotency_key") -> str:
    if value is None or value == "":
        raise InputRefusal(
            f"The argument {argument} is required: choose one stable key per intended run and reuse it "
            "for every retry of that run.",
            argument=argument,
            problem="missing",
        )
    if not isinstance(value, str):
        raise InputRefusal(f"The argument {argument} must be a string.", argument=argument, problem="type")
    if not _KEY_RE.fullmatch(value):
        raise InputRefusal(
            f"The argument {argument} must be 16-255 characters of A-Z a-z 0-9 . _ : -.",
            argument=argument,
            problem="format",
        )
    _no_credential(value, argument)
    return value


def confirmation_ref(value: object) -> str:
    """An empty or missing reference is CONFIRMATION_REQUIRED, refused here at gate 0."""
    if value is None or value == "":
        raise Refusal(
            ErrorCode.CONFIRMATION_REQUIRED,
            "No confirmation_ref was given. A person must review the manifest digest and confirm it out "
            "of band before anything is created.",
            gate=Gate.INPUT,
            details={"argument": "confirmation_ref", "problem": "missing"},
        )
    return identifier(value, "confirmation_ref")


def manifest_path(value: object) -> str:
    """Type and credentials only here; the path itself is checked by the manifest gate
    (MANIFEST_PATH_INVALID). A path is not scanned for token shapes (directory names are free
    text), but it may not hold the configured credential."""
    if value is None or value == "":
        raise InputRefusal("The argument manifest_path is required.", argument="manifest_path", problem="missing")
    if not isinstance(value, str):
        raise InputRefusal("The argument manifest_path must be a string.", argument="manifest_path", problem="type")
    _no_configured_credential(value, "manifest_path")
    return value


def bounded_int(value: object, argument: str, *, default: int, low: int, high: int) -> int:
    """A whole number in [low, high]. A JSON number with no fractional part (`5.0`) is one, as in JSON
    Schema's "integer" (the published schema and this gate agree); a boolean, a fraction, NaN or an
    infinity is not; a whole float outside the bounds is out of range."""
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        if not (low <= value <= high):
            raise InputRefusal(
                f"The argument {argument} must be between {low} and {high}.", argument=argument, problem="range"
            )
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputRefusal(f"The argument {argument} must be an integer.", argument=argument, problem="type")
    if not (low <= value <= high):
        raise InputRefusal(
            f"The argument {argument} must be between {low} and {high}.", argument=argument, problem="range"
        )
    return value


def one_of(value: object, argument: str, allowed: tuple[str, ...]) -> str:
    """A value from a closed set (an action name). The refusal lists the set, never the value."""
    if not isinstance(value, str) or value not in allowed:
        raise InputRefusal(
            f"The argument {argument} must be one of: {', '.join(allowed)}.",
            argument=argument,
            problem="missing" if value is None or value == "" else "not_allowed",
        )
    return value


def cursor(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > 512 or not re.fullmatch(r"[A-Za-z0-9._:=-]+", value):
        raise InputRefusal("The argument cursor is malformed; pass back next_cursor unchanged.",
                           argument="cursor", problem="format")
    _no_configured_credential(value, "cursor")  # a backend's opaque cursor may have any shape, not ours
    return value


def reject_unknown_arguments(arguments: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """No tool takes a token, an override or a skip flag: anything unexpected is refused, not ignored."""
    unknown = sorted(set(arguments) - allowed)
    if not unknown:
        return
    shown = [
        name if (_ARG_NAME_RE.fullmatch(name) and not _looks_like_credential(name)) else "<redacted>"
        for name in unknown[:10]
    ]
    raise Refusal(
        ErrorCode.INVALID_INPUT,
        f"Unexpected argument(s): {', '.join(shown)}. This tool accepts only: {', '.join(sorted(allowed))}. "
        "There is no override, force or skip-gate argument, and credentials are never arguments.",
        gate=Gate.INPUT,
        details={"argument": shown[0], "problem": "unexpected", "unexpected": shown},
    )
