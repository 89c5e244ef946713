"""Gates 0-2 are local: a refusal there reads no credential and touches no network.

Canary credentials are configured for every case. The credential loader and socket creation
(connect, name resolution) are replaced by tripwires, and every path the process opens is recorded, so a gate that
reached for the token, its file, or the network fails the test, whatever it then returned.
"""

from __future__ import annotations

import builtins
import io
import json
import logging
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from ito_training_mcp.backend import credentials
from ito_training_mcp.doors.cli import main as cli
from ito_training_mcp.service import TrainingService

from .conftest import CANARY_GITHUB, CANARY_TOKEN, ClientFactory, WriteFile

KEY = "isolation-key-000001"


class Tripwires:
    def __init__(self) -> None:
        self.credential_reads = 0
        self.sockets = 0
        self.opened: list[str] = []


@pytest.fixture
def tripwires(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Tripwires, dict[str, str]]:
    token_file = tmp_path / "token"
    token_file.write_text(CANARY_TOKEN)
    token_file.chmod(0o600)
    env = {"ITO_API_KEY": CANARY_TOKEN, "ITO_TOKEN_FILE": str(token_file)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    wires = Tripwires()

    def no_credential(*_a: Any, **_k: Any) -> Any:
        wires.credential_reads += 1
        raise AssertionError("a local gate resolved the credential")

    def no_network(*_a: Any, **_k: Any) -> Any:
        wires.sockets += 1
        raise AssertionError("a local gate reached for the network")

    real_os_open, real_open = os.open, builtins.open

    def recording_os_open(path: Any, *a: Any, **k: Any) -> int:
        wires.opened.append(str(path))
        return real_os_open(path, *a, **k)

    def recording_open(file: Any, *a: Any, **k: Any) -> Any:
        wires.opened.append(str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr(credentials, "resolve_credential", no_credential)
    # Not socket.socket itself: the event loop needs its self-pipe. Any outbound use needs these.
    for name in ("connect", "connect_ex", "sendto"):
        monkeypatch.setattr(socket.socket, name, no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(os, "open", recording_os_open)
    monkeypatch.setattr(builtins, "open", recording_open)
    return wires, {**env, "token_file": str(token_file)}


def _cases(write_file: WriteFile, example: dict[str, Any]) -> list[tuple[str, dict[str, str], str, dict[str, Any], str]]:
    good = write_file(example)
    secret = write_file({**example, "description": f"use {CANARY_GITHUB}"})
    loose = write_file(example, mode=0o666)
    # Over 64 KiB, so that the read's worker takes its looks ahead: zero-width spaces everywhere (refused
    # for its characters, the scanner's look settled in any form), and a token spelt in full-width forms.
    full_width = str.maketrans({c: chr(ord(c) + 0xFEE0) for c in map(chr, range(0x21, 0x7F))})
    notes = [f"note {i} \u200b held out" for i in range(4000)]
    invisible = write_file({**example, "notes": notes})
    spelt = write_file({**example, "notes": [n.replace("\u200b", "") for n in notes] + [CANARY_GITHUB.translate(full_width)]})
    # Labels one character too long in every reference (trimmed before pydantic validates), and labels
    # that NFKC changes in many ways (ICU's pass, where installed) with the token spelt full-width in one.
    ref = example["data"][0]
    too_long = write_file({**example, "data": [{**ref, "decontamination": {**ref["decontamination"], "eval_suites": [
        f"{r:03d}{i:02d}" + "x" * 197 for i in range(18)]}} for r in range(128)]})
    kinds = "".join(chr(0xFF41 + i) for i in range(20)) + "\ufb01\u00bd\u2460"
    many = [f"tokenizer {i} " + "".join("\u0436" + kinds[(i + j) % len(kinds)] for j in range(80)) for i in range(100)]
    many[57] = "tokenizer " + CANARY_GITHUB.translate(full_width)
    many_kinds = write_file({**example, "data": [{**ref, "decontamination": {**ref["decontamination"],
                                                                               "eval_suites": many}}]})
    https = {"ITO_API_URL": "https://ito.example"}
    submit = {"booking_id": "bk_1", "manifest_path": good, "confirmation_ref": "cf_1", "idempotency_key": KEY}
    return [
        ("gate0 booking", {}, "check_training_availability", {"booking_id": "a/b"}, "INVALID_INPUT"),
        ("gate0 unknown arg", https, "submit_training", {**submit, "api_key": CANARY_TOKEN}, "INVALID_INPUT"),
        ("gate0 no confirmation", https, "submit_training", {**submit, "confirmation_ref": ""}, "CONFIRMATION_REQUIRED"),
        ("gate0 key", https, "submit_training", {**submit, "idempotency_key": "k"}, "INVALID_INPUT"),
        ("gate1 check unset", {}, "check_training_availability", {}, "TRAINING_UNAVAILABLE"),
        ("gate1 check booking", {}, "check_training_availability", {"booking_id": "bk_1"}, "TRAINING_UNAVAILABLE"),
        ("gate1 submit unset", {}, "submit_training", submit, "TRAINING_UNAVAILABLE"),
        ("gate1 http", {"ITO_API_URL": "http://ito.example"}, "submit_training", submit, "CONFIG_INVALID"),
        ("gate1 userinfo", {"ITO_API_URL": f"https://u:{CANARY_TOKEN}@ito.example"}, "check_training_availability",
         {}, "CONFIG_INVALID"),
        ("gate1 timeout", {**https, "ITO_TRAINING_TIMEOUT_S": "nan"}, "submit_training", submit, "CONFIG_INVALID"),
        ("gate2 secret", https, "submit_training", {**submit, "manifest_path": secret}, "MANIFEST_SECRET"),
        ("gate2 perms", https, "submit_training", {**submit, "manifest_path": loose}, "MANIFEST_UNSAFE_PERMISSIONS"),
        ("gate2 relative", https, "submit_training", {**submit, "manifest_path": "m.json"}, "MANIFEST_PATH_INVALID"),
        ("gate2 digest", {}, "digest_manifest", {"manifest_path": secret}, "MANIFEST_SECRET"),
        ("gate2 invisible, large", https, "submit_training", {**submit, "manifest_path": invisible}, "MANIFEST_SCHEMA"),
        ("gate2 full-width secret, large", {}, "digest_manifest", {"manifest_path": spelt}, "MANIFEST_SECRET"),
        ("gate2 labels too long, large", https, "submit_training", {**submit, "manifest_path": too_long},
         "MANIFEST_SCHEMA"),
        ("gate2 full-width secret among many kinds", https, "submit_training",
         {**submit, "manifest_path": many_kinds}, "MANIFEST_SECRET"),
    ]


def _assert_untouched(wires: Tripwires, token_file: str) -> None:
    assert wires.credential_reads == 0
    assert wires.sockets == 0
    assert token_file not in wires.opened


async def test_local_refusals_touch_no_credential_and_no_network_over_mcp(
    tripwires: tuple[Tripwires, dict[str, str]],
    connect: ClientFactory,
    write_file: WriteFile,
    example_document: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wires, env = tripwires
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    for label, extra_env, tool, arguments, code in _cases(write_file, example_document):
        service_env = {k: v for k, v in env.items() if k != "token_file"} | extra_env
        async with connect(service=TrainingService(service_env)) as client:
            result = await client.call_tool(tool, arguments)
        envelope = result.structured_content
        assert envelope is not None, label
        assert envelope["error"]["code"] == code, label
        assert envelope["live_api_contacted"] is False, label
        assert result.is_error is True, label
        seen.append(json.dumps(envelope))
    _assert_untouched(wires, env["token_file"])
    captured = capsys.readouterr()
    everything = "\n".join([*seen, caplog.text, captured.out, captured.err])
    assert CANARY_TOKEN not in everything
    assert CANARY_GITHUB not in everything


def test_local_refusals_touch_no_credential_and_no_network_via_cli(
    tripwires: tuple[Tripwires, dict[str, str]], write_file: WriteFile, example_document: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wires, env = tripwires
    secret = write_file({**example_document, "description": f"use {CANARY_GITHUB}"})
    outputs: list[str] = []
    for argv, expected in [
        (["check", "--json"], "TRAINING_UNAVAILABLE"),
        (["digest", "--manifest", secret, "--json"], "MANIFEST_SECRET"),
        (["train", "--booking", "bk_1", "--manifest", secret, "--confirmation-ref", "cf", "--idempotency-key", KEY,
          "--json"], "TRAINING_UNAVAILABLE"),
    ]:
        out, err = io.StringIO(), io.StringIO()
        assert cli.run(argv, stdout=out, stderr=err) == cli.EXIT_REFUSED
        assert json.loads(out.getvalue())["error"]["code"] == expected
        outputs += [out.getvalue(), err.getvalue()]
    monkeypatch.setenv("ITO_API_URL", "https://ito.example")
    out = io.StringIO()
    argv = ["train", "--booking", "bk_1", "--manifest", secret, "--confirmation-ref", "cf", "--idempotency-key", KEY]
    assert cli.run([*argv, "--json"], stdout=out, stderr=io.StringIO()) == cli.EXIT_REFUSED
    assert json.loads(out.getvalue())["error"]["code"] == "MANIFEST_SECRET"
    outputs.append(out.getvalue())
    _assert_untouched(wires, env["token_file"])
    assert not any(CANARY_TOKEN in o or CANARY_GITHUB in o for o in outputs)
