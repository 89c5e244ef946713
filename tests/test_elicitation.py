"""The review link offered through URL-mode elicitation, with the SDK's own `mcp.Client` in both eras.

- A client that declares `elicitation.url` (the SDK declares it when given an elicitation
  callback) is offered the review_url of a newly opened request: on 2025-11-25 as an
  `elicitation/create` request during the call, on 2026-07-28 as an `InputRequiredResult` whose
  sealed requestState lets the retried call be answered without opening a second request.
- A client without the capability gets the link in `data` and a notice to show it.
- Whatever the user does with the link, the result says it confirmed nothing and to call
  confirmation_status; the request stays pending on the backend, and exactly one exists.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ElicitRequestURLParams, ElicitResult, ErrorData

from ito_training_mcp.doors.mcp.server import build_server

from .conftest import World

ERAS = {"auto": "2026-07-28", "legacy": "2025-11-25"}
PLANS = "/v1/training-plans"


class Person:
    """Stands for the user in front of the client: answers every URL elicitation with `action`."""

    def __init__(self, action: str = "accept", *, fail: bool = False) -> None:
        self.action = action
        self.fail = fail
        self.offers: list[ElicitRequestURLParams] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult | ErrorData:
        assert isinstance(params, ElicitRequestURLParams), params
        self.offers.append(params)
        if self.fail:
            return ErrorData(code=INVALID_PARAMS, message="this client cannot open links")
        return ElicitResult(action=self.action)  # type: ignore[arg-type]


def pending_requests(world: World) -> list[dict[str, Any]]:
    return world.backend.query("SELECT * FROM confirmation_requests WHERE account_id = ?", (world.account,))


def posts(world: World, path: str) -> int:
    return sum(1 for r in world.backend_requests() if r["method"] == "POST" and r["path"] == path)


def assert_confirms_nothing(world: World, envelope: dict[str, Any], action: str = "training.create") -> None:
    assert "not a confirmation" in envelope["notice"] and "confirmation_status" in envelope["notice"]
    rows = pending_requests(world)
    assert len(rows) == 1, rows  # exactly one request, whatever the exchange
    assert rows[0]["status"] == "pending" and rows[0]["confirmation_ref"] is None
    assert world.backend.query("SELECT COUNT(*) AS n FROM confirmations WHERE action = ?", (action,))[0]["n"] == 0


@pytest.mark.parametrize("mode", sorted(ERAS))
@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
async def test_the_plan_offers_its_review_link_through_the_client(
    mode: str, action: str, world: World, manifest_path: str
) -> None:
    person = Person(action)
    async with Client(build_server(world.service()), mode=mode, elicitation_callback=person) as client:
        assert client.protocol_version == ERAS[mode]
        result = await client.call_tool("plan_training", {"booking_id": world.booking, "manifest_path": manifest_path})
    envelope = result.structured_content
    assert envelope is not None and envelope["ok"] is True and result.is_error is False, envelope
    assert json.loads(result.content[0].text) == envelope
    request = envelope["data"]["confirmation_request"]
    assert len(person.offers) == 1
    offer = person.offers[0]
    assert offer.mode == "url" and offer.url == request["review_url"]
    assert offer.message.startswith("Review and confirm this training plan at the Itô desk")
    assert world.booking in offer.message and "1200.00 USD" in offer.message and "confirms nothing" in offer.message
    if mode == "legacy":
        assert offer.elicitation_id == f"ito-review-{request['request_id']}"
    assert envelope["data"]["elicitation"] == {"mode": "url", "user_action": action,
                                               "request_id": request["request_id"]}
    assert request["status"] == "pending"
    assert_confirms_nothing(world, envelope)
    assert posts(world, PLANS) == 1  # the retried call (2026-07-28) was answered from its state
    if action != "accept":
        assert "did not open the review link" in envelope["notice"]


@pytest.mark.parametrize("mode", sorted(ERAS))
async def test_without_the_capability_the_link_is_in_the_data(mode: str, world: World, manifest_path: str) -> None:
    async with Client(build_server(world.service()), mode=mode) as client:
        result = await client.call_tool("plan_training", {"booking_id": world.booking, "manifest_path": manifest_path})
    envelope = result.structured_content
    assert envelope is not None and envelope["ok"] is True
    assert "elicitation" not in envelope["data"]
    assert envelope["data"]["confirmation_request"]["review_url"].startswith(world.backend.url + "/desk/requests/")
    assert "Show the user the review_url" in envelope["notice"]
    assert len(pending_requests(world)) == 1


@pytest.mark.parametrize("mode", sorted(ERAS))
async def test_a_cancel_request_offers_its_link_too(mode: str, world: World, manifest_path: str) -> None:
    from .test_lifecycle import create_run

    run_id = await create_run(lambda **kw: Client(build_server(kw["service"]), mode=mode), world, manifest_path)
    person = Person("accept")
    async with Client(build_server(world.service()), mode=mode, elicitation_callback=person) as client:
        result = await client.call_tool("request_confirmation", {"action": "training.cancel", "run_id": run_id})
    envelope = result.structured_content
    assert envelope is not None and envelope["ok"] is True, envelope
    assert [o.url for o in person.offers] == [envelope["data"]["review_url"]]
    assert person.offers[0].message.startswith(f"Review and confirm cancelling training run {run_id}")
    assert envelope["data"]["elicitation"]["user_action"] == "accept"
    assert "cancel_training" in envelope["notice"] and "not a confirmation" in envelope["notice"]
    assert_confirms_nothing(world, envelope, "training.cancel")
    assert posts(world, "/v1/confirmation-requests") == 1


async def test_an_invalid_plan_offers_nothing(backend: Any, manifest_path: str) -> None:
    world = World(backend)
    strict = backend.op.account(allowed_data_schemes=["gs"])
    _, token = backend.op.token(strict)
    booking = backend.op.booking(strict, nodes=2, gpus_per_node=8, fabric="infiniband")["booking_id"]
    person = Person("accept")
    service = world.service(ITO_API_KEY=token)
    for mode in ERAS:
        async with Client(build_server(service), mode=mode, elicitation_callback=person) as client:
            result = await client.call_tool("plan_training", {"booking_id": booking, "manifest_path": manifest_path})
        assert result.structured_content is not None and result.structured_content["data"]["valid"] is False
    assert person.offers == []


async def test_a_legacy_client_that_fails_the_offer_still_gets_the_result(world: World, manifest_path: str) -> None:
    person = Person(fail=True)
    async with Client(build_server(world.service()), mode="legacy", elicitation_callback=person) as client:
        result = await client.call_tool("plan_training", {"booking_id": world.booking, "manifest_path": manifest_path})
    envelope = result.structured_content
    assert envelope is not None and envelope["ok"] is True
    assert envelope["data"]["elicitation"]["user_action"] == "unanswered"
    assert "show it to the user" in envelope["notice"]
    assert_confirms_nothing(world, envelope)


async def test_the_request_state_cannot_be_forged_or_reused_elsewhere(world: World, manifest_path: str) -> None:
    """2026-07-28: the state is sealed by this server and bound to the tool and its arguments."""
    arguments = {"booking_id": world.booking, "manifest_path": manifest_path}
    async with Client(build_server(world.service()), mode="auto", elicitation_callback=Person()) as client:
        first = await client.session.call_tool("plan_training", arguments, allow_input_required=True)
        state = getattr(first, "request_state", None)
        assert isinstance(state, str) and world.token not in state and "creq_" not in state  # encrypted
        for name, args, forged in [
            ("plan_training", arguments, "v1.forged"),
            ("plan_training", arguments, state[:-4] + "AAAA"),
            ("plan_training", {**arguments, "booking_id": "bk_other"}, state),
            ("request_confirmation", {"action": "training.cancel", "run_id": "run_1"}, state),
        ]:
            with pytest.raises(MCPError) as refused:
                await client.session.call_tool(name, args, request_state=forged,
                                               input_responses={"ito_review": ElicitResult(action="accept")},
                                               allow_input_required=True)
            assert refused.value.error.code == INVALID_PARAMS
        resumed = await client.session.call_tool("plan_training", arguments, request_state=state,
                                                 input_responses={"ito_review": ElicitResult(action="accept")},
                                                 allow_input_required=True)
    envelope = getattr(resumed, "structured_content", None)
    assert envelope is not None and envelope["data"]["elicitation"]["user_action"] == "accept"
    assert posts(world, PLANS) == 1 and len(pending_requests(world)) == 1
