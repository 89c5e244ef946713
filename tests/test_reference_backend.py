"""The reference backend over real HTTP on loopback: auth, tenancy, create, faults, lifecycle.

Every test talks to a `ReferenceBackend` (uvicorn in a thread on an ephemeral port) with httpx,
and checks "at most one run per key" in the backend's own SQLite database.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from ito_training_reference import OperatorClient, OperatorError, ReferenceBackend, create_app
from ito_training_reference.cli import main as backend_main
from ito_training_reference.cli import operator_token
from ito_training_reference.operator_auth import NONCE_PATH

REPO = Path(__file__).resolve().parent.parent
MANIFEST = (REPO / "examples" / "manifest.json").read_bytes()
DOC: dict[str, Any] = json.loads(MANIFEST)
CREATE = "POST /v1/training-runs"
_counter = iter(range(1_000_000))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def variant(**changes: Any) -> bytes:
    return json.dumps({**DOC, **changes}, indent=1).encode()


def new_key() -> str:
    return f"test-key-{next(_counter):08d}-{os.getpid()}"


@dataclass
class Tenant:
    rb: ReferenceBackend
    account_id: str
    token_id: str
    token: str
    booking_id: str
    http: httpx.Client

    def confirm(self, action: str = "training.create", *, manifest: bytes = MANIFEST, max_cost: str = "2000.00",
                booking_id: str | None = None, run_id: str | None = None, expires_in_s: float = 600) -> str:
        digest = sha(manifest) if action == "training.create" else None
        conf = self.rb.op.confirmation(self.account_id, action, booking_id or self.booking_id, max_cost,
                                       manifest_sha256=digest, run_id=run_id, expires_in_s=expires_in_s)
        return str(conf["ref"])

    def submit(self, key: str, *, manifest: bytes = MANIFEST, ref: str | None = None, booking_id: str | None = None,
               digest: str | None = None, b64: str | None = None, client: httpx.Client | None = None) -> httpx.Response:
        body = {
            "booking_id": booking_id or self.booking_id,
            "confirmation_ref": ref if ref is not None else self.confirm(manifest=manifest),
            "manifest_sha256": digest or sha(manifest),
            "manifest_b64": b64 if b64 is not None else base64.b64encode(manifest).decode(),
        }
        return (client or self.http).post("/v1/training-runs", json=body, headers={"Idempotency-Key": key})

    def created_run(self, manifest: bytes = MANIFEST) -> dict[str, Any]:
        response = self.submit(new_key(), manifest=manifest)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def act(self, run_id: str, action: str, key: str, ref: str) -> httpx.Response:
        return self.http.post(f"/v1/training-runs/{run_id}/{action}", json={"confirmation_ref": ref},
                              headers={"Idempotency-Key": key})

    def confirmation_row(self, ref: str) -> dict[str, Any]:
        return self.rb.query("SELECT * FROM confirmations WHERE ref = ?", (ref,))[0]


def client(rb: ReferenceBackend, token: str | None = None, **kw: Any) -> httpx.Client:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=rb.url, headers=headers, trust_env=False, **{"timeout": 10.0, **kw})


@pytest.fixture(scope="module")
def rb() -> Iterator[ReferenceBackend]:
    with ReferenceBackend() as backend:
        yield backend


@pytest.fixture(autouse=True)
def _no_leftover_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "rb" in request.fixturenames:
        request.getfixturevalue("rb").op.clear_faults()


MakeTenant = Callable[..., Tenant]


@pytest.fixture
def make_tenant(rb: ReferenceBackend) -> Iterator[MakeTenant]:
    clients: list[httpx.Client] = []

    def make(scopes: list[str] | None = None, account: dict[str, Any] | None = None, **booking: Any) -> Tenant:
        account_id = rb.op.account(**(account or {}))
        token_id, token = rb.op.token(account_id, scopes=scopes)
        booking_id = rb.op.booking(account_id, **booking)["booking_id"]
        http = client(rb, token)
        clients.append(http)
        return Tenant(rb, account_id, token_id, token, booking_id, http)

    yield make
    for http in clients:
        http.close()


@pytest.fixture
def tenant(make_tenant: MakeTenant) -> Tenant:
    return make_tenant()


def code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


# -- capabilities, auth, tenancy ----------------------------------------------------------------
def test_capabilities_need_no_credentials_and_follow_the_operator(rb: ReferenceBackend) -> None:
    with client(rb) as anonymous:
        body = anonymous.get("/v1/capabilities").json()
        assert body["contract_version"] == "ito.training.v1"
        assert body["training"]["available"] is True
        assert {"create", "status", "logs", "metrics", "checkpoints", "cancel", "cleanup"} <= set(
            body["training"]["operations"])
        rb.op.capabilities(False, ["create", "status"])
        try:
            assert anonymous.get("/v1/capabilities").json()["training"] == {
                "available": False, "operations": ["create", "status"]}
        finally:
            rb.op.capabilities(True, ["create", "status", "logs", "metrics", "checkpoints", "cancel", "cleanup"])


def test_auth_missing_unknown_revoked_expired_and_scope(rb: ReferenceBackend, tenant: Tenant) -> None:
    with client(rb) as anonymous:
        for headers in ({}, {"Authorization": "Bearer itorb_not-a-token"}, {"Authorization": "Basic abc"}):
            r = anonymous.get("/v1/me", headers=headers)
            assert r.status_code == 401 and code(r) == "unauthorized"
            assert r.headers["www-authenticate"] == 'Bearer realm="ito"'
            assert "error=" not in r.headers["www-authenticate"]
    assert tenant.http.get("/v1/me").json() == {"account_id": tenant.account_id}

    token_id, token = rb.op.token(tenant.account_id)
    with client(rb, token) as revoked:
        assert revoked.get("/v1/me").status_code == 200
        rb.op.revoke(token_id)
        r = revoked.get("/v1/me")
        assert r.status_code == 401 and code(r) == "credential_revoked"
        assert 'error="invalid_token"' in r.headers["www-authenticate"]

    _, expired_token = rb.op.token(tenant.account_id, expires_in_s=-1)
    with client(rb, expired_token) as expired:
        r = expired.get("/v1/me")
        assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]

    _, read_only = rb.op.token(tenant.account_id, scopes=["training:read"])
    with client(rb, read_only) as reader:
        assert reader.get("/v1/me").status_code == 200
        r = tenant.submit(new_key(), client=reader)
        assert r.status_code == 403 and code(r) == "forbidden"
        assert 'error="insufficient_scope"' in r.headers["www-authenticate"]
    assert rb.query("SELECT COUNT(*) AS n FROM runs WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 0


def test_other_tenants_resources_are_not_found(tenant: Tenant, make_tenant: MakeTenant) -> None:
    other = make_tenant()
    key = new_key()
    run = tenant.submit(key).json()
    ref = tenant.confirm()
    mine, theirs = tenant.http, other.http
    assert mine.get(f"/v1/bookings/{tenant.booking_id}/training-eligibility").status_code == 200
    r = theirs.get(f"/v1/bookings/{tenant.booking_id}/training-eligibility")
    assert r.status_code == 404 and code(r) == "booking_not_found"
    assert mine.get(f"/v1/confirmations/{ref}").status_code == 200
    r = theirs.get(f"/v1/confirmations/{ref}")
    assert r.status_code == 404 and code(r) == "confirmation_not_found"
    for suffix in ("", "/logs", "/metrics", "/checkpoints"):
        assert mine.get(f"/v1/training-runs/{run['run_id']}{suffix}").status_code == 200
        r = theirs.get(f"/v1/training-runs/{run['run_id']}{suffix}")
        assert r.status_code == 404 and code(r) == "run_not_found"
    assert theirs.get("/v1/training-runs", params={"idempotency_key": key}).json() == {"runs": []}
    cancel_ref = tenant.confirm("training.cancel", run_id=run["run_id"])
    r = other.act(run["run_id"], "cancel", new_key(), cancel_ref)
    assert r.status_code == 404 and code(r) == "run_not_found"
    # Creating with another tenant's booking is the same 404.
    r = other.submit(new_key(), booking_id=tenant.booking_id, ref=other.confirm(booking_id=tenant.booking_id))
    assert r.status_code == 404 and code(r) == "booking_not_found"


@pytest.mark.parametrize(("state", "extra", "eligible", "reason"), [
    ("completed", {}, True, None),
    ("completed", {"term_ends_in_s": -60}, False, "expired"),
    ("expired", {}, False, "expired"),
    ("revoked", {}, False, "revoked"),
    ("released", {}, False, "released"),
    ("incomplete", {}, False, "incomplete"),
])
def test_eligibility_for_every_booking_state(make_tenant: MakeTenant, state: str, extra: dict[str, Any],
                                             eligible: bool, reason: str | None) -> None:
    t = make_tenant(state=state, nodes=2, gpus_per_node=4, checked_at_offset_s=-600, **extra)
    body = t.http.get(f"/v1/bookings/{t.booking_id}/training-eligibility").json()
    assert (body["eligible"], body["reason"]) == (eligible, reason)
    assert body["booking_id"] == t.booking_id and body["account_id"] == t.account_id
    assert body["gpu_topology"] == {"gpu": "H100-80GB", "nodes": 2, "gpus_per_node": 4}
    assert body["fabric"] == "infiniband" and body["region"]
    checked = calendar.timegm(time.strptime(body["checked_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.time()
    assert -700 < checked < -500
    if not eligible:
        r = t.submit(new_key())
        assert r.status_code == 403 and code(r) == "booking_not_eligible"
        assert r.json()["error"]["reason"] == reason


# -- create ---------------------------------------------------------------------------------------
def test_create_replay_conflict_and_confirmation_consumed_with_the_run(rb: ReferenceBackend, tenant: Tenant) -> None:
    key, ref = new_key(), tenant.confirm()
    assert tenant.http.get(f"/v1/confirmations/{ref}").json()["consumed"] is False
    first = tenant.submit(key, ref=ref)
    assert first.status_code == 201
    run = first.json()
    assert run["state"] == "queued" and run["idempotency_key"] == key and run["manifest_sha256"] == sha(MANIFEST)
    # The example's data is not on the backend's list of known datasets: the ladder checks it first.
    assert [s["name"] for s in run["stages"]] == ["data_prep", "ladder", "sft", "dpo"]
    assert all(s["state"] == "pending" and s["gate"]["status"] == "pending" and s["gate"]["evals"] == {}
               for s in run["stages"])
    assert [s["gate"]["battery"]["name"] for s in run["stages"]] == ["data-prep-v1", "ladder-150m-v1", "sft-v1",
                                                                    "dpo-v1"]
    assert run["proposed_actions"] == [] and run["interruptions"] == []

    replay = tenant.submit(key, ref=ref)
    assert replay.status_code == 200 and replay.json() == run
    # A replay needs no fresh confirmation: even a bogus ref returns the stored run.
    assert tenant.submit(key, ref="never-issued").json()["run_id"] == run["run_id"]

    row = tenant.confirmation_row(ref)
    db_run = rb.query("SELECT * FROM runs WHERE run_id = ?", (run["run_id"],))[0]
    record = rb.query("SELECT * FROM idempotency WHERE account_id = ? AND idempotency_key = ?",
                      (tenant.account_id, key))[0]
    assert row["consumed_by"] == run["run_id"]
    assert row["consumed_at"] == db_run["created_at"] == record["created_at"]  # one transaction, one clock read
    assert record["run_id"] == run["run_id"]
    assert tenant.http.get(f"/v1/confirmations/{ref}").json()["consumed"] is True
    assert rb.runs_for_key(tenant.account_id, key) == 1

    other = variant(description="another manifest")
    r = tenant.submit(key, manifest=other)
    assert r.status_code == 422 and code(r) == "idempotency_conflict"
    second_booking = rb.op.booking(tenant.account_id)["booking_id"]
    r = tenant.submit(key, booking_id=second_booking, ref=tenant.confirm(booking_id=second_booking))
    assert r.status_code == 422 and code(r) == "idempotency_conflict"
    r = tenant.submit(new_key(), ref=ref)
    assert r.status_code == 409 and code(r) == "confirmation_consumed"
    assert rb.runs_for_key(tenant.account_id, key) == 1
    assert tenant.http.get("/v1/training-runs", params={"idempotency_key": key}).json() == {"runs": [run]}
    assert tenant.http.get(f"/v1/training-runs/{run['run_id']}").json() == run


Case = Callable[[Tenant, str], httpx.Response]


def _raw(t: Tenant, key: str | None, body: bytes | dict[str, Any]) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    if isinstance(body, dict):
        return t.http.post("/v1/training-runs", json=body, headers=headers)
    return t.http.post("/v1/training-runs", content=body, headers={**headers, "Content-Type": "application/json"})


def _body(t: Tenant, **changes: Any) -> dict[str, Any]:
    return {"booking_id": t.booking_id, "confirmation_ref": t.confirm(), "manifest_sha256": sha(MANIFEST),
            "manifest_b64": base64.b64encode(MANIFEST).decode(), **changes}


REJECTIONS: list[tuple[str, dict[str, Any], Case, int, str, str | None]] = [
    ("no key header", {}, lambda t, k: _raw(t, None, _body(t)), 400, "idempotency_key_invalid", None),
    ("short key", {}, lambda t, k: _raw(t, "short", _body(t)), 400, "idempotency_key_invalid", None),
    ("not json", {}, lambda t, k: _raw(t, k, b"{nope"), 400, "invalid_request", None),
    ("missing field", {}, lambda t, k: _raw(t, k, {"booking_id": t.booking_id}), 400, "invalid_request", None),
    ("extra field", {}, lambda t, k: _raw(t, k, _body(t, force=True)), 400, "invalid_request", None),
    ("duplicate key", {}, lambda t, k: _raw(t, k, b'{"booking_id": "a", "booking_id": "b"}'), 400,
     "invalid_request", None),
    ("too large", {}, lambda t, k: _raw(t, k, b" " * (2 * 1024 * 1024 + 1)), 413, "payload_too_large", None),
    ("bytes differ", {}, lambda t, k: t.submit(k, b64=base64.b64encode(MANIFEST + b" ").decode()), 422,
     "digest_mismatch", None),
    ("not base64", {}, lambda t, k: t.submit(k, b64="@@@@"), 422, "digest_mismatch", "invalid_base64"),
    ("confirmed other digest", {}, lambda t, k: t.submit(k, ref=t.confirm(manifest=variant(description="x"))),
     422, "digest_mismatch", None),
    ("unknown booking", {}, lambda t, k: t.submit(k, booking_id="bk_missing", ref=t.confirm(booking_id="bk_missing")),
     404, "booking_not_found", None),
    ("unknown confirmation", {}, lambda t, k: t.submit(k, ref="cnf_missing"), 404, "confirmation_not_found", None),
    ("expired confirmation", {}, lambda t, k: t.submit(k, ref=t.confirm(expires_in_s=-1)), 410,
     "confirmation_expired", None),
    ("action mismatch", {}, lambda t, k: t.submit(k, ref=t.confirm("training.cancel", run_id="run_x")), 422,
     "confirmation_mismatch", None),
    ("booking mismatch", {}, lambda t, k: t.submit(k, ref=t.confirm(booking_id="bk_other")), 422,
     "confirmation_mismatch", None),
    ("schema", {}, lambda t, k: t.submit(k, manifest=variant(surprise=1)), 422, "validation_rejected",
     "manifest_invalid"),
    ("secret in manifest", {}, lambda t, k: t.submit(k, manifest=variant(description="ghp_" + "C4n4ry7f3b9c1e5a2d4fQ6b8e0cW9xk2L5mZ")), 422,
     "validation_rejected", "manifest_invalid"),
    ("capacity", {"gpus_per_node": 1}, lambda t, k: t.submit(k), 422, "validation_rejected", "capacity"),
    ("fabric", {"nodes": 2, "fabric": "ethernet"}, lambda t, k: t.submit(k), 422, "validation_rejected", "fabric"),
    ("data policy", {"account": {"allowed_data_schemes": ["s3"]}}, lambda t, k: t.submit(k), 422,
     "validation_rejected", "data_policy"),
    ("checkpoint storage", {"account": {"allowed_checkpoint_prefixes": ["gs://"]}}, lambda t, k: t.submit(k),
     422, "validation_rejected", "checkpoint_storage"),
    ("above confirmed cost", {}, lambda t, k: t.submit(k, ref=t.confirm(max_cost="1199.99")), 402,
     "budget_exceeded", "above_confirmed_cost"),
    ("above account limit", {"account": {"budget_limit_usd": "4000.00"}}, lambda t, k: t.submit(k), 402,
     "budget_exceeded", "above_account_limit"),
]


@pytest.mark.parametrize(("name", "setup", "case", "status", "error_code", "reason"), REJECTIONS,
                         ids=[r[0] for r in REJECTIONS])
def test_each_create_rejection_creates_nothing_and_consumes_nothing(
    rb: ReferenceBackend, make_tenant: MakeTenant, name: str, setup: dict[str, Any], case: Case, status: int,
    error_code: str, reason: str | None,
) -> None:
    t, key = make_tenant(**setup), new_key()
    r = case(t, key)
    assert (r.status_code, code(r)) == (status, error_code), r.text
    assert r.json()["error"].get("reason") == reason
    assert rb.query("SELECT COUNT(*) AS n FROM runs WHERE account_id = ?", (t.account_id,))[0]["n"] == 0
    assert rb.query("SELECT COUNT(*) AS n FROM confirmations WHERE account_id = ? AND consumed_at IS NOT NULL",
                    (t.account_id,))[0]["n"] == 0
    assert rb.runs_for_key(t.account_id, key) == 0
    if not setup:  # a refused create does not burn its key: the correct request with it succeeds
        assert t.submit(key).status_code == 201
        assert rb.runs_for_key(t.account_id, key) == 1


def test_concurrent_create_with_the_same_key_is_in_flight(rb: ReferenceBackend, tenant: Tenant) -> None:
    key, ref = new_key(), tenant.confirm()
    rb.op.fault(CREATE, "delay", seconds=1.0)
    results: dict[str, httpx.Response] = {}

    def first() -> None:
        with client(rb, tenant.token) as own:
            results["first"] = tenant.submit(key, ref=ref, client=own)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        rb.op.wait_in_flight(key)  # the first POST holds the key inside its injected delay
        second = tenant.submit(key, ref=ref)
        assert second.status_code == 409 and code(second) == "idempotency_in_flight"
        assert tenant.http.get("/v1/training-runs", params={"idempotency_key": key}).json() == {"runs": []}
        assert rb.runs_for_key(tenant.account_id, key) == 0
    finally:
        thread.join(10)
    assert results["first"].status_code == 201
    assert rb.runs_for_key(tenant.account_id, key) == 1
    assert tenant.submit(key, ref=ref).status_code == 200
    assert rb.op.in_flight() == []


# -- faults -----------------------------------------------------------------------------------------
def test_drop_before_creates_nothing_and_drop_after_keeps_the_committed_run(rb: ReferenceBackend,
                                                                         tenant: Tenant) -> None:
    key, ref = new_key(), tenant.confirm()
    rb.op.fault(CREATE, "drop", when="before")
    with pytest.raises(httpx.RemoteProtocolError):
        tenant.submit(key, ref=ref)
    assert rb.runs_for_key(tenant.account_id, key) == 0
    assert tenant.confirmation_row(ref)["consumed_at"] is None

    rb.op.fault(CREATE, "drop", when="after")
    with pytest.raises(httpx.RemoteProtocolError):
        tenant.submit(key, ref=ref)
    assert rb.runs_for_key(tenant.account_id, key) == 1
    found = tenant.http.get("/v1/training-runs", params={"idempotency_key": key}).json()["runs"]
    assert len(found) == 1
    retry = tenant.submit(key, ref=ref)
    assert retry.status_code == 200 and retry.json()["run_id"] == found[0]["run_id"]
    faults = [e["fault"] for e in rb.op.requests() if e["idempotency_key"] == key]
    assert faults == ["drop", "drop", None]


def test_error_before_and_after(rb: ReferenceBackend, tenant: Tenant) -> None:
    key, ref = new_key(), tenant.confirm()
    rb.op.fault(CREATE, "error", status=503, retry_after=2)
    r = tenant.submit(key, ref=ref)
    assert r.status_code == 503 and code(r) == "unavailable" and r.headers["retry-after"] == "2"
    assert rb.runs_for_key(tenant.account_id, key) == 0
    rb.op.fault(CREATE, "error", status=500, when="after")
    r = tenant.submit(key, ref=ref)
    assert r.status_code == 500 and code(r) == "internal_error"
    assert rb.runs_for_key(tenant.account_id, key) == 1
    rb.op.fault("GET /v1/me", "error", status=429)
    r = tenant.http.get("/v1/me")
    assert r.status_code == 429 and code(r) == "rate_limited"


def test_redirect_malformed_oversized_and_json_patch(rb: ReferenceBackend, tenant: Tenant) -> None:
    rb.op.fault("GET /v1/me", "redirect", location="https://elsewhere.invalid/steal")
    r = tenant.http.get("/v1/me")
    assert r.status_code == 302 and r.headers["location"] == "https://elsewhere.invalid/steal"

    rb.op.fault("GET /v1/me", "malformed")
    r = tenant.http.get("/v1/me")
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.content)

    size = 3 * 1024 * 1024
    rb.op.fault("GET /v1/me", "oversized", bytes=size)
    r = tenant.http.get("/v1/me")
    assert len(r.content) == size and int(r.headers["content-length"]) == size
    assert r.json() == {"account_id": tenant.account_id}

    path = f"/v1/bookings/{tenant.booking_id}/training-eligibility"
    rb.op.fault("GET /v1/bookings/{id}/training-eligibility", "json_patch",
                patch={"eligible": False, "reason": "revoked", "gpu_topology": {"nodes": 64}, "region": None})
    patched = tenant.http.get(path).json()
    assert patched["eligible"] is False and patched["reason"] == "revoked"
    assert patched["gpu_topology"] == {"gpu": "H100-80GB", "nodes": 64, "gpus_per_node": 8}
    assert "region" not in patched
    assert tenant.http.get(path).json()["eligible"] is True  # consumed once


def test_delay_stall_drip_and_times(rb: ReferenceBackend, tenant: Tenant) -> None:
    rb.op.fault("GET /v1/me", "delay", seconds=0.3, times=2)
    for _ in range(2):
        started = time.monotonic()
        assert tenant.http.get("/v1/me").status_code == 200
        assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    tenant.http.get("/v1/me")
    assert time.monotonic() - started < 0.3

    rb.op.fault("GET /v1/me", "drip", interval_s=0.1, chunks=4)
    started = time.monotonic()
    assert tenant.http.get("/v1/me").json() == {"account_id": tenant.account_id}
    assert time.monotonic() - started >= 0.3

    # A stall happens after the commit: the client times out, the run exists, status finds it.
    key = new_key()
    rb.op.fault(CREATE, "stall", seconds=0.8)
    with client(rb, tenant.token, timeout=httpx.Timeout(5.0, read=0.2)) as impatient, \
            pytest.raises(httpx.ReadTimeout):
        tenant.submit(key, client=impatient)
    rb.op.wait_in_flight(key)
    rb.op.wait_in_flight(key, present=False)
    assert rb.runs_for_key(tenant.account_id, key) == 1
    assert len(tenant.http.get("/v1/training-runs", params={"idempotency_key": key}).json()["runs"]) == 1


def test_a_delayed_create_completes_after_the_client_gave_up(rb: ReferenceBackend, tenant: Tenant) -> None:
    key = new_key()
    rb.op.fault(CREATE, "delay", seconds=0.5)
    with client(rb, tenant.token, timeout=httpx.Timeout(5.0, read=0.1)) as impatient, \
            pytest.raises(httpx.ReadTimeout):
        tenant.submit(key, client=impatient)
    rb.op.wait_in_flight(key)  # still inside the injected delay: nothing committed yet
    assert tenant.http.get("/v1/training-runs", params={"idempotency_key": key}).json() == {"runs": []}
    rb.op.wait_in_flight(key, present=False)
    assert rb.runs_for_key(tenant.account_id, key) == 1
    (found,) = tenant.http.get("/v1/training-runs", params={"idempotency_key": key}).json()["runs"]
    assert tenant.submit(key, ref="replay-needs-no-ref").json()["run_id"] == found["run_id"]


@pytest.mark.parametrize("spec", [
    {"route": "GET /v1/nowhere", "kind": "delay", "seconds": 1},
    {"route": CREATE, "kind": "explode"},
    {"route": CREATE, "kind": "delay", "seconds": 121},
    {"route": CREATE, "kind": "drip", "interval_s": 10, "chunks": 13},
    {"route": CREATE, "kind": "error", "status": 200},
    {"route": CREATE, "kind": "drop", "when": "later"},
    {"route": CREATE, "kind": "oversized", "bytes": 65 * 1024 * 1024},
    {"route": CREATE, "kind": "delay", "seconds": 1, "extra": True},
    {"route": CREATE, "kind": "delay", "seconds": 1, "times": 0},
])
def test_fault_specs_are_bounded(rb: ReferenceBackend, spec: dict[str, Any]) -> None:
    route, kind = spec.pop("route"), spec.pop("kind")
    with pytest.raises(OperatorError) as info:
        rb.op.fault(route, kind, **spec)
    assert info.value.status == 400


# -- lifecycle --------------------------------------------------------------------------------------
def test_advance_fail_gate_finish_lifecycle(rb: ReferenceBackend, tenant: Tenant) -> None:
    run = tenant.created_run()
    run_id = run["run_id"]
    metrics = tenant.http.get(f"/v1/training-runs/{run_id}/metrics").json()
    assert {k: metrics[k] for k in ("goodput", "interruption_rate", "checkpoint_bandwidth_gbps", "step", "loss",
                                    "cost_usd_to_date")} == {
        "goodput": 0.0, "interruption_rate": 0.0, "checkpoint_bandwidth_gbps": 0.0, "step": 0, "loss": None,
        "cost_usd_to_date": "0.00"}
    assert metrics["interruptions"]["count"] == 0 and metrics["rl"] is None
    started = rb.op.advance(run_id)
    assert started["state"] == "running"
    assert [s["state"] for s in started["stages"]] == ["running", "pending", "pending", "pending"]
    passed = rb.op.advance(run_id)
    assert [s["state"] for s in passed["stages"]] == ["passed", "running", "pending", "pending"]
    gate = passed["stages"][0]["gate"]
    assert gate["status"] == "passed" and set(gate["evals"]) == set(gate["battery"]["evals"]) == {
        "dedup_removed_fraction", "decontamination_overlap"}
    assert tenant.http.get(f"/v1/training-runs/{run_id}").json() == passed
    # Data prep and the ladder do not train the model: no step, no checkpoint yet.
    assert tenant.http.get(f"/v1/training-runs/{run_id}/checkpoints").json()["checkpoints"] == []
    rb.op.advance(run_id)  # the ladder passes
    sft = rb.op.advance(run_id)["stages"][2]["gate"]  # sft passes: steps 0-1000, a checkpoint every 500
    assert set(sft["evals"]) == set(sft["battery"]["evals"]) == {"loss", "eval_loss", "score/mmlu",
                                                                  "instruction_following"}
    checkpoints = tenant.http.get(f"/v1/training-runs/{run_id}/checkpoints").json()["checkpoints"]
    interval = DOC["checkpoints"]["interval_steps"]
    assert [c["step"] for c in checkpoints] == [interval, 2 * interval]
    assert all(c["uri"].startswith(DOC["checkpoints"]["storage"]) and c["size_bytes"] > 0 for c in checkpoints)
    metrics = tenant.http.get(f"/v1/training-runs/{run_id}/metrics").json()
    assert metrics["step"] == checkpoints[-1]["step"] and metrics["loss"] == sft["evals"]["loss"]
    # Cost accrues by the estimate's stages (8 GPUs, fp8: data_prep 1 h, ladder 3 h, sft 4 h, dpo 3 h at
    # 2.50/GPU-hour), never by the confirmed maximum (1200.00).
    assert metrics["cost_usd_to_date"] == "160.00" and metrics["goodput"] == 1.0

    done = rb.op.finish(run_id)
    assert done["state"] == "succeeded"
    assert all(s["state"] == "passed" and s["gate"]["status"] == "passed" for s in done["stages"])
    assert tenant.http.get(f"/v1/training-runs/{run_id}/metrics").json()["cost_usd_to_date"] == "220.00"
    # Two training stages of 1000 steps: checkpoints at 500 ... 2000, the last 3 kept (retain_last).
    assert [c["step"] for c in tenant.http.get(f"/v1/training-runs/{run_id}/checkpoints").json()["checkpoints"]] == [
        2 * interval, 3 * interval, 4 * interval]
    for action in (rb.op.advance, rb.op.finish, rb.op.fail_gate):
        with pytest.raises(OperatorError) as info:
            action(run_id)
        assert info.value.status == 409


def test_cost_accrues_by_the_estimates_stages_capped_by_the_confirmed_maximum(rb: ReferenceBackend,
                                                                              make_tenant: MakeTenant) -> None:
    # 16 GPUs: data_prep 1 h, ladder 2 h, sft 2 h, dpo 2 h -> 40.00, 80.00, 80.00, 80.00 (estimate 280.00).
    tenant = make_tenant(nodes=2, gpus_per_node=8)
    costs = []
    run_id = tenant.created_run()["run_id"]
    rb.op.advance(run_id)
    for _ in range(4):
        rb.op.advance(run_id)
        costs.append(tenant.http.get(f"/v1/training-runs/{run_id}/metrics").json()["cost_usd_to_date"])
    assert costs == ["40.00", "120.00", "200.00", "280.00"]  # not 300.00 ... 1200.00 (the confirmed maximum)
    # A maximum below the estimate caps what the run accrues.
    capped = variant(budget={"ceiling_usd": "4800.00", "max_incremental_cost_usd": "100.00"})
    run_id = tenant.created_run(capped)["run_id"]
    rb.op.advance(run_id)
    rb.op.advance(run_id)
    assert tenant.http.get(f"/v1/training-runs/{run_id}/metrics").json()["cost_usd_to_date"] == "40.00"
    rb.op.finish(run_id)
    assert tenant.http.get(f"/v1/training-runs/{run_id}/metrics").json()["cost_usd_to_date"] == "100.00"

    failing = tenant.created_run(variant(target="pretrain", post_training=["sft"]))
    assert [s["name"] for s in failing["stages"]] == ["data_prep", "ladder", "pretrain", "mid_train", "long_context",
                                                      "sft"]
    for _ in range(3):
        rb.op.advance(failing["run_id"])
    failed = rb.op.fail_gate(failing["run_id"], evals={"eval_loss": 9.5})
    assert failed["state"] == "gate_failed"
    assert [s["state"] for s in failed["stages"]] == ["passed", "passed", "failed", "skipped", "skipped", "skipped"]
    assert failed["stages"][2]["gate"] == {"status": "failed", "evals": {"eval_loss": 9.5},
                                           "battery": {"name": "pretrain-core-v1",
                                                       "evals": ["loss", "eval_loss", "score/mmlu"]}}
    with pytest.raises(OperatorError) as info:
        rb.op.advance(failing["run_id"])
    assert info.value.status == 409
    r = tenant.act(failing["run_id"], "cancel", new_key(), tenant.confirm("training.cancel", run_id=failing["run_id"]))
    assert r.status_code == 409 and code(r) == "run_not_cancellable"

    rl = tenant.created_run(variant(target="rl", post_training=["sft"]))
    assert [s["name"] for s in rl["stages"]] == ["data_prep", "ladder", "sft", "rlvr"]
    assert rb.op.fail_gate(rl["run_id"])["stages"][0]["state"] == "failed"  # from queued: the first gate
    assert any(r["run_id"] == rl["run_id"] for r in rb.op.runs())


def test_logs_pages_return_every_line_exactly_once(rb: ReferenceBackend, tenant: Tenant) -> None:
    run = tenant.created_run(variant(target="pretrain", post_training=["sft", "dpo", "rlvr"]))
    run_id = run["run_id"]
    rb.op.finish(run_id)
    url = f"/v1/training-runs/{run_id}/logs"
    everything = tenant.http.get(url, params={"limit": 1000}).json()
    assert everything["next_cursor"] is None
    lines = everything["lines"]
    assert len(lines) > 20 and all(set(line) == {"ts", "stage", "message"} for line in lines)
    assert lines[-1]["message"].endswith("run succeeded")
    for limit in (1, 2, 7):
        seen: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(1000):
            params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
            page = tenant.http.get(url, params=params).json()
            assert len(page["lines"]) <= limit
            seen.extend(page["lines"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == lines
    default = tenant.http.get(url).json()
    assert default["lines"] == lines[:200] and default["next_cursor"] is None
    for bad in ({"limit": 0}, {"limit": 1001}, {"limit": "ten"}, {"cursor": "not-a-cursor"}, {"limit": -1}):
        r = tenant.http.get(url, params=bad)
        assert r.status_code == 400 and code(r) == "invalid_request"


def test_cancel_and_cleanup(rb: ReferenceBackend, tenant: Tenant) -> None:
    booking_before = rb.op.get_booking(tenant.booking_id)
    run = tenant.created_run()
    run_id = run["run_id"]
    rb.op.advance(run_id)

    r = tenant.act(run_id, "cleanup", new_key(), tenant.confirm("training.cleanup", run_id=run_id))
    assert r.status_code == 422 and code(r) == "validation_rejected" and r.json()["error"]["reason"] == "run_active"
    r = tenant.act(run_id, "cancel", new_key(), tenant.confirm("training.cleanup", run_id=run_id))
    assert r.status_code == 422 and code(r) == "confirmation_mismatch"
    r = tenant.act(run_id, "cancel", new_key(), tenant.confirm("training.cancel", run_id="run_someone_else"))
    assert r.status_code == 422 and code(r) == "confirmation_mismatch"
    r = tenant.act(run_id, "cancel", new_key(), tenant.confirm("training.cancel", run_id=run_id, expires_in_s=-5))
    assert r.status_code == 410 and code(r) == "confirmation_expired"

    cancel_key, cancel_ref = new_key(), tenant.confirm("training.cancel", run_id=run_id)
    cancelled = tenant.act(run_id, "cancel", cancel_key, cancel_ref)
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert all(s["state"] in ("skipped", "passed") for s in cancelled.json()["stages"])
    assert tenant.confirmation_row(cancel_ref)["consumed_by"] == run_id
    replay = tenant.act(run_id, "cancel", cancel_key, cancel_ref)
    assert replay.status_code == 200 and replay.json()["state"] == "cancelled"
    r = tenant.act(run_id, "cancel", new_key(), tenant.confirm("training.cancel", run_id=run_id))
    assert r.status_code == 409 and code(r) == "run_not_cancellable"
    r = tenant.act(run_id, "cleanup", cancel_key, tenant.confirm("training.cleanup", run_id=run_id))
    assert r.status_code == 422 and code(r) == "idempotency_conflict"

    cleanup_key, cleanup_ref = new_key(), tenant.confirm("training.cleanup", run_id=run_id)
    cleaned = tenant.act(run_id, "cleanup", cleanup_key, cleanup_ref)
    assert cleaned.status_code == 200
    body = cleaned.json()
    assert body["run_id"] == run_id and body["booking_untouched"] is True and body["cleaned"]
    assert tenant.http.get(f"/v1/training-runs/{run_id}").json()["state"] == "cleaned_up"
    replay = tenant.act(run_id, "cleanup", cleanup_key, cleanup_ref)
    assert replay.status_code == 200 and replay.json() == body
    r = tenant.act(run_id, "cleanup", new_key(), cleanup_ref)
    assert r.status_code == 409 and code(r) == "confirmation_consumed"
    assert rb.op.get_booking(tenant.booking_id) == booking_before
    # A create key cannot be reused for a cancel.
    r = tenant.act(run_id, "cancel", run["idempotency_key"], tenant.confirm("training.cancel", run_id=run_id))
    assert r.status_code == 422 and code(r) == "idempotency_conflict"


# -- the server itself -----------------------------------------------------------------------------
def test_operator_api_refuses_without_the_operator_token(rb: ReferenceBackend, tenant: Tenant) -> None:
    with client(rb) as anonymous:
        unknown = anonymous.get("/no/such/path")
        assert unknown.status_code == 404
        for headers in ({}, {"Authorization": f"Bearer {tenant.token}"}, {"Authorization": "Bearer " + "x" * 43},
                        {"Authorization": f"Basic {rb.operator_token}"}):
            for method, path in (("GET", "/operator/runs"), ("POST", "/operator/accounts"),
                                 ("DELETE", "/operator/faults"), ("GET", "/operator/nothing")):
                r = anonymous.request(method, path, headers=headers)
                assert r.status_code == 404 and r.content == unknown.content
        # The bare operator token is refused too unless the backend allows it (tests/test_tls_desk_and_operator.py).
        r = anonymous.get("/operator/runs", headers={"Authorization": f"Bearer {rb.operator_token}"})
        assert r.status_code == 404 and r.content == unknown.content
    r = tenant.http.get("/v1/unknown")
    assert r.status_code == 404 and code(r) == "not_found"


def test_operator_api_refuses_non_loopback_clients_even_with_the_token(tmp_path: Path) -> None:
    token = "op-" + "t" * 40
    app = create_app(str(tmp_path / "db.sqlite3"), operator_token=token, allow_operator_bearer=True)
    try:
        auth = {"Authorization": f"Bearer {token}"}
        with TestClient(app, client=("10.1.2.3", 40000)) as remote:
            r = remote.get("/operator/runs", headers=auth)
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        with TestClient(app, client=("127.0.0.1", 40000)) as local:
            assert local.get("/operator/runs", headers=auth).status_code == 200
    finally:
        app.state.backend.store.close()


def test_openapi_documents_exactly_the_routes_served(tmp_path: Path) -> None:
    text = (REPO / "docs" / "openapi.yaml").read_text()
    documented: set[str] = set()
    path = None
    for line in text.splitlines():
        if match := re.fullmatch(r"  (/\S+):", line):
            path = match.group(1)
        elif (match := re.fullmatch(r"    (get|post|put|delete|patch):", line)) and path:
            documented.add(f"{match.group(1).upper()} {path}")
        elif line and not line.startswith(" ") and not line.startswith("paths"):
            path = None
    app = create_app(str(tmp_path / "db.sqlite3"), operator_token="o" * 32)
    try:
        # The desk (/desk, HTML for people) is not part of the API.
        served = {f"{m} {r.path}" for r in app.routes if isinstance(r, Route) and not r.path.startswith("/desk")
                  for m in (r.methods or ()) - {"HEAD"}}
        mounts = [r for r in app.routes if isinstance(r, Mount) and r.path != "/desk"]
        for mount in mounts:
            inner = mount.app.app  # OperatorGuard -> Router
            served |= {f"{m} {mount.path}{r.path}" for r in inner.routes for m in (r.methods or ()) - {"HEAD"}}
        served.add(f"GET {NONCE_PATH}")  # answered by the operator guard itself
    finally:
        app.state.backend.store.close()
    assert documented == served
    assert text.count("x-not-part-of-canonical-api: true") > sum(1 for d in documented if " /operator/" in d)


def test_auto_advance_moves_runs_along_over_time() -> None:
    with ReferenceBackend(auto_advance_s=0.05) as backend:
        account = backend.op.account()
        _, token = backend.op.token(account)
        booking = backend.op.booking(account)["booking_id"]
        with client(backend, token) as http:
            t = Tenant(backend, account, "", token, booking, http)
            run_id = t.created_run()["run_id"]
            deadline = time.monotonic() + 5
            state = "queued"
            while state != "succeeded" and time.monotonic() < deadline:
                time.sleep(0.05)
                state = http.get(f"/v1/training-runs/{run_id}").json()["state"]
            assert state == "succeeded"


def test_harness_is_reusable_and_the_database_outlives_it(tmp_path: Path) -> None:
    db = str(tmp_path / "rb.sqlite3")
    for expected in (0, 1):
        with ReferenceBackend(db_path=db) as backend:
            assert backend.run_count() == expected
            account = backend.op.account()
            _, token = backend.op.token(account)
            booking = backend.op.booking(account)["booking_id"]
            with client(backend, token) as http:
                if expected == 0:
                    Tenant(backend, account, "", token, booking, http).created_run()
            assert backend.operator_token not in repr(backend)


def test_cli_refuses_non_loopback_and_keeps_the_token_file_private(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert backend_main(["--host", "0.0.0.0", "--db", str(tmp_path / "db")]) == 2
    token_file = tmp_path / "op-token"
    token = operator_token(str(token_file))
    assert token_file.stat().st_mode & 0o777 == 0o600 and operator_token(str(token_file)) == token
    token_file.chmod(0o644)
    assert backend_main(["--db", str(tmp_path / "db"), "--operator-token-file", str(token_file)]) == 2
    assert token not in capsys.readouterr().err


def test_cli_serves_and_never_prints_the_token(tmp_path: Path) -> None:
    token_file = tmp_path / "op-token"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ito_training_reference", "--port", "0", "--db", str(tmp_path / "db"),
         "--operator-token-file", str(token_file)],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        first = "".join(proc.stderr.readline() for _ in range(3))  # the URL, the database, the token file
        url = first.splitlines()[0].split("listening on ")[1].strip()
        with httpx.Client(base_url=url, trust_env=False, timeout=5) as http:
            assert http.get("/v1/capabilities").json()["contract_version"] == "ito.training.v1"
            token = token_file.read_text().strip()
        with OperatorClient(url, token) as op:  # signed requests: the token itself never travels
            assert op.runs() == []
    finally:
        proc.terminate()
        _, rest = proc.communicate(timeout=10)
    assert token not in first + rest
    assert str(token_file) in first + rest


def test_the_package_never_imports_the_reference_backend() -> None:
    code_ = ("import sys, ito_training_mcp.doors.cli.main, ito_training_mcp.doors.mcp.server, ito_training_mcp.service; "
             "print(any(m.startswith('ito_training_reference') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code_], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"
