"""Three questions about a manifest's UTF-8 bytes, answered by one pass.

Gate 2 asks several things of a manifest in other scripts, each of which used to be a search of all
of its bytes (~2.5-3 ms a mebibyte each, against ~4 ms for `sha256` and `json.loads` together):

- does a key or string hold a character the egress would escape (`invisible.not_shown_ranges`:
  not printable, or showing as nothing; every forbidden character of the character rule is one)?
- does the text hold a character that NFKC may compose with the one before it
  (`decomposed_anchors.COMPOSING`)?
- does it hold an anchor of the secret scanner, as written (the engine's any-anchor search)?

RE2's set search answers all three in one pass, at the cost of one search: it reports which of the
patterns occur anywhere, not where. A valid manifest usually holds none, and then nothing else
needs to look; when one occurs, the code that asked looks for it itself, as it would have. Only with
RE2 (a dependency): without it there are no facts, and every question is asked the long way.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple


class ByteFacts(NamedTuple):
    """Which of the three occur somewhere in the bytes (True: at least once; False: nowhere)."""

    not_shown: bool
    composing: bool
    anchor: bool


_NOT_SHOWN, _COMPOSING, _ANCHOR = 0, 1, 2


def facts(data: bytes) -> ByteFacts | None:
    """The facts of UTF-8 `data`, in one pass; None without RE2."""
    search = _set_search()
    if search is None:
        return None
    found = set(search.Match(data) or ())
    return ByteFacts(_NOT_SHOWN in found, _COMPOSING in found, _ANCHOR in found)


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "[" + "".join(f"\\x{{{low:x}}}-\\x{{{high:x}}}" for low, high in ranges) + "]"


@cache
def _set_search() -> Any:
    """Compiled at first use (~60 ms with `not_shown_ranges`, once)."""
    from .decomposed_anchors import COMPOSING
    from .invisible import not_shown_ranges
    from .secret_engine import default_engine

    anchors = getattr(default_engine(), "anchor_pattern", None)
    if anchors is None:  # the Python engine: RE2 is not installed
        return None
    import re2  # type: ignore[import-untyped]  # no type information shipped

    options = re2.Options()
    options.never_capture = True
    options.max_mem = 64 << 20
    search = re2.Set.SearchSet(options)
    for index, pattern in ((_NOT_SHOWN, _class(not_shown_ranges())), (_COMPOSING, _class(COMPOSING)),
                           (_ANCHOR, anchors)):
        if search.Add(pattern) != index:
            raise RuntimeError("byte_facts: RE2 numbered a pattern otherwise")
    search.Compile()
    return search
