"""MCP over stdio with a bound on the length of one JSON-RPC line.

The SDK's stdio transport reads a whole line before looking at it, so one 50 MB line costs
50 MB (and more) of memory. This transport reads stdin in small chunks and holds at most
`max_line_bytes` of a line: an oversized line is answered with a JSON-RPC error (`id: null`,
-32600), the rest of it is read and dropped as it arrives, and the session carries on with the
next line. A line that is not JSON is answered with -32700, a JSON value that is not a JSON-RPC
message with -32600. Blocking reads and writes run in worker threads, never on the event loop.

While serving, fd 0 reads from the null device and fd 1 writes to stderr, so stray output from
anything in the process cannot corrupt the protocol stream; both are restored afterwards.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the SDK loads only when a session starts: reading the setting stays instant
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.server.lowlevel import Server
    from mcp.shared.message import SessionMessage

    ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
    WriteStream = MemoryObjectSendStream[SessionMessage]

log = logging.getLogger("ito_training_mcp.stdio")

MAX_LINE_ENV = "ITO_TRAINING_STDIO_MAX_LINE_BYTES"
DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
MIN_MAX_LINE_BYTES = 64 * 1024
MAX_MAX_LINE_BYTES = 64 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class Oversized:
    """A line longer than the bound (its bytes are gone)."""


OVERSIZED = Oversized()


def max_line_bytes(env: Mapping[str, str]) -> int:
    """The bound from `ITO_TRAINING_STDIO_MAX_LINE_BYTES` (64 KiB to 64 MiB), default 4 MiB."""
    raw = env.get(MAX_LINE_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_MAX_LINE_BYTES
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"{MAX_LINE_ENV} must be a whole number of bytes") from None
    if not (MIN_MAX_LINE_BYTES <= value <= MAX_MAX_LINE_BYTES):
        raise ValueError(f"{MAX_LINE_ENV} must be between {MIN_MAX_LINE_BYTES} and {MAX_MAX_LINE_BYTES}")
    return value


class LineSplitter:
    """Splits a byte stream into lines of at most `limit` bytes (the newline not counted).

    Holds at most `limit` bytes. A longer line yields `OVERSIZED` once, as soon as it is known to
    be too long, and the rest of that line is skipped without being kept.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        events: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end == -1 else chunk[start:end]
            if not self._skipping:
                if len(self._buffer) + len(piece) > self.limit:
                    self._buffer.clear()
                    self._skipping = True
                    events.append(OVERSIZED)
                else:
                    self._buffer += piece
            if end == -1:
                return events
            if not self._skipping:
                events.append(bytes(self._buffer))
            self._buffer.clear()
            self._skipping = False
            start = end + 1

    def finish(self) -> list[bytes | Oversized]:
        """At end of input: a last line without its newline still counts."""
        last = bytes(self._buffer)
        self._buffer.clear()
        return [last] if last and not self._skipping else []


@dataclass(frozen=True)
class Answer:
    """This transport's own reply to a line that is no message: a JSON-RPC error with `id: null`."""

    message: SessionMessage


def _answer(code: int, message: str, data: Any = None) -> Answer:
    from mcp.shared.message import SessionMessage
    from mcp.types import ErrorData, JSONRPCError

    error = ErrorData(code=code, message=message, data=data)
    return Answer(SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error)))


def parse_line(line: bytes) -> SessionMessage | Answer:
    """The JSON-RPC message on one line, or the answer to a line that is not one. Never echoes the line,
    and never raises: whatever the line holds, the session goes on.

    One parse, by the SDK's own parser (pydantic's, in Rust: its nesting limit is a refusal, never a
    Python recursion). A line it cannot read as JSON -- malformed, or nested deeper than that limit --
    is -32700; JSON that is no JSON-RPC message is -32600."""
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter
    from pydantic import ValidationError

    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        not_json = any(error["type"] == "json_invalid" for error in errors)
    except Exception as exc:  # not expected from the parser; answered, never fatal to the session
        log.warning("a stdio line could not be parsed (%s); answered as not JSON", type(exc).__name__)
        not_json = True
    if not_json:
        return _answer(PARSE_ERROR, "Parse error: the line is not JSON, or it nests too deeply to be read.")
    return _answer(INVALID_REQUEST, "Invalid Request: the line is not a JSON-RPC 2.0 message.")


def _parse_or_answer(line: bytes) -> SessionMessage | Answer:
    """`parse_line`, and a fixed answer should even building that answer fail: a reader that raised
    would end the session, and with it every call in flight."""
    try:
        return parse_line(line)
    except Exception as exc:  # the session outlives any one line
        log.error("a stdio line could not be answered (%s)", type(exc).__name__)
        return _answer(INVALID_REQUEST, "Invalid Request: the line could not be read.")


def too_large(limit: int) -> Answer:
    return _answer(INVALID_REQUEST, f"Request too large: one JSON-RPC message on stdio may be at most {limit} bytes.",
                   {"max_line_bytes": limit})


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


@asynccontextmanager
async def bounded_stdio(
    limit: int, fds: tuple[int, int] | None = None
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """The (read, write) streams for `Server.run`, over stdin/stdout or the given (in, out) descriptors."""
    import anyio
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCError

    from ito_training_mcp.egress.protocol import clean_jsonrpc_error

    restore: list[tuple[int, int]] = []
    if fds is None:
        in_fd, out_fd = os.dup(0), os.dup(1)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(2, 1)
        restore = [(in_fd, 0), (out_fd, 1)]
    else:
        in_fd, out_fd = fds

    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    answers = write_send.clone()  # the reader's own replies to lines that are not messages
    reading = anyio.CancelScope()

    async def read(fd: int) -> bytes:
        try:
            return await anyio.to_thread.run_sync(os.read, fd, READ_CHUNK_BYTES, abandon_on_cancel=True)
        except OSError:
            return b""  # a broken stdin ends the session like a closed one

    async def reader() -> None:
        splitter = LineSplitter(limit)
        with reading:
            async with read_send, answers:
                while True:
                    chunk = await read(in_fd)
                    for event in splitter.feed(chunk) if chunk else splitter.finish():
                        if isinstance(event, Oversized):
                            await answers.send(too_large(limit).message)
                        elif event.strip():
                            parsed = _parse_or_answer(event)
                            if isinstance(parsed, Answer):
                                await answers.send(parsed.message)
                            else:
                                await read_send.send(parsed)
                    if not chunk:
                        return

    async def writer() -> None:
        async with write_receive:
            async for message in write_receive:
                outgoing = message.message
                if isinstance(outgoing, JSONRPCError):  # protocol errors pass the egress too
                    outgoing = clean_jsonrpc_error(outgoing)
                text = outgoing.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await anyio.to_thread.run_sync(_write_all, out_fd, text.encode("utf-8") + b"\n")
                except OSError:
                    continue  # the client is gone; drain what is left so nobody waits on us

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                yield read_receive, write_send
            finally:
                await write_send.aclose()
                reading.cancel()  # the reader may be waiting on a stdin that never closes
    finally:
        for private, standard in restore:
            os.dup2(private, standard)


async def serve(server: Server[Any], limit: int) -> None:
    """Serve one MCP session over this process's stdin and stdout until stdin closes."""
    async with bounded_stdio(limit) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
