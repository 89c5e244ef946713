"""The secret scanner's anchors as they stand in decomposed text (NFKD), so that such text is
normalised only where it could hold one.

The scanner searches what a reader would see: `text_normal.normalize`, NFKC and then without
invisible characters. CPython's NFKC of text written with combining marks (Vietnamese as macOS
writes file names, "e" + U+0301 for "é") costs 50 ns a character, ten to fifteen times reading
it; but such text is usually NFKD already, which CPython confirms in a fraction of that. For a
text in NFKD, one search with the pattern built here finds every place where its NFKC could hold
an anchor; only the strings holding one are normalised and searched, the others can hold no
finding (every format and every credential key name has an anchor).

Why. Let `s` be in NFKD and its NFKC hold an anchor `a` at some place, as `a2` (equal to `a` but for
case where `a` is searched without it). The NFKD of the NFKC of a text is the text's NFKD, here `s`
itself; NFKD decomposes character by character and only reorders the non-starters (combining marks)
that stand together, and no mark moves past a starter. So `s` holds, in order, each character of
`a2` decomposed, where the marks of one character may be mixed with marks that composed with nothing
but stand after the last starter (outside `a2`). The pattern of `a` is therefore: for each of its
characters, the starters of its NFKD (the same under case folding), followed by any combining marks
when that NFKD has marks (the u of "schlüssel", the ha of "パスワード"), and by none otherwise: a mark
after a character that has none in its decomposition either stays in the NFKC (and anchors hold
none) or composes with it into another character than the anchor's (but where a case-insensitive
search takes the letter for a character that decomposes with marks: CASE_PARTNERS_WITH_MARKS).
Text in neither form is searched in its NFKD, which the callers make. Hangul syllables decompose into
jamo, which are starters: the Korean anchors are spelt in jamo. The pattern finds a little more
than it must (marks that compose into nothing), never less; a test checks it against NFKC on
generated texts.

The Hangul fillers and the like: a character whose NFKD is invisible does not stand in a text in
NFKD, and one that is invisible itself is found as it is.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import cache
from typing import NamedTuple

from ito_training_mcp import secret_rules, several_starters
from ito_training_mcp.anchor_tails import KEY_REST as KEY_REST
from ito_training_mcp.anchor_tails import after_colon as _after_colon
from ito_training_mcp.anchor_tails import in_keys as _in_keys
from ito_training_mcp.anchor_tails import stop_tail as stop_tail
from ito_training_mcp.anchor_tails import value_letters as value_letters
from ito_training_mcp.anchor_tails import value_tail as value_tail
from ito_training_mcp.composing import COMPOSING as COMPOSING
from ito_training_mcp.composing import composing_begun as composing_begun
from ito_training_mcp.composing import holds_latin_marks as holds_latin_marks
from ito_training_mcp.composing import marks as marks
from ito_training_mcp.composing import may_compose as may_compose
from ito_training_mcp.egress.invisible import re2_class, runs, utf8_starts
from ito_training_mcp.re2_searches import re2_place_search as re2_place_search
from ito_training_mcp.re2_searches import re2_search as re2_search

# Letters that a case-insensitive search takes for a character that decomposes with marks: Python's
# `re` matches "i" to U+0130 (İ, whose simple lowercase is "i"; its NFKD is I + U+0307), and the other
# letters have such partners under some case mapping (ǰ, ẖ, ẗ, ẘ, ẙ). After one of them, in an anchor
# searched without case, marks may stand (an attacker review found "cookI\u0307e" missed by the
# Python engine). A test checks the list against both engines over every code point.
CASE_PARTNERS_WITH_MARKS = frozenset("hijtwy")


def _anchor(anchor: str, fold: bool, char: Callable[[int], str], mark_class: str,
            values: bool = False) -> tuple[str, str | None, str | None]:
    """The anchor's pattern, what must follow it (`values`: in any string, None for nothing; see
    `value_tail`), and what must follow it in a key alone (None for nothing more)."""
    parts = []
    marked = False  # whether marks may follow the last letter
    for letter in anchor:
        decomposed = unicodedata.normalize("NFKD", letter)
        starters = "".join(c for c in decomposed if not unicodedata.combining(c))
        parts.append("".join(char(ord(c)) for c in starters))
        marked = _takes_marks(letter, fold)
        if marked:
            parts.append(mark_class + "*")
    body = "".join(parts)
    body = f"(?i:{body})" if fold else body
    tail, in_key = value_tail(anchor, marked, list(marks())) if values else ("", None)
    return body, None if tail is None else tail or ("" if marked else stop_tail(anchor)), in_key


def _takes_marks(letter: str, fold: bool) -> bool:
    """May marks follow `letter` of an anchor where the anchor stands in text: its NFKD holds some,
    or a search without case takes it for a character that decomposes with some?"""
    return any(map(unicodedata.combining, unicodedata.normalize("NFKD", letter))) or (
        fold and letter.lower() in CASE_PARTNERS_WITH_MARKS)


def pattern(re2: bool, values: bool = False) -> str:
    """Every anchor of a format and every credential key-name stem, as decomposed text spells it, and
    every invisible character but NUL (RE2's syntax, or Python's): a text holding one is cleaned
    and searched as before, since removing it can bring an anchor together. A text in NFKD holds
    every invisible character its NFKC holds (composition makes none). `values` (RE2 only): for
    `decomposed_value_search`."""
    def char(code: int) -> str:
        if code < 0x80:
            return re.escape(chr(code))
        return f"\\x{{{code:x}}}" if re2 else f"\\U{code:08x}"

    mark = "[" + "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in marks()) + "]"
    invisible = secret_rules.invisible_class(re2, nul=False)  # which the scanner removes before it looks
    tails: dict[str, list[str]] = {}  # (one copy of each tail: see `any_form_pattern`)
    keyed: dict[str, list[str]] = {}
    after_colon: dict[str, str] = {}  # `_after_colon`
    for anchor, fold in _anchors():
        body, tail, in_key = _anchor(anchor, fold, char, mark, values)
        if values and anchor in secret_rules.AFTER_COLON:
            after_colon[anchor] = body
            continue
        if tail is not None:
            tails.setdefault(tail, []).append(body)
        if in_key is not None:
            keyed.setdefault(in_key, []).append(body)
    return "|".join([invisible, *(f"(?:{'|'.join(bodies)}){tail}" for tail, bodies in tails.items()),
                     *_after_colon(after_colon, secret_rules.invisible_class(re2, nul=False) + "*"),
                     *_in_keys([f"(?:{'|'.join(bodies)}){after}" for after, bodies in keyed.items()])])


@cache
def decomposed_value_search() -> Callable[[bytes, int], int] | None:
    """The search of `pattern` in UTF-8 JSON text without escapes that passes over the occurrences a
    value stops (`value_tail`), as `any_form_value_search` does; None without RE2."""
    return re2_place_search(pattern(True, values=True))


def _anchors() -> list[tuple[str, bool]]:
    """Every anchor of a format and every credential key-name stem, with whether case is ignored."""
    anchors = {(anchor, rule.fold) for rule in secret_rules.RULES for anchor in rule.anchors}
    anchors |= {(stem, True) for stem in secret_rules.KEY_NAME_STEMS}
    return sorted(anchors)


# ---------------------------------------------------------------------------- text in any form

# Text in neither form (full-width forms; letters composed and not) is searched the same way without
# being decomposed first, when every character of it decomposes into one starter at most.
#
# Why. Let a string `s` hold no character whose NFKD holds two starters or more, and let its NFKC
# hold an anchor `a`. Then its NFKD holds `a`'s pattern above, and each starter of that NFKD comes
# from exactly one character of `s`, in the same order (NFKD works character by character and no
# mark moves past a starter). A character of `s` between the characters that give two starters of the
# pattern gives none: its NFKD is marks only. So `s` holds, for each starter `b` of the pattern, a
# character whose NFKD's one starter is `b` (under case folding, one whose starter folds with `b`),
# and between two of them characters whose NFKD is marks only, where the pattern allows marks, and
# nothing where it does not. The pattern built here is that. A character of two starters or more
# (a ligature, a fraction) is followed where its starters could give part of an anchor, by a second
# pattern (several_starters.py, `several_pattern`); Hangul syllables, and every character whose NFKD
# holds an invisible one, are patterns of their own: where one of them stands, the caller looks the
# long way. It finds more than it must (a letter with marks of its own for a bare letter of the
# anchor), never less; tests check it against NFKC.


class _Starters(NamedTuple):
    by_starter: dict[int, list[int]]  # the characters whose NFKD holds exactly one starter, by that starter
    marks_only: list[int]  # those whose NFKD holds marks (non-starters) only
    unsure: list[int]  # those whose NFKD holds an invisible character, Hangul syllables, and those of
    # several starters whose NFKD begins with a mark that could take part in a place
    several: list[tuple[int, tuple[int, ...]]]  # the others of two starters or more, with their starters
    most_marks: int  # the most marks any character's NFKD holds (three: U+1F82)


@cache
def _starters() -> _Starters:
    """Every character NFKD changes, by the starters of its NFKD (~30 ms, once)."""
    from ito_training_mcp.byte_facts import nfkd_changed

    invisible = frozenset(code for low, high in secret_rules.INVISIBLE_RANGES for code in range(low, high + 1))
    by_starter: dict[int, list[int]] = {}
    marks_only: list[int] = []
    unsure: list[int] = []
    several: list[tuple[int, tuple[int, ...]]] = []
    most_marks = 1
    may_take_part = _may_take_part()
    for code in nfkd_changed():
        decomposed = unicodedata.normalize("NFKD", chr(code))
        starters = [c for c in decomposed if not unicodedata.combining(c)]
        most_marks = max(most_marks, len(decomposed) - len(starters))
        if not invisible.isdisjoint(map(ord, decomposed)):
            unsure.append(code)
        elif len(starters) > 1:
            if code not in _HANGUL_SYLLABLES and not unicodedata.combining(decomposed[0]):
                several.append((code, tuple(map(ord, starters))))
            elif may_take_part(code, decomposed, starters):
                unsure.append(code)
        elif starters:
            by_starter.setdefault(ord(starters[0]), []).append(code)
        else:
            marks_only.append(code)
    return _Starters(by_starter, marks_only, unsure, several, most_marks)


# A Hangul syllable, or a character whose NFKD begins with a mark and holds two starters or more, is a
# place of its own only when it could take part in one (the others of several starters are followed:
# several_starters.py). Why that misses none: a place (the starters of an anchor, in order) that takes in any
# of the character's NFKD either holds all of it, or begins before it and ends inside it (so it holds
# its first starter, and any marks before that one), or begins inside it and ends after (its last
# starter), or lies within it. So a character whose NFKD begins with a starter, whose first and last
# starters are none that any anchor's letter gives (under either engine's case folding), and within
# whose NFKD the search of decomposed anchors finds nothing, is no part of any place. Hangul
# syllables stay places of their own (the pattern spells Korean anchors by their jamo).
_HANGUL_SYLLABLES = range(0xAC00, 0xD7A4)


def _may_take_part() -> Callable[[int, str, list[str]], bool]:
    anchor_starters: dict[bool, set[str]] = {True: set(), False: set()}
    for anchor, fold in _anchors():
        for char in anchor:
            anchor_starters[fold] |= {c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c)}
    folded = re.compile("[" + "".join(f"\\U{ord(c):08x}" for c in sorted(anchor_starters[True])) + "]", re.IGNORECASE)
    exact = frozenset(anchor_starters[False] | anchor_starters[True])
    try:  # RE2's case folding too, where it is installed (its orbits are not Python's)
        import re2  # type: ignore[import-untyped]  # no type information shipped

        folded_re2 = re2.compile("(?i:[" + "".join(f"\\x{{{ord(c):x}}}" for c in sorted(anchor_starters[True])) + "])")
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        folded_re2 = folded
    within = re.compile(pattern(re2=False))

    def anchor_letter(char: str) -> bool:
        return char in exact or folded.fullmatch(char) is not None or folded_re2.fullmatch(char) is not None

    def may_take_part(code: int, decomposed: str, starters: list[str]) -> bool:
        return (code in _HANGUL_SYLLABLES or bool(unicodedata.combining(decomposed[0]))
                or anchor_letter(starters[0]) or anchor_letter(starters[-1]) or within.search(decomposed) is not None)
    return may_take_part


@cache
def unsure_characters() -> frozenset[int]:
    """The characters the search in any form cannot follow: Hangul syllables, those whose NFKD holds
    an invisible character, and those of several starters whose NFKD begins with a mark (it finds
    each as a place of its own)."""
    return frozenset(_starters().unsure)


@cache
def any_form_search() -> Callable[[bytes, int], int] | None:
    """Where, at or after byte `pos`, UTF-8 `data` next holds a place of `any_form_pattern` (-1: none),
    in one search (~2.5 ms a mebibyte); None without RE2. Built at first use (~0.5 s, once). (For the
    walk's strings, one by one or a slice at a time: a character of several starters that could give
    part of an anchor is a place there, one search of the text serving each.)"""
    return re2_search(any_form_pattern())


@cache
def any_form_value_search(several: bool = True) -> Callable[[bytes, int], int] | None:
    """`any_form_search` for UTF-8 JSON text without escapes, which passes over the occurrences that a
    value stops (`secret_rules.VALUE_STOPS`, `value_tail`): for the look at such a text alone, where
    every `"` delimits a string and a key is one that `:` follows. Places where characters of several
    starters give part of an anchor are found by a second search, `several_pattern`'s, taken only on
    text holding one of them. `several=False`: for a text known to hold none (`byte_facts`)."""
    search = re2_place_search(any_form_pattern(values=True))
    return _with_several(search) if several else search


def several_pattern() -> str:
    """RE2's pattern of the places where characters of several starters give part of an anchor (a
    ligature, a fraction, a letter of two: several_starters.py); "" for none."""
    return _several().pattern


def _with_several(search: Callable[[bytes, int], int] | None) -> Callable[[bytes, int], int] | None:
    """`search`, and the search of `several_pattern` where `data` holds one of its characters (a look
    at the bytes first): the nearer place. The other search's place is kept for the next call with the
    same `data` (each look asks for the places one after another), until neither finds more."""
    several = _several()
    other = re2_search(several.pattern) if several.pattern else None
    if search is None or other is None:
        return search
    holds = utf8_starts(several.codes)
    known: tuple[bytes | None, bool, int, int] = (None, False, 0, -1)  # data, holds, searched from, found

    def either(data: bytes, pos: int) -> int:
        nonlocal known
        at = search(data, pos)
        seen, held, since, found = known
        if seen is not data:
            held, since, found = holds(data), -1, -1
        if held and not (0 <= since <= pos and (found < 0 or found >= pos)):
            since, found = pos, other(data, pos)
        # (forgotten once neither search finds more: the look is over, and the text not kept alive)
        known = (data, held, since, found) if at >= 0 or (held and found >= 0) else (None, False, 0, -1)
        if not held or found < 0:
            return at
        return found if at < 0 else min(at, found)
    return either


@cache
def crowded_string_search() -> Callable[[bytes, int], int] | None:
    """Where, at or after byte `pos`, UTF-8 JSON text without escapes next holds a string with more
    invisible characters than `text_normal.MAX_INVISIBLE_KINDS` (so possibly more kinds of them than
    it cleans; -1: none); None without RE2."""
    from ito_training_mcp.text_normal import MAX_INVISIBLE_KINDS

    invisible = secret_rules.invisible_class(True, nul=False)
    # lazily: the match, and the search, end at the last one counted
    return re2_search(f'{invisible}(?:[^"]*?{invisible}){{{MAX_INVISIBLE_KINDS}}}')


class _Anchor(NamedTuple):
    anchor: str
    fold: bool
    steps: list[str]  # for each starter of its NFKD, a character that gives it (marks after, where it takes them)
    starters: list[int]
    marks_after: list[bool]  # whether marks may follow each starter
    members: list[list[int]]  # the characters that give each starter


class _Pieces(NamedTuple):
    members: Callable[[int, bool], list[int]]
    gap: str  # invisible characters, between two characters of an anchor
    between: list[tuple[int, int]]  # marks and invisible characters, as runs
    marks_between: str
    long_run: str  # a run of marks too long to normalise
    anchors: list[_Anchor]


@cache
def _pieces() -> _Pieces:
    """What the patterns of text in any form are made of (built once)."""
    import re2

    from ito_training_mcp.text_normal import COMBINING_RUN_MAX

    table = _starters()
    folded_starters = "".join(map(chr, table.by_starter))

    @cache
    def members(starter: int, fold: bool) -> list[int]:
        """The characters that give `starter` (or, under case folding, one that folds with it)."""
        found = {starter, *table.by_starter.get(starter, ())}
        if fold:  # the starters of decompositions that RE2 takes for this one, without case
            folding = re2.compile(f"(?i:\\x{{{starter:x}}})")
            for match in folding.finditer(folded_starters):
                other = ord(match.group())
                found |= {other, *table.by_starter[other]}
        return sorted(found)

    invisible = [code for low, high in secret_rules.INVISIBLE_RANGES if low for code in range(low, high + 1)]
    gap = re2_class(runs(invisible)) + "*"
    marks_only = [*(c for low, high in marks() for c in range(low, high + 1)), *table.marks_only]
    between = runs([*marks_only, *invisible])
    marks_between = re2_class(between) + "*"
    # The cleaning counts a run of marks again once invisible characters are out, in the NFKC of the
    # string, where a character may stand for up to `most_marks` of them (U+0F73 for two): a run
    # longer than COMBINING_RUN_MAX there can come from this many characters of marks alone in a
    # row (invisible ones between), after a letter bringing up to `most_marks` of its own.
    run = -(-(COMBINING_RUN_MAX + 1 - table.most_marks) // table.most_marks)
    mark = re2_class(runs(marks_only))
    anchors = []
    for anchor, fold in _anchors():
        steps: list[str] = []
        starters: list[int] = []
        marks_after: list[bool] = []
        for letter in anchor:
            decomposed = unicodedata.normalize("NFKD", letter)
            own = [ord(c) for c in decomposed if not unicodedata.combining(c)]
            steps += [re2_class(runs(members(starter, fold))) for starter in own]
            starters += own
            marked = _takes_marks(letter, fold)
            marks_after += [False] * (len(own) - 1) + [marked]
            if marked:
                steps[-1] += marks_between
        anchors.append(_Anchor(anchor, fold, steps, starters, marks_after,
                               [members(starter, fold) for starter in starters]))
    return _Pieces(members, gap, between, marks_between, f"{mark}(?:{gap}{mark}){{{run - 1}}}", anchors)


def any_form_pattern(values: bool = False) -> str:
    """RE2's pattern of every place where the `text_normal.normalize` of a string of UTF-8 text in any
    form could hold an anchor of a format or a credential key-name stem (see above; invisible
    characters may stand anywhere between the characters that give its starters, since the cleaning
    removes them); of a run of combining marks too long to normalise once they are removed; and of
    every character this pattern cannot follow (Hangul syllables, and those whose NFKD holds an
    invisible character), or that gives a whole anchor alone. A character of several starters that
    could give part of an anchor (a ligature, a fraction) is a place of its own too, but with `values`
    (for `any_form_value_search`), where the places it makes are `several_pattern`'s."""
    pieces = _pieces()
    several = _several()
    alone = {*_starters().unsure, *several.alone, *(() if values else several.codes)}
    patterns = [re2_class(runs(alone)), pieces.long_run]
    # Anchors that the same pattern must follow share one copy of it: RE2's DFA then follows one such
    # tail at a time, whichever anchor began it (a copy for each made the benchmark's soup of token
    # prefixes cut short by a few characters, one after another, 150 ms a mebibyte to search).
    tails: dict[str, list[str]] = {}
    keyed: dict[str, list[str]] = {}  # the anchors' occurrences that only a key makes places (`value_tail`)
    after_colon: dict[str, str] = {}  # `_after_colon`
    for anchor, fold, steps, starters, marks_after, _ in pieces.anchors:
        marked = marks_after[-1]  # whether marks may follow the last letter
        tail, in_key = value_tail(anchor, marked, pieces.between) if values else ("", None)

        def heads(steps: list[str] = steps, marked: bool = marked, last: int = starters[-1],
                  fold: bool = fold) -> tuple[str, str | None]:
            """The anchor's pattern up to what must follow its last starter, and the pattern of its
            occurrences that are places whatever follows them (None for none)."""
            def body(steps: list[str]) -> str:
                joined = pieces.gap.join(steps)
                return f"(?i:{joined})" if fold else joined
            if marked:
                return body(steps), None
            # The stops count only after a character that gives the last starter alone: one whose NFKD
            # holds marks too ("ñ" for the "n" of "token") is a place whatever follows it. (The last
            # letter's last starter: the final jamo of a Korean anchor's last syllable.)
            plain, with_marks = _plain_members(pieces.members(last, fold))
            return (body([*steps[:-1], re2_class(runs(plain))]),
                    body([*steps[:-1], re2_class(runs(with_marks))]) if with_marks else None)

        if values and anchor in secret_rules.AFTER_COLON:
            joined = pieces.gap.join(steps)  # (no stops and no reach: a match may end with it)
            after_colon[anchor] = f"(?i:{joined})" if fold else joined
            continue
        for after, into in ((None if tail is None else tail or ("" if marked else stop_tail(anchor)), tails),
                            (in_key, keyed)):
            if after is None:
                continue
            head, whatever = heads()
            if not after:  # (a place whatever follows it)
                whole = pieces.gap.join(steps)
                into.setdefault("", []).append(f"(?i:{whole})" if fold else whole)
                continue
            into.setdefault(after, []).append(head)
            if whatever is not None:
                into.setdefault("", []).append(whatever)
    patterns += [f"(?:{'|'.join(bodies)}){after}" for after, bodies in tails.items()]
    return "|".join([*patterns, *_after_colon(after_colon, pieces.gap),
                     *_in_keys([f"(?:{'|'.join(bodies)}){after}" for after, bodies in keyed.items()])])


class _Several(NamedTuple):
    alone: frozenset[int]  # characters of several starters among whose starters an anchor lies
    pattern: str  # where others give part of one (`several_starters.places`); "" for none
    codes: frozenset[int]  # the characters of several starters that pattern holds


@cache
def _several() -> _Several:
    """The places characters of several starters make (see several_starters.py; built once)."""
    import re2

    pieces = _pieces()
    several = _starters().several
    starters_text = "".join(sorted({chr(c) for _, own in several for c in own}))

    @cache
    def folding(starter: int) -> frozenset[int]:
        """The starters of characters of several starters that RE2 takes for this one, without case."""
        folds = re2.compile(f"(?i:\\x{{{starter:x}}})")
        return frozenset(ord(match.group()) for match in folds.finditer(starters_text))

    alone: set[int] = set()
    codes: set[int] = set()
    patterns: list[str] = []
    ending: dict[tuple[str, bool], set[int]] = {}  # characters that end an anchor, by what precedes them
    for _, fold, steps, starters, marks_after, members in pieces.anchors:
        fitting = [frozenset(own) | (folding(starter) if fold else frozenset())
                   for own, starter in zip(members, starters, strict=True)]
        anchors_own = frozenset().union(*fitting)  # (most characters hold none of them)

        def fits(starter: int, i: int, fitting: list[frozenset[int]] = fitting) -> bool:
            return starter in fitting[i]

        found = several_starters.spelt(len(starters), fits,
                                       [(code, own) for code, own in several if not anchors_own.isdisjoint(own)])
        alone |= found.alone
        codes.update(*found.exact.values(), *found.begins.values(), *found.ends.values())
        made, ended = several_starters.places(steps, marks_after, found, lambda chars: re2_class(runs(chars)),
                                              pieces.gap, pieces.marks_between)
        patterns += [f"(?i:{pattern})" if fold else pattern for pattern in made]
        for before, chars in ended.items():
            ending.setdefault((before, fold), set()).update(chars)
    patterns += [f"(?i:{before}{klass})" if fold else before + klass
                 for (before, fold), chars in sorted(ending.items()) for klass in [re2_class(runs(chars))]]
    return _Several(frozenset(alone), "|".join(patterns), frozenset(codes))


def _plain_members(codes: list[int]) -> tuple[list[int], list[int]]:
    """`codes` split into those whose NFKD holds no mark and the others."""
    plain = [code for code in codes if not any(map(unicodedata.combining, unicodedata.normalize("NFKD", chr(code))))]
    return plain, sorted(set(codes).difference(plain))
