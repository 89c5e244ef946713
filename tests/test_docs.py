"""The docs stand alone and stay true.

- Every relative link in every Markdown file of the repository leads to a file, and every `#anchor`
  to a heading of that file.
- Nothing points at documents outside the repository, every "contract §N" names a section of
  docs/contract.md, and its generated tables match the code.
- docs/contract.md lists every tool the server has, with exactly its arguments, and every setting
  the package reads.
- Every `npx` command says `-y` and pins the Inspector version the Makefile installs.
- Every `ito-training ...` command shown parses with the CLI's own parsers.
- Every MCP Inspector command shown is run (tests/doc_inspector.py), and its exit code and output
  are what the text says.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ito_training_mcp.doors.cli import main as cli
from ito_training_mcp.tools.specs import ALL_TOOLS

from . import doc_tables
from .doc_inspector import INSPECTOR_FILES, run_inspector_doc
from .doc_shell import REPO, anchors, fences, inline_code, links, markdown_files, shell_units

MARKDOWN = markdown_files()
CONTRACT = REPO / "docs" / "contract.md"


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO))


def _section(text: str, number: int) -> str:
    match = re.search(rf"^## {number}\. .*?(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"docs/contract.md has no section {number}"
    return match.group(0)


# ---------------------------------------------------------------------- links


@pytest.mark.parametrize("path", MARKDOWN, ids=_relative)
def test_every_relative_link_resolves(path: Path) -> None:
    text = path.read_text()
    broken = []
    for line, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{_relative(path)}:{line}: {target}: no such file")
            continue
        if not destination.is_relative_to(REPO):
            broken.append(f"{_relative(path)}:{line}: {target}: leaves the repository")
        elif anchor:
            if destination.suffix != ".md":
                broken.append(f"{_relative(path)}:{line}: {target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(destination.read_text()):
                broken.append(f"{_relative(path)}:{line}: {target}: no heading with that anchor")
    assert not broken, "\n".join(broken)


def test_the_link_checker_catches_a_broken_link_and_anchor(tmp_path: Path) -> None:
    text = "See [a](contract.md#2-tools), [b](contract.md#no-such-heading), [c](missing.md), `[d](nowhere.md)`.\n"
    found = [target for _, target in links(text)]
    assert found == ["contract.md#2-tools", "contract.md#no-such-heading", "missing.md"]
    contract_anchors = anchors(CONTRACT.read_text())
    assert "2-tools" in contract_anchors and "no-such-heading" not in contract_anchors
    assert {"1-the-envelope", "10-strings-that-reach-a-person"} <= contract_anchors


# ---------------------------------------------------------------------- the repository stands alone


def _text_files() -> list[Path]:
    import subprocess

    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=True).stdout.split()
    return [REPO / name for name in listed if (REPO / name).is_file()]


def test_nothing_points_outside_the_repository() -> None:
    # Spelled in pieces so this file does not match itself.
    outside = ["CONTRACT" + ".md", "UPSTREAM" + "-SKILL", "UPSTREAM" + ".md", "shared" + "/spec", "REFERENCES" + ".md"]
    hits: list[str] = []
    for path in _text_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        hits.extend(f"{_relative(path)}: {name}" for name in outside if name in text)
    assert not hits, "\n".join(hits)


def test_every_contract_section_cited_exists() -> None:
    sections = {int(n) for n in re.findall(r"^## (\d+)\. ", CONTRACT.read_text(), re.MULTILINE)}
    assert sections == set(range(1, len(sections) + 1)) and len(sections) >= 10
    cited = []
    for path in _text_files():
        if path.suffix not in {".py", ".md", ".json", ".yaml", ".toml"}:
            continue
        for match in re.finditer(r"contract(?:\.md)?\s+§\s*(\d+)", path.read_text(), re.IGNORECASE):
            cited.append((_relative(path), int(match.group(1))))
    assert cited, "the code cites the contract by section"
    missing = [f"{where}: §{n}" for where, n in cited if n not in sections]
    assert not missing, "\n".join(missing)


def test_the_generated_tables_match_the_code() -> None:
    for relative in sorted({file for file, _ in doc_tables.TABLES}):
        assert (REPO / relative).read_text() == doc_tables.expected(relative), (
            f"{relative} is out of date: run `python -m tests.doc_tables`")


def test_the_code_table_lists_every_code_once() -> None:
    from ito_training_mcp.envelope import CODES, ErrorCode

    text = CONTRACT.read_text()
    table = text[text.index("<!-- BEGIN GENERATED: error codes"):text.index("<!-- END GENERATED: error codes")]
    rows = re.findall(r"^\| `([A-Z_]+)` \|", table, re.MULTILINE)
    assert rows == [code.value for code in ErrorCode] == [code.value for code in CODES]


def test_the_contract_lists_every_tool_with_its_arguments() -> None:
    table = _contract_tools()
    for spec in ALL_TOOLS:
        assert spec.name in table, f"docs/contract.md §2 does not list {spec.name}"
        assert table[spec.name] == set(spec.argument_names), (spec.name, table[spec.name], spec.argument_names)
    # Tools the contract lists that this build does not have yet are allowed; names in §2 are the contract.


def _contract_tools() -> dict[str, set[str]]:
    tools = {}
    for row in re.findall(r"^\| `([a-z_]+)` \| ([^|]*) \|", _section(CONTRACT.read_text(), 2), re.MULTILINE):
        name, arguments = row
        tools[name] = {a.rstrip("?") for a in re.findall(r"`([a-z_]+\??)`", arguments)}
    return tools


def test_the_contract_documents_every_setting() -> None:
    package = set()
    for path in [*(REPO / "ito_training_mcp").rglob("*.py"), *(REPO / "reference").rglob("*.py")]:
        package |= set(re.findall(r"\bITO_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    settings = _section(CONTRACT.read_text(), 8)
    documented = set(re.findall(r"\bITO_[A-Z][A-Z0-9_]*[A-Z0-9]\b", settings))
    assert package <= documented, f"read by the package, missing from contract §8: {sorted(package - documented)}"
    assert documented <= package, f"documented in contract §8, unknown to the package: {sorted(documented - package)}"
    registry = json.loads((REPO / "server.json").read_text())["packages"][0]["environmentVariables"]
    assert {v["name"] for v in registry} <= documented


# ---------------------------------------------------------------------- npx


def test_every_npx_command_says_yes_and_pins_the_installed_inspector() -> None:
    version = re.search(r"^INSPECTOR_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert version
    seen = []
    for path in MARKDOWN:
        text = path.read_text()
        for snippet in ["\n".join(f.lines) for f in fences(text)] + inline_code(text):
            for match in re.finditer(r"\bnpx\b([^\n]*)", snippet):
                rest = match.group(1).split()
                seen.append(path)
                assert rest[:1] == ["-y"], f"{_relative(path)}: `npx{match.group(1)}` without -y"
                package = rest[1] if len(rest) > 1 else ""
                if package.startswith("@modelcontextprotocol/inspector"):
                    assert package == f"@modelcontextprotocol/inspector@{version.group(1)}", (path, package)
    assert len(seen) >= 3


def test_the_readme_names_the_http_endpoint_the_server_serves() -> None:
    from ito_training_mcp.doors.mcp import main as server_main

    defaults = server_main._parser().parse_args(["--transport", "streamable-http"])
    readme = (REPO / "README.md").read_text()
    assert f"--transport streamable-http --host {defaults.host} --port {defaults.port}" in readme
    assert f"http://{defaults.host}:{defaults.port}/mcp" in readme  # the SDK's path, used by test_streamable_http


# ---------------------------------------------------------------------- ito-training commands


# Verbs that hand their arguments to a parser of their own (placeholders in cli.build_parser()).
DELEGATED: dict[str, Callable[[], argparse.ArgumentParser]] = {}


def _delegated() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    if not DELEGATED:
        from ito_training_mcp.doors.cli import skill_install
        from ito_training_reference import cli as backend_cli
        from ito_training_reference import desk_cli

        DELEGATED.update({"backend": backend_cli.build_parser, "desk": desk_cli.build_parser,
                          "skill": skill_install._parser})
    return DELEGATED


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_every_delegated_verb_is_known() -> None:
    placeholders = {name for name, sub in _subparsers(cli.build_parser()).items() if not sub.add_help}
    assert placeholders == set(_delegated()), "a verb with its own parser: add it to DELEGATED in this test"


def _expand(words: list[str]) -> list[list[str]]:
    """A synopsis (`[--a X]`, `(--b Y | --c Z)`) as concrete command lines: every optional part
    present, then absent, and each alternative of a choice at least once."""
    groups: list[tuple[str, list[list[str]]]] = []  # (kind, alternatives); kind: "word", "opt", "alt"
    i = 0
    while i < len(words):
        word = words[i]
        if word[0] in "[(":
            closing = "]" if word[0] == "[" else ")"
            depth, body = 0, []
            while True:
                token = words[i]
                depth += token.count("[") + token.count("(") - token.count("]") - token.count(")")
                body.append(token)
                i += 1
                if depth <= 0:
                    break
            inner = " ".join(body)[1:-1]
            alternatives = [shlex.split(a) for a in inner.split(" | ")]
            groups.append(("opt" if closing == "]" else "alt", alternatives))
        elif "|" in word and not word.startswith("-"):  # `cancel|cleanup`: a choice of values
            groups.append(("alt", [[part] for part in word.split("|")]))
            i += 1
        else:
            groups.append(("word", [[word]]))
            i += 1
    widest = max(len(alts) for _, alts in groups)
    variants = []
    for optional_on in (True, False):
        for pick in range(widest):
            line: list[str] = []
            for kind, alternatives in groups:
                if kind == "opt" and not optional_on:
                    continue
                line.extend(alternatives[pick % len(alternatives)])
            variants.append(line)
    unique = []
    for variant in variants:
        if variant not in unique:
            unique.append(variant)
    return unique


def _with_sample_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """Placeholders in upper case (SECONDS, N) become a value of the option's type when it has one."""
    out, current = [], parser
    for index, word in enumerate(argv):
        sub = _subparsers(current).get(word)
        if sub is not None:
            current = sub
        previous = argv[index - 1] if index else ""
        action = current._option_string_actions.get(previous)
        if action is not None and re.fullmatch(r"[A-Z][A-Z_]*", word) and action.type in (int, float):
            word = "7"
        out.append(word)
    return out


def _commands_shown() -> list[tuple[str, list[str]]]:
    """(where, argv after `ito-training`) for every command line shown in a fenced block or inline code."""
    shown = []
    for path in MARKDOWN:
        text = path.read_text()
        for fence in fences(text):
            if fence.language not in {"", "sh", "bash", "shell", "console", "text"}:
                continue
            with contextlib.suppress(AssertionError):
                for unit in shell_units(path, fence):
                    words = unit.words
                    if words and words[0] == "ito-training" and len(words) > 1:
                        shown.append((f"{_relative(path)}:{unit.line}", words[1:]))
        for code in inline_code(text):
            # a verb alone (`ito-training desk`) names the command; with more words it is a command line
            if re.match(r"^ito-training [a-z][\w-]* \S", code):
                with contextlib.suppress(ValueError):
                    shown.append((f"{_relative(path)} `{code}`", shlex.split(code)[1:]))
    return shown


COMMANDS_SHOWN = _commands_shown()


@pytest.mark.parametrize(("where", "argv"), COMMANDS_SHOWN, ids=[w for w, _ in COMMANDS_SHOWN])
def test_every_ito_training_command_shown_parses(where: str, argv: list[str]) -> None:
    delegated = _delegated()
    verb = argv[0]
    parser = delegated[verb]() if verb in delegated else cli.build_parser()
    rest = argv[1:] if verb in delegated else argv
    for variant in _expand(rest):
        concrete = _with_sample_values(parser, variant)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                parser.parse_args(concrete)
        except (Exception, SystemExit) as exc:
            raise AssertionError(f"{where}: `ito-training {' '.join(argv)}` does not parse as "
                                 f"{[verb, *concrete] if verb in delegated else concrete}: {exc!r}") from None


def test_the_command_check_can_fail() -> None:
    parser = cli.build_parser()
    with pytest.raises((Exception, SystemExit)), contextlib.redirect_stderr(io.StringIO()):
        parser.parse_args(["status", "--no-such-flag"])
    assert _expand(["status", "(--run", "RUN_ID", "|", "--idempotency-key", "KEY)", "[--wait", "SECONDS]"]) == [
        ["status", "--run", "RUN_ID", "--wait", "SECONDS"], ["status", "--idempotency-key", "KEY", "--wait", "SECONDS"],
        ["status", "--run", "RUN_ID"], ["status", "--idempotency-key", "KEY"],
    ]
    assert _expand(["request-confirmation", "--action", "cancel|cleanup", "--run", "R"]) == [
        ["request-confirmation", "--action", "cancel", "--run", "R"],
        ["request-confirmation", "--action", "cleanup", "--run", "R"],
    ]
    assert len(COMMANDS_SHOWN) >= 10


def test_the_readme_shows_a_persons_whole_path() -> None:
    """From the backend to a followed run, every step a command: the desk, plan, the sign-in link,
    confirmation, train, status; and the verbs for cancel and cleanup."""
    verbs = {argv[0] for where, argv in COMMANDS_SHOWN if where.startswith("README.md")}
    assert {"backend", "desk", "check", "digest", "plan", "confirmation", "train", "status", "request-confirmation",
            "logs", "metrics", "checkpoints", "cancel", "cleanup", "skill"} <= verbs
    readme = [argv for where, argv in COMMANDS_SHOWN if where.startswith("README.md")]
    assert any(argv[0] == "desk" and "login-link" in argv for argv in readme)


# ---------------------------------------------------------------------- Inspector commands


@pytest.mark.parametrize("path", INSPECTOR_FILES, ids=_relative)
def test_the_inspector_commands_shown_do_what_the_text_says(path: Path, tmp_path: Path) -> None:
    report: dict[str, Any] = run_inspector_doc(path, tmp_path)
    assert report["ran"] >= 1
