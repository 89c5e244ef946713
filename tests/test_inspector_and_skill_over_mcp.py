"""Clients that load no SKILL.md get it over MCP; the MCP Inspector (the reference client) agrees.

The Inspector is installed by `make test` (npm, into .inspector/). Its absence is a failure, not
a skip, unless ITO_SKIP_INSPECTOR=1 is set explicitly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.types import TextContent, TextResourceContents

from ito_training_mcp.doors.mcp.server import SKILL_URI, skill_body, skill_file
from ito_training_mcp.tools.specs import ALL_TOOLS

from .conftest import REPO, ClientFactory

INSPECTOR = REPO / ".inspector" / "node_modules" / ".bin" / "mcp-inspector"
SERVER = [str(Path(sys.executable).parent / "ito-training-mcp")]


async def test_skill_is_a_prompt_and_resources_generated_from_the_one_file(connect: ClientFactory) -> None:
    async with connect() as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert "ito-training" in prompts
        prompt = await client.get_prompt("ito-training")
        text = prompt.messages[0].content
        assert isinstance(text, TextContent)
        assert text.text == skill_body(skill_file())
        assert not text.text.startswith("---")

        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        expected = {SKILL_URI} | {f"ito-training://skill/references/{p.name}"
                                  for p in (REPO / "skill" / "references").glob("*.md")}
        assert expected <= uris
        for uri in expected:
            content = (await client.read_resource(uri)).contents[0]
            assert isinstance(content, TextResourceContents)
            relative = uri.removeprefix("ito-training://skill/")
            assert content.text == (REPO / "skill" / relative).read_text()


# Read at import: the autouse clean_env fixture removes every ITO_* variable before a test body runs.
SKIP_INSPECTOR = os.environ.get("ITO_SKIP_INSPECTOR") == "1"


def _inspector(*args: str, env: dict[str, str] | None = None,
               server_env: dict[str, str] | None = None) -> tuple[int, Any]:
    """Run the Inspector CLI against the server. `server_env` is passed to the server process with `-e`
    (the Inspector hands a stdio server only the variables it is told to)."""
    if not INSPECTOR.exists():
        if SKIP_INSPECTOR:
            pytest.skip("ITO_SKIP_INSPECTOR=1: MCP Inspector not installed")
        pytest.fail("MCP Inspector missing: run `make inspector` (make test does it) or set ITO_SKIP_INSPECTOR=1")
    assert shutil.which("node"), "node is required for the MCP Inspector"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    passed = [option for name, value in (server_env or {}).items() for option in ("-e", f"{name}={value}")]
    proc = subprocess.run(
        [str(INSPECTOR), "--cli", *passed, *SERVER, *args], capture_output=True, text=True, timeout=120,
        env={**base_env, **(env or {})},
    )
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        return proc.returncode, proc.stdout


def test_inspector_lists_every_tool_with_portable_schemas() -> None:
    code, listing = _inspector("--method", "tools/list", "--strict")
    assert code == 0, listing
    assert [t["name"] for t in listing["tools"]] == [s.name for s in ALL_TOOLS]
    for tool in listing["tools"]:
        assert tool["outputSchema"]["required"] == ["ok", "live_api_contacted", "notice"]


# examples/inspector.md's commands (run by tests/test_docs.py) show availability, digest (ok and refused) and
# submit (refused twice) through the Inspector; these are the tools it shows only against a backend.
@pytest.mark.parametrize(("tool", "arguments", "exit_code", "code"), [
    ("training_status", {"run_id": "run_1"}, 5, "TRAINING_UNAVAILABLE"),
    ("request_confirmation", {"action": "training.create", "run_id": "run_1"}, 5, "INVALID_INPUT"),
    ("confirmation_status", {"request_id": "creq_1", "wait_seconds": 1}, 5, "TRAINING_UNAVAILABLE"),
])
def test_inspector_calls_return_the_envelope(
    manifest_path: str, tool: str, arguments: dict[str, Any], exit_code: int, code: str | None
) -> None:
    args = json.loads(json.dumps(arguments).replace("{manifest}", manifest_path))
    status, result = _inspector("--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(args))
    assert status == exit_code, result
    envelope = result["structuredContent"]
    assert result["isError"] is (exit_code == 5)
    assert json.loads(result["content"][0]["text"]) == envelope
    if code is None:
        assert envelope["ok"] is True
        assert len(envelope["data"]["sha256"]) == 64
    else:
        assert envelope["error"]["code"] == code
        assert envelope["live_api_contacted"] is False


def test_inspector_plans_against_the_reference_backend(world: Any, manifest_path: str) -> None:
    """The reference client, the real server process and the reference backend: a plan opens one request."""
    args = {"booking_id": world.booking, "manifest_path": manifest_path}
    status, result = _inspector("--method", "tools/call", "--tool-name", "plan_training",
                                "--tool-args-json", json.dumps(args), server_env=world.env)
    assert status == 0, result
    envelope = result["structuredContent"]
    assert envelope["ok"] is True and envelope["data"]["valid"] is True, envelope
    request_id = envelope["data"]["confirmation_request"]["request_id"]
    assert envelope["data"]["confirmation_request"]["review_url"].endswith(f"/desk/requests/{request_id}")
    status, result = _inspector("--method", "tools/call", "--tool-name", "confirmation_status",
                                "--tool-args-json", json.dumps({"request_id": request_id}), server_env=world.env)
    assert status == 0, result
    assert result["structuredContent"]["data"]["status"] == "pending"
    assert len(world.op.confirmation_requests(world.account)) == 1
    assert world.token not in json.dumps(result)


def test_inspector_sees_the_skill_prompt_and_resources() -> None:
    code, prompts = _inspector("--method", "prompts/list")
    assert code == 0
    assert [p["name"] for p in prompts["prompts"]] == ["ito-training"]
    code, resources = _inspector("--method", "resources/list")
    assert code == 0
    assert SKILL_URI in {r["uri"] for r in resources["resources"]}
