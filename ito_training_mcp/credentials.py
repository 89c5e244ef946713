"""The backend credential: resolved lazily, held opaquely, never shown.

Only this module reads `ITO_API_KEY` / `ITO_TOKEN_FILE`, and the service calls it only after
the capabilities gate has passed (contract §3). The token file gets the same checks as a
manifest (§5) plus mode 0600. The value lives in a `Credential` whose repr, str and pickling
reveal nothing, and it is registered with the log redactor so that even a mistake elsewhere
cannot print it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .envelope import ErrorCode, Gate
from .errors import ManifestRefusal, Refusal
from .redact import register_secret

ENV_API_KEY = "ITO_API_KEY"
ENV_TOKEN_FILE = "ITO_TOKEN_FILE"  # noqa: S105 - a variable name
TOKEN_FILE_MAX_BYTES = 16 * 1024
_TOKEN_RE = re.compile(r"^[\x21-\x7e]{8,4096}$")


class Credential:
    """An opaque bearer token. Use `authorization()` to build the header; nothing else shows it."""

    __slots__ = ("__token", "source")

    def __init__(self, token: str, source: str) -> None:
        self.__token = token
        self.source = source
        register_secret(token)

    def authorization(self) -> str:
        return f"Bearer {self.__token}"

    def appears_in(self, text: str) -> bool:
        """Whether `text` holds this token (to refuse an argument that carries it)."""
        return self.__token in text

    def __repr__(self) -> str:
        return f"Credential(source={self.source!r}, token=<redacted>)"

    __str__ = __repr__

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Credential cannot be serialised")


def _refuse(message: str, setting: str, problem: str) -> Refusal:
    return Refusal(
        ErrorCode.AUTH_MISSING, message, gate=Gate.CAPABILITIES,
        details={"setting": setting, "problem": problem},
    )


def resolve_credential(env: Mapping[str, str]) -> Credential:
    """Resolve the credential or refuse with AUTH_MISSING. Messages never include the value."""
    api_key = env.get(ENV_API_KEY)
    if api_key is not None and api_key.strip() != "":
        token = api_key.strip()
        if not _TOKEN_RE.fullmatch(token):
            raise _refuse(f"{ENV_API_KEY} is set but is not a usable token.", ENV_API_KEY, "malformed")
        return Credential(token, ENV_API_KEY)
    token_file = env.get(ENV_TOKEN_FILE)
    if token_file is None or token_file.strip() == "":
        raise _refuse(
            "No Itô credential is configured: set ITO_API_KEY or ITO_TOKEN_FILE in the server's environment.",
            ENV_API_KEY, "missing",
        )
    from .safe_read import read_regular_file

    try:
        content = read_regular_file(token_file, max_bytes=TOKEN_FILE_MAX_BYTES, require_mode_0600=True).content
    except ManifestRefusal as exc:
        check = (exc.details or {}).get("check", "unknown")
        raise _refuse(
            f"{ENV_TOKEN_FILE} cannot be used: the token file failed the '{check}' check "
            "(it must be a regular file you own, mode 0600, no symlinks).",
            ENV_TOKEN_FILE, f"file_{check}",
        ) from None
    try:
        token = content.decode("ascii").strip()
    except UnicodeDecodeError:
        raise _refuse(f"{ENV_TOKEN_FILE} does not hold a usable token.", ENV_TOKEN_FILE, "malformed") from None
    if not _TOKEN_RE.fullmatch(token):
        raise _refuse(f"{ENV_TOKEN_FILE} does not hold a usable token.", ENV_TOKEN_FILE, "malformed")
    return Credential(token, ENV_TOKEN_FILE)


def api_key_in_memory(env: Mapping[str, str]) -> str | None:
    """The value of `ITO_API_KEY` as the process environment already holds it, when it is a usable
    token; None otherwise. For gate 0 to refuse an argument that carries it: nothing is resolved,
    no file is opened (`ITO_TOKEN_FILE` is read only after gate 3), nothing is registered or sent."""
    token = (env.get(ENV_API_KEY) or "").strip()
    return token if _TOKEN_RE.fullmatch(token) else None


def credential_configured(env: Mapping[str, str] | None = None) -> bool:
    """Whether a credential setting exists, without reading the token file."""
    env = os.environ if env is None else env
    return bool((env.get(ENV_API_KEY) or "").strip() or (env.get(ENV_TOKEN_FILE) or "").strip())
