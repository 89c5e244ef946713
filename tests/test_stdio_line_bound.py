"""One JSON-RPC line on stdio is bounded (4 MiB by default): a longer one is answered with an error,
dropped as it streams in, and the session carries on. Measured on the real server process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ito_training_mcp.doors.mcp.server import build_server
from ito_training_mcp.doors.mcp.stdio import (
    DEFAULT_MAX_LINE_BYTES,
    MAX_LINE_ENV,
    OVERSIZED,
    Answer,
    LineSplitter,
    bounded_stdio,
    max_line_bytes,
    parse_line,
)
from ito_training_mcp.service import TrainingService

BIG = 50 * 1024 * 1024
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "line-bound-test", "version": "0"}}}


class Server:
    """`python -m ito_training_mcp` over raw pipes, one JSON-RPC line at a time."""

    def __init__(self, tmp_path: Path, env: dict[str, str] | None = None) -> None:
        self.stderr_path = tmp_path / "stderr.log"
        base = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
        with self.stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ito_training_mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr, env={**base, **(env or {})},
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout

    def send(self, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.stdin.write(data)
        self.stdin.flush()

    def receive(self) -> dict[str, Any]:
        line = self.stdout.readline(1024 * 1024)
        assert line.endswith(b"\n"), (line[:200], self.stderr_path.read_text(errors="replace")[-2000:])
        answer: dict[str, Any] = json.loads(line)
        return answer

    def kib(self, field: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(field)

    def initialize(self) -> None:
        self.send(INITIALIZE)
        assert self.receive()["result"]["serverInfo"]["name"] == "ito-training"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def tools(self, request_id: int) -> list[str]:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
        answer = self.receive()
        assert answer["id"] == request_id, answer
        return [tool["name"] for tool in answer["result"]["tools"]]

    def close(self) -> int:
        self.stdin.close()
        try:
            return self.proc.wait(timeout=30)
        finally:
            self.stdout.close()


@pytest.fixture
def server(tmp_path: Path) -> Any:
    running = Server(tmp_path)
    yield running
    if running.proc.poll() is None:
        running.proc.kill()
        running.proc.wait(timeout=30)


def _big_line(size: int) -> bytes:
    head = b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"pad": "'
    return head + b"x" * (size - len(head) - 4) + b'"}}\n'


def test_a_50_mb_line_is_refused_without_buffering_and_the_session_goes_on(server: Server) -> None:
    server.initialize()
    assert "submit_training" in server.tools(10)
    before_kib = server.kib("VmHWM")

    line = _big_line(BIG)
    writer = threading.Thread(target=server.send, args=(line,))
    writer.start()
    error = server.receive()  # answered as soon as the bound is passed, while the rest still streams in
    writer.join(timeout=120)
    assert not writer.is_alive()
    del line

    assert error["id"] is None
    assert error["error"]["code"] == -32600
    assert error["error"]["data"] == {"max_line_bytes": DEFAULT_MAX_LINE_BYTES}
    assert "x" * 64 not in json.dumps(error)

    assert "submit_training" in server.tools(11)  # the same session, still serving
    peak_kib = server.kib("VmHWM")
    assert peak_kib < 160 * 1024, f"peak RSS {peak_kib} KiB"
    assert peak_kib - before_kib < 24 * 1024, f"peak RSS grew {peak_kib - before_kib} KiB for one 50 MB line"
    assert server.close() == 0


def test_lines_that_are_no_message_get_errors_and_a_line_at_the_bound_is_served(tmp_path: Path) -> None:
    limit = 64 * 1024
    server = Server(tmp_path, {MAX_LINE_ENV: str(limit)})
    try:
        server.initialize()
        server.send(b"this is not json\n")
        assert server.receive()["error"]["code"] == -32700
        server.send(b'{"json": "but no JSON-RPC message"}\n')
        assert server.receive()["error"]["code"] == -32600
        server.send(b"\n   \n")  # blank lines are skipped
        server.send(_big_line(limit + 2))  # limit + 1 bytes before the newline
        too_big = server.receive()
        assert too_big["error"]["code"] == -32600 and too_big["error"]["data"] == {"max_line_bytes": limit}
        exact = _big_line(limit + 1)  # exactly `limit` bytes before the newline: served
        server.send(exact.replace(b'"id": 2', b'"id": 7'))
        assert server.receive()["id"] == 7
        assert server.tools(12)
        assert server.close() == 0
    finally:
        if server.proc.poll() is None:
            server.proc.kill()


@pytest.mark.parametrize("value", ["12", "abc", str(10**12), "-1"])
def test_a_bad_bound_refuses_to_start(tmp_path: Path, value: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    proc = subprocess.run([sys.executable, "-m", "ito_training_mcp"], input=b"", capture_output=True, timeout=60,
                          env={**base, MAX_LINE_ENV: value})
    assert proc.returncode == 2
    assert MAX_LINE_ENV in proc.stderr.decode()
    assert proc.stdout == b""


def test_the_bound_setting() -> None:
    assert max_line_bytes({}) == DEFAULT_MAX_LINE_BYTES == 4 * 1024 * 1024
    assert max_line_bytes({MAX_LINE_ENV: " 65536 "}) == 65536
    assert max_line_bytes({MAX_LINE_ENV: ""}) == DEFAULT_MAX_LINE_BYTES
    for bad in ("65535", "67108865", "1e6", "0x10000"):
        with pytest.raises(ValueError, match=MAX_LINE_ENV):
            max_line_bytes({MAX_LINE_ENV: bad})


def _split_whole(data: bytes, limit: int) -> list[bytes | object]:
    events: list[bytes | object] = []
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        if last and not line:
            break
        events.append(OVERSIZED if len(line) > limit else line)
    return events


@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8), st.data())
def test_the_splitter_gives_the_same_lines_however_the_input_is_chunked(lines: list[bytes], data: Any) -> None:
    limit = 16
    stream = b"\n".join(lines) + (b"\n" if lines else b"")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    splitter = LineSplitter(limit)
    events: list[bytes | object] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        events += splitter.feed(stream[start:end])
        assert len(splitter._buffer) <= limit
    events += splitter.finish()
    assert events == _split_whole(stream, limit)


def test_a_last_line_without_newline_still_counts_and_nothing_is_echoed() -> None:
    splitter = LineSplitter(8)
    assert splitter.feed(b"abc") == []
    assert splitter.finish() == [b"abc"]
    answer = parse_line(b'{"secret": "' + b"s3cr3t" * 3 + b'"')
    assert isinstance(answer, Answer)
    assert b"s3cr3t" not in answer.message.message.model_dump_json().encode()


async def test_the_transport_over_given_descriptors_serves_until_input_closes() -> None:
    """In-process, on pipes: oversized and valid lines interleave, and end of input ends the session."""
    limit = 64 * 1024
    client_to_server, server_in = os.pipe()[::-1]  # (write end for the client, read end for the server)
    server_out, client_from_server = os.pipe()[::-1]
    server = build_server(TrainingService({}))

    async def serve() -> None:
        async with bounded_stdio(limit, (server_in, server_out)) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    lines = [json.dumps(INITIALIZE).encode(), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
             .encode(), b"x" * (limit + 1), json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}).encode()]
    def read_answers(count: int) -> list[Any]:
        received = b""
        while received.count(b"\n") < count:
            chunk = os.read(client_from_server, 1 << 20)
            if not chunk:
                break
            received += chunk
        return [json.loads(line) for line in received.splitlines()]

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            await anyio.to_thread.run_sync(os.write, client_to_server, b"\n".join(lines) + b"\n")
            # Every answer first (a request still in flight at end of input may be dropped, as a
            # client that closes its end early would expect), then end of input.
            answers = await anyio.to_thread.run_sync(read_answers, 3, abandon_on_cancel=True)  # fail_after ends it
            os.close(client_to_server)  # end of input: the server must finish by itself
    assert [a.get("id") for a in answers] == [1, None, 3]
    assert answers[1]["error"]["code"] == -32600 and answers[2]["result"] == {}
    for fd in (server_in, server_out, client_from_server):
        os.close(fd)
