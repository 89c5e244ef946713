"""Signed operator requests: the operator token authenticates a request without ever travelling.

`OperatorClient` (and so `ito-training desk` and the test harness) does not send the operator
token. It sends `Authorization: ItoOperator-HMAC ts=..., nonce=..., sig=...`, an HMAC-SHA256 keyed
with the token over the method, the path and query, the address the client meant to reach, a
timestamp, a nonce and the SHA-256 of the body. So a program that happens to listen where the client
connects (the backend stopped, another port than the one meant) receives nothing it can use:

- not the token, which it would need to sign anything itself;
- not a request it can relay to the real backend: the backend checks the signature against its own
  listening address (the socket's, never the Host header), so a request signed for port 8765 is
  refused by a backend on any other port or address;
- not a request it can replay later: the timestamp must be within `WINDOW_S` and each nonce is
  accepted once.

A bare `Authorization: Bearer <operator token>` is still accepted, for scripts written against the
documented API; the product's own clients never send it.
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
WINDOW_S = 300
MAX_NONCES = 65536
_HEADER = re.compile(r"^ItoOperator-HMAC ts=([0-9]{1,12}), nonce=([0-9a-f]{32}), sig=([0-9a-f]{64})$")


def authority(host: str, port: int) -> str:
    """The address a signature names: the host as an IP address where it is one (`localhost` stays
    `localhost`), lower case, and the port."""
    host = host.strip("[]").lower()
    with contextlib.suppress(ValueError):
        host = str(ipaddress.ip_address(host))
    return f"{host}|{port}"


def _message(method: str, target: str, where: str, ts: str, nonce: str, body: bytes) -> bytes:
    return "\n".join(("ito-operator-v1", method.upper(), target, where, ts, nonce,
                      hashlib.sha256(body).hexdigest())).encode()


def sign(token: str, method: str, target: str, where: str, body: bytes, *, now: float | None = None) -> str:
    """The Authorization header value for one request. `target`: the path with its query string, as
    sent; `where`: `authority(host, port)` of the address the client connects to."""
    ts = str(int(time.time() if now is None else now))
    nonce = secrets.token_hex(16)
    sig = hmac.new(token.encode(), _message(method, target, where, ts, nonce, body), hashlib.sha256).hexdigest()
    return f"{SCHEME} ts={ts}, nonce={nonce}, sig={sig}"


class Verifier:
    """Checks signed requests for one backend: signature, freshness, and each nonce once."""

    def __init__(self, token: str, *, clock: Callable[[], float] = time.time) -> None:
        self._key = token.encode()
        self._clock = clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def verify(self, header: str, method: str, target: str, server: tuple[str, int] | None, body: bytes) -> bool:
        match = _HEADER.fullmatch(header)
        if match is None or server is None:
            return False
        ts, nonce, sig = match.groups()
        now = self._clock()
        if abs(now - int(ts)) > WINDOW_S:
            return False
        host, port = server
        names = {authority(host, port)}
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(host.strip("[]")).is_loopback:
                names.add(authority("localhost", port))
        if not any(hmac.compare_digest(sig, hmac.new(self._key, _message(method, target, where, ts, nonce, body),
                                                     hashlib.sha256).hexdigest()) for where in sorted(names)):
            return False
        with self._lock:  # a nonce is good once; forgotten only after its timestamp left the window
            while self._seen and next(iter(self._seen.values())) < now - 2 * WINDOW_S:
                self._seen.popitem(last=False)
            if nonce in self._seen or len(self._seen) >= MAX_NONCES:  # full of fresh nonces: refuse
                return False
            self._seen[nonce] = now
        return True
