"""Every rule's own samples: its true positives are found (with the rule's kind), its false positives are not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ito_training_mcp.scanner import scan, scan_document, text_kinds
from ito_training_mcp.scanner.rules import RULES, Rule, expand, table

TRUE = [pytest.param(rule, expand(tp), id=f"{rule.kind}-{n}") for rule in RULES for n, tp in enumerate(rule.tps)]
FALSE = [pytest.param(rule, expand(fp), id=f"{rule.kind}-{n}") for rule in RULES for n, fp in enumerate(rule.fps)]


def _has_trigger(rule: Rule, text: str) -> bool:
    if rule.pattern_triggers:
        return any(re.search(t, text) for t in rule.triggers)
    return any((t.lower() in text.lower()) if rule.fold else (t in text) for t in rule.triggers)


@pytest.mark.parametrize(("rule", "text"), TRUE)
def test_true_positive_is_found(rule: Rule, text: str) -> None:
    assert _has_trigger(rule, text), "every match of a rule holds one of its triggers"
    if rule.keys_only:
        assert [f.kind for f in scan_document({text: "x"})] == [rule.kind]
    else:
        assert rule.kind in text_kinds(text)
        assert rule.kind in {f.kind for f in scan_document({"description": text})}


@pytest.mark.parametrize(("rule", "text"), FALSE)
def test_false_positive_is_not(rule: Rule, text: str) -> None:
    if rule.keys_only:
        assert scan_document({text: "x"}) == []
    else:
        assert text_kinds(text) == []


@pytest.mark.parametrize(("rule", "text"), TRUE + FALSE)
@pytest.mark.parametrize("ascii_only", [True, False])
def test_the_json_bytes_shortcut_agrees(rule: Rule, text: str, ascii_only: bool) -> None:
    """Given the JSON bytes, the scan may stop before gathering strings (ASCII, no escape, no trigger);
    it must then find exactly what the whole pipeline finds, in a key and in a value."""
    for doc in ({text: "x"}, {"description": text, "note": [text]}):
        source = json.dumps(doc, ensure_ascii=ascii_only).encode()
        assert scan_document(doc, source=source) == scan_document(doc)


def test_the_shortcut_reads_only_what_spells_every_string_out() -> None:
    token = "ghp_" + "Zq4xW8rT2mK6pL0vB3nH7jD1sF5gY9cA2eUk"
    assert scan._quiet(b'{"description": "a plain sentence"}')
    assert not scan._quiet(json.dumps({"description": token}).encode())
    spelt = json.dumps({"description": "\\u0067hp_" + token[4:]}).encode().replace(b"\\\\", b"\\")
    assert b"ghp_" not in spelt and not scan._quiet(spelt)  # an escape: the strings must be gathered
    assert not scan._quiet('{"d": "caf\u00e9"}'.encode())  # not ASCII: normal forms may differ
    assert [f.kind for f in scan_document(json.loads(spelt), source=spelt)] == ["github_token"]
    for encoding in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):  # json.loads reads these too
        wide = '{"password": "Hunter2Winter!"}'.encode(encoding)
        assert not scan._quiet(wide)
        assert scan_document(json.loads(wide), source=wide) == scan_document(json.loads(wide)) != []


def test_every_rule_has_samples() -> None:
    for rule in RULES:
        assert rule.tps and rule.fps, rule.what


def test_the_docs_list_the_rules() -> None:
    assert table() in (Path(__file__).resolve().parent.parent / "docs" / "scanner.md").read_text()


def test_every_pattern_compiles_for_both_engines() -> None:
    for i, rule in enumerate(RULES):
        assert scan._finder(i) is not None
        assert scan._finder(i, loose=True) is not None and scan._shortest(i) is not None
        if "(?P<" in rule.pattern:
            assert scan._parser(i) is not None
