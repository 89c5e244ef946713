"""The MCP server over streamable HTTP under attack, as a real subprocess on real sockets.

- a flood of half-sent requests (slowloris) neither exhausts the server's file descriptors nor locks
  a new client out, and the error log stays small;
- the DNS-rebinding check holds for every loopback spelling the server accepts;
- the tools read manifests only under the configured roots (no file oracle), and a refusal never
  names a key of a document that is not a manifest.
"""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from .test_streamable_http import server_env, stop, wait_until_listening

FLOOD = 1100
SERVER_FILE_LIMIT = 1024  # a common default soft limit: without a cap, FLOOD connections exhaust it
CLIENT_BOUND_S = 20.0  # only a hang fails on it
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "guard-test", "version": "1"}}}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _limit_files() -> None:  # runs in the server's child process, before exec
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (SERVER_FILE_LIMIT, hard))


@contextmanager
def mcp_server(tmp_path: Path, host: str, env: dict[str, str] | None = None, *,
               limit_files: bool = False) -> Iterator[tuple[str, int, Path]]:
    """`ito-training-mcp --transport streamable-http --host HOST` on a free port: (dial address, port, stderr)."""
    dial = "::1" if ":" in host else host
    port = free_port(dial)
    stderr_path = tmp_path / f"server-{port}.log"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ito_training_mcp", "--transport", "streamable-http", "--host", host,
             "--port", str(port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=server_env(env or {}),
            preexec_fn=_limit_files if limit_files else None,
        )
    try:
        wait_until_listening_on(proc, dial, port, stderr_path)
        yield dial, port, stderr_path
    finally:
        stop(proc)


def wait_until_listening_on(proc: subprocess.Popen[bytes], host: str, port: int, stderr_path: Path) -> None:
    if host == "127.0.0.1":
        wait_until_listening(proc, port, stderr_path)
        return
    import time

    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, stderr_path.read_text(errors="replace")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            assert time.monotonic() < deadline, "the server did not listen"
            time.sleep(0.05)


def initialize(dial: str, port: int, **headers: str) -> httpx.Response:
    with httpx.Client(timeout=CLIENT_BOUND_S, trust_env=False) as client:
        return client.post(f"http://{_bracketed(dial)}:{port}/mcp", json=INITIALIZE,
                           headers={**MCP_HEADERS, **headers})


# ---------------------------------------------------------------------- slowloris


def test_a_new_client_is_served_while_1100_half_open_connections_are_held(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = FLOOD + 256
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"this machine allows {hard} open files per process; the test holds {FLOOD} connections")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    with mcp_server(tmp_path, "127.0.0.1", limit_files=True) as (dial, port, stderr_path), ExitStack() as held:
        for _ in range(FLOOD):
            sock = held.enter_context(socket.create_connection((dial, port), timeout=CLIENT_BOUND_S))
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")  # and never the rest
        served = initialize(dial, port)  # while every one of them is still open on this side
        assert served.status_code == 200, served.text
        assert "serverInfo" in served.text
        log = stderr_path.read_bytes()
    assert len(log) < 64 * 1024, f"the error log grew to {len(log)} bytes"


# ---------------------------------------------------------------------- DNS rebinding


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "0:0:0:0:0:0:0:1", "localhost"])
def test_dns_rebinding_is_refused_on_every_loopback_spelling(tmp_path: Path, host: str) -> None:
    with mcp_server(tmp_path, host) as (dial, port, _):
        assert initialize(dial, port, host="evil.example").status_code == 421
        assert initialize(dial, port, host=f"evil.example:{port}").status_code == 421
        assert initialize(dial, port, origin=f"http://evil.example:{port}").status_code == 403
        # The server's own names are served: as --host spells it, canonically, and localhost.
        own = {"0:0:0:0:0:0:0:1": ["[::1]", "[0:0:0:0:0:0:0:1]"], "localhost": ["localhost"]}.get(host, [host])
        for name in [*own, "localhost"]:
            answer = initialize(dial, port, host=f"{name}:{port}", origin=f"http://{name}:{port}")
            assert answer.status_code == 200, (name, answer.status_code)


# ---------------------------------------------------------------------- the file oracle


def _user_file(directory: Path, name: str, content: dict[str, Any]) -> str:
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / name
    path.write_text(json.dumps(content))
    path.chmod(0o600)
    return str(path)


async def _digest(dial: str, port: int, path: str) -> dict[str, Any]:
    with anyio.fail_after(CLIENT_BOUND_S):
        async with Client(f"http://{_bracketed(dial)}:{port}/mcp", mode="legacy") as client:
            result = await client.call_tool("digest_manifest", {"manifest_path": path})
    envelope = result.structured_content
    assert isinstance(envelope, dict)
    return envelope


NOT_A_MANIFEST = {"db_password_for_prod": "x", "internal_project_codename": {"aws_secret_access_key": "y"},
                  "unreleased_feature_flag": True}


async def test_without_roots_no_file_is_read_over_http(tmp_path: Path) -> None:
    secret_file = _user_file(tmp_path / "home", "settings.json", NOT_A_MANIFEST)
    with mcp_server(tmp_path, "127.0.0.1") as (dial, port, _):
        for path in (secret_file, str(tmp_path / "home" / "absent.json")):
            envelope = await _digest(dial, port, path)
            assert envelope["ok"] is False and envelope["error"]["code"] == "CONFIG_INVALID"
            assert envelope["error"]["details"]["setting"] == "ITO_TRAINING_MANIFEST_ROOTS"
            assert "ITO_TRAINING_MANIFEST_ROOTS" in envelope["notice"]
        # exists or not: the same answer
        assert (await _digest(dial, port, secret_file))["error"] == (await _digest(dial, port, path))["error"]


async def test_under_roots_no_key_of_a_document_that_is_not_a_manifest_is_named(tmp_path: Path) -> None:
    roots = tmp_path / "manifests"
    inside = _user_file(roots, "not-a-manifest.json", NOT_A_MANIFEST)
    outside = _user_file(tmp_path / "home", "settings.json", NOT_A_MANIFEST)
    plain = _user_file(roots, "plain.json", {"unreleased_feature_flag": True, "internal_project_codename": "z"})
    with mcp_server(tmp_path, "127.0.0.1", {"ITO_TRAINING_MANIFEST_ROOTS": str(roots)}) as (dial, port, _):
        refused = await _digest(dial, port, outside)
        assert refused["error"]["code"] == "MANIFEST_PATH_INVALID"
        for path in (inside, plain):
            envelope = await _digest(dial, port, path)
            assert envelope["ok"] is False and envelope["error"]["details"]["not_a_manifest"] is True
            wire = json.dumps(envelope)
            for key in ("db_password_for_prod", "internal_project_codename", "aws_secret_access_key",
                        "unreleased_feature_flag"):
                assert key not in wire, (path, key)
        assert (await _digest(dial, port, inside))["error"]["code"] == "MANIFEST_SECRET"
        assert (await _digest(dial, port, plain))["error"]["code"] == "MANIFEST_SCHEMA"
