"""Anchors that no finding continues with certain characters (`secret_rules.ANCHOR_STOPS`): the
searches for places where text in another form could hold an anchor pass over an occurrence followed
by one of its stops, so a mebibyte of "tokenizer" written among marks is not a mebibyte of places.
Checked here: no rule and no credential key name can match where every occurrence of its anchors is
stopped (the table against the rules), the searches keep every other occurrence, and the scanner
answers the same with the stops as without them."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ito_training_mcp import decomposed_anchors, secret_rules, secret_scan
from ito_training_mcp.errors import ManifestRefusal
from ito_training_mcp.gates.manifest import schema as manifest
from ito_training_mcp.secret_engine import PythonEngine, default_engine

from .conftest import EXAMPLE_MANIFEST
from .test_decomposed_anchors import _own_way_label, found_in_any_form, stopped

SETTINGS = settings(max_examples=2000, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
STOPPED = sorted(secret_rules.ANCHOR_STOPS)
# Pieces of text around a stopped anchor: what its rules and key names want after it, stops, and words
# that make other anchors and credential names.
PIECES = ["token", "TOKEN", "Token", "tokens", "id", "ID", "refresh", "access", "auth", "hf", "api", "secret",
          "pwd", "_", ".", "-", "s", "S", "i", "z", "Value", "V", "2", " ", "\t", ":", "=", "=>", ":=", '"', "'",
          "`", "abcdefgh", "12345678", "Zx9/+=Qw", "\u00e9", "\u0301", "\u200b", "/", "?", "&"]


def _occurrences(anchors: tuple[str, ...], fold: bool, text: str) -> list[tuple[str, int]]:
    """Each occurrence of one of `anchors` in `text` (searched as the engine does): the anchor and
    where it ends."""
    import re2

    found = []
    for anchor in anchors:
        pattern = re2.compile(f"(?i:{re.escape(anchor)})" if fold else re.escape(anchor))
        found += [(anchor, match.end()) for match in pattern.finditer(text)]
    return found


def _stopped_rules() -> list[secret_rules.Rule]:
    return [rule for rule in secret_rules.RULES if set(rule.anchors) & set(STOPPED)]


def test_the_stops_are_what_the_rules_want() -> None:
    """The table names anchors some rule or key name uses, with stops that are ASCII letters and
    digits only (the searches rely on a stop being ASCII), and "token" stops at "tokenizer" but not at
    "tokens" (`id_tokens=...`) nor at a separator."""
    assert STOPPED == ["token"] and _stopped_rules()
    for anchor, stops in secret_rules.ANCHOR_STOPS.items():
        assert anchor in secret_rules.KEY_NAME_STEMS or any(anchor in rule.anchors for rule in secret_rules.RULES)
        members = [chr(code) for code in range(0x110000) if re.fullmatch(f"[{stops}]", chr(code))]
        assert members and all(char.isascii() and char.isalnum() for char in members), anchor
    assert [stopped("token", "token" + c, 5) for c in "iIzV2s_.-:= \"'"] == [True] * 5 + [False] * 9


@SETTINGS
@given(st.lists(st.sampled_from(PIECES), max_size=14).map("".join))
def test_no_finding_where_every_occurrence_of_its_anchors_is_stopped(text: str) -> None:
    """A rule that a stopped anchor triggers matches only a text holding an occurrence of one of its
    anchors that is not stopped; so does a credential key name, of a stem."""
    for rule in _stopped_rules():
        pattern = re.compile(secret_rules.for_python(rule.pattern))
        if pattern.search(text):
            assert any(not stopped(anchor, text, end) for anchor, end in _occurrences(rule.anchors, rule.fold, text)), \
                (rule.kind, text)
    if re.search(secret_rules.for_python(secret_rules.KEY_NAME), text):
        assert any(not stopped(anchor, text, end)
                   for anchor, end in _occurrences(secret_rules.KEY_NAME_STEMS, True, text)), text


@pytest.mark.parametrize("text", ["tokenizer", "TOKENIZER", "tokenValue", "token2", "max_tokenizer_len",
                                  "\uff54\uff4f\uff4b\uff45\uff4eizer", "\U0001d69dokenizer", "tokeni"])
def test_an_occurrence_followed_by_a_stop_is_no_place(text: str) -> None:
    """In any form (full-width, mathematical letters), in NFKD, and by the Python engine alike."""
    assert not found_in_any_form("x " + text + " x")
    for engine in (default_engine(), PythonEngine()):
        assert engine.next_decomposed_anchor(engine.prepare("x " + text + " x"), 0) < 0


@pytest.mark.parametrize("text", [
    "token", "tokens", "token:", "TOKEN=", "hf_token", "token_file", "token\u200bizer",  # (the cleaning joins them)
    "tokeni\u0301zer", "token\u0303izer", "toke\u00f1izer", "tokeni\u200bzer", "tokenK\u212a", "tokenI\u0307",
    "\uff54\uff4f\uff4b\uff45\uff4e\uff49zer",  # a full-width stop: not ASCII as written
    "tokeni\x00\u0301", "tokenI\x00\u0307",  # NUL is removed: the mark after it composes with the stop
])
def test_an_occurrence_followed_by_anything_else_is_a_place(text: str) -> None:
    """A stop that a mark, an invisible character or any character that is not ASCII follows may
    compose or change: the occurrence is a place, as is one ended by anything but a stop, and one
    whose last letter comes with marks of its own."""
    assert found_in_any_form("x " + text + " x")
    decomposed = unicodedata.normalize("NFKD", "x " + text + " x")
    if not {"\u200b", "\uff54", "\u212a"} & set(text):  # (in NFKD, which those change, the others stay places)
        for engine in (default_engine(), PythonEngine()):
            assert engine.next_decomposed_anchor(engine.prepare(decomposed), 0) >= 0, ascii(text)


def test_a_stop_before_nul_and_a_mark_is_found_in_a_key() -> None:
    """An attacker review's find: "my_tokeni" + NUL + an acute is a credential key name once NUL is
    removed ("tokení": the acute composes with the stop), in a JSON text given as it stands."""
    text = '{"my_tokeni\x00\u0301": "x", "id_TOKENG\x00\u0307": "y"}'
    document = json.loads(text, strict=False)
    found = [(f.pointer, f.kind) for f in secret_scan.scan(document, source=text)]
    assert found == [("/*", "credential_key_name"), ("/*", "credential_key_name")]
    assert found == [(f.pointer, f.kind) for f in secret_scan.scan(document)]


def _labels_document(labels: list[str]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXAMPLE_MANIFEST.read_bytes())
    document["data"] = [{**document["data"][0], "name": f"shard-{r}", "decontamination": {
        **document["data"][0]["decontamination"], "eval_suites": labels}} for r in range(8)]
    return document


def settled_without_the_walk_and_refused_at_its_pointer(labels: list[str], shard: int, at: int,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest of `labels` is accepted without the walk of every string (the look at the JSON
    text settles it), and the same labels with a credential written in full-width letters (only NFKC
    spells the assignment) after label `at` of reference `shard` are refused at its pointer."""
    document = _labels_document(labels)
    walked: list[int] = []
    real = secret_scan._locate_distinct

    def walk(*args: Any, **kwargs: Any) -> Any:
        walked.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(secret_scan, "_locate_distinct", walk)
    manifest.parse_manifest(json.dumps(document, ensure_ascii=False).encode())  # accepted
    assert not walked

    wide = "".join(chr(ord(c) + 0xFEE0) for c in "token: 9f8e7d6c5b4a")
    document["data"][shard]["decontamination"]["eval_suites"] = [*labels[:at], labels[at] + " " + wide,
                                                                 *labels[at + 1:]]
    with pytest.raises(ManifestRefusal) as refused:
        manifest.parse_manifest(json.dumps(document, ensure_ascii=False).encode())
    assert refused.value.code == "MANIFEST_SECRET" and refused.value.details is not None
    assert [(f["pointer"], f["kind"]) for f in refused.value.details["findings"]] == [
        (f"/data/{shard}/decontamination/eval_suites/{at}", "credential_assignment")]


def test_labels_of_tokenizer_among_marks_are_settled_without_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's costliest input (every label "tokenizer" among letters with marks out of
    order): the look at the JSON text settles it, nothing is normalised whole, and the same labels
    with a credential written in full-width letters are refused at its pointer."""
    settled_without_the_walk_and_refused_at_its_pointer([_own_way_label(i, False) for i in range(80)], 3, 50,
                                                        monkeypatch)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.tuples(st.lists(st.sampled_from([*PIECES, "\uff54\uff4f\uff4b\uff45\uff4e", "\u0483\u05b0",
                                                    "\u00bd", "\ufb01", "\u0430"]), max_size=10).map("".join),
                          st.booleans()), min_size=1, max_size=6))
def test_the_scanner_finds_the_same_with_the_stops_as_without(entries: list[tuple[str, bool]]) -> None:
    """Documents of such pieces, as keys and as values, scanned with the stops and with none."""
    document = {"notes": [text for text, as_key in entries if not as_key],
                "names": {text or "k": 1 for text, as_key in entries if as_key}}
    source = json.dumps(document, ensure_ascii=False)
    with_stops = secret_scan.scan(document, source=source)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(secret_rules, "ANCHOR_STOPS", {})
        _searches_built_again()
        try:
            without = secret_scan.scan(document, source=source)
        finally:
            patched.undo()
            _searches_built_again()
    assert with_stops == without, source


def _searches_built_again() -> None:
    """The searches built from the table are built again at their next use."""
    for cached in (decomposed_anchors.any_form_search, decomposed_anchors._starters,
                   decomposed_anchors.unsure_characters, decomposed_anchors.any_form_value_search,
                   decomposed_anchors.decomposed_value_search):
        cached.cache_clear()
    default_engine().__dict__.pop("_decomposed_anchor", None)
