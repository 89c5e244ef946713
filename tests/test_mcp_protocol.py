"""Protocol-level answers, in both eras: what is not there is -32602 (invalid params), with a fixed
message that echoes nothing, and is not logged as a server error.

Also: the door is registered through the SDK's public low-level handlers (no SDK internals), and
it keeps a seam for talking back to the client during a call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from ito_training_mcp.doors.mcp import server as mcp_server
from ito_training_mcp.doors.mcp.server import SKILL_URI, build_server
from ito_training_mcp.service import TrainingService

from .conftest import CANARY_GITHUB, ClientFactory

INVALID_PARAMS = -32602


async def _refused(request: Awaitable[Any]) -> MCPError:
    with pytest.raises(MCPError) as raised:
        await request
    return raised.value


@pytest.mark.parametrize(("what", "send"), [
    ("unknown prompt", lambda c: c.get_prompt(f"nope-{CANARY_GITHUB}")),
    ("prompt arguments", lambda c: c.get_prompt("ito-training", {"x": CANARY_GITHUB})),
    ("unknown resource", lambda c: c.read_resource(f"ito-training://skill/{CANARY_GITHUB}.md")),
    ("unknown scheme", lambda c: c.read_resource("file:///etc/passwd")),
    ("unknown tool", lambda c: c.call_tool(f"nope_{CANARY_GITHUB}", {})),
    ("tools cursor", lambda c: c.list_tools(cursor=CANARY_GITHUB)),
    ("prompts cursor", lambda c: c.list_prompts(cursor="next")),
    ("resources cursor", lambda c: c.list_resources(cursor="next")),
])
async def test_what_is_not_there_is_invalid_params_in_both_eras(
    connect: ClientFactory, caplog: pytest.LogCaptureFixture, what: str,
    send: Callable[[Any], Awaitable[Any]],
) -> None:
    caplog.set_level(logging.DEBUG)
    async with connect() as client:
        error = await _refused(send(client))
        assert error.code == INVALID_PARAMS, (what, error.code, error.message)
        assert CANARY_GITHUB not in error.message + repr(error.data)
        # the session is fine afterwards
        assert [p.name for p in (await client.list_prompts()).prompts] == ["ito-training"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    assert CANARY_GITHUB not in caplog.text


async def test_a_prompt_without_arguments_and_the_listings_still_work(connect: ClientFactory) -> None:
    async with connect() as client:
        prompt = await client.get_prompt("ito-training", {})
        assert prompt.messages and prompt.messages[0].role == "user"
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["ito-training://manifests/{sha256}/review"]
        assert SKILL_URI in {str(r.uri) for r in (await client.list_resources()).resources}
        listed = (await client.list_prompts()).prompts
        assert [p.name for p in listed] == ["ito-training"] and not listed[0].arguments


async def test_capabilities_name_tools_prompts_and_resources(connect: ClientFactory) -> None:
    async with connect() as client:
        capabilities = client.server_capabilities
        assert capabilities is not None
        assert capabilities.tools is not None and capabilities.prompts is not None
        assert capabilities.resources is not None
        assert client.server_info is not None and client.server_info.name == "ito-training"


def test_the_door_uses_no_sdk_internals() -> None:
    """Registered through public low-level handlers; no argument model or tool-manager internals."""
    source = Path(mcp_server.__file__).read_text(encoding="utf-8")
    for internal in ("fn_metadata", "ArgModelBase", "func_metadata", "_tool_manager", "_lowlevel_server",
                     "mcp.server.mcpserver"):
        assert internal not in source, internal
    server = build_server(TrainingService({}))
    for method in ("tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list", "resources/read"):
        assert server.get_request_handler(method) is not None, method


async def test_tool_call_context_reaches_the_tool_and_reports_progress(monkeypatch: pytest.MonkeyPatch,
                                                                      connect: ClientFactory) -> None:
    """What a future interaction (URL elicitation) needs is on the ToolCall: the SDK request context."""
    seen: list[mcp_server.ToolCall] = []
    real = mcp_server.ToolCall.report_progress

    async def spy(self: mcp_server.ToolCall, value: float, total: float | None, message: str | None) -> None:
        seen.append(self)
        await real(self, value, total, message)

    async def invoke(self: TrainingService, tool: str, arguments: Any, *, progress: Any = None) -> Any:
        assert progress is not None
        await progress(1.0, 2.0, "half way")
        from ito_training_mcp.envelope import ErrorCode, refusal

        return refusal(ErrorCode.RUN_NOT_FOUND, "No such run.", live_api_contacted=False, gate=None)

    monkeypatch.setattr(mcp_server.ToolCall, "report_progress", spy)
    monkeypatch.setattr(TrainingService, "invoke", invoke)
    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        updates.append((value, total, message))

    async with connect() as client:
        result = await client.call_tool("training_status", {"run_id": "run_1"}, progress_callback=on_progress)
    assert result.is_error and updates == [(1.0, 2.0, "half way")]
    assert len(seen) == 1
    call = seen[0]
    assert call.params.name == "training_status" and call.protocol_version
    assert call.supports_url_elicitation() is False  # the test client declares no elicitation
