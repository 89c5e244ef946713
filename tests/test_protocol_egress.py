"""JSON-RPC errors leave through the egress: an unknown method is never echoed (it can carry the
configured key or raw bidi), in both protocol eras and on both transports; a line or body nested
deeper than any parser goes is a parse error, and the session goes on (stdio and streamable HTTP)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import types
from mcp.shared.exceptions import MCPError

from ito_training_mcp.doors.mcp.server import build_server
from ito_training_mcp.doors.mcp.stdio import PARSE_ERROR, Answer, parse_line
from ito_training_mcp.egress.protocol import (
    METHOD_NOT_FOUND,
    UNKNOWN_METHOD_MESSAGE,
    clean_data,
    clean_error_body,
    clean_message,
)
from ito_training_mcp.service import TrainingService

from .conftest import CANARY_GITHUB, CANARY_TOKEN, ClientFactory
from .test_stdio_line_bound import Server

# The shape of a hostile line: a tool call whose argument is 5,000 nested arrays (~10 KB).
DEEP_ARGUMENT = b"[" * 5000 + b"]" * 5000
DEEP = (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"training_logs","arguments":{"run_id":'
        + DEEP_ARGUMENT + b"}}}")
HOSTILE_METHODS = [CANARY_TOKEN + "\u202e", f"tools/{CANARY_GITHUB}", "x\x1b[2Kforged", "resources/\u2066list"]


@pytest.mark.parametrize("method", HOSTILE_METHODS)
async def test_an_unknown_method_is_answered_without_echo_in_both_eras(connect: ClientFactory, method: str) -> None:
    async with connect(env={"ITO_API_KEY": CANARY_TOKEN}) as client:
        with pytest.raises(MCPError) as raised:
            await client.session.send_request(types.Request(method=method, params=None), types.EmptyResult)
        error = raised.value
        assert error.code == METHOD_NOT_FOUND
        assert error.message == UNKNOWN_METHOD_MESSAGE and error.data is None
        wire = error.message + repr(error.data)
        for fragment in (CANARY_TOKEN, CANARY_GITHUB, "\u202e", "\x1b", "\u2066", "forged"):
            assert fragment not in wire
        assert [t.name for t in (await client.list_tools()).tools]  # the session goes on


async def test_the_middleware_is_what_hides_the_method() -> None:
    """Without `ProtocolErrorEgress` the SDK echoes the method as `data` (the failure this guards)."""
    server = build_server(TrainingService({}))
    server.middleware.pop(0)
    from mcp import Client

    async with Client(server) as client:
        with pytest.raises(MCPError) as raised:
            await client.session.send_request(types.Request(method=CANARY_TOKEN, params=None), types.EmptyResult)
    assert CANARY_TOKEN in repr(raised.value.data)


@settings(max_examples=150, deadline=None)
@given(st.integers(-32800, -32000), st.text(max_size=60), st.recursive(
    st.none() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12))
def test_property_a_cleaned_error_holds_nothing_unprintable_and_no_credential(code: int, message: str,
                                                                              data: Any) -> None:
    hostile = f"{message}\u202e{CANARY_GITHUB}\x1b"
    out = json.dumps([clean_message(code, hostile), clean_data(code, {"m": hostile, "d": data, hostile: 1})],
                     ensure_ascii=False)
    assert CANARY_GITHUB not in out and "\u202e" not in out and "\x1b" not in out
    if code == METHOD_NOT_FOUND:
        assert clean_data(code, data) is None


def test_an_error_body_from_the_http_transport_is_cleaned() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
        "code": -32602, "message": f"Validation error: 1 validation error for X input_value='{CANARY_GITHUB}'",
        "data": f"\u202e{CANARY_GITHUB}"}}).encode()
    cleaned = clean_error_body(body)
    assert CANARY_GITHUB.encode() not in cleaned and "\u202e".encode() not in cleaned
    assert json.loads(cleaned)["error"]["code"] == -32602
    result = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"x": "\u202e"}}).encode()
    assert clean_error_body(result) == result  # results are envelopes, cleaned where they are made
    assert clean_error_body(b"[" * 100_000) == b"[" * 100_000  # never raises


# ------------------------------------------------------------------------------------------ stdio


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 200_000), st.sampled_from([b"[", b'{"a":', b'{"jsonrpc":"2.0","id":1,"params":']))
def test_property_no_nesting_depth_makes_parse_line_raise(depth: int, opener: bytes) -> None:
    closer = b"]" if opener == b"[" else b"}"
    answer = parse_line(opener * depth + closer * depth)
    if depth > 64:  # far deeper than any message of this protocol
        assert isinstance(answer, Answer)
    if isinstance(answer, Answer):
        assert answer.message.message.error.code in (PARSE_ERROR, -32600)  # type: ignore[union-attr]


def test_a_deeply_nested_line_is_a_parse_error_and_the_session_goes_on(tmp_path: Path) -> None:
    server = Server(tmp_path, {"ITO_API_KEY": CANARY_TOKEN})
    try:
        server.initialize()
        server.send(DEEP + b"\n")
        error = server.receive()
        assert error["error"]["code"] == PARSE_ERROR and error["id"] is None, error
        assert "[[" not in json.dumps(error)
        server.send(b"[" * 500_000 + b"\n")  # half a mebibyte of it, unclosed
        assert server.receive()["error"]["code"] == PARSE_ERROR
        assert "submit_training" in server.tools(8)  # the same session, still serving
        server.send({"jsonrpc": "2.0", "id": 9, "method": CANARY_TOKEN + "\u202e", "params": {}})
        unknown = server.receive()
        assert unknown["error"]["code"] == METHOD_NOT_FOUND and "data" not in unknown["error"]
        assert CANARY_TOKEN not in json.dumps(unknown, ensure_ascii=False)
        assert server.close() == 0
        assert "Traceback" not in server.stderr_path.read_text(errors="replace")
    finally:
        if server.proc.poll() is None:
            server.proc.kill()


# ------------------------------------------------------------------------------- streamable HTTP


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    log = (tmp_path / "http.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "ito_training_mcp", "--transport", "streamable-http", "--port",
                             str(port)], stdout=log, stderr=subprocess.STDOUT,
                            env={**base, "ITO_API_KEY": CANARY_TOKEN})
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(300):  # until it accepts connections (bounded), or it exited
            assert proc.poll() is None, (tmp_path / "http.log").read_text(errors="replace")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                proc_wait(proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def proc_wait(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=0.1)


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _json_of(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        found: dict[str, Any] = json.loads(data[-1])
        return found
    body: dict[str, Any] = response.json()
    return body


def test_http_a_deep_body_is_a_parse_error_and_an_unknown_method_is_not_echoed(http_server: str) -> None:
    with httpx.Client(timeout=30) as http:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        answer = http.post(http_server, json=init, headers=HEADERS)
        assert answer.status_code == 200, answer.text
        headers = {**HEADERS, "MCP-Protocol-Version": "2025-11-25"}
        if "mcp-session-id" in answer.headers:
            headers["Mcp-Session-Id"] = answer.headers["mcp-session-id"]
        http.post(http_server, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)

        deep = http.post(http_server, content=DEEP, headers=headers)
        assert deep.status_code == 400 and deep.json()["error"]["code"] == PARSE_ERROR, deep.text
        assert "[[" not in deep.text

        unknown = http.post(http_server, json={"jsonrpc": "2.0", "id": 3, "method": CANARY_TOKEN + "\u202e"},
                            headers=headers)
        error = _json_of(unknown)["error"]
        assert error["code"] == METHOD_NOT_FOUND and "data" not in error
        assert CANARY_TOKEN not in unknown.text and "\u202e" not in unknown.text

        tools = _json_of(http.post(http_server, json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
                                   headers=headers))
        assert "submit_training" in [t["name"] for t in tools["result"]["tools"]]

