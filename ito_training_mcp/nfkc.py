"""NFKC, the same answer as `unicodedata.normalize("NFKC", text)`, without CPython's slow path where
it can be avoided.

CPython normalises a text that is not normal already in full: it decomposes every character and then
composes again, and its composition looks each character up in a table with a linear search, so a
character far into the code space costs most. Measured per character: 25 ns for ASCII, 60-100 ns for
Latin-1, Cyrillic or Devanagari, 140 ns for Chinese, 210 ns for kana. One full-width comma in a
mebibyte of Japanese costs 70 ms that way; `sha256` and `json.loads` of the same bytes take 3 ms.

Most such text changes in a few characters only (full-width punctuation, a no-break space), and its
NFKC is then those characters replaced, which `str.replace` does at memory speed. Why that is exact:

- Call a character *notable* when NFKC changes it standing alone, when it is a non-starter
  (combining class other than 0), or when NFKC may compose it with the character before it
  (`decomposed_anchors.COMPOSING`). Every other character is unchanged by NFKC alone, and its NFKD
  begins with a starter that composes with nothing before it (a test checks every character).
- NFKD works character by character, and canonical reordering and composition work within the
  stretch from one such starter to the next. In a text without a notable character each stretch
  is one character's NFKD, whose NFKC is the character itself: the text is in NFKC.
- Replacing a character by its own NFKC never changes a text's NFKC: the two have the same NFKD.

So the notable characters are found (a search of the UTF-8 for the first, then the kinds in a window
of text after it), each kind that NFKC changes is replaced by its NFKC everywhere, and the search
goes on from where it was. A non-starter or a composing character, more kinds than KINDS, or more
windows than ROUNDS hands the text to `unicodedata`, which is exact whatever the text (a partly
replaced text has the same NFKC). A short text, and without RE2 a long one, goes to `unicodedata`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import cache

from . import byte_facts, decomposed_anchors
from .invisible import re2_class, runs

KINDS = 16  # kinds of character replaced one by one; past them, `unicodedata` (each kind costs a pass)
ROUNDS = 3  # windows of kinds replaced, each followed by a search of the rest; past them, `unicodedata`
SHORT = 1024  # characters: a text no longer than this goes to `unicodedata` (it costs little there)
WINDOW = 4096  # bytes after the first notable character whose kinds are replaced together


SLOW = 8  # what `unicodedata`'s NFKC costs a character, in passes of a search over a byte of it


def nfkc(text: str, data: bytes | None = None, made: list[int] | None = None) -> str:
    """`unicodedata.normalize("NFKC", text)`. `data`: the UTF-8 of `text`, if the caller has it.
    `made`, if given, gets what it cost, in bytes of search: a pass over the text made, each round,
    or SLOW of them where `unicodedata` normalised it (a bounded caller pays for it).

    Unicode's quick check settles a text in NFKC at memory speed, but CPython's answers "maybe" for a
    text holding a character that may compose, and then normalises all of it to tell. So the quick
    check goes first only where the bytes show that no such character can be there; otherwise the
    search for notable characters goes first, which finds one and hands the text to `unicodedata`
    once (or finds none: the text is in NFKC)."""
    if text.isascii():
        return text
    search = _notable_search() if len(text) > SHORT else None
    if search is None:  # a short text costs `unicodedata` little; a long one without RE2 goes there too
        return _slow(text, made)
    data = text.encode("utf-8", "surrogatepass") if data is None else data
    if not decomposed_anchors.composing_begun(data) and unicodedata.is_normalized("NFKC", text):
        return text
    left, rounds = KINDS, ROUNDS
    at = search(data, 0)
    while at >= 0:
        kinds = _notable().intersection(data[at:at + WINDOW].decode("utf-8", "ignore"))
        rounds -= 1
        replaced = _replaced(text, kinds) if len(kinds) <= left and rounds >= 0 else None
        if replaced is None:
            return _slow(text, made)  # the same NFKC as the text given
        left -= len(kinds)
        text = replaced
        data = text.encode("utf-8", "surrogatepass")
        if made is not None:
            made.append(len(data))
        at = search(data, at)  # nothing before `at` was notable, nor changed
    return text


def _slow(text: str, made: list[int] | None) -> str:
    normal = unicodedata.normalize("NFKC", text)
    if made is not None and normal is not text:
        made.append(SLOW * max(len(text), len(normal)))
    return normal


def _replaced(text: str, kinds: set[str] | frozenset[str]) -> str | None:
    """`text` with each of `kinds` (notable characters) replaced by its NFKC; None when one of them
    is not changed by NFKC alone (a non-starter or a composing character), or its NFKC holds one."""
    changes = _changes()
    for char in kinds:
        change = changes.get(char)
        if change is None:
            return None
        text = text.replace(char, change)
    return text


@cache
def _changes() -> dict[str, str]:
    """Each character NFKC changes standing alone, whose NFKC holds no notable character: its NFKC."""
    held = _held()
    changes = {}
    for code in byte_facts.nfkc_changed():
        change = unicodedata.normalize("NFKC", chr(code))
        if not any(ord(char) in held for char in change):
            changes[chr(code)] = change
    return changes


@cache
def _held() -> frozenset[int]:
    """The notable characters NFKC does not change standing alone: non-starters, composing ones."""
    return frozenset(code for low, high in (*decomposed_anchors.marks(), *decomposed_anchors.COMPOSING)
                     for code in range(low, high + 1))


@cache
def _notable() -> frozenset[str]:
    return frozenset(map(chr, (*byte_facts.nfkc_changed(), *_held())))


@cache
def _notable_search() -> Callable[[bytes, int], int] | None:
    """Where, at or after byte `pos`, UTF-8 `data` next holds a notable character (-1: none); None
    without RE2. Compiled at first use (~3 ms, once)."""
    return decomposed_anchors.re2_search(re2_class(runs(map(ord, _notable()))))
