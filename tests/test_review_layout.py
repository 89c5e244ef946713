"""The review a person reads cannot be forged by a value: a value that wraps continues past the label
column (hanging indent), and labels hold no padding (class `whitespace`), so no row a terminal shows
can look like `Budget:` but the real one -- in the core's `review_text` and in the CLI's digest and
plan output, at the terminal's width."""

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
from ito_training_mcp.egress import clean as egress
from ito_training_mcp.envelope import success
from ito_training_mcp.gates.manifest import schema as manifest
from ito_training_mcp.gates.manifest.review import (
    INDENT,
    ITEM,
    LABELS,
    MIN_WIDTH,
    NOT_SHOWN,
    REVIEW_WIDTH,
    TEXT_MAX_LINES,
    VALUE_COLUMN,
    review_lines,
    review_text,
    wrap,
)
from ito_training_mcp.service import TrainingService

from .conftest import CANARY_TOKEN, WriteFile
from .test_digest_shortcuts import manifests

SHA = "0123456789abcdef" * 4
FAKE_BUDGET = "Budget:       ceiling $48.00, this submission at most $12.00"


def columns(line: str) -> int:
    """What the layout promises: at most one column per ASCII character, two per other character."""
    return sum(1 if ch.isascii() else 2 for ch in line)


def rows(text: str, width: int) -> list[str]:
    """What a terminal of `width` columns shows: every line hard-wrapped (ASCII text)."""
    out: list[str] = []
    for line in text.splitlines():
        out += [line[i:i + width] for i in range(0, max(len(line), 1), width)]
    return out


def row_labels(lines: list[str]) -> list[str]:
    return [label for line in lines for label in LABELS if line.startswith(label)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests(), st.integers(MIN_WIDTH, 140))
def test_property_every_line_starts_with_its_label_or_continues_past_them(parsed: manifest.TrainingManifest,
                                                                          width: int) -> None:
    review = parsed.review()
    lines = review_lines(review, SHA, width)
    assert row_labels(lines) == list(LABELS)  # each label once, in order, at column 0
    for line in lines:
        assert columns(line) <= width, line
        assert line.startswith((*LABELS, ITEM, INDENT)), line
        if line.startswith(INDENT):
            assert not line.startswith(INDENT + " ") or line.strip() == "", line  # past the labels, flush
    data_rows = [line for line in lines if line.startswith(ITEM)]
    assert len(data_rows) == len(review["data"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"ab ⟨U+0⟩中", "Budget:", "  "]), max_size=120).map("".join), st.integers(1, 100),
       st.booleans())
def test_property_wrap_keeps_every_character_and_bounds_every_chunk(text: str, width: int, fast: bool) -> None:
    """Both wraps: the usual one and the linear one of a long review."""
    chunks = wrap(text, width, fast=fast)
    assert all(columns(chunk) <= max(width, 2) for chunk in chunks)
    assert "".join(chunks).replace(" ", "") == text.replace(" ", "")


def test_the_core_review_text_is_the_layout_at_its_width(example_document: dict[str, Any]) -> None:
    review = manifest.TrainingManifest.model_validate(example_document).review()
    text = review_text(review, SHA)
    assert text.split("\n") == review_lines(review, SHA, REVIEW_WIDTH)
    assert all(columns(line) <= REVIEW_WIDTH for line in text.split("\n"))
    assert f"SHA-256:{' ' * (VALUE_COLUMN - 8)}{SHA}" in text


# ------------------------------------------------------------------------------- labels: whitespace

@pytest.mark.parametrize("name", [" atlas", "atlas ", "atlas  8b", "atlas\u00a08b", "atlas\u3000", "a" + " " * 60 + "b"])
@pytest.mark.parametrize("where", [("model", "name"), ("data", 0, "name"), ("data", 0, "decontamination", "method"),
                                   ("data", 0, "decontamination", "eval_suites", 0)])
async def test_a_padded_label_is_refused(write_file: WriteFile, example_document: dict[str, Any], name: str,
                                         where: tuple[str | int, ...]) -> None:
    doc = json.loads(json.dumps(example_document))
    holder: Any = doc
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = name
    env = await TrainingService({}).digest_manifest(write_file(doc))
    assert env.error is not None and env.error.code.value == "MANIFEST_SCHEMA", env
    pointer = "/" + "/".join(map(str, where))
    assert {"pointer": pointer, "problem": "whitespace"} in (env.error.details or {})["problems"]


# ------------------------------------------------------------------------------------------ the CLI

def _cli(*argv: str, width: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    env["COLUMNS"] = str(width)
    return subprocess.run([sys.executable, "-c", "from ito_training_mcp.doors.cli.main import main; raise SystemExit(main())",
                           *argv], capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("width", [50, 80])
def test_words_that_spell_a_budget_row_never_start_a_row(write_file: WriteFile, example_document: dict[str, Any],
                                                         width: int) -> None:
    """The finding: a model name that wraps onto a row of its own reading `Budget: ... $48.00`. Single
    spaces only (padding is refused), laid out for the terminal (`COLUMNS`), hard-wrapped as a
    terminal does."""
    doc = json.loads(json.dumps(example_document))
    # Unwrapped after "Model:" and 8 spaces (the old layout), the fake row would start a terminal row exactly.
    doc["model"]["name"] = "ito-labs/atlas-8b " + "x " * ((width - 14 - 18) // 2) + " ".join(FAKE_BUDGET.split())
    done = _cli("digest", "--manifest", write_file(doc), width=width)
    assert done.returncode == 0, done.stdout + done.stderr
    screen = rows(done.stdout, width)
    budget = [row for row in screen if row.startswith("Budget:")]
    assert len(budget) == 1 and "$4800.00" in budget[0], "\n".join(screen)
    assert any(row.startswith(INDENT) and "Budget:" in row for row in screen)  # shown, where a value goes
    assert row_labels(screen) == list(LABELS)


def test_the_padded_name_of_the_finding_is_refused(write_file: WriteFile, example_document: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(example_document))
    name = "ito-labs/atlas-8b"
    doc["model"]["name"] = name + " " * (80 - 14 - len(name)) + FAKE_BUDGET + " " * (80 - len(FAKE_BUDGET))
    done = _cli("digest", "--manifest", write_file(doc), width=80)
    assert done.returncode != 0 and "MANIFEST_SCHEMA" in done.stdout and "whitespace" in done.stdout
    assert "$48.00" not in done.stdout


# ------------------------------------------------------------------- a credential the layout breaks

def test_a_registered_credential_split_by_the_layout_withholds_the_text() -> None:
    Credential(CANARY_TOKEN, "ITO_API_KEY")
    split = f"Model:         x {CANARY_TOKEN[:10]}\n{INDENT}{CANARY_TOKEN[10:]}"
    text = egress.LocalText(split, strings=f"x {CANARY_TOKEN}")
    out = egress.clean_envelope(success({"review_text": text}, notice="n", live_api_contacted=False))
    assert out.data is not None and out.data["review_text"] == egress.REVIEW_WITHHELD_NOTE
    clean = egress.LocalText("Model:         x", strings="x")
    assert egress.clean_envelope(success({"review_text": clean}, notice="n", live_api_contacted=False)).data == {
        "review_text": "Model:         x"}


def _many_references(example_document: dict[str, Any], count: int, extra: int) -> dict[str, Any]:
    document = json.loads(json.dumps(example_document))
    ref = document["data"][0]
    document["data"] = [{**ref, "name": f"set {i} of many words", "uri": ref["uri"] + "x" * extra + str(i)}
                        for i in range(count)]
    return document


def test_a_long_value_takes_the_linear_wrap_and_keeps_the_layout(example_document: dict[str, Any]) -> None:
    """A value past FAST_FROM characters is wrapped with the linear pattern: still every line starts
    with a label, the item marker or the continuation indent, and no line is wider than the layout."""
    from ito_training_mcp.gates.manifest.review import FAST_FROM

    parsed = manifest.parse_manifest(json.dumps(_many_references(example_document, 60, 1500)).encode())
    lines = review_lines(parsed.review(), "0" * 64)
    assert all(len(ref["uri"]) > FAST_FROM for ref in parsed.review()["data"])
    assert len([line for line in lines if line.startswith(ITEM)]) == 60
    for line in lines:
        assert len(line) <= REVIEW_WIDTH
        assert line.startswith((*LABELS, ITEM, INDENT)), line
        assert not line.startswith(INDENT) or not line[len(INDENT):].startswith(" ")


# ------------------------------------------------------------------------ review_text: bounded

@pytest.mark.parametrize(("count", "extra"), [(60, 1500), (256, 40), (3, 2000)])
def test_review_text_is_bounded_and_counts_what_it_leaves_out(example_document: dict[str, Any], count: int,
                                                              extra: int) -> None:
    """What an agent shows in a conversation is at most TEXT_MAX_LINES lines: the whole review's first
    lines, as many data references as fit (each whole), a `Not shown:` row that counts the rest and
    says where every one is, and the SHA-256 row. The CLI and the desk show them all."""
    review = manifest.parse_manifest(json.dumps(_many_references(example_document, count, extra)).encode()).review()
    full = review_lines(review, SHA)
    lines = review_text(review, SHA).split("\n")
    assert len(lines) <= TEXT_MAX_LINES
    assert lines[-1] == full[-1] and lines[-1].startswith("SHA-256:")
    shown = len([line for line in lines if line.startswith(ITEM)])
    if len(full) <= TEXT_MAX_LINES:
        assert lines == full and shown == count
        return
    assert 1 <= shown < count
    at = next(i for i, line in enumerate(lines) if line.startswith(NOT_SHOWN))
    assert lines[:at] == full[:at]  # the same layout, cut between two references
    assert full[at].startswith(ITEM)
    assert lines[at].startswith(f"{NOT_SHOWN.ljust(VALUE_COLUMN)}{count - shown} of {count} data references: ")
    said = " ".join(line.strip() for line in lines[at:-1])
    assert said.endswith("every one is in data.review.data, and the desk's review page shows them all")
    for line in lines:
        assert columns(line) <= REVIEW_WIDTH
        assert line.startswith((*LABELS, NOT_SHOWN, ITEM, INDENT)), line


def test_the_first_reference_is_shown_even_when_it_alone_passes_the_bound(example_document: dict[str, Any]) -> None:
    document = _many_references(example_document, 2, 0)
    document["data"][0]["decontamination"]["eval_suites"] = [f"suite-{i:03d}-" + "y" * 180 for i in range(100)]
    review = manifest.parse_manifest(json.dumps(document).encode()).review()
    lines = review_text(review, SHA).split("\n")
    assert len([line for line in lines if line.startswith(ITEM)]) == 1
    assert any(line.startswith(f"{NOT_SHOWN.ljust(VALUE_COLUMN)}1 of 2 ") for line in lines)
    assert "suite-099-" in "".join(line.strip() for line in lines)  # the first reference whole
