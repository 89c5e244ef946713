"""Three questions about a manifest's UTF-8 bytes, answered by one pass.

Gate 2 asks several things of a manifest in other scripts, each of which used to be a search of all
of its bytes (~2.5-3 ms a mebibyte each, against ~4 ms for `sha256` and `json.loads` together):

- does a key or string hold a character the egress would escape (`invisible.not_shown_ranges`:
  not printable, or showing as nothing; every forbidden character of the character rule is one)?
- does the text hold a character that NFKC may compose with the one before it
  (`decomposed_anchors.COMPOSING`)?
- does it hold an anchor of the secret scanner, as written (the engine's any-anchor search)?
- does it hold a character the manifest's character rule forbids (raw; C0 is layout there)?
- does it hold a character whose NFKD holds several starters (a ligature, a fraction), which the
  scanner's search in any form follows with a search of its own (`decomposed_anchors.several_pattern`)?
- could it be other than in NFKC, and could it be other than in NFKD? Unicode's quick check says a
  text is in a form when it holds no character whose quick-check value for that form is other than
  Yes, and no non-starter follows one of a higher combining class; that answer is final (UAX #15).
  The characters are those the form changes when they stand alone (`unicodedata`), and for NFKC
  also those that may compose with the one before (`COMPOSING`); each adjacent pair out of
  canonical order is a pattern of its own.

RE2's set search answers all of them in one pass, at the cost of one search: it reports which of
the patterns occur anywhere, not where. A valid manifest usually holds none, and then nothing else
needs to look; when one occurs, the code that asked looks for it itself, as it would have. Only with
RE2 (a dependency): without it there are no facts, and every question is asked the long way.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from itertools import compress
from typing import Any, NamedTuple

from ito_training_mcp.egress.invisible import re2_class, runs


class ByteFacts(NamedTuple):
    """Which questions' patterns occur somewhere in the bytes (True: at least once; False: nowhere)."""

    not_shown: bool  # a character the egress would escape (layout aside)
    composing: bool  # a character NFKC may compose with the one before
    anchor: bool  # an anchor of the secret scanner, as written
    nfkc_unsure: bool  # False: the text is in NFKC (certain)
    nfkd_unsure: bool  # False: the text is in NFKD (certain)
    forbidden: bool  # a character the manifest's character rule forbids, raw (manifest_characters)
    long_run: bool  # more non-starters in a row than text_normal.COMBINING_RUN_MAX
    several: bool  # a character whose NFKD holds two starters or more, but a Hangul syllable (a ligature)


_NOT_SHOWN, _COMPOSING, _ANCHOR, _NFKC_UNSURE, _NFKD_UNSURE, _FORBIDDEN, _LONG_RUN, _SEVERAL = range(8)
_SEARCHED = len(ByteFacts._fields)  # the end of the text: every text the search went through holds it


def facts(data: bytes) -> ByteFacts | None:
    """The facts of UTF-8 `data`, in one pass; None without RE2, or when the search did not go through
    (RE2's set search answers "none" when its automaton does not fit in memory: the pattern of the
    text's end, which every text holds, is then missing too)."""
    search = _set_search()
    if search is None:
        return None
    found = set(search.Match(data) or ())
    if _SEARCHED not in found:
        return None
    return ByteFacts(*(index in found for index in range(_SEARCHED)))


# Every character with a decomposition lies below U+30000 (the CJK compatibility ideographs end at
# U+2FA1D); every non-starter below U+20000 (text_normal's bound). A test checks both.
_DECOMPOSING_BELOW = 0x30000
_HANGUL_SYLLABLES = range(0xAC00, 0xD7A4)  # decomposed by rule, not by a mapping in the database


@cache
def _decomposing() -> tuple[int, ...]:
    below = range(_DECOMPOSING_BELOW)
    return tuple(compress(below, map(bool, map(unicodedata.decomposition, map(chr, below)))))


@cache
def nfkd_changed() -> tuple[int, ...]:
    """Every code point NFKD changes when it stands alone (from this Python's `unicodedata`).
    Hangul syllables: NFKD takes each apart, NFKC leaves each as it is (a test checks every one)."""
    return (*(c for c in _decomposing() if unicodedata.normalize("NFKD", chr(c)) != chr(c)), *_HANGUL_SYLLABLES)


@cache
def nfkc_changed() -> tuple[int, ...]:
    """Every code point NFKC changes when it stands alone (from this Python's `unicodedata`)."""
    return tuple(c for c in _decomposing() if unicodedata.normalize("NFKC", chr(c)) != chr(c))


@cache
def several_starters() -> tuple[int, ...]:
    """Every code point whose NFKD holds two starters or more, but the Hangul syllables (~10 ms, once)."""
    return tuple(c for c in _decomposing() if c not in _HANGUL_SYLLABLES and sum(
        not unicodedata.combining(part) for part in unicodedata.normalize("NFKD", chr(c))) > 1)


@cache
def normal_form_patterns() -> tuple[str, str]:
    """The patterns of "could be other than in NFKC" and "... NFKD", from this Python's `unicodedata`
    (~40 ms, once): the characters that form changes alone, or (NFKC) that may compose; or a
    non-starter right after one of a higher combining class."""
    from ito_training_mcp.decomposed_anchors import COMPOSING
    from ito_training_mcp.text_normal import last_plane_with_non_starters

    nfkd_changes = list(nfkd_changed())
    nfkc_changes = list(nfkc_changed())
    composing = [c for low, high in COMPOSING for c in range(low, high + 1)]
    by_class: dict[int, list[int]] = {}
    marks = range(0x300, last_plane_with_non_starters() + 1)
    for code, combining in zip(marks, map(unicodedata.combining, map(chr, marks)), strict=True):
        if combining:
            by_class.setdefault(combining, []).append(code)
    classes = sorted(by_class)
    out_of_order = "|".join(
        re2_class(runs(c for higher in classes[i + 1:] for c in by_class[higher])) + re2_class(runs(by_class[lower]))
        for i, lower in enumerate(classes[:-1]))
    return (f"{re2_class(runs(nfkc_changes + composing))}|{out_of_order}",
            f"{re2_class(runs(nfkd_changes))}|{out_of_order}")


@cache
def _set_search() -> Any:
    """Compiled at first use (~100 ms with the tables of `not_shown_ranges` and
    `normal_form_patterns`, once)."""
    from ito_training_mcp.decomposed_anchors import COMPOSING
    from ito_training_mcp.egress.invisible import not_shown_ranges
    from ito_training_mcp.gates.manifest.characters import forbidden_raw_ranges
    from ito_training_mcp.secret_engine import default_engine

    anchors = getattr(default_engine(), "anchor_pattern", None)
    if anchors is None:  # the Python engine: RE2 is not installed
        return None
    import re2  # type: ignore[import-untyped]  # no type information shipped

    options = re2.Options()
    options.never_capture = True
    options.max_mem = 64 << 20
    search = re2.Set.SearchSet(options)
    from ito_training_mcp.text_normal import combining_run_pattern

    nfkc, nfkd = normal_form_patterns()
    for index, pattern in ((_NOT_SHOWN, re2_class(not_shown_ranges())), (_COMPOSING, re2_class(COMPOSING)),
                           (_ANCHOR, anchors), (_NFKC_UNSURE, nfkc), (_NFKD_UNSURE, nfkd),
                           (_FORBIDDEN, re2_class(forbidden_raw_ranges())), (_LONG_RUN, combining_run_pattern()),
                           (_SEVERAL, re2_class(runs(several_starters()))), (_SEARCHED, r"\z")):
        if search.Add(pattern) != index:
            raise RuntimeError("byte_facts: RE2 numbered a pattern otherwise")
    search.Compile()
    # RE2's set search answers "none" when its automaton cannot be built within its memory: a text
    # holding an answer to every question must get every answer, or there are no facts (the long way).
    if set(search.Match(_EVERY_ANSWER) or ()) != set(range(_SEARCHED + 1)):
        return None
    return search


# A no-break space (not shown), a combining acute (may compose), "password" (an anchor), a full-width
# f (NFKC and NFKD change it), a zero-width space (forbidden), a run of 31 combining acutes, a ligature.
_EVERY_ANSWER = ("\u00a0e\u0301 password \uff46 \u200b a" + "\u0301" * 31 + " \ufb01").encode()
