"""HTTP plumbing shared by the public and operator APIs: replies, capped JSON bodies, ASGI send.

Request bodies are capped (413 above `MAX_REQUEST_BYTES`) and parsed as plain JSON objects with
duplicate keys refused, so a body cannot say two things at once.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.types import Send

from .errors import ApiError, invalid_request

MAX_REQUEST_BYTES = 2 * 1024 * 1024
JSON_TYPE = "application/json"


@dataclass
class Reply:
    """A response not yet sent: faults may still patch, delay, truncate or replace it."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None

    @classmethod
    def error(cls, exc: ApiError) -> Reply:
        return cls(exc.status, exc.body(), dict(exc.headers))

    def content(self) -> bytes:
        if self.raw is not None:
            return self.raw
        if self.body is None:
            return b""
        return json.dumps(self.body, separators=(",", ":"), ensure_ascii=True).encode()


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key")
    return result


async def read_body(request: Request, cap: int = MAX_REQUEST_BYTES) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > cap):
        raise ApiError(413, "payload_too_large", f"Request bodies are limited to {cap} bytes.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise ApiError(413, "payload_too_large", f"Request bodies are limited to {cap} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_object(raw: bytes, *, allow_empty: bool = False) -> dict[str, Any]:
    if allow_empty and not raw.strip():
        return {}
    try:
        document = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates,
                              parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise invalid_request("The body must be one UTF-8 JSON object.") from None
    if not isinstance(document, dict):
        raise invalid_request("The body must be one JSON object.")
    return document


async def json_object(request: Request, *, allow_empty: bool = False) -> dict[str, Any]:
    return parse_object(await read_body(request), allow_empty=allow_empty)


def _refuse_constant(_name: str) -> Any:
    raise ValueError("NaN and Infinity are not JSON")


def only_keys(body: dict[str, Any], required: Iterable[str], optional: Iterable[str] = ()) -> None:
    required, allowed = set(required), set(required) | set(optional)
    missing, unknown = required - set(body), set(body) - allowed
    if missing or unknown:
        problems = []
        if missing:
            problems.append("missing " + ", ".join(sorted(missing)))
        if unknown:
            problems.append(f"{len(unknown)} unexpected field(s)")
        raise invalid_request("Body fields: " + "; ".join(problems) + ".")


def bearer(request: Request) -> str | None:
    value = request.headers.get("authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 4096:
        return None
    return token


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def response_headers(reply: Reply, length: int) -> list[tuple[bytes, bytes]]:
    headers = {"content-type": JSON_TYPE, "cache-control": "no-store", **{k.lower(): v for k, v in
                                                                          reply.headers.items()}}
    headers["content-length"] = str(length)
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


async def send_start(send: Send, reply: Reply, length: int) -> None:
    await send({"type": "http.response.start", "status": reply.status, "headers": response_headers(reply, length)})


async def send_reply(send: Send, reply: Reply) -> None:
    body = reply.content()
    await send_start(send, reply, len(body))
    await send({"type": "http.response.body", "body": body, "more_body": False})
