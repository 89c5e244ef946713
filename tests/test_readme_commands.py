"""Every `ito-training ...` command the README shows parses with the CLI's own parsers.

Commands come from the README's `sh` blocks (continuation lines joined, comments dropped). Synopsis
notation is expanded: `[...]` is tried without and with its content, `(A | B)` and `a|b` once per
alternative. The main verbs go through `cli.parse`; `desk`, `backend` and `skill` through their own
parsers. So a renamed flag, a removed verb or a typo in the README fails here.
"""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest

from ito_training_mcp import cli, skill_install
from ito_training_mcp.reference_backend import cli as backend_cli
from ito_training_mcp.reference_backend import desk_cli

README = Path(__file__).resolve().parent.parent / "README.md"
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def readme_commands() -> list[str]:
    commands = []
    for block in SH_BLOCK.findall(README.read_text(encoding="utf-8")):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("ito-training "):
                commands.append(line)
    return commands


def _groups(text: str) -> list[str]:
    """One line of synopsis notation -> every concrete form it stands for."""
    match = re.search(r"\[([^\[\]]*)\]|\(([^()]*)\)", text)
    if match is None:
        tokens = [token.split("|") if "|" in token and not token.startswith("-") else [token]
                  for token in text.split()]
        return [" ".join(choice) for choice in itertools.product(*tokens)]
    before, after = text[:match.start()], text[match.end():]
    if match.group(1) is not None:
        options = ["", match.group(1)]
    else:
        options = [part.strip() for part in match.group(2).split("|")]
    return [form for option in options for form in _groups(f"{before} {option} {after}")]


NUMBERS = {"SECONDS": "55", "N": "10"}  # placeholders of integer flags stand for a number


def expand(command: str) -> list[list[str]]:
    forms = _groups(command.replace('"$PWD', '"/repo').replace("$PWD", "/repo"))
    return [[NUMBERS.get(token, token) for token in shlex.split(form)[1:]] for form in forms]


COMMANDS = readme_commands()


def test_the_readme_shows_the_persons_whole_path() -> None:
    verbs = [shlex.split(c.replace("$PWD", "/repo"))[1] for c in COMMANDS]
    for verb in ("backend", "desk", "check", "plan", "confirmation", "train", "status", "request-confirmation",
                 "digest", "logs", "metrics", "checkpoints", "cancel", "cleanup", "skill"):
        assert verb in verbs, verb
    assert any("login-link" in c for c in COMMANDS)
    assert len(COMMANDS) >= 25


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_parses(command: str) -> None:
    forms = expand(command)
    assert forms
    for argv in forms:
        if argv[0] == "desk":
            desk_cli.build_parser().parse_args(argv[1:])
        elif argv[0] == "backend":
            backend_cli.build_parser().parse_args(argv[1:])
        elif argv[0] == "skill":
            skill_install._parser().parse_args(argv[1:])
        else:
            args = cli.parse(argv)
            assert args.command == argv[0]


def test_the_expansion_itself() -> None:
    assert expand("ito-training status (--run R | --idempotency-key K) [--wait SECONDS] [--json]") == [
        ["status", "--run", "R"], ["status", "--run", "R", "--json"],
        ["status", "--run", "R", "--wait", "55"], ["status", "--run", "R", "--wait", "55", "--json"],
        ["status", "--idempotency-key", "K"], ["status", "--idempotency-key", "K", "--json"],
        ["status", "--idempotency-key", "K", "--wait", "55"],
        ["status", "--idempotency-key", "K", "--wait", "55", "--json"],
    ]
    assert expand("ito-training request-confirmation --action cancel|cleanup --run R") == [
        ["request-confirmation", "--action", "cancel", "--run", "R"],
        ["request-confirmation", "--action", "cleanup", "--run", "R"],
    ]
    with pytest.raises(cli.UsageError):
        cli.parse(["train", "--booking", "b"])  # and a broken command would fail
