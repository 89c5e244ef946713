"""What the review page says, over real HTTP: the decision only after every fact, the money (the
amount confirmed next to the estimate, what the booking has spent), one intent answered by one
request, warnings about runs of the same manifest, what a confirmation does and does not do, and
a plan whose stored bytes were deleted after the retention period."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from ito_training_reference import ReferenceBackend

from .test_desk import Clock, Tenant, variant
from .test_reference_backend import DOC


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def rb(clock: Clock) -> Iterator[ReferenceBackend]:
    with ReferenceBackend(clock=clock, request_ttl_s=600, plan_retention_s=3600) as backend:
        yield backend


@pytest.fixture
def tenant(rb: ReferenceBackend) -> Iterator[Tenant]:
    with Tenant.opened(rb) as opened:
        yield opened


def text_of(page: str) -> str:
    return html.unescape(page)


def test_the_decision_comes_after_every_fact(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    page = person.get(f"/desk/requests/{tenant.request_id()}").text
    facts = ["<h2>Money</h2>", "<h2>Model</h2>", "<h2>Data</h2>", "<h2>Checkpoints</h2>", "<h2>Description</h2>",
             "<h2>Booking</h2>", "<h2>Server-side checks</h2>", "<h2>Estimate</h2>", "<h2>Digest</h2>",
             "<h2>The manifest exactly as stored</h2>"]
    positions = [page.index(f) for f in facts]
    assert positions == sorted(positions)
    for button in ('class="confirm"', 'class="decline"'):
        assert page.count(button) == 1 and page.index(button) > positions[-1]
    assert "Confirm and Decline are at the end" in page and page.index('id="decision"') > positions[-1]


def test_the_money_is_explained_with_the_estimate_next_to_the_amount_confirmed(rb: ReferenceBackend,
                                                                               tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    big = json.dumps({**DOC, "budget": {"ceiling_usd": "14000.00", "max_incremental_cost_usd": "1200.00"}}).encode()
    request_id = tenant.request_id(big)
    page = text_of(person.get(f"/desk/requests/{request_id}").text)
    money = page.split("<h2>Money</h2>")[1].split("<h2>Model</h2>")[0]
    for text in ('at most <span class="money">$1,200.00</span> for this run, within the manifest\'s '
                 '<span class="money">$14,000.00</span> ceiling', "max_incremental_cost_usd", "ceiling_usd",
                 'The backend estimates <span class="money">$280.00</span>', "never a cap",
                 "Spent on this booking so far",
                 "$0.00</span>: no training run on this booking is recorded here", "not known to the desk"):
        assert text in money, text
    summary = page.split('class="summary"')[1].split("</section>")[0]
    assert "at most <span class=\"money\">$1,200.00</span>" in summary and "$280.00" in summary
    estimate = page.split("<h2>Estimate</h2>")[1].split("<h2>Digest</h2>")[0]
    assert "$280.00</span> of at most" in estimate
    for stage, usd in (("data_prep", "$40.00"), ("ladder", "$80.00"), ("sft", "$80.00"), ("dpo", "$80.00")):
        assert stage in estimate and usd in estimate
    # Once a run has spent something on the booking, the next review says how much.
    ref = person.confirm(tenant.request_id())
    run_id = tenant.run(ref, "review-money-key-0001").json()["run_id"]
    rb.op.advance(run_id)
    rb.op.advance(run_id)  # data_prep passed: $40.00 by the estimate's stages
    page = text_of(person.get(f"/desk/requests/{request_id}").text)
    assert "$40.00</span> by 1 training run(s) recorded here" in page


def test_planning_the_same_manifest_again_answers_the_same_pending_request(rb: ReferenceBackend, clock: Clock,
                                                                          tenant: Tenant) -> None:
    first = tenant.plan()
    again = tenant.api.post("/v1/training-plans", json={
        "booking_id": tenant.booking_id, "manifest_sha256": first["manifest_sha256"],
        "manifest_b64": tenant.plan_body()["manifest_b64"]})
    assert again.status_code == 200
    assert again.json()["plan_id"] == first["plan_id"]
    assert again.json()["confirmation_request"] == first["confirmation_request"]
    assert rb.query("SELECT COUNT(*) AS n FROM confirmation_requests WHERE account_id = ?",
                    (tenant.account_id,))[0]["n"] == 1
    # Another manifest, or the same one once the request is decided or expired, opens a new request.
    other = tenant.plan(variant(5))["confirmation_request"]["request_id"]
    assert other != first["confirmation_request"]["request_id"]
    rb.op.decline_request(first["confirmation_request"]["request_id"])
    after_decline = tenant.plan()["confirmation_request"]["request_id"]
    assert after_decline != first["confirmation_request"]["request_id"]
    clock.advance(601)
    assert tenant.plan()["confirmation_request"]["request_id"] != after_decline


def test_plan_training_twice_through_the_server_answers_one_request(world: Any, manifest_path: str) -> None:
    """The agent's view (the MCP service over the reference backend): one intent, one request. The second
    call is refused by the server itself and names the pending request; another server process (which
    does not know it) gets the same request back from the backend."""
    service = world.service()

    async def plan(through: Any) -> dict[str, Any]:
        return (await through.invoke("plan_training", {"booking_id": world.booking,
                                                       "manifest_path": manifest_path})).to_dict()

    first, again, elsewhere = anyio.run(plan, service), anyio.run(plan, service), anyio.run(plan, world.service())
    assert first["ok"] and elsewhere["ok"], (first, elsewhere)
    request_id = first["data"]["confirmation_request"]["request_id"]
    assert again["error"]["code"] == "IDEMPOTENCY_IN_FLIGHT" and again["error"]["details"]["request_id"] == request_id
    assert elsewhere["data"]["confirmation_request"]["request_id"] == request_id
    assert len(world.op.confirmation_requests(world.account, "pending")) == 1


def test_the_review_warns_of_runs_and_confirmations_of_the_same_manifest(rb: ReferenceBackend,
                                                                          tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    first = tenant.request_id()
    clean = person.get(f"/desk/requests/{first}").text
    assert "Check before you confirm" not in clean and "Before you confirm" not in clean
    ref = person.confirm(first)
    second = tenant.request_id()  # the same manifest again: the first is no longer pending
    page = text_of(person.get(f"/desk/requests/{second}").text)
    assert "This exact manifest was already confirmed for this booking" in page and first in page
    assert "its confirmation has not been used yet" in page
    run_id = tenant.run(ref, "review-dup-key-00001").json()["run_id"]
    page = text_of(person.get(f"/desk/requests/{second}").text)
    warning = "A run for this exact manifest already exists on this booking: <code>" + run_id + "</code>, state"
    top, decision = page.split('id="decision"')
    assert warning in top and warning in decision  # at the top, and again right above the buttons
    assert f"its confirmation was used by {run_id}" in page
    assert 'class="confirm"' in decision  # a warning, not a refusal: a second run may be meant
    # Another booking's run of the same manifest is not this booking's business.
    other_booking = rb.op.booking(tenant.account_id, nodes=2)["booking_id"]
    body = {**tenant.plan_body(), "booking_id": other_booking}
    other = tenant.api.post("/v1/training-plans", json=body).json()["confirmation_request"]["request_id"]
    assert "already exists on this booking" not in person.get(f"/desk/requests/{other}").text


def test_after_confirm_the_agent_picks_the_decision_up_itself(rb: ReferenceBackend, tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    request_id = tenant.request_id()
    ref = person.confirm(request_id)
    page = text_of(person.get(f"/desk/requests/{request_id}").text)
    assert "Give the agent" not in page
    for text in ("There is nothing to pass on", "picks your decision up by itself", "confirmation_status",
                 f"ito-training confirmation --request {request_id}", "For your records",
                 f'<code id="confirmation-ref">{ref}</code>', "starts the run with it"):
        assert text in page, text


def test_a_cancel_review_says_the_run_stops_only_when_the_cancel_is_sent(rb: ReferenceBackend,
                                                                         tenant: Tenant) -> None:
    person = tenant.person().sign_in()
    run_id = tenant.run(person.confirm(tenant.request_id()), "review-cancel-key-01").json()["run_id"]
    rb.op.advance(run_id)
    cancel = tenant.api.post("/v1/confirmation-requests", json={"action": "training.cancel", "run_id": run_id}).json()
    page = text_of(person.get(f"/desk/requests/{cancel['request_id']}").text)
    assert "Cancelling stops the run now" not in page
    assert "The run stops when that cancel is sent, not when you press Confirm" in page
    assert "nothing happens to the run before then" in page.split('id="decision"')[1]
    person.confirm(cancel["request_id"])
    page = text_of(person.get(f"/desk/requests/{cancel['request_id']}").text)
    assert "sends the cancel with it; the run stops only then" in page and f'href="/desk/runs/{run_id}"' in page
    assert next(r for r in rb.op.runs() if r["run_id"] == run_id)["state"] == "running"  # confirming did not stop it


def test_plan_bytes_are_deleted_after_the_retention_period() -> None:
    clock = Clock()
    with ReferenceBackend(clock=clock, request_ttl_s=600, plan_retention_s=3600) as rb:
        account = rb.op.account()
        _, token = rb.op.token(account)
        booking = rb.op.booking(account, nodes=2)["booking_id"]
        with httpx.Client(base_url=rb.url, headers={"Authorization": f"Bearer {token}"}, trust_env=False) as api:
            retained(rb, clock, Tenant(rb, account, token, booking, api))


def retained(rb: ReferenceBackend, clock: Clock, tenant: Tenant) -> None:
    big = json.dumps({**DOC, "description": "x" * 1000}).encode()
    person = tenant.person().sign_in()
    decided = tenant.request_id(big)
    person.decline(decided)
    expired = tenant.request_id(variant(6))  # left to expire (600 s)
    pending_plan = tenant.plan(variant(7))
    clock.advance(601 + 3600)  # past expiry and the retention period of both
    pending_now = tenant.plan(variant(8))  # the request path does a bounded share of the deleting
    rows = {r["request_id"]: r for r in rb.query(
        "SELECT request_id, LENGTH(manifest) AS n, manifest_purged_at FROM plans WHERE account_id = ?",
        (tenant.account_id,))}
    assert rows[decided]["n"] == 0 and rows[decided]["manifest_purged_at"] is not None
    assert rows[expired]["n"] == 0
    assert rows[pending_plan["confirmation_request"]["request_id"]]["n"] == 0  # expired meanwhile, retained 1 h
    assert rows[pending_now["confirmation_request"]["request_id"]]["n"] > 0  # pending: kept
    person = tenant.person().sign_in()
    page = text_of(person.get(f"/desk/requests/{decided}").text)
    assert "stored manifest bytes of this request were deleted" in page and "deleted" in page
    assert tenant.plan()["confirmation_request"]["status"] == "pending"  # planning again works as before
