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
none) or composes with it into another character than the anchor's. Hangul syllables decompose into
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

from . import secret_rules

# Non-starters lie in U+0300..U+1FFFF (text_normal checks the same bound for its run search).
_LAST_NON_STARTER = 0x1FFFF


@cache
def _marks() -> tuple[tuple[int, int], ...]:
    ranges: list[tuple[int, int]] = []
    for code in range(0x300, _LAST_NON_STARTER + 1):
        if unicodedata.combining(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return tuple(ranges)


def _anchor(anchor: str, fold: bool, char: Callable[[int], str], marks: str) -> str:
    parts = []
    for letter in anchor:
        decomposed = unicodedata.normalize("NFKD", letter)
        starters = "".join(c for c in decomposed if not unicodedata.combining(c))
        parts.append("".join(char(ord(c)) for c in starters))
        if starters != decomposed:
            parts.append(marks + "*")
    body = "".join(parts)
    return f"(?i:{body})" if fold else body


def pattern(re2: bool) -> str:
    """Every anchor of a format and every credential key-name stem, as decomposed text spells it, and
    every invisible character but NUL (RE2's syntax, or Python's): a text holding one is cleaned
    and searched as before, since removing it can bring an anchor together. A text in NFKD holds
    every invisible character its NFKC holds (composition makes none)."""
    def char(code: int) -> str:
        if code < 0x80:
            return re.escape(chr(code))
        return f"\\x{{{code:x}}}" if re2 else f"\\U{code:08x}"

    marks = "[" + "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in _marks()) + "]"
    anchors = {(anchor, rule.fold) for rule in secret_rules.RULES for anchor in rule.anchors}
    anchors |= {(stem, True) for stem in secret_rules.KEY_NAME_STEMS}
    invisible = secret_rules.invisible_class(re2, nul=False)  # which the scanner removes before it looks
    return "|".join([invisible, *(_anchor(anchor, fold, char, marks) for anchor, fold in sorted(anchors))])
