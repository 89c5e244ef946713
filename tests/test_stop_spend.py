"""Stopping a run's spend is never blocked by plans an agent opened.

The attack: an agent opens plan after plan until the account's quota of pending requests is full;
`request_confirmation(training.cancel)` for a running, spending run then got `RATE_LIMITED`, and the
person had to decline the plans one by one. Now a cancel request never competes with plans for the
quota, the desk declines every waiting plan in one action, and `plan_training` refuses locally to
open the same plan again while its request is pending. Real HTTP against the reference backend; the
person uses the desk as a browser does.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import anyio
import httpx

from ito_training_reference import reviews

from .conftest import World, WriteFile


def _plan_directly(world: World, manifest: bytes) -> httpx.Response:
    """What a looping agent sends: one plan per manifest variant, with the account's own token."""
    with httpx.Client(base_url=world.backend.url, trust_env=False,
                      headers={"Authorization": f"Bearer {world.token}"}) as http:
        return http.post("/v1/training-plans", json={
            "booking_id": world.booking, "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
            "manifest_b64": base64.b64encode(manifest).decode()})


async def _running_run(world: World, manifest_path: str) -> str:
    service = world.service()
    digest = await service.digest_manifest(manifest_path)
    assert digest.data is not None
    created = await service.submit_training(world.booking, manifest_path, world.confirm(digest.data["sha256"]),
                                            "stop-spend-run-key-0001")
    assert created.data is not None, created.to_json()
    run_id = str(created.data["run_id"])
    world.op.advance(run_id)
    return run_id


async def test_a_full_plan_quota_never_blocks_the_cancel_and_the_desk_clears_it_at_once(
    world: World, write_file: WriteFile, example_document: dict[str, Any]
) -> None:
    run_id = await _running_run(world, write_file(example_document))
    for n in range(reviews.MAX_PENDING_PER_ACCOUNT):
        variant = json.dumps({**example_document, "description": f"flood {n}"}).encode()
        assert _plan_directly(world, variant).status_code == 201
    one_more = json.dumps({**example_document, "description": "one more"}).encode()
    refused = _plan_directly(world, one_more)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "too_many_pending_requests"

    service = world.service()
    asked = await service.request_confirmation("training.cancel", run_id)
    assert asked.ok, asked.to_json()  # stopping spend does not compete with the plans
    assert asked.data is not None
    cancel_request = str(asked.data["request_id"])

    person = world.backend.person(world.account)
    await anyio.to_thread.run_sync(person.sign_in)
    assert len(await anyio.to_thread.run_sync(person.pending)) == reviews.MAX_PENDING_PER_ACCOUNT + 1
    await anyio.to_thread.run_sync(person.decline_all_plans)  # one action
    assert await anyio.to_thread.run_sync(person.pending) == [cancel_request]  # the cancel request stays
    declined = world.op.confirmation_requests(world.account, "declined")
    assert len(declined) == reviews.MAX_PENDING_PER_ACCOUNT
    assert {r["action"] for r in declined} == {"training.create"}

    ref = await anyio.to_thread.run_sync(person.confirm, cancel_request)
    cancelled = await service.cancel_training(run_id, ref, "stop-spend-cancel-key-01")
    assert cancelled.ok and cancelled.data is not None, cancelled.to_json()
    assert cancelled.data["state"] in ("cancelling", "cancelled")


async def test_plan_training_refuses_locally_while_the_same_plan_is_pending(
    world: World, manifest_path: str
) -> None:
    service = world.service()
    first = await service.plan_training(world.booking, manifest_path)
    assert first.ok and first.data is not None, first.to_json()
    request_id = first.data["confirmation_request"]["request_id"]
    posts_before = sum(r["method"] == "POST" for r in world.backend_requests())

    again = await service.plan_training(world.booking, manifest_path)
    assert again.error is not None and again.error.code.value == "IDEMPOTENCY_IN_FLIGHT", again.to_json()
    assert again.live_api_contacted is False
    assert again.error.details is not None and again.error.details["request_id"] == request_id
    assert request_id in again.notice and "confirmation_status" in again.notice
    assert sum(r["method"] == "POST" for r in world.backend_requests()) == posts_before

    # Once the person decided and the agent learnt it, the same manifest may be planned again.
    person = world.backend.person(world.account)
    await anyio.to_thread.run_sync(person.sign_in)
    await anyio.to_thread.run_sync(person.decline, request_id)
    status = await service.confirmation_status(request_id)
    assert status.data is not None and status.data["status"] == "declined"
    replanned = await service.plan_training(world.booking, manifest_path)
    assert replanned.ok and replanned.data is not None, replanned.to_json()
    assert replanned.data["confirmation_request"]["request_id"] != request_id
