"""The person's step, agent side: plan_training, request_confirmation and confirmation_status against
the reference backend, with the person signing in at the desk and deciding as a browser would
(`ReferenceBackend.person`), never through the operator API.

The backend's database and request log are the judges: how many requests were opened, which bytes
were planned, what was sent after a refusal.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ito_training_mcp.backend.models import (
    CONFIRMATION_OPERATIONS,
    REQUIRED_OPERATIONS,
    SIGN_IN_WORDS,
    review_path_names,
)
from ito_training_mcp.envelope import Envelope
from ito_training_mcp.service import TrainingService
from ito_training_reference import ReferenceBackend, reviews

from .conftest import CANARY_GITHUB, ClientFactory, World, WriteFile

PLANS = "/v1/training-plans"
REQUESTS = "/v1/confirmation-requests"


def new_key(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex}"


def requests_of(world: World) -> list[dict[str, Any]]:
    return world.backend.query("SELECT * FROM confirmation_requests WHERE account_id = ?", (world.account,))


def sent(world: World, method: str, path: str) -> int:
    return sum(1 for r in world.backend_requests() if r["method"] == method and r["path"] == path)


def envelope_of(result: Any) -> dict[str, Any]:
    envelope = result.structured_content
    assert isinstance(envelope, dict) and result.is_error is (not envelope["ok"])
    return dict(envelope)


async def decide(world: World, request_id: str, *, confirm: bool = True) -> str | None:
    """The person signs in at the desk with their single-use link and decides, as a browser would."""
    person = world.backend.person(world.account)
    await anyio.to_thread.run_sync(person.sign_in)
    if confirm:
        return str(await anyio.to_thread.run_sync(person.confirm, request_id))
    await anyio.to_thread.run_sync(person.decline, request_id)
    return None


# ---------------------------------------------------------------------- the whole story, over MCP


async def test_plan_desk_status_submit_over_mcp(connect: ClientFactory, world: World, manifest_path: str) -> None:
    """plan -> the person confirms at the desk -> confirmation_status -> submit with the returned ref."""
    async with connect(service=world.service()) as client:
        plan = envelope_of(await client.call_tool("plan_training", {"booking_id": world.booking,
                                                                    "manifest_path": manifest_path}))
        assert plan["ok"] is True and plan["live_api_contacted"] is True, plan
        data = plan["data"]
        file_bytes = Path(manifest_path).read_bytes()
        assert data["valid"] is True and data["failed_checks"] == []
        assert data["manifest_sha256"] == hashlib.sha256(file_bytes).hexdigest()
        assert data["booking_id"] == world.booking and data["account_id"] == world.account
        assert {c["status"] for c in data["checks"]} == {"passed"}
        assert data["estimate"]["usd"] and data["estimate"]["gpu_hours"] > 0 and data["estimate"]["basis"]
        request = data["confirmation_request"]
        assert request["status"] == "pending" and request["action"] == "training.create"
        assert request["max_cost_usd"] == data["max_cost_usd"] == "1200.00"  # the manifest's incremental cost
        assert request["review_url"] == f"{world.backend.url}/desk/requests/{request['request_id']}"
        assert "review_text" in data and data["review"]["budget"]["max_incremental_cost_usd"] == "1200.00"
        for step in ("review_url", "confirmation_status", "submit_training", "idempotency_key", "sign in"):
            assert step in plan["notice"], step
        # The backend holds the exact bytes that were hashed, and the request is bound to them.
        stored = world.backend.query("SELECT manifest FROM plans WHERE plan_id = ?", (data["plan_id"],))[0]
        assert stored["manifest"] == file_bytes
        assert [(r["action"], r["manifest_sha256"], r["max_cost_usd"], r["status"]) for r in requests_of(world)] == [
            ("training.create", data["manifest_sha256"], "1200.00", "pending")]

        status_args = {"request_id": request["request_id"]}
        pending = envelope_of(await client.call_tool("confirmation_status", status_args))
        assert pending["data"]["status"] == "pending" and pending["data"]["confirmation_ref"] is None
        assert pending["data"]["next_tool"] is None and "not decided" in pending["notice"]

        ref = await decide(world, request["request_id"])
        confirmed = envelope_of(await client.call_tool("confirmation_status", {**status_args, "wait_seconds": 5}))
        assert confirmed["data"]["status"] == "confirmed" and confirmed["data"]["confirmation_ref"] == ref
        assert confirmed["data"]["next_tool"] == "submit_training"
        assert confirmed["data"]["manifest_sha256"] == data["manifest_sha256"]
        assert "submit_training" in confirmed["notice"] and "idempotency_key" in confirmed["notice"]

        key = new_key("plan-submit")
        submitted = envelope_of(await client.call_tool("submit_training", {
            "booking_id": world.booking, "manifest_path": manifest_path, "confirmation_ref": ref,
            "idempotency_key": key}))
        assert submitted["ok"] is True and submitted["data"]["created"] is True, submitted
    assert world.backend.runs_for_key(world.account, key) == 1
    assert len(requests_of(world)) == 1


async def confirmed_run(world: World, service: TrainingService, manifest_path: str) -> str:
    """Planned, confirmed at the desk (as the person would) and submitted: the new run's id."""
    plan = await service.plan_training(world.booking, manifest_path)
    assert plan.data is not None
    ref = await decide(world, plan.data["confirmation_request"]["request_id"])
    run = await service.submit_training(world.booking, manifest_path, ref, new_key("submit"))
    assert run.data is not None
    return str(run.data["run_id"])


async def test_cancel_and_cleanup_through_requests(world: World, manifest_path: str) -> None:
    service = world.service()
    run_id = await confirmed_run(world, service, manifest_path)
    world.op.advance(run_id)

    early = await service.request_confirmation("training.cleanup", run_id)  # still running: no cleanup yet
    assert early.error is not None and early.error.code.value == "VALIDATION_REJECTED"
    assert early.error.details and early.error.details["reason"] == "run_active"
    assert "request_confirmation" in early.notice and "training.cancel" in early.notice

    for action, tool in (("training.cancel", "cancel_training"), ("training.cleanup", "cleanup_training")):
        opened = await service.request_confirmation(action, run_id)
        assert opened.ok and opened.data is not None, opened.to_json()
        assert opened.data["action"] == action and opened.data["run_id"] == run_id
        assert opened.data["booking_id"] == world.booking and opened.data["status"] == "pending"
        assert tool in opened.notice and "confirmation_status" in opened.notice
        action_ref = await decide(world, opened.data["request_id"])
        status = await service.confirmation_status(opened.data["request_id"])
        assert status.data is not None and status.data["next_tool"] == tool
        assert status.data["run_id"] == run_id and status.data["confirmation_ref"] == action_ref
        done = await getattr(service, tool)(run_id, action_ref, new_key(action.replace(".", "-")))
        assert done.ok, done.to_json()

    late = await service.request_confirmation("training.cancel", run_id)  # cleaned up: nothing to cancel
    assert late.error is not None and late.error.code.value == "RUN_NOT_CANCELLABLE"
    assert world.booking in {b["booking_id"] for b in world.op.bookings(world.account)}


async def test_an_invalid_plan_opens_nothing_and_says_what_to_fix(backend: Any, manifest_path: str) -> None:
    world = World(backend)
    strict = backend.op.account(allowed_data_schemes=["gs"], budget_limit_usd="1000.00")
    _, token = backend.op.token(strict)
    booking = backend.op.booking(strict, nodes=2, gpus_per_node=8, fabric="infiniband")["booking_id"]
    service = TrainingService({**world.env, "ITO_API_KEY": token})
    envelope = await service.plan_training(booking, manifest_path)
    assert envelope.ok is True and envelope.data is not None, envelope.to_json()
    assert envelope.data["valid"] is False and envelope.data["confirmation_request"] is None
    assert envelope.data["failed_checks"] == ["data_policy", "budget"]
    failed = [c for c in envelope.data["checks"] if c["status"] == "failed"]
    assert [c["reason"] for c in failed] == ["data_policy", "above_account_limit"] and all(c["message"] for c in failed)
    assert "No confirmation request was opened" in envelope.notice and "submit_training" in envelope.notice
    assert backend.query("SELECT COUNT(*) AS n FROM confirmation_requests WHERE account_id = ?", (strict,))[0]["n"] == 0


# ---------------------------------------------------------------------- refusals


async def test_the_local_gates_come_first_and_send_nothing(world: World, write_file: WriteFile,
                                                           example_document: dict[str, Any]) -> None:
    service = world.service()
    world.op.clear_requests()
    secret = write_file({**example_document, "description": f"token {CANARY_GITHUB}"})
    for envelope, code in [
        (await service.plan_training("bad id", "/x.json"), "INVALID_INPUT"),
        (await service.plan_training(world.booking, "relative.json"), "MANIFEST_PATH_INVALID"),
        (await service.plan_training(world.booking, secret), "MANIFEST_SECRET"),
        (await service.request_confirmation("training.create", "run_1"), "INVALID_INPUT"),
        (await service.request_confirmation("force", "run_1"), "INVALID_INPUT"),
        (await service.confirmation_status("../x"), "INVALID_INPUT"),
        (await TrainingService({}).plan_training(world.booking, secret), "TRAINING_UNAVAILABLE"),
        (await TrainingService({}).confirmation_status("creq_1"), "TRAINING_UNAVAILABLE"),
    ]:
        assert envelope.error is not None and envelope.error.code.value == code, envelope.to_json()
        assert envelope.live_api_contacted is False
        assert CANARY_GITHUB not in envelope.to_json()
    assert world.backend_requests() == []
    refused = await service.request_confirmation("training.create", "run_1")
    assert refused.error is not None and refused.error.details == {"argument": "action", "problem": "not_allowed"}
    assert "training.cancel, training.cleanup" in refused.error.message


async def test_the_plan_needs_both_new_operations_and_submit_does_not(world: World, manifest_path: str) -> None:
    world.op.capabilities(True, list(REQUIRED_OPERATIONS))
    service = world.service()
    for envelope in (await service.plan_training(world.booking, manifest_path),
                     await service.request_confirmation("training.cancel", "run_1"),
                     await service.confirmation_status("creq_1")):
        assert envelope.error is not None and envelope.error.code.value == "LIFECYCLE_INCOMPLETE"
        assert envelope.error.details == {"missing_operations": list(CONFIRMATION_OPERATIONS)}
        assert "plan, confirmation_requests" in envelope.error.message
    assert sent(world, "POST", PLANS) == 0 and sent(world, "GET", "/v1/me") == 0  # no credential was used
    # The seven lifecycle operations still suffice for everything else.
    assert (await service.check_training_availability(world.booking)).ok
    world.op.capabilities(True, [*REQUIRED_OPERATIONS, "plan"])
    missing = await service.plan_training(world.booking, manifest_path)
    assert missing.error is not None and missing.error.details == {"missing_operations": ["confirmation_requests"]}


async def test_booking_refusals_map_to_contract_codes(world: World, manifest_path: str) -> None:
    service = world.service()
    unknown = await service.plan_training("bk_nobody", manifest_path)
    assert unknown.error is not None and unknown.error.code.value == "BOOKING_NOT_FOUND"
    expired = world.op.booking(world.account, term_ends_in_s=-60)["booking_id"]
    late = await service.plan_training(expired, manifest_path)
    assert late.error is not None and late.error.code.value == "BOOKING_NOT_ELIGIBLE"
    # The backend's own refusal of the plan (the eligibility read said yes, the plan says no) maps alike.
    world.op.fault("POST /v1/training-plans", "error", status=403, code="booking_not_eligible")
    refused = await service.plan_training(world.booking, manifest_path)
    assert refused.error is not None and refused.error.code.value == "BOOKING_NOT_ELIGIBLE"
    assert requests_of(world) == []


async def test_too_many_pending_requests_is_rate_limited_with_a_reason(
    world: World, write_file: WriteFile, example_document: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reviews, "MAX_PENDING_PER_ACCOUNT", 2)
    service = world.service()
    # Three different manifests (the same one again would answer its pending request).
    paths = [write_file({**example_document, "description": f"variant {i}"}) for i in range(3)]
    assert (await service.plan_training(world.booking, paths[0])).ok
    assert (await service.plan_training(world.booking, paths[1])).ok
    refused = await service.plan_training(world.booking, paths[2])
    assert refused.error is not None and refused.error.code.value == "RATE_LIMITED", refused.to_json()
    assert refused.error.details == {"reason": "too_many_pending_requests", "status": 409}
    assert refused.error.retryable is True
    assert "decide or decline the pending ones" in refused.notice and "loop" in refused.notice
    assert len(requests_of(world)) == 2


async def test_a_lost_plan_answer_is_never_resent(world: World, manifest_path: str) -> None:
    """Plans are not keyed: after a dropped answer the POST is not retried; the notice says what that means."""
    service = world.service()
    world.op.clear_requests()
    world.op.fault("POST /v1/training-plans", "drop")
    envelope = await service.plan_training(world.booking, manifest_path)
    assert envelope.error is not None and envelope.error.code.value in ("BACKEND_ERROR", "BACKEND_TIMEOUT")
    assert sent(world, "POST", PLANS) == 1
    assert "expires unused" in envelope.notice


async def test_confirmation_status_refusals_and_decisions(world: World, manifest_path: str, backend: Any) -> None:
    service = world.service()
    unknown = await service.confirmation_status("creq_nobody")
    assert unknown.error is not None and unknown.error.code.value == "CONFIRMATION_NOT_FOUND"
    plan = await service.plan_training(world.booking, manifest_path)
    assert plan.data is not None
    request_id = plan.data["confirmation_request"]["request_id"]
    other = World(backend)  # another tenant cannot see it, and learns nothing about it
    theirs = await other.service().confirmation_status(request_id)
    assert theirs.error is not None and theirs.error.code.value == "CONFIRMATION_NOT_FOUND"
    assert request_id not in theirs.to_json()

    await decide(world, request_id, confirm=False)
    declined = await service.confirmation_status(request_id, 5)
    assert declined.data is not None and declined.data["status"] == "declined"
    assert declined.data["confirmation_ref"] is None and declined.data["next_tool"] is None
    assert declined.data["wait"]["timed_out"] is False
    assert "declined" in declined.notice and "Stop" in declined.notice and "unless they bring it up" in declined.notice
    assert world.backend.query("SELECT COUNT(*) AS n FROM confirmations WHERE account_id = ?",
                               (world.account,))[0]["n"] == 0


async def test_an_expired_request_says_ask_the_user(manifest_path: str) -> None:
    with ReferenceBackend(request_ttl_s=1) as short:
        world = World(short)
        service = world.service()
        plan = await service.plan_training(world.booking, manifest_path)
        assert plan.data is not None and plan.data["confirmation_request"]["status"] == "pending"
        expired = await service.confirmation_status(plan.data["confirmation_request"]["request_id"], 20)
    assert expired.data is not None and expired.data["status"] == "expired", expired.to_json()
    assert expired.data["wait"]["timed_out"] is False
    assert "Ask the user whether they still want this" in expired.notice and "plan_training" in expired.notice


async def test_the_wait_is_clamped_to_the_server_limit(world: World, manifest_path: str) -> None:
    service = world.service(ITO_TRAINING_MAX_WAIT_S="1")
    plan = await service.plan_training(world.booking, manifest_path)
    assert plan.data is not None
    waited = await service.confirmation_status(plan.data["confirmation_request"]["request_id"], 600)
    assert waited.data is not None, waited.to_json()
    wait = waited.data["wait"]
    assert (wait["requested_s"], wait["limit_s"], wait["clamped"], wait["timed_out"]) == (600, 1, True, True)
    assert 1 <= wait["waited_s"] < 600
    assert "limit of 1 s" in waited.notice and "ITO_TRAINING_MAX_WAIT_S" in waited.notice
    unclamped = await world.service().confirmation_status(plan.data["confirmation_request"]["request_id"])
    assert unclamped.data is not None and unclamped.data["wait"]["clamped"] is False
    assert unclamped.data["wait"]["limit_s"] == 55  # the default


@pytest.mark.parametrize("value", ["601", "-1", "abc", "1.5"])
async def test_the_wait_limit_is_bounded(world: World, value: str) -> None:
    for envelope in (await world.service(ITO_TRAINING_MAX_WAIT_S=value).confirmation_status("creq_1"),
                     await world.service(ITO_TRAINING_MAX_WAIT_S=value).training_status(run_id="run_1")):
        assert envelope.error is not None and envelope.error.code.value == "CONFIG_INVALID"
        assert envelope.error.details and envelope.error.details["setting"] == "ITO_TRAINING_MAX_WAIT_S"
        assert envelope.live_api_contacted is False


async def test_revocation_while_waiting_for_the_person_stops_at_once(world: World, manifest_path: str) -> None:
    service = world.service()
    plan = await service.plan_training(world.booking, manifest_path)
    assert plan.data is not None
    request_id = plan.data["confirmation_request"]["request_id"]
    world.op.clear_requests()
    revoked: list[bool] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        if not revoked:
            revoked.append(True)
            await anyio.to_thread.run_sync(world.op.revoke, world.token_id)

    envelope = await service.confirmation_status(request_id, 30, progress=progress)
    assert envelope.error is not None and envelope.error.code.value == "CREDENTIAL_REVOKED"
    log = world.backend_requests()
    assert [r["status"] for r in log].count(401) == 1 and log[-1]["status"] == 401


async def test_the_reference_authorises_nothing_by_itself(world: World, manifest_path: str,
                                                        write_file: WriteFile, example_document: dict[str, Any]) -> None:
    """A confirmed reference for one digest does not let another manifest through: gate 6 is unchanged."""
    service = world.service()
    plan = await service.plan_training(world.booking, manifest_path)
    assert plan.data is not None
    ref = await decide(world, plan.data["confirmation_request"]["request_id"])
    changed = write_file({**example_document, "description": "changed after the review"})
    refused = await service.submit_training(world.booking, changed, ref, new_key("other-digest"))
    assert refused.error is not None and refused.error.code.value == "DIGEST_MISMATCH"
    assert "plan_training" in refused.notice
    assert world.backend.run_count() == 0


# ---------------------------------------------------------------------- what a hostile plan answer cannot do


SHA = "a" * 64
SIGN_IN_SECRET = "Zq3vT0pXbR8wK2mN5yH7jL1cF4dG6sA9eU0iO3tYb2M"  # the shape of a desk sign-in link's secret


def _plan_body(service_sha: str, account: str, booking: str, **changes: Any) -> dict[str, Any]:
    request = {
        "request_id": "creq_h1", "account_id": account, "action": "training.create", "status": "pending",
        "booking_id": booking, "run_id": None, "plan_id": "plan_h1", "manifest_sha256": service_sha,
        "max_cost_usd": "1200.00", "review_url": "https://desk.example/desk/requests/creq_h1",
        "expires_at": "2099-01-01T00:00:00Z", "created_at": "2026-11-30T00:00:00Z", "decided_at": None,
        "confirmation_ref": None,
    }
    request.update(changes.pop("request", {}))
    body = {"plan_id": "plan_h1", "account_id": account, "booking_id": booking, "manifest_sha256": service_sha,
            "valid": True, "checks": [{"name": "manifest", "status": "passed", "reason": None, "message": None}],
            "estimate": {"usd": "240.00", "gpu_hours": 96.0, "basis": "b"}, "confirmation_request": request,
            "created_at": "2026-11-30T00:00:00Z"}
    body.update(changes)
    return body


HOSTILE_PLANS: dict[str, dict[str, Any]] = {
    "another booking": {"booking_id": "bk_other"},
    "another digest": {"manifest_sha256": SHA},
    "another account": {"account_id": "acct_other"},
    "a check neither passed nor failed": {"checks": [{"name": "manifest", "status": "skipped"}]},
    "valid with a failed check": {"checks": [{"name": "budget", "status": "failed", "reason": "x"}]},
    "valid without a request": {"confirmation_request": None},
    "money as a number": {"estimate": {"usd": 240.0, "gpu_hours": 96.0, "basis": "b"}},
    "request for another digest": {"request": {"manifest_sha256": SHA}},
    "request for another booking": {"request": {"booking_id": "bk_other"}},
    "request for another account": {"request": {"account_id": "acct_other"}},
    "request for a cancel": {"request": {"action": "training.cancel"}},
    "request already confirmed": {"request": {"status": "confirmed", "confirmation_ref": "cnf_forged"}},
    "request with a lower cost": {"request": {"max_cost_usd": "1.00"}},
    "request of another plan": {"request": {"plan_id": "plan_other"}},
    "review url over plain http": {"request": {"review_url": "http://desk.example/desk/requests/creq_h1"}},
    "review url with userinfo": {"request": {"review_url": "https://u:p@desk.example/desk/requests/creq_h1"}},
    "review url with a sign-in token": {"request": {"review_url": "https://desk.example/desk/r?token=abc"}},
    "review url with a fragment": {"request": {"review_url": "https://desk.example/desk/r#x"}},
    "review url javascript": {"request": {"review_url": "javascript:alert(1)"}},
    "review url too long": {"request": {"review_url": "https://desk.example/" + "a" * 2100}},
    "review url without a page": {"request": {"review_url": "https://desk.example"}},
    "review url with a credential": {"request": {"review_url": f"https://desk.example/{CANARY_GITHUB}"}},
    "review url with a control": {"request": {"review_url": "https://desk.example/desk/\u202eevil"}},
    # The path must be short lowercase words, then this request's id: never a sign-in link.
    "review url that signs in": {"request": {"review_url": "https://desk.example/desk/sign-in/" + SIGN_IN_SECRET}},
    "review url that signs in at the end": {
        "request": {"review_url": f"https://desk.example/desk/requests/creq_h1/{SIGN_IN_SECRET}"}},
    "review url with a secret segment": {
        "request": {"review_url": f"https://desk.example/login/{SIGN_IN_SECRET.lower()[:40]}/creq_h1"}},
    "review url of another request": {"request": {"review_url": "https://desk.example/desk/requests/creq_h2"}},
    "review url with a trailing slash": {"request": {"review_url": "https://desk.example/desk/requests/creq_h1/"}},
    "review url with an upper-case word": {"request": {"review_url": "https://desk.example/Desk/requests/creq_h1"}},
    "review url with a long word": {"request": {"review_url": f"https://desk.example/{'d' * 33}/creq_h1"}},
    "review url with digits in a word": {"request": {"review_url": "https://desk.example/a1b2c3d4e5f6/creq_h1"}},
    "review url through a sign-in word": {"request": {"review_url": "https://desk.example/desk/sign-in/creq_h1"}},
    "review url with many words": {"request": {"review_url": "https://desk.example/a/b/c/d/e/creq_h1"}},
    "review url naming only a prefix": {"request": {"review_url": "https://desk.example/desk/requests/creq_h"}},
    "review url with the id encoded": {"request": {"review_url": "https://desk.example/desk/requests/creq%5Fh1"}},
}


class PlanAnswer(httpx.AsyncBaseTransport):
    """The reference backend for everything, except that POST /v1/training-plans answers `body`."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.inner = httpx.AsyncHTTPTransport(retries=0)
        self.body = body
        self.planned: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == PLANS:
            self.planned.append(json.loads(request.content))
            trace = request.extensions.get("trace")
            if trace is not None:
                await trace("http11.send_request_headers.started", {"request": request})
            return httpx.Response(201, json=self.body)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("case", sorted(HOSTILE_PLANS))
async def test_a_plan_answer_that_is_not_bound_to_this_plan_is_refused(
    case: str, world: World, manifest_path: str
) -> None:
    digest = hashlib.sha256(Path(manifest_path).read_bytes()).hexdigest()
    fake = PlanAnswer(_plan_body(digest, world.account, world.booking, **HOSTILE_PLANS[case]))
    envelope: Envelope = await TrainingService(world.env, transport=fake).plan_training(world.booking, manifest_path)
    await fake.aclose()
    assert envelope.error is not None, envelope.to_json()
    assert envelope.error.code.value == "BACKEND_INVALID_RESPONSE", envelope.to_json()
    assert "cnf_forged" not in envelope.to_json() and CANARY_GITHUB not in envelope.to_json()
    assert SIGN_IN_SECRET not in envelope.to_json() and SIGN_IN_SECRET.lower()[:40] not in envelope.to_json()
    # The bytes planned were the file's bytes, with their digest, exactly once.
    assert len(fake.planned) == 1
    assert base64.b64decode(fake.planned[0]["manifest_b64"]) == Path(manifest_path).read_bytes()
    assert fake.planned[0]["manifest_sha256"] == digest


async def test_the_hostile_harness_accepts_a_bound_answer(world: World, manifest_path: str) -> None:
    digest = hashlib.sha256(Path(manifest_path).read_bytes()).hexdigest()
    fake = PlanAnswer(_plan_body(digest, world.account, world.booking))
    envelope = await TrainingService(world.env, transport=fake).plan_training(world.booking, manifest_path)
    await fake.aclose()
    assert envelope.ok, envelope.to_json()
    assert envelope.data is not None and envelope.data["confirmation_request"]["request_id"] == "creq_h1"


_WORDS = st.lists(st.from_regex(r"[a-z]{1,12}(-[a-z]{1,12})?", fullmatch=True).filter(
    lambda w: w not in SIGN_IN_WORDS), max_size=3)
_IDS = st.from_regex(r"creq_[A-Za-z0-9_]{1,24}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(_WORDS, _IDS, st.sampled_from(["A", "_", "~", ".", "%41", "7", "--", "x" * 33, SIGN_IN_SECRET, ""]))
def test_property_a_review_path_is_short_words_then_the_request(words: list[str], request_id: str, odd: str) -> None:
    url = "https://desk.example/" + "/".join([*words, request_id])
    assert review_path_names(url, request_id)
    assert not review_path_names(url + "/", request_id)
    assert not review_path_names(url + "x", request_id)
    assert not review_path_names(url + "/" + SIGN_IN_SECRET, request_id)
    assert not review_path_names("https://desk.example/" + "/".join([*words, f"w{odd}w" if odd else "", request_id]),
                                 request_id)
    for word in sorted(SIGN_IN_WORDS):  # a path through a sign-in page is no review page, whatever its end
        assert not review_path_names("https://desk.example/" + "/".join([*words, word, request_id]), request_id)
    assert not review_path_names("https://desk.example/" + "/".join(["a"] * 5 + [request_id]), request_id)


def test_the_desks_own_sign_in_link_is_never_a_review_url(backend: ReferenceBackend) -> None:
    """The reference desk's sign-in link is a well-formed URL; it is no request's page. (A backend that
    named a request after a sign-in secret would relay the secret as the request id itself: a request
    id is the backend's to choose, and the contract makes it an opaque identifier.)"""
    account = backend.op.account()
    link = str(backend.op.login_link(account)["url"])
    assert "/sign-in/" in link
    for request_id in ("creq_1", "creq_" + link.rsplit("/", 1)[1][:8], link.rsplit("/", 2)[1]):
        assert not review_path_names(link, request_id)


async def test_a_cancel_request_whose_run_finished_first_reads_as_expired(world: World, manifest_path: str) -> None:
    """The run finished while the person was still reading: nobody can carry the cancel out any more, so
    the request reads as expired and the notice sends the agent to the run's state, not to wait on."""
    service = world.service()
    run_id = await confirmed_run(world, service, manifest_path)
    opened = await service.request_confirmation("training.cancel", run_id)
    assert opened.ok and opened.data is not None, opened.to_json()
    request_id = opened.data["request_id"]
    pending = await service.confirmation_status(request_id)
    assert pending.data is not None and pending.data["status"] == "pending"
    world.op.finish(run_id)
    lapsed = await service.confirmation_status(request_id, wait_seconds=5)
    assert lapsed.ok and lapsed.data is not None, lapsed.to_json()
    assert lapsed.data["status"] == "expired" and lapsed.data.get("confirmation_ref") is None
    assert "training_status" in lapsed.notice and "cannot be cancelled" in lapsed.notice
