"""byte_facts: the one pass over a manifest's bytes. Each answer is checked against the long way it
stands for (unicodedata, the egress's own test of a character, the scanner's own searches), on every
code point where that is cheap, and on generated texts."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ito_training_mcp import byte_facts, decomposed_anchors, text_normal

pytestmark = pytest.mark.skipif(byte_facts.facts(b"a") is None, reason="RE2 is not installed")

SURROGATES = range(0xD800, 0xE000)
COMPOSING = {c for low, high in decomposed_anchors.COMPOSING for c in range(low, high + 1)}


def _facts(text: str) -> byte_facts.ByteFacts:
    found = byte_facts.facts(text.encode())
    assert found is not None
    return found


def test_the_tables_bounds_hold_in_this_pythons_unicode_database() -> None:
    """No character at or above _DECOMPOSING_BELOW has a decomposition, no Hangul syllable is changed
    by NFKC (and each by NFKD), and no non-starter lies past text_normal's bound."""
    assert not any(unicodedata.decomposition(chr(c)) for c in range(byte_facts._DECOMPOSING_BELOW, 0x110000))
    for c in byte_facts._HANGUL_SYLLABLES:
        assert unicodedata.normalize("NFKC", chr(c)) == chr(c) != unicodedata.normalize("NFKD", chr(c))
    assert not any(unicodedata.combining(chr(c)) for c in range(text_normal.last_plane_with_non_starters() + 1,
                                                                 0x110000))


def test_each_character_alone_is_unsure_exactly_where_the_form_changes_it() -> None:
    """One character alone: "could be other than in NFKD" exactly when NFKD changes it; "... NFKC"
    exactly when NFKC changes it or it may compose with the one before. The characters that are sure
    are checked together, each after a plain letter (no pair of them can be out of order then)."""
    nfkc_sure, nfkd_sure = [], []
    for c in range(0x110000):
        if c in SURROGATES:
            continue
        ch = chr(c)
        if unicodedata.normalize("NFKC", ch) != ch or c in COMPOSING:
            assert _facts(ch).nfkc_unsure, hex(c)
        else:
            nfkc_sure.append(ch)
        if unicodedata.normalize("NFKD", ch) != ch:
            assert _facts(ch).nfkd_unsure, hex(c)
        else:
            nfkd_sure.append(ch)
    assert not _facts("a" + "a".join(nfkc_sure)).nfkc_unsure
    assert not _facts("a" + "a".join(nfkd_sure)).nfkd_unsure


def test_every_pair_of_non_starters_out_of_canonical_order_is_unsure_and_in_order_is_not() -> None:
    by_class: dict[int, str] = {}
    for c in range(0x300, text_normal.last_plane_with_non_starters() + 1):
        combining = unicodedata.combining(chr(c))
        if combining and combining not in by_class and unicodedata.normalize("NFKD", chr(c)) == chr(c) \
                and c not in COMPOSING and unicodedata.normalize("NFKC", chr(c)) == chr(c):
            by_class[combining] = chr(c)
    assert len(by_class) > 40
    for high, first in by_class.items():
        for low, second in by_class.items():
            found = _facts("a" + first + second)
            assert found.nfkc_unsure == found.nfkd_unsure == (high > low), (high, low)
            assert unicodedata.is_normalized("NFKD", "a" + first + second) == (high <= low)


MARKS = ["\u0301", "\u0323", "\u0302", "\u031b", "\u0345", "\u093c", "\u094d", "\u05b0", "\u0591", "\u3099",
         "\u0f71", "\u0f72", "\u0f73", "\u1161", "\u11a8"]
LETTERS = ["a", "e", "o", "I", "ệ", "ế", "ｆ", "ﬁ", "한", "\u1100", "क", "ה", "か", "カ", "Å", "Ω", "\u2126", "①", " "]


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(LETTERS * 2 + MARKS), max_size=16).map("".join),
       st.sampled_from(["as written", "NFC", "NFD", "NFKC", "NFKD"]))
def test_sure_means_the_text_is_in_that_form(text: str, form: str) -> None:
    """Never sure of a text that is not in the form: that would let the scanner search a text as it
    stands when its normal form could spell an anchor."""
    if form != "as written":
        text = unicodedata.normalize(form, text)
    found = _facts(text)
    if not found.nfkc_unsure:
        assert unicodedata.is_normalized("NFKC", text)
    if not found.nfkd_unsure:
        assert unicodedata.is_normalized("NFKD", text)
    if form in ("NFKC", "NFKD") and not any(unicodedata.combining(ch) for ch in text):
        # and sure wherever the quick check is: a text in that form with no mark to reorder
        assert not (found.nfkd_unsure if form == "NFKD" else found.nfkc_unsure and not set(map(ord, text)) & COMPOSING)


def test_the_forbidden_question_is_the_character_rules_own_on_every_code_point() -> None:
    """Raw in a JSON text (C0 is only layout there): every forbidden character alone, and none of
    the others together."""
    from ito_training_mcp.gates.manifest import characters as manifest_characters

    forbidden = manifest_characters._forbidden_points()
    assert forbidden == {c for c in manifest_characters._code_points() if c >= 0x20}
    others = []
    for c in range(0x20, 0x110000):
        if c in SURROGATES:
            continue
        if c in forbidden:
            assert _facts(chr(c)).forbidden, hex(c)
        else:
            others.append(chr(c))
    assert not _facts("".join(others)).forbidden


def test_the_several_starters_question_on_every_code_point() -> None:
    """Every character whose NFKD holds two starters or more (but a Hangul syllable) alone, and none of
    the others together; and every character the search of several starters follows is one of them
    (so that a text the facts say holds none is searched without it)."""
    several = set(byte_facts.several_starters())
    others = []
    for c in range(0x80, 0x110000):
        if c in SURROGATES:
            continue
        starters = [part for part in unicodedata.normalize("NFKD", chr(c)) if not unicodedata.combining(part)]
        if len(starters) > 1 and not 0xAC00 <= c <= 0xD7A3:
            assert c in several and _facts(chr(c)).several, hex(c)
        else:
            others.append(chr(c))
    assert not _facts("".join(others)).several
    assert decomposed_anchors._several().codes <= several


def test_a_set_search_that_cannot_answer_every_question_gives_no_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """RE2's set search says "none" when its automaton does not fit in its memory: the self-check
    at compile time then leaves the facts out, and every question is asked the long way."""
    import re2  # type: ignore[import-untyped]

    real = re2.Set.Match
    monkeypatch.setattr(re2.Set, "Match", lambda self, text: None)  # a search that always fails
    byte_facts._set_search.cache_clear()
    try:
        assert byte_facts.facts("Tiếng".encode()) is None
    finally:
        monkeypatch.setattr(re2.Set, "Match", real)
        byte_facts._set_search.cache_clear()
    assert byte_facts.facts("Tiếng".encode()) is not None


def test_a_search_that_did_not_go_through_gives_no_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    """RE2's set search answers "none" when its automaton does not fit in memory: without the pattern
    of the text's end, which every text holds, there are no facts (the long way), never "nowhere"."""
    class Failing:
        def Match(self, data: bytes) -> list[int]:  # RE2's name
            return []

    assert byte_facts.facts(b"plain") is not None
    monkeypatch.setattr(byte_facts, "_set_search", lambda: Failing())
    assert byte_facts.facts(b"plain") is None


@pytest.mark.parametrize("mark", ["\u0301", "\u05b0", "\u0f73", "\U0001d167"])
def test_a_run_of_combining_marks_is_a_fact_past_thirty_as_the_scanners_search_says(mark: str) -> None:
    """The pass answers the scanner's question about runs of combining marks (a run longer than
    text_normal.COMBINING_RUN_MAX), as text_normal's own search does; runs broken by a starter, or
    spread over many words, are not runs."""
    limit = text_normal.COMBINING_RUN_MAX
    for count in (limit, limit + 1):
        for text in ("a" + mark * count, "模型 " + "x" * 1000 + "a" + mark * count + " 训练", "a" + mark * count + "\u200b"):
            data = text.encode()
            assert _facts(text).long_run is text_normal.long_combining_run(text, data), (count, text[:20])
    spread = ("a" + mark * limit + " ") * 200
    assert _facts(spread).long_run is False


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(["a", " ", "\u0301", "\u0308", "\u0f73", "\u0f71", "\u3099", "\u05b0", "模"]),
                max_size=120).map("".join))
def test_the_long_run_fact_is_the_scanners_answer(text: str) -> None:
    assert _facts(text).long_run is text_normal.long_combining_run(text, text.encode())
