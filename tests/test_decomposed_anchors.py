"""Text in NFKD is normalised only where it could hold an anchor: the search of decomposed anchors
(decomposed_anchors.py) never misses a place that NFKC turns into one, and the scanner gives the
same answers with it as without it."""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ito_training_mcp import (
    anchor_reach,
    anchor_tails,
    byte_facts,
    decomposed_anchors,
    raw_look,
    secret_rules,
    secret_scan,
    text_normal,
)
from ito_training_mcp import nfkc as nfkc_module
from ito_training_mcp.secret_engine import PythonEngine, default_engine

from .conftest import CANARY_GITHUB, CANARY_TOKEN

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ENGINES = [default_engine(), PythonEngine()]
ANCHORS = sorted({(a, r.fold) for r in secret_rules.RULES for a in r.anchors}
                 | {(stem, True) for stem in secret_rules.KEY_NAME_STEMS})
STEMS = frozenset(stem.lower() for stem in secret_rules.KEY_NAME_STEMS)
# Marks that compose with Latin letters, kana voicing marks, jamo, and marks that compose with nothing.
MARKS = ["\u0301", "\u0308", "\u0323", "\u0302", "\u0306", "\u0338", "\u3099", "\u309a", "\u0f72", "\u05b0"]
FILLER = [*"aeiousxkAEIOUSXK _-.:/@?;&0123\u00e9\u00fc\u1100\u1161\u11a8\u30cf\u30c8\u0430\u043f\u5bc6\u7801"
              "\u00c0\uff47\uff48\uff50\u2126\u212a\u017f\u0130\u1e9e", "\u200b", "\u2060", "\ufeff", "\u00ad"]


def shown_holds_anchor(text: str) -> bool:
    """What the scanner would look for: the text as a reader sees it holds an anchor that is not
    followed by one of its stops (`secret_rules.ANCHOR_STOPS`), or cannot be shown at all."""
    engine = default_engine()
    shown = text_normal.normalize(text)
    if shown is None or engine.invisible(engine.prepare(shown), 0, nul=False) is not None:
        return True
    return engine.next_anchor(engine.prepare(shown), 0) >= 0 and any(
        not stopped(anchor, shown, match.end()) for anchor, fold in ANCHORS for match in _anchor_re2(anchor, fold).finditer(shown))


@functools.cache
def _anchor_re2(anchor: str, fold: bool) -> Any:
    """One anchor as the engine searches it (RE2's case folding where it is searched without case)."""
    import re2

    return re2.compile(f"(?i:{re.escape(anchor)})" if fold else re.escape(anchor))


def stopped(anchor: str, shown: str, end: int) -> bool:
    """Is the occurrence of `anchor` in a reader's view of a text ending at `end` followed by one of
    its stops (the text as written, not searched without case)?"""
    stops = secret_rules.ANCHOR_STOPS.get(anchor)
    return stops is not None and end < len(shown) and re.fullmatch(f"[{stops}]", shown[end]) is not None


def reach_dead(anchor: str, shown: str, end: int) -> bool:
    """Is the occurrence of `anchor` in a reader's view of a string ending at `end` in no match of a
    rule it anchors, by the reach the searches follow (`anchor_tails.searched_reach`): an ASCII
    character other than the reach's own, or the string's end, within its `count` characters, with
    no other character before it? (A key-name stem that anchors no rule: always.)"""
    reach = anchor_tails.searched_reach(anchor)
    return True if reach is None else dead_by(reach, shown, end)


def dead_by(reach: anchor_reach.Reach, shown: str, end: int) -> bool:
    """`reach_dead` for a given reach."""
    for i in range(reach.length):
        if end + i >= len(shown):
            return True
        code = ord(shown[end + i])
        if code >= 0x80:
            return False
        if code not in (reach.chars & reach.first if i == 0 else reach.chars):
            return True
    return False


def after_colon(anchor: str, shown: str, start: int) -> bool:
    """Is an occurrence of an anchor of `secret_rules.AFTER_COLON` starting at `start` in a reader's
    view of a string where its rules want it: after `:/` (a URL), or for `@` also right after `:` and
    three characters or more none of which is a blank, `/`, `@`, `:` or a quote, and before what a
    host's reach does not rule out (always true for any other anchor)?"""
    before = shown[:start]
    return anchor not in secret_rules.AFTER_COLON or ":/" in before or (
        anchor == "@" and re.search(":[^ \t\r\n/@:\"'\x00]{3,}$", before) is not None
        and not dead_by(anchor_tails.host_reach(), shown, start + 1))


def holds_in_key(text: str) -> bool:
    """`shown_holds_anchor` for the look's search of `text` as a key: an occurrence is a place there
    when it is a key-name stem's, or when its reach does not rule it out (`reach_dead`); one of an
    anchor of `secret_rules.AFTER_COLON` only after a `:`."""
    engine = default_engine()
    shown = text_normal.normalize(text)
    if shown is None or engine.invisible(engine.prepare(shown), 0, nul=False) is not None:
        return True
    return engine.next_anchor(engine.prepare(shown), 0) >= 0 and any(
        not stopped(anchor, shown, match.end()) and after_colon(anchor, shown, match.start())
        and (anchor.lower() in STEMS or not reach_dead(anchor, shown, match.end()))
               for anchor, fold in ANCHORS for match in _anchor_re2(anchor, fold).finditer(shown))


def found(engine: Any, text: str) -> bool:
    return bool(engine.next_decomposed_anchor(engine.prepare(text), 0) >= 0)


@st.composite
def anchor_spelt(draw: st.DrawFn) -> str:
    """An anchor spelt some way NFKC maps back onto it: its case changed where it is searched without
    case, a letter written as a compatibility form, marks after it, text around it."""
    anchor, fold = draw(st.sampled_from(ANCHORS))
    letters = []
    for char in anchor:
        options = [char]
        if fold:
            options += [char.upper(), char.lower()]
        if "!" <= char <= "~":
            options.append(chr(ord(char) + 0xFEE0))  # its full-width form
        letters.append(draw(st.sampled_from(options)))
        if draw(st.integers(0, 5)) == 0:
            letters.append(draw(st.sampled_from(MARKS)))
    around = st.lists(st.sampled_from(FILLER + MARKS), max_size=6).map("".join)
    return draw(around) + "".join(letters) + draw(around)


texts = st.one_of(anchor_spelt(), st.lists(st.sampled_from(FILLER + MARKS), max_size=24).map("".join))



def _variants_by_starter() -> dict[str, list[str]]:
    """Every character whose NFKD holds exactly one starter, by that starter: worked out here from
    unicodedata alone, code point by code point, apart from the table the pattern is built from."""
    variants: dict[str, list[str]] = {}
    for code in range(0x30000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        starters = [c for c in unicodedata.normalize("NFKD", chr(code)) if not unicodedata.combining(c)]
        if len(starters) == 1:
            variants.setdefault(starters[0], []).append(chr(code))
    return variants


VARIANTS = _variants_by_starter()
# Characters the search cannot follow (two starters or more: ligatures, fractions, Hangul syllables,
# letters of two), one whose NFKD is invisible (a Hangul filler), and precomposed letters.
ANY_FORM_FILLER = [*FILLER, "\ufb01", "\ufb02", "\u00bd", "\u01c5", "\uac00", "\ud55c", "\uffa0", "\u2122",
                   "\u1ec7", "\u1ebf", "\u00f1", "\u00c5", "\u212b", "\u1e9b",
                   # several starters, and no place of their own (tenth round): Arabic ligatures, a
                   # parenthesised digit, a triple prime, an Indic two-part vowel sign, a fraction
                   "\ufdfa", "\ufdfb", "\u2474", "\u2034", "\u0bca", "\u215a", "\u3300", "\u337f"]


@st.composite
def anchor_in_any_form(draw: st.DrawFn) -> str:
    """An anchor written in any form NFKC maps back onto it: each letter's case changed where it is
    searched without case, then each starter of its NFKD written as any character whose NFKD has that
    one starter (full-width, mathematical, circled, precomposed with marks of its own ...), marks and
    invisible characters after it, the whole composed or decomposed, text around it."""
    anchor, fold = draw(st.sampled_from(ANCHORS))
    letters = []
    for char in anchor:
        if fold:
            char = draw(st.sampled_from([char, char.upper(), char.lower()]))
        for part in unicodedata.normalize("NFKD", char):
            if unicodedata.combining(part):
                letters.append(part)
            else:
                letters.append(draw(st.sampled_from([part, part, *VARIANTS.get(part, [])])))
        if draw(st.integers(0, 5)) == 0:
            letters.append(draw(st.sampled_from(MARKS)))
        if draw(st.integers(0, 7)) == 0:  # an invisible character, which the cleaning removes
            letters.append(draw(st.sampled_from(["\u200b", "\u2060", "\ufeff", "\u00ad", "\u034f"])))
    around = st.lists(st.sampled_from(ANY_FORM_FILLER + MARKS), max_size=6).map("".join)
    form = draw(st.sampled_from(["NFC", "NFD", "as written"]))
    spelt = "".join(letters)
    return draw(around) + (spelt if form == "as written" else unicodedata.normalize(form, spelt)) + draw(around)


any_form_texts = st.one_of(anchor_in_any_form(), st.lists(st.sampled_from(ANY_FORM_FILLER + MARKS),
                                                          max_size=24).map("".join))


def found_in_any_form(text: str) -> bool:
    search = decomposed_anchors.any_form_search()
    assert search is not None
    return search(text.encode("utf-8", "surrogatepass"), 0) >= 0


def found_in_a_key(text: str) -> bool:
    """The look's search in any form (`any_form_value_search`, with the search of characters of several
    starters), of `text` as a key of a JSON text: where no stop of a value holds."""
    search = decomposed_anchors.any_form_value_search()
    assert search is not None and '"' not in text and "\\" not in text
    return search(('{"' + text + '": 1}').encode("utf-8", "surrogatepass"), 0) >= 0


def crowded(text: str) -> bool:
    """The look's other test: a string with more invisible characters than the kinds one may hold."""
    search = decomposed_anchors.crowded_string_search()
    assert search is not None
    return search(text.encode("utf-8", "surrogatepass"), 0) >= 0


@settings(SETTINGS, max_examples=3000)
@given(any_form_texts)
def test_no_place_that_normalises_into_an_anchor_is_missed_in_any_form(text: str) -> None:
    """The search of text as it stands (decomposed_anchors.any_form_pattern) finds every text whose
    cleaning holds an anchor, or cannot be made, whatever its form: but a text whose cleaning fails
    for too many kinds of invisible character, which the look's other search finds."""
    if shown_holds_anchor(text) and not text_normal.long_combining_run(text):
        assert found_in_any_form(text) or crowded(text), ascii(text)
    if holds_in_key(text) and not text_normal.long_combining_run(text):
        assert found_in_a_key(text) or crowded(text), ascii(text)


def _several_starters_no_place() -> list[str]:
    """The characters of several starters that are no place of their own (`unsure_characters`)."""
    unsure = decomposed_anchors.unsure_characters()
    return [chr(code) for code in byte_facts.nfkd_changed() if code not in unsure
            and len([c for c in unicodedata.normalize("NFKD", chr(code)) if not unicodedata.combining(c)]) > 1]


def test_a_character_of_several_starters_is_a_place_of_its_own_only_where_the_search_cannot_follow_it() -> None:
    """Checked apart from the module's own table: a character of several starters is a place of its own
    (`unsure_characters`) only when it is a Hangul syllable or its NFKD holds an invisible character;
    every other one begins with a starter, and one whose NFKC holds an anchor is found alone."""
    none_of_them = _several_starters_no_place()
    assert {"\ufdfa", "\u3300", "\ufb01", "\u00bd"} <= set(none_of_them) and len(none_of_them) > 1000
    invisible = {c for low, high in secret_rules.INVISIBLE_RANGES for c in range(low, high + 1)}
    for code in decomposed_anchors.unsure_characters():
        assert 0xAC00 <= code <= 0xD7A3 or set(map(ord, unicodedata.normalize("NFKD", chr(code)))) & invisible
    for char in none_of_them:
        assert not unicodedata.combining(unicodedata.normalize("NFKD", char)[0]), ascii(char)
        if shown_holds_anchor(char):
            assert found_in_any_form(char), ascii(char)
        if holds_in_key(char):
            assert found_in_a_key(char), ascii(char)


def _starters_of(text: str) -> list[str]:
    return [c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)]


def test_a_character_of_several_starters_that_gives_part_of_an_anchor_is_followed() -> None:
    """Every anchor (as written, in capitals) with a run of its letters given by one character of
    several starters whose own (under case) are that run, inside it, at its beginning or its end, or
    that begins before it or ends after it: where a reader sees the anchor, the search finds it
    (worked out here from unicodedata, apart from the module's table)."""
    several = [(char, _starters_of(char)) for char in _several_starters_no_place()]
    by_first: dict[str, list[tuple[str, list[str]]]] = {}
    for char, own in several:
        by_first.setdefault(own[0].lower(), []).append((char, own))
    checked = 0
    for anchor, _ in ANCHORS:
        if any(len(_starters_of(letter)) != 1 for letter in anchor):
            continue
        for spelt in {anchor, anchor.upper()}:
            letters = [c.lower() for c in _starters_of(spelt)]
            count = len(letters)
            for char, own in several:
                lowered = [c.lower() for c in own]
                k = len(lowered)
                texts = [spelt[:i] + char + spelt[i + k:] for i in range(count - k + 1) if lowered == letters[i:i + k]]
                texts += [char + spelt[j:] for j in range(1, min(k, count)) if lowered[k - j:] == letters[:j]]
                texts += [spelt[:count - j] + char for j in range(1, min(k, count)) if lowered[:j] == letters[count - j:]]
                for text in texts:
                    checked += 1
                    if shown_holds_anchor(text):
                        assert found_in_any_form("x " + text + " x"), (anchor, ascii(text))
                    if holds_in_key("x " + text + "\u0430"):
                        assert found_in_a_key("x " + text + "\u0430"), (anchor, ascii(text))
    assert checked > 1000


def test_a_character_that_is_no_place_makes_no_anchor_beside_or_inside_one() -> None:
    """Each such character before, after and inside every other anchor (as written, and in capitals),
    in a reader's view of the text, never completes an anchor the search in any form misses."""
    none_of_them = _several_starters_no_place()
    for anchor, _ in ANCHORS[::3]:
        for spelt in {anchor, anchor.upper()}:
            for char in none_of_them:
                for text in (char + spelt[1:], spelt[:-1] + char, spelt[:1] + char + spelt[1:]):
                    if shown_holds_anchor(text):
                        assert found_in_any_form(text), ascii(text)
                        if holds_in_key(text):  # (it holds an anchor then)
                            assert found_in_a_key(text), ascii(text)


def test_the_search_in_any_form_is_not_vacuous() -> None:
    """Each anchor, written with a full-width or mathematical letter where it has one, is found;
    plain words, precomposed letters and lone full-width letters are not."""
    for anchor, _fold in ANCHORS:
        for index, char in enumerate(anchor):
            others = [v for v in VARIANTS.get(char, []) if v != char]
            if others:
                spelt = anchor[:index] + others[-1] + anchor[index + 1:]
                assert found_in_any_form("x" + spelt + "="), ascii(spelt)
    for text in ("Tiếng Việt đánh giá", "ｅｖａｌ ｓｕｉｔｅ", "mmlu", "ｘ", "résumé", "pas\u0301sword"):
        assert not found_in_any_form(text), text
    for text in ("\uac00", "\uffa0"):  # what it cannot follow (the last decomposes into an invisible one)
        assert found_in_any_form(text), ascii(text)
    # Characters of several starters: places only where their starters give part of an anchor (since the
    # sixteenth round; before, every one that could was a place of its own).
    # (the look's search follows them; the walk's takes each that could as a place of its own)
    for text in ("\ufb01", "\u00bd", "\u01c6", "\ufdfa", "\u3300", "\ufb01nal \u00bd cup"):
        assert not found_in_a_key(text) and (found_in_any_form(text) or text == "\ufdfa"), ascii(text)
    for text in ("pw\u01c6", "\u3300\u30fc\u30af\u30f3", "\u01c5", "\u01f3r", "x\ufb01 pass\ufb01word"):
        assert found_in_a_key(text) or not holds_in_key(text), ascii(text)
    assert found_in_a_key("pw\u01c6") and found_in_a_key("\u3300\u30fc\u30af\u30f3")
    # Invisible characters are removed by the cleaning: alone they are nothing to find; between the
    # characters of an anchor, or between two runs of marks that make one too long, they are passed over.
    assert not found_in_any_form("\u200b\u2060\ufeff\u00ad" * 40)
    for text in ("pass\u200bword", "\uff47\u2060\uff48\u00adp_", "schlu\u200b\u0308ssel",
                 "a" + "\u0301" * 20 + "\u200b" + "\u0301" * 20):
        assert shown_holds_anchor(text) and found_in_any_form("x" + text + "x"), ascii(text)
    # Marks after a letter whose NFKD has them, written apart; half-width kana with their voicing marks
    # (U+FF9F and U+FF9E decompose into marks alone); jamo; letters of other scripts, full-width.
    for text in ("schlu\u0308ssel", "\uff33\uff23\uff28\uff2c\uff35\u0308\uff33\uff33\uff25\uff2c",
                 "\uff8a\uff9f\uff7d\uff9c\uff70\uff84\uff9e", "\u1110\u1169\u110f\u1173\u11ab",
                 "\u314c\u1169\u110f\u1173\u11ab", "\u0422\u041e\u041a\u0415\u041d"):
        assert shown_holds_anchor(text) and found_in_any_form("x" + text + "x"), ascii(text)


@SETTINGS
@given(texts)
def test_no_place_that_normalises_into_an_anchor_is_missed(text: str) -> None:
    decomposed = unicodedata.normalize("NFKD", text)
    if shown_holds_anchor(decomposed):
        for engine in ENGINES:
            assert found(engine, decomposed), (engine.name, decomposed)
    assert found(ENGINES[0], decomposed) == found(ENGINES[1], decomposed)


def test_every_anchor_is_found_in_each_of_its_decomposed_spellings() -> None:
    for anchor, fold in ANCHORS:
        spellings = {anchor, *(f"{anchor.upper()}", f"{anchor.lower()}" if fold else anchor)}
        spellings |= {"".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s) for s in spellings}
        for spelling in spellings:
            decomposed = unicodedata.normalize("NFKD", spelling)
            if shown_holds_anchor(decomposed):
                assert found(ENGINES[0], "x" + decomposed + "="), (anchor, decomposed)
    for spelt in ("schlu\u0308ssel", "SCHLU\u0308SSEL", "\u30cf\u309a\u30b9\u30ef\u30fc\u30c8\u3099",
                  "\u1110\u1169\u110f\u1173\u11ab", "pass\u200bword", "gh\u200bp_x"):
        assert found(ENGINES[0], spelt) and shown_holds_anchor(spelt), spelt


def test_marks_that_make_other_letters_keep_the_text_out() -> None:
    """A mark after a letter of an anchor that has none composes into another letter (or stays): the
    text is left out, and NFKC agrees that it holds no anchor."""
    for text in ("pas\u0301sword", "to\u0308ken", "Tie\u0302\u0301ng Vie\u0323\u0302t", "ghp\u0338_"):
        assert not found(ENGINES[0], text) and not shown_holds_anchor(text), text


@SETTINGS
@given(st.lists(texts, min_size=1, max_size=12))
def test_texts_left_out_could_hold_nothing_and_the_others_are_each_normalised(parts: list[str]) -> None:
    decomposed = [unicodedata.normalize("NFKD", part).replace("\x00", "") for part in parts]
    joined = "\x00".join(decomposed)
    result = text_normal.nfkc_joined(decomposed, joined).split("\x00")
    assert len(result) == len(decomposed)
    for text, out in zip(decomposed, result, strict=True):
        normal = unicodedata.normalize("NFKC", text)
        assert out in (normal, "") and (out == normal or not shown_holds_anchor(text)), (text, out)


def _scan_both_ways(document: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any]]:
    source = json.dumps(document, ensure_ascii=False)
    with_search = secret_scan.scan(document, source=source)
    # the same given the bytes the text was read as, beside it or instead of it, and with the one
    # pass's answers (byte_facts) where RE2 gives them
    encoded = source.encode()
    assert secret_scan.scan(document, source=source, encoded=encoded) == with_search
    assert secret_scan.scan(document, source=encoded) == with_search
    assert secret_scan.scan(document, source=source, encoded=encoded, facts=byte_facts.facts(encoded)) == with_search
    # and with the first search of a text in neither form taken ahead, as gate 2's worker does
    assert secret_scan.scan(document, source=source, encoded=encoded, facts=byte_facts.facts(encoded),
                            first_places=lambda: (None, secret_scan.first_any_form_place(encoded))) == with_search
    with monkeypatch.context() as patched:  # the long way: no look at the JSON text, every text normalised
        patched.setattr(secret_scan, "_raw_text_is_clean", lambda *args, **kwargs: False)
        patched.setattr(text_normal, "_could_hold_an_anchor", lambda odd, together, data: (odd, together))
        without = secret_scan.scan(document, source=source)
    return with_search, without


@SETTINGS
@given(st.lists(st.tuples(texts, st.sampled_from(["", CANARY_GITHUB, CANARY_TOKEN, "password"])), max_size=8),
       st.booleans(), st.sampled_from(["NFKD", "NFC", "as written"]))
def test_the_scanner_finds_the_same_with_the_searches_as_without(
        entries: list[tuple[str, str]], as_keys: bool, form: str) -> None:
    """Decomposed documents (searched for decomposed anchors), and documents in neither normal form
    (searched in their NFKD when that keeps the quotes where they were), against the long way."""
    def written(text: str) -> str:
        return text if form == "as written" else unicodedata.normalize(form, text)

    strings = [written(text + extra) for text, extra in entries]
    document: Any = {s: 1 for s in strings} if as_keys else {"labels": strings, "name": written("Tie\u0302\u0301ng")}
    with pytest.MonkeyPatch.context() as monkeypatch:
        with_search, without = _scan_both_ways(document, monkeypatch)
    assert with_search == without


@SETTINGS
@given(st.lists(st.tuples(texts, st.sampled_from(["", CANARY_GITHUB, CANARY_TOKEN, "password"])), min_size=1,
                max_size=8), st.booleans(), st.integers(0, 600))
def test_a_text_mostly_ascii_in_neither_form_finds_the_same_as_the_walk(
        entries: list[tuple[str, str]], as_keys: bool, ascii_labels: int) -> None:
    """Generated texts among many ASCII labels (the document mostly ASCII): the look stops at each
    anchor and each place that could make a string other than in NFKC, and normalises only those
    strings; against the long way, and with and without the one pass's facts."""
    strings = [text + extra for text, extra in entries]
    filler = [f"eval-suite-{i}-plain-ascii" for i in range(ascii_labels)]
    document: Any = {**{s: 1 for s in strings}, "labels": filler} if as_keys else {"labels": filler + strings}
    with pytest.MonkeyPatch.context() as monkeypatch:
        with_search, without = _scan_both_ways(document, monkeypatch)
    assert with_search == without


@pytest.mark.parametrize("spelt", ["ｐａｓｓｗｏｒｄ", "ｔｏｋｅｎ", "ｇｈｐ_", "pa\u00adssword"])
def test_an_anchor_that_only_nfkc_spells_in_an_ascii_manifest_is_found(spelt: str) -> None:
    """One such string among thousands of ASCII labels: the look finds it (the text is mostly ASCII
    and in neither form), and so does the gate."""
    labels = [f"eval-suite-{i}" for i in range(3000)]
    labels[1234] = f"{spelt}=Tr0ub4dor-and-3-more-words" if spelt != "ｇｈｐ_" else "ｇｈｐ_" + CANARY_GITHUB[4:]
    document = {"labels": labels, "note": "a no-break\u00a0space"}
    source = json.dumps(document, ensure_ascii=False)
    findings = secret_scan.scan(document, source=source, encoded=source.encode(),
                                facts=byte_facts.facts(source.encode()))
    assert [f.pointer for f in findings] == ["/labels/1234"]
    with pytest.MonkeyPatch.context() as monkeypatch:
        with_search, without = _scan_both_ways(document, monkeypatch)
    assert with_search == without


def test_a_text_holding_characters_that_nfkc_makes_quotes_of_is_searched_as_it_stands() -> None:
    """U+FF02 (full-width quotation mark) and U+FE68 / U+FF3C (backslashes) become `"` and `\\` in NFKC:
    the look at a text in neither form searches the text as it stands, whose quotes are the JSON
    text's, so they split nothing; a credential between two of them is found, and a text that only
    holds them is clean."""
    document = {"labels": [f"\uff02{CANARY_GITHUB}\uff02 ｇｈｐ \uff3c\ufe68", "é"]}
    source = json.dumps(document, ensure_ascii=False)
    engine = default_engine()
    quiet = {"labels": ["\uff02 ｇｈｐ \uff3c\ufe68", "é"]}
    assert secret_scan._raw_text_is_clean(engine, json.dumps(quiet, ensure_ascii=False), secret_scan._Memo(),
                                          secret_scan._Budget(None))
    assert not secret_scan._raw_text_is_clean(engine, source, secret_scan._Memo(), secret_scan._Budget(None))
    findings = secret_scan.scan(document, source=source)
    assert [(f.pointer, f.kind) for f in findings] == [("/labels/0", "github_token")]
    # Where the search in any form meets a character it cannot follow, the text's NFKD is searched instead, unless it
    # holds one of these (its NFKD would not keep its strings): the walk then decides.
    computed = {chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c <= 0xDFFF
                and ('"' in unicodedata.normalize("NFKD", chr(c)) or "\\" in unicodedata.normalize("NFKD", chr(c)))}
    assert computed == set(secret_scan.QUOTE_OR_ESCAPE_MAKERS)
    with_filler = {"labels": ["\uff02 \uffa0nal", "é"]}  # (a half-width Hangul filler: its NFKD is invisible)
    assert not secret_scan._raw_text_is_clean(engine, json.dumps(with_filler, ensure_ascii=False),
                                              secret_scan._Memo(), secret_scan._Budget(None))


@pytest.mark.parametrize("bounded", [False, True])
def test_a_text_with_a_ligature_in_every_string_is_settled_as_it_stands(bounded: bool,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A character whose NFKD holds two starters (a ligature) is followed by the search in any form
    (since the sixteenth round; before, the look searched the text's NFKD, and an attacker review had
    found 150,000 strings of one ligature going to the walk): the look settles the text without
    decomposing it, and the scan finds what the walk finds."""
    engine = default_engine()
    monkeypatch.setattr(raw_look, "whole_nfkd", None)  # (not called)
    quiet: dict[str, Any] = {"notes": ["\ufb01"] * 3000 + ["\ufb02ow \u00bd"] * 100}
    text = json.dumps(quiet, ensure_ascii=False)
    budget = secret_scan._Budget(secret_scan.BOUNDED_FLOOR if bounded else None)
    assert secret_scan._raw_text_is_clean(engine, text, secret_scan._Memo(), budget, runs_checked=True,
                                          data=text.encode())
    for extra in ("\ufb01 " + CANARY_GITHUB, "\uff50\uff41\uff53\uff53word=hunter2hunter2", "\ufb01 ｇｈｐ_" + CANARY_GITHUB[4:]):
        document = {"notes": [*quiet["notes"], extra]}
        with pytest.MonkeyPatch.context() as monkeypatch:
            with_search, without = _scan_both_ways(document, monkeypatch)
        assert with_search == without != []


def test_a_credential_in_a_decomposed_manifest_is_found_and_the_rest_is_not_normalised(
        monkeypatch: pytest.MonkeyPatch) -> None:
    labels = [unicodedata.normalize("NFKD", f"Tiếng Việt đánh giá {i}") for i in range(300)]
    labels[123] += " " + CANARY_GITHUB
    document = {"labels": labels}
    normalised: list[int] = []
    real = unicodedata.normalize

    def counting(form: str, text: str) -> str:
        if form == "NFKC":
            normalised.append(len(text))
        return real(form, text)

    monkeypatch.setattr(unicodedata, "normalize", counting)
    findings = secret_scan.scan(document, source=json.dumps(document, ensure_ascii=False))
    assert [(f.pointer, f.kind) for f in findings] == [("/labels/123", "github_token")]
    assert sum(normalised) < 2 * len(labels[123]) + 64  # that label alone, not the 300
    assert decomposed_anchors.pattern(re2=True).count("|") == decomposed_anchors.pattern(re2=False).count("|")


@pytest.mark.parametrize("key", ["contraseña", "パスワード", "비밀번호", "Passwörter"])
@pytest.mark.parametrize("form", ["NFKD", "NFC"])
def test_a_credential_name_that_only_composing_spells_is_found_in_a_manifest_in_another_script(
        key: str, form: str) -> None:
    """Through the gate, where the one pass (byte_facts) answers the scanner's questions: a key that
    spells a credential's name only once composed (decomposed, its letters hold no anchor as
    written) is found among labels in another script."""
    from ito_training_mcp.errors import ManifestRefusal
    from ito_training_mcp.gates.manifest import schema as manifest

    from .conftest import EXAMPLE_MANIFEST

    document = json.loads(EXAMPLE_MANIFEST.read_bytes())
    labels = [unicodedata.normalize(form, f"한국어 평가 데이터 Tiếng Việt {i}") for i in range(60)]
    for ref in document["data"]:
        ref["decontamination"]["eval_suites"] = labels
    document["data"][0][unicodedata.normalize(form, key)] = "Tr0ub4dor-and-3-more-words"
    content = json.dumps(document, ensure_ascii=False).encode()
    assert manifest.look_at_bytes(content, characters=len(content.decode())).facts is not None or \
        byte_facts.facts(content) is None  # the gate took the one pass (where RE2 is installed)
    with pytest.raises(ManifestRefusal) as refused:
        manifest.parse_manifest(content)
    assert refused.value.code == "MANIFEST_SECRET"
    assert any(f["pointer"].startswith("/data/0/") for f in refused.value.details["findings"])


def test_thousands_of_texts_that_all_need_cleaning_cost_a_bounded_number_of_searches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Strings full of invisible characters are all found by the search: past _MAX_KEPT of them it
    stops and every text is normalised at once, as before (not one search per string)."""
    engine = default_engine()
    calls: list[int] = []
    real = engine.next_decomposed_anchor

    def counting(data: Any, pos: int) -> int:
        calls.append(pos)
        return real(data, pos)

    monkeypatch.setattr(engine, "next_decomposed_anchor", counting)
    texts = ["e\u0301" + "\u200b" * 8 + f"x{i}" for i in range(5000)]  # in NFKD, and composing
    result = text_normal.nfkc_joined(texts, "\x00".join(texts))
    assert result == unicodedata.normalize("NFKC", "\x00".join(texts)) and len(calls) == text_normal._MAX_KEPT + 1


def test_letters_whose_case_partners_decompose_with_marks_are_listed_for_both_engines() -> None:
    """Every letter of an anchor searched without case that either engine takes for a character
    decomposing with marks (Python's `re` takes "i" for U+0130) lets marks follow it."""
    import re

    import re2

    with_marks = [chr(c) for c in range(0x80, 0x30000) if not 0xD800 <= c <= 0xDFFF
                  and any(unicodedata.combining(m) for m in unicodedata.normalize("NFKD", chr(c)))]
    letters = {c for anchor, fold in ANCHORS if fold for c in anchor
               if not any(unicodedata.combining(m) for m in unicodedata.normalize("NFKD", c))}
    options = re2.Options()
    options.never_capture = True
    missing = []
    for letter in sorted(letters):
        python = re.compile(f"(?i:{re.escape(letter)})")
        other = re2.compile(f"(?i:{re.escape(letter)})", options)
        partners = [y for y in with_marks if python.fullmatch(y) or other.fullmatch(y.encode())]
        if partners and letter.lower() not in decomposed_anchors.CASE_PARTNERS_WITH_MARKS:
            missing.append((letter, partners))
    assert missing == []


@pytest.mark.parametrize("text", ["cookI\u0307e: sid=abcdefghij", "credentI\u0307al: abcdefgh",
                                  "basI\u0307c YWxhZGRpbjpvcGVuc2VzYW1l"])
def test_a_dotted_capital_i_inside_an_anchor_is_found_by_both_engines(
        text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An attacker review: Python's `re` matches "i" to U+0130, whose NFKD is I + U+0307; the search
    let no mark follow an "i", so the Python engine left such strings out."""
    from ito_training_mcp import scan_strings
    from ito_training_mcp.secret_engine import python_engine

    for engine in ENGINES:
        assert found(engine, text), engine.name
    for module in (secret_scan, text_normal, scan_strings):
        monkeypatch.setattr(module, "default_engine", python_engine)
    for document in ({"notes": text}, {text: 1}, {"labels": [text, "Tie\u0302\u0301ng"]}):
        with_search, without = _scan_both_ways(document, monkeypatch)
        assert with_search == without and without, document


def test_the_characters_that_may_compose_are_those_of_unicodedata() -> None:
    """COMPOSING is the second character of every canonical pair that composes, and the Hangul vowel
    and final jamo: NFKC's quick check can say "maybe" for no other."""
    computed: set[int] = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for code in range(0x80, 0x110000):
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition and not decomposition.startswith("<"):
            pair = [chr(int(part, 16)) for part in decomposition.split()]
            if len(pair) == 2 and unicodedata.normalize("NFC", pair[0] + pair[1]) == chr(code):
                computed.add(ord(pair[1]))
    listed = {c for a, b in decomposed_anchors.COMPOSING for c in range(a, b + 1)}
    assert listed == computed


@SETTINGS
@given(texts)
def test_a_decomposed_text_with_nothing_that_composes_is_in_nfkc_too(text: str) -> None:
    decomposed = unicodedata.normalize("NFKD", text)
    for engine in ENGINES:
        if not decomposed_anchors.may_compose(engine.prepare(decomposed)):
            assert unicodedata.normalize("NFKC", decomposed) == decomposed
    assert decomposed_anchors.may_compose(ENGINES[0].prepare(decomposed)) == \
        decomposed_anchors.may_compose(decomposed)


def test_the_look_in_nfkd_is_taken_only_where_it_pays() -> None:
    """Text mostly ASCII with full-width letters is not decomposed: the look stops only at a string
    whose NFKC could hold an anchor ("ｔｏｋｅｎｉｚｅｒ", not "ｘ") and normalises it alone (with RE2;
    Python's engine leaves it to the walk, which normalises only the strings that are not ASCII). One
    where the look would normalise too many found strings is left to the walk; the answers are the
    long way's either way."""
    engine = default_engine()
    mostly_ascii = {"labels": ["mmlu"] * 200 + ["ｘ", "ｔｏｋｅｎｉｚｅｒ"]}
    spelt: list[int] = []
    real = nfkc_module.nfkc
    with pytest.MonkeyPatch.context() as monkeypatch:
        for module in (text_normal, raw_look):  # the scanner's NFKC, wherever it is asked for
            monkeypatch.setattr(module, "nfkc", lambda text, *rest: spelt.append(len(text)) or real(text, *rest))
        settled = secret_scan._raw_text_is_clean(engine, json.dumps(mostly_ascii, ensure_ascii=False),
                                                 secret_scan._Memo(), secret_scan._Budget(None))
    assert settled == (engine.name == "re2") and spelt == ([9] if settled else [])
    many = {"labels": ["ｔｏｋｅｎ " + "токен" * 800 + str(i) for i in range(20)]}  # a hit in each, 80,000 chars
    assert not secret_scan._raw_text_is_clean(engine, json.dumps(many, ensure_ascii=False),
                                              secret_scan._Memo(), secret_scan._Budget(None))
    few = {"labels": many["labels"][:2]}
    assert secret_scan._raw_text_is_clean(engine, json.dumps(few, ensure_ascii=False),
                                          secret_scan._Memo(), secret_scan._Budget(None))
    with pytest.MonkeyPatch.context() as monkeypatch:
        for document in (mostly_ascii, many):
            with_search, without = _scan_both_ways(document, monkeypatch)
            assert with_search == without


@pytest.mark.parametrize("label", ["ｐａｓｓｗｏｒｄではない，評価", "ｔｏｋｅｎｉｚｅｒ", "токен ｘ"])
def test_the_look_normalises_nothing_when_more_strings_hold_places_than_it_may_check(label: str) -> None:
    """Past the look's limit of strings holding a place (a credential name in every label), the look
    ends "let the walk decide" whatever those strings hold: it finds that out by the places alone
    and normalises none of them. One string fewer than that, it normalises each, as before. The
    scan's answer is the long way's either way, and a credential in the last label is found."""
    engine = default_engine()
    limit = raw_look._MAX_ANY_FORM_SEGMENTS
    real = nfkc_module.nfkc
    for count, looked in ((limit + 1, False), (limit, True)):
        document = {"labels": [f"{label} {i}" for i in range(count)], "plain": ["mmlu"] * 50}
        spelt: list[int] = []
        with pytest.MonkeyPatch.context() as monkeypatch:
            for module in (text_normal, raw_look):
                monkeypatch.setattr(module, "nfkc", lambda text, *rest, spelt=spelt: spelt.append(len(text))
                                    or real(text, *rest))
                monkeypatch.setattr(module, "normalize", lambda text, *rest, spelt=spelt, real=text_normal.normalize,
                                    **named: spelt.append(len(text)) or real(text, *rest, **named))
            settled = secret_scan._raw_text_is_clean(engine, json.dumps(document, ensure_ascii=False),
                                                     secret_scan._Memo(), secret_scan._Budget(None))
        if engine.name == "re2":
            assert settled is looked and bool(spelt) is looked
        with pytest.MonkeyPatch.context() as monkeypatch:
            with_search, without = _scan_both_ways(document, monkeypatch)
        assert with_search == without == []
        document["labels"][-1] += f" password={CANARY_TOKEN}"
        with pytest.MonkeyPatch.context() as monkeypatch:
            with_search, without = _scan_both_ways(document, monkeypatch)
        assert with_search == without and [f.pointer for f in with_search] == [f"/labels/{count - 1}"]


@SETTINGS
@given(st.lists(texts, min_size=1, max_size=12))
def test_texts_composed_and_not_are_searched_in_their_nfkd_and_found_ones_normalised(parts: list[str]) -> None:
    """Letters composed and not in one text (a combining acute beside precomposed letters): the search
    runs over the NFKD, and each text is its NFKC or, holding nothing, left out."""
    mixed = [unicodedata.normalize("NFC", part).replace("\x00", "") + "\u00e9e\u0301" for part in parts]
    result = text_normal.nfkc_joined(mixed, "\x00".join(mixed)).split("\x00")
    assert len(result) == len(mixed)
    for text, out in zip(mixed, result, strict=True):
        normal = unicodedata.normalize("NFKC", text)
        assert out in (normal, "") and (out == normal or not shown_holds_anchor(text)), (text, out)


def test_a_manifest_in_nfkd_is_never_asked_whether_it_is_in_nfkc_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decomposed kana (NFD, as macOS writes file names): whether the text composes is the one pass's
    (or one search's) answer; NFKC's own look over all of it would cost ~50 ns a character (an
    attacker review found the look asked it)."""
    from ito_training_mcp.gates.manifest import schema as manifest

    from .conftest import EXAMPLE_MANIFEST

    document = json.loads(EXAMPLE_MANIFEST.read_bytes())
    label = unicodedata.normalize("NFD", "がぎぐげござじずぜぞだぢづでどばびぶべぼ" * 10)[:200]
    document["data"] = [{**document["data"][0], "name": f"ds-{i}", "decontamination": {
        **document["data"][0]["decontamination"], "eval_suites": [label] * 6}} for i in range(64)]
    content = json.dumps(document, ensure_ascii=False).encode()
    asked: list[tuple[str, int]] = []
    real = unicodedata.is_normalized
    monkeypatch.setattr(unicodedata, "is_normalized", lambda form, text: asked.append((form, len(text))) or real(form, text))
    manifest.parse_manifest(content)
    assert not [length for form, length in asked if form == "NFKC" and length > 1000]


def test_invisible_characters_are_inert_for_normalisation() -> None:
    """The look at a text holding invisible characters passes over them between the characters of an
    anchor (`any_form_pattern`): that NFKC of the text with them removed is its cleaning rests on each
    of them being a starter that decomposes into invisible characters alone (most into itself) and
    composes with nothing, before or after it."""
    invisible = {c for low, high in secret_rules.INVISIBLE_RANGES if low for c in range(low, high + 1)}
    composing = {c for low, high in decomposed_anchors.COMPOSING for c in range(low, high + 1)}
    first_of_a_pair = set()
    for code in range(0x110000):
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition and not decomposition.startswith("<") and len(decomposition.split()) == 2:
            first_of_a_pair.add(int(decomposition.split()[0], 16))
    for code in sorted(invisible):
        char = chr(code)
        assert unicodedata.combining(char) == 0, hex(code)
        assert {ord(c) for c in unicodedata.normalize("NFKD", char)} <= invisible, hex(code)
        assert code not in composing and code not in first_of_a_pair, hex(code)


@pytest.mark.parametrize("bounded", [False, True])
def test_a_text_holding_invisible_characters_is_looked_at_as_it_stands(bounded: bool) -> None:
    """The look settles such a text when no string could hold more kinds of invisible character than
    the cleaning takes, and finds what the walk finds: a credential split by them, a string with
    thirteen kinds of them (hidden), and a run of marks too long once they are removed."""
    kinds = [chr(0x200B + i % 5) + chr(0xFE00 + i % 16) for i in range(80)]  # 21 kinds, two a string
    quiet: dict[str, Any] = {"notes": [k * 3 + f"note {i}" for i, k in enumerate(kinds)]}
    engine = default_engine()
    text = json.dumps(quiet, ensure_ascii=False)
    assert secret_scan._raw_text_is_clean(engine, text, secret_scan._Memo(), secret_scan._Budget(None),
                                          runs_checked=True)
    crowded_note = "".join(chr(0xFE00 + i) for i in range(13)) + "x"
    split = "\u200b".join(CANARY_GITHUB)
    long_run = "a" + "\u0301" * 20 + "\u200b" + "\u0301" * 20
    # Runs counted again in the NFKC, where U+0F73 and U+0344 stand for two marks each (an attacker
    # review: 16 of them after invisible characters were hidden, and the look called the text clean).
    doubled = ["\ufeff\ufeff" + "\u0f73" * 16, "\u200d\u200d\u200d\uff3c" + "\u0344" * 16,
               "x\u200b" + "\u0344" * 15 + "\u200b\u0301", "\u200bx" + "\u0f73" * 10 + "\u0f75" * 6]
    cases = [(split, "github_token"), (crowded_note, secret_scan.HIDDEN), (long_run, secret_scan.HIDDEN),
             *((text, secret_scan.HIDDEN) for text in doubled)]
    for extra, kind in cases:
        document = {"notes": [*quiet["notes"], extra]}
        source = json.dumps(document, ensure_ascii=False)
        findings = secret_scan.scan(document, source=source, bounded=bounded)
        assert [(f.pointer, f.kind) for f in findings] == [("/notes/80", kind)], extra
        with pytest.MonkeyPatch.context() as monkeypatch:
            with_search, without = _scan_both_ways(document, monkeypatch)
        assert with_search == without


def _own_way_label(seed: int, compatibility: bool) -> str:
    """A label that NFKC changes in its own way: "tokenizer" (no place since "token" got its stops, but
    the compatibility characters are), then Cyrillic letters each followed by two marks out of
    canonical order (NFKC swaps them) or by one compatibility character (NFKC spells it out, some as a
    space and a mark): the benchmark's two thirteenth-round inputs."""
    import random

    rng = random.Random(seed)
    low = [chr(c) for c in (*range(0x5B0, 0x5BE), *range(0x64B, 0x653))]  # classes 10-33
    high = [chr(c) for c in range(0x483, 0x488)]  # class 230
    spelt = "¨ª¯²³´µ¸¹º¼½¾ĲĳĿŀŉſǄǅǆǇǈǉǊǋǌǱǲǳ"
    label = "tokenizer"
    while len(label) < 150:
        letter = chr(rng.randrange(0x430, 0x450))
        label += letter + (rng.choice(spelt) if compatibility else rng.choice(high) + rng.choice(low))
    return label


@pytest.mark.parametrize("compatibility", [False, True])
def test_labels_that_each_change_their_own_way_are_accepted_and_a_credential_only_nfkc_spells_is_found(
        compatibility: bool) -> None:
    """Every label changes under NFKC in its own way (what the benchmark's costliest inputs are made
    of; those with compatibility characters are places): the manifest passes gate 2, and a credential
    written in full-width letters after one such label's text is found at its pointer."""
    from ito_training_mcp.errors import ManifestRefusal
    from ito_training_mcp.gates.manifest import schema as manifest

    from .conftest import EXAMPLE_MANIFEST

    labels = [_own_way_label(i, compatibility) for i in range(40)]
    assert all(unicodedata.normalize("NFKC", label) != label for label in labels)
    document = json.loads(EXAMPLE_MANIFEST.read_bytes())
    document["data"] = [{**document["data"][0], "name": f"shard-{r}", "decontamination": {
        **document["data"][0]["decontamination"], "eval_suites": labels}} for r in range(8)]
    manifest.parse_manifest(json.dumps(document, ensure_ascii=False).encode())  # accepted

    wide = "".join(chr(ord(c) + 0xFEE0) for c in CANARY_GITHUB)  # ｇｈｐ＿…: only NFKC spells the token
    document["data"][5]["decontamination"]["eval_suites"] = [*labels[:30], labels[30] + " " + wide, *labels[31:]]
    with pytest.raises(ManifestRefusal) as refused:
        manifest.parse_manifest(json.dumps(document, ensure_ascii=False).encode())
    assert refused.value.code == "MANIFEST_SECRET"
    assert [(f["pointer"], f["kind"]) for f in refused.value.details["findings"]] == [
        ("/data/5/decontamination/eval_suites/30", "github_token")]
    assert CANARY_GITHUB not in json.dumps(refused.value.details)
