"""The secret scanner's RE2 searches over UTF-8 bytes: where a pattern next matches (`re2_search`),
and where the first place of a JSON text next ends (`re2_place_search`). None without RE2."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _compiled(pattern: str) -> Any:
    """`pattern` compiled by RE2 without captures, its DFA allowed 64 MiB; None without RE2."""
    try:
        import re2  # type: ignore[import-untyped]  # no type information shipped
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        return None
    options = re2.Options()
    options.never_capture = True
    options.max_mem = 64 << 20
    return re2.compile(pattern, options)


def re2_search(pattern: str) -> Callable[[bytes, int], int] | None:
    """Where, at or after byte `pos`, UTF-8 `data` next holds a match of `pattern` (-1: none), RE2
    compiled without captures; None without RE2."""
    compiled = _compiled(pattern)
    if compiled is None:
        return None

    def search(data: bytes, pos: int) -> int:
        match = compiled.search(data, pos)
        return -1 if match is None else int(match.start())
    return search


def re2_place_search(pattern: str) -> Callable[[bytes, int], int] | None:
    """`re2_search` for the places of a JSON text without escapes
    (`decomposed_anchors.any_form_pattern(values=True)`, `decomposed_anchors.pattern(values=True)`):
    where the first place at or after byte `pos` ends, as the first byte of a character of the string
    that holds it (-1: none). Why not where it starts: a place may go on
    past its anchor (what must follow it: anchor_tails.py), and RE2 finds where a match starts by
    running a reversed program back from its end, whose states, over a pattern this large with such
    tails, crowd RE2's memory out (150-550 ms for 2,300-2,600 places). Here the search is anchored at
    `pos`, behind a lazy run of anything, so that only the forward program runs (4-6 us a place).

    Where a place ends: inside the string that holds it; or on that string's closing quote (a tail
    that any character but a stop ends, `"` among them); or, for an occurrence in a key
    (anchor_tails.KEY_REST), on the `:` after the key, with only JSON whitespace back to the key's
    closing quote. A `:` that only whitespace parts from the quote before it ends no other place: no
    alternative of these patterns matches whitespace and `:` alone (a test checks it)."""
    compiled = _compiled(f"(?s:.*?)(?:{pattern})")
    if compiled is None:
        return None
    colon, quote = ord(":"), ord('"')

    def search(data: bytes, pos: int) -> int:
        match = compiled.match(data, pos)
        if match is None:
            return -1
        last = int(match.end()) - 1
        if data[last] == colon:
            before = data.rfind(b'"', pos, last)
            if before >= 0 and not data[before + 1:last].strip(b" \t\r\n"):
                last = before - 1  # (in the key, which holds at least the anchor)
        elif data[last] == quote:
            last -= 1
        while last > pos and 0x80 <= data[last] < 0xC0:  # back to the first byte of its character
            last -= 1
        return last
    return search
