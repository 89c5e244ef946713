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
import shlex
import stat as stat_
from collections.abc import Mapping

from ito_training_mcp.backend import origin_proof
from ito_training_mcp.egress.clean import clean_line
from ito_training_mcp.egress.redact import register_secret
from ito_training_mcp.envelope import ErrorCode, Gate
from ito_training_mcp.errors import ManifestRefusal, Refusal
from ito_training_mcp.files import read_regular_file

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

    def origin_key(self) -> bytes:
        """The key of the origin proof (`origin_proof.token_key`): the token's SHA-256, never the token."""
        return origin_proof.token_key(self.__token)

    def appears_in(self, text: str) -> bool:
        """Whether `text` holds this token (to refuse an argument that carries it)."""
        return self.__token in text

    def __repr__(self) -> str:
        return f"Credential(source={self.source!r}, token=<redacted>)"

    __str__ = __repr__

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Credential cannot be serialised")


def _refuse(message: str, setting: str, problem: str, next_step: str | None = None) -> Refusal:
    return Refusal(
        ErrorCode.AUTH_MISSING, message, gate=Gate.CAPABILITIES,
        details={"setting": setting, "problem": problem}, next_step=next_step,
    )


def _token_file_refusal(path: str, check: str) -> Refusal:
    """Say what is wrong with the token file and the one fix, naming the path (configuration, not a
    secret) and its mode (from lstat: metadata only, nothing is read). Never the content."""


    shown = clean_line(path)
    try:
        mode = stat_.S_IMODE(os.lstat(path).st_mode)
    except (OSError, ValueError):
        mode = None
    said = f" (mode {mode:04o})" if mode is not None else ""
    fix = f"chmod 600 {shlex.quote(shown)}"
    if check in ("mode_0600", "permissions"):
        who = "writable" if check == "permissions" else "readable"
        message = f"{ENV_TOKEN_FILE} is {who} by group/other{said}; run {fix}"
        step = (f"Tell the user the token file's permissions are too open: they run {fix} (only they may change "
                "it), then try again. Never ask for the token itself.")
    elif check == "owner":
        message = f"{ENV_TOKEN_FILE} ({shown}) is not owned by the user this server runs as."
        step = "Tell the user the token file must belong to the user this server runs as; only they can fix it."
    elif check == "symlink":
        message = f"{ENV_TOKEN_FILE} ({shown}) is, or passes through, a symlink; symlinks are refused."
        step = f"Tell the user to point {ENV_TOKEN_FILE} at the real file (no symlink on the path)."
    elif check in ("exists", "access", "resolve", "open"):
        message = f"{ENV_TOKEN_FILE} names no readable file ({shown})."
        step = f"Tell the user {ENV_TOKEN_FILE} names no readable file; they correct the setting."
    elif check in ("absolute", "normalised", "type", "nul", "length", "encoding", "roots"):
        message = f"{ENV_TOKEN_FILE} must be an absolute, normalised path."
        step = f"Tell the user {ENV_TOKEN_FILE} must be an absolute, normalised path; they correct the setting."
    else:
        message = (f"{ENV_TOKEN_FILE} cannot be used: the token file failed the '{check}' check "
                   "(it must be a regular file you own, mode 0600, one link, no symlinks).")
        step = f"Tell the user the token file at {ENV_TOKEN_FILE} failed the '{check}' check; only they can fix it."
    return _refuse(message, ENV_TOKEN_FILE, f"file_{check}", step)


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
            "No Itô credential is configured: set ITO_API_KEY or ITO_TOKEN_FILE in the environment of the MCP server "
            "(or of the ito-training command).",
            ENV_API_KEY, "missing",
        )

    try:
        content = read_regular_file(token_file, max_bytes=TOKEN_FILE_MAX_BYTES, require_mode_0600=True).content
    except ManifestRefusal as exc:
        raise _token_file_refusal(token_file, str((exc.details or {}).get("check", "unknown"))) from None
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
