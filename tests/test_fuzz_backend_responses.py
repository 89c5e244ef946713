"""Property tests of the backend response handling: whatever the backend answers, every tool
answers with a well-formed envelope that leaks neither the credential nor raw backend text.

No network: the service talks to an in-process fake of `ito.training.v1` through an
`httpx.MockTransport`. The fake answers every endpoint correctly (shapes from
`backend/models.py`), except for one target endpoint whose response is drawn by hypothesis:
arbitrary bytes, arbitrary JSON, mutations of the valid body, error bodies, any status from 100
to 599, odd headers, and transport failures. The target is parametrised over every endpoint and
the tool that reaches it.

`httpx.MockTransport` bypasses httpcore, whose trace event is how the client learns that a
request left the process (`live_api_contacted`). `TracingMockTransport` fires that event the way
httpcore does, just before the fake sees the request, so the flag can be checked exactly.

The tests at the bottom pin the bugs this fuzzing found (all fixed).

Runs are derandomised (the same examples every run) so the suite stays deterministic.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ito_training_mcp.backend.client import answers as client_answers
from ito_training_mcp.backend.client import refusals as client_refusals
from ito_training_mcp.backend.client import session as client_session
from ito_training_mcp.backend.models import CONFIRMATION_OPERATIONS, REQUIRED_OPERATIONS
from ito_training_mcp.envelope import CONTRACT_CODES, Envelope, ErrorCode
from ito_training_mcp.service import TrainingService
from ito_training_mcp.service import base as service_module

from .conftest import EXAMPLE_MANIFEST
from .proving import is_proof_request, proof_response

CANARY_TOKEN = "itocanary_TOKEN_fuzz_5b7e3c9d1a"
AUTHORIZATION = f"Bearer {CANARY_TOKEN}"
# Id-shaped on purpose (so it can also sit in id fields) but with capitals, so it can never pass
# the client's lower_snake check for backend codes it may legitimately relay in error.details.
MARKER = "ZZfuzzMARKERqq"

NOW = datetime(2026, 11, 29, 20, 0, 0, tzinfo=UTC)
ACCOUNT = "acct-fuzz-01"
BOOKING = "bk-fuzz-01"
RUN_ID = "run-fuzz-01"
SUBMIT_KEY = "fuzz-submit-key-000001"
CANCEL_KEY = "fuzz-cancel-key-000001"
CLEANUP_KEY = "fuzz-cleanup-key-00001"
CREATE_REF, CANCEL_REF, CLEANUP_REF = "conf-create-01", "conf-cancel-01", "conf-cleanup-01"
REQUEST_ID, PLAN_ID = "creq-fuzz-01", "plan-fuzz-01"
MANIFEST_BYTES = EXAMPLE_MANIFEST.read_bytes()
SHA = hashlib.sha256(MANIFEST_BYTES).hexdigest()
_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

ENV = {
    "ITO_API_URL": "http://127.0.0.1:9",
    "ITO_API_KEY": CANARY_TOKEN,
    "ITO_TRAINING_TIMEOUT_S": "2",
    "ITO_TRAINING_CAPABILITIES_TTL_S": "0",
    "ITO_TRAINING_POLL_INTERVAL_S": "0.01",
    "ITO_TRAINING_RECOVERY_ATTEMPTS": "1",
}

_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much]


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------- the fake backend


def valid_run(state: str = "running") -> dict[str, Any]:
    return {
        "run_id": RUN_ID, "booking_id": BOOKING, "account_id": ACCOUNT, "manifest_sha256": SHA,
        "idempotency_key": SUBMIT_KEY, "state": state,
        "created_at": ts(NOW - timedelta(minutes=5)), "updated_at": ts(NOW - timedelta(seconds=5)),
        "stages": [
            {"name": "sft", "state": "succeeded", "gate": {"status": "passed", "evals": {"mmlu": "0.61", "n": 3}}},
            {"name": "dpo", "state": "running", "gate": {"status": "pending", "evals": {}}},
        ],
    }


def valid_confirmation(ref: str) -> dict[str, Any]:
    action = {CREATE_REF: "training.create", CANCEL_REF: "training.cancel", CLEANUP_REF: "training.cleanup"}[ref]
    create = action == "training.create"
    return {
        "ref": ref, "account_id": ACCOUNT, "action": action, "booking_id": BOOKING,
        "run_id": None if create else RUN_ID, "manifest_sha256": SHA if create else None,
        "max_cost_usd": "1500.00", "expires_at": ts(NOW + timedelta(minutes=10)), "consumed": False,
    }


def valid_request(action: str = "training.create") -> dict[str, Any]:
    create = action == "training.create"
    return {
        "request_id": REQUEST_ID, "account_id": ACCOUNT, "action": action, "status": "pending",
        "booking_id": BOOKING, "run_id": None if create else RUN_ID, "plan_id": PLAN_ID if create else None,
        "manifest_sha256": SHA, "max_cost_usd": "1200.00" if create else "0.00",
        "review_url": f"http://127.0.0.1:9/desk/requests/{REQUEST_ID}", "expires_at": ts(NOW + timedelta(hours=1)),
        "created_at": ts(NOW), "decided_at": None, "confirmation_ref": None,
    }


def valid_plan() -> dict[str, Any]:
    return {
        "plan_id": PLAN_ID, "account_id": ACCOUNT, "booking_id": BOOKING, "manifest_sha256": SHA, "valid": True,
        "checks": [{"name": name, "status": "passed", "reason": None, "message": None}
                   for name in ("manifest", "capacity", "fabric", "data_policy", "checkpoint_storage", "budget")],
        "estimate": {"usd": "240.00", "gpu_hours": 96.0, "basis": "3 stages at 2.50 USD per GPU-hour."},
        "confirmation_request": valid_request(), "created_at": ts(NOW),
    }


VALID: dict[str, Callable[[str], tuple[int, Any]]] = {
    "capabilities": lambda _: (200, {"contract_version": "ito.training.v1", "training": {
        "available": True, "operations": [*REQUIRED_OPERATIONS, *CONFIRMATION_OPERATIONS]}}),
    "me": lambda _: (200, {"account_id": ACCOUNT}),
    "eligibility": lambda _: (200, {
        "booking_id": BOOKING, "account_id": ACCOUNT, "eligible": True, "reason": None,
        "gpu_topology": {"gpu": "H100-80GB", "nodes": 2, "gpus_per_node": 8}, "region": "eu-north",
        "fabric": "infiniband", "term_ends_at": ts(NOW + timedelta(days=3)), "checked_at": ts(NOW - timedelta(seconds=5)),
    }),
    "confirmation": lambda ref: (200, valid_confirmation(ref)),
    "runs_by_key": lambda _: (200, {"runs": []}),
    "create": lambda _: (201, valid_run("queued")),
    "run": lambda _: (200, valid_run()),
    "logs": lambda _: (200, {"lines": [{"ts": ts(NOW), "stage": "sft", "message": "step 10 loss 1.9"}],
                             "next_cursor": "c-2"}),
    "metrics": lambda _: (200, {"goodput": 0.97, "interruption_rate": 0.01, "checkpoint_bandwidth_gbps": 12.5,
                                "step": 1200, "loss": 1.82, "cost_usd_to_date": "310.25"}),
    "checkpoints": lambda _: (200, {"checkpoints": [{"checkpoint_id": "ck-1", "step": 1000, "created_at": ts(NOW),
                                                     "size_bytes": 123456789, "uri": "s3://ckpt/run/1000"}]}),
    "cancel": lambda _: (200, valid_run("cancelling")),
    "cleanup": lambda _: (200, {"run_id": RUN_ID, "cleaned": ["checkpoints", "scratch"], "booking_untouched": True}),
    "plan": lambda _: (201, valid_plan()),
    "request_create": lambda _: (201, valid_request("training.cancel")),
    "request": lambda _: (200, {**valid_request(), "status": "confirmed", "decided_at": ts(NOW),
                                "confirmation_ref": CREATE_REF}),
}

# The mutation base of each target, when it differs from the default answer above.
MUTATION_BASE: dict[str, Callable[[str], Any]] = {
    "runs_by_key": lambda _: {"runs": [valid_run()]},
}


def classify(request: httpx.Request) -> tuple[str, str]:
    """(endpoint, detail) for a request; detail is the confirmation ref or run id where there is one."""
    method, path = request.method, request.url.path
    table = {
        ("GET", "/v1/capabilities"): "capabilities",
        ("GET", "/v1/me"): "me",
        ("GET", f"/v1/bookings/{BOOKING}/training-eligibility"): "eligibility",
        ("GET", "/v1/training-runs"): "runs_by_key",
        ("POST", "/v1/training-runs"): "create",
        ("POST", "/v1/training-plans"): "plan",
        ("POST", "/v1/confirmation-requests"): "request_create",
        ("GET", f"/v1/confirmation-requests/{REQUEST_ID}"): "request",
    }
    if (method, path) in table:
        return table[(method, path)], ""
    prefix = "/v1/confirmations/"
    if method == "GET" and path.startswith(prefix) and path[len(prefix):] in (CREATE_REF, CANCEL_REF, CLEANUP_REF):
        return "confirmation", path[len(prefix):]
    runs = {("GET", ""): "run", ("GET", "/logs"): "logs", ("GET", "/metrics"): "metrics",
            ("GET", "/checkpoints"): "checkpoints", ("POST", "/cancel"): "cancel", ("POST", "/cleanup"): "cleanup"}
    match = re.fullmatch(r"/v1/training-runs/([A-Za-z0-9._:-]{1,128})(/[a-z]+)?", path)
    if match and (method, match.group(2) or "") in runs:
        return runs[(method, match.group(2) or "")], match.group(1)
    return "unexpected", f"{method} {path}"


TRANSPORT_ERRORS: dict[str, type[httpx.TransportError]] = {
    "read_error": httpx.ReadError,
    "remote_protocol_error": httpx.RemoteProtocolError,
    "read_timeout": httpx.ReadTimeout,
    "write_error": httpx.WriteError,
}


@dataclass(frozen=True)
class Reply:
    """One drawn answer: a response, or a transport failure after the request was sent."""

    status: int = 200
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""
    failure: str | None = None

    def response(self, request: httpx.Request) -> httpx.Response:
        if self.failure is not None:
            raise TRANSPORT_ERRORS[self.failure]("fuzzed transport failure", request=request)
        return httpx.Response(self.status, headers=list(self.headers), content=self.body)


RUN_ENDPOINTS = frozenset({"run", "logs", "metrics", "checkpoints", "cancel", "cleanup"})
POST_KEYS = {"create": SUBMIT_KEY, "cancel": CANCEL_KEY, "cleanup": CLEANUP_KEY}
UNKEYED_POSTS = frozenset({"plan", "request_create"})  # never resent, whatever the answer


class FakeBackend:
    """A correct `ito.training.v1` backend, except that `target` answers with `reply`."""

    def __init__(self, target: str | None = None, reply: Reply | None = None,
                 sequences: dict[str, list[Reply | None]] | None = None) -> None:
        self.replies = {} if target is None or reply is None else {target: reply}
        # Per endpoint, the answers of its successive requests (None: the valid one), then valid ones.
        self.sequences = {endpoint: list(replies) for endpoint, replies in (sequences or {}).items()}
        self.seen: list[str] = []
        self.authorized: list[bool] = []
        self.problems: list[str] = []
        self.posts: dict[str, list[tuple[str | None, bytes]]] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if is_proof_request(request.url.path):  # plain http: the backend proves itself before the token goes
            return proof_response(request, CANARY_TOKEN)
        endpoint, detail = classify(request)
        self.seen.append(endpoint)
        auth = request.headers.get("authorization")
        self.authorized.append(auth is not None)
        if endpoint == "unexpected":
            self.problems.append(f"unexpected request {detail}")
            return httpx.Response(599)
        if endpoint == "capabilities" and auth is not None:
            self.problems.append("the credential was sent to the capabilities endpoint")
        if endpoint != "capabilities" and auth != AUTHORIZATION:
            self.problems.append(f"{endpoint} without the configured credential")
        if endpoint in POST_KEYS or endpoint in UNKEYED_POSTS:
            self.posts.setdefault(endpoint, []).append((request.headers.get("idempotency-key"), request.content))
        if endpoint in self.replies:
            return self.replies[endpoint].response(request)
        queued = self.sequences.get(endpoint)
        if queued:
            drawn = queued.pop(0)
            if drawn is not None:
                return drawn.response(request)
        if endpoint in RUN_ENDPOINTS and detail != RUN_ID:
            # A run id the backend itself handed out in a fuzzed answer: this tenant has no such run.
            return httpx.Response(404, json={"error": {"code": "run_not_found", "message": "no such run"}})
        status, body = VALID[endpoint](detail)
        return httpx.Response(status, json=body)


class TracingMockTransport(httpx.MockTransport):
    """A MockTransport that fires httpcore's 'request headers started' trace event, as the real one does."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        trace = request.extensions.get("trace")
        if trace is not None:
            await trace("http11.send_request_headers.started", {"request": request})
        return await super().handle_async_request(request)


def make_service(fake: FakeBackend) -> TrainingService:
    return TrainingService(ENV, transport=TracingMockTransport(fake), clock=lambda: NOW)


@pytest.fixture(scope="module")
def manifest_file() -> Iterator[str]:
    """The example manifest, 0600 in a private 0700 directory; its digest computed locally."""
    d = tempfile.mkdtemp(prefix="ito-fuzz-")
    os.chmod(d, 0o700)
    path = Path(d) / "manifest.json"
    path.write_bytes(MANIFEST_BYTES)
    os.chmod(path, 0o600)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA
    try:
        yield str(path)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def fast_recovery() -> Iterator[None]:
    """No real sleeping between recovery rounds: the number of rounds, not their pacing, is under test."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(service_module, "RECOVERY_BACKOFF_S", (0.0,))
        mp.setattr(client_session, "_RETRY_BACKOFF_S", (0.0, 0.0))
        yield


@pytest.fixture(autouse=True)
def forget_revocations() -> Iterator[None]:
    """The client remembers revoked tokens for the life of the process; each test starts clean."""
    client_refusals._revoked_fingerprints.clear()
    yield
    client_refusals._revoked_fingerprints.clear()


# ---------------------------------------------------------------------------- the tools

Drive = Callable[[TrainingService, str], Any]

TOOLS: dict[str, Drive] = {
    "check": lambda s, _: s.check_training_availability(booking_id=BOOKING),
    "submit": lambda s, path: s.submit_training(BOOKING, path, CREATE_REF, SUBMIT_KEY),
    "status": lambda s, _: s.training_status(run_id=RUN_ID),
    "status_by_key": lambda s, _: s.training_status(idempotency_key=SUBMIT_KEY),
    "logs": lambda s, _: s.training_logs(RUN_ID, cursor="c-1", limit=50),
    "metrics": lambda s, _: s.training_metrics(RUN_ID),
    "checkpoints": lambda s, _: s.list_checkpoints(RUN_ID),
    "cancel": lambda s, _: s.cancel_training(RUN_ID, CANCEL_REF, CANCEL_KEY),
    "cleanup": lambda s, _: s.cleanup_training(RUN_ID, CLEANUP_REF, CLEANUP_KEY),
    "plan": lambda s, path: s.plan_training(BOOKING, path),
    "request_confirmation": lambda s, _: s.request_confirmation("training.cancel", RUN_ID),
    "confirmation_status": lambda s, _: s.confirmation_status(REQUEST_ID),
}

# The endpoints each tool reaches, in order, when every answer is valid.
FLOWS: dict[str, list[str]] = {
    "check": ["capabilities", "me", "eligibility"],
    "submit": ["capabilities", "me", "eligibility", "runs_by_key", "confirmation", "create"],
    "status": ["capabilities", "run"],
    "status_by_key": ["capabilities", "runs_by_key"],
    "logs": ["capabilities", "logs"],
    "metrics": ["capabilities", "metrics"],
    "checkpoints": ["capabilities", "checkpoints"],
    "cancel": ["capabilities", "me", "confirmation", "cancel"],
    "cleanup": ["capabilities", "me", "confirmation", "cleanup"],
    "plan": ["capabilities", "me", "eligibility", "plan"],
    "request_confirmation": ["capabilities", "me", "request_create"],
    "confirmation_status": ["capabilities", "me", "request"],
}

# (target endpoint, tool that reaches it): every endpoint, through every tool that reaches it.
TARGETS: list[tuple[str, str]] = [
    ("capabilities", "check"),
    ("me", "check"),
    ("eligibility", "check"),
    ("eligibility", "submit"),
    ("runs_by_key", "submit"),
    ("runs_by_key", "status_by_key"),
    ("confirmation", "submit"),
    ("confirmation", "cancel"),
    ("confirmation", "cleanup"),
    ("create", "submit"),
    ("run", "status"),
    ("logs", "logs"),
    ("metrics", "metrics"),
    ("checkpoints", "checkpoints"),
    ("cancel", "cancel"),
    ("cleanup", "cleanup"),
    ("eligibility", "plan"),
    ("plan", "plan"),
    ("me", "request_confirmation"),
    ("request_create", "request_confirmation"),
    ("request", "confirmation_status"),
]
TARGET_IDS = [f"{target}-via-{tool}" for target, tool in TARGETS]
REF_OF_TOOL = {"submit": CREATE_REF, "cancel": CANCEL_REF, "cleanup": CLEANUP_REF}


def base_body(target: str, tool: str) -> Any:
    detail = REF_OF_TOOL.get(tool, "")
    if target in MUTATION_BASE:
        return MUTATION_BASE[target](detail)
    return VALID[target](detail)[1]


# ---------------------------------------------------------------------------- strategies

_NO_SURROGATES = st.characters(codec="utf-8")
marked_text = st.one_of(
    st.just(MARKER),
    st.tuples(st.text(_NO_SURROGATES, max_size=12), st.text(_NO_SURROGATES, max_size=12)).map(
        lambda p: p[0] + MARKER + p[1]
    ),
)
# What a careless or hostile backend might echo: the client's own credential.
echoed_secret = st.sampled_from([
    CANARY_TOKEN, AUTHORIZATION, f"invalid token {CANARY_TOKEN} ({MARKER})", f"Authorization: {AUTHORIZATION}",
])
texts = st.one_of(st.text(max_size=30), marked_text, echoed_secret)
mutation_texts = st.one_of(st.text(max_size=30), marked_text)

# 10**400 cannot be a float: the models must refuse it (BACKEND_INVALID_RESPONSE), not crash.
huge_ints = st.sampled_from([2**53 + 1, 2**63, -(2**63) - 1, 2**64, 10**30, 10**300, -(10**300), 10**400])
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), huge_ints, st.floats(allow_nan=True, allow_infinity=True), texts,
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=25,
)

ID_FIELDS = frozenset({"run_id", "booking_id", "account_id", "ref", "checkpoint_id", "idempotency_key",
                       "manifest_sha256", "request_id", "plan_id", "confirmation_ref"})
TIME_FIELDS = frozenset({"created_at", "updated_at", "term_ends_at", "checked_at", "expires_at", "ts", "decided_at"})
MONEY_FIELDS = frozenset({"max_cost_usd", "cost_usd_to_date", "usd"})

other_ids = st.sampled_from([
    "run-other-99", "acct-other-99", "bk-other-99", "conf-other-99", MARKER, f"{MARKER}-run", "", "x" * 129,
    "../etc", "a b", "...", "0" * 64, "A" * 64, 17, None, True, ["run-fuzz-01"],
])
odd_timestamps = st.one_of(
    st.sampled_from([
        "2026-11-29", "2026-11-29 20:00:00Z", "2026-11-29T20:00:00", "2026-13-40T25:61:61Z",
        "2026-11-29T20:00:00.1234567890Z", "2026-11-29T20:00:00.123456789Z", "2026-11-29T20:00:00+25:00",
        "2026-11-29T20:00:00z", "yesterday", "", "\u0662\u0660\u0662\u0666-11-29T20:00:00Z",
        "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2026-02-30T00:00:00Z", "1969-12-31T23:59:60Z",
        "2026-11-29T20:00:00-00:00", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00",
        ts(NOW - timedelta(days=1)), ts(NOW + timedelta(days=1)),
        ts(NOW - timedelta(hours=1)), ts(NOW), 1764446400, 1764446400.5, None, MARKER,
    ]),
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
)
odd_money = st.sampled_from([
    1500.0, 1500, 1e3, "1500", "1,500.00", "1e3", "-1.00", "NaN", "Infinity", "0.0000001", "1500.00 ", "$1500.00",
    None, "99999999999999999999.00", "0.00", "100000.00", "1199.99", "1200.00", "001500.00", MARKER,
])
replacement_values = st.one_of(
    st.none(), st.booleans(), st.integers(), huge_ints, st.floats(allow_nan=True, allow_infinity=True),
    mutation_texts, st.lists(st.integers(), max_size=3), st.dictionaries(mutation_texts, st.integers(), max_size=3),
    odd_timestamps, odd_money, other_ids,
)

Path_ = tuple[str | int, ...]


def _paths(doc: Any, prefix: Path_ = ()) -> list[Path_]:
    out: list[Path_] = []
    items: Any = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


def _container(doc: Any, path: Path_) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


ALL_OPS = ("drop", "retype", "extra", "id", "time", "money", "marker", "flag", "state")
# Edits that keep the body well typed more often, so they reach the semantic checks behind validation.
SEMANTIC_OPS = ("id", "time", "money", "marker", "flag", "state")
STATE_FIELDS = frozenset({"state", "status", "action", "contract_version", "reason", "valid"})
other_states = st.sampled_from([
    "queued", "validating", "running", "gate_failed", "succeeded", "failed", "cancelling", "cancelled",
    "cleaned_up", "pending", "passed", "failed", "confirmed", "declined", "training.create", "training.cancel",
    "training.cleanup", "ito.training.v2",
    "expired", "revoked", "released", "incomplete", "mismatch", "RUNNING", "", MARKER,
])


@st.composite
def mutations(draw: st.DrawFn, base: Any, ops: tuple[str, ...] = ALL_OPS, most: int = 3) -> Any:
    """The valid body with 1-3 edits: fields dropped, retyped, added, given other ids, times, money,
    states, flipped flags, or text carrying the marker."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, most))):
        paths = _paths(doc)
        op = draw(st.sampled_from(ops))
        named = {"id": ID_FIELDS, "time": TIME_FIELDS, "money": MONEY_FIELDS, "state": STATE_FIELDS}
        if op in named:
            candidates = [p for p in paths if p[-1] in named[op]]
            value = draw({"id": other_ids, "time": odd_timestamps, "money": odd_money, "state": other_states}[op])
        elif op == "flag":
            candidates = [p for p in paths if isinstance(_container(doc, p)[p[-1]], bool)]
            if candidates:
                path = draw(st.sampled_from(candidates))
                _container(doc, path)[path[-1]] = not _container(doc, path)[path[-1]]
            continue
        elif op == "marker":
            candidates = [p for p in paths if isinstance(_container(doc, p)[p[-1]], str)]
            value = draw(marked_text)
        elif op == "extra":
            holders = [()] + [p for p in paths if isinstance(_container(doc, p)[p[-1]], dict)]
            holder = draw(st.sampled_from(holders))
            target = _container(doc, (*holder, "_"))
            target[draw(st.one_of(mutation_texts, st.sampled_from(sorted(ID_FIELDS | TIME_FIELDS))))] = draw(
                replacement_values)
            continue
        else:
            candidates = paths
            value = draw(replacement_values)
        if not candidates:
            continue
        path = draw(st.sampled_from(candidates))
        holder = _container(doc, path)
        if op == "drop":
            del holder[path[-1]]
        else:
            holder[path[-1]] = value
    return doc


def _with_duplicate_key(doc: Any) -> str:
    """The valid body as text with its first key written twice: first carrying the marker, then its real
    value (a last-wins parser would accept it silently)."""
    text = json.dumps(doc)
    if not isinstance(doc, dict) or not doc:
        return '{"a": 1, "a": 2}'
    key = next(iter(doc))
    return "{" + json.dumps(key) + ": " + json.dumps(MARKER) + ", " + text[1:]


def json_texts(base: Any) -> st.SearchStrategy[bytes]:
    base_text = json.dumps(base)
    return st.one_of(
        json_values.map(lambda v: json.dumps(v, allow_nan=True)),
        st.integers(1, 200).map(lambda n: "[" * n + "]" * n),
        st.integers(1, 200).map(lambda n: '{"a":' * n + "1" + "}" * n),
        st.sampled_from([5000, 100_000]).map(lambda n: "[" * n),
        st.just(5000).map(lambda n: "[" * n + "]" * n),
        st.integers(4301, 6000).map(lambda n: '{"goodput": ' + "9" * n + ', "runs": ' + "1" * n + "}"),
        st.sampled_from([
            "NaN", "Infinity", "-Infinity", '{"a": NaN}', '{"goodput": Infinity, "loss": -Infinity}', "", " ",
            "null", "true", '"string"', "{", '{"a":1,"a":2}', "\ufeff{}", '{"a":"\\ud800"}', '{"a": 1} trailing',
            "[1,]", "{'a': 1}", '{"error": {"code": "run_not_found", "code": "budget_exceeded"}}',
            base_text.replace("1500.00", "NaN").replace('"running"', "NaN"), "\ufeff" + base_text,
            base_text + base_text, base_text[:-1],
        ]),
        st.just(_with_duplicate_key(base)),
    ).map(lambda text: text.encode("utf-8", "surrogatepass"))


raw_bytes = st.one_of(
    st.binary(max_size=512),
    st.tuples(st.binary(max_size=64), st.binary(max_size=64)).map(lambda p: p[0] + MARKER.encode() + p[1]),
    st.tuples(st.binary(max_size=64), echoed_secret).map(lambda p: p[0] + p[1].encode()),
    st.sampled_from([b"\xff\xfe{}", b'{"a": "\xc3"}', b'{"a": "\xed\xa0\x80"}', b"<html>" + MARKER.encode()]),
)

BACKEND_CODES = [
    *client_answers._ERROR_CODES, "credential_revoked", "forbidden", "insufficient_scope", "rate_limited",
    "internal", "Run_Not_Found", "", "x" * 200, MARKER,
]
error_bodies = st.one_of(
    st.builds(
        lambda code, message, reason, extra: {"error": {"code": code, "message": message, "reason": reason, **extra}},
        st.one_of(st.sampled_from(BACKEND_CODES), texts),
        st.one_of(st.none(), texts),
        st.one_of(st.none(), st.sampled_from(["expired", "revoked", "released", "mismatch", MARKER]), texts),
        st.dictionaries(st.sampled_from(["detail", "hint", "trace"]), texts, max_size=2),
    ),
    st.builds(lambda v: {"error": v}, json_values),
    st.builds(lambda code, m: {"error": {"code": code}, "message": m}, st.sampled_from(BACKEND_CODES), texts),
).map(lambda doc: json.dumps(doc, allow_nan=True).encode())

HEADER_SAMPLES: dict[str, list[str]] = {
    "www-authenticate": [
        "Bearer", 'Bearer realm="ito"', 'Bearer error="insufficient_scope"', f'Bearer error_description="{MARKER}"',
        f'Basic realm="{MARKER}"', AUTHORIZATION, 'Bearer error="invalid_request"', "",
    ],
    "content-type": [
        "application/json", "application/json; charset=utf-8", "application/problem+json", "text/html",
        "text/plain", "application/jsonx", "", "APPLICATION/JSON", "application/json;", f"text/{MARKER}",
    ],
    "content-length": ["0", "1", "-1", "1e3", " 12", "99999999999999999999", str(2**20 + 1), "12, 12", "abc", "",
                       "\u0663", "\u00b2", "9" * 5000],
    "location": ["http://127.0.0.1:9/v1/me", "https://evil.example/steal", f"/{MARKER}", "//evil.example", ""],
    "retry-after": ["0", "120", "-1", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999", "1.5", MARKER, "",
                    "\u0663", "\u00b2", "1" * 5000],
}


def header_values(name: str) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.sampled_from(HEADER_SAMPLES[name]).map(str.encode),
        st.binary(max_size=48),
        st.text(_NO_SURROGATES, max_size=48).map(str.encode),
        st.one_of(marked_text, echoed_secret).map(str.encode),
    )


@st.composite
def header_sets(draw: st.DrawFn, json_likely: bool = True) -> tuple[tuple[bytes, bytes], ...]:
    headers: list[tuple[bytes, bytes]] = []
    if json_likely and draw(st.sampled_from([True, True, True, False])):
        headers.append((b"Content-Type", draw(st.sampled_from([b"application/json", b"application/json; charset=utf-8"]))))
    elif draw(st.booleans()):
        headers.append((b"Content-Type", draw(header_values("content-type"))))
    for name in ("www-authenticate", "content-length", "location", "retry-after"):
        if draw(st.sampled_from([True, False, False, False])):
            headers.append((name.title().encode(), draw(header_values(name))))
    return tuple(headers)


any_status = st.integers(100, 599)
contract_statuses = st.sampled_from([400, 401, 402, 403, 404, 409, 410, 422, 429, 500, 502, 503])
success_mostly = st.one_of(st.sampled_from([200, 201]), any_status)


def replies(base: Any) -> st.SearchStrategy[Reply]:
    # Three distinct copies (one_of drops repeats of one object): single well-typed edits are the ones
    # that reach the checks behind validation, so they get three shares of the examples.
    semantic = [
        st.builds(Reply, status=st.sampled_from([200, 201]), headers=st.just(((b"Content-Type", b"application/json"),)),
                  body=mutations(base, SEMANTIC_OPS, 1).map(lambda d: json.dumps(d).encode()))
        for _ in range(3)
    ]
    return st.one_of(
        st.builds(Reply, status=success_mostly, headers=header_sets(json_likely=False), body=raw_bytes),
        st.builds(Reply, status=success_mostly, headers=header_sets(), body=json_texts(base)),
        st.builds(Reply, status=st.sampled_from([200, 201]), headers=header_sets(),
                  body=mutations(base).map(lambda d: json.dumps(d, allow_nan=True).encode())),
        *semantic,
        st.builds(Reply, status=success_mostly, headers=header_sets(),
                  body=mutations(base).map(lambda d: json.dumps(d, allow_nan=True).encode())),
        st.builds(Reply, status=any_status, headers=header_sets(), body=st.just(json.dumps(base).encode())),
        st.builds(Reply, status=st.one_of(contract_statuses, any_status), headers=header_sets(), body=error_bodies),
        st.builds(Reply, failure=st.sampled_from(sorted(TRANSPORT_ERRORS))),
    )


# ---------------------------------------------------------------------------- the properties


def assert_well_formed(env: Envelope, fake: FakeBackend) -> dict[str, Any]:
    """Every envelope, whatever the backend said."""
    assert isinstance(env, Envelope)
    text = env.to_json()
    text.encode("utf-8")
    wire = json.loads(text)
    assert isinstance(wire, dict)
    assert wire["ok"] is env.ok
    assert ("data" in wire) is env.ok
    assert ("error" in wire) is (not env.ok)
    assert (env.data is None) is (not env.ok)
    assert (env.error is None) is env.ok
    # Every tool here reaches the backend (capabilities comes first), and the flag is exact.
    assert fake.seen, "the tool never reached the backend"
    assert env.live_api_contacted is True
    assert fake.problems == []
    # The credential never appears, whatever the backend echoed.
    assert CANARY_TOKEN not in text
    assert CANARY_TOKEN not in json.dumps(wire)
    if not env.ok:
        assert env.error is not None
        assert env.error.code in CONTRACT_CODES, f"{env.error.code} is not a contract code (a defect was hit)"
        assert isinstance(env.error.retryable, bool)
        assert env.notice.startswith("Stop:")
    return dict(wire)


def assert_no_backend_text(wire: dict[str, Any]) -> None:
    """A refusal relays no backend text: only validated codes and ids (the conflicting run's id)."""
    error = copy.deepcopy(wire["error"])
    details = error.get("details") or {}
    if error["code"] == "IDEMPOTENCY_CONFLICT" and "run_id" in details:
        assert _ID.fullmatch(details.pop("run_id"))
    for key in ("backend_code", "reason"):
        if key in details and isinstance(details[key], str):
            assert re.fullmatch(r"[a-z][a-z0-9_]{0,63}", details[key]), details
    rendered = json.dumps({**wire, "error": error}, ensure_ascii=False)
    assert MARKER not in rendered
    assert MARKER not in json.dumps({**wire, "error": error})


def assert_posts_are_replays(fake: FakeBackend, manifest_bytes: bytes = MANIFEST_BYTES) -> None:
    """Every mutating request of a call carries its own key and the very same bytes; bounded resends.
    A plan or a confirmation request (not keyed) is sent once, whatever the answer."""
    for endpoint in UNKEYED_POSTS & fake.posts.keys():
        posts = fake.posts.pop(endpoint)
        assert len(posts) == 1, f"{endpoint} sent {len(posts)} times"
        assert posts[0][0] is None  # no idempotency key: the backend does not key it
        if endpoint == "plan":
            body = json.loads(posts[0][1])
            assert body == {"booking_id": BOOKING, "manifest_sha256": SHA,
                            "manifest_b64": base64.b64encode(manifest_bytes).decode()}
    for endpoint, posts in fake.posts.items():
        assert 1 <= len(posts) <= 2, f"{endpoint} sent {len(posts)} times (recovery_attempts=1)"
        assert {key for key, _ in posts} == {POST_KEYS[endpoint]}
        assert len({content for _, content in posts}) == 1
        if endpoint == "create":
            body = json.loads(posts[0][1])
            assert body["manifest_sha256"] == SHA
            assert base64.b64decode(body["manifest_b64"]) == manifest_bytes


@pytest.mark.parametrize(("tool"), sorted(FLOWS))
async def test_baseline_every_tool_succeeds_against_the_valid_fake(tool: str, manifest_file: str) -> None:
    """The harness itself: with no fuzzed endpoint every tool succeeds along its exact flow."""
    fake = FakeBackend()
    env = await TOOLS[tool](make_service(fake), manifest_file)
    assert env.ok, env.to_json()
    assert fake.seen == FLOWS[tool]
    assert fake.authorized == [endpoint != "capabilities" for endpoint in FLOWS[tool]]
    assert_well_formed(env, fake)
    assert_posts_are_replays(fake)


# Examples per (target, tool), 1,530 in all: submit and plan walk several endpoints and read the manifest, so their
# targets get fewer examples each; together the file stays well under 30 s.
EXAMPLES: dict[tuple[str, str], int] = {pair: 30 if pair[1] in ("submit", "plan") else 45 for pair in TARGETS}


def call(tool: str, fake: FakeBackend, manifest_file: str) -> Envelope:
    async def go() -> Envelope:
        result: Envelope = await TOOLS[tool](make_service(fake), manifest_file)
        return result

    return anyio.run(go)


@pytest.mark.parametrize(("target", "tool"), TARGETS, ids=TARGET_IDS)
def test_any_response_gives_a_safe_envelope(target: str, tool: str, manifest_file: str) -> None:
    @settings(max_examples=EXAMPLES[(target, tool)], deadline=None, derandomize=True, database=None,
              suppress_health_check=_HEALTH)
    @given(reply=replies(base_body(target, tool)))
    def check(reply: Reply) -> None:
        client_refusals._revoked_fingerprints.clear()
        fake = FakeBackend(target, reply)
        env = call(tool, fake, manifest_file)
        wire = assert_well_formed(env, fake)
        assert target in fake.seen, "the fuzzed endpoint was never reached"
        flow = FLOWS[tool]
        assert fake.seen[: flow.index(target) + 1] == flow[: flow.index(target) + 1]
        assert_posts_are_replays(fake)
        event(f"outcome: {env.error.code.value if env.error else 'ok'}")
        if not env.ok:
            assert_no_backend_text(wire)

    check()


def _case(draw: st.DrawFn, word: str) -> str:
    return "".join(draw(st.sampled_from([ch.lower(), ch.upper()])) for ch in word)


@st.composite
def revoking_401s(draw: st.DrawFn) -> Reply:
    """A 401 saying the token is revoked: `error="invalid_token"` in any casing, quoted or not, or the body code."""
    if draw(st.booleans()):
        quote = draw(st.sampled_from(['"', ""]))
        param = (f"{_case(draw, 'error')}{draw(st.sampled_from(['', ' ', chr(9)]))}="
                 f"{draw(st.sampled_from(['', ' ']))}{quote}{_case(draw, 'invalid_token')}{quote}")
        scheme = draw(st.sampled_from(["Bearer", "bearer", "BEARER", "DPoP"]))
        before = draw(st.sampled_from(["", 'realm="ito", ', 'realm="ito",scope="training read", ']))
        after = draw(st.sampled_from(["", ', error_description="The access token expired"',
                                      f', error_description="{MARKER}"', f', error_uri="https://x/{MARKER}"']))
        challenge = f"{scheme} {before}{param}{after}".encode()
        body = draw(st.one_of(error_bodies, raw_bytes))
        json_body = draw(st.booleans())
    else:
        # The body code is read only from a JSON body (the client parses nothing else).
        challenge = draw(st.sampled_from([b"", b'Bearer realm="ito"', b"Bearer"]))
        body = json.dumps({"error": {"code": "credential_revoked", "message": draw(texts)}}).encode()
        json_body = True
    headers = [(b"WWW-Authenticate", challenge)] if challenge else []
    if json_body:
        headers.append((b"Content-Type", draw(st.sampled_from([b"application/json", b"application/problem+json"]))))
    return Reply(401, tuple(headers), body)


@pytest.mark.parametrize(("target", "tool"), TARGETS, ids=TARGET_IDS)
def test_revoked_credential_stops_the_call_at_once(target: str, tool: str, manifest_file: str) -> None:
    @settings(max_examples=12, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
    @given(reply=revoking_401s())
    def check(reply: Reply) -> None:
        client_refusals._revoked_fingerprints.clear()
        fake = FakeBackend(target, reply)
        env = call(tool, fake, manifest_file)
        wire = assert_well_formed(env, fake)
        assert env.error is not None, env.to_json()
        assert env.error.code is ErrorCode.CREDENTIAL_REVOKED, env.to_json()
        assert env.error.retryable is False
        assert_no_backend_text(wire)
        # The 401 was the last request of the call: no retry, no polling, no recovery lookup.
        assert fake.seen[-1] == target
        assert fake.seen.count(target) == 1
        if target == "capabilities":
            return  # no credential had been attached yet, so there is nothing to remember
        # And the token is never sent again: the next call stops after the unauthenticated capabilities.
        again = FakeBackend()
        second = call(tool, again, manifest_file)
        assert second.error is not None
        assert second.error.code is ErrorCode.CREDENTIAL_REVOKED
        assert again.seen == ["capabilities"]
        assert again.authorized == [False]

    check()


AMBIGUOUS = Reply(503, ((b"Content-Type", b"application/json"),), b'{"error": {"code": "unavailable"}}')
REVOKED = Reply(401, ((b"WWW-Authenticate", b'Bearer error="invalid_token"'),), b"")


@pytest.mark.parametrize(
    ("tool", "ambiguous", "lookup"),
    [("submit", "create", "runs_by_key"), ("cancel", "cancel", "run"), ("cleanup", "cleanup", "run")],
)
def test_revocation_during_recovery_stops_the_call(tool: str, ambiguous: str, lookup: str, manifest_file: str) -> None:
    """An ambiguous mutation is followed by a lookup; a revoked token there ends the call, with no resend."""
    # Gate 5 looks the key up once before the create; the recovery lookup is the next one.
    before = [None] if lookup == "runs_by_key" else []
    fake = FakeBackend(sequences={ambiguous: [AMBIGUOUS], lookup: [*before, REVOKED]})
    env = call(tool, fake, manifest_file)
    assert_well_formed(env, fake)
    assert env.error is not None
    assert env.error.code is ErrorCode.CREDENTIAL_REVOKED, env.to_json()
    assert fake.seen[-2:] == [ambiguous, lookup]
    assert fake.seen.count(ambiguous) == 1
    if tool == "submit":
        assert env.error.details is not None
        assert env.error.details["submission_outcome"] == "unknown"
        assert env.error.details["idempotency_key"] == SUBMIT_KEY


# ---------------------------------------------------------------------------- bugs the fuzzing found (fixed)


async def _one(target: str, tool: str, reply: Reply, manifest_file: str) -> tuple[Envelope, FakeBackend]:
    fake = FakeBackend(target, reply)
    return await TOOLS[tool](make_service(fake), manifest_file), fake


def _json_reply(doc: Any, status: int = 200) -> Reply:
    return Reply(status, ((b"Content-Type", b"application/json"),), json.dumps(doc).encode())


async def test_bug_huge_integer_metric_is_an_invalid_response(manifest_file: str) -> None:
    env, _ = await _one("metrics", "metrics", _json_reply({"goodput": 10**400}), manifest_file)
    assert env.error is not None
    assert env.error.code is ErrorCode.BACKEND_INVALID_RESPONSE


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
async def test_bug_out_of_range_timestamp_is_an_invalid_response(stamp: str, manifest_file: str) -> None:
    doc = VALID["checkpoints"]("")[1]
    doc["checkpoints"][0]["created_at"] = stamp
    env, _ = await _one("checkpoints", "checkpoints", _json_reply(doc), manifest_file)
    assert env.error is not None
    assert env.error.code is ErrorCode.BACKEND_INVALID_RESPONSE


async def test_bug_created_run_with_out_of_range_timestamp_is_not_recovered(manifest_file: str) -> None:
    doc = valid_run("queued")
    doc["updated_at"] = "0001-01-01T00:00:00+01:00"
    env, fake = await _one("create", "submit", _json_reply(doc, 201), manifest_file)
    assert env.error is not None
    assert env.error.code is not ErrorCode.INTERNAL_ERROR
    assert "runs_by_key" in fake.seen[fake.seen.index("create"):]


@pytest.mark.parametrize("value", ["\u00b2".encode(), b"9" * 5000], ids=["superscript-two", "5000-digits"])
async def test_bug_odd_content_length_is_an_invalid_response(value: bytes, manifest_file: str) -> None:
    reply = Reply(200, ((b"Content-Type", b"application/json"), (b"Content-Length", value)), b"{}")
    env, _ = await _one("metrics", "metrics", reply, manifest_file)
    assert env.error is not None
    assert env.error.code is ErrorCode.BACKEND_INVALID_RESPONSE


@pytest.mark.parametrize("value", ["\u00b2".encode(), b"1" * 5000], ids=["superscript-two", "5000-digits"])
async def test_bug_odd_retry_after_is_still_rate_limited(value: bytes, manifest_file: str) -> None:
    reply = Reply(429, ((b"Content-Type", b"application/json"), (b"Retry-After", value)), b"{}")
    env, _ = await _one("run", "status", reply, manifest_file)
    assert env.error is not None
    assert env.error.code is ErrorCode.RATE_LIMITED


# A backend that echoes the client's own credential into a field the client relays on success.
# `_safe_text` scans log messages and checkpoint uris for token *shapes* only; nothing compares
# relayed text with the configured credential, and stage names, evals, cleaned items and the
# eligibility text fields are relayed unscanned.
def _echo_case(target: str, tool: str, edit: Callable[[Any], None]) -> tuple[str, str, Any]:
    doc = copy.deepcopy(VALID[target](REF_OF_TOOL.get(tool, ""))[1])
    edit(doc)
    return target, tool, doc


def _set_stage_name(doc: Any) -> None:
    doc["stages"][0]["name"] = CANARY_TOKEN


def _set_eval(doc: Any) -> None:
    doc["stages"][0]["gate"]["evals"]["note"] = AUTHORIZATION


def _set_log(doc: Any) -> None:
    doc["lines"][0]["message"] = f"auth failed for token {CANARY_TOKEN}"


def _set_log_bearer(doc: Any) -> None:
    doc["lines"][0]["message"] = f"sent {AUTHORIZATION}"


def _set_cleaned(doc: Any) -> None:
    doc["cleaned"].append(CANARY_TOKEN)


def _set_region(doc: Any) -> None:
    doc["region"] = CANARY_TOKEN


ECHOES = {
    "log-message-bearer": (_echo_case("logs", "logs", _set_log_bearer), False),
    "log-message-bare-token": (_echo_case("logs", "logs", _set_log), True),
    "stage-name": (_echo_case("run", "status", _set_stage_name), True),
    "eval-value-bearer": (_echo_case("run", "status", _set_eval), True),
    "cleaned-item": (_echo_case("cleanup", "cleanup", _set_cleaned), True),
    "eligibility-region": (_echo_case("eligibility", "check", _set_region), True),
}


@pytest.mark.parametrize(
    ("target", "tool", "doc"),
    [
        pytest.param(*case, id=name) for name, (case, _) in ECHOES.items()
    ],
)
async def test_an_echoed_credential_never_reaches_the_envelope(
    target: str, tool: str, doc: Any, manifest_file: str
) -> None:
    status = VALID[target](REF_OF_TOOL.get(tool, ""))[0]
    env, _ = await _one(target, tool, _json_reply(doc, status), manifest_file)
    assert env.ok, env.to_json()
    assert CANARY_TOKEN not in env.to_json()
