"""The opt-in audit trail (`ITO_TRAINING_AUDIT_LOG=PATH`): one JSON line per tool call.

A line holds the time, the tool, the outcome (code and refusing gate), whether the backend was
contacted, and the validated identifiers of the call: booking, run, confirmation reference,
idempotency key, manifest digest. Never a token, a header, an argument that failed validation,
or manifest content: only values this server produced or validated go in, through `Call.facts`.

The file is opened for every line with O_APPEND|O_CREAT|O_NOFOLLOW, created 0600, and refused
unless it is a regular file owned by this user with no group/other access. Each line is one
write(2) of at most `MAX_LINE_BYTES`. If the trail is configured but unusable, every call is
refused up front (`CONFIG_INVALID`): nothing happens that the operator asked to be audited
without being audited.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .config import is_normalised_absolute
from .envelope import Envelope, Gate
from .errors import ConfigRefusal

ENV_AUDIT_LOG = "ITO_TRAINING_AUDIT_LOG"
MAX_LINE_BYTES = 4096
MAX_FIELD_CHARS = 256
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY


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
            raise ConfigRefusal(ENV_AUDIT_LOG, "must be an absolute, normalised file path", gate=Gate.INPUT)
        return cls(path)

    def check(self) -> None:
        """Open (creating it 0600) and verify the file, so an unusable trail refuses the call up front."""
        os.close(self._open())

    def _open(self) -> int:
        try:
            fd = os.open(self.path, _FLAGS, 0o600)
        except OSError:
            raise ConfigRefusal(ENV_AUDIT_LOG, "the audit log cannot be opened for appending (or is a symlink)",
                                gate=Gate.INPUT) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
            os.close(fd)
            raise ConfigRefusal(
                ENV_AUDIT_LOG, "the audit log must be a regular file owned by this user with mode 0600",
                gate=Gate.INPUT,
            )
        return fd

    def record(self, tool: str, envelope: Envelope, facts: Mapping[str, str]) -> None:
        fd = self._open()
        try:
            os.write(fd, render_line(tool, envelope, facts))
        finally:
            os.close(fd)


def render_line(tool: str, envelope: Envelope, facts: Mapping[str, str]) -> bytes:
    entry: dict[str, Any] = {
        "ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "tool": tool,
        "ok": envelope.ok,
        "code": envelope.error.code.value if envelope.error else None,
        "gate": envelope.error.gate.value if envelope.error and envelope.error.gate else None,
        "live_api_contacted": envelope.live_api_contacted,
    }
    data = envelope.data or {}
    for name in ("run_id", "state", "created"):
        if isinstance(data.get(name), str | bool):
            entry[name] = data[name]
    entry.update({name: value[:MAX_FIELD_CHARS] for name, value in sorted(facts.items())})
    line = json.dumps(entry, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"
    if len(line) > MAX_LINE_BYTES:  # pragma: no cover - fields are bounded; belt and braces
        entry = {k: entry[k] for k in ("ts", "tool", "ok", "code", "gate", "live_api_contacted")}
        entry["truncated"] = True
        line = json.dumps(entry, separators=(",", ":")).encode("ascii") + b"\n"
    return line
