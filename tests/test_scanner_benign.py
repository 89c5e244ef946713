"""Realistic manifest strings that hold no credential are never refused, as values or as keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ito_training_mcp.scanner import scan_document, text_kinds
from tests.scanner_benign_corpus import BENIGN_KEYS, BENIGN_STRINGS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_the_corpus_is_large_enough() -> None:
    assert len(set(BENIGN_STRINGS)) >= 200


@pytest.mark.parametrize("text", BENIGN_STRINGS)
def test_benign_value(text: str) -> None:
    assert text_kinds(text) == []
    assert scan_document({"description": text, "data": [{"notes": [text]}]}) == []


@pytest.mark.parametrize("key", BENIGN_KEYS)
def test_benign_key(key: str) -> None:
    assert scan_document({key: "support-conversations-2026q3"}) == []


def test_the_whole_corpus_as_one_manifest() -> None:
    manifest = json.loads((EXAMPLES / "manifest.json").read_text())
    manifest["notes"] = BENIGN_STRINGS
    manifest["labels"] = {key: text for key, text in zip(BENIGN_KEYS, BENIGN_STRINGS, strict=False)}
    assert scan_document(manifest) == []


@pytest.mark.parametrize("path", sorted([EXAMPLES / "manifest.json", *(EXAMPLES / "manifests").glob("*.json")]),
                         ids=lambda p: p.name)
def test_example_manifests(path: Path) -> None:
    assert scan_document(json.loads(path.read_text())) == []
