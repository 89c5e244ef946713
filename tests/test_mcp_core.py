"""The three core tools through a real in-process MCP client, on both protocol eras."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from mcp.types import CallToolResult, TextResourceContents

from ito_training_mcp.doors.mcp.server import INSTRUCTIONS, MANIFEST_SCHEMA_URI
from ito_training_mcp.gates.manifest.schema import manifest_json_schema

from .conftest import CANARY_GITHUB, REPO, ClientFactory

CORE = {"check_training_availability", "digest_manifest", "submit_training"}
VALID_KEY = "demo-run-0001-abcdef"


def envelope_of(result: CallToolResult) -> dict[str, Any]:
    """The structured envelope, checked against the text block and isError."""
    assert result.structured_content is not None
    assert len(result.content) == 1
    text = result.content[0]
    assert text.type == "text"
    assert json.loads(text.text) == result.structured_content
    env = result.structured_content
    assert result.is_error is (not env["ok"])
    assert ("data" in env) is env["ok"] and ("error" in env) is (not env["ok"])
    return env


async def test_lists_the_core_tools_with_envelope_output_schema(connect: ClientFactory) -> None:
    async with connect() as mcp_client:
        tools = {t.name: t for t in (await mcp_client.list_tools()).tools}
        assert CORE <= set(tools)
        for tool in tools.values():
            assert tool.output_schema is not None
            assert {"ok", "live_api_contacted", "notice"} <= set(tool.output_schema["required"])
            assert tool.input_schema.get("additionalProperties") is False
            assert tool.description and "ok: false" in tool.description
            for name, prop in tool.input_schema["properties"].items():
                assert prop.get("description"), f"{tool.name}.{name} has no description"
        assert tools["check_training_availability"].annotations.read_only_hint is True
        assert tools["digest_manifest"].annotations.read_only_hint is True
        assert tools["digest_manifest"].annotations.open_world_hint is False
        submit = tools["submit_training"].annotations
        assert submit.read_only_hint is False and submit.idempotent_hint is True and submit.open_world_hint is True


async def test_instructions_are_sent_at_initialisation(connect: ClientFactory) -> None:
    async with connect() as mcp_client:
        assert mcp_client.instructions == INSTRUCTIONS


async def test_check_without_backend_is_training_unavailable(connect: ClientFactory) -> None:
    async with connect() as mcp_client:
        env = envelope_of(await mcp_client.call_tool("check_training_availability", {}))
        assert env["ok"] is False and env["live_api_contacted"] is False
        assert env["error"]["code"] == "TRAINING_UNAVAILABLE"
        assert env["error"]["gate"] == "availability"
        notice = env["notice"].lower()
        for phrase in ("stop", "return control", "local trainer", "ssh", "browser", "purchase"):
            assert phrase in notice


async def test_check_with_booking_id_still_unavailable(connect: ClientFactory) -> None:
    async with connect() as mcp_client:
        env = envelope_of(await mcp_client.call_tool("check_training_availability", {"booking_id": "bk_123"}))
        assert env["error"]["code"] == "TRAINING_UNAVAILABLE"


async def test_digest_returns_digest_and_review(connect: ClientFactory, manifest_path: str, example_bytes: bytes) -> None:
    async with connect() as mcp_client:
        env = envelope_of(await mcp_client.call_tool("digest_manifest", {"manifest_path": manifest_path}))
        assert env["ok"] is True and env["live_api_contacted"] is False
        data = env["data"]
        assert data["sha256"] == hashlib.sha256(example_bytes).hexdigest()
        assert data["size_bytes"] == len(example_bytes)
        assert data["path"] == manifest_path
        review = data["review"]
        assert review["model"]["revision"] and review["target"] == "fine_tune"
        assert review["budget"] == {"ceiling_usd": "4800.00", "max_incremental_cost_usd": "1200.00"}
        assert all(ref["decontamination"]["eval_suites"] for ref in review["data"])
        assert data["sha256"] in data["review_text"]


async def test_submit_without_backend_refuses_after_input_gate(connect: ClientFactory, manifest_path: str) -> None:
    async with connect() as mcp_client:
        env = envelope_of(await mcp_client.call_tool("submit_training", {
            "booking_id": "bk_123", "manifest_path": manifest_path,
            "confirmation_ref": "cf_1", "idempotency_key": VALID_KEY,
        }))
        assert env["error"]["code"] == "TRAINING_UNAVAILABLE" and env["live_api_contacted"] is False


async def test_submit_without_confirmation_is_confirmation_required(connect: ClientFactory, manifest_path: str) -> None:
    async with connect() as mcp_client:
        env = envelope_of(await mcp_client.call_tool("submit_training", {
            "booking_id": "bk_123", "manifest_path": manifest_path, "confirmation_ref": "", "idempotency_key": VALID_KEY,
        }))
        assert env["error"]["code"] == "CONFIRMATION_REQUIRED" and env["error"]["gate"] == "input"


@pytest.mark.parametrize(
    ("tool", "arguments", "argument"),
    [
        ("check_training_availability", {"booking_id": "../../etc"}, "booking_id"),
        ("check_training_availability", {"booking_id": ".."}, "booking_id"),
        ("check_training_availability", {"booking_id": 42}, "booking_id"),
        ("check_training_availability", {"booking_id": "x" * 129}, "booking_id"),
        ("digest_manifest", {}, "manifest_path"),
        ("digest_manifest", {"manifest_path": ["/a"]}, "manifest_path"),
        ("submit_training", {"booking_id": "b", "manifest_path": "/x", "confirmation_ref": "c",
                             "idempotency_key": "short"}, "idempotency_key"),
        ("submit_training", {"booking_id": "b", "manifest_path": "/x", "confirmation_ref": "c d",
                             "idempotency_key": VALID_KEY}, "confirmation_ref"),
        ("submit_training", {"booking_id": "b", "manifest_path": "/x", "confirmation_ref": "c"}, "idempotency_key"),
    ],
)
async def test_malformed_arguments_are_invalid_input(
    connect: ClientFactory, tool: str, arguments: dict[str, Any], argument: str
) -> None:
    async with connect() as mcp_client:
        env = envelope_of(await mcp_client.call_tool(tool, arguments))
        assert env["error"]["code"] == "INVALID_INPUT" and env["error"]["gate"] == "input"
        assert env["error"]["details"]["argument"] == argument
        assert env["live_api_contacted"] is False


@pytest.mark.parametrize("extra", ["force", "skip_gates", "override", "api_key", "token"])
async def test_no_override_or_credential_argument_exists(connect: ClientFactory, manifest_path: str, extra: str) -> None:
    async with connect() as mcp_client:
        env = envelope_of(await mcp_client.call_tool("submit_training", {
            "booking_id": "bk_1", "manifest_path": manifest_path, "confirmation_ref": "cf_1",
            "idempotency_key": VALID_KEY, extra: CANARY_GITHUB,
        }))
        assert env["error"]["code"] == "INVALID_INPUT"
        assert env["error"]["details"]["unexpected"] == [extra]
        assert CANARY_GITHUB not in json.dumps(env)


async def test_a_credential_in_an_id_argument_is_refused_and_not_echoed(connect: ClientFactory) -> None:
    async with connect() as mcp_client:
        from .conftest import CANARY_AWS

        env = envelope_of(await mcp_client.call_tool("check_training_availability", {"booking_id": CANARY_AWS}))
        assert env["error"]["code"] == "INVALID_INPUT"
        assert env["error"]["details"]["problem"] == "looks_like_credential"
        assert CANARY_AWS not in json.dumps(env)


async def test_wrongly_typed_secret_is_not_echoed(connect: ClientFactory) -> None:
    async with connect() as mcp_client:
        env = envelope_of(await mcp_client.call_tool("digest_manifest", {"manifest_path": {"token": CANARY_GITHUB}}))
        assert env["error"]["code"] == "INVALID_INPUT"
        assert CANARY_GITHUB not in json.dumps(env)


async def test_manifest_schema_resource_matches_the_repo_file(connect: ClientFactory) -> None:
    async with connect() as mcp_client:
        resources = {str(r.uri): r for r in (await mcp_client.list_resources()).resources}
        assert MANIFEST_SCHEMA_URI in resources
        result = await mcp_client.read_resource(MANIFEST_SCHEMA_URI)
        content = result.contents[0]
        assert isinstance(content, TextResourceContents)
        published = json.loads(content.text)
        on_disk = json.loads((REPO / "schemas" / "ito.training.manifest.v1.schema.json").read_text())
        assert published == on_disk == manifest_json_schema()


def test_schema_uri_names_the_schema_version() -> None:
    from ito_training_mcp.gates.manifest.schema import SCHEMA_VERSION

    assert MANIFEST_SCHEMA_URI.endswith("/" + SCHEMA_VERSION)


def test_server_start_up_loads_no_reference_backend() -> None:
    """The reference backend is a package of its own: the server never loads it (nor Starlette's app for it)."""
    import subprocess
    import sys

    code = ("import sys; from ito_training_mcp.doors.mcp.server import build_server; build_server(); "
            "print(sorted(m for m in sys.modules if m.startswith('ito_training')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "ito_training_mcp.service" in loaded and "ito_training_reference" not in loaded


def test_schema_file_is_current() -> None:
    """Regenerate with: .venv/bin/python -m ito_training_mcp.gates.manifest.schema > schemas/ito.training.manifest.v1.schema.json"""
    path = Path(REPO / "schemas" / "ito.training.manifest.v1.schema.json")
    assert path.read_text() == json.dumps(manifest_json_schema(), indent=2, sort_keys=True) + "\n"
