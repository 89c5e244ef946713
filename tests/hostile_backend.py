"""A hostile `ito.training.v1` backend on loopback, written on raw asyncio streams.

Every URL is `http://127.0.0.1:<port>/h/<scenario>/<target>/v1/...`: the endpoint named `target`
answers with `scenario` (a decompression bomb, a huge body, bad framing, a redirect...), every
other endpoint answers correctly, so a tool walks its real flow up to the hostile answer. Target
`all` makes every endpoint hostile; scenario `none` makes none.

Raw streams rather than a framework, so nothing between this code and the socket fixes up what
it sends (no added headers, no re-framing, no compression). Bombs are built at runtime from zeros.
Shared by tests/test_backend_hostile.py (which runs it in a thread) and tests/hostile_driver.py
(which plays the server under test, in a subprocess, and reports its peak RSS).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ito_training_mcp.backend.models import CONFIRMATION_OPERATIONS, REQUIRED_OPERATIONS

from .hostile_bombs import GIB, MIB, deflate_of, gzip_of, zeros_bomb
from .proving import is_proof_request, proof_body

ACCOUNT = "acct-hostile-01"
BOOKING = "bk-hostile-01"
RUN_ID = "run-hostile-01"
SUBMIT_KEY = "hostile-submit-key-0001"
CANCEL_KEY = "hostile-cancel-key-0001"
CLEANUP_KEY = "hostile-cleanup-key-001"
CREATE_REF, CANCEL_REF, CLEANUP_REF = "conf-create-01", "conf-cancel-01", "conf-cleanup-01"
REQUEST_ID = "creq-hostile-01"
TOKEN = "itocanary_TOKEN_hostile_4d2e8f1a9c"

# (endpoint, method, path under /v1) for every path of the contract's API, including the plan and
# confirmation-request extension.
ENDPOINTS: list[tuple[str, str, str]] = [
    ("capabilities", "GET", "/v1/capabilities"),
    ("me", "GET", "/v1/me"),
    ("eligibility", "GET", f"/v1/bookings/{BOOKING}/training-eligibility"),
    ("confirmation", "GET", f"/v1/confirmations/{CREATE_REF}"),
    ("runs_by_key", "GET", f"/v1/training-runs?idempotency_key={SUBMIT_KEY}"),
    ("create", "POST", "/v1/training-runs"),
    ("run", "GET", f"/v1/training-runs/{RUN_ID}"),
    ("logs", "GET", f"/v1/training-runs/{RUN_ID}/logs?cursor=c-1&limit=50"),
    ("metrics", "GET", f"/v1/training-runs/{RUN_ID}/metrics"),
    ("checkpoints", "GET", f"/v1/training-runs/{RUN_ID}/checkpoints"),
    ("cancel", "POST", f"/v1/training-runs/{RUN_ID}/cancel"),
    ("cleanup", "POST", f"/v1/training-runs/{RUN_ID}/cleanup"),
    ("plan", "POST", "/v1/training-plans"),
    ("confirmation_request_create", "POST", "/v1/confirmation-requests"),
    ("confirmation_request", "GET", f"/v1/confirmation-requests/{REQUEST_ID}"),
]
MUTATIONS = frozenset({"create", "cancel", "cleanup"})

# (target endpoint, tool that reaches it), as in the response fuzzing: every endpoint the service
# calls today, through every tool that reaches it.
TOOL_TARGETS: list[tuple[str, str]] = [
    ("capabilities", "check_training_availability"),
    ("me", "check_training_availability"),
    ("eligibility", "check_training_availability"),
    ("eligibility", "submit_training"),
    ("runs_by_key", "submit_training"),
    ("runs_by_key", "training_status"),
    ("confirmation", "submit_training"),
    ("confirmation", "cancel_training"),
    ("confirmation", "cleanup_training"),
    ("create", "submit_training"),
    ("run", "training_status"),
    ("logs", "training_logs"),
    ("metrics", "training_metrics"),
    ("checkpoints", "list_checkpoints"),
    ("cancel", "cancel_training"),
    ("cleanup", "cleanup_training"),
    ("plan", "plan_training"),
    ("confirmation_request_create", "request_confirmation"),
    ("confirmation_request", "confirmation_status"),
]


def classify(method: str, path: str) -> str:
    """The endpoint of a request path (without the /h/<scenario>/<target> prefix)."""
    path, _, query = path.partition("?")
    table = {
        ("GET", "/v1/capabilities"): "capabilities",
        ("GET", "/v1/me"): "me",
        ("POST", "/v1/training-runs"): "create",
        ("POST", "/v1/training-plans"): "plan",
        ("POST", "/v1/confirmation-requests"): "confirmation_request_create",
    }
    if (method, path) in table:
        return table[(method, path)]
    if method == "GET" and path == "/v1/training-runs" and query.startswith("idempotency_key="):
        return "runs_by_key"
    patterns = [
        ("GET", r"/v1/bookings/[^/]+/training-eligibility", "eligibility"),
        ("GET", r"/v1/confirmations/[^/]+", "confirmation"),
        ("GET", r"/v1/confirmation-requests/[^/]+", "confirmation_request"),
        ("GET", r"/v1/training-runs/[^/]+", "run"),
        ("GET", r"/v1/training-runs/[^/]+/logs", "logs"),
        ("GET", r"/v1/training-runs/[^/]+/metrics", "metrics"),
        ("GET", r"/v1/training-runs/[^/]+/checkpoints", "checkpoints"),
        ("POST", r"/v1/training-runs/[^/]+/cancel", "cancel"),
        ("POST", r"/v1/training-runs/[^/]+/cleanup", "cleanup"),
    ]
    for verb, pattern, name in patterns:
        if method == verb and re.fullmatch(pattern, path):
            return name
    return "unexpected"


# ---------------------------------------------------------------------------- correct answers


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def valid_answer(endpoint: str, path: str, manifest_sha256: str) -> tuple[int, Any]:
    now = datetime.now(UTC)
    run = {
        "run_id": RUN_ID, "booking_id": BOOKING, "account_id": ACCOUNT, "manifest_sha256": manifest_sha256,
        "idempotency_key": SUBMIT_KEY, "state": "running",
        "created_at": _ts(now - timedelta(minutes=5)), "updated_at": _ts(now),
        "stages": [{"name": "sft", "state": "running", "gate": {"status": "pending", "evals": {}}}],
    }
    if endpoint == "confirmation":
        ref = path.split("?")[0].rsplit("/", 1)[-1]
        action = {CREATE_REF: "training.create", CANCEL_REF: "training.cancel"}.get(ref, "training.cleanup")
        create = action == "training.create"
        return 200, {
            "ref": ref, "account_id": ACCOUNT, "action": action, "booking_id": BOOKING,
            "run_id": None if create else RUN_ID, "manifest_sha256": manifest_sha256 if create else None,
            "max_cost_usd": "1500.00", "expires_at": _ts(now + timedelta(minutes=10)), "consumed": False,
        }
    def request(action: str) -> dict[str, Any]:
        create = action == "training.create"
        return {
            "request_id": REQUEST_ID, "account_id": ACCOUNT, "action": action, "status": "pending",
            "booking_id": BOOKING, "run_id": None if create else RUN_ID, "plan_id": None,
            "manifest_sha256": manifest_sha256, "max_cost_usd": "1200.00" if create else "0.00",
            "review_url": f"https://desk.example/desk/requests/{REQUEST_ID}",
            "expires_at": _ts(now + timedelta(hours=1)), "created_at": _ts(now), "decided_at": None,
            "confirmation_ref": None,
        }

    plan = {"plan_id": "plan-hostile-01", "account_id": ACCOUNT, "booking_id": BOOKING,
            "manifest_sha256": manifest_sha256, "valid": True,
            "checks": [{"name": "manifest", "status": "passed", "reason": None, "message": None}],
            "estimate": None, "confirmation_request": request("training.create"), "created_at": _ts(now)}
    operations = [*REQUIRED_OPERATIONS, *CONFIRMATION_OPERATIONS]
    answers: dict[str, tuple[int, Any]] = {
        "capabilities": (200, {"contract_version": "ito.training.v1",
                               "training": {"available": True, "operations": operations}}),
        "me": (200, {"account_id": ACCOUNT}),
        "eligibility": (200, {
            "booking_id": BOOKING, "account_id": ACCOUNT, "eligible": True, "reason": None,
            "gpu_topology": {"gpu": "H100-80GB", "nodes": 2, "gpus_per_node": 8}, "region": "eu-north",
            "fabric": "infiniband", "term_ends_at": _ts(now + timedelta(days=3)), "checked_at": _ts(now),
        }),
        "runs_by_key": (200, {"runs": []}),
        "create": (201, {**run, "state": "queued"}),
        "run": (200, run),
        "logs": (200, {"lines": [{"ts": _ts(now), "stage": "sft", "message": "step 10"}], "next_cursor": None}),
        "metrics": (200, {"goodput": 0.97, "interruption_rate": 0.01, "checkpoint_bandwidth_gbps": 12.5,
                          "step": 1200, "loss": 1.82, "cost_usd_to_date": "310.25"}),
        "checkpoints": (200, {"checkpoints": []}),
        "cancel": (200, {**run, "state": "cancelling"}),
        "cleanup": (200, {"run_id": RUN_ID, "cleaned": ["scratch"], "booking_untouched": True}),
        "plan": (201, plan),
        "confirmation_request_create": (201, request("training.cancel")),
        "confirmation_request": (200, request("training.cancel")),
    }
    return answers.get(endpoint, (404, {"error": {"code": "not_found", "message": "no such endpoint"}}))


# ---------------------------------------------------------------------------- hostile answers

Writer = asyncio.StreamWriter
Answer = Callable[[Writer, int], Awaitable[None]]


def _head(status: int, headers: list[tuple[str, str]] | list[tuple[bytes, bytes]]) -> bytes:
    lines = [f"HTTP/1.1 {status} X".encode()]
    for name, value in headers:
        n = name if isinstance(name, bytes) else name.encode()
        v = value if isinstance(value, bytes) else value.encode()
        lines.append(n + b": " + v)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def fixed(headers: list[tuple[bytes, bytes]], body: Callable[[], bytes], *, length: bool = True,
          status: int | None = None) -> Answer:
    async def answer(writer: Writer, ok_status: int) -> None:
        data = body()
        extra = [(b"Content-Length", str(len(data)).encode())] if length else []
        writer.write(_head(status or ok_status, [*headers, *extra, (b"Connection", b"close")]))
        writer.write(data)
        await writer.drain()
    return answer


def chunked(headers: list[tuple[bytes, bytes]], body: Callable[[], bytes], chunk: int) -> Answer:
    async def answer(writer: Writer, ok_status: int) -> None:
        data = body()
        writer.write(_head(ok_status, [*headers, (b"Transfer-Encoding", b"chunked"), (b"Connection", b"close")]))
        view = memoryview(data)
        for start in range(0, len(view), chunk):
            if writer.is_closing():
                return
            piece = view[start:start + chunk]
            writer.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            if start % (64 * chunk) == 0:
                await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    return answer


def endless(headers: list[tuple[bytes, bytes]], *, framing: str, chunk: int = 64 * 1024,
            limit: int = GIB) -> Answer:
    """Zeros until the client hangs up (or `limit` bytes): framed by close, chunks or a declared length."""
    async def answer(writer: Writer, ok_status: int) -> None:
        frame = {"close": [], "chunked": [(b"Transfer-Encoding", b"chunked")],
                 "length": [(b"Content-Length", str(limit).encode())]}[framing]
        writer.write(_head(ok_status, [(b"Content-Type", b"application/json"), *headers, *frame,
                                       (b"Connection", b"close")]))
        piece = bytes(chunk)
        if framing == "chunked":
            piece = b"%x\r\n" % chunk + piece + b"\r\n"
        for _ in range(limit // chunk):
            if writer.is_closing():
                return
            writer.write(piece)
            await writer.drain()
    return answer


def drip(head: bytes, byte: bytes, interval_s: float, limit: int = 2000) -> Answer:
    """Send `head`, then one `byte` per interval: slowloris on the headers or on the body."""
    async def answer(writer: Writer, ok_status: int) -> None:
        writer.write(head.replace(b"{status}", str(ok_status).encode()))
        await writer.drain()
        for _ in range(limit):
            await asyncio.sleep(interval_s)
            if writer.is_closing():
                return
            writer.write(byte)
            await writer.drain()
    return answer


JSON = (b"Content-Type", b"application/json")


def _gzip_bomb() -> bytes:
    return zeros_bomb(31)


def _deflate_bomb() -> bytes:
    return zeros_bomb(15)


@functools.cache
def _nested_gzip_bomb() -> bytes:
    return gzip_of(zeros_bomb(31))  # ~2 KiB on the wire, 1 GiB after two gunzips


@functools.cache
def _deflate_of_gzip_bomb() -> bytes:
    return deflate_of(zeros_bomb(31))


def _fake(kind: bytes) -> Callable[[], bytes]:
    # No brotli/zstd encoder is assumed installed; the client must refuse on the header alone.
    return lambda: kind + bytes(2048)


@dataclass(frozen=True)
class Scenario:
    answer: Answer
    read_code: str          # the code of a read (GET) that meets it
    mutation_code: str      # the tool's code when a mutation meets it (after the service's recovery)
    client_code: str        # what BackendClient raises for it
    redirected: bool = False


_INVALID = "BACKEND_INVALID_RESPONSE"
_UNKNOWN = "SUBMISSION_OUTCOME_UNKNOWN"


def _invalid(answer: Answer) -> Scenario:
    """Refused as an invalid response; on a mutation that is ambiguous, so the service recovers by
    key (this backend never has the run) and ends with the outcome unknown."""
    return Scenario(answer, _INVALID, _UNKNOWN, _INVALID)


def _transport(answer: Answer) -> Scenario:
    """h11 itself refuses the head: a protocol error, reported as a failed exchange."""
    return Scenario(answer, "BACKEND_ERROR", _UNKNOWN, "BACKEND_ERROR")


SCENARIOS: dict[str, Scenario] = {
    # Content codings: a bomb on the wire, refused from the header without reading the body.
    "gzip": _invalid(fixed([JSON, (b"Content-Encoding", b"gzip")], _gzip_bomb)),
    "deflate": _invalid(fixed([JSON, (b"Content-Encoding", b"deflate")], _deflate_bomb)),
    "gzip-gzip": _invalid(fixed([JSON, (b"Content-Encoding", b"gzip, gzip")], _nested_gzip_bomb)),
    "gzip-twice": _invalid(fixed([JSON, (b"Content-Encoding", b"gzip"), (b"Content-Encoding", b"gzip")],
                                 _nested_gzip_bomb)),
    "gzip-deflate": _invalid(fixed([JSON, (b"Content-Encoding", b"gzip, deflate")], _deflate_of_gzip_bomb)),
    "gzip-identity": _invalid(fixed([JSON, (b"Content-Encoding", b"gzip, identity")], _gzip_bomb)),
    "GZIP-spaced": _invalid(fixed([JSON, (b"Content-Encoding", b"  GZIP\t")], _gzip_bomb)),
    "gzip-chunked": _invalid(chunked([JSON, (b"Content-Encoding", b"gzip")], _gzip_bomb, 16 * 1024)),
    "gzip-no-length": _invalid(fixed([JSON, (b"Content-Encoding", b"gzip")], _gzip_bomb, length=False)),
    "gzip-on-500": _invalid(fixed([JSON, (b"Content-Encoding", b"gzip")], _gzip_bomb, status=500)),
    "gzip-on-401": _invalid(fixed([JSON, (b"Content-Encoding", b"gzip"),
                                   (b"WWW-Authenticate", b'Bearer error="invalid_token"')], _gzip_bomb, status=401)),
    "br": _invalid(fixed([JSON, (b"Content-Encoding", b"br")], _fake(b"\x1b"))),
    "zstd": _invalid(fixed([JSON, (b"Content-Encoding", b"zstd")], _fake(b"\x28\xb5\x2f\xfd"))),
    "unknown-coding": _invalid(fixed([JSON, (b"Content-Encoding", b"x-bomb")], _gzip_bomb)),
    "empty-coding": _invalid(fixed([JSON, (b"Content-Encoding", b"")], _gzip_bomb)),
    "non-ascii-identity": _invalid(fixed([JSON, (b"Content-Encoding", "ıdentity".encode())], _gzip_bomb)),
    "identity-then-gzip": _invalid(fixed([JSON, (b"Content-Encoding", b"identity"), (b"Content-Encoding", b"gzip")],
                                     _gzip_bomb)),
    # Identity bodies beyond the cap (1 MiB): declared, undeclared (close-delimited), chunked, dripped.
    "huge-declared": _invalid(endless([], framing="length")),
    "huge-close": _invalid(endless([], framing="close")),
    "huge-chunked": _invalid(endless([], framing="chunked")),
    "small-chunks": _invalid(endless([], framing="chunked", chunk=1024, limit=2 * MIB)),
    # Lying or conflicting framing.
    "length-short": _invalid(fixed([JSON, (b"Content-Length", b"16")], lambda: b"[" * (4 * MIB), length=False)),
    "length-and-chunked": _invalid(fixed([JSON, (b"Content-Length", b"2"), (b"Transfer-Encoding", b"chunked")],
                                         lambda: b"10\r\n" + bytes(16) + b"\r\n0\r\n\r\n", length=False)),
    "length-not-a-number": _transport(fixed([JSON, (b"Content-Length", b"1e9")], lambda: b"{}", length=False)),
    "transfer-gzip": _transport(fixed([JSON, (b"Transfer-Encoding", b"gzip, chunked")],
                                      lambda: b"0\r\n\r\n", length=False)),
    # Heads beyond h11's limit (100 KiB).
    "huge-header": _transport(fixed([JSON, (b"X-Pad", b"a" * (4 * MIB))], lambda: b"{}")),
    "many-headers": _transport(fixed([JSON, *[(b"X-P%d" % i, b"v") for i in range(20_000)]], lambda: b"{}")),
    # Bodies that arrive whole but are not an acceptable document.
    "deep-json": _invalid(fixed([JSON], lambda: b"[" * (MIB - 1))),
    "deep-objects": _invalid(fixed([JSON], lambda: b'{"a":' * 40 + b"1" + b"}" * 40)),
    "html": _invalid(fixed([(b"Content-Type", b"text/html")], lambda: b"<html>{}</html>")),
    "no-content-type": _invalid(fixed([], lambda: b"{}")),
    "non-ascii-content-type": _invalid(fixed([(b"Content-Type", "applicatión/json".encode())], lambda: b"{}")),
    # A redirect is an answer: refused, never followed, never resent, on every method.
    "redirect-307-bomb": Scenario(
        fixed([(b"Location", b"http://127.0.0.1:9/elsewhere"), (b"Content-Encoding", b"gzip, gzip")],
              _nested_gzip_bomb, status=307), _INVALID, _INVALID, _INVALID, redirected=True),
}


def redirect(status: int) -> Answer:
    return fixed([(b"Location", b"/v1/elsewhere"), JSON], lambda: b"{}", status=status)


# ---------------------------------------------------------------------------- the server


@dataclass
class Seen:
    scenario: str
    target: str
    endpoint: str
    method: str
    headers: dict[str, str]


@dataclass
class HostileBackend:
    """The server, in a thread with its own event loop. Use as a context manager."""

    manifest_sha256: str
    extra: dict[str, Answer] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    def url(self, scenario: str, target: str = "all", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/h/{scenario}/{target}"

    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self.seen)

    def __enter__(self) -> HostileBackend:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the hostile backend did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0, limit=256 * 1024)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        try:
            await self._one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client hung up, as it should on every hostile answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: Writer) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target_path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        if length:
            await reader.readexactly(length)
        match = re.fullmatch(r"/h/([^/]+)/([^/]+)(/v1/.*)", target_path)
        if match is None:
            writer.write(_head(404, [(b"Content-Length", b"0"), (b"Connection", b"close")]))
            await writer.drain()
            return
        scenario, target, path = match.groups()
        if is_proof_request(path):  # the origin proof is always answered correctly: this backend holds TOKEN
            host, port = writer.get_extra_info("sockname")[:2]
            document = proof_body(TOKEN, path.partition("?")[2], host, port)
            status = 404 if "error" in document else 200
            body = json.dumps(document).encode()
            writer.write(_head(status, [JSON, (b"Content-Length", str(len(body)).encode()),
                                        (b"Connection", b"close")]))
            writer.write(body)
            await writer.drain()
            return
        endpoint = classify(method, path)
        with self._lock:
            self.seen.append(Seen(scenario, target, endpoint, method, headers))
        status, document = valid_answer(endpoint, path, self.manifest_sha256)
        if target in (endpoint, "all") and scenario != "none":
            answer = self.extra.get(scenario) or SCENARIOS[scenario].answer
            await answer(writer, status)
            return
        body = json.dumps(document).encode()
        writer.write(_head(status, [JSON, (b"Content-Length", str(len(body)).encode()), (b"Connection", b"close")]))
        writer.write(body)
        await writer.drain()
