"""The bare baseline for bench/run.py: an MCPServer with one echo tool, on stdio.

Same interpreter, same SDK, same transport as `python -m ito_training_mcp`, and nothing else: the
difference between the two is what ito-training-mcp itself adds (its imports, its tool and resource
registration, its per-call work).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="bench-echo", version="0.0.0")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run()
