"""The operator token never travels: `ito-training desk` and `OperatorClient` sign each request
(operator_auth.py), bound to the literal address they connect to and a nonce the backend issued.

The finding: with `--url` pointing at the wrong loopback port (the backend on another port, or not
started yet), the CLI sent `Authorization: Bearer <operator token>` to whatever listened there, which
could then confirm a pending request at the real backend with no person involved.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import httpx
import pytest

from ito_training_reference import ReferenceBackend
from ito_training_reference.desk_cli import run
from ito_training_reference.operator_auth import (
    MAX_OUTSTANDING,
    NONCE_TTL_S,
    Verifier,
    authority,
    parse,
    sign,
)
from ito_training_reference.operator_client import OperatorClient

CANNED = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n"
          b"Connection: close\r\n\r\n{\"requests\": []}")
MADE_UP_NONCE = b'{"nonce": "0123456789abcdef0123456789abcdef"}'
NONCE_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(MADE_UP_NONCE)).encode() + b"\r\nConnection: close\r\n\r\n" + MADE_UP_NONCE)


class Squatter:
    """A loopback listener that records every byte it is sent and answers as a backend would: a made-up
    nonce, then an empty list."""

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
                if head.startswith(b"GET /operator/nonce "):
                    conn.sendall(NONCE_ANSWER)
                    continue
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
    # Its answer is not signed by the backend that holds the token: refused, and not printed.
    assert code == 1 and "(none)" not in stdout.getvalue(), stdout.getvalue() + stderr.getvalue()
    assert "unsigned_response" in stdout.getvalue() + stderr.getvalue()
    raw = squatter.received[0]
    assert rb.operator_token.encode() not in raw
    assert b"bearer" not in raw.lower() and b"ItoOperator-HMAC" in raw
    # Relayed to the real backend, the signed request is refused: it names the squatter's port.
    real_port = httpx.URL(rb.url).port
    assert real_port is not None
    assert _relay(raw, real_port) == 404


def _nonce(http: httpx.Client) -> str:
    answer = http.get("/operator/nonce")
    assert answer.status_code == 200
    return str(answer.json()["nonce"])


def test_a_signed_request_is_good_once_and_only_for_its_address_path_body_and_key(rb: ReferenceBackend) -> None:
    url = httpx.URL(rb.url)
    assert url.port is not None
    here = authority(url.host, url.port)
    target = "/operator/confirmation-requests"
    with httpx.Client(base_url=rb.url, trust_env=False) as http:
        nonce = _nonce(http)
        header = sign(rb.operator_token, "GET", target, here, nonce, b"")
        assert http.get(target, headers={"Authorization": header}).status_code == 200
        assert http.get(target, headers={"Authorization": header}).status_code == 404  # the nonce is spent
        made_up = sign(rb.operator_token, "GET", target, here, "ab" * 16, b"")  # never issued (a restart)
        assert http.get(target, headers={"Authorization": made_up}).status_code == 404
        for where in (authority(url.host, url.port + 1), authority("::1", url.port), authority("127.0.0.2", url.port)):
            elsewhere = sign(rb.operator_token, "GET", target, where, _nonce(http), b"")
            assert http.get(target, headers={"Authorization": elsewhere}).status_code == 404
        other_path = sign(rb.operator_token, "GET", "/operator/accounts", here, _nonce(http), b"")
        assert http.get(target, headers={"Authorization": other_path}).status_code == 404
        wrong_key = sign("x" * 43, "GET", target, here, _nonce(http), b"")
        assert http.get(target, headers={"Authorization": wrong_key}).status_code == 404
        # A body is bound too: the signature of one body does not carry another.
        body = b'{"account_id": "signed-acct"}'
        signed = sign(rb.operator_token, "POST", "/operator/accounts", here, _nonce(http), body)
        refused = http.post("/operator/accounts", content=b'{"account_id": "other-acct"}',
                            headers={"Authorization": signed, "Content-Type": "application/json"})
        assert refused.status_code == 404
        signed = sign(rb.operator_token, "POST", "/operator/accounts", here, _nonce(http), body)
        accepted = http.post("/operator/accounts", content=body,
                             headers={"Authorization": signed, "Content-Type": "application/json"})
        assert accepted.status_code in (200, 201), accepted.text


def test_a_made_up_signed_header_is_refused_before_any_body_is_read(rb: ReferenceBackend) -> None:
    """The guard looks at the nonce before reading the body: a request that announces a mebibyte and
    sends none of it is answered at once."""
    url = httpx.URL(rb.url)
    assert url.port is not None
    header = f"ItoOperator-HMAC nonce={'ab' * 16}, sig={'0' * 64}"
    with socket.create_connection(("127.0.0.1", url.port), timeout=10) as conn:
        conn.sendall(f"POST /operator/accounts HTTP/1.1\r\nHost: x\r\nAuthorization: {header}\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {1 << 20}\r\n\r\n".encode())
        answer = conn.recv(65536)
    assert answer.startswith(b"HTTP/1.1 404")


def test_the_client_signs_the_literal_address_it_connects_to(rb: ReferenceBackend) -> None:
    port = httpx.URL(rb.url).port
    with OperatorClient(f"http://localhost:{port}", rb.operator_token) as op:
        assert op._http.base_url.host in ("127.0.0.1", "::1")
        if op._http.base_url.host == "127.0.0.1":
            assert op.runs() is not None  # the backend listens on 127.0.0.1: signed for it, accepted


def test_nonces_are_single_use_expire_and_never_lock_out() -> None:
    clock = [100.0]
    verifier = Verifier("t" * 43, clock=lambda: clock[0])
    here = ("127.0.0.1", 8765)

    def checked(nonce: str, server: tuple[str, int] = here) -> bool:
        parsed = parse(sign("t" * 43, "GET", "/operator/x", authority(*here), nonce, b""))
        assert parsed is not None
        return verifier.take(parsed[0]) and verifier.verify(*parsed, "GET", "/operator/x", server, b"")

    first = verifier.issue()
    assert checked(first)
    assert not checked(first)  # used up
    late = verifier.issue()
    clock[0] += NONCE_TTL_S + 1
    assert not checked(late)
    flood = [verifier.issue() for _ in range(MAX_OUTSTANDING + 10)]  # the oldest are dropped, the newest work
    assert not checked(flood[0])
    assert checked(flood[-1])
    assert checked(verifier.issue(), ("::ffff:127.0.0.1", 8765))  # a dual-stack socket's form of 127.0.0.1
    assert not checked(verifier.issue(), ("::1", 8765))
    for bad in ("", "Bearer " + "t" * 43, f"ItoOperator-HMAC nonce={flood[-2]}, sig={'0' * 63}"):
        assert parse(bad) is None


def test_a_nonce_is_used_up_even_when_the_announced_body_is_too_large(rb: ReferenceBackend) -> None:
    url = httpx.URL(rb.url)
    assert url.port is not None
    here = authority(url.host, url.port)
    with httpx.Client(base_url=rb.url, trust_env=False) as http:
        nonce = _nonce(http)
        big = b"{" + b" " * (2 << 20) + b"}"
        header = sign(rb.operator_token, "POST", "/operator/accounts", here, nonce, big)
        assert http.post("/operator/accounts", content=big, headers={"Authorization": header}).status_code == 404
        small = b"{}"
        again = sign(rb.operator_token, "POST", "/operator/accounts", here, nonce, small)
        assert http.post("/operator/accounts", content=small, headers={"Authorization": again}).status_code == 404


def test_answers_to_signed_requests_are_signed_and_the_client_checks(rb: ReferenceBackend) -> None:
    from ito_training_reference.operator_auth import RESPONSE_HEADER, response_signature

    url = httpx.URL(rb.url)
    assert url.port is not None
    with httpx.Client(base_url=rb.url, trust_env=False) as http:
        nonce = _nonce(http)
        header = sign(rb.operator_token, "GET", "/operator/runs", authority(url.host, url.port), nonce, b"")
        answer = http.get("/operator/runs", headers={"Authorization": header})
        assert answer.status_code == 200
        assert answer.headers[RESPONSE_HEADER] == response_signature(rb.operator_token, nonce, 200, answer.content)


def test_localhost_falls_back_to_the_loopback_address_that_answers(rb: ReferenceBackend,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`localhost` resolving to ::1 first (common) must not break a backend on 127.0.0.1."""
    port = httpx.URL(rb.url).port
    assert port is not None
    real = socket.getaddrinfo

    def v6_first(host: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        if host == "localhost":
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)),
                    (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return list(real(host, *args, **kwargs))  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", v6_first)
    with OperatorClient(f"http://localhost:{port}", rb.operator_token) as op:
        assert op._http.base_url.host == "127.0.0.1"
        assert isinstance(op.runs(), list)
