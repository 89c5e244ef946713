"""What a person sees where a newcomer used to stumble: each text is checked as the CLI prints it.

- With the backend down, the message names the backend's address and what to do; a read whose answer was
  lost says a read changes nothing (not "the outcome is unknown").
- With no backend configured, the words point a person who wants to try the flow at the reference backend.
- A mistyped command, required flag or manifest key gets a did-you-mean; human output shows no validator
  code (`extra_forbidden`, `string_type` ...).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ito_training_mcp.doors.cli import main as cli

from .conftest import EXAMPLE_MANIFEST, World, WriteFile

ITO = str(Path(sys.executable).with_name("ito-training"))


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = subprocess.run([ITO, *argv], capture_output=True, text=True, timeout=60,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("ITO_")}, **(env or {})})
    return proc.returncode, proc.stdout, proc.stderr


def in_process(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_a_backend_that_is_down_is_named_with_what_to_do() -> None:
    code, out, _ = run(["check"], {"ITO_API_URL": "http://127.0.0.1:9"})
    assert code == 1 and "BACKEND_UNREACHABLE" in out
    assert "http://127.0.0.1:9" in out and "running" in out and "ITO_API_URL" in out
    assert "Try again later" not in out


async def test_a_read_whose_answer_was_lost_says_a_read_changes_nothing(world: World, manifest_path: str) -> None:
    sha = (await world.service().digest_manifest(manifest_path)).data
    assert sha is not None
    created = await world.service().submit_training(world.booking, manifest_path, world.confirm(sha["sha256"]),
                                                    "friction-read-key-0001")
    assert created.data is not None
    world.op.fault("GET /v1/training-runs/{run_id}", "drop", times=5)
    envelope = await world.service().training_status(created.data["run_id"])
    assert envelope.error is not None and envelope.error.code.value == "BACKEND_ERROR"
    assert "a read changes nothing" in envelope.error.message and "unknown" not in envelope.error.message
    assert envelope.error.details is not None and envelope.error.details["backend"] == world.backend.url


def test_no_backend_configured_points_at_the_reference_backend_to_try_it() -> None:
    code, out, _ = run(["check"])
    assert code == 1 and "TRAINING_UNAVAILABLE" in out
    assert "ITO_API_URL is unset" in out and "ito-training backend" in out and "ito-training-reference" in out


def test_a_mistyped_command_or_required_flag_gets_a_did_you_mean() -> None:
    code, _, err = in_process(["chek"])
    assert code == 2 and "did you mean 'ito-training check'?" in err and "chek" not in err
    code, _, err = in_process(["train", "--bookin", "bk1", "--manifest", "/tmp/m.json",
                               "--idempotency-key", "friction-key-000001"])
    assert code == 2 and "unknown option --bookin (did you mean --booking?)" in err
    assert "--booking is required" not in err


def _digest_human(write_file: WriteFile, document: dict[str, Any]) -> str:
    code, out, _ = in_process(["digest", "--manifest", write_file(document)])
    assert code == 1
    return out


def test_a_mistyped_manifest_key_gets_a_did_you_mean_and_no_validator_code(write_file: WriteFile) -> None:
    document = json.loads(EXAMPLE_MANIFEST.read_bytes())
    document["checkpoint"] = document.pop("checkpoints")
    document["model"]["parameter_count"] = "8B"
    out = _digest_human(write_file, document)
    assert "unknown key; did you mean 'checkpoints'?" in out
    assert "required" in out and "must be a whole number" in out
    for code in ("extra_forbidden", "missing", "int_type", "string_type", "value_error"):
        assert code not in out, code
