"""Stalled connections are closed within the deadlines, over real sockets.

Each test synchronises on the server closing the socket (recv returns b"" or the connection is
reset); the only clock is a generous socket timeout that bounds the test. The backends here use
short deadlines so the suite stays quick.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from ito_training_reference import ReferenceBackend
from ito_training_reference.serving import guarded_protocol

TEST_BOUND_S = 30.0  # far above every deadline below: only a hang fails on it


@pytest.fixture(scope="module")
def rb() -> Iterator[ReferenceBackend]:
    # The bare operator bearer (allowed here) reaches a route that reads its body with one header line.
    with ReferenceBackend(header_timeout_s=0.5, body_timeout_s=0.5, keep_alive_s=1,
                          allow_operator_bearer=True) as backend:
        yield backend


def connect(rb: ReferenceBackend) -> socket.socket:
    host, port = rb.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=TEST_BOUND_S)
    sock.settimeout(TEST_BOUND_S)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; a reset counts as closed."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def test_half_a_request_line_is_closed(rb: ReferenceBackend) -> None:
    with connect(rb) as sock:
        sock.sendall(b"GET /v1/capabil")
        assert read_until_closed(sock) == b""  # nothing to answer: just closed


def test_a_silent_connection_is_closed(rb: ReferenceBackend) -> None:
    with connect(rb) as sock:
        assert read_until_closed(sock) == b""


def test_headers_without_the_end_are_closed(rb: ReferenceBackend) -> None:
    with connect(rb) as sock:
        sock.sendall(b"GET /v1/capabilities HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        assert read_until_closed(sock) == b""


def test_a_stalled_body_gets_408_and_is_closed(rb: ReferenceBackend) -> None:
    _, token = rb.op.token(rb.op.account())  # authenticated, so the handler is reading the body
    with connect(rb) as sock:
        sock.sendall(b"POST /v1/training-plans HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode()
                     + b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"booking_id\"")
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b"connection: close" in answer.lower() and b'"request_timeout"' in answer
    assert rb.query("SELECT COUNT(*) AS n FROM plans")[0]["n"] == 0


def test_a_dripped_body_does_not_extend_the_deadline(rb: ReferenceBackend) -> None:
    with connect(rb) as sock:
        sock.sendall(b"POST /operator/accounts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     + rb.operator_token.encode() + b"\r\nContent-Length: 100000\r\n\r\n")
        stop = threading.Event()

        def drip() -> None:  # one byte every 20 ms: progress, but never the whole body in time
            try:
                while not stop.wait(0.02):
                    sock.send(b" ")
            except OSError:
                return

        dripper = threading.Thread(target=drip)
        dripper.start()
        try:
            answer = read_until_closed(sock)
        finally:
            stop.set()
            dripper.join(TEST_BOUND_S)
    # The 408 may be lost to a reset if a drip byte lands as the server closes; closing is the property.
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408 ")


def test_a_body_the_application_never_reads_still_has_a_deadline(rb: ReferenceBackend) -> None:
    with connect(rb) as sock:
        sock.sendall(b"GET /v1/capabilities HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\nabc")
        answer = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 200 ")  # answered, then closed when the rest never came


def test_many_stalled_connections_do_not_block_a_normal_request() -> None:
    with ReferenceBackend(header_timeout_s=2.0, body_timeout_s=2.0) as rb:
        stalled = []
        try:
            for i in range(500):
                sock = connect(rb)
                stalled.append(sock)
                sock.sendall(b"GET /v1/me HTTP/1.1\r\nHost: x\r\n" if i % 2 else b"POST /v1/me HTTP/1.1\r\n"
                             b"Content-Length: 10\r\n\r\n")
            with httpx.Client(base_url=rb.url, trust_env=False, timeout=TEST_BOUND_S) as http:
                assert http.get("/v1/capabilities").status_code == 200
            # And every stalled one is closed by the server, within the bound.
            pending = set(stalled)
            while pending:
                readable, _, _ = select.select(list(pending), [], [], TEST_BOUND_S)
                assert readable, f"{len(pending)} stalled connection(s) still open"
                for sock in readable:
                    read_until_closed(sock)
                    pending.discard(sock)
        finally:
            for sock in stalled:
                sock.close()


def test_keep_alive_connections_still_work_within_the_deadlines(rb: ReferenceBackend) -> None:
    with httpx.Client(base_url=rb.url, trust_env=False, timeout=TEST_BOUND_S) as http:
        for _ in range(5):  # one connection, reused: each new request gets a fresh header deadline
            assert http.get("/v1/capabilities").status_code == 200
        big = http.post("/v1/training-plans", content=b"x" * 1_000_000, headers={"Authorization": "Bearer x"})
        assert big.status_code == 401


@pytest.mark.parametrize("bad", [0.0, -1.0, 3601.0])
def test_deadlines_are_bounded(bad: float) -> None:
    with pytest.raises(ValueError, match="timeout"):
        guarded_protocol(header_timeout_s=bad)
