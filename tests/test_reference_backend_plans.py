"""Plans, confirmation requests and the operator's headless decisions, over real HTTP on loopback."""

from __future__ import annotations

import base64
import calendar
import json
import time
from typing import Any

import httpx
import pytest

from ito_training_reference import OperatorError, ReferenceBackend, reviews
from ito_training_reference.policy import CHECK_NAMES

from . import test_reference_backend as base
from .test_desk import Clock
from .test_reference_backend import DOC, MANIFEST, MakeTenant, Tenant, client, code, new_key, sha, variant

rb, make_tenant = base.rb, base.make_tenant  # the module-scoped backend and the tenant factory
_no_leftover_faults = base._no_leftover_faults

PLAN_KEYS = {"plan_id", "account_id", "booking_id", "manifest_sha256", "valid", "checks", "estimate",
             "parallelism", "confirmation_request", "created_at"}
REQUEST_KEYS = {"request_id", "account_id", "action", "status", "booking_id", "run_id", "plan_id", "manifest_sha256",
                "max_cost_usd", "review_url", "expires_at", "created_at", "decided_at", "confirmation_ref"}


def epoch(stamp: str) -> int:
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def plan(t: Tenant, manifest: bytes = MANIFEST, **changes: Any) -> httpx.Response:
    body = {"booking_id": t.booking_id, "manifest_sha256": sha(manifest),
            "manifest_b64": base64.b64encode(manifest).decode(), **changes}
    return t.http.post("/v1/training-plans", json=body)


def ask(t: Tenant, action: str, run_id: str) -> httpx.Response:
    return t.http.post("/v1/confirmation-requests", json={"action": action, "run_id": run_id})


@pytest.fixture
def tenant(make_tenant: MakeTenant) -> Tenant:
    return make_tenant(nodes=2, gpus_per_node=8)


def test_capabilities_offer_plan_and_confirmation_requests(rb: ReferenceBackend) -> None:
    with client(rb) as anonymous:
        operations = anonymous.get("/v1/capabilities").json()["training"]["operations"]
    assert {"plan", "confirmation_requests", "create", "cancel", "cleanup"} <= set(operations)


def test_a_valid_plan_opens_a_pending_request_and_keeps_the_exact_bytes(rb: ReferenceBackend, tenant: Tenant) -> None:
    raw = MANIFEST + b"\n\n"  # the exact bytes, trailing whitespace and all
    r = plan(tenant, raw)
    assert r.status_code == 201, r.text
    body = r.json()
    assert set(body) == PLAN_KEYS
    assert body["valid"] is True and body["plan_id"].startswith("plan_")
    assert (body["account_id"], body["booking_id"], body["manifest_sha256"]) == (
        tenant.account_id, tenant.booking_id, sha(raw))
    assert body["checks"] == [{"name": n, "status": "passed", "reason": None, "message": None} for n in CHECK_NAMES]
    # fine_tune of 8.03B parameters on custom data: data_prep, ladder, sft, dpo on 16 GPUs at fp8 ->
    # 1 + 2 + 2 + 2 hours x 16 GPUs, at 2.50/GPU-hour.
    assert body["estimate"]["usd"] == "280.00" and body["estimate"]["gpu_hours"] == 112.0
    assert "16 GPU(s)" in body["estimate"]["basis"] and "2.50" in body["estimate"]["basis"]
    assert "ladder" in body["estimate"]["basis"] and "fp8" in body["estimate"]["basis"]
    assert {k: v for k, v in body["parallelism"].items() if k != "reasons"} == {
        "gpus": 16, "data": 16, "tensor": 1, "pipeline": 1, "sharding": "within_node", "precision": "fp8"}
    assert len(body["parallelism"]["reasons"]) == 4
    request = body["confirmation_request"]
    assert set(request) == REQUEST_KEYS
    assert request["request_id"].startswith("creq_") and request["status"] == "pending"
    assert (request["action"], request["plan_id"], request["run_id"]) == ("training.create", body["plan_id"], None)
    assert request["manifest_sha256"] == sha(raw) and request["booking_id"] == tenant.booking_id
    assert request["max_cost_usd"] == DOC["budget"]["max_incremental_cost_usd"] == "1200.00"
    assert request["review_url"] == f"{rb.url}/desk/requests/{request['request_id']}"
    assert request["decided_at"] is None and request["confirmation_ref"] is None
    assert 3500 <= epoch(request["expires_at"]) - epoch(request["created_at"]) <= 3600
    stored = rb.query("SELECT manifest, request_id FROM plans WHERE plan_id = ?", (body["plan_id"],))[0]
    assert stored["manifest"] == raw and stored["request_id"] == request["request_id"]
    # Nothing was created or confirmed.
    assert rb.query("SELECT COUNT(*) AS n FROM runs WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 0
    assert rb.query("SELECT COUNT(*) AS n FROM confirmations WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 0
    assert tenant.http.get(f"/v1/confirmation-requests/{request['request_id']}").json() == request


def test_the_estimate_is_deterministic_and_follows_the_booking(make_tenant: MakeTenant) -> None:
    small, large = make_tenant(nodes=1, gpus_per_node=8), make_tenant(nodes=4, gpus_per_node=8)
    a, b = plan(small).json()["estimate"], plan(small, variant(description="another")).json()["estimate"]
    assert a == b
    # 8 GPUs at fp8 (0.75 of the bf16 hours): data_prep ceil(4.02/8)=1, ladder ceil(24/8)=3, sft ceil(24.1/8)=4,
    # dpo ceil(18.1/8)=3 -> 11 h x 8 = 88 GPU-hours.
    assert a["gpu_hours"] == 88.0 and a["usd"] == "220.00"
    assert a["stages"] == [{"name": "data_prep", "gpu_hours": 8.0, "usd": "20.00"},
                           {"name": "ladder", "gpu_hours": 24.0, "usd": "60.00"},
                           {"name": "sft", "gpu_hours": 32.0, "usd": "80.00"},
                           {"name": "dpo", "gpu_hours": 24.0, "usd": "60.00"}]  # sums to the estimate
    # 32 GPUs: every stage fits one hour -> 4 h x 32 = 128 GPU-hours.
    assert plan(large).json()["estimate"] == {
        **a, "gpu_hours": 128.0, "usd": "320.00", "basis": a["basis"].replace("8 GPU(s)", "32 GPU(s)"),
        "stages": [{"name": name, "gpu_hours": 32.0, "usd": "80.00"} for name in ("data_prep", "ladder", "sft", "dpo")]}
    pretrain = variant(target="pretrain", post_training=[])
    # pretrain stages: data_prep 1, ladder 3, pretrain ceil(1204.6/8)=151, mid_train ceil(301.1/8)=38,
    # long_context ceil(150.6/8)=19.
    assert plan(small, pretrain).json()["estimate"]["gpu_hours"] == (1 + 3 + 151 + 38 + 19) * 8
    # Data on the backend's list of known datasets needs no ladder; bf16 (a GPU without FP8) takes longer.
    known = variant(data=[{**DOC["data"][0], "uri": "hf://datasets/allenai/tulu-3-sft-mixture"}])
    assert [s["name"] for s in plan(small, known).json()["estimate"]["stages"]] == ["data_prep", "sft", "dpo"]
    a100 = make_tenant(nodes=1, gpus_per_node=8, gpu="A100-80GB")
    found = plan(a100, known).json()
    assert found["parallelism"]["precision"] == "bf16" and found["estimate"]["stages"][1]["gpu_hours"] == 40.0


def test_a_plan_reports_every_failed_check_and_opens_no_request(rb: ReferenceBackend, make_tenant: MakeTenant) -> None:
    t = make_tenant(nodes=2, gpus_per_node=1, fabric="ethernet",
                    account={"allowed_data_schemes": ["s3"], "budget_limit_usd": "4000.00"})
    big = variant(model={**DOC["model"], "parameter_count": 20_000_000_000})  # 320 GB > 2 x 80 GB
    body = plan(t, big).json()
    assert body["valid"] is False and body["confirmation_request"] is None
    assert [(c["name"], c["status"], c["reason"]) for c in body["checks"]] == [
        ("manifest", "passed", None), ("capacity", "failed", "capacity"), ("fabric", "failed", "fabric"),
        ("parallelism", "failed", "tensor_across_nodes"), ("data_policy", "failed", "data_policy"),
        ("checkpoint_storage", "passed", None), ("budget", "failed", "above_account_limit")]
    assert all(c["message"] for c in body["checks"] if c["status"] == "failed")
    assert body["estimate"] is not None  # the manifest parsed, so it can still be estimated
    assert rb.query("SELECT COUNT(*) AS n FROM confirmation_requests WHERE account_id = ?",
                    (t.account_id,))[0]["n"] == 0
    assert rb.query("SELECT valid, request_id FROM plans WHERE plan_id = ?", (body["plan_id"],))[0] == {
        "valid": 0, "request_id": None}
    # Create keeps its first-failure semantics over the same checks.
    r = t.submit(new_key(), manifest=big, ref=t.confirm(manifest=big))
    assert (r.status_code, code(r), r.json()["error"]["reason"]) == (422, "validation_rejected", "capacity")


def test_an_unparseable_manifest_reports_only_that_check(tenant: Tenant) -> None:
    for manifest in (variant(surprise=1), b'{"schema_version": "ito.training.manifest.v1"', b"[]"):
        body = plan(tenant, manifest).json()
        assert body["valid"] is False and body["estimate"] is None and body["confirmation_request"] is None
        assert body["checks"] == [{"name": "manifest", "status": "failed", "reason": "manifest_invalid",
                                   "message": body["checks"][0]["message"]}]


@pytest.mark.parametrize(("name", "change", "status", "error_code", "reason"), [
    ("missing field", lambda b: b.pop("manifest_b64"), 400, "invalid_request", None),
    ("extra field", lambda b: b.update(confirmation_ref="cnf_x"), 400, "invalid_request", None),
    ("bad digest", lambda b: b.update(manifest_sha256="ABC"), 400, "invalid_request", None),
    ("bad booking id", lambda b: b.update(booking_id="a b"), 400, "invalid_request", None),
    ("b64 not a string", lambda b: b.update(manifest_b64=5), 400, "invalid_request", None),
    ("not base64", lambda b: b.update(manifest_b64="@@@@"), 422, "digest_mismatch", "invalid_base64"),
    ("bytes differ", lambda b: b.update(manifest_b64=base64.b64encode(MANIFEST + b" ").decode()), 422,
     "digest_mismatch", None),
    ("unknown booking", lambda b: b.update(booking_id="bk_missing"), 404, "booking_not_found", None),
])
def test_plan_refusals_in_order(rb: ReferenceBackend, tenant: Tenant, name: str, change: Any, status: int,
                                error_code: str, reason: str | None) -> None:
    body = {"booking_id": tenant.booking_id, "manifest_sha256": sha(MANIFEST),
            "manifest_b64": base64.b64encode(MANIFEST).decode()}
    change(body)
    r = tenant.http.post("/v1/training-plans", json=body)
    assert (r.status_code, code(r)) == (status, error_code), r.text
    assert r.json()["error"].get("reason") == reason
    assert rb.query("SELECT COUNT(*) AS n FROM plans WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 0


def test_plan_tenancy_eligibility_and_scope(rb: ReferenceBackend, tenant: Tenant, make_tenant: MakeTenant) -> None:
    other = make_tenant()
    r = plan(other, booking_id=tenant.booking_id)
    assert r.status_code == 404 and code(r) == "booking_not_found"
    revoked = make_tenant(state="revoked")
    r = plan(revoked)
    assert (r.status_code, code(r), r.json()["error"]["reason"]) == (403, "booking_not_eligible", "revoked")
    _, read_only = rb.op.token(tenant.account_id, scopes=["training:read"])
    with client(rb, read_only) as reader:
        r = reader.post("/v1/training-plans", json={"booking_id": tenant.booking_id, "manifest_sha256": sha(MANIFEST),
                                                    "manifest_b64": base64.b64encode(MANIFEST).decode()})
        assert r.status_code == 403 and code(r) == "forbidden"
    with client(rb) as anonymous:
        assert anonymous.post("/v1/training-plans", json={}).status_code == 401


def test_confirm_through_the_operator_then_create_with_the_ref(rb: ReferenceBackend, tenant: Tenant) -> None:
    request = plan(tenant).json()["confirmation_request"]
    request_id = request["request_id"]
    decided = rb.op.confirm_request(request_id, decided_by="alice")
    assert decided["status"] == "confirmed" and decided["decided_via"] == "operator" and decided["decided_by"] == "alice"
    ref = decided["confirmation_ref"]
    seen = tenant.http.get(f"/v1/confirmation-requests/{request_id}").json()
    assert seen["status"] == "confirmed" and seen["confirmation_ref"] == ref and seen["decided_at"]
    assert "decided_by" not in seen  # who decided is the operator's business, not the agent's
    conf = tenant.http.get(f"/v1/confirmations/{ref}").json()
    assert (conf["action"], conf["booking_id"], conf["manifest_sha256"], conf["max_cost_usd"], conf["consumed"]) == (
        "training.create", tenant.booking_id, sha(MANIFEST), "1200.00", False)
    assert 1790 <= epoch(conf["expires_at"]) - epoch(seen["decided_at"]) <= 1800
    run = tenant.submit(new_key(), ref=ref)
    assert run.status_code == 201, run.text
    assert tenant.http.get(f"/v1/confirmations/{ref}").json()["consumed"] is True
    # Decided once, either way.
    for decide in (rb.op.confirm_request, rb.op.decline_request):
        with pytest.raises(OperatorError) as err:
            decide(request_id)
        assert (err.value.status, err.value.code) == (409, "request_decided")
    assert rb.query("SELECT COUNT(*) AS n FROM confirmations WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 1


def test_decline_creates_nothing(rb: ReferenceBackend, tenant: Tenant) -> None:
    request_id = plan(tenant).json()["confirmation_request"]["request_id"]
    declined = rb.op.decline_request(request_id)
    assert declined["status"] == "declined" and declined["confirmation_ref"] is None and declined["decided_at"]
    assert tenant.http.get(f"/v1/confirmation-requests/{request_id}").json()["status"] == "declined"
    assert rb.query("SELECT COUNT(*) AS n FROM confirmations WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 0
    with pytest.raises(OperatorError) as err:
        rb.op.confirm_request(request_id)
    assert err.value.code == "request_decided"


def test_requests_expire_undecided() -> None:
    with ReferenceBackend(request_ttl_s=0) as backend:
        account = backend.op.account()
        _, token = backend.op.token(account)
        booking = backend.op.booking(account)["booking_id"]
        with client(backend, token) as http:
            t = Tenant(backend, account, "", token, booking, http)
            request = plan(t).json()["confirmation_request"]
            assert request["status"] == "expired"
            assert http.get(f"/v1/confirmation-requests/{request['request_id']}").json()["status"] == "expired"
            with pytest.raises(OperatorError) as err:
                backend.op.confirm_request(request["request_id"])
            assert (err.value.status, err.value.code) == (410, "request_expired")
            assert [r["request_id"] for r in backend.op.confirmation_requests(status="expired")] == [
                request["request_id"]]
            assert backend.op.confirmation_requests(status="pending") == []


def test_requests_are_tenant_scoped(tenant: Tenant, make_tenant: MakeTenant) -> None:
    request_id = plan(tenant).json()["confirmation_request"]["request_id"]
    other = make_tenant()
    for path in (f"/v1/confirmation-requests/{request_id}", "/v1/confirmation-requests/creq_missing",
                 "/v1/confirmation-requests/not%20an%20id"):
        r = other.http.get(path)
        assert r.status_code == 404 and code(r) == "confirmation_not_found", path


def test_cancel_and_cleanup_requests(rb: ReferenceBackend, tenant: Tenant, make_tenant: MakeTenant) -> None:
    run = tenant.created_run()
    run_id = run["run_id"]
    r = ask(tenant, "training.cleanup", run_id)
    assert (r.status_code, code(r), r.json()["error"]["reason"]) == (422, "validation_rejected", "run_active")
    r = ask(tenant, "training.cancel", run_id)
    assert r.status_code == 201, r.text
    request = r.json()
    assert set(request) == REQUEST_KEYS
    assert (request["action"], request["run_id"], request["booking_id"], request["manifest_sha256"],
            request["max_cost_usd"], request["plan_id"], request["status"]) == (
        "training.cancel", run_id, tenant.booking_id, run["manifest_sha256"], "0.00", None, "pending")
    ref = rb.op.confirm_request(request["request_id"])["confirmation_ref"]
    cancelled = tenant.act(run_id, "cancel", new_key(), ref)
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    r = ask(tenant, "training.cancel", run_id)
    assert r.status_code == 409 and code(r) == "run_not_cancellable"
    cleanup = ask(tenant, "training.cleanup", run_id).json()
    ref = rb.op.confirm_request(cleanup["request_id"])["confirmation_ref"]
    assert tenant.act(run_id, "cleanup", new_key(), ref).json()["booking_untouched"] is True

    other = make_tenant()
    for who, action, run_ref, status, error_code in [
        (other, "training.cancel", run_id, 404, "run_not_found"),
        (tenant, "training.cancel", "run_missing", 404, "run_not_found"),
        (tenant, "training.create", run_id, 400, "invalid_request"),
        (tenant, "training.delete", run_id, 400, "invalid_request"),
        (tenant, "training.cancel", "a b", 400, "invalid_request"),
    ]:
        r = ask(who, action, run_ref)
        assert (r.status_code, code(r)) == (status, error_code), (action, run_ref)
    r = tenant.http.post("/v1/confirmation-requests", json={"action": "training.cancel", "run_id": run_id, "x": 1})
    assert r.status_code == 400 and code(r) == "invalid_request"


def test_operator_lists_requests_by_account_and_status(rb: ReferenceBackend, tenant: Tenant,
                                                       make_tenant: MakeTenant) -> None:
    first = plan(tenant).json()["confirmation_request"]["request_id"]
    second = plan(tenant, variant(description="second")).json()["confirmation_request"]["request_id"]
    other = make_tenant()
    plan(other)
    rb.op.decline_request(first, decided_by="bob")
    mine = rb.op.confirmation_requests(account_id=tenant.account_id)
    assert [r["request_id"] for r in mine] == [second, first]  # newest first
    assert [r["request_id"] for r in rb.op.confirmation_requests(tenant.account_id, "pending")] == [second]
    declined = rb.op.confirmation_requests(tenant.account_id, "declined")
    assert [(r["request_id"], r["decided_via"], r["decided_by"]) for r in declined] == [(first, "operator", "bob")]
    for bad in ({"status": "maybe"}, {"account_id": "a b"}):
        with pytest.raises(OperatorError) as err:
            rb.op._call("GET", "/confirmation-requests", params=bad)
        assert err.value.status == 400
    for bad_body in ({"decided_by": "x y"}, {"who": "x"}):
        with pytest.raises(OperatorError) as err:
            rb.op._call("POST", f"/confirmation-requests/{second}/confirm", bad_body)
        assert err.value.status == 400
    with pytest.raises(OperatorError) as err:
        rb.op.confirm_request("creq_missing")
    assert (err.value.status, err.value.code) == (404, "request_not_found")


def test_pending_requests_per_account_are_bounded(rb: ReferenceBackend, tenant: Tenant,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reviews, "MAX_PENDING_PER_ACCOUNT", 2)
    assert plan(tenant).status_code == plan(tenant, variant(description="2")).status_code == 201
    assert plan(tenant).status_code == 200  # the same manifest again: its pending request, nothing new opened
    r = plan(tenant, variant(description="3"))
    assert r.status_code == 409 and code(r) == "too_many_pending_requests"
    run_id = tenant.created_run()["run_id"]
    r = ask(tenant, "training.cancel", run_id)  # stopping spend never competes with plans for the quota
    assert r.status_code == 201 and r.json()["status"] == "pending"
    again = ask(tenant, "training.cancel", run_id)  # one pending cancel request per run: asking again answers it
    assert again.status_code == 200 and again.json()["request_id"] == r.json()["request_id"]
    # Deciding one frees a slot; an invalid plan opens nothing and is never refused for this.
    rb.op.decline_request(next(r["request_id"] for r in rb.op.confirmation_requests(tenant.account_id, "pending")
                               if r["action"] == "training.create"))
    assert plan(tenant, variant(description="4")).status_code == 201
    assert plan(tenant, variant(surprise=1)).json()["valid"] is False


def test_invalid_plans_are_not_kept_forever(rb: ReferenceBackend, tenant: Tenant,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reviews, "KEEP_PLANS_WITHOUT_REQUEST", 3)
    valid = plan(tenant).json()["plan_id"]
    invalid = [plan(tenant, variant(surprise=i)).json()["plan_id"] for i in range(5)]
    kept = {r["plan_id"] for r in rb.query("SELECT plan_id FROM plans WHERE account_id = ?", (tenant.account_id,))}
    assert kept == {valid, *invalid[-3:]}


def test_faults_apply_to_the_new_routes(rb: ReferenceBackend, tenant: Tenant) -> None:
    rb.op.fault("POST /v1/training-plans", "error", status=503)
    assert plan(tenant).status_code == 503
    assert rb.query("SELECT COUNT(*) AS n FROM plans WHERE account_id = ?", (tenant.account_id,))[0]["n"] == 0
    request_id = plan(tenant).json()["confirmation_request"]["request_id"]
    rb.op.fault("GET /v1/confirmation-requests/{request_id}", "json_patch", patch={"status": "confirmed"})
    assert tenant.http.get(f"/v1/confirmation-requests/{request_id}").json()["status"] == "confirmed"
    assert tenant.http.get(f"/v1/confirmation-requests/{request_id}").json()["status"] == "pending"


def test_review_url_uses_the_public_url_when_configured() -> None:
    with ReferenceBackend(public_url="https://desk.example:8443/") as backend:
        account = backend.op.account()
        _, token = backend.op.token(account)
        booking = backend.op.booking(account)["booking_id"]
        with client(backend, token) as http:
            t = Tenant(backend, account, "", token, booking, http)
            request = plan(t).json()["confirmation_request"]
            assert request["review_url"] == f"https://desk.example:8443/desk/requests/{request['request_id']}"
            # The Host header a client sends never shapes the URL.
            forged = http.post("/v1/confirmation-requests", headers={"Host": "evil.example"},
                               json={"action": "training.cancel", "run_id": t.created_run()["run_id"]}).json()
            assert forged["review_url"].startswith("https://desk.example:8443/desk/requests/")
        assert backend.op.login_link(account)["url"].startswith("https://desk.example:8443/desk/sign-in/")


def test_host_header_never_shapes_links(rb: ReferenceBackend, tenant: Tenant) -> None:
    request = tenant.http.post("/v1/training-plans", headers={"Host": "evil.example"}, json={
        "booking_id": tenant.booking_id, "manifest_sha256": sha(MANIFEST),
        "manifest_b64": base64.b64encode(MANIFEST).decode()}).json()["confirmation_request"]
    assert request["review_url"].startswith(rb.url + "/desk/requests/")


@pytest.mark.parametrize("bad", ["ftp://x", "https://u:p@x", "https://x/path", "https://x?q=1", "not a url"])
def test_public_url_must_be_an_origin(tmp_path: Any, bad: str) -> None:
    from ito_training_reference import create_app

    with pytest.raises(ValueError, match="public_url"):
        create_app(str(tmp_path / "db"), operator_token="o" * 32, public_url=bad)


def test_fail_gate_at_a_named_stage(rb: ReferenceBackend, tenant: Tenant) -> None:
    run_id = tenant.created_run()["run_id"]  # data_prep, ladder, sft, dpo
    with pytest.raises(OperatorError) as err:
        rb.op.fail_gate(run_id, stage="pretrain")
    assert (err.value.status, err.value.code) == (422, "stage_not_found")
    rb.op.advance(run_id)
    rb.op.advance(run_id)  # data_prep passed, the ladder running
    with pytest.raises(OperatorError) as err:
        rb.op.fail_gate(run_id, stage="data_prep")
    assert (err.value.status, err.value.code) == (409, "stage_passed")
    with pytest.raises(OperatorError) as err:
        rb.op._call("POST", f"/runs/{run_id}/fail-gate", {"stage": "DPO!"})
    assert err.value.status == 400
    failed = rb.op.fail_gate(run_id, stage="dpo", evals={"loss": 9.5})
    assert failed["state"] == "gate_failed"
    assert [(s["name"], s["state"]) for s in failed["stages"]] == [
        ("data_prep", "passed"), ("ladder", "passed"), ("sft", "passed"), ("dpo", "failed")]
    assert failed["stages"][3]["gate"] == {"status": "failed", "evals": {"loss": 9.5}, "battery": {
        "name": "dpo-v1", "evals": ["loss", "eval_loss", "score/mmlu", "reward_margin"]}}


def test_metric_history_follows_the_gates(rb: ReferenceBackend, tenant: Tenant) -> None:
    run_id = tenant.created_run()["run_id"]
    rb.op.finish(run_id)
    points = rb.query("SELECT step, loss, goodput FROM metric_history WHERE run_id = ? ORDER BY step", (run_id,))
    assert len(points) == 8  # four points per passed training stage (sft, dpo)
    assert [p["step"] for p in points] == sorted({p["step"] for p in points})
    metrics = tenant.http.get(f"/v1/training-runs/{run_id}/metrics").json()
    assert points[-1]["step"] == metrics["step"] and points[-1]["loss"] == metrics["loss"]
    assert all(0 < p["goodput"] <= 1 and p["loss"] > 0 for p in points)
    assert points[0]["loss"] > points[-1]["loss"]


def test_operator_lists_accounts_tokens_and_bookings(rb: ReferenceBackend, tenant: Tenant) -> None:
    assert tenant.account_id in {a["account_id"] for a in rb.op.accounts()}
    tokens = rb.op.tokens(tenant.account_id)
    assert [t["token_id"] for t in tokens] == [tenant.token_id]
    assert tenant.token not in json.dumps(tokens) and "token" not in tokens[0]
    rb.op.revoke(tenant.token_id)
    assert rb.op.tokens(tenant.account_id)[0]["revoked"] is True
    assert [b["booking_id"] for b in rb.op.bookings(tenant.account_id)] == [tenant.booking_id]



def test_stored_plan_bytes_stop_growing_once_requests_settle() -> None:
    """Plans whose request expired (or was decided) more than the retention period ago lose their
    manifest bytes, a bounded few per plan request: storage follows the retention window, not the
    number of plans ever made."""
    clock = Clock()
    raw = variant(description="y" * 2000)
    with ReferenceBackend(clock=clock, request_ttl_s=60, plan_retention_s=600) as rb:
        account = rb.op.account()
        _, token = rb.op.token(account)
        booking = rb.op.booking(account, nodes=2)["booking_id"]
        with client(rb, token) as http:
            t = Tenant(rb, account, "", token, booking, http)
            for _ in range(120):
                r = plan(t, raw)
                assert r.status_code == 201 and r.json()["valid"], r.text[:200]
                clock.advance(61)  # each request expires before the next plan
        kept = rb.query("SELECT COUNT(*) AS n, SUM(LENGTH(manifest) > 0) AS with_bytes FROM plans")[0]
    # Settled within the last 600 s, plus the one still pending: about 600 / 61 of them.
    assert kept["n"] == 120 and kept["with_bytes"] <= 12, kept
