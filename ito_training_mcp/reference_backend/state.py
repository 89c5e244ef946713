"""The one object the handlers share: store, faults, in-flight keys, request log, settings."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from .faults import FaultRegistry
from .store import Store

CONTRACT_VERSION = "ito.training.v1"
OPERATIONS = ("create", "status", "logs", "metrics", "checkpoints", "cancel", "cleanup")
MAX_REQUEST_LOG = 10_000


@dataclass
class Backend:
    store: Store
    operator_token: str
    auto_advance_s: float | None = None
    faults: FaultRegistry = field(default_factory=FaultRegistry)
    in_flight: set[tuple[str, str]] = field(default_factory=set)
    requests: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_REQUEST_LOG))

    def capabilities(self) -> dict[str, Any]:
        stored = self.store.setting("capabilities")
        training = stored if isinstance(stored, dict) else {"available": True, "operations": list(OPERATIONS)}
        return {"contract_version": CONTRACT_VERSION, "training": training}
