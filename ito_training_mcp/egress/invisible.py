"""Characters that show as nothing: one list for the manifest's character rule and for the egress.

Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties, Unicode 14, Python 3.11's
database; a test compares this table with the property where a Unicode database that has it is
installed) lists the characters a renderer may draw as nothing at all: soft hyphen, combining
grapheme joiner, the Hangul fillers, the Khmer inherent vowels, Mongolian and other variation
selectors, zero-width spaces and joiners, bidi marks, the word joiner and invisible operators, the
byte-order mark, tag characters. Python calls some of them printable (U+034F, U+17B5, U+FE0F,
U+3164 ...), so "printable" alone lets them through. Added: U+2800 BRAILLE PATTERN BLANK, which is
not default-ignorable but draws as an empty cell.

A manifest may hold none of them (class `invisible`); every string that leaves shows each one as
`⟨U+XXXX⟩` (`egress.escape`).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from functools import cache
from itertools import compress

DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
BLANK_LOOKALIKES: tuple[tuple[int, int], ...] = ((0x2800, 0x2800),)
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = tuple(sorted(DEFAULT_IGNORABLE + BLANK_LOOKALIKES))
INVISIBLE_POINTS = frozenset(c for low, high in INVISIBLE_RANGES for c in range(low, high + 1))


def character_class(ranges: tuple[tuple[int, int], ...] = INVISIBLE_RANGES) -> str:
    """The ranges as the inside of a regular-expression class, characters written raw."""
    return "".join(chr(low) if low == high else f"{chr(low)}-{chr(high)}" for low, high in ranges)


_INVISIBLE = re.compile(f"[{character_class()}]")


def has_invisible(text: str) -> bool:
    """Does `text` hold a character of `INVISIBLE_RANGES`? (None is ASCII: ASCII text costs nothing;
    in text of Latin-1 alone only U+00AD can be, one byte search; a long text in other scripts is
    searched in UTF-8, by RE2 after a look at its bytes: Python's `re` takes ~9 ns a character to
    search a class, and the egress looks at a review of a mebibyte several times.)"""
    if text.isascii():
        return False
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        if len(text) > _LONG_TEXT and (search := _utf8_search()) is not None:
            return search(text.encode("utf-8", "surrogatepass"))
        return _INVISIBLE.search(text) is not None
    return "\xad" in text


_LONG_TEXT = 4096


@cache
def _utf8_search() -> Callable[[bytes], bool] | None:
    try:
        import re2  # type: ignore[import-untyped]  # no type information shipped
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        return None
    options = re2.Options()
    options.never_capture = True
    compiled = re2.compile(re2_class(INVISIBLE_RANGES), options)
    begun = utf8_starts(INVISIBLE_POINTS)
    return lambda data: begun(data) and compiled.search(data) is not None


def is_invisible(ch: str) -> bool:
    return ord(ch) in INVISIBLE_POINTS


def shows(ch: str) -> bool:
    """Is this one character shown as itself: printable, and not one that shows as nothing? (The
    egress writes every other as `⟨U+XXXX⟩`; gate 2's look at the bytes asks the same question.)"""
    return ch.isprintable() and not is_invisible(ch)


# From here on (planes 4 to 16: unassigned, tag characters, variation selectors, private use) no
# character shows as itself in any Unicode version so far; they are taken whole, without asking.
# Taking more than needed is safe: a search for them then only says "not known".
NOT_SHOWN_WHOLE_FROM = 0x40000
_LAYOUT = (0x09, 0x0A, 0x0D)  # the only raw control characters in strict JSON, and only between its tokens


@cache
def not_shown_ranges() -> tuple[tuple[int, int], ...]:
    """Every code point that `shows` says no to, but tab, newline and carriage return, and but the
    surrogates (never in UTF-8), as sorted (low, high) runs: from this Python's own Unicode database,
    so that a search of UTF-8 for them agrees with the egress (~50 ms, once)."""
    below = range(NOT_SHOWN_WHOLE_FROM)
    points = set(compress(below, map(operator.not_, map(str.isprintable, map(chr, below)))))
    points.update(c for c in INVISIBLE_POINTS if c < NOT_SHOWN_WHOLE_FROM)
    points.difference_update(_LAYOUT, range(0xD800, 0xE000))
    return (*runs(points), (NOT_SHOWN_WHOLE_FROM, 0x10FFFF))  # (a run may end where the next begins)


def runs(points: Iterable[int]) -> list[tuple[int, int]]:
    """Code points as sorted (low, high) runs."""
    ranges: list[tuple[int, int]] = []
    for point in sorted(points):
        if ranges and ranges[-1][1] == point - 1:
            ranges[-1] = (ranges[-1][0], point)
        else:
            ranges.append((point, point))
    return ranges


def re2_class(ranges: Iterable[tuple[int, int]]) -> str:
    """(low, high) runs as an RE2 character class over UTF-8."""
    return "[" + "".join(f"\\x{{{low:x}}}-\\x{{{high:x}}}" for low, high in ranges) + "]"


def utf8_starts(points: Iterable[int]) -> Callable[[bytes], bool]:
    """A quick look at UTF-8 bytes: could they hold one of these code points? False only when none of
    the bytes that begin one is there (with the byte after it, where few points share the first), a
    few byte searches. A filter before a full search: most text holds none of them."""
    starts: dict[bytes, set[bytes]] = {}
    for point in points:
        encoded = chr(point).encode("utf-8", "surrogatepass")
        starts.setdefault(encoded[:1], set()).add(encoded[:2])
    leads = [(lead, sorted(pairs)) for lead, pairs in sorted(starts.items())]
    return lambda data: any(lead in data and (len(pairs) > 2 or any(pair in data for pair in pairs))
                            for lead, pairs in leads)
