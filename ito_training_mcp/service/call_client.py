"""The backend client of one tool call: it tells the call when a mutating request is about to leave.

An interrupted call (the MCP client cancelled it, or Ctrl-C in the CLI) must say whether a create,
cancel or cleanup may have reached the backend. The flag is set before the request is built, so it
errs on the side of "may have been sent": the audit line then says `submission_outcome: unknown`
and the agent is told to look the key up, which is always safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from pydantic import BaseModel

from ito_training_mcp.backend.client import BackendClient
from ito_training_mcp.gates.config import BackendSettings

if TYPE_CHECKING:
    from ito_training_mcp.service.base import Call

M = TypeVar("M", bound=BaseModel)


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
