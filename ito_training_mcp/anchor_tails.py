"""What must follow an anchor of the secret scanner for an occurrence of it to be a place, in the
searches of decomposed_anchors.py: the stops of `secret_rules.ANCHOR_STOPS` (`stop_tail`), and in a
JSON value those of `secret_rules.VALUE_STOPS` (`value_tail`)."""

from __future__ import annotations

import unicodedata
from functools import cache

from . import secret_rules
from .invisible import re2_class, runs


def stop_tail(anchor: str) -> str:
    """What must follow `anchor` for it to be a place, in RE2's syntax and Python's alike: anything
    but one of its stop characters (`secret_rules.ANCHOR_STOPS`) that an ASCII character other than
    NUL, or the end, follows; "" for an anchor without stops. Why such an occurrence is none: the
    anchor's last letter is its own NFKD, one starter alone (the callers see that no marks may follow
    it) and the stop is ASCII, and so is what follows it, so NFKC leaves the stop as it is, right
    after that letter (an ASCII character is never the second of a pair that composes, and one
    followed by another ASCII character composes with nothing); and the cleaning removes nothing
    between them, nor right after the stop (NUL is invisible: removed, it would let a mark after it
    compose with the stop, as an attacker review found). A text in which the stop is followed by
    anything else (a mark, an invisible character, NUL, any character that is not ASCII) is a place,
    as before: the search finds a little more than it must."""
    stops = secret_rules.ANCHOR_STOPS.get(anchor)
    if stops is None or unicodedata.normalize("NFKD", anchor[-1]) != anchor[-1]:
        return ""
    return f"(?-i:[^{stops}]|[{stops}][^\\x01-\\x7f]|$)"  # (its case as written, inside a search without)


# The letters and digits after which (or after blanks and one of them) an anchor of VALUE_STOPS in a
# value is no place. Why such a letter stands in the cleaning of the string too, right after the anchor
# or its blanks: it is a starter that NFKC leaves as it is and that composes with nothing before it (it
# is none of COMPOSING), so NFKC gives it, or it composed with marks after it, which is a letter or
# digit too (a test checks every such composition); the cleaning removes neither. Code points of the
# Basic Multilingual Plane only: a letter beyond it is a place, as before.
_VALUE_LETTER_BLOCKS = ((0x30, 0x7F), (0xC0, 0x24F), (0x370, 0x52F), (0x5D0, 0x5EA), (0x620, 0x64A), (0x3041, 0x30FF),
                        (0x4E00, 0x9FFF), (0xAC00, 0xD7A3))


@cache
def value_letters() -> tuple[tuple[int, int], ...]:
    """The letters and digits of `value_tail`, as (low, high) runs (~20 ms, once)."""
    from .decomposed_anchors import COMPOSING

    invisible = {code for low, high in secret_rules.INVISIBLE_RANGES for code in range(low, high + 1)}
    composing = {code for low, high in COMPOSING for code in range(low, high + 1)}
    return tuple(runs(code for low, high in _VALUE_LETTER_BLOCKS for code in range(low, high + 1)
                      if chr(code).isalnum() and not 0xD800 <= code < 0xE000 and not unicodedata.combining(chr(code))
                      and code not in invisible and code not in composing
                      and unicodedata.is_normalized("NFKC", chr(code))))


@cache
def _letters_but(chars: str) -> list[tuple[int, int]]:
    """`value_letters` but `chars`, as runs."""
    left = frozenset(map(ord, chars))
    return runs(code for low, high in value_letters() for code in range(low, high + 1) if code not in left)


# The rest of a string that is a key, in JSON text without escapes: one pattern after every occurrence
# that only a key makes a place (`value_tail`), so that RE2's DFA follows one such rest at a time
# however many occurrences a string holds (one for each anchor crowded it out of memory: an attacker
# review's labels of a dozen credential words took 1.5 s a mebibyte).
KEY_REST = '[^"]*"[ \\t\\r\\n]*:'


def value_tail(anchor: str, marked: bool, between: list[tuple[int, int]]) -> tuple[str, str]:
    """RE2's patterns of what must follow `anchor` (in text as it stands, in a JSON text without
    escapes) for it to be a place, where `secret_rules.VALUE_STOPS` names it: anything but a letter of
    `value_letters` other than `s` and but ASCII blanks, or blanks and then anything but such a letter
    (the first pattern); and such a letter, or blanks and one, in a string that is a key (the second,
    which KEY_REST must follow: the letter or the blanks end a credential key name there). One of the
    anchor's `ANCHOR_STOPS` that an ASCII character other than NUL follows stays no place in a key
    too. `marked`: marks may follow the anchor's last letter (the pattern before this takes them, and
    invisible characters: `between`, which the first pattern then leaves out of what makes a place).
    ("", "") for an anchor VALUE_STOPS does not name."""
    if anchor not in secret_rules.VALUE_STOPS:
        return "", ""
    letters = list(value_letters())
    without_s = _letters_but("s")  # `s` goes on to "tokens" and "id_tokens="
    blanks = [(0x9, 0x9), (0x20, 0x20)]
    other = "[^" + re2_class(sorted([*without_s, *blanks, *(between if marked else [])]))[1:]
    stops = secret_rules.ANCHOR_STOPS.get(anchor) if not marked and stop_tail(anchor) else None
    if stops:
        letter = f"(?:[{stops}][^\\x01-\\x7f]|{re2_class(_letters_but('s' + secret_rules.boundary_chars(stops)))})"
    else:
        letter = re2_class(without_s)
    after_blanks = "[^" + re2_class([*letters, *blanks])[1:]
    return (f"(?-i:{other}|$|[ \\t]+(?:{after_blanks}|$))",
            f"(?-i:{letter}|[ \\t]+{re2_class(letters)})")


def in_keys(keyed: list[str]) -> list[str]:
    """The one pattern of the occurrences that only a key makes places (`KEY_REST` after them all)."""
    return ["(?:" + "|".join(keyed) + ")" + KEY_REST] if keyed else []
