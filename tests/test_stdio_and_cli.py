"""The real processes: the MCP server over stdio in a subprocess, and the installed CLI."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from ito_training_mcp.doors.cli import main as cli

from .conftest import CANARY_GITHUB, CANARY_TOKEN, WriteFile

KEY = "stdio-test-key-000001"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_server_answers_all_core_tools(mode: str, manifest_path: str, write_file: WriteFile,
                                                   example_document: dict[str, Any]) -> None:
    secret_manifest = write_file({**example_document, "description": CANARY_GITHUB})
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ito_training_mcp", "--log-level", "DEBUG"],
        env={"ITO_API_KEY": CANARY_TOKEN},
    )
    with tempfile.TemporaryFile("w+") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"check_training_availability", "digest_manifest", "submit_training"} <= names
            check = await client.call_tool("check_training_availability", {})
            digest = await client.call_tool("digest_manifest", {"manifest_path": manifest_path})
            secret = await client.call_tool("digest_manifest", {"manifest_path": secret_manifest})
            submit = await client.call_tool("submit_training", {
                "booking_id": "bk_1", "manifest_path": manifest_path, "confirmation_ref": "cf_1",
                "idempotency_key": KEY,
            })
        errlog.seek(0)
        stderr = errlog.read()
    assert check.is_error and check.structured_content["error"]["code"] == "TRAINING_UNAVAILABLE"
    assert not digest.is_error and len(digest.structured_content["data"]["sha256"]) == 64
    assert secret.is_error and secret.structured_content["error"]["code"] == "MANIFEST_SECRET"
    assert submit.is_error and submit.structured_content["error"]["code"] == "TRAINING_UNAVAILABLE"
    everything = stderr + "".join(json.dumps(r.structured_content) for r in (check, digest, secret, submit))
    assert CANARY_TOKEN not in everything
    assert CANARY_GITHUB not in everything
    assert "refused" in stderr  # logging happened, and on stderr: stdout stayed clean for the protocol


def _venv_script(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    assert candidate.exists(), f"{name} is not installed next to {sys.executable}"
    return str(candidate)


def test_installed_cli_exit_codes_and_json(manifest_path: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")} | {"ITO_API_KEY": CANARY_TOKEN}
    ito = _venv_script("ito-training")
    check = subprocess.run([ito, "check", "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert check.returncode == 1
    assert json.loads(check.stdout)["error"]["code"] == "TRAINING_UNAVAILABLE"
    digest = subprocess.run([ito, "digest", "--manifest", manifest_path, "--json"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert digest.returncode == 0
    assert json.loads(digest.stdout)["data"]["path"] == manifest_path
    usage = subprocess.run([ito, "train", "--token", CANARY_TOKEN, "--json"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert usage.returncode == 2
    assert json.loads(usage.stdout)["error"]["code"] == "INVALID_INPUT"
    for proc in (check, digest, usage):
        assert CANARY_TOKEN not in proc.stdout + proc.stderr
    module = subprocess.run([sys.executable, "-m", "ito_training_mcp", "--version"], capture_output=True, text=True,
                            timeout=60)
    assert module.returncode == 0 and module.stdout.startswith("ito-training-mcp ")


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_human_output_is_short_and_says_what_to_do(manifest_path: str) -> None:
    code, out, _ = run_cli(["check"])
    assert code == 1
    assert out.startswith("REFUSED TRAINING_UNAVAILABLE")
    assert "Next: No Itô training backend is configured" in out and "ito-training backend" in out
    code, out, _ = run_cli(["digest", "--manifest", manifest_path])
    assert code == 0
    assert "SHA-256:" in out and "Budget:" in out


def test_cli_train_has_the_upstream_flags(manifest_path: str) -> None:
    code, out, _ = run_cli(["train", "--booking", "bk_1", "--manifest", manifest_path, "--confirmation-ref", "cf_1",
                            "--idempotency-key", KEY, "--json"])
    assert code == 1
    assert json.loads(out)["error"]["code"] == "TRAINING_UNAVAILABLE"


@pytest.mark.parametrize("argv", [
    ["--json"], ["nope", "--json"], ["digest", "--json"], ["train", "--booking", "b", "--json"],
    ["check", "--booking", "b", "--force", "--json"], ["check", "--book", "b", "--json"],
])
def test_cli_usage_errors_are_invalid_input_envelopes(argv: list[str]) -> None:
    code, out, _ = run_cli(argv)
    assert code == 2
    env = json.loads(out)
    assert env["ok"] is False
    assert env["error"]["code"] == "INVALID_INPUT"


def test_cli_without_a_command_prints_usage_to_stderr() -> None:
    code, out, err = run_cli([])
    assert code == 2
    assert out == ""
    assert "a command is required" in err


def test_cli_usage_error_never_echoes_what_was_typed() -> None:
    code, out, err = run_cli(["train", f"--api-key={CANARY_TOKEN}"])
    assert code == 2
    assert CANARY_TOKEN not in out + err


def test_the_mcp_server_and_the_reference_backend_do_not_share_a_default_port() -> None:
    """They often run side by side (the README's path): the server's --port must not default to 8765."""
    from ito_training_mcp.doors.mcp import main as server_main
    from ito_training_reference import cli as backend_cli

    server_port = server_main._parser().parse_args([]).port
    assert server_port != backend_cli.build_parser().parse_args([]).port
    shown = server_main._parser().format_help()
    assert f"default {server_port}" in " ".join(shown.split()) and "default 127.0.0.1" in " ".join(shown.split())
