"""The strings of a bounded or full secret scan, made ready to search: what a reader would see of
each (NFKC, invisible characters out; see text_normal.py), for many strings at once, joined by NUL,
and the budget of work a bounded scan may spend on them and on its searches. Kept apart from the
scanner's searches (secret_scan.py), which take the joined text this module makes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

from ito_training_mcp import decomposed_anchors
from ito_training_mcp.nfkc import is_nfkc, nfkc
from ito_training_mcp.secret_engine import Engine, default_engine
from ito_training_mcp.text_normal import (
    long_combining_run,
    long_run_texts,
    nfkc_joined,
    normalize,
    texts_found,
    without_invisible_by_search,
)

MAX_FINDINGS = 20  # strings with findings enough to report: past them nothing more is looked at
HIDDEN = "hidden_characters"
# In a bounded scan (a document the caller will refuse anyway), a string reported rather than searched
# (see `secret_scan.scan`).
UNEXAMINED = "unexamined"
BOUNDED_FLOOR = 1 << 20  # bytes of work any bounded scan may spend, so that no small document is cut short
FREE_BELOW = 1 << 18  # a document no longer than this gets free cleanings (see CLEANING_CHARGE)
LONG_STRING = 1 << 16  # in a bounded scan, a string longer than this is searched for one format at most


class Budget:
    """Bytes of anchor and rule searching a bounded scan may still spend (None: unbounded). A search is
    started only when the rest covers a whole pass over its text, and charged what it read.
    `free_cleanings`: how many strings may still be cleaned on their own without a charge."""

    def __init__(self, limit: int | None, free_cleanings: int = 0) -> None:
        self.left = limit
        self.free_cleanings = free_cleanings

    def affords(self, amount: int) -> bool:
        return self.left is None or amount <= self.left

    def spend(self, amount: int) -> None:
        if self.left is not None:
            self.left -= amount


UNBOUNDED = Budget(None)


def separator(data: Any, char: str) -> Any:
    return char.encode() if isinstance(data, bytes) else char


def joined(texts: list[str], found: dict[int, set[str]], bounded: bool, longest: int | None = None) -> str:
    """The texts normalised and joined with NUL; a text too hidden to clean is reported and left out,
    and so is (in a bounded scan) a long text that holds invisible characters at all. A text that
    can hold no finding may be left out too, empty (`text_normal.nfkc_joined`). `longest`: a
    length no text exceeds, if the caller knows one."""
    return joined_prepared(texts, found, Budget(BOUNDED_FLOOR, FREE_CLEANINGS) if bounded else UNBOUNDED,
                            longest)[0]


def joined_prepared(texts: list[str], found: dict[int, set[str]], budget: Budget,
                     longest: int | None = None, runs_checked: bool = False,
                     limit: int = MAX_FINDINGS, all_text: str | None = None,
                     made: list[int] | None = None, invisible_free: bool = False) -> tuple[str, Any]:
    """`joined`, with the engine's prepared form of it when making it took one (else None).
    `runs_checked`: the caller knows that no text holds too long a run of combining marks. `limit`:
    how many texts reported are enough (past them none is looked at). `all_text`: the texts joined
    by NUL, if the caller joined them already. `made`: as for `text_normal.nfkc_joined`.
    `invisible_free`: the caller knows that no text holds an invisible character, nor one whose NFKC
    does (U+3164 and U+FFA0 make U+1160; a test checks every character): the normalised texts are
    not searched for one (a pass over them, 1-3.5 ms a mebibyte in other scripts).

    NUL is a starter that composes with nothing, so NFKC of the texts joined by it is the joined NFKC
    of each; where that holds no invisible character, it is each text's `normalize`, and where it
    holds no more kinds of them than one text may, their cleaning is each text's, at once. Otherwise
    only the texts that hold one are cleaned, each on its own (`_each_held`). Held apart from the
    others from the start: texts holding NUL, those with too long a run of combining marks, and (in a
    bounded scan) the long ones.
    """
    all_text = "\x00".join(texts) if all_text is None else all_text
    nul_free = "\x00" not in all_text if len(texts) == 1 else all_text.count("\x00") == len(texts) - 1
    if all_text.isascii() and nul_free:
        return all_text, None  # the common case, settled in two passes over the bytes
    bounded = budget.left is not None
    held = [] if nul_free else [i for i, text in enumerate(texts) if "\x00" in text]
    if bounded and len(all_text) > LONG_STRING and (max(map(len, texts)) if longest is None else longest) > LONG_STRING:
        held = sorted({*held, *(i for i, text in enumerate(texts) if len(text) > LONG_STRING)})
    together = texts
    if held:
        together = list(texts)
        for index in held:
            together[index] = ""
        all_text = "\x00".join(together)
    runs: list[int] = []
    if not runs_checked and long_combining_run(all_text):
        # Each such text is reported, and none past `limit` of them would be: the rest is left out.
        runs = long_run_texts(all_text, limit)
        if len(runs) == limit:
            together, held = together[:runs[-1] + 1], [i for i in held if i <= runs[-1]]
        held = sorted({*held, *runs})
        together = [("" if i in runs else text) for i, text in enumerate(together)]
        all_text = "\x00".join(together)
    engine = default_engine()
    encoded: list[bytes] = []
    # (an unbounded scan pays for no work: told of none, normalising may take ICU's pass, `nfkc.whole_nfkc`)
    normalized = nfkc_joined(together, all_text, made if bounded else None, whole=not bounded, encoded=encoded)
    data = encoded[0] if encoded and engine.searches_bytes else engine.prepare(normalized)
    if not held:
        if invisible_free or engine.invisible(data, 0, nul=False) is None:
            return normalized, data
        at_once = without_invisible_by_search(normalized, nul=False, data=data)
        if at_once is not None:
            return at_once, None
    parts = normalized.split("\x00")
    for index in held:
        parts[index] = texts[index]
    return _each_held(engine, parts, data, held, found, budget, set(runs), limit, runs_checked), None


# Cleaning one string on its own is charged to a bounded scan's budget as searching its length and
# this many bytes more (its calls cost about as much as searching several kilobytes), with what its
# normalisation cost (`text_normal.normalize`'s `made`: a string of a thousand characters NFKC
# changes costs a hundred microseconds, as much as searching a hundred kilobytes), but for the
# first ones in a document no longer than FREE_BELOW: FREE_CLEANINGS, and one more for every 512
# bytes it is shorter. A small document is never cut short for its cleaning (attacker reviews: 40
# and then 97 strings of a 2 KB document went `unexamined`; 2 KB get 572 free, more strings than
# they can hold), and a large one's budget pays for more than the 64.
CLEANING_CHARGE = 8192
FREE_CLEANINGS = 64


def _holding(engine: Engine, data: Any) -> Iterator[int]:
    """The indices of the texts joined by NUL in `data` that hold an invisible character, in order:
    one search each."""
    def search(text: Any, pos: int) -> int:
        found = engine.invisible(text, pos, nul=False)
        return -1 if found is None else found[0]

    yield from texts_found(search, data)


def _each_held(engine: Engine, parts: list[str], data: Any, held: list[int], found: dict[int, set[str]],
               budget: Budget, hidden: set[int], limit: int, runs_checked: bool = False) -> str:
    """`parts` (NFKC already, but for the `held` ones) cleaned where they need it, in order, joined:
    each text that holds an invisible character (`data`: the others joined and prepared) or is held,
    on its own; the others are as they are. In a bounded scan each is charged (CLEANING_CHARGE), but
    for the budget's free cleanings (a long text's `_clean_long` bounds itself); once the budget is
    spent, such a text is reported UNEXAMINED
    instead, and once `limit` texts are reported, no more is looked at (none past them would be).
    The `hidden` ones (too long a run of combining marks, found already) are reported as such;
    `runs_checked`: the caller knows that no text holds such a run."""
    bounded = budget.left is not None
    held_at = set(held)
    for index in heapq.merge(_holding(engine, data), held):
        if len(found) >= limit:
            del parts[index:]  # not cleaned, and never searched
            break
        text = parts[index]
        cleaned: str | None
        if index in hidden:
            cleaned = None
        elif bounded and len(text) > LONG_STRING:
            cleaned = _clean_long(text, runs_checked)
        elif budget.free_cleanings or budget.affords(len(text) + CLEANING_CHARGE):
            made: list[int] = []
            cleaned = normalize(text, runs_checked=runs_checked or index not in held_at, made=made)
            if budget.free_cleanings:
                budget.free_cleanings -= 1
            else:
                budget.spend(len(text) + CLEANING_CHARGE + sum(made))
        else:
            cleaned = _UNCLEANED
        if cleaned is None or cleaned is _UNCLEANED:
            found[index] = {HIDDEN if cleaned is None else UNEXAMINED}
            cleaned = ""
        parts[index] = cleaned
    return "\x00".join(parts)


_UNCLEANED = "\x00unexamined"  # `_clean_long`'s answer for a text it did not clean (never a cleaned text)


def _clean_long(text: str, runs_checked: bool = False) -> str:
    """`normalize` for a long text in a bounded scan: NFKC, but invisible characters are not removed
    (one copy of the text per kind): a long text holding any is not examined (`_UNCLEANED`), and
    neither is one whose anchors, as it stands, already call for several formats (the two searches
    of `_long_kinds`, before paying for normalisation). NFKC of a text that is not normal already
    costs ten passes over it and more: such a text is given as it stands when a search of it finds
    no place where its NFKC could hold an anchor (`decomposed_anchors.any_form_search`: nothing to
    find), and is not examined when one does (a mebibyte of full-width anchors cost 10x).
    `runs_checked`: the caller knows that the text holds no run of combining marks too long."""
    if text.isascii() and "\x00" not in text:
        return text
    engine = default_engine()
    data = engine.prepare(text)
    probe = engine.invisible_or_rule_anchor(data)  # as it stands, before paying for NFKC
    if probe is not None:
        end, rules = probe
        if rules is None or (rules and engine.other_rule_anchor(rules, data) >= 0):
            return _UNCLEANED
        if engine.invisible(data, end) is not None:  # none came before the anchor
            return _UNCLEANED
    if not runs_checked and long_combining_run(text):
        return _UNCLEANED
    any_form = decomposed_anchors.any_form_search() if isinstance(data, bytes) else None
    if any_form is not None:
        if any_form(data, 0) < 0:
            return text
        if not is_nfkc(text, data if isinstance(data, bytes) else None):
            return _UNCLEANED
    normalized = nfkc(text, data if isinstance(data, bytes) else None)
    if normalized is not text and engine.invisible(engine.prepare(normalized), 0) is not None:
        return _UNCLEANED  # NFKC can make one (a half-width Hangul filler becomes U+1160)
    return normalized
