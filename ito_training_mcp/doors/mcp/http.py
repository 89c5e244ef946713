"""The MCP door over streamable HTTP: the SDK's app at /mcp, served by the guarded uvicorn of
`ito_training_mcp.doors.mcp.serving` (header and body deadlines, a connection cap, a bounded error log), with
the SDK's DNS-rebinding check configured for the address the server listens on, however it is
spelt.

A DNS-rebinding attack makes a browser send a page's requests, under the attacker's own host name,
to this server: the `Host` header then names the attacker's host. So `Host` must name this server:
the address given to `--host` as written and in its canonical form (`127.0.0.2`, `[::1]` for
`0:0:0:0:0:0:0:1`), or `localhost`, with any port; an `Origin`, when a browser sends one, the same
names over http. A server on an unspecified address (`0.0.0.0`, `::`, with `--allow-non-loopback`)
answers the loopback names only: bind the address clients use to be reachable by it.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings

from ito_training_mcp.doors.mcp.serving import bounded_logging, server_config
from ito_training_mcp.egress.protocol import CleanErrorResponses

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def host_names(host: str) -> list[str]:
    """How a `Host` header may name a server bound to `host` (without the port)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return ["localhost"] if host == "localhost" else [host.lower()]
    if address.is_unspecified:
        return list(LOOPBACK_NAMES)

    def spelt(text: str) -> str:
        return f"[{text}]" if address.version == 6 else text

    names = [spelt(str(address)), spelt(host.strip("[]").lower())]
    if address.is_loopback:
        names.append("localhost")
    return list(dict.fromkeys(names))


def transport_security(host: str) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection, on, for every name `host_names` gives."""
    names = host_names(host)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names],
        allowed_origins=[f"http://{name}:*" for name in names],
    )


async def serve_http(server: Server[Any], host: str, port: int) -> None:
    """Streamable HTTP at /mcp until stopped. The JSON-RPC errors the transport writes itself pass the
    egress (`CleanErrorResponses`); uvicorn logs through the root logger `logs.configure` set up
    (stderr, redacted), within the log budget."""
    bounded_logging(*logging.getLogger().handlers)
    app = CleanErrorResponses(server.streamable_http_app(host=host, transport_security=transport_security(host)))
    level = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
    config = server_config(app, host=host, port=port, log_config=None, log_level=level, lifespan="on")
    await uvicorn.Server(config).serve()
