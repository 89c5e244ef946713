"""The opt-in audit trail (`ITO_TRAINING_AUDIT_LOG=PATH`): one JSON line per tool call.

A line holds the time, the tool, the outcome (`ok`, `refused` or `interrupted`, with the code and
refusing gate), whether the backend was contacted, `submission_outcome: unknown` when a mutation may
have been sent without its answer arriving, and the validated identifiers of the call: booking,
run, confirmation reference, idempotency key, manifest digest. Never a token, a header, an argument
that failed validation, or manifest content: only values this server produced or validated go in,
through `Call.facts`, and every string still passes the egress (a credential resolved later in the
call is redacted even from an identifier that held it).

Opening the file is the manifest reader's walk (`files.py`): every directory from `/` opened with
`O_NOFOLLOW` relative to its parent and checked (no symlink, owned by root or this user, not
writable by others unless root-owned and sticky); then the file itself, which must be absent
(created 0600) or a regular file owned by this user, mode 0600, one link, not on /proc, /sys or
/dev -- checked with `lstat` before opening and `fstat` after. It is opened `O_NONBLOCK`: a FIFO
can neither hang the open nor pass the checks. All file work runs in a worker thread with a time
bound, so a slow filesystem can delay one call, never the event loop. If the trail is configured
but unusable, every call is refused up front (`CONFIG_INVALID`) and the server keeps serving.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio

from ito_training_mcp.egress.clean import clean_line
from ito_training_mcp.envelope import Envelope, Gate
from ito_training_mcp.errors import ConfigRefusal, ManifestRefusal
from ito_training_mcp.files import is_normalised_absolute, special_devices, validate_path_text, walk_to_parent

ENV_AUDIT_LOG = "ITO_TRAINING_AUDIT_LOG"
MAX_LINE_BYTES = 4096
MAX_FIELD_CHARS = 256
IO_TIMEOUT_S = 5.0
_WRITE_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_SUMMARY = ("ts", "tool", "outcome", "ok", "code", "gate", "live_api_contacted", "submission_outcome")

R = TypeVar("R")


def _refuse(problem: str) -> ConfigRefusal:
    return ConfigRefusal(ENV_AUDIT_LOG, problem, gate=Gate.INPUT)


@dataclass(frozen=True)
class AuditLog:
    path: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AuditLog | None:
        raw = env.get(ENV_AUDIT_LOG)
        if raw is None or raw.strip() == "":
            return None
        path = raw.strip()
        if not is_normalised_absolute(path) or path == "/":
            raise _refuse("must be an absolute, normalised file path")
        return cls(path)

    # ------------------------------------------------------------------ from the event loop

    async def check(self) -> None:
        """Open (creating it 0600) and verify the file, so an unusable trail refuses the call up front."""
        await _bounded(lambda: os.close(self.open()))

    async def record(
        self, tool: str, envelope: Envelope, facts: Mapping[str, str], *, outcome: str,
        submission_outcome: str | None = None,
    ) -> None:
        line = render_line(tool, envelope, facts, outcome=outcome, submission_outcome=submission_outcome)
        await _bounded(lambda: self.append(line))

    # ------------------------------------------------------------------ blocking work (worker thread)

    def open(self) -> int:
        """The file's descriptor for appending, after every check; or `CONFIG_INVALID`."""

        try:
            validate_path_text(self.path, None)
        except ManifestRefusal as exc:
            check = (exc.details or {}).get("check")
            if check == "special_tree":
                raise _refuse("the audit log may not live under /proc, /sys or /dev") from None
            raise _refuse("must be an absolute, normalised file path") from None
        components = self.path[1:].split("/")
        uid = os.geteuid()
        try:
            parent = walk_to_parent(components, uid)
        except ManifestRefusal as exc:
            check = (exc.details or {}).get("check", "unknown")
            raise _refuse(f"a directory on its path is unsafe or missing ({check})") from None
        try:
            return _open_leaf(components[-1], parent, uid)
        finally:
            os.close(parent)

    def append(self, line: bytes) -> None:
        fd = self.open()
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


async def _bounded(work: Callable[[], R]) -> R:
    """File work off the event loop, bounded: a stuck filesystem refuses the call, it never hangs it."""
    with anyio.move_on_after(IO_TIMEOUT_S):
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    raise _refuse("the audit log did not answer in time")


def _open_leaf(name: str, parent: int, uid: int) -> int:
    for _ in range(2):  # a second round only when a concurrent call created the file in between
        try:
            before: os.stat_result | None = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            before = None
        except OSError:
            raise _refuse("the audit log cannot be inspected") from None
        if before is not None:
            if stat.S_ISLNK(before.st_mode):
                raise _refuse("the audit log is a symlink")
            if not stat.S_ISREG(before.st_mode):  # refused before opening: opening a FIFO or device has effects
                raise _refuse("the audit log is not a regular file (directory, FIFO, socket or device)")
        flags = _WRITE_FLAGS if before is not None else _WRITE_FLAGS | os.O_CREAT | os.O_EXCL
        try:
            fd = os.open(name, flags, 0o600, dir_fd=parent)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse("the audit log is a symlink") from None
            if exc.errno == errno.ENXIO:
                raise _refuse("the audit log is not a regular file (directory, FIFO, socket or device)") from None
            raise _refuse("the audit log cannot be opened for appending") from None
        try:
            _check_opened(os.fstat(fd), before, uid)
        except BaseException:
            os.close(fd)
            raise
        return fd
    raise _refuse("the audit log changed while it was opened")


def _check_opened(st: os.stat_result, before: os.stat_result | None, uid: int) -> None:

    if not stat.S_ISREG(st.st_mode):
        raise _refuse("the audit log is not a regular file (directory, FIFO, socket or device)")
    if before is not None and (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
        raise _refuse("the audit log changed while it was opened")
    if st.st_dev in special_devices():
        raise _refuse("the audit log may not live under /proc, /sys or /dev")
    if st.st_uid != uid:
        raise _refuse("the audit log must be owned by this user")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise _refuse("the audit log must have mode 0600 (no group or other access)")
    if st.st_nlink != 1:
        raise _refuse("the audit log must have exactly one hard link")


def render_line(
    tool: str, envelope: Envelope, facts: Mapping[str, str], *, outcome: str, submission_outcome: str | None = None
) -> bytes:
    """One bounded JSON line, ASCII only; every string through the egress."""
    entry: dict[str, Any] = {
        "ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "tool": clean_line(tool),
        "outcome": outcome,
        "ok": envelope.ok,
        "code": envelope.error.code.value if envelope.error else None,
        "gate": envelope.error.gate.value if envelope.error and envelope.error.gate else None,
        "live_api_contacted": envelope.live_api_contacted,
    }
    if submission_outcome is not None:
        entry["submission_outcome"] = submission_outcome
    data = envelope.data or {}
    for name in ("run_id", "state", "created"):
        value = data.get(name)
        if isinstance(value, bool):
            entry[name] = value
        elif isinstance(value, str):
            entry[name] = clean_line(value)[:MAX_FIELD_CHARS]
    entry.update({clean_line(name): clean_line(value)[:MAX_FIELD_CHARS] for name, value in sorted(facts.items())})
    line = json.dumps(entry, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"
    if len(line) > MAX_LINE_BYTES:  # pragma: no cover - fields are bounded; belt and braces
        entry = {k: entry[k] for k in _SUMMARY if k in entry}
        entry["truncated"] = True
        line = json.dumps(entry, separators=(",", ":")).encode("ascii") + b"\n"
    return line
