"""Signed operator requests: the operator token authenticates a request without ever travelling.

`OperatorClient` (and so `ito-training desk` and the test harness) does not send the operator token.
For each request it first asks the backend for a nonce (`GET /operator/nonce`, which needs nothing
and gives nothing away), then sends `Authorization: ItoOperator-HMAC nonce=..., sig=...`: an
HMAC-SHA256 keyed with the token over the method, the path and query, the literal IP address and
port the client connects to (a host name is resolved first, by the client), the nonce and the
SHA-256 of the body. A program that happens to listen where the client connects (the backend on
another port or address, or not started yet) receives nothing it can use:

- not the token, which it would need to sign anything itself;
- not a request it can relay: the backend checks the signature against the local address of the
  connection it arrived on (the socket's, never the Host header), so a request signed for
  127.0.0.1:8765 is refused on any other port or address, `::1` included;
- not a request it can replay later: a nonce is good once, for `NONCE_TTL_S`, and only in the backend
  process that issued it, so a request captured while the backend was down is refused after it
  starts, even on the same address;
- no way to pose as the backend: the answer to a signed request carries an HMAC over the nonce, the
  status and the body (`RESPONSE_HEADER`), and the client refuses an answer without a good one.

A bare `Authorization: Bearer <operator token>` is refused like any unknown request, unless the
backend was started with `--allow-operator-bearer` (for scripts written against the documented
API); then each use is accepted and logged as a warning. The product's own clients never send it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

SCHEME = "ItoOperator-HMAC"
NONCE_PATH = "/operator/nonce"
NONCE_TTL_S = 60.0
MAX_OUTSTANDING = 4096  # nonces issued and not yet used; the oldest is dropped first (never a lockout)
_HEADER = re.compile(r"^ItoOperator-HMAC nonce=([0-9a-f]{32}), sig=([0-9a-f]{64})$")


def authority(host: str, port: int) -> str:
    """The address a signature names: a literal IP address in its canonical form (an IPv4-mapped IPv6
    address as its IPv4 address, as a dual-stack socket reports it), and the port."""
    ip = ipaddress.ip_address(host.strip("[]").split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return f"{ip}|{port}"


RESPONSE_HEADER = "x-ito-operator-signature"


def response_signature(token: str, nonce: str, status: int, body: bytes) -> str:
    """What the backend puts in `RESPONSE_HEADER` of the answer to a signed request, and the client
    checks: so a program posing as the backend cannot make the client print its own answer."""
    message = "\n".join(("ito-operator-response-v1", nonce, str(status), hashlib.sha256(body).hexdigest()))
    return hmac.new(token.encode(), message.encode(), hashlib.sha256).hexdigest()


def _message(method: str, target: str, where: str, nonce: str, body: bytes) -> bytes:
    return "\n".join(("ito-operator-v1", method.upper(), target, where, nonce,
                      hashlib.sha256(body).hexdigest())).encode()


def sign(token: str, method: str, target: str, where: str, nonce: str, body: bytes) -> str:
    """The Authorization header value for one request. `target`: the path with its query string, as
    sent; `where`: `authority(ip, port)` of the address the client connects to; `nonce`: from the
    backend's `GET /operator/nonce`."""
    sig = hmac.new(token.encode(), _message(method, target, where, nonce, body), hashlib.sha256).hexdigest()
    return f"{SCHEME} nonce={nonce}, sig={sig}"


def parse(header: str) -> tuple[str, str] | None:
    """(nonce, signature) of a well-formed signed header, else None."""
    match = _HEADER.fullmatch(header)
    return None if match is None else (match.group(1), match.group(2))


class Verifier:
    """Issues nonces and checks signed requests, for one backend process."""

    def __init__(self, token: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._key = token.encode()
        self._clock = clock
        self._issued: OrderedDict[str, float] = OrderedDict()  # nonce -> when it expires
        self._lock = threading.Lock()

    def _forget_expired(self, now: float) -> None:
        while self._issued and next(iter(self._issued.values())) <= now:
            self._issued.popitem(last=False)

    def issue(self) -> str:
        nonce = secrets.token_hex(16)
        with self._lock:
            now = self._clock()
            self._forget_expired(now)
            while len(self._issued) >= MAX_OUTSTANDING:
                self._issued.popitem(last=False)
            self._issued[nonce] = now + NONCE_TTL_S
        return nonce

    def take(self, nonce: str) -> bool:
        """Use up this nonce: was it issued here, unused and unexpired? Looked at before the body is read,
        so a made-up header costs the backend nothing, and a nonce is gone whatever follows."""
        with self._lock:
            expires = self._issued.pop(nonce, None)
            return expires is not None and expires > self._clock()

    def verify(self, nonce: str, sig: str, method: str, target: str, server: tuple[str, int] | None,
               body: bytes) -> bool:
        """The signature over this request as it arrived on `server` (the connection's local address),
        for a nonce already taken."""
        if server is None:
            return False
        where = None
        with contextlib.suppress(ValueError):
            where = authority(server[0], server[1])
        if where is None:
            return False
        expected = hmac.new(self._key, _message(method, target, where, nonce, body), hashlib.sha256).hexdigest()
        return hmac.compare_digest(sig, expected)

    def sign_response(self, nonce: str, status: int, body: bytes) -> str:
        return response_signature(self._key.decode(), nonce, status, body)
