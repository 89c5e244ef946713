"""The one object the handlers share: store, faults, in-flight keys, request log, settings."""

from __future__ import annotations

import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .faults import FaultRegistry
from .reviews import Settings
from .store import Store

CONTRACT_VERSION = "ito.training.v1"
OPERATIONS = ("create", "status", "logs", "metrics", "checkpoints", "cancel", "cleanup", "plan",
              "confirmation_requests", "restart")
MAX_REQUEST_LOG = 10_000
SESSION_TTL_S = 60 * 60  # a desk session lives at most this long
SESSION_IDLE_S = 15 * 60  # and ends after this long unused
RECENT_SIGN_IN_S = 10 * 60  # Confirm needs a sign-in this recent


@dataclass(frozen=True)
class DeskSettings:
    """How long a session lives, and how recent a sign-in Confirm needs (seconds)."""

    session_ttl_s: float = SESSION_TTL_S
    session_idle_s: float = SESSION_IDLE_S
    recent_sign_in_s: float = RECENT_SIGN_IN_S


@dataclass
class Backend:
    store: Store
    operator_token: str
    # The bare operator token as a bearer (scripts); off unless asked for, and every use is logged.
    allow_operator_bearer: bool = False
    auto_advance_s: float | None = None
    interrupt_every_steps: int | None = None
    public_url: str | None = None
    reviews: Settings = field(default_factory=Settings)
    desk: DeskSettings = field(default_factory=DeskSettings)
    faults: FaultRegistry = field(default_factory=FaultRegistry)
    in_flight: set[tuple[str, str]] = field(default_factory=set)
    requests: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_REQUEST_LOG))
    # Signs the desk's return-path cookie (this process only: a restart forgets where people were going).
    desk_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    def catch_up(self) -> int:
        """Bring every active run up to the run clock (`auto_advance_s`), as of the store's clock; every
        request does this first, and so does the background clock. Returns how many runs moved."""
        if self.auto_advance_s is None:
            return 0
        return self.store.auto_advance(self.auto_advance_s, self.interrupt_every_steps)

    def base_url(self, scope: Any) -> str:
        """Where people reach this backend: the configured public URL, else the address the
        connection came in on (the socket's, never the client's Host header)."""
        if self.public_url:
            return self.public_url
        server = scope.get("server")
        scheme = "https" if scope.get("scheme") == "https" else "http"
        if not server:
            return f"{scheme}://127.0.0.1"
        host, port = str(server[0]), server[1]
        host = f"[{host}]" if ":" in host else host
        return f"{scheme}://{host}" if port is None else f"{scheme}://{host}:{port}"

    def capabilities(self) -> dict[str, Any]:
        stored = self.store.setting("capabilities")
        training = stored if isinstance(stored, dict) else {"available": True, "operations": list(OPERATIONS)}
        return {"contract_version": CONTRACT_VERSION, "training": training}
