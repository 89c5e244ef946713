"""The API token never reaches a listener that has not proved it is the token's backend.

The attack: with a plain-http loopback ITO_API_URL, another user listens on the configured port (the
backend is elsewhere, stopped, or not started yet). It answers `/v1/capabilities` like the backend
(no credential needed) and waits for `Authorization: Bearer <token>`. Here the squatter is a real
process under another uid (root forks it and drops to `nobody`; run unprivileged, it keeps this
user's uid, which changes nothing in what it can do against the client). It goes further than
the report: it relays the origin-proof question to the real backend and hands back the real answer.
It captures every byte it receives; none of them is the token.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ito_training_mcp.backend.client import BackendClient, Exchange
from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.backend.models import Me
from ito_training_mcp.gates.config import BackendSettings
from ito_training_mcp.service import TrainingService

from .conftest import World

NOBODY = 65534
CHILD_BOUND_S = 20.0


def _http(status: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


def _squat(report: int, capabilities: bytes, relay_to: int | None) -> None:
    """The squatter's body, in the forked child: listen, capture, answer like the backend."""
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    os.write(report, struct.pack("!HI", listener.getsockname()[1], os.getuid()))
    while True:
        conn, _ = listener.accept()
        conn.settimeout(CHILD_BOUND_S)
        received = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in received:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                received += chunk
        os.write(report, struct.pack("!I", len(received)) + received)  # captured before anything is answered
        target = received.split(b" ", 2)[1] if received.count(b" ") >= 2 else b""
        if target.endswith(b"/v1/capabilities"):
            answer = _http("200 OK", capabilities)
        elif b"/v1/origin-proof" in target and relay_to is not None:
            with socket.create_connection(("127.0.0.1", relay_to), timeout=CHILD_BOUND_S) as upstream:
                upstream.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                answer = b""
                while chunk := upstream.recv(65536):
                    answer += chunk
        elif b"/v1/origin-proof" in target:
            answer = _http("404 Not Found", b'{"error": {"code": "not_found", "message": "no"}}')
        else:
            answer = _http("200 OK", b'{"account_id": "acct_squatter"}')
        with contextlib.suppress(OSError):
            conn.sendall(answer)
        conn.close()


@contextlib.contextmanager
def squatter(world: World, *, relay: bool) -> Iterator[tuple[int, int, list[bytes]]]:
    """(port, uid, captured requests) of a squatter process; `captured` fills when the block ends."""
    capabilities = httpx.get(world.backend.url + "/v1/capabilities", trust_env=False).content
    relay_to = int(world.backend.url.rsplit(":", 1)[1]) if relay else None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            os.close(read)
            _squat(write, capabilities, relay_to)
        finally:
            os._exit(0)
    os.close(write)
    captured: list[bytes] = []
    try:
        port, uid = struct.unpack("!HI", _read_exactly(read, 6))
        yield port, uid, captured
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        with os.fdopen(read, "rb") as stream:
            rest = stream.read()
        while rest:
            (size,) = struct.unpack("!I", rest[:4])
            captured.append(rest[4:4 + size])
            rest = rest[4 + size:]


def _read_exactly(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        ready, _, _ = select.select([fd], [], [], CHILD_BOUND_S)
        assert ready, "the squatter did not start"
        chunk = os.read(fd, size - len(data))
        assert chunk, "the squatter died"
        data += chunk
    return data


@pytest.mark.parametrize("relay", [True, False], ids=["relays-the-proof-to-the-real-backend", "cannot-prove"])
async def test_a_port_squatter_under_another_uid_never_receives_the_token(world: World, relay: bool) -> None:
    with squatter(world, relay=relay) as (port, uid, captured):
        if os.getuid() == 0:
            assert uid == NOBODY
        service = TrainingService({**world.env, "ITO_API_URL": f"http://127.0.0.1:{port}"})
        envelope = await service.check_training_availability(booking_id=world.booking)
    wire: dict[str, Any] = envelope.to_dict()
    assert wire["ok"] is False and wire["live_api_contacted"] is True
    assert wire["error"]["code"] == "BACKEND_INVALID_RESPONSE"
    assert wire["error"]["details"] == {"reason": "origin_unproven", "setting": "ITO_API_URL"}
    assert "ITO_API_URL" in wire["notice"]
    seen = b"".join(captured)
    assert b"/v1/capabilities" in seen and b"/v1/origin-proof" in seen  # it was asked, and answered
    assert world.token.encode() not in seen
    assert b"authorization" not in seen.lower() and b"bearer" not in seen.lower()


async def test_the_real_backend_proves_itself_and_then_gets_the_token(world: World) -> None:
    envelope = await TrainingService(world.env).check_training_availability(booking_id=world.booking)
    assert envelope.ok, envelope.to_json()
    paths = [r["path"] for r in world.op.requests() if r["path"].startswith("/v1/")]
    assert paths[:3] == ["/v1/capabilities", "/v1/origin-proof", "/v1/me"]  # the proof before the token


async def test_a_token_the_backend_does_not_know_is_not_sent(world: World) -> None:
    envelope = await TrainingService({**world.env, "ITO_API_KEY": "itorb_" + "x" * 43}).check_training_availability(
        booking_id=world.booking)
    assert envelope.error is not None and envelope.error.code.value == "AUTH_REJECTED"
    assert "/v1/me" not in [r["path"] for r in world.op.requests()]


async def test_over_https_no_proof_is_asked() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"account_id": "acct_1"})

    settings = BackendSettings.from_env({"ITO_API_URL": "https://ito.example"})
    assert settings is not None
    async with BackendClient(settings, Exchange(), transport=httpx.MockTransport(answer)) as api:
        api.authenticate(Credential("itorb_" + "y" * 43, "ITO_API_KEY"))
        await api.request("GET", "/v1/me", Me, gate=None)
    assert [r.url.path for r in seen] == ["/v1/me"]
    assert seen[0].headers["authorization"].startswith("Bearer ")


def test_tokens_of_an_older_database_get_their_handle(tmp_path: Any) -> None:
    """A database made before the origin proof: its tokens are found by handle once it is opened."""
    import sqlite3

    from ito_training_mcp.backend import origin_proof
    from ito_training_reference.store import Store, token_digest

    path = str(tmp_path / "old.sqlite3")
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE accounts (account_id TEXT PRIMARY KEY, budget_limit_usd TEXT NOT NULL, data_schemes TEXT NOT "
        "NULL, checkpoint_prefixes TEXT NOT NULL, created_at REAL NOT NULL);"
        "CREATE TABLE tokens (token_id TEXT PRIMARY KEY, token_sha256 TEXT NOT NULL UNIQUE, account_id TEXT NOT NULL "
        "REFERENCES accounts(account_id), scopes TEXT NOT NULL, expires_at REAL, revoked_at REAL, created_at REAL "
        "NOT NULL);"
        "INSERT INTO accounts VALUES ('acct_old', '100.00', '[]', '[]', 0);")
    old.execute("INSERT INTO tokens VALUES ('tok_old', ?, 'acct_old', 'training:read', NULL, NULL, 0)",
                (token_digest("itorb_old_token_value"),))
    old.commit()
    old.close()
    store = Store(path)
    try:
        handle = origin_proof.token_handle(origin_proof.token_key("itorb_old_token_value"))
        row = store.token_by_handle(handle)
        assert row is not None and row["token_id"] == "tok_old"
    finally:
        store.close()
