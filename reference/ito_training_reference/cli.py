"""`ito-training backend`: run the reference backend as a local server.

Loopback only unless --allow-non-loopback (the operator API answers loopback clients only in
any case). The operator token lives in a 0600 file, generated on first use; it is never printed,
logged or put on the command line: the server prints the file's path and its URL instead.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import signal
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ito_training_mcp.doors.cli.usage import UsageError

from .cliutil import QuietParser, TokenFileError, read_operator_token

__all__ = ["TokenFileError", "build_parser", "main", "operator_token", "read_operator_token"]

DEFAULT_DB = "ito-reference-backend.sqlite3"
TOKEN_FILE_SUFFIX = ".operator-token"  # noqa: S105 - a file name suffix


def _is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def operator_token(path: str) -> str:
    """Create the token file with a fresh token (0600, O_EXCL), or read the existing one with the
    owner and mode checks of `read_operator_token`."""
    flags = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flags, 0o600)
    except FileExistsError:
        return read_operator_token(path)
    except OSError as exc:
        raise TokenFileError(f"cannot create the operator token file ({exc.strerror})") from None
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


class _Terminated(Exception):
    """SIGTERM arrived: uvicorn has shut down gracefully and re-raises the signal after it."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated


def build_parser() -> argparse.ArgumentParser:
    parser = QuietParser(
        prog="ito-training backend", allow_abbrev=False,
        description="Run the reference ito.training.v1 backend (a conformance and demo server; it trains nothing).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--allow-non-loopback", action="store_true",
                        help="allow binding a non-loopback address (plain HTTP: demos on trusted networks only)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    parser.add_argument("--db", default=DEFAULT_DB, help=f"SQLite database path (default {DEFAULT_DB})")
    parser.add_argument("--public-url", metavar="ORIGIN", default=None,
                        help="origin people use to reach this backend, for review and sign-in links "
                             "(default: the address each connection arrives on)")
    parser.add_argument("--operator-token-file", default=None,
                        help="operator token file (default: <db>.operator-token; created 0600 if missing)")
    parser.add_argument("--auto-advance-s", type=float, default=None,
                        help="the run clock: every active run passes one stage per this many seconds (demos)")
    parser.add_argument("--interrupt-every-steps", type=int, default=None, metavar="N",
                        help="interrupt every run once per N model steps (it resumes from its last checkpoint)")
    parser.add_argument("--tls-cert", metavar="PEM", default=None,
                        help="serve https with this certificate (and --tls-key): the desk's cookies are then "
                             "Secure and __Host- prefixed")
    parser.add_argument("--tls-key", metavar="PEM", default=None, help="the private key of --tls-cert")
    parser.add_argument("--allow-operator-bearer", action="store_true",
                        help="also accept the bare operator token as a bearer on the operator API (scripts); "
                             "every such request is logged as a warning. The desk CLI signs its requests and "
                             "never needs this")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageError as exc:
        print(exc.message, file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 2
    if not _is_loopback_host(args.host) and not args.allow_non_loopback:
        print("ito-training backend: refusing a non-loopback --host without --allow-non-loopback", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print("ito-training backend: --port must be 0-65535", file=sys.stderr)
        return 2
    if (args.tls_cert is None) != (args.tls_key is None):
        print("ito-training backend: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    tls = {} if args.tls_cert is None else {"ssl_certfile": args.tls_cert, "ssl_keyfile": args.tls_key}
    token_path = args.operator_token_file or f"{args.db}{TOKEN_FILE_SUFFIX}"
    try:
        token = operator_token(token_path)
    except TokenFileError as exc:  # names the flag, not the path typed (it could be anything)
        source = "--operator-token-file" if args.operator_token_file else "<--db>" + TOKEN_FILE_SUFFIX
        print(f"ito-training backend: {exc} ({source})", file=sys.stderr)
        return 2

    import uvicorn  # lazy: only this command needs the server stack

    from .app import create_app
    from .serving import server_config

    try:
        app = create_app(args.db, operator_token=token, auto_advance_s=args.auto_advance_s,
                         public_url=args.public_url, interrupt_every_steps=args.interrupt_every_steps,
                         allow_operator_bearer=args.allow_operator_bearer)
    except ValueError as exc:  # fixed messages naming the setting
        print(f"ito-training backend: cannot start: {exc}", file=sys.stderr)
        return 2
    except (OSError, sqlite3.Error) as exc:  # never the path: only what went wrong
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        print(f"ito-training backend: cannot start: the database cannot be opened ({detail})", file=sys.stderr)
        return 2

    db_shown, token_shown = Path(args.db).resolve(), Path(token_path).resolve()

    class _Announcing(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                port = self.servers[0].sockets[0].getsockname()[1]
                host = f"[{args.host}]" if ":" in args.host else args.host
                scheme = "https" if tls else "http"
                print(f"ito-training backend: listening on {scheme}://{host}:{port}\n"
                      f"  database: {db_shown}\n"
                      f"  operator token file: {token_shown} (loopback clients only)",
                      file=sys.stderr, flush=True)
                if args.allow_operator_bearer:
                    print("  the bare operator bearer token is accepted (--allow-operator-bearer); each use is "
                          "logged", file=sys.stderr, flush=True)

    try:
        config = server_config(app, host=args.host, port=args.port, **tls)
        config.load()  # reads the certificate and key now, so a bad pair is a clear error
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        app.state.backend.store.close()
        print(f"ito-training backend: cannot start: the TLS certificate or key cannot be used "
              f"({type(exc).__name__})", file=sys.stderr)
        return 2
    server = _Announcing(config)
    # uvicorn handles SIGTERM gracefully, then re-raises it: with the default action the process would
    # die before the database is closed, leaving its -wal and -shm files. This handler turns it into a
    # clean stop, so `finally` checkpoints the log into the database file and removes them.
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        server.run()
    except SystemExit:  # uvicorn exits this way when it cannot bind
        return 1
    except (KeyboardInterrupt, _Terminated):  # re-raised by uvicorn after a graceful shutdown
        print("ito-training backend: stopped", file=sys.stderr)
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        app.state.backend.store.close()
    return 0 if server.started else 1
