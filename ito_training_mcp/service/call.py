"""One tool call's bookkeeping (`Call`) and its backend client (`CallClient`), which tells the call when a
mutating request is about to leave.

An interrupted call (the MCP client cancelled it, or Ctrl-C in the CLI) must say whether a create,
cancel or cleanup may have reached the backend. The flag is set before the request is built, so it
errs on the side of "may have been sent": the audit line then says `submission_outcome: unknown`
and the agent is told to look the key up, which is always safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from ito_training_mcp.backend.client import BackendClient, Exchange
from ito_training_mcp.gates.config import BackendSettings

M = TypeVar("M", bound=BaseModel)


@dataclass
class Call:
    """Per-call bookkeeping: did any request leave this process for the backend, did a mutating one
    start, and which validated identifiers (never secrets, never content) describe the call for the
    audit trail."""

    tool: str
    exchange: Exchange | None = field(default=None)
    facts: dict[str, str] = field(default_factory=dict)
    mutation_sent: bool = False

    def note(self, **facts: str | None) -> None:
        self.facts.update({name: value for name, value in facts.items() if value is not None})

    @property
    def contacted(self) -> bool:
        return self.exchange is not None and self.exchange.contacted


class CallClient(BackendClient):
    def __init__(self, settings: BackendSettings, call: Call, *, transport: httpx.AsyncBaseTransport | None) -> None:
        assert call.exchange is not None
        super().__init__(settings, call.exchange, transport=transport)
        self._call = call

    async def request(  # forwards every option unchanged
        self, method: str, path: str, model: type[M], *, mutation: bool = False, **options: Any
    ) -> tuple[int, M]:
        if mutation:
            self._call.mutation_sent = True
        return await super().request(method, path, model, mutation=mutation, **options)
