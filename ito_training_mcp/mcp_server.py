"""The MCP door: adapts `TrainingService` to MCP tools, resources and instructions.

Nothing here decides anything. Each tool receives the raw arguments (so gate 0 can refuse an
unknown or mistyped argument with an envelope instead of the SDK echoing the value back),
calls the core, and maps the envelope to `structuredContent` + one text block + `isError`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict

from . import __version__
from .envelope import Envelope
from .manifest import SCHEMA_VERSION, manifest_json_schema
from .service import TrainingService
from .tool_specs import ALL_TOOLS, ToolSpec

SERVER_NAME = "ito-training"
MANIFEST_SCHEMA_URI = f"ito-training://schemas/{SCHEMA_VERSION}"

INSTRUCTIONS = """\
Itô training: check whether managed ML training is available on a completed Itô GPU booking and, \
when the canonical backend offers it, submit a manifest the user reviewed and confirmed.
Flow: check_training_availability -> digest_manifest -> the user confirms the digest out of band -> \
submit_training with a stable idempotency_key -> training_status.
Rules: ok:false means stop, do not work around it, tell the user the notice and hand control back. \
Training is unavailable by default today: never substitute a local trainer, SSH, a browser flow or a \
purchase. Never put credentials in arguments or chat. After an ambiguous submit, call training_status \
with the same idempotency_key; never submit with a new key. Never override a failed eval gate."""


class RawArguments(ArgModelBase):
    """Accept any argument object and hand it to the core untouched; the core validates it."""

    model_config = ConfigDict(extra="allow")

    def model_dump_one_level(self) -> dict[str, Any]:
        return {"arguments": dict(self.__pydantic_extra__ or {})}


def to_call_tool_result(envelope: Envelope) -> CallToolResult:
    wire = envelope.to_dict()
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(wire, ensure_ascii=False))],
        structured_content=wire,
        is_error=not envelope.ok,
    )


def _annotations(spec: ToolSpec) -> ToolAnnotations:
    h = spec.hints
    return ToolAnnotations(
        title=spec.title,
        read_only_hint=h.read_only,
        destructive_hint=h.destructive,
        idempotent_hint=h.idempotent,
        open_world_hint=h.open_world,
    )


def _tool(spec: ToolSpec, service: TrainingService) -> Tool:
    async def run(arguments: dict[str, Any], ctx: Context) -> Annotated[CallToolResult, Envelope]:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            await ctx.report_progress(value, total, message)

        envelope = await service.invoke(spec.name, arguments, progress=progress if spec.reports_progress else None)
        return to_call_tool_result(envelope)

    tool = Tool.from_function(
        run, name=spec.name, title=spec.title, description=spec.description, annotations=_annotations(spec)
    )
    tool.fn_metadata.arg_model = RawArguments
    return tool.model_copy(update={"parameters": spec.input_schema()})


def build_server(service: TrainingService | None = None) -> MCPServer:
    """The MCP server over one core. Pass a service to control its environment in tests."""
    service = service or TrainingService()
    server: MCPServer = MCPServer(
        name=SERVER_NAME,
        title="Itô training",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=[_tool(spec, service) for spec in ALL_TOOLS],
    )

    @server.resource(
        MANIFEST_SCHEMA_URI,
        name="manifest-schema",
        title=f"JSON Schema of {SCHEMA_VERSION}",
        description="The schema digest_manifest validates manifests against.",
        mime_type="application/schema+json",
    )
    def manifest_schema() -> str:
        return json.dumps(manifest_json_schema(), indent=2, sort_keys=True)

    return server
