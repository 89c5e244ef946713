"""Characters whose NFKD holds several starters (ligatures, fractions, letters of two: "ﬁ", "½",
"ǆ"), where they could give part of an anchor, for the search of text in any form
(`decomposed_anchors.any_form_pattern`).

Why a place they take part in is found. NFKD works character by character, and no mark moves past a
starter: each starter of a string's NFKD comes from one character of the string, in order. An anchor
that a reader sees (in the NFKC of the string) is, in its NFKD, a run of starters (with marks where the
anchor's letters take them); the characters that give those starters are single-starter ones (each
one starter of the anchor) and some of several starters. One of several starters gives either a run
of the anchor's starters that its own are exactly (inside the anchor, or at its beginning or end);
or, at the anchor's beginning, the last of its own starters (it begins before the anchor); or, at
the end, the first of them (it ends after); or the whole anchor lies among its starters. The pattern
built here follows the anchor's starters from first to last, taking at each step one character of
one starter or one of several that gives the next run of them exactly; where one begins the anchor,
it takes a few steps after it, and where one ends it, the step before it alone (a little more than
it must); the last case makes the character a place of its own. A character whose starters fit no
such step in any anchor is no part of any place (U+FDFA, "½" away from digits of an anchor). Case: a
starter fits where the anchor's character, or under case folding one that folds with it, gives it
(`fits`). Marks inside the character's NFKD are not looked at: the pattern finds a little more than
it must, never less.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

# How many of the anchor's starters after one of several starters that begins it the pattern takes (all
# of them would make it grow as the square of the anchor's length): a little more than it must.
AHEAD = 3


class Spelt(NamedTuple):
    """Where characters of several starters could give part of one anchor (its starters numbered
    from 0 to n)."""

    exact: dict[tuple[int, int], list[int]]  # (i, j): the characters whose starters are the anchor's i..j-1
    begins: dict[int, list[int]]  # j: those whose last j starters are the anchor's first j, after others
    ends: dict[int, list[int]]  # i: those whose first starters are the anchor's i..n-1, before others
    alone: set[int]  # those among whose starters the whole anchor lies


def spelt(count: int, fits: Callable[[int, int], bool], several: Sequence[tuple[int, tuple[int, ...]]]) -> Spelt:
    """Where each of `several` ((code, its starters)) could give part of an anchor of `count` starters:
    `fits(starter, i)` tells whether a starter may stand for the anchor's i-th."""
    found = Spelt({}, {}, {}, set())
    for code, own in several:
        k = len(own)

        def gives(offset: int, first: int, length: int, own: tuple[int, ...] = own) -> bool:
            return all(fits(own[offset + t], first + t) for t in range(length))

        if k >= count and any(gives(offset, 0, count) for offset in range(k - count + 1)):
            found.alone.add(code)
            continue
        for i in range(count - k + 1):
            if gives(0, i, k):
                found.exact.setdefault((i, i + k), []).append(code)
        for j in range(1, min(k, count)):
            if gives(k - j, 0, j):
                found.begins.setdefault(j, []).append(code)
            if gives(0, count - j, j):
                found.ends.setdefault(count - j, []).append(code)
    return found


def places(steps: Sequence[str], marks_after: Sequence[bool], found: Spelt, klass: Callable[[list[int]], str],
           gap: str, marks_between: str) -> tuple[list[str], dict[str, list[int]]]:
    """The patterns of the places where characters of several starters give part of one anchor (each
    place holds one at least; the anchor's own pattern finds the others): `steps[i]` the pattern of
    one character that gives its i-th starter (marks after it where it takes them), `gap` between two
    characters; after one of several starters that gives a starter the anchor takes marks after
    (`marks_after`), marks may follow. What follows the anchor is not looked at: a place, whatever its
    stops. Where one begins the anchor, what gives its next AHEAD starters must follow. The places
    where one ends the anchor come apart, as what gives the starter before it (the first pattern)
    and the characters that may follow that: the caller makes one pattern of each for all anchors
    (they begin with common letters, and one alternative for each would crowd RE2's DFA)."""
    count = len(steps)
    made: dict[int, str] = {}

    def after(last: int) -> str:
        return marks_between if marks_after[last] else ""

    def exact_from(i: int) -> list[tuple[str, int]]:  # (pattern, the starter after it) of those giving i on
        return [(klass(chars) + after(j - 1), j) for (low, j), chars in sorted(found.exact.items()) if low == i]

    def rest(i: int) -> str:  # the anchor from its i-th starter on, any way
        if i not in made:
            options = [steps[i] + (gap + rest(i + 1) if i + 1 < count else "")]
            options += [part + (gap + rest(j) if j < count else "") for part, j in exact_from(i)]
            options += [klass(found.ends[i])] if i in found.ends else []
            made[i] = _either(options)
        return made[i]

    def rest_with(i: int) -> str:  # the same, with a character of several starters that gives a run of it
        later = rest_with(i + 1) if i + 1 < count else ""
        options = [steps[i] + gap + later] if later else []
        options += [part + (gap + rest(j) if j < count else "") for part, j in exact_from(i)]
        return _either(options) if options else ""

    def ahead(i: int, steps_left: int) -> str:  # what may give the anchor's i-th starter and a few after
        options = [steps[i] + (gap + ahead(i + 1, steps_left - 1) if i + 1 < count and steps_left > 1 else "")]
        options += [part for part, _ in exact_from(i)] + ([klass(found.ends[i])] if i in found.ends else [])
        return _either(options)

    def before(i: int) -> str:  # what may give the anchor's starter before the i-th
        exact = [klass(chars) + after(i - 1) for (_, j), chars in sorted(found.exact.items()) if j == i]
        return _either([steps[i - 1], *exact, *([klass(found.begins[i]) + after(i - 1)] if i in found.begins else [])])

    patterns = [rest_with(0)] if found.exact else []
    patterns += [klass(chars) + after(j - 1) + gap + ahead(j, AHEAD) for j, chars in sorted(found.begins.items())]
    ended: dict[str, list[int]] = {}
    for i, chars in found.ends.items():
        ended.setdefault(before(i) + gap, []).extend(chars)
    return [pattern for pattern in patterns if pattern], ended


def _either(options: list[str]) -> str:
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"
