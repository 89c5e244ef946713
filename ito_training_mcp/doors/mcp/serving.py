"""How HTTP is served, by the MCP door's streamable HTTP and by the reference backend: uvicorn with
deadlines, a connection cap and a bounded error log.

uvicorn's h11 protocol arms a timer only between requests (keep-alive): a client that sends half
a request line, or headers and then a body byte now and then, holds its connection forever.
`guarded_protocol` adds two deadlines per connection, enforced by the protocol itself so they
cover every route (and a body the application never reads):

- header deadline: from the moment the connection is waiting for a request (connected, or the
  previous response finished) until the request's headers are complete;
- body deadline: from the complete headers until the whole body has arrived. Progress does not
  extend it: a body dripped a byte at a time fails like one that stalls.

On the header deadline the connection is closed (there is no request to answer). On the body
deadline the client gets `408` with `Connection: close` (unless a response has started) and the
connection is closed; the application sees a disconnect. Once a request has fully arrived no
deadline runs: handling it may legitimately take long (a long poll, a stream of events).

Connections are capped (`max_connections`, never more than the process's file limit allows with a
reserve for everything else). When a new connection would pass the cap, the connection that has
waited longest for a request's headers is closed to make room -- a half-sent request, or an idle
keep-alive -- and the newcomer is served; if every connection is busy with a request, the
newcomer is closed. So a flood of half-open connections can neither exhaust the file descriptors
nor lock out a client that sends its request promptly: to push that client out, an attacker would
have to open the whole cap's worth of connections while the client's headers are on their way.

Headers are also capped in size (`MAX_HEADER_BYTES`), idle keep-alive connections close after
`KEEP_ALIVE_S`, and `bounded_logging` caps how many log lines the server writes per window, so a
flood cannot fill a disk through the error log.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import threading
import time
from collections import OrderedDict
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
KEEP_ALIVE_S = 5
MAX_HEADER_BYTES = 16 * 1024
MAX_CONNECTIONS = 512
FILE_RESERVE = 64  # descriptors kept for everything but client connections (files, the backend, logs)
LOG_WINDOW_S = 10.0
LOG_LINES_PER_WINDOW = 50
_BODY_408 = b'{"error":{"code":"request_timeout","message":"The request did not arrive in time."}}'


def connection_cap(wanted: int = MAX_CONNECTIONS) -> int:
    """`wanted`, lowered so that the connections and `FILE_RESERVE` fit the soft file limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - FILE_RESERVE))


class GuardedH11Protocol(H11Protocol):
    """H11Protocol with the deadlines and the connection cap described in the module docstring.
    `guarded_protocol` makes one subclass per server, with its own settings and its own list of the
    connections waiting for a request."""

    header_timeout_s = HEADER_TIMEOUT_S
    body_timeout_s = BODY_TIMEOUT_S
    max_connections = MAX_CONNECTIONS
    # Connections waiting for a request's headers, longest-waiting first, and connections closed to make
    # room whose loss is not yet reported (one of each per server class).
    waiting: ClassVar[OrderedDict[GuardedH11Protocol, None]] = OrderedDict()
    evicted: ClassVar[set[GuardedH11Protocol]] = set()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._follow()
        if len(self.server_state.connections) - len(self.evicted) > self.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._arm(None, 0.0)
        self.waiting.pop(self, None)
        self.evicted.discard(self)
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def _make_room(self) -> None:
        """Over the cap: close the connection that has waited longest for a request, else this one."""
        oldest = next((c for c in self.waiting if c is not self), None)
        victim = self if oldest is None else oldest
        self.waiting.pop(victim, None)
        self.evicted.add(victim)
        victim._arm(None, 0.0)
        victim.transport.close()

    def _follow(self) -> None:
        """Arm the deadline for the phase the peer is in, once per phase."""
        state = self.conn.their_state
        phase = "header" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        if phase == self._phase or (self.transport is not None and self.transport.is_closing()):
            return
        self._phase = phase
        if phase == "header":
            self.waiting[self] = None
            self._arm(phase, self.header_timeout_s)
            return
        self.waiting.pop(self, None)
        if phase == "body":
            self._arm(phase, self.body_timeout_s)
        else:
            self._arm(None, 0.0)

    def _arm(self, phase: str | None, seconds: float) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if phase is not None:
            self._deadline = self.loop.call_later(seconds, self._expired, phase)

    def _expired(self, phase: str) -> None:
        self._deadline = None
        if self.transport.is_closing() or phase != self._phase:
            return
        self.waiting.pop(self, None)
        cycle = self.cycle
        if phase == "body" and cycle is not None and not cycle.response_started:
            try:
                head = h11.Response(status_code=408, reason=b"Request Timeout", headers=[
                    (b"content-type", b"application/json"), (b"content-length", str(len(_BODY_408)).encode()),
                    (b"cache-control", b"no-store"), (b"connection", b"close")])
                self.transport.write(self.conn.send(head) or b"")
                self.transport.write(self.conn.send(h11.Data(data=_BODY_408)) or b"")
                self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
            except h11.LocalProtocolError:  # pragma: no cover - h11 refused: just close
                pass
        if cycle is not None:
            cycle.disconnected = True  # the application's later sends become no-ops
            cycle.message_event.set()  # and a pending receive() returns http.disconnect
        self.transport.close()


def guarded_protocol(header_timeout_s: float = HEADER_TIMEOUT_S, body_timeout_s: float = BODY_TIMEOUT_S,
                     max_connections: int = MAX_CONNECTIONS) -> type[GuardedH11Protocol]:
    for name, value in (("header_timeout_s", header_timeout_s), ("body_timeout_s", body_timeout_s)):
        if not 0 < value <= 3600:
            raise ValueError(f"{name} must be in (0, 3600]")
    if not 1 <= max_connections <= 65536:
        raise ValueError("max_connections must be in [1, 65536]")
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s,
        "max_connections": connection_cap(max_connections), "waiting": OrderedDict(), "evicted": set()})


def server_config(app: Any, *, host: str, port: int, header_timeout_s: float = HEADER_TIMEOUT_S,
                  body_timeout_s: float = BODY_TIMEOUT_S, keep_alive_s: int = KEEP_ALIVE_S,
                  max_connections: int = MAX_CONNECTIONS, graceful_shutdown_s: int = 2,
                  **options: Any) -> uvicorn.Config:
    """A uvicorn configuration with the guards of this module; `options` go to `uvicorn.Config`. (The
    log budget is the caller's to install: `bounded_logging`.)"""
    return uvicorn.Config(
        app, host=host, port=port,
        http=guarded_protocol(header_timeout_s, body_timeout_s, max_connections),
        timeout_keep_alive=keep_alive_s, h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        timeout_graceful_shutdown=graceful_shutdown_s, **{"log_level": "warning", "lifespan": "off", **options},
    )


class LogBudget(logging.Filter):
    """At most `lines` records per `window_s` pass (all loggers it is attached to together); the rest
    are dropped and counted, and the first record of the next window says how many were."""

    def __init__(self, lines: int = LOG_LINES_PER_WINDOW, window_s: float = LOG_WINDOW_S) -> None:
        super().__init__()
        self.lines, self.window_s = lines, window_s
        self._lock = threading.Lock()
        self._window_ends = 0.0
        self._passed = 0
        self._dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            now = time.monotonic()
            if now >= self._window_ends:
                if self._dropped:
                    record.msg = f"[{self._dropped} log lines dropped in the last {self.window_s:g} s] {record.msg}"
                self._window_ends, self._passed, self._dropped = now + self.window_s, 0, 0
            if self._passed >= self.lines:
                self._dropped += 1
                return False
            self._passed += 1
            return True


LOG_BUDGET = LogBudget()
# Where a flood of connections makes log lines: uvicorn's errors, and asyncio's accept errors.
FLOOD_LOGGERS = ("uvicorn.error", "asyncio")


def bounded_logging(*filterers: logging.Filterer) -> None:
    """Put this process's log budget on `filterers` (idempotent): the handlers that write every line,
    or by default the loggers a connection flood writes to."""
    for filterer in filterers or tuple(logging.getLogger(name) for name in FLOOD_LOGGERS):
        if LOG_BUDGET not in filterer.filters:
            filterer.addFilter(LOG_BUDGET)
