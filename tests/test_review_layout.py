"""The review a person reads cannot be forged by a value.

A value that wraps continues past the label column (a hanging indent), text from the manifest is quoted, and
labels hold no padding (class `whitespace`): so no row a terminal shows can look like `Budget:` but the real
one, in the core's `review_text`, in the review resource and in the CLI's digest output at the terminal's
width. And a manifest holding the credential this process knows is refused before any review is made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.gates.manifest.review import DATA_NOTE, INDENT, MIN_WIDTH, SHORT_NOTE, review, review_lines
from ito_training_mcp.gates.manifest.schema import TrainingManifest
from ito_training_mcp.service import TrainingService

from .conftest import CANARY_TOKEN, EXAMPLE_MANIFEST, WriteFile

SHA = "0123456789abcdef" * 4
FAKE_BUDGET = "Budget:       at most $12.00 for this submission, within the manifest's ceiling of $48.00"
LABELS = ("Model:", "Target:", "Post-training:", "Budget:", "Checkpoints:", "Data:", "SHA-256:")
EXAMPLE: dict[str, Any] = json.loads(EXAMPLE_MANIFEST.read_bytes())


def columns(line: str) -> int:
    """What the layout promises: at most one column per ASCII character, two per other character."""
    return sum(1 if ch.isascii() else 2 for ch in line)


def rows(text: str, width: int) -> list[str]:
    """What a terminal of `width` columns shows: every line hard-wrapped (ASCII text)."""
    out: list[str] = []
    for line in text.splitlines():
        out += [line[i:i + width] for i in range(0, max(len(line), 1), width)]
    return out


_words = st.lists(st.sampled_from(["ab", "中文", '"', "\\", "Budget:", "$48.00", "x" * 40, "Model:", "SHA-256:"]),
                  min_size=1, max_size=12).map(" ".join).map(lambda s: s[:200].strip() or "ab")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=_words, dataset=_words, description=st.lists(_words, max_size=3).map("\n".join),
       width=st.integers(MIN_WIDTH, 140))
def test_property_every_line_starts_with_its_label_or_continues_past_them(name: str, dataset: str, description: str,
                                                                          width: int) -> None:
    document = json.loads(json.dumps(EXAMPLE))
    document["model"]["name"] = name
    document["data"][0]["name"] = dataset
    document["description"] = description or None
    lines = review_lines(review(TrainingManifest.model_validate(document, strict=True)), SHA, width)
    labels = [label for line in lines for label in LABELS if line.startswith(label)]
    assert labels == list(LABELS)  # each once, in order, at column 0: no value starts a row of its own
    for line in lines[1:]:
        assert columns(line) <= width, line
        assert line.startswith((*LABELS, "  1.", "  2.", "Description:", INDENT)), line
    assert lines[0] in (DATA_NOTE, SHORT_NOTE)


def _cli(*argv: str, width: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    env["COLUMNS"] = str(width)
    code = "from ito_training_mcp.doors.cli.main import main; raise SystemExit(main())"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=60,
                          check=False)


@pytest.mark.parametrize("width", [50, 80])
def test_words_that_spell_a_budget_row_never_start_a_row(write_file: WriteFile, width: int) -> None:
    """A model name that would wrap onto a row of its own reading `Budget: ... $48.00`: single spaces only
    (padding is refused), laid out for the terminal (`COLUMNS`), hard-wrapped as a terminal does."""
    doc = json.loads(json.dumps(EXAMPLE))
    doc["model"]["name"] = "ito-labs/atlas-8b " + "x " * ((width - 14 - 18) // 2) + " ".join(FAKE_BUDGET.split())
    done = _cli("digest", "--manifest", write_file(doc), width=width)
    assert done.returncode == 0, done.stdout + done.stderr
    screen = rows(done.stdout, width)
    budget = [row for row in screen if row.startswith("Budget:")]
    assert len(budget) == 1 and "$1,200.00" in budget[0], "\n".join(screen)
    assert any(row.startswith(INDENT) and "Budget:" in row for row in screen)  # shown, where a value goes


@pytest.mark.parametrize("name", [" atlas", "atlas ", "atlas  8b", "atlas\u00a08b", "atlas\u3000", "a" + " " * 60 + "b"])
@pytest.mark.parametrize("where", [("model", "name"), ("data", 0, "name"), ("data", 0, "decontamination", "method"),
                                   ("data", 0, "decontamination", "eval_suites", 0)])
async def test_a_padded_label_is_refused(write_file: WriteFile, name: str, where: tuple[str | int, ...]) -> None:
    doc = json.loads(json.dumps(EXAMPLE))
    holder: Any = doc
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = name
    env = await TrainingService({}).digest_manifest(write_file(doc))
    assert env.error is not None and env.error.code.value == "MANIFEST_SCHEMA", env
    pointer = "/" + "/".join(map(str, where))
    assert {"pointer": pointer, "problem": "whitespace"} in (env.error.details or {})["problems"]


@pytest.mark.parametrize("escaped", [False, True])
async def test_a_manifest_holding_the_configured_credential_is_refused(write_file: WriteFile, escaped: bool) -> None:
    """No review could carry it safely (the layout may wrap it across lines): gate 2 refuses it, naming where."""
    Credential(CANARY_TOKEN, "ITO_API_KEY")  # registered, as when the server holds it
    doc = json.loads(json.dumps(EXAMPLE))
    doc["description"] = f"the run uses {CANARY_TOKEN} for the bucket"
    content = json.dumps(doc, ensure_ascii=escaped)
    if escaped:  # the token spelled with escapes, as JSON allows
        content = content.replace(CANARY_TOKEN[:3], "".join(f"\\u{ord(c):04x}" for c in CANARY_TOKEN[:3]))
    env = await TrainingService({}).digest_manifest(write_file(content.encode()))
    assert env.error is not None and env.error.code.value == "MANIFEST_SECRET", env
    assert {"pointer": "/description", "kind": "configured_credential", "in_key": False} in env.error.details[
        "findings"]
    assert CANARY_TOKEN not in env.to_json()


async def test_a_review_kept_before_its_credential_was_known_is_not_shown_again(write_file: WriteFile) -> None:
    """A token file is read only after gate 3, so a manifest digested earlier can hold the token unseen. Once
    the process knows it, the kept review is forgotten: the layout could split the value into halves the
    egress would not recognise."""
    token = "plainvalue" + "Qm7Rt2Vx9Lp4Zk8Hw3Nb6Jc1Fd5Gs0Yh" * 2  # no provider shape, longer than a row
    doc = json.loads(json.dumps(EXAMPLE))
    doc["description"] = f"the run uses {token} for the bucket"
    service = TrainingService({})
    env = await service.digest_manifest(write_file(doc))
    assert env.ok and env.data is not None, env
    sha = env.data["sha256"]
    assert await service.full_review(sha) is not None
    Credential(token, "ITO_TOKEN_FILE")  # the process resolves it later
    assert await service.full_review(sha) is None
    again = await service.digest_manifest(write_file(doc))
    assert again.error is not None and again.error.code.value == "MANIFEST_SECRET", again
    assert token[:20] not in again.to_json() and token[-20:] not in again.to_json()
