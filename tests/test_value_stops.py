"""Anchors that no finding continues, in a JSON value, with a letter or with blanks and a letter
(`secret_rules.VALUE_STOPS`): the look at a JSON text searches it for places with
`decomposed_anchors.any_form_value_search` (text in neither form) and `decomposed_value_search` (its
NFKD), which pass over such occurrences in values, so that labels saying "token budget" or
"パスワードを忘れた" a mebibyte long are not a mebibyte of places. Checked here: the table against every
rule, the letters against Unicode, both searches against what a reader sees, and the scanner's
answers with the look against the walk alone."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ito_training_mcp import decomposed_anchors, secret_rules, secret_scan, text_normal
from ito_training_mcp.secret_engine import default_engine

from .test_anchor_stops import (
    PIECES,
    _occurrences,
    _searches_built_again,
    settled_without_the_walk_and_refused_at_its_pointer,
)
from .test_decomposed_anchors import (
    ANCHORS,
    _anchor_re2,
    after_colon,
    anchor_in_any_form,
    holds_in_key,
    reach_dead,
    stopped,
)

SETTINGS = settings(max_examples=2000, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
VALUE_STOPPED = sorted(secret_rules.VALUE_STOPS)
# What may follow an anchor: letters (stops in a value), blanks, what a rule wants, what NFKC changes.
AFTER = ["", " ", "  ", "\t", "\u0430", "\u6a21", "\u3092", "\u00e9", "e\u0301", "a", "s", "S", "1", "\uff41",
         "\u3000", "\u00a0", ":", "=", "\uff1a", "\u200b", "\u0301", "\u3099", "\U00010400", "\u01c6", "\ufb01",
         "_", "-", "'", "x", "\u0483\u05b0"]
VALUE_PIECES = [*PIECES, "\u0430", "\u6a21\u578b", "\u3092", "\u30d1\u30b9\u30ef\u30fc\u30c9", "\u30c8\u30fc\u30af\u30f3",
                "\uff54\uff4f\uff4b\uff45\uff4e", "\u0483\u05b0", "\uff1a", "\u3000", "\u00a0", "\u4ee4\u724c"]


def value_stopped(shown: str, end: int) -> bool:
    """The oracle, on a reader's view: an occurrence ending at `end` followed by a letter or digit
    other than `s`, or by ASCII blanks and then a letter or digit."""
    after = shown[end:]
    if after[:1].isalnum() and after[:1] != "s":
        return True
    blanks = re.match("[ \t]+", after)
    return blanks is not None and after[blanks.end():blanks.end() + 1].isalnum()


def shown_holds_value_place(text: str) -> bool:
    """`shown_holds_anchor` for a string that is a JSON value: an occurrence of an anchor of
    VALUE_STOPS that a value stops is none, and neither is one its reach rules out (`reach_dead`, which
    holds for every key-name stem that anchors no rule)."""
    engine = default_engine()
    shown = text_normal.normalize(text)
    if shown is None or engine.invisible(engine.prepare(shown), 0, nul=False) is not None:
        return True
    return engine.next_anchor(engine.prepare(shown), 0) >= 0 and any(
        not stopped(anchor, shown, match.end()) and not reach_dead(anchor, shown, match.end())
        and after_colon(anchor, shown, match.start())
        and not (anchor in secret_rules.VALUE_STOPS and value_stopped(shown, match.end()))
        for anchor, fold in ANCHORS for match in _anchor_re2(anchor, fold).finditer(shown))


def _found(search: Any, json_text: str) -> bool:
    assert search is not None
    return bool(search(json_text.encode("utf-8", "surrogatepass"), 0) >= 0)


def test_the_table_names_anchors_and_the_letters_are_what_nfkc_keeps() -> None:
    """Each anchor of the table anchors some rule; each letter is a letter or digit, a starter, its own
    NFKC, none that may compose with the one before it, not invisible; and every character that
    decomposes canonically into one of them and marks is a letter or digit too (what NFKC gives where
    marks follow one)."""
    anchors = {anchor for rule in secret_rules.RULES for anchor in rule.anchors}
    assert "token" in VALUE_STOPPED and set(VALUE_STOPPED) <= anchors
    letters = {code for low, high in decomposed_anchors.value_letters() for code in range(low, high + 1)}
    composing = {code for low, high in decomposed_anchors.COMPOSING for code in range(low, high + 1)}
    invisible = {code for low, high in secret_rules.INVISIBLE_RANGES for code in range(low, high + 1)}
    assert {ord(c) for c in "az09\u0430\u6a21\u3092\u00e9"} <= letters and ord("\uff41") not in letters
    for code in letters:
        char = chr(code)
        assert char.isalnum() and not unicodedata.combining(char) and unicodedata.normalize("NFKC", char) == char
        assert code not in composing and code not in invisible
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000:
            continue
        decomposed = unicodedata.normalize("NFD", chr(code))
        if len(decomposed) > 1 and ord(decomposed[0]) in letters:
            assert chr(code).isalnum(), hex(code)


@SETTINGS
@given(st.lists(st.sampled_from(VALUE_PIECES), max_size=14).map("".join))
def test_no_finding_in_a_value_where_every_occurrence_of_its_anchors_is_stopped(text: str) -> None:
    """A rule that an anchor of the table triggers matches only a text holding an occurrence of one of
    its anchors that neither its stops nor a value's stop."""
    for rule in secret_rules.RULES:
        if not set(rule.anchors) & secret_rules.VALUE_STOPS:
            continue
        if re.search(secret_rules.for_python(rule.pattern), text):
            assert any(not stopped(anchor, text, end)
                       and not (anchor in secret_rules.VALUE_STOPS and value_stopped(text, end))
                       for anchor, end in _occurrences(rule.anchors, rule.fold, text)), (rule.kind, text)


@st.composite
def anchor_then(draw: st.DrawFn) -> str:
    return draw(anchor_in_any_form()) + "".join(draw(st.lists(st.sampled_from(AFTER), max_size=3)))


@SETTINGS
@given(anchor_then())
def test_no_place_of_a_value_or_a_key_is_missed(text: str) -> None:
    """Both searches find every value whose cleaning holds a place a value does not stop, and every key
    whose cleaning holds an anchor (the stops of a value do not hold in a key); the NFKD search where
    the text is in NFKD."""
    if '"' in text or "\\" in text or text_normal.long_combining_run(text):
        return
    spelt = unicodedata.normalize("NFKD", text)
    for search, form in ((decomposed_anchors.any_form_value_search(), text),
                         (decomposed_anchors.decomposed_value_search(), spelt)):
        if shown_holds_value_place(text):  # (JSON text as written: the look takes none with escapes)
            assert _found(search, '["x", "' + form + '"]'), ascii(form)
        if holds_in_key(text) and not text_normal.long_combining_run(spelt):
            assert _found(search, '{"x": 1, "' + form + '": 2}'), ascii(form)
            assert _found(search, '{\n "' + form + '"\n  : 2}'), ascii(form)


@pytest.mark.parametrize(("text", "place"), [
    ("token \u0430", False), ("token\u0430", False), ("token \u6a21\u578b", False), ("TOKEN  9", False),
    ("\u30d1\u30b9\u30ef\u30fc\u30c9\u3092", False), ("\u30d1\u30b9\u30ef\u30fc\u30c9\u3099\u3092", False),
    ("\uff54\uff4f\uff4b\uff45\uff4e \u0430", False), ("token\t\u00e9", False),
    ("tokens \u0430", True), ("token :\u0430", True), ("token\u3000", True), ("token \u3000", True),
    ("token\u200b\u0430", True),
    ("token \u200b\u0430", True), ("token \uff41", True), ("token\u3000\u0430", True), ("token \U00010400", True),
    ("\u30d1\u30b9\u30ef\u30fc\u30c9:", True), ("\u30d1\u30b9\u30ef\u30fc\u30c9\u3099\uff1a", True),
    ("\u30d1\u30b9\u30ef\u30fc\u30c9s", True), ("token\x00\u0430", True),
    # the reach (anchor_reach.py): an assignment cut short, a token prefix and a stop
    ("tokens", False), ("token :", False), ("token", False), ("token ", False), ("token: ab,", False),
    ("token: abcdefg", True), ("token: ab\u0301,", True), ("token: a\uff42,", True), ("ghp_ab,", False),
    ("GHP_ab c", False), ("ghp_ab\u0430", True), ("ghp_" + "a" * 11 + "!", False), ("ghp_" + "a" * 12 + "!", True),
    ("AKIAab", False), ("AKIA\uff41", True), ("xapp-1-AB<", False), ("xapp-1-AB<\u0338", True),
    ("secret: ab,", False), ("secret: abcdef,", True), ("passage: ab", False), ("monkey", False),
])
def test_an_occurrence_in_a_value_and_in_a_key(text: str, place: bool) -> None:
    """In a value, a letter or blanks and a letter stop the anchor; anything else (an invisible
    character, a full-width letter, a letter beyond the first plane, an ideographic space) leaves it a
    place, unless the anchor's reach rules it out (an ASCII stop, before anything that is not ASCII,
    within the characters its rules want past it). In a key each is a place, as a credential key name
    may end there; but for an anchor of no key name, which is a place there as in a value."""
    search = decomposed_anchors.any_form_value_search()
    marked = "\u0483\u05b0 " + text  # neither form: the look takes this search
    assert _found(search, '{"notes": ["' + marked + '", "x"]}') is place, ascii(text)  # (a tab unescaped)
    stem = text.lower().startswith(("token", "\uff54", "\u30d1", "secret", "pass", "monkey"))
    assert _found(search, '{"notes": {"' + marked + '": "x"}}') is (place or stem), ascii(text)
    assert _found(search, '{"notes": {"' + marked + '"\r\n\t :1}}') is (place or stem), ascii(text)


def test_a_stop_of_token_in_a_key_stays_no_place() -> None:
    """"tokenizer" as a key (where a manifest has one) is no place, as with the table of stops alone."""
    search = decomposed_anchors.any_form_value_search()
    assert not _found(search, json.dumps({"\u0483\u05b0 tokenizer": 1}, ensure_ascii=False))
    assert _found(search, json.dumps({"\u0483\u05b0 token\u0430": 1}, ensure_ascii=False))


@pytest.mark.parametrize("word", ["token ", "\u30d1\u30b9\u30ef\u30fc\u30c9"])
def test_labels_of_value_stopped_anchors_are_settled_without_the_walk(word: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Labels like the benchmark's ("token " and a letter every forty characters among letters with
    marks out of order; a Japanese credential word and kana): the look settles them, and the same
    labels with a credential in full-width letters are refused at its pointer."""
    settled_without_the_walk_and_refused_at_its_pointer([_label(word, i) for i in range(80)], 5, 20, monkeypatch)


def _label(word: str, seed: int) -> str:
    import random

    rng = random.Random(seed)
    label = ""
    while len(label) < 150:
        label += word if len(label) % 40 < 3 else chr(rng.randrange(0x430, 0x450)) + "\u0483\u05b0"
    return label + "\u3092" + str(seed % 10)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.tuples(st.lists(st.sampled_from(VALUE_PIECES), max_size=10).map("".join), st.booleans()),
                min_size=1, max_size=6))
def test_the_scanner_finds_the_same_with_the_look_as_with_the_walk(entries: list[tuple[str, bool]]) -> None:
    """Documents of such pieces, as keys and as values, with marks out of order among them (so that
    the look takes the search in any form): scanned with their JSON text, and by the walk alone; and
    with the table emptied."""
    document = {"notes": ["\u0483\u05b0", *(text for text, as_key in entries if not as_key)],
                "names": {text or "k": 1 for text, as_key in entries if as_key}}
    source = json.dumps(document, ensure_ascii=False)
    with_look = secret_scan.scan(document, source=source)
    assert with_look == secret_scan.scan(document), source
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(secret_rules, "VALUE_STOPS", frozenset())
        _searches_built_again()
        try:
            without = secret_scan.scan(document, source=source)
        finally:
            patched.undo()
            _searches_built_again()
    assert with_look == without, source


def test_many_stopped_occurrences_in_a_string_keep_the_search_in_its_dfa(capfd: pytest.CaptureFixture[str]) -> None:
    """An attacker review's labels: a dozen credential words in each, each followed by a letter, so
    that every one is a place only if its string is a key. With a check of the rest of the string for
    each anchor, RE2's DFA ran out of memory (it logs so) and searched 40 times slower; with one check
    for them all it does not (the log is the deterministic sign; no time is measured here)."""
    import random

    words = ["token", "TOKEN", *(word for word in secret_rules.UNSPACED_CREDENTIAL_WORDS if not "\uac00" <= word[0] <= "\ud7a3"),
             "\u1110\u1169\u110f\u1173\u11ab", "\u1107\u1175\u1106\u1175\u11af\u1107\u1165\u11ab\u1112\u1169"]  # (jamo)
    rng = random.Random(1)
    labels = ["\u0430\u0483\u05b0" + "".join(word + rng.choice(["a", " b", "\u3092", "\u0430"])
                                              for word in rng.sample(words, rng.randint(3, len(words))))
              for _ in range(4000)]
    text = json.dumps({"labels": [*labels, "\u0483\u05b0 tokens \u0430"]}, ensure_ascii=False).encode()
    capfd.readouterr()
    for search in (decomposed_anchors.any_form_value_search(), decomposed_anchors.decomposed_value_search()):
        assert search is not None
        assert text.index(b"tokens") < search(text, 0) < len(text) - 3  # (in that string)
    assert "DFA out of memory" not in capfd.readouterr().err


def test_the_looks_search_keeps_no_text_alive_once_it_finds_no_more() -> None:
    """The search the look takes keeps the place of characters of several starters for the next call
    on the same text, and forgets the text once neither search finds more (an attacker review: it
    held the last manifest until the next scan)."""
    search = decomposed_anchors.any_form_value_search()
    assert search is not None and search.__closure__ is not None
    text = json.dumps(["\ufb01nal \u00bd cup \u0483\u05b0", "x"], ensure_ascii=False).encode()

    def kept() -> list[Any]:
        return [cell.cell_contents for cell in search.__closure__ or () if isinstance(cell.cell_contents, tuple)
                and len(cell.cell_contents) == 4 and isinstance(cell.cell_contents[0], bytes | None)]
    placed = json.dumps(["\ufb01nal \u0483\u05b0 pw\u01c6"], ensure_ascii=False).encode()
    assert search(placed, 0) > 0 and [known[0] for known in kept()] == [placed]
    assert search(text, 0) == -1 and [known[0] for known in kept()] == [None]
