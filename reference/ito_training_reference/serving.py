"""How the reference backend is served: the product's guarded uvicorn (`ito_training_mcp.doors.mcp.serving`:
header and body deadlines, a connection cap, a bounded error log), the same machinery as the MCP
server's streamable HTTP."""

from __future__ import annotations

from typing import Any

import uvicorn

from ito_training_mcp.doors.mcp.serving import (
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    KEEP_ALIVE_S,
    MAX_CONNECTIONS,
    MAX_HEADER_BYTES,
    GuardedH11Protocol,
    bounded_logging,
    guarded_protocol,
)
from ito_training_mcp.doors.mcp.serving import server_config as guarded_config

__all__ = ["BODY_TIMEOUT_S", "HEADER_TIMEOUT_S", "KEEP_ALIVE_S", "MAX_CONNECTIONS", "MAX_HEADER_BYTES",
           "GuardedH11Protocol", "guarded_protocol", "server_config"]


def server_config(app: Any, *, host: str, port: int, header_timeout_s: float = HEADER_TIMEOUT_S,
                  body_timeout_s: float = BODY_TIMEOUT_S, keep_alive_s: int = KEEP_ALIVE_S,
                  graceful_shutdown_s: int = 2, **options: Any) -> uvicorn.Config:
    """The one uvicorn configuration of the reference backend (CLI and harness); `options` go to
    uvicorn (the TLS certificate and key, for one)."""
    bounded_logging()
    return guarded_config(app, host=host, port=port, header_timeout_s=header_timeout_s,
                          body_timeout_s=body_timeout_s, keep_alive_s=keep_alive_s,
                          graceful_shutdown_s=graceful_shutdown_s, lifespan="on", **options)
