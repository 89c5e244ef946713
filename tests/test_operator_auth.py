"""The operator token never travels: `ito-training desk` and `OperatorClient` sign each request
(operator_auth.py), bound to the address they meant to reach, a timestamp and a single-use nonce.

The finding: with `--url` pointing at the wrong loopback port (the backend on another port, or not
started yet), the CLI sent `Authorization: Bearer <operator token>` to whatever listened there, which
could then confirm a pending request at the real backend with no person involved.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import httpx
import pytest

from ito_training_mcp.reference_backend import ReferenceBackend
from ito_training_mcp.reference_backend.desk_cli import run
from ito_training_mcp.reference_backend.operator_auth import WINDOW_S, Verifier, authority, sign

CANNED = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n"
          b"Connection: close\r\n\r\n{\"requests\": []}")


class Squatter:
    """A loopback listener that records every byte it is sent and answers a canned empty list."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.got_one = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(rest) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    rest += chunk
                self.received.append(head + b"\r\n\r\n" + rest)
                conn.sendall(CANNED)
                self.got_one.set()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def rb() -> Iterator[ReferenceBackend]:
    with ReferenceBackend() as backend:
        yield backend


@pytest.fixture
def squatter() -> Iterator[Squatter]:
    s = Squatter()
    yield s
    s.close()


def _token_file(rb: ReferenceBackend, tmp_path: Path) -> str:
    path = tmp_path / "backend.sqlite3.operator-token"
    path.write_text(rb.operator_token + "\n")
    path.chmod(0o600)
    return str(path)


def _relay(raw: bytes, port: int) -> int:
    """Send recorded request bytes, unchanged, to another port; the status line's code."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(raw)
        answer = b""
        while b"\r\n" not in answer:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_the_desk_cli_sends_no_token_to_a_listener_on_the_wrong_port_and_what_it_sends_is_useless(
    rb: ReferenceBackend, squatter: Squatter, tmp_path: Path
) -> None:
    token_file = _token_file(rb, tmp_path)
    stdout, stderr = StringIO(), StringIO()
    code = run(["requests", "--operator-token-file", token_file], stdout=stdout, stderr=stderr,
               env={"ITO_DESK_URL": f"http://127.0.0.1:{squatter.port}"})
    assert squatter.got_one.wait(10), stderr.getvalue()
    assert code == 0, stdout.getvalue() + stderr.getvalue()
    raw = squatter.received[0]
    assert rb.operator_token.encode() not in raw
    assert b"bearer" not in raw.lower() and b"ItoOperator-HMAC" in raw
    # Relayed to the real backend, the signed request is refused: it names the squatter's port.
    real_port = httpx.URL(rb.url).port
    assert real_port is not None
    assert _relay(raw, real_port) == 404


def test_a_signed_request_is_good_once_within_its_window_and_only_for_its_address(rb: ReferenceBackend) -> None:
    url = httpx.URL(rb.url)
    assert url.port is not None
    here = authority(url.host, url.port)
    target = "/operator/confirmation-requests"
    with httpx.Client(base_url=rb.url, trust_env=False) as http:
        header = sign(rb.operator_token, "GET", target, here, b"")
        assert http.get(target, headers={"Authorization": header}).status_code == 200
        assert http.get(target, headers={"Authorization": header}).status_code == 404  # the nonce is spent
        stale = sign(rb.operator_token, "GET", target, here, b"", now=time.time() - WINDOW_S - 5)
        assert http.get(target, headers={"Authorization": stale}).status_code == 404
        elsewhere = sign(rb.operator_token, "GET", target, authority(url.host, url.port + 1), b"")
        assert http.get(target, headers={"Authorization": elsewhere}).status_code == 404
        other_path = sign(rb.operator_token, "GET", "/operator/accounts", here, b"")
        assert http.get(target, headers={"Authorization": other_path}).status_code == 404
        wrong_key = sign("x" * 43, "GET", target, here, b"")
        assert http.get(target, headers={"Authorization": wrong_key}).status_code == 404
        # A body is bound too: the signature of one body does not carry another.
        body = b'{"account_id": "signed-acct"}'
        signed = sign(rb.operator_token, "POST", "/operator/accounts", here, body)
        refused = http.post("/operator/accounts", content=b'{"account_id": "other-acct"}',
                            headers={"Authorization": signed, "Content-Type": "application/json"})
        assert refused.status_code == 404
        signed = sign(rb.operator_token, "POST", "/operator/accounts", here, body)
        accepted = http.post("/operator/accounts", content=body,
                             headers={"Authorization": signed, "Content-Type": "application/json"})
        assert accepted.status_code in (200, 201), accepted.text


def test_the_verifier_refuses_malformed_headers_and_localhost_names_a_loopback_listener() -> None:
    clock = [1_000_000.0]
    verifier = Verifier("t" * 43, clock=lambda: clock[0])
    good = sign("t" * 43, "GET", "/operator/x", authority("localhost", 8765), b"", now=clock[0])
    assert verifier.verify(good, "GET", "/operator/x", ("127.0.0.1", 8765), b"")
    for header in ("", "Bearer " + "t" * 43, good.replace("sig=", "sig=0"), good + " ", good.upper()):
        assert not verifier.verify(header, "GET", "/operator/x", ("127.0.0.1", 8765), b"")
    assert not verifier.verify(sign("t" * 43, "GET", "/operator/x", authority("127.0.0.1", 8765), b"",
                                    now=clock[0]), "GET", "/operator/x", None, b"")
