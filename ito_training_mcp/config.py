"""Configuration from the environment (contract §8), read per call and validated with bounds.

Two separate groups so that one gate's settings cannot break another's: the manifest gate
works without a backend, and a bad backend URL must not stop a local digest. Credentials
(`ITO_API_KEY`, `ITO_TOKEN_FILE`) are deliberately absent: only `credentials.py` reads them,
and only after the capabilities gate has passed.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from .envelope import Gate
from .errors import ConfigRefusal

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


def is_normalised_absolute(path: str) -> bool:
    """Absolute, no NUL, no empty, '.' or '..' component, no trailing slash (except '/' itself)."""
    if not path.startswith("/") or "\x00" in path:
        return False
    if path == "/":
        return True
    return all(part not in ("", ".", "..") for part in path[1:].split("/"))


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


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Endpoint:
    """A validated backend origin. `base_url` has no trailing slash, no userinfo, query or fragment."""

    scheme: str
    host: str
    port: int
    base_url: str

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host.lower(), self.port)

    @property
    def is_loopback(self) -> bool:
        return _is_loopback(self.host)


def parse_endpoint(raw: str) -> Endpoint:
    """Validate `ITO_API_URL`. The value is never echoed: it is configuration an operator may
    have pasted a credential into, so errors say what is wrong, not what was there."""
    text = raw.strip()
    if len(text) > 2048 or any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in text):
        raise ConfigRefusal(ENV_API_URL, "not a valid URL")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ConfigRefusal(ENV_API_URL, "not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        raise ConfigRefusal(ENV_API_URL, "the scheme must be https (or http for a loopback host)")
    host = parts.hostname
    if not host:
        raise ConfigRefusal(ENV_API_URL, "the URL has no host")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ConfigRefusal(ENV_API_URL, "the URL must not carry credentials (userinfo)")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise ConfigRefusal(ENV_API_URL, "the URL must not have a query or fragment")
    if scheme == "http" and not _is_loopback(host):
        raise ConfigRefusal(ENV_API_URL, "plain http is only allowed to a loopback host; use https")
    path = parts.path.rstrip("/")
    if path and not is_normalised_absolute(path):
        raise ConfigRefusal(ENV_API_URL, "the URL path must be normalised")
    effective_port = port if port is not None else (443 if scheme == "https" else 80)
    netloc_host = f"[{host}]" if ":" in host else host
    base = f"{scheme}://{netloc_host}:{effective_port}{path}"
    return Endpoint(scheme=scheme, host=host, port=effective_port, base_url=base)


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
        )
