"""Which characters may compose with the one before them under NFKC (`COMPOSING`), the looks at a
text that tell whether it holds one, and every non-starter (`marks`): what the searches for anchors
in decomposed text (decomposed_anchors.py) and the normalisers (nfkc.py, text_normal.py) ask."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import cache
from typing import Any

from ito_training_mcp.egress.invisible import re2_class, utf8_starts

# The characters that may compose with the one before them (NFKC's quick check says "maybe" for
# them): the second of each canonical pair that composes, and the Hangul vowel and final jamo. A text
# in NFKD that holds none of them is in NFKC too, and is searched as it stands (a test checks the
# list against unicodedata).
COMPOSING: tuple[tuple[int, int], ...] = (
    (0x300, 0x304), (0x306, 0x30C), (0x30F, 0x30F), (0x311, 0x311), (0x313, 0x314), (0x31B, 0x31B),
    (0x323, 0x328), (0x32D, 0x32E), (0x330, 0x331), (0x338, 0x338), (0x342, 0x342), (0x345, 0x345),
    (0x653, 0x655), (0x93C, 0x93C), (0x9BE, 0x9BE), (0x9D7, 0x9D7), (0xB3E, 0xB3E), (0xB56, 0xB57),
    (0xBBE, 0xBBE), (0xBD7, 0xBD7), (0xC56, 0xC56), (0xCC2, 0xCC2), (0xCD5, 0xCD6), (0xD3E, 0xD3E),
    (0xD57, 0xD57), (0xDCA, 0xDCA), (0xDCF, 0xDCF), (0xDDF, 0xDDF), (0x102E, 0x102E), (0x1161, 0x1175),
    (0x11A8, 0x11C2), (0x1B35, 0x1B35), (0x3099, 0x309A), (0x110BA, 0x110BA), (0x11127, 0x11127),
    (0x1133E, 0x1133E), (0x11357, 0x11357), (0x114B0, 0x114B0), (0x114BA, 0x114BA), (0x114BD, 0x114BD),
    (0x115AF, 0x115AF), (0x11930, 0x11930),
)


@cache
def _composing_search() -> Callable[[Any], bool]:
    begun = _composing_begun()
    python = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in COMPOSING) + "]")
    try:
        import re2  # type: ignore[import-untyped]  # no type information shipped
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        compiled = None
    else:
        options = re2.Options()
        options.never_capture = True
        compiled = re2.compile(re2_class(COMPOSING), options)

    def search(data: Any) -> bool:
        if isinstance(data, str):
            return python.search(data) is not None
        return begun(data) and (compiled.search(data) if compiled is not None else
                                python.search(data.decode("utf-8", "surrogatepass"))) is not None
    return search


def holds_latin_marks(data: Any) -> bool:
    """Does `data` (as an engine prepared it) hold a combining mark of U+0300..U+036F, the marks of
    Latin, Greek and Cyrillic? Two byte searches in UTF-8 (they all begin with 0xCC or 0xCD); for
    text, False (the caller then asks NFKC's own look)."""
    return isinstance(data, bytes) and (b"\xcc" in data or b"\xcd" in data)


def may_compose(data: Any) -> bool:
    """Could NFKC compose anything in `data` (a text in NFKD, as an engine prepared it)? False: the
    text is in NFKC as well. A look at the bytes that begin such a character, then one search."""
    return _composing_search()(data)


def composing_begun(data: bytes) -> bool:
    """The look at UTF-8 bytes alone: False when they hold no byte that begins a character that may
    compose with the one before (a few byte searches; most scripts' bytes show none)."""
    return _composing_begun()(data)


@cache
def _composing_begun() -> Callable[[bytes], bool]:
    return utf8_starts(c for a, b in COMPOSING for c in range(a, b + 1))


# Non-starters lie in U+0300..U+1FFFF (text_normal checks the same bound for its run search).
_LAST_NON_STARTER = 0x1FFFF


@cache
def marks() -> tuple[tuple[int, int], ...]:
    """Every non-starter (a combining class other than 0), as (low, high) runs."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x300, _LAST_NON_STARTER + 1):
        if unicodedata.combining(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return tuple(ranges)
