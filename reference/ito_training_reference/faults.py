"""Fault injection for the public API: per-route, FIFO, each fault consumed `times` times.

A fault is taken by the next matching request when it arrives. `redirect` answers at once.
`delay` and the `when: before` forms of `error` / `drop` / `malformed` act after authentication
and (for keyed POSTs) after the in-flight reservation and the body read, so a delayed create
holds its key and still completes if its client gives up; the `before` forms skip processing.
Everything else acts on the finished reply, after any commit.
All durations are capped at `MAX_SECONDS`, sizes at `MAX_OVERSIZED_BYTES`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import secrets
import threading
from dataclasses import dataclass
from typing import Any

from starlette.types import Send

from .errors import ApiError, invalid_request
from .wire import Reply, send_reply, send_start

ROUTES = frozenset({
    "GET /v1/capabilities",
    "GET /v1/me",
    "GET /v1/bookings/{id}/training-eligibility",
    "GET /v1/confirmations/{ref}",
    "GET /v1/training-runs",
    "POST /v1/training-runs",
    "GET /v1/training-runs/{run_id}",
    "GET /v1/training-runs/{run_id}/logs",
    "GET /v1/training-runs/{run_id}/metrics",
    "GET /v1/training-runs/{run_id}/checkpoints",
    "POST /v1/training-runs/{run_id}/cancel",
    "POST /v1/training-runs/{run_id}/cleanup",
    "POST /v1/training-runs/{run_id}/restart",
    "POST /v1/training-plans",
    "POST /v1/confirmation-requests",
    "GET /v1/confirmation-requests/{request_id}",
})
MAX_SECONDS = 120.0
MAX_OVERSIZED_BYTES = 64 * 1024 * 1024
MAX_TIMES = 1000
MAX_FAULTS = 256
MALFORMED_BODY = b"<html><body>502 upstream hiccup</body></html>"
_CHUNK = 64 * 1024
_WHEN_KINDS = frozenset({"error", "drop", "malformed"})
_PARAMS: dict[str, frozenset[str]] = {
    "delay": frozenset({"seconds"}),
    "stall": frozenset({"seconds"}),
    "drip": frozenset({"interval_s", "chunks"}),
    "error": frozenset({"status", "when", "code", "retry_after"}),
    "drop": frozenset({"when"}),
    "malformed": frozenset({"when"}),
    "oversized": frozenset({"bytes"}),
    "redirect": frozenset({"location"}),
    "json_patch": frozenset({"patch"}),
}
_DEFAULT_CODES = {429: "rate_limited", 500: "internal_error", 502: "bad_gateway", 503: "unavailable",
                  504: "gateway_timeout"}


class InjectedDrop(Exception):
    """Raised after a truncated body so uvicorn aborts the connection."""


class _QuietInjectedDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], InjectedDrop))


def install_log_filter() -> None:
    """A deliberate drop is not a server defect: keep it out of uvicorn's error log."""
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietInjectedDrops) for f in logger.filters):
        logger.addFilter(_QuietInjectedDrops())


@dataclass
class Fault:
    fault_id: str
    route: str
    kind: str
    remaining: int
    params: dict[str, Any]

    @property
    def skips_processing(self) -> bool:
        return self.kind in _WHEN_KINDS and self.params["when"] == "before"

    def public(self) -> dict[str, Any]:
        return {"fault_id": self.fault_id, "route": self.route, "kind": self.kind, "remaining": self.remaining,
                **self.params}


def _number(params: dict[str, Any], name: str, low: float, high: float, default: float | None = None) -> float:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise invalid_request(f"Fault parameter {name} must be a number.")
    if not low <= value <= high:
        raise invalid_request(f"Fault parameter {name} must be between {low} and {high}.")
    return float(value)


def _integer(params: dict[str, Any], name: str, low: int, high: int, default: int | None = None) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid_request(f"Fault parameter {name} must be an integer from {low} to {high}.")
    return value


def parse_fault(spec: dict[str, Any]) -> Fault:
    """Validate a fault request; every parameter is bounded, unknown ones refused."""
    route, kind = spec.get("route"), spec.get("kind")
    if route not in ROUTES:
        raise invalid_request("Unknown fault route; use 'METHOD /v1/...' exactly as in the API table.")
    if kind not in _PARAMS:
        raise invalid_request("Unknown fault kind.")
    raw = {k: v for k, v in spec.items() if k not in ("route", "kind", "times")}
    if set(raw) - _PARAMS[kind]:
        raise invalid_request(f"Unexpected parameter(s) for fault kind {kind}.")
    times = _integer(spec, "times", 1, MAX_TIMES, 1)
    params: dict[str, Any] = {}
    if kind in ("delay", "stall"):
        params["seconds"] = _number(raw, "seconds", 0.0, MAX_SECONDS)
    elif kind == "drip":
        params["interval_s"] = _number(raw, "interval_s", 0.0, 10.0, 0.5)
        params["chunks"] = _integer(raw, "chunks", 1, 1000, 4)
        if params["interval_s"] * params["chunks"] > MAX_SECONDS:
            raise invalid_request(f"A drip may last at most {MAX_SECONDS} seconds.")
    elif kind == "oversized":
        params["bytes"] = _integer(raw, "bytes", 1, MAX_OVERSIZED_BYTES)
    elif kind == "redirect":
        location = raw.get("location", "https://elsewhere.invalid/v1/")
        if not isinstance(location, str) or not 0 < len(location) <= 2048 or re.search(r"[\x00-\x20\x7f]", location):
            raise invalid_request("Fault parameter location must be a URL without spaces or control characters.")
        params["location"] = location
    elif kind == "json_patch":
        patch = raw.get("patch")
        if not isinstance(patch, dict) or len(json.dumps(patch)) > 65536:
            raise invalid_request("Fault parameter patch must be a JSON object of at most 64 KiB.")
        params["patch"] = patch
    if kind in _WHEN_KINDS:
        when = raw.get("when", "before")
        if when not in ("before", "after"):
            raise invalid_request("Fault parameter when must be 'before' or 'after'.")
        params["when"] = when
    if kind == "error":
        params["status"] = _integer(raw, "status", 400, 599)
        code = raw.get("code", _DEFAULT_CODES.get(params["status"], "injected_error"))
        if not isinstance(code, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", code):
            raise invalid_request("Fault parameter code must be lower_snake_case.")
        params["code"] = code
        if "retry_after" in raw:
            params["retry_after"] = _integer(raw, "retry_after", 0, 3600)
    return Fault(f"flt_{secrets.token_hex(6)}", str(route), str(kind), times, params)


class FaultRegistry:
    """Thread-safe because the operator client and tests may add faults from other threads."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, spec: dict[str, Any]) -> Fault:
        fault = parse_fault(spec)
        with self._lock:
            if len(self._faults) >= MAX_FAULTS:
                raise ApiError(409, "too_many_faults", f"At most {MAX_FAULTS} faults may be pending.")
            self._faults.append(fault)
        return fault

    def take(self, route: str) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.route == route:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def clear(self) -> int:
        with self._lock:
            count = len(self._faults)
            self._faults.clear()
            return count

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [f.public() for f in self._faults]


def preempt(fault: Fault | None) -> Reply | None:
    """A redirect answers before anything else happens."""
    if fault is not None and fault.kind == "redirect":
        return Reply(302, None, {"Location": fault.params["location"]})
    return None


async def before(fault: Fault | None) -> Reply | None:
    """Run a before-effect. Returns a placeholder reply when processing must be skipped."""
    if fault is None:
        return None
    if fault.kind == "delay":
        await asyncio.sleep(fault.params["seconds"])
    if fault.skips_processing:
        return Reply(200, {"note": "request not processed", "padding": "." * 64})
    return None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, null deletes."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _transform(reply: Reply, fault: Fault) -> Reply:
    kind, params = fault.kind, fault.params
    if kind == "json_patch" and isinstance(reply.body, dict):
        return Reply(reply.status, merge_patch(reply.body, params["patch"]), reply.headers)
    if kind == "error":
        headers = {"Retry-After": str(params["retry_after"])} if "retry_after" in params else {}
        body = {"error": {"code": params["code"], "message": "Injected fault."}}
        return Reply(params["status"], body, headers)
    if kind == "malformed":
        return Reply(reply.status, None, reply.headers, raw=MALFORMED_BODY)
    return reply


async def deliver(send: Send, reply: Reply, fault: Fault | None) -> None:
    """Send the reply, shaped by the fault's after-effect (if any)."""
    if fault is None:
        await send_reply(send, reply)
        return
    reply = _transform(reply, fault)
    kind, params = fault.kind, fault.params
    if kind == "stall":
        await asyncio.sleep(params["seconds"])
    body = reply.content()
    if kind == "oversized" and params["bytes"] > len(body):
        body += b" " * (params["bytes"] - len(body))  # trailing whitespace: still valid JSON
    if kind == "drop":
        body = body if len(body) >= 2 else b'{"note":"dropped"}'
        await send_start(send, reply, len(body))
        await send({"type": "http.response.body", "body": body[: max(1, len(body) // 2)], "more_body": True})
        raise InjectedDrop
    await send_start(send, reply, len(body))
    if kind == "drip":
        chunks = params["chunks"]
        size = max(1, math.ceil(len(body) / chunks))
        parts = [body[i:i + size] for i in range(0, len(body), size)] or [b""]
        for part in parts[:-1]:
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(params["interval_s"])
        await send({"type": "http.response.body", "body": parts[-1], "more_body": False})
        return
    for offset in range(0, max(len(body), 1), _CHUNK):
        last = offset + _CHUNK >= len(body)
        await send({"type": "http.response.body", "body": body[offset:offset + _CHUNK], "more_body": not last})
