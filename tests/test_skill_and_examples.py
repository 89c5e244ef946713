"""The agent skill and the shipped examples stay valid and in step with the code.

- the skill directory passes the Agent Skills reference validator;
- its decision table covers every error code exactly once;
- every tool-shaped name it mentions is a real tool (or an argument or data field of one);
- its frontmatter uses only the allowed keys and the file stays short;
- every example manifest parses, with one example per training target;
- the Claude Desktop example config is JSON and holds no credential.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from skills_ref.parser import parse_frontmatter

from ito_training_mcp.backend.models import CONFIRMATION_OPERATIONS, REQUIRED_OPERATIONS
from ito_training_mcp.envelope import ErrorCode
from ito_training_mcp.gates.manifest.schema import TrainingTarget, parse_manifest
from ito_training_mcp.scanner import scan_document
from ito_training_mcp.tools.specs import ALL_TOOLS, ToolSpec

REPO = Path(__file__).resolve().parent.parent
SKILL_DIR = REPO / "skill"
SKILL_MD = SKILL_DIR / "SKILL.md"
EXAMPLES = REPO / "examples"

ALLOWED_FRONTMATTER = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
TOOL_NAMES = {spec.name for spec in ALL_TOOLS}
# Identifiers shaped like one of the tools (check_*, digest_*, submit_*, training_*, list_*, cancel_*, cleanup_*,
# plan_*, request_*, confirmation_*).
TOOL_SHAPED = re.compile(
    r"(?<![A-Za-z0-9_.])(?:check|digest|submit|training|list|cancel|cleanup|plan|request|confirmation)(?:_[a-z]+)+\b"
)


def _property_names(node: Any) -> set[str]:
    """Every property name anywhere in a JSON Schema."""
    if isinstance(node, list):
        return {name for item in node for name in _property_names(item)}
    if not isinstance(node, dict):
        return set()
    names = set(node.get("properties", {})) if isinstance(node.get("properties"), dict) else set()
    return names | {name for value in node.values() for name in _property_names(value)}


def _field_names(specs: tuple[ToolSpec, ...]) -> set[str]:
    return {name for spec in specs for schema in (spec.input_schema(), spec.output_schema())
            for name in _property_names(schema)}


# Tool-shaped names that are arguments, data fields (request_id, confirmation_ref, ...) or backend operations
# (confirmation_requests), not tools.
FIELD_NAMES = _field_names(ALL_TOOLS) | set(REQUIRED_OPERATIONS) | set(CONFIRMATION_OPERATIONS)
FENCED = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")
CODE_IN_CELL = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def _skill_texts() -> dict[str, str]:
    files = [SKILL_MD, *sorted((SKILL_DIR / "references").glob("*.md"))]
    return {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in files}


def _backticked(text: str) -> list[str]:
    """Contents of fenced code blocks and of inline code spans outside them."""
    spans = [m.group(1) for m in FENCED.finditer(text)]
    spans += INLINE.findall(FENCED.sub("", text))
    return spans


def _decision_table_codes(text: str) -> list[str]:
    """The code cell of every row of the table whose header's first column is 'Code'."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^\|\s*Code\s*\|", line))
    assert re.match(r"^\|\s*-+", lines[start + 1]), "the decision table needs a separator row"
    codes: list[str] = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        first_cell = line.strip("|").split("|", 1)[0]
        found = CODE_IN_CELL.findall(first_cell)
        assert len(found) == 1, f"each row names exactly one code in backticks: {line[:80]!r}"
        codes.append(found[0])
    return codes


def _frontmatter() -> dict[str, Any]:
    metadata, _ = parse_frontmatter(SKILL_MD.read_text(encoding="utf-8"))
    return metadata


# ---------------------------------------------------------------- the skill


def test_skill_passes_the_agent_skills_validator(tmp_path: Path) -> None:
    validator = Path(sys.executable).with_name("agentskills")
    assert validator.exists(), "skills-ref (a dev dependency) must install the agentskills command next to Python"
    target = tmp_path / "ito-training"
    shutil.copytree(SKILL_DIR, target)
    result = subprocess.run(
        [str(validator), "validate", str(target)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_decision_table_covers_every_error_code_once() -> None:
    codes = _decision_table_codes(SKILL_MD.read_text(encoding="utf-8"))
    duplicates = sorted({c for c in codes if codes.count(c) > 1})
    assert not duplicates, f"codes listed more than once: {duplicates}"
    assert set(codes) == {c.value for c in ErrorCode}, (
        f"missing: {sorted({c.value for c in ErrorCode} - set(codes))}; "
        f"unknown: {sorted(set(codes) - {c.value for c in ErrorCode})}"
    )


def test_decision_table_rows_name_an_action_class() -> None:
    text = SKILL_MD.read_text(encoding="utf-8")
    classes = ("stop and hand back", "ask the user to confirm again", "call `training_status` with the same key",
               "never retry with a new key", "never work around")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^\|\s*Code\s*\|", line))
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        action = line.strip("|").split("|")[1].strip().lower()
        assert any(c in action for c in classes), f"row without a known action class: {line[:80]!r}"


@pytest.mark.parametrize("name", sorted(_skill_texts()))
def test_tool_shaped_names_in_skill_are_real_tools(name: str) -> None:
    text = _skill_texts()[name]
    mentioned = {m for span in _backticked(text) for m in TOOL_SHAPED.findall(span)}
    unknown = sorted(mentioned - TOOL_NAMES - FIELD_NAMES)
    assert not unknown, f"{name} names tools that do not exist: {unknown}"


def test_the_tool_shaped_check_catches_a_misspelt_new_tool() -> None:
    for wrong in ("plan_trainings", "request_confirmations", "confirmation_state", "submit_plan"):
        assert TOOL_SHAPED.findall(f"`{wrong}`") == [wrong] and wrong not in TOOL_NAMES | FIELD_NAMES
    assert {"request_id", "confirmation_ref", "plan_id"} <= FIELD_NAMES


def test_skill_mentions_every_tool() -> None:
    text = SKILL_MD.read_text(encoding="utf-8")
    missing = sorted(t for t in TOOL_NAMES if f"`{t}`" not in text)
    assert not missing, f"SKILL.md never names: {missing}"


def test_skill_is_short_and_its_frontmatter_uses_only_allowed_keys() -> None:
    text = SKILL_MD.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 500
    metadata = _frontmatter()
    assert set(metadata) <= ALLOWED_FRONTMATTER, sorted(set(metadata) - ALLOWED_FRONTMATTER)
    assert metadata["name"] == "ito-training"
    assert metadata["license"] == "Apache-2.0"
    assert 0 < len(metadata["description"]) <= 1024
    assert 0 < len(metadata["compatibility"]) <= 500
    assert isinstance(metadata["metadata"], dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in metadata["metadata"].items())


def test_skill_links_resolve_one_level_deep() -> None:
    text = SKILL_MD.read_text(encoding="utf-8")
    links = re.findall(r"\]\((references/[^)#\s]+)\)", text)
    assert links, "SKILL.md should link its reference files"
    for link in links:
        assert link.count("/") == 1, f"references are one level deep: {link}"
        assert (SKILL_DIR / link).is_file(), f"broken link: {link}"
    linked = {Path(link).name for link in links}
    present = {p.name for p in (SKILL_DIR / "references").glob("*.md")}
    assert present <= linked, f"reference files not linked from SKILL.md: {sorted(present - linked)}"


# ---------------------------------------------------------------- the examples


EXAMPLE_MANIFESTS = [EXAMPLES / "manifest.json", *sorted((EXAMPLES / "manifests").glob("*.json"))]


@pytest.mark.parametrize("path", EXAMPLE_MANIFESTS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_manifest_parses(path: Path) -> None:
    parse_manifest(path.read_bytes())


def test_one_example_manifest_per_training_target() -> None:
    targets: dict[str, list[str]] = {}
    for path in sorted((EXAMPLES / "manifests").glob("*.json")):
        target = parse_manifest(path.read_bytes()).target.value
        targets.setdefault(target, []).append(path.name)
        assert path.stem == target, f"{path.name} holds a {target} manifest"
    assert set(targets) == {t.value for t in TrainingTarget}
    assert all(len(names) == 1 for names in targets.values()), targets


def test_claude_desktop_config_is_json_without_credentials() -> None:
    config = json.loads((EXAMPLES / "claude_desktop_config.json").read_text(encoding="utf-8"))
    server = config["mcpServers"]["ito-training"]
    assert Path(server["command"]).name == "ito-training-mcp"
    env = server["env"]
    assert "ITO_API_URL" in env and "ITO_TOKEN_FILE" in env
    assert "ITO_API_KEY" not in env, "the example must point at a token file, never carry a token"
    findings = scan_document(config)
    value_findings = [f for f in findings if not f.in_key]
    assert not value_findings, [f.as_dict() for f in value_findings]
    # A credential-named key is allowed only when its value is a file path, not a token.
    for finding in findings:
        if finding.in_key:
            value: Any = config
            for part in finding.pointer.strip("/").split("/"):
                value = value[part]
            assert isinstance(value, str) and value.startswith("/"), finding.as_dict()
    assert env["ITO_API_URL"].startswith("https://")
