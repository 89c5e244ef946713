"""The MCP door: adapts `TrainingService` to MCP tools, resources and instructions.

Nothing here decides anything. Each tool receives the raw arguments (so gate 0 can refuse an
unknown or mistyped argument with an envelope instead of the SDK echoing the value back),
calls the core, and maps the envelope to `structuredContent` + one text block + `isError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict

from . import __version__
from .envelope import Envelope
from .service import TrainingService
from .tool_specs import ALL_TOOLS, ToolSpec

SERVER_NAME = "ito-training"
MANIFEST_SCHEMA_URI = "ito-training://schemas/ito.training.manifest.v1"  # tests: ends with SCHEMA_VERSION
SKILL_URI = "ito-training://skill/SKILL.md"
SKILL_DIR = Path(__file__).resolve().parent.parent / "skill"

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


def _runner(spec: ToolSpec, service: TrainingService) -> Any:
    async def run(arguments: dict[str, Any], ctx: Context) -> Annotated[CallToolResult, Envelope]:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            await ctx.report_progress(value, total, message)

        envelope = await service.invoke(spec.name, arguments, progress=progress if spec.reports_progress else None)
        return to_call_tool_result(envelope)

    return run


def _tools(service: TrainingService) -> list[Tool]:
    """One Tool per spec. The SDK derives the envelope's output schema once, from the first; the
    others share that metadata (same raw-argument model, same output schema)."""
    first, *rest = ALL_TOOLS
    template = Tool.from_function(_runner(first, service), name=first.name)
    template.fn_metadata.arg_model = RawArguments
    return [
        template.model_copy(update={
            "fn": _runner(spec, service),
            "name": spec.name,
            "title": spec.title,
            "description": spec.description,
            "annotations": _annotations(spec),
            "parameters": spec.input_schema(),
        })
        for spec in (first, *rest)
    ]


def build_server(service: TrainingService | None = None) -> MCPServer:
    """The MCP server over one core. Pass a service to control its environment in tests."""
    service = service or TrainingService()
    server: MCPServer = MCPServer(
        name=SERVER_NAME,
        title="Itô training",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=_tools(service),
    )

    @server.resource(
        MANIFEST_SCHEMA_URI,
        name="manifest-schema",
        title="JSON Schema of ito.training.manifest.v1",
        description="The schema digest_manifest validates manifests against.",
        mime_type="application/schema+json",
    )
    def manifest_schema() -> str:
        from .manifest import manifest_json_schema  # lazy: the schema models load only when asked for

        return json.dumps(manifest_json_schema(), indent=2, sort_keys=True)

    _register_skill(server)
    return server


def skill_file(relative: str = "SKILL.md") -> str:
    """The skill as shipped in skill/: the one source for the prompt and the resources."""
    return (SKILL_DIR / relative).read_text(encoding="utf-8")


def skill_body(text: str) -> str:
    """SKILL.md without its YAML frontmatter: what an agent should read as instructions."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            return text[end + 5:].lstrip("\n")
    return text


def _register_skill(server: MCPServer) -> None:
    """SKILL.md and its references as resources, and the skill as a prompt, for clients that load
    no SKILL.md. Read from skill/ on every request, so they can never drift from the file."""
    if not (SKILL_DIR / "SKILL.md").is_file():  # pragma: no cover - a wheel install without the repo
        return

    @server.resource(SKILL_URI, name="skill", title="The ito-training agent skill (SKILL.md)",
                     description="When and how to use these tools, and what every error code obliges.",
                     mime_type="text/markdown")
    def skill_resource() -> str:
        return skill_file()

    for reference in sorted((SKILL_DIR / "references").glob("*.md")):
        _register_reference(server, reference.name)

    @server.prompt(name="ito-training", title="Use the ito-training skill",
                   description="The ito-training skill: the flow, the rules, and a decision table for every "
                               "error code. Load it before using these tools.")
    def skill_prompt() -> str:
        return skill_body(skill_file())


def _register_reference(server: MCPServer, name: str) -> None:
    @server.resource(f"ito-training://skill/references/{name}", name=f"skill-reference-{name.removesuffix('.md')}",
                     title=f"ito-training skill reference: {name}", mime_type="text/markdown")
    def reference() -> str:
        return skill_file(f"references/{name}")
