"""`ito-training-mcp`: run the MCP server on stdio (default) or streamable HTTP on loopback."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Sequence

# Not 8765: that is the reference backend's default (`ito-training backend`), and the two often run side by side.
DEFAULT_PORT = 8766


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ito-training-mcp",
        description="Fail-closed MCP server for ML training on Itô GPU bookings.",
    )
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio",
                        help="stdio (default) or streamable-http (which reads manifests only under "
                             "ITO_TRAINING_MANIFEST_ROOTS, and refuses to read any while it is unset)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="streamable-http only: the address to serve on (default 127.0.0.1; loopback only unless "
                             "--allow-non-loopback)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"streamable-http only: the port (default {DEFAULT_PORT}; the endpoint is "
                             f"http://HOST:PORT/mcp)")
    parser.add_argument("--allow-non-loopback", action="store_true",
                        help="serve streamable-http on a non-loopback address (it has no authentication)")
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO, WARNING (default), ERROR")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Imports deferred on purpose: `--version` and a usage error answer without loading the MCP SDK and the
    # core (about a second on a small machine).
    args = _parser().parse_args(argv)
    from ito_training_mcp import __version__
    from ito_training_mcp.egress import logs

    if args.version:
        print(f"ito-training-mcp {__version__}")
        return 0
    logs.configure(args.log_level)
    if args.transport == "streamable-http":
        try:
            loopback = args.host == "localhost" or ipaddress.ip_address(args.host).is_loopback
        except ValueError:
            loopback = False
        if not loopback and not args.allow_non_loopback:
            _parser().error("--host must be a loopback address (or pass --allow-non-loopback)")
        if not (0 < args.port < 65536):
            _parser().error("--port must be between 1 and 65535")

    line_limit = 0
    if args.transport == "stdio":
        from ito_training_mcp.doors.mcp.stdio import max_line_bytes

        try:
            line_limit = max_line_bytes(os.environ)
        except ValueError as exc:
            print(f"ito-training-mcp: {exc}", file=sys.stderr)
            return 2

    from ito_training_mcp.doors.mcp.server import build_server
    from ito_training_mcp.service import TrainingService
    from ito_training_mcp.skill_data import SkillMissing

    try:
        # Over HTTP any local process can call the tools: manifests are read under the configured roots only.
        server = build_server(TrainingService(manifests_under_roots_only=args.transport == "streamable-http"))
    except SkillMissing as exc:
        print(f"ito-training-mcp: {exc}", file=sys.stderr)
        return 1
    import anyio

    if args.transport == "stdio":
        from ito_training_mcp.doors.mcp.stdio import serve

        anyio.run(serve, server, line_limit)
    else:
        from ito_training_mcp.doors.mcp.http import serve_http

        anyio.run(serve_http, server, args.host, args.port)
    return 0
