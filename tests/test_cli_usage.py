"""Usage errors of `ito-training` say which flag is missing, malformed or unknown -- never its value.

(The property test over arbitrary argv is in tests/test_fuzz_cli.py.)
"""

from __future__ import annotations

import json
from io import StringIO

import pytest

from ito_training_mcp.doors.cli.main import run

GITHUB_TOKEN = "ghp_" + "Fz9qK2mT7vL4xR8nB3cW6yH1jD5gS0pA2eUo"


def usage(*argv: str) -> tuple[str, dict[str, str]]:
    """The human message (stderr) and the JSON envelope's details of the same command line."""
    out, err = StringIO(), StringIO()
    assert run(list(argv), stdout=out, stderr=err) == 2
    assert out.getvalue() == ""
    json_out = StringIO()
    assert run([*argv, "--json"], stdout=json_out, stderr=StringIO()) == 2
    envelope = json.loads(json_out.getvalue())
    assert envelope["error"]["code"] == "INVALID_INPUT" and envelope["error"]["details"]["problem"] == "usage"
    assert envelope["error"]["message"] == err.getvalue().strip()
    return err.getvalue().strip(), envelope["error"]["details"]


@pytest.mark.parametrize(("argv", "said", "argument"), [
    (["train", "--booking", "bk-1", "--manifest", "/m.json", "--confirmation-ref", "c-1"],
     "ito-training train: --idempotency-key is required", "--idempotency-key"),
    (["train"], "ito-training train: --booking, --manifest, --confirmation-ref and --idempotency-key are required",
     "--booking"),
    (["digest"], "ito-training digest: --manifest is required", "--manifest"),
    (["status", "--run", "r-1", "--wait", "soon"], "ito-training status: --wait must be a whole number of seconds",
     "--wait"),
    (["status", "--run", "r-1", "--wait=1.5"], "ito-training status: --wait must be a whole number of seconds",
     "--wait"),
    (["logs", "--run", "r-1", "--limit", "ten"], "ito-training logs: --limit must be a whole number of lines",
     "--limit"),
    (["check", "--forse"], "ito-training check: unknown option --forse", "--forse"),
    (["cancel", "--run", "r", "--confirmation-ref", "c", "--idempotency-key", "k" * 16, "--froce=yes"],
     "ito-training cancel: unknown option --froce", "--froce"),
    (["check", "--boking", "bk-1"], "ito-training check: unknown option --boking (did you mean --booking?)",
     "--boking"),
    (["check", "--booking"], "ito-training check: --booking needs a value", "--booking"),
    (["status", "--run", "-r1"], "ito-training status: --run needs a value", "--run"),
    (["check", "--json=yes"], "ito-training check: --json takes no value", "--json"),
])
def test_the_flag_is_named(argv: list[str], said: str, argument: str) -> None:
    message, details = usage(*argv)
    assert message.startswith(said), message
    assert details["argument"] == argument


@pytest.mark.parametrize(("argv", "hidden"), [
    (["status", "--run", "r-1", "--wait", "hunter2-secret"], "hunter2-secret"),
    (["status", "--run", "r-1", f"--wait={GITHUB_TOKEN}"], GITHUB_TOKEN),
    (["check", "--booking", "bk-1", "stray-value-xyz"], "stray-value-xyz"),
    (["check", f"--{GITHUB_TOKEN}"], GITHUB_TOKEN),
    (["check", "--api-key", "sk-live-51HcQ2eKj3VbXq9Zr"], "sk-live-51HcQ2eKj3VbXq9Zr"),
    (["check", "--token=abcdefgh12345678"], "abcdefgh12345678"),
    (["check", "--Password-Is-Hunter2"], "Password-Is-Hunter2"),
    (["check", "--a1b2c3d4e5f6"], "a1b2c3d4e5f6"),
    (["frobnicate-secret-thing"], "frobnicate-secret-thing"),
    (["logs", "--run", "r", "--limit", "0x10"], "0x10"),
])
def test_nothing_typed_after_a_flag_name_is_shown(argv: list[str], hidden: str) -> None:
    message, details = usage(*argv)
    assert hidden not in message
    assert hidden not in json.dumps(details)


def test_an_unknown_command_lists_the_commands_without_echoing_it() -> None:
    message, details = usage("trian", "--run", "r-1")
    assert "trian" not in message
    assert "the commands are: check, digest, plan, request-confirmation, confirmation, train" in message
    assert details["argument"] == "command"


def test_a_credential_shaped_unknown_option_is_not_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITO_API_KEY", "itoconfigured0credential")
    message, details = usage("check", "--itoconfigured0credential")
    assert "itoconfigured0credential" not in message + json.dumps(details)
    assert details["argument"] == "option"
