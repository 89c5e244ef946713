"""JSON-RPC errors leave through the egress too (contract §10: every string that leaves).

Tool results are envelopes and pass `egress.clean_envelope`. A protocol error is built by the SDK or
its transports, and some of those echo what the client sent: the name of an unknown method as
`data`, pydantic's dump of a body that is no JSON-RPC message (with `input_value=...`), the protocol
version a client asked for, or the text of an unexpected exception. Three layers, so that each error
passes one of them whatever produced it:

- `ProtocolErrorEgress`, a server middleware (the SDK's public hook, it wraps every request in both
  protocol eras and on every transport): an unknown method is answered with a fixed message and no
  `data`; an unexpected exception becomes a fixed internal error (its type is logged, never its
  text); any other error's message and data pass the egress.
- `clean_jsonrpc_error`, applied by the stdio transport (`doors/mcp/stdio.py`) to every error it writes.
- `CleanErrorResponses`, an ASGI wrapper around the streamable-HTTP app, for the errors its
  transport writes itself (parse and shape errors, the 2026-07-28 envelope checks): the JSON body of
  a response is cleaned the same way.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import ErrorData, JSONRPCError
from pydantic import ValidationError

from ito_training_mcp.egress.clean import clean_line

log = logging.getLogger("ito_training_mcp.mcp")

METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603
UNKNOWN_METHOD_MESSAGE = "Method not found: this server does not serve that method."
INTERNAL_ERROR_MESSAGE = "Internal error: the server could not handle this request."
SHAPE_ERROR_MESSAGE = "Validation error: the message is not a well-formed JSON-RPC 2.0 message."
MAX_MESSAGE_CHARS = 1024
MAX_DATA_DEPTH = 8
# pydantic's rendering of a ValidationError: it quotes (part of) the offending input.
_VALIDATION_DUMP = re.compile(r"input_value=|validation errors? for ", re.IGNORECASE)


def clean_message(code: int, message: str) -> str:
    """One error message as it may leave: fixed for an unknown method or a pydantic dump, else the egress."""
    if code == METHOD_NOT_FOUND:
        return UNKNOWN_METHOD_MESSAGE
    if _VALIDATION_DUMP.search(message):
        return SHAPE_ERROR_MESSAGE
    return clean_line(message[:MAX_MESSAGE_CHARS])


def clean_data(code: int, data: Any, depth: int = 0) -> Any:
    """Error data as it may leave: none for an unknown method; every string and key through the egress."""
    if code == METHOD_NOT_FOUND:
        return None
    if isinstance(data, str):
        return clean_line(data[:MAX_MESSAGE_CHARS])
    if depth >= MAX_DATA_DEPTH:
        return None if isinstance(data, dict | list) else data
    if isinstance(data, dict):
        return {clean_line(str(key)): clean_data(code, value, depth + 1) for key, value in data.items()}
    if isinstance(data, list):
        return [clean_data(code, value, depth + 1) for value in data]
    return data


def clean_error_fields(code: int, message: str, data: Any) -> tuple[str, Any]:
    return clean_message(code, message), clean_data(code, data)


def clean_jsonrpc_error(error: JSONRPCError) -> JSONRPCError:
    """The same error with its message and data through `clean_error_fields`; the same object if clean."""

    body = error.error
    message, data = clean_error_fields(body.code, body.message, body.data)
    if message == body.message and data == body.data:
        return error
    fields: dict[str, Any] = {"code": body.code, "message": message}
    if data is not None:
        fields["data"] = data
    return JSONRPCError(jsonrpc="2.0", id=error.id, error=ErrorData(**fields))


class ProtocolErrorEgress:
    """Server middleware: every error a request handler (or the SDK's dispatch) raises leaves clean."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:

        try:
            return await call_next(ctx)
        except MCPError as exc:
            message, data = clean_error_fields(exc.code, exc.message, exc.data)
            if message == exc.message and data == exc.data:
                raise
            raise MCPError(code=exc.code, message=message, data=data) from None
        except ValidationError:
            raise  # the SDK answers it with a fixed message and empty data
        except Exception as exc:
            # The SDK would put str(exc) on the wire (legacy era); the type is enough for the log.
            log.error("%s raised %s; answered with a fixed internal error", _method(ctx), type(exc).__name__)
            raise MCPError(code=INTERNAL_ERROR, message=INTERNAL_ERROR_MESSAGE) from None


def _method(ctx: ServerRequestContext[Any, Any]) -> str:
    method = ctx.method
    return method if re.fullmatch(r"[a-z/_]{1,64}", method) else "a request"


# ---------------------------------------------------------------------- streamable HTTP

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# A JSON body larger than this with status 200 is a result (a digest's review can be a mebibyte),
# passed as it is; every error the SDK or this server builds is far smaller.
MAX_HELD_BODY = 256 * 1024


def clean_error_body(body: bytes) -> bytes:
    """A JSON-RPC error response body with its error cleaned; any other body unchanged."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return body
    if not isinstance(decoded, dict) or not isinstance(decoded.get("error"), dict):
        return body
    error = decoded["error"]
    code = error.get("code")
    message = error.get("message")
    if not isinstance(code, int) or not isinstance(message, str):
        return body
    cleaned, data = clean_error_fields(code, message, error.get("data"))
    if cleaned == message and data == error.get("data"):
        return body
    fixed = {key: value for key, value in error.items() if key != "data"}
    fixed["message"] = cleaned
    if data is not None:
        fixed["data"] = data
    return json.dumps({**decoded, "error": fixed}, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class CleanErrorResponses:
    """ASGI wrapper: a JSON response that is a JSON-RPC error leaves with its error cleaned.

    JSON bodies are held until complete (they are sent whole by the transport), then checked; an
    event stream passes untouched (what it carries comes from request handlers, which
    `ProtocolErrorEgress` already covers)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body = bytearray()

        async def guarded(message: Message) -> None:
            nonlocal start
            kind = message.get("type")
            if kind == "http.response.start":
                if _is_json(message):
                    start = message
                    return
                await send(message)
                return
            if kind != "http.response.body" or start is None:
                await send(message)
                return
            body.extend(message.get("body", b""))
            if message.get("more_body", False) and len(body) <= MAX_HELD_BODY:
                return
            held, start = start, None
            data = bytes(body)
            body.clear()
            if int(held.get("status", 200)) >= 400 or len(data) <= MAX_HELD_BODY:
                data = clean_error_body(data)
            headers = [(k, v) for k, v in held.get("headers", []) if k.lower() != b"content-length"]
            more = bool(message.get("more_body", False))
            if not more:
                headers.append((b"content-length", str(len(data)).encode("ascii")))
            await send({**held, "headers": headers})
            await send({"type": "http.response.body", "body": data, "more_body": more})

        await self.app(scope, receive, guarded)


def _is_json(start: Message) -> bool:
    for key, value in start.get("headers", []):
        if key.lower() == b"content-type":
            return bytes(value).split(b";", 1)[0].strip().lower() == b"application/json"
    return False
