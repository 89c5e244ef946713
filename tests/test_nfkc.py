"""nfkc.py: the scanner's NFKC gives `unicodedata`'s answer on every text, and takes the slow path
only where it must. The premise of its shortcut is checked on every character that decomposes (the
others are their own NFKD); the answers on generated texts, long and short, with and without RE2.
These tests are of the path without ICU (`icu_normal`, switched off for each); test_icu_normal.py
has ICU's."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ito_training_mcp import byte_facts, decomposed_anchors, icu_normal, text_normal
from ito_training_mcp import nfkc as nfkc_module
from ito_training_mcp.nfkc import nfkc

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NOTABLE = frozenset(map(ord, nfkc_module.notable()))


@pytest.fixture(autouse=True)
def _without_icu() -> Iterator[None]:
    with icu_normal.switched_off():
        yield


def test_every_character_that_is_not_notable_begins_a_stretch_of_its_own() -> None:
    """The premise: a character that NFKC leaves alone, that is a starter and composes with nothing
    before it has an NFKD that begins with such a starter too. Characters without a decomposition are
    their own NFKD (Hangul syllables decompose by rule: checked with the rest)."""
    composing = {c for low, high in decomposed_anchors.COMPOSING for c in range(low, high + 1)}
    for code in (*byte_facts._decomposing(), *byte_facts._HANGUL_SYLLABLES):
        if code in NOTABLE:
            continue
        first = unicodedata.normalize("NFKD", chr(code))[0]
        assert unicodedata.combining(first) == 0 and ord(first) not in composing, hex(code)


def test_the_notable_characters_are_those_nfkc_may_change_or_compose() -> None:
    """Every character NFKC changes alone is notable, and so is every non-starter and composing one;
    a character that is none of these is left as it is by NFKC, alone and after a letter."""
    changed = set(byte_facts.nfkc_changed())
    assert changed <= NOTABLE
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000 or code in NOTABLE:
            continue
        char = chr(code)
        assert unicodedata.combining(char) == 0
        assert unicodedata.normalize("NFKC", "a" + char) == "a" + char, hex(code)


# Characters from every corner the shortcut cares about: ASCII, CJK and kana (CPython's slow cases),
# full-width forms and punctuation, compatibility characters that become several, composing marks,
# Hangul syllables and jamo, characters that decompose to non-starters, invisible ones, surrogates.
ALPHABET = [*"aZ09 ,.\"", "模", "型", "パ", "ハ", "ス", "，", "（", "）", "：", "ｇ", "Ｐ", "１", "\u3000", "\u00a0",
            "\ufb01", "\u2460", "\u33ff", "\u2126", "\u212b", "\u00c5", "e", "\u0301", "\u0308", "\u0344",
            "\u0f73", "\u3099", "\u309a", "\uff9f", "\uff8a", "한", "\u1100", "\u1161", "\u11a8", "\u0915",
            "\u093c", "\u0958", "\u200b", "\ufeff", "\u00ad", "\U0001d400", "\ud800", "\x00"]
texts = st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join)


@SETTINGS
@given(texts)
def test_short_texts_get_unicodedatas_answer(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


@SETTINGS
@given(st.lists(texts, min_size=1, max_size=6), st.integers(1, 20), st.booleans(),
       st.fixed_dictionaries({"ROUNDS": st.integers(0, 3), "KIND_REPLACED": st.integers(0, 4),
                              "WINDOW": st.sampled_from([4, 16, 64]), "MIN_WINDOW": st.sampled_from([1, 4, 16]),
                              "MAX_WINDOW": st.sampled_from([16, 64, 256]), "KINDS": st.integers(1, 6),
                              "DENSE": st.integers(1, 4), "PASSES": st.integers(0, 6), "READ_SHARE": st.integers(1, 8),
                              "PATTERNS": st.integers(1, 4), "NEW_STRETCHES": st.integers(1, 64), "FEW": st.integers(1, 16),
                              "HEAD_SHARE": st.integers(1, 8)}),
       st.sampled_from(["", "\u0301", "\u0328\u031b"]))
def test_long_texts_get_unicodedatas_answer(parts: list[str], repeat: int, given_bytes: bool,
                                            limits: dict[str, int], lead: str) -> None:
    """Long texts, their pieces repeated so that kinds recur far from where they were first seen; the
    windows, the kinds and rounds, the passes and reads allowed, and the length counted as short are
    made small here so that every path is taken (with and without the caller's bytes), and the
    work reported is never negative. `lead`: marks that begin the text (a run that is no stretch)."""
    text = lead + "".join(part * repeat for part in parts)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(nfkc_module, "SHORT", 8)
        for name, value in limits.items():
            monkeypatch.setattr(nfkc_module, name, value)
        data = text.encode("utf-8", "surrogatepass") if given_bytes else None
        made: list[int] = []
        encoded: list[bytes] = []
        normal = nfkc(text, data, made, encoded)
        assert normal == unicodedata.normalize("NFKC", text)
        assert encoded in ([], [normal.encode("utf-8", "surrogatepass")])  # the answer's UTF-8, when made
        assert nfkc_module.is_nfkc(text, data) == (normal == text)
        assert all(cost >= 0 for cost in made)
        # what comes before the first notable character, left as it is, changes nothing of the work
        # reported (a bounded scan pays it: an attacker review found strings reported `unexamined`)
        monkeypatch.setattr(nfkc_module, "HEAD_SHARE", 1)
        again: list[int] = []
        assert nfkc(text, data, again) == normal and sum(again) == sum(made)


@SETTINGS
@given(st.lists(texts, min_size=1, max_size=4))
def test_without_re2_the_answer_is_the_same(parts: list[str]) -> None:
    text = "".join(parts) * 3
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(nfkc_module, "SHORT", 8)
        monkeypatch.setattr(nfkc_module, "_notable_search", lambda: None)
        assert nfkc(text) == unicodedata.normalize("NFKC", text)


@pytest.mark.parametrize("unit", ["パスワードではない，評価 ", "模型（训练）数据：评估集！ ", "оценка\u00a0модели ",
                                  "ASCII text with a no-break\u00a0space "])
def test_a_long_text_with_a_few_kinds_to_change_is_not_normalised_the_slow_way(
        unit: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mebibyte of Japanese with one kind of full-width punctuation took CPython's NFKC 70 ms; the
    replacement of each kind gives the same text without it."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    text = unit * 20_000
    expected = unicodedata.normalize("NFKC", text)
    calls = _counted(monkeypatch)
    assert nfkc(text) == expected
    assert nfkc(text, text.encode()) == expected
    assert calls == []


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The calls to `unicodedata.normalize` from now on (the module's tables built before)."""
    nfkc("，" * 2 * nfkc_module.SHORT)
    calls: list[int] = []
    real = unicodedata.normalize
    monkeypatch.setattr(unicodedata, "normalize", lambda form, t: calls.append(len(t)) or real(form, t))
    return calls


def _long_calls(calls: list[int]) -> list[int]:
    """The calls to `unicodedata` on more than a window's worth of text."""
    return [length for length in calls if length > nfkc_module.MAX_WINDOW]


def test_kinds_spread_over_many_windows_are_replaced_window_by_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """From an attacker review: seventeen kinds each first seen in a window of its own made sixteen
    rounds of replacing and searching, then `unicodedata` took the text (CPython's NFKC of all of it).
    Now the first ROUNDS kinds are replaced in all of the text, and each kind after that in the
    window where it stands."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    kinds = [chr(0xFF41 + i) for i in range(17)]  # full-width letters
    text = "".join(kind + "x" * 8000 for kind in kinds) * 3
    expected = unicodedata.normalize("NFKC", text)
    calls = _counted(monkeypatch)
    replaced: list[int] = []
    real_replaced = nfkc_module._replaced
    monkeypatch.setattr(nfkc_module, "_replaced", lambda t, k: replaced.append(len(t)) or real_replaced(t, k))
    assert nfkc(text) == expected
    whole = [length for length in replaced if length == len(text)]
    assert len(whole) == nfkc_module.ROUNDS and _long_calls(calls) == []
    assert len(replaced) - len(whole) >= len(kinds) - nfkc_module.ROUNDS  # the rest, a window each


@pytest.mark.parametrize("tail", ["ａ，ｂ" * 3000, "e\u0301" * 100, "ハ\u309a", "\u0301\u0328x", "ｇ",
                                  "意\u3099" + "日本語の文章です。" * 3000 + "ｘ"])
def test_what_comes_before_the_first_notable_character_is_left_as_it_is(tail: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """From an attacker review: the first notable character of a mebibyte came at 91% of it (seventeen
    kinds of full-width letter in the last labels), and Unicode's quick check and the kinds replaced
    in all of the text went over the rest every time. What comes before the stretch holding it (the
    character before it, too) is in NFKC and is left as it is: nothing is replaced, normalised or
    checked there, and the answer is unicodedata's."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    head = "évaluation du modèle " * 5000
    text = head + tail
    expected = unicodedata.normalize("NFKC", text)
    assert nfkc_module.is_nfkc(text) == (expected == text)
    calls = _counted(monkeypatch)
    seen: list[int] = []
    real_replaced, real_check = nfkc_module._replaced, unicodedata.is_normalized
    monkeypatch.setattr(nfkc_module, "_replaced", lambda t, k: seen.append(len(t)) or real_replaced(t, k))
    monkeypatch.setattr(unicodedata, "is_normalized", lambda form, t: seen.append(len(t)) or real_check(form, t))
    assert nfkc(text) == expected
    assert all(length <= len(tail) + 1 for length in seen + calls), (len(text), seen, calls)
    before = len(seen)
    assert nfkc(head) is head and len(seen) == before  # and a text without any is itself, untouched
    made: list[int] = []
    nfkc(text, None, made)
    monkeypatch.setattr(nfkc_module, "HEAD_SHARE", 1)  # the head looked at: the same work reported
    looked: list[int] = []
    assert nfkc(text, None, looked) == expected and sum(looked) == sum(made)


@pytest.mark.parametrize("text", [
    "ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐｑｒｓｔｕｖｗｘｙｚ " * 2000,  # more kinds than are replaced in all the text
    unicodedata.normalize("NFD", "パスワード，評価 ") * 4000,  # a composing mark: composition is needed
    "Tie\u0302\u0301ng Vie\u0323\u0302t " * 4000,  # accents written apart
    ("パスワードではないハ\u309a評価 " * 10) * 400,  # a kana and its voiced mark apart, among kana made whole
    "x" * 20_000 + "e\u0301" + "x" * 20_000 + "ｇ\u0308\u0323",  # a few places, far apart
    "नमस्ते क\u093c दुनिया " * 30_000 + "e\u0301",  # stretches NFKC leaves alone throughout, then one it changes
    ("\ufdfa" * 25 + "\u0301 ") * 2000,  # NFKC makes each eighteen, and the acute stays after the last
])
def test_a_text_that_may_compose_is_normalised_a_stretch_at_a_time(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text that may compose is not asked Unicode's quick check first (CPython's answers "maybe" for
    it by normalising all of it; an attacker review measured twice the cost), and its stretches are
    replaced by their NFKC: `unicodedata` normalises none of it whole (a mebibyte of Japanese with a
    voiced mark written apart in each label took 61x the baseline so)."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    expected = unicodedata.normalize("NFKC", text)
    calls = _counted(monkeypatch)
    assert nfkc(text) == expected and _long_calls(calls) == []
    assert nfkc(text, text.encode()) == expected and _long_calls(calls) == []
    assert not nfkc_module.is_nfkc(text) and nfkc_module.is_nfkc(expected)


@pytest.mark.parametrize("text", [
    # more notable characters in each window than KINDS: `unicodedata` takes it all, once
    "".join(chr(0xFF41 + i % 26) + chr(0x300 + i % 40) for i in range(40_000)),
    # Devanagari with a nukta after each of 34 consonants it does not compose with: stretches NFKC
    # leaves alone, of more kinds than the passes allowed to skip them (one each): windows are read
    # until a share of the text is, then `unicodedata` takes the rest (reading costs as much as it)
    "".join(chr(c) + "\u093c " for c in range(0x915, 0x93A) if c not in (0x928, 0x930, 0x933)) * 8000,
])
def test_a_text_the_stretches_cannot_settle_cheaply_goes_to_unicodedata_once(
        text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    expected = unicodedata.normalize("NFKC", text)
    calls = _counted(monkeypatch)
    made: list[int] = []
    assert nfkc(text, None, made) == expected and len(_long_calls(calls)) == 1
    assert sum(made) >= nfkc_module.SLOW * _long_calls(calls)[0] or expected == text


def test_a_text_in_nfkc_that_may_compose_is_returned_as_it_is() -> None:
    """The same object, which callers compare by identity to learn that nothing changed."""
    text = "नमस्ते क\u093c दुनिया " * 200 + "ऩ"
    assert unicodedata.is_normalized("NFKC", text)
    assert nfkc(text) is text and nfkc_module.is_nfkc(text)


def test_a_character_nfkc_changes_standing_alone_is_never_in_its_output() -> None:
    """`is_nfkc`'s first look: a text holding one is not in NFKC. NFKC makes a character only by
    leaving it alone or composing it, and either way NFKC leaves that character alone standing alone
    (a composite is the composition of its own decomposition); so the characters it changes alone
    never come out of it. Checked here on each with what may stand around it."""
    for code in byte_facts.nfkc_changed():
        char = chr(code)
        for text in (char, "a" + char, char + "\u0301", "\u1100" + char):
            assert char not in unicodedata.normalize("NFKC", text) or unicodedata.normalize("NFKC", char) == char


@pytest.mark.parametrize("tail", ["e\u0301", "a\u0327\u0301", "\x01\u0327\u0301", ""])
def test_stretches_known_to_be_in_nfkc_are_passed_with_one_search(tail: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text that NFKC leaves alone but for a stretch at its end: after the first window, the stretches
    it showed (each in NFKC) are overwritten in a copy of the rest, and one search finds the next one
    that is not among them; a longer stretch that one of them begins is found by what it adds (the
    acute after "a" and its cedilla, which NFKC composes with the "a"). Devanagari with its nukta
    written apart cost 22 ms so, where `unicodedata` took 17 ms."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    windows: list[int] = []
    real = nfkc_module._replaced
    monkeypatch.setattr(nfkc_module, "_replaced", lambda t, k: windows.append(len(t)) or real(t, k))
    for body in ("नमस्ते क\u093c दुनिया " * 30_000, "a\u0327 b " * 100_000, "\x01\u0327 " * 100_000):
        text = body + tail
        windows.clear()
        normal = nfkc(text)
        assert normal == unicodedata.normalize("NFKC", text)
        assert (normal is text) == unicodedata.is_normalized("NFKC", text)
        if body[0] != "\x01":  # (a stretch beginning with the filler is not passed so)
            assert len(windows) <= 4, windows


def _nfkc_marks() -> list[str]:
    """Combining marks NFKC leaves after an "x"."""
    return [chr(c) for c in range(0x300, 0x370) if unicodedata.combining(chr(c))
            and unicodedata.normalize("NFKC", "x" + chr(c)) == "x" + chr(c)]


@pytest.mark.parametrize("text", [
    "".join("x" + mark for mark in _nfkc_marks()[:33]) + "a" * 1000,  # more kinds in a window than KINDS
    "x\u0301 " * 45_000,  # stretches NFKC leaves alone throughout
    "\u0cd5\u0651\u0651\u0651\u0651" * 1001,  # nothing but notable characters: no whole stretch in a window
], ids=["kinds", "reads", "no-stretch"])
def test_a_text_in_nfkc_is_told_so_and_returned_as_it_is_whichever_way_it_was_settled(text: str) -> None:
    """From an attacker review: where the stretches gave up and `unicodedata` took the rest, a text in
    NFKC came back as a new string, and `is_nfkc` said no (a long string of a refused manifest was
    then `unexamined`, where its credential had been named)."""
    assert unicodedata.is_normalized("NFKC", text)
    assert nfkc(text) is text and nfkc_module.is_nfkc(text)


def test_a_window_of_many_new_stretches_costs_a_pass_not_one_call_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """From an attacker review: windows of 64 KiB full of distinct stretches that NFKC changes (a
    letter of 1,325 and a character of 31, with a mark that NFKC keeps every 40 so that they are not
    replaced character by character) made each stretch a call of `unicodedata` and a search of the
    window for it: a valid manifest took 2.7 s (1,300x). Past NEW_STRETCHES new ones, or FEW to
    change, a window is normalised whole."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    letters = [chr(c) for c in range(0x400, 0x530) if chr(c).isalpha() and chr(c) not in nfkc_module.notable()]
    changing = [chr(0xFF41 + i) for i in range(26)]  # full-width letters
    units = [letter + changing[i % len(changing)] + ("\u0483" if i % 40 == 0 else "") + " "
             for i, letter in enumerate(letters * 40)]
    text = "".join(units)
    calls = _counted(monkeypatch)
    assert nfkc(text) == unicodedata.normalize("NFKC", text)
    assert len(calls) < len(units) // 20


def test_windows_of_drifting_kinds_compile_a_few_patterns(monkeypatch: pytest.MonkeyPatch) -> None:
    """From an attacker review: marks that change every 256 bytes made each window a pattern of its own
    (0.2 ms to compile), 700 of them. One pattern serves the kinds seen so far; past PATTERNS of them,
    `unicodedata` takes the rest."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    import random

    rng = random.Random(1)
    letters = [chr(c) for c in range(0x400, 0x530) if chr(c).isalpha() and chr(c) not in nfkc_module.notable()]
    marks = [chr(c) for c in (*range(0x5B0, 0x5BE), *range(0x64B, 0x660), *range(0x730, 0x74B))
             if unicodedata.combining(chr(c))]
    units, active = [], rng.sample(marks, 12)
    for i in range(300_000):
        if i % 64 == 0:  # one mark of the twelve in use changes every 64 letters
            active[rng.randrange(12)] = rng.choice([m for m in marks if m not in active])
        a, b = sorted(active[:2], key=unicodedata.combining)
        out_of_order = i % 16 == 0 and unicodedata.combining(a) != unicodedata.combining(b)
        units.append(letters[i % len(letters)] + (b + a if out_of_order else active[i % 12]))
    text = "".join(units)
    compiled: list[int] = []
    real = nfkc_module._stretch_pattern.__wrapped__
    monkeypatch.setattr(nfkc_module, "_stretch_pattern", lambda kinds, at_start: compiled.append(len(kinds))
                        or real(kinds, at_start))
    assert nfkc(text) == unicodedata.normalize("NFKC", text)
    assert len(set(compiled)) <= nfkc_module.PATTERNS


@pytest.mark.parametrize("text", ["\u0301" + "x" * 5000 + "e\u0301", "\u0328\u01a1" * 2 + "x" * 2000 + "\u01a1\u0328\u031b"])
def test_a_run_of_marks_that_begins_the_text_is_not_passed_where_it_stands_inside_stretches(text: str) -> None:
    """From a second attacker review: a text beginning with a mark NFKC leaves alone made that mark a
    stretch known to be in NFKC, and passing such stretches overwrote it inside "e" and its acute
    too, which NFKC composes: the text came back unchanged, and `is_nfkc` said yes."""
    expected = unicodedata.normalize("NFKC", text)
    assert nfkc(text) == expected and nfkc_module.is_nfkc(text) == (expected == text)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(nfkc_module, "SHORT", 0)
        monkeypatch.setattr(nfkc_module, "WINDOW", 16)
        assert nfkc(text) == expected and nfkc_module.is_nfkc(text) == (expected == text)


def test_a_text_not_in_nfkc_is_told_so_by_the_window_at_its_first_notable_character(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """From an attacker review: the look at a mebibyte manifest of Japanese with a kana and its voiced
    mark written apart asked whether the text is in NFKC, and a search for characters NFKC changes
    alone went over all of it (there are none) before the first window told. The window at the first
    notable character is read first now; only a text in NFKC there is searched further."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    searched: list[int] = []
    real = nfkc_module._changed_search()
    assert real is not None
    monkeypatch.setattr(nfkc_module, "_changed_search",
                        lambda: lambda data, pos: searched.append(len(data) - pos) or real(data, pos))
    text = "{\"labels\": [" + ", ".join(f"\"パスワードではないハ\u309a評価 {i}\"" for i in range(20_000)) + "]}"
    assert not nfkc_module.is_nfkc(text) and all(length <= nfkc_module.CHANGED_AHEAD for length in searched)
    searched.clear()
    # in NFKC, a composing mark that composes with nothing in each: its window searched, then the rest
    composed = unicodedata.normalize("NFKC", text.replace("評価", "評価x\u309a"))
    assert nfkc_module.is_nfkc(composed) and len(searched) == 2 and min(searched) <= nfkc_module.CHANGED_AHEAD
    late = composed + "ｘ"  # a character NFKC changes alone, at the end: that search tells
    assert not nfkc_module.is_nfkc(late) and len(searched) == 4


@SETTINGS
@given(st.lists(st.one_of(texts, st.sampled_from(["mmlu", "x" * 50, "tokenizer"])), min_size=1, max_size=12),
       st.integers(1, 30))
def test_texts_normalised_joined_whole_or_taken_apart_alike(parts: list[str], repeat: int) -> None:
    """An unbounded scan may normalise the texts joined, ASCII ones and all, when those that are not
    ASCII make most of it (`whole`): the answer is the one taken apart and joined again, and each
    text's NFKC where none is left out. With no ASCII text, any scan does, at the same cost."""
    values = [part.replace("\x00", "") for part in parts] * repeat
    joined = "\x00".join(values)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(nfkc_module, "SHORT", 8)
        apart = text_normal.nfkc_joined(values, joined)
        encoded: list[bytes] = []
        whole = text_normal.nfkc_joined(values, joined, whole=True, encoded=encoded)
    assert whole == apart and encoded in ([], [whole.encode("utf-8", "surrogatepass")])
    if len(whole.split("\x00")) == len(values) and all(whole.split("\x00")):
        assert whole == "\x00".join(unicodedata.normalize("NFKC", value) for value in values)


def test_a_character_nfkc_changes_alone_soon_after_the_first_notable_one_is_found_before_any_stretch_is_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """From an attacker review's text (a titlo after each Cyrillic letter, then letters with a
    diaeresis): the first character NFKC changes alone stood just past the window at the first
    notable character, and reading that window's stretches cost three times the search that finds
    it. The search goes first, over a stretch of text past the window."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    read: list[int] = []
    real = nfkc_module._stretched
    monkeypatch.setattr(nfkc_module, "_stretched", lambda text, *rest, **named: read.append(len(text))
                        or real(text, *rest, **named))
    # (a voicing mark after "x" at the end, which composes with nothing: a text that may compose)
    text = "x" * 5000 + "\u0436\u0483" * 3000 + "\u062a\u00a8" + "\u0436\u0483" * 100_000 + "x\u309a"
    assert not nfkc_module.is_nfkc(text) and read == []
    assert nfkc_module.is_nfkc(unicodedata.normalize("NFKC", text))


@pytest.mark.parametrize("text", ["パスワード" * 2000 + "x\u05b0xyz " * 50, "\u0b47x" * 3000 + "x\u05b0xyz " * 50])
def test_a_head_whose_bytes_may_compose_counts_as_before(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a second attacker review: whether the bytes may compose is a loose byte search (kana's
    lead bytes trip it), and asked of the rest alone it let Unicode's quick check settle a text that
    the whole text's bytes sent to the stretches: less work reported than before. It is asked of all
    the bytes, so the work reported is the same with the head left as it is or looked at."""
    if nfkc_module._notable_search() is None:
        pytest.skip("RE2 is not installed")
    made: list[int] = []
    assert nfkc(text, None, made) == unicodedata.normalize("NFKC", text)
    monkeypatch.setattr(nfkc_module, "HEAD_SHARE", 1)
    looked: list[int] = []
    assert nfkc(text, None, looked) == unicodedata.normalize("NFKC", text) and sum(looked) == sum(made) > 0


def test_a_notable_character_at_the_start_is_never_a_head_to_leave(monkeypatch: pytest.MonkeyPatch) -> None:
    """From the same review: with HEAD_SHARE longer than the text, a notable character at its very
    start counted as past the head, and only the last byte was normalised."""
    monkeypatch.setattr(nfkc_module, "HEAD_SHARE", 4000)
    text = "\uff0c" + "x" * 1100
    assert nfkc(text) == unicodedata.normalize("NFKC", text)
