"""Configuration from the environment (contract §8), read per call and validated with bounds.

Two separate groups so that one gate's settings cannot break another's: the manifest gate
works without a backend, and a bad backend URL must not stop a local digest. Credentials
(`ITO_API_KEY`, `ITO_TOKEN_FILE`) are deliberately absent: only `credentials.py` reads them,
and only after the capabilities gate has passed.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ito_training_mcp.envelope import Gate
from ito_training_mcp.errors import ConfigRefusal
from ito_training_mcp.files import is_normalised_absolute

ENV_API_URL = "ITO_API_URL"
ENV_MANIFEST_ROOTS = "ITO_TRAINING_MANIFEST_ROOTS"
ENV_MANIFEST_MAX_BYTES = "ITO_TRAINING_MANIFEST_MAX_BYTES"
ENV_CONNECT_TIMEOUT = "ITO_TRAINING_CONNECT_TIMEOUT_S"
ENV_TIMEOUT = "ITO_TRAINING_TIMEOUT_S"
ENV_RESPONSE_MAX_BYTES = "ITO_TRAINING_RESPONSE_MAX_BYTES"
ENV_ENTITLEMENT_MAX_AGE = "ITO_TRAINING_ENTITLEMENT_MAX_AGE_S"
ENV_RECOVERY_ATTEMPTS = "ITO_TRAINING_RECOVERY_ATTEMPTS"
ENV_CAPABILITIES_TTL = "ITO_TRAINING_CAPABILITIES_TTL_S"
ENV_POLL_INTERVAL = "ITO_TRAINING_POLL_INTERVAL_S"
ENV_MAX_WAIT = "ITO_TRAINING_MAX_WAIT_S"
# The longest one training_status / confirmation_status call waits: mainstream clients time a call
# out after 60-120 s. Configurable up to the 600 s a wait_seconds argument may ask for.
DEFAULT_MAX_WAIT_S = 55
MAX_WAIT_LIMIT_S = 600

MIB = 1024 * 1024


def _number(
    env: Mapping[str, str], name: str, default: float, low: float, high: float, gate: Gate
) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigRefusal(name, "not a number", gate=gate) from None
    if not (low <= value <= high):  # also rejects NaN
        raise ConfigRefusal(name, f"must be between {low:g} and {high:g}", gate=gate)
    return value


def _integer(env: Mapping[str, str], name: str, default: int, low: int, high: int, gate: Gate) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 12:
        raise ConfigRefusal(name, "not a whole number", gate=gate)
    value = int(text)
    if not (low <= value <= high):
        raise ConfigRefusal(name, f"must be between {low} and {high}", gate=gate)
    return value


@dataclass(frozen=True)
class ManifestSettings:
    max_bytes: int
    roots: tuple[str, ...] | None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ManifestSettings:
        env = os.environ if env is None else env
        max_bytes = _integer(env, ENV_MANIFEST_MAX_BYTES, MIB, 1024, 16 * MIB, Gate.MANIFEST)
        raw_roots = env.get(ENV_MANIFEST_ROOTS)
        roots: tuple[str, ...] | None = None
        if raw_roots is not None and raw_roots.strip() != "":
            parts = [p for p in raw_roots.split(":") if p != ""]
            if not parts or not all(is_normalised_absolute(p) for p in parts):
                raise ConfigRefusal(
                    ENV_MANIFEST_ROOTS, "every entry must be an absolute, normalised directory path",
                    gate=Gate.MANIFEST,
                )
            roots = tuple(parts)
        return cls(max_bytes=max_bytes, roots=roots)


# Where plain http may go. `localhost` is accepted by name but never looked up: it is dialled as
# 127.0.0.1 (an IPv6-only loopback server is configured as `[::1]`). Everything else must be an IP
# literal that the standard library parses as loopback; shorthand forms such as `127.1`, a trailing
# dot, `localhost.localdomain` or an IPv4-mapped `::ffff:127.0.0.1` are not accepted for plain http.
LOCALHOST = "localhost"
LOCALHOST_DIAL = "127.0.0.1"
_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")
# One DNS label, ASCII only (internationalised names are written in their xn-- form). Underscores
# are tolerated: some private networks use them, and they cannot change where a name points.
_DNS_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
# A label that a URL parser may read as part of an IPv4 number (`127.1`, `0x7f.1`, `2130706433`).
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
# The authority once userinfo is excluded: a bracketed IPv6 literal or a name, then an optional port.
_AUTHORITY = re.compile(r"(?P<host>\[[0-9a-fA-F:.]{2,45}\]|[^\[\]:@]{1,253})(?::(?P<port>[0-9]{1,5}))?")
# RFC 3986 path characters (pchar and "/"); no backslash, which WHATWG parsers read as "/".
_PATH = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*")
_DOT_SEGMENT = re.compile(r"(?:^|/)(?:%2e|\.){1,2}(?:/|$)", re.IGNORECASE)


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address when `host` is a plain IP literal (no zone id, no shorthand), else None."""
    if "%" in host:
        return None
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def loopback_dial_host(host: str) -> str | None:
    """The IP literal plain http may dial for `host` (already lower-case, without brackets), or None.

    `localhost` maps to 127.0.0.1 without any name lookup, so neither /etc/hosts nor DNS can send
    a plain-http request (and the credential in it) anywhere else.
    """
    if host == LOCALHOST:
        return LOCALHOST_DIAL
    address = _ip_literal(host)
    if isinstance(address, ipaddress.IPv4Address) and address in _LOOPBACK_V4:
        return str(address)
    if isinstance(address, ipaddress.IPv6Address) and address == _LOOPBACK_V6:
        return str(address)
    return None


def _is_loopback(host: str) -> bool:
    return loopback_dial_host(host) is not None


def _valid_host(host: str) -> bool:
    """An IP literal, or an ASCII DNS name without empty labels (so no trailing dot)."""
    if _ip_literal(host) is not None:
        return True
    if len(host) > 253 or not host.isascii():
        return False
    labels = host.split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        return False  # an IPv4 number in a shorthand or non-decimal form
    return all(_DNS_LABEL.fullmatch(label) for label in labels)


@dataclass(frozen=True)
class Endpoint:
    """A validated backend origin.

    `host` is the configured host (lower case, IPv6 without brackets); `dial_host` is the IP
    literal or name actually connected to (127.0.0.1 for `localhost`). `base_url` is the
    configured origin and path (no trailing slash, userinfo, query or fragment); `dial_base_url`
    the same with `dial_host`; `host_header` is what the Host header (and TLS server name) says.
    """

    scheme: str
    host: str
    port: int
    base_url: str
    path: str
    dial_host: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host.lower(), self.port)

    @property
    def is_loopback(self) -> bool:
        return _is_loopback(self.host)

    @property
    def dial_base_url(self) -> str:
        return f"{self.scheme}://{_bracketed(self.dial_host)}:{self.port}{self.path}"

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = _bracketed(self.host)
        return host if self.port == default else f"{host}:{self.port}"


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def parse_endpoint(raw: str) -> Endpoint:
    """Validate `ITO_API_URL`. The value is never echoed: it is configuration an operator may
    have pasted a credential into, so errors say what is wrong, not what was there. Nothing here
    resolves a name or opens a socket."""
    text = raw.strip()
    if len(text) > 2048 or any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in text):
        raise ConfigRefusal(ENV_API_URL, "not a valid URL")
    try:
        parts = urlsplit(text)
    except ValueError:
        raise ConfigRefusal(ENV_API_URL, "not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise ConfigRefusal(ENV_API_URL, "the scheme must be https (or http for a loopback host)")
    if "@" in parts.netloc:
        raise ConfigRefusal(ENV_API_URL, "the URL must not carry credentials (userinfo)")
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise ConfigRefusal(ENV_API_URL, "the URL must not have a query or fragment")
    if not parts.netloc:
        raise ConfigRefusal(ENV_API_URL, "the URL has no host")
    authority = _AUTHORITY.fullmatch(parts.netloc)
    if authority is None:
        raise ConfigRefusal(ENV_API_URL, "the host and port are not well formed")
    host = authority.group("host").lower()
    if host.startswith("["):
        address = _ip_literal(host[1:-1])
        if not isinstance(address, ipaddress.IPv6Address):
            raise ConfigRefusal(ENV_API_URL, "the bracketed host is not an IPv6 address")
        host = str(address)
    elif not _valid_host(host):
        raise ConfigRefusal(
            ENV_API_URL,
            "the host must be an IP address or an ASCII DNS name without a trailing dot "
            "(internationalised names in their xn-- form)",
        )
    port_text = authority.group("port")
    port = int(port_text) if port_text is not None else (443 if scheme == "https" else 80)
    if not 1 <= port <= 65535:
        raise ConfigRefusal(ENV_API_URL, "the port must be between 1 and 65535")
    dial_host = loopback_dial_host(host)
    if scheme == "http" and dial_host is None:
        raise ConfigRefusal(
            ENV_API_URL,
            "plain http is only allowed to 127.0.0.0/8, [::1] or localhost (exactly); use https",
        )
    path = parts.path.rstrip("/")
    if path and (not is_normalised_absolute(path) or not _PATH.fullmatch(path) or _DOT_SEGMENT.search(path)):
        raise ConfigRefusal(ENV_API_URL, "the URL path must be normalised")
    base = f"{scheme}://{_bracketed(host)}:{port}{path}"
    return Endpoint(scheme=scheme, host=host, port=port, base_url=base, path=path, dial_host=dial_host or host)


@dataclass(frozen=True)
class BackendSettings:
    endpoint: Endpoint
    connect_timeout_s: float
    timeout_s: float
    response_max_bytes: int
    entitlement_max_age_s: float
    recovery_attempts: int
    capabilities_ttl_s: float
    poll_interval_s: float
    max_wait_s: int

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BackendSettings | None:
        """None when no backend is configured: training is unavailable (gate 1)."""
        env = os.environ if env is None else env
        raw = env.get(ENV_API_URL)
        if raw is None or raw.strip() == "":
            return None
        a = Gate.AVAILABILITY
        return cls(
            endpoint=parse_endpoint(raw),
            connect_timeout_s=_number(env, ENV_CONNECT_TIMEOUT, 5.0, 0.05, 60.0, a),
            timeout_s=_number(env, ENV_TIMEOUT, 30.0, 0.1, 600.0, a),
            response_max_bytes=_integer(env, ENV_RESPONSE_MAX_BYTES, MIB, 4096, 16 * MIB, a),
            entitlement_max_age_s=_number(env, ENV_ENTITLEMENT_MAX_AGE, 300.0, 1.0, 3600.0, a),
            recovery_attempts=_integer(env, ENV_RECOVERY_ATTEMPTS, 3, 1, 10, a),
            capabilities_ttl_s=_number(env, ENV_CAPABILITIES_TTL, 60.0, 0.0, 3600.0, a),
            poll_interval_s=_number(env, ENV_POLL_INTERVAL, 2.0, 0.01, 60.0, a),
            max_wait_s=_integer(env, ENV_MAX_WAIT, DEFAULT_MAX_WAIT_S, 0, MAX_WAIT_LIMIT_S, a),
        )
