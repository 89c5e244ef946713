"""How the reference backend is served: uvicorn with bounded connections.

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
deadline runs: handling it may legitimately take long (injected delays, for one).
Headers are also capped in size (`MAX_HEADER_BYTES`), and idle keep-alive connections close after
`KEEP_ALIVE_S`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
KEEP_ALIVE_S = 5
MAX_HEADER_BYTES = 16 * 1024
_BODY_408 = b'{"error":{"code":"request_timeout","message":"The request did not arrive in time."}}'


class GuardedH11Protocol(H11Protocol):
    """H11Protocol with the header and body deadlines described in the module docstring."""

    header_timeout_s = HEADER_TIMEOUT_S
    body_timeout_s = BODY_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._arm(None, 0.0)
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def _follow(self) -> None:
        """Arm the deadline for the phase the peer is in, once per phase."""
        state = self.conn.their_state
        phase = "header" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        if phase == self._phase or (self.transport is not None and self.transport.is_closing()):
            return
        self._phase = phase
        if phase == "header":
            self._arm(phase, self.header_timeout_s)
        elif phase == "body":
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


def guarded_protocol(header_timeout_s: float = HEADER_TIMEOUT_S,
                     body_timeout_s: float = BODY_TIMEOUT_S) -> type[GuardedH11Protocol]:
    for name, value in (("header_timeout_s", header_timeout_s), ("body_timeout_s", body_timeout_s)):
        if not 0 < value <= 3600:
            raise ValueError(f"{name} must be in (0, 3600]")
    return type("GuardedH11Protocol", (GuardedH11Protocol,),
                {"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s})


def server_config(app: Any, *, host: str, port: int, header_timeout_s: float = HEADER_TIMEOUT_S,
                  body_timeout_s: float = BODY_TIMEOUT_S, keep_alive_s: int = KEEP_ALIVE_S,
                  graceful_shutdown_s: int = 2) -> uvicorn.Config:
    """The one uvicorn configuration of the reference backend (CLI and harness)."""
    return uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on",
        http=guarded_protocol(header_timeout_s, body_timeout_s),
        timeout_keep_alive=keep_alive_s, h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        timeout_graceful_shutdown=graceful_shutdown_s,
    )
