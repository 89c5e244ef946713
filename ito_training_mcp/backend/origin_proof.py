"""The origin proof: over plain http, the listener proves it is the backend the API token belongs
to before the token is sent (an extension of the backend API; docs/contract-notes.md).

Plain http is allowed only to loopback, where any local user can listen on a port the backend is
not using (it stopped, or has not started yet): TLS would authenticate the server, plain http does
not. So, before the first request that carries the token, the client sends a fresh random nonce
and a handle of the token to `GET /v1/origin-proof` (no credential), and the backend answers with
an HMAC, keyed with the token's SHA-256 (what a backend keeps instead of the token), over the
nonce and the address and port of the socket the request arrived on (the socket's, never a
header). The client computes the same over the address it dialled and compares:

- a listener that does not know the token cannot answer (the handle is a one-way function of the
  token's digest and the nonce is fresh, so no earlier answer fits);
- a listener that relays the question to the real backend gets an answer for the backend's own
  address, not for the one the client dialled, so the relay fails too;
- the token itself never travels until the proof has passed, once per tool call (`BackendClient`).

What the listener learns is the handle, from which the token cannot be computed; like any value
derived from a token, it would let someone check guesses of a low-entropy token offline, which API
tokens (random, long) do not allow. A backend that does not offer the proof, or one behind a proxy
that changes the address, cannot be used over plain http: the client refuses before sending the
token, and https works as before (TLS authenticates the server; no proof is asked).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

PROOF_PATH = "/v1/origin-proof"
NONCE_HEX = 64  # 32 random bytes
_HANDLE_LABEL = b"ito.training.v1 token handle"
_PROOF_LABEL = "ito.training.v1 origin proof"


def token_key(token: str) -> bytes:
    """The key both sides hold: the SHA-256 of the token (a backend stores that, not the token)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def token_handle(key: bytes) -> str:
    """How the client names the token without revealing it or its digest: 64 hex characters."""
    return hmac.new(key, _HANDLE_LABEL, hashlib.sha256).hexdigest()


def authority(host: str, port: int) -> str:
    """The address a proof names: a literal IP address in canonical form (an IPv4-mapped IPv6 address
    as its IPv4 address, as a dual-stack socket reports it) and the port. Raises ValueError for a name."""
    ip = ipaddress.ip_address(host.strip("[]").split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return f"{ip}|{port}"


def proof(key: bytes, nonce: str, where: str) -> str:
    """The backend's answer for `nonce` on the socket address `where` (`authority`)."""
    return hmac.new(key, f"{_PROOF_LABEL}\n{nonce}\n{where}".encode(), hashlib.sha256).hexdigest()


def matches(answer: str, key: bytes, nonce: str, where: str) -> bool:
    return hmac.compare_digest(answer.encode(), proof(key, nonce, where).encode())
