"""Each tool's outputSchema types its `data` and holds every envelope the tool really returns.

Every tool is driven through success and through a refusal against the reference backend, over a
real MCP client in both protocol eras; each envelope is validated against the schema the client
read from tools/list, under draft-07 and under 2020-12 (clients compile with either). The schemas
are exact, so they also refuse what the contract forbids, under both drafts.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections import Counter
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.protocols import Validator

from ito_training_mcp.tools.specs import ALL_TOOLS

from .conftest import ClientFactory, World

DRAFTS: tuple[type[Validator], ...] = (Draft7Validator, Draft202012Validator)

# What only 2019-09 or later has, what draft-07 lacks, and what the LLM vendors' subsets lack.
NOT_PORTABLE = {"dependentSchemas", "dependentRequired", "unevaluatedProperties", "unevaluatedItems",
                "prefixItems", "$defs", "definitions", "$ref", "const", "not", "if", "then", "else", "oneOf",
                "allOf", "patternProperties", "propertyNames", "dependencies", "$schema"}


def _keywords(node: Any) -> set[str]:
    """Every keyword used anywhere in a schema (property names are not keywords)."""
    if isinstance(node, list):
        return set().union(*(_keywords(item) for item in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = set(node) - {"properties"}
    for key, value in node.items():
        if key == "properties":
            found |= set().union(*(_keywords(sub) for sub in value.values())) if value else set()
        else:
            found |= _keywords(value)
    return found


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda s: s.name)
def test_every_output_schema_is_valid_under_draft_07_and_2020_12_and_portable(spec: Any) -> None:
    schema = spec.output_schema()
    Draft7Validator.check_schema(schema)
    Draft202012Validator.check_schema(schema)
    assert not _keywords(schema) & NOT_PORTABLE, _keywords(schema) & NOT_PORTABLE
    # The MCP rule: an object at the root; the envelope's head is listed there for plain readers.
    assert schema["type"] == "object" and schema["required"] == ["ok", "live_api_contacted", "notice"]
    assert schema["additionalProperties"] is False
    ok_true, ok_false = schema["anyOf"]
    assert ok_true["properties"]["ok"]["enum"] == [True] and ok_true["required"] == ["data"]
    assert ok_false["properties"]["ok"]["enum"] == [False] and ok_false["required"] == ["error"]


def _key(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex}"


async def test_every_tool_succeeds_and_refuses_within_its_output_schema(
    connect: ClientFactory, world: World, manifest_path: str
) -> None:
    seen: Counter[tuple[str, bool]] = Counter()
    shapes: set[str] = set()
    async with connect(service=world.service()) as client:
        listed = (await client.list_tools()).tools
        for tool in listed:
            assert tool.output_schema is not None
            Draft7Validator.check_schema(tool.output_schema)
            Draft202012Validator.check_schema(tool.output_schema)
        validators = {t.name: [draft(t.output_schema) for draft in DRAFTS] for t in listed}

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            envelope = result.structured_content
            assert isinstance(envelope, dict)
            for validator in validators[tool]:
                errors = [e.message for e in validator.iter_errors(envelope)]
                assert not errors, (tool, type(validator).__name__, errors, json.dumps(envelope)[:2000])
            seen[(tool, bool(envelope["ok"]))] += 1
            return envelope

        # check: without a booking, with one, and refused for an unknown one
        assert (await call("check_training_availability", {}))["data"]["booking"] is None
        eligible = await call("check_training_availability", {"booking_id": world.booking})
        assert "account_id" in eligible["data"] and eligible["data"]["booking"]["eligible"] is True
        await call("check_training_availability", {"booking_id": "bk_nobody"})

        digest = await call("digest_manifest", {"manifest_path": manifest_path})
        await call("digest_manifest", {"manifest_path": "relative.json"})
        sha256 = digest["data"]["sha256"]

        key = _key("schemas")
        submit = {"booking_id": world.booking, "manifest_path": manifest_path, "idempotency_key": key}
        assert (await call("submit_training", submit))["error"]["code"] == "CONFIRMATION_REQUIRED"
        created = await call("submit_training", {**submit, "confirmation_ref": world.confirm(sha256)})
        run_id = created["data"]["run_id"]
        assert (await call("submit_training", {**submit, "confirmation_ref": "cf_other"}))["data"]["created"] is False

        world.op.advance(run_id)
        world.op.advance(run_id)  # a stage gate with evals
        status = await call("training_status", {"run_id": run_id, "wait_seconds": 0})
        shapes.add("found" if status["data"]["found"] else "missing")
        missing = await call("training_status", {"idempotency_key": _key("never-used")})
        shapes.add("found" if missing["data"]["found"] else "missing")
        await call("training_status", {"run_id": "run_nobody"})

        await call("training_logs", {"run_id": run_id, "limit": 1})
        await call("training_logs", {"run_id": run_id, "cursor": "c d"})
        await call("training_metrics", {"run_id": run_id})
        await call("training_metrics", {"run_id": "run_nobody"})
        await call("list_checkpoints", {"run_id": run_id})
        await call("list_checkpoints", {"run_id": "run_nobody"})

        # An interruption, a loss spike and the restart the user confirms.
        world.op.advance(run_id)  # the ladder passed, sft running
        world.op.interrupt(run_id)
        proposal = world.op.spike(run_id)["proposed_actions"][0]
        await call("training_status", {"run_id": run_id})
        await call("training_metrics", {"run_id": run_id})
        await call("request_confirmation", {"action": "training.restart", "run_id": run_id})
        restart = {"run_id": run_id, "idempotency_key": _key("restart")}
        await call("restart_training", restart)
        restart_ref = world.op.confirmation(world.account, "training.restart", world.booking,
                                            proposal["repeated_cost_usd"], run_id=run_id,
                                            proposal_id=proposal["proposal_id"])["ref"]
        assert (await call("restart_training", {**restart, "confirmation_ref": restart_ref}))["ok"]

        def confirm(action: str) -> str:
            return str(world.op.confirmation(world.account, action, world.booking, "0.00", run_id=run_id)["ref"])

        # The person's step: a plan (valid), its request's status (pending, then confirmed), a cancel request.
        plan = await call("plan_training", {"booking_id": world.booking, "manifest_path": manifest_path})
        await call("plan_training", {"booking_id": "bk_nobody", "manifest_path": manifest_path})
        request_id = plan["data"]["confirmation_request"]["request_id"]
        await call("confirmation_status", {"request_id": request_id})
        world.op.confirm_request(request_id)
        assert (await call("confirmation_status", {"request_id": request_id}))["data"]["confirmation_ref"]
        await call("confirmation_status", {"request_id": "creq_nobody"})
        await call("request_confirmation", {"action": "training.cancel", "run_id": run_id})
        await call("request_confirmation", {"action": "training.cancel", "run_id": "run_nobody"})

        cancel = {"run_id": run_id, "idempotency_key": _key("cancel")}
        await call("cancel_training", cancel)
        assert (await call("cancel_training", {**cancel, "confirmation_ref": confirm("training.cancel")}))["ok"]
        cleanup = {"run_id": run_id, "idempotency_key": _key("cleanup")}
        await call("cleanup_training", {**cleanup, "run_id": "run_nobody", "confirmation_ref": "cf_x"})
        assert (await call("cleanup_training", {**cleanup, "confirmation_ref": confirm("training.cleanup")}))["ok"]

    assert shapes == {"found", "missing"}
    for spec in ALL_TOOLS:
        assert seen[(spec.name, True)] and seen[(spec.name, False)], (spec.name, seen)


def _validators(tool: str) -> list[Validator]:
    spec = next(s for s in ALL_TOOLS if s.name == tool)
    return [draft(spec.output_schema()) for draft in DRAFTS]


REFUSAL = {"ok": False, "live_api_contacted": False, "notice": "Stop.",
           "error": {"code": "INVALID_INPUT", "message": "m", "retryable": False, "gate": "input", "details": None}}
RESULT = {"ok": True, "live_api_contacted": True, "notice": "Read-only.",
          "data": {"run_id": "run_1", "checkpoints": [
              {"checkpoint_id": "ck_1", "step": 10, "created_at": "2026-11-29T20:00:00Z", "size_bytes": 1, "uri": "s3://b/k"},
          ]}}


@pytest.mark.parametrize(("change", "valid"), [
    (lambda e: e, True),
    (lambda e: {**e, "data": e["data"] | {"extra": 1}}, False),         # our own output is exact
    (lambda e: {k: v for k, v in e.items() if k != "data"}, False),     # ok: true needs data
    (lambda e: {**e, "error": REFUSAL["error"]}, False),                # ... and no error
    (lambda e: {**e, "ok": False}, False),                              # ok: false needs error, no data
    (lambda e: {**e, "notice": None}, False),
    (lambda e: {**e, "data": {**e["data"], "checkpoints": [{}]}}, False),
    (lambda e: {**e, "extra": 1}, False),                               # the envelope is closed
    (lambda e: {**e, "ok": "true"}, False),
    (lambda e: {k: v for k, v in e.items() if k != "ok"}, False),
])
def test_the_envelope_schema_refuses_what_the_contract_forbids(change: Any, valid: bool) -> None:
    envelope = change(copy.deepcopy(RESULT))
    assert [v.is_valid(envelope) for v in _validators("list_checkpoints")] == [valid, valid]


@pytest.mark.parametrize(("change", "valid"), [
    (lambda e: e, True),
    (lambda e: {**e, "data": RESULT["data"]}, False),
    (lambda e: {**e, "error": {**e["error"], "code": 7}}, False),
    (lambda e: {**e, "error": {**e["error"], "gate": None}}, True),
    (lambda e: {**e, "error": {**e["error"], "details": {"argument": "run_id"}}}, True),
])
def test_refusals_are_typed_too(change: Any, valid: bool) -> None:
    envelope = change(copy.deepcopy(REFUSAL))
    assert [v.is_valid(envelope) for v in _validators("list_checkpoints")] == [valid, valid]


def test_backend_relayed_evals_stay_open_and_everything_else_is_closed() -> None:
    schema = next(s for s in ALL_TOOLS if s.name == "training_status").output_schema()
    found = schema["properties"]["data"]["anyOf"][0]
    gate = found["properties"]["stages"]["items"]["properties"]["gate"]
    assert gate["properties"]["evals"]["additionalProperties"] is True
    assert found["additionalProperties"] is False and gate["additionalProperties"] is False
