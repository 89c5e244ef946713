"""How far past each anchor the secret scanner's rules reach, read off their patterns.

Every match of a rule holds an occurrence of one of the rule's anchors (secret_rules.py). For most
rules more can be said: the match goes on past such an occurrence for some characters drawn from a
known set ("ghp_" and then thirty of `A-Za-z0-9`; "pass", "word", an assignment and six characters of
a value). `reaches` works this out for every anchor from the patterns themselves, as `Reach(chars,
length)`: every match of every rule the anchor names holds an occurrence of one of that rule's anchors
followed, inside the match, by at least `length` characters none of which is an ASCII character outside
`chars`. An occurrence followed, in the text a reader sees, by an ASCII character outside `chars`
within its first `length` characters, with only ASCII characters before it, is then in no match of
those rules (anchor_tails.py turns that into what makes a place in a JSON value).

How. A pattern is read as a sequence of items (Python's own parser of the same syntax; RE2 reads the
patterns alike, secret_rules.py). The shortest head of the sequence whose strings are few enough to
list, each holding an anchor, splits it: for each such string, what follows its last anchor
occurrence there and the items after the head are what the match holds past that occurrence. Its
length is the fewest characters that can take (the head's rest, then each item's least width), and
the characters are those of the head's rest and of the items that can begin within that length. A
group of alternatives at the head is taken alternative by alternative. Where no head can be listed
but the sequence spells an anchor itself, literal by literal, what follows that spelling is the
reach (the host after the `@` of `user:password@host`). A pattern this reading cannot split (a head
without anchors that matches endless strings, as `://[^...]{1,LONG}@`, whose match ends at its
anchor) gives its anchors a length of 0: no occurrence of them is ever passed over. `reach_of` gives
one rule's reach, `reaches` each anchor's over all its rules. A test checks every rule's reach
against matches generated from its pattern.
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import Any, NamedTuple

from ito_training_mcp import secret_rules

_IGNORECASE = re.IGNORECASE.value
_MOST_STRINGS = 4096  # strings a head may have before it counts as endless
_ASCII = frozenset(range(0x80))


class Reach(NamedTuple):
    chars: frozenset[int]  # the ASCII characters that may stand within `length` past the anchor
    length: int  # the fewest characters every match holds past an occurrence of one of its anchors
    first: frozenset[int] = frozenset(range(0x80))  # the ASCII characters that may stand right after it


def _parse(pattern: str) -> list[Any]:
    parser: Any = importlib.import_module("re._parser")  # the syntax the rules are written in (secret_rules.py)
    return list(parser.parse(secret_rules.for_python(pattern)).data)


def _width(items: list[Any]) -> int:
    """The fewest characters `items` match."""
    total = 0
    for op, arg in items:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL", "IN", "ANY"):
            total += 1
        elif name == "BRANCH":
            total += min(_width(list(branch)) for branch in arg[1])
        elif name == "SUBPATTERN":
            total += _width(list(arg[3]))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            total += arg[0] * _width(list(arg[2]))
        elif name == "ATOMIC_GROUP":
            total += _width(list(arg))
        elif name != "AT":
            raise ValueError(f"unread item {name}")
    return total


def _folded(codes: set[int], fold: bool) -> set[int]:
    return codes | {ord(chr(c).swapcase()) for c in codes if chr(c).isalpha()} if fold else codes


def _set(entries: list[Any], fold: bool) -> set[int]:
    """The ASCII characters a class (`[...]`) takes."""
    taken: set[int] = set()
    negate = False
    for op, arg in entries:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            taken.add(arg)
        elif name == "RANGE":
            taken.update(range(arg[0], min(arg[1], 0x7F) + 1))
        else:  # a category (\d, \s, \w): not used by the rules; everything, to be safe
            return set(_ASCII)
    taken = _folded({c for c in taken if c < 0x80}, fold)
    return set(_ASCII - taken) if negate else taken


def _chars(items: list[Any], fold: bool) -> set[int]:
    """The ASCII characters that may stand in a match of `items`."""
    found: set[int] = set()
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            found |= _folded({arg}, fold) if arg < 0x80 else set()
        elif name == "NOT_LITERAL" or name == "ANY":
            found |= _ASCII
        elif name == "IN":
            found |= _set(list(arg), fold)
        elif name == "BRANCH":
            for branch in arg[1]:
                found |= _chars(list(branch), fold)
        elif name == "SUBPATTERN":
            found |= _chars(list(arg[3]), (fold or bool(arg[1] & _IGNORECASE)) and not arg[2] & _IGNORECASE)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            found |= _chars(list(arg[2]), fold) if arg[1] else set()
        elif name == "ATOMIC_GROUP":
            found |= _chars(list(arg), fold)
        elif name != "AT":
            raise ValueError(f"unread item {name}")
    return found


def _strings(items: list[Any], fold: bool) -> list[str] | None:
    """Every string `items` match (lower-cased where `fold`), or None for more than _MOST_STRINGS."""
    made = [""]
    for op, arg in items:
        name = str(op)
        options: list[str] | None
        if name == "LITERAL":
            options = [chr(arg).lower() if fold else chr(arg)]
        elif name == "IN":
            codes = _set(list(arg), fold) if all(str(o) in ("LITERAL", "RANGE") for o, _ in arg) else None
            if codes is None or any(str(o) == "LITERAL" and a >= 0x80 for o, a in arg):
                return None
            options = sorted({chr(c).lower() if fold else chr(c) for c in codes})
        elif name == "BRANCH":
            options = []
            for branch in arg[1]:
                more = _strings(list(branch), fold)
                if more is None:
                    return None
                options += more
        elif name == "SUBPATTERN":
            options = _strings(list(arg[3]), (fold or bool(arg[1] & _IGNORECASE)) and not arg[2] & _IGNORECASE)
        elif name in ("MAX_REPEAT", "MIN_REPEAT") and arg[1] <= 8:
            once = _strings(list(arg[2]), fold)
            if once is None:
                return None
            options, step = [], [""]
            for times in range(arg[1] + 1):
                if times >= arg[0]:
                    options += step
                step = [a + b for a in step for b in once]
                if len(step) > _MOST_STRINGS:
                    return None
        elif name == "AT":
            options = [""]
        else:
            return None
        if options is None or len(made) * len(options) > _MOST_STRINGS:
            return None
        made = [a + b for a in made for b in options]
    return made


def _chars_within(items: list[Any], count: int, fold: bool) -> set[int]:
    """The ASCII characters that may stand within the first `count` characters of a match of `items`:
    an item's own where it may begin before `count` (at the fewest characters the items before it
    take), and inside a group or repeat only those that may stand there in turn."""
    found: set[int] = set()
    at = 0
    for op, arg in items:
        if at >= count:
            break
        name = str(op)
        if name == "BRANCH":
            for branch in arg[1]:
                found |= _chars_within(list(branch), count - at, fold)
        elif name == "SUBPATTERN":
            found |= _chars_within(list(arg[3]), count - at,
                                   (fold or bool(arg[1] & _IGNORECASE)) and not arg[2] & _IGNORECASE)
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            once = _width(list(arg[2]))
            times = 0  # (the k-th time begins at k times the fewest characters of one, at least)
            while times < arg[1] and at + times * once < count:
                found |= _chars_within(list(arg[2]), count - at - times * once, fold)
                if once == 0:
                    break
                times += 1
        else:
            found |= _chars([(op, arg)], fold)
        at += _width([(op, arg)])
    return found


def _first(items: list[Any], fold: bool) -> tuple[set[int], bool]:
    """The ASCII characters a match of `items` may begin with, and whether it may be empty."""
    found: set[int] = set()
    for op, arg in items:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL", "IN", "ANY"):
            return found | _chars([(op, arg)], fold), False
        if name == "BRANCH":
            empty = False
            for branch in arg[1]:
                more, may = _first(list(branch), fold)
                found |= more
                empty = empty or may
            if not empty:
                return found, False
        elif name == "SUBPATTERN":
            more, may = _first(list(arg[3]), (fold or bool(arg[1] & _IGNORECASE)) and not arg[2] & _IGNORECASE)
            found |= more
            if not may:
                return found, False
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            if arg[1]:
                more, may = _first(list(arg[2]), fold)
                found |= more
                if arg[0] and not may:
                    return found, False
        elif name == "ATOMIC_GROUP":
            more, may = _first(list(arg), fold)
            found |= more
            if not may:
                return found, False
        elif name != "AT":
            raise ValueError(f"unread item {name}")
    return found, True


def _reaches_of(items: list[Any], anchors: tuple[str, ...], fold: bool) -> list[Reach] | None:
    """The reach past the anchor occurrences of every match of `items` (one per way found), or None."""
    wanted = [a.lower() for a in anchors] if fold else list(anchors)
    for head in range(1, len(items) + 1):
        strings = _strings(items[:head], fold)
        if strings is None:
            break
        ends = []
        for string in strings:
            found = [string.rfind(anchor) + len(anchor) for anchor in wanted if anchor in string]
            if not found:
                break
            ends.append((string, max(found)))
        else:
            rest = items[head:]
            made = []
            for string, end in ends:
                tail = string[end:]
                count = len(tail) + _width(rest)
                chars = _folded({ord(c) for c in tail if c < "\x80"}, fold)
                first = _folded({ord(tail[0])} if tail[0] < "\x80" else set(), fold) if tail else _first(rest, fold)[0]
                made.append(Reach(frozenset(chars | _chars_within(rest, count - len(tail), fold)), count,
                                  frozenset(first)))
            return made
    spelt = _after_spelt_anchor(items, wanted, fold)
    if spelt is not None:
        return [spelt]
    if items and str(items[0][0]) == "BRANCH":  # alternatives at the head: each on its own
        made = []
        for branch in items[0][1][1]:
            more = _reaches_of([*branch, *items[1:]], anchors, fold)
            if more is None:
                return None
            made += more
        return made
    if items and str(items[0][0]) == "SUBPATTERN" and items[0][1][0] is None:
        group = items[0][1]
        inner = list(group[3])
        inner_fold = (fold or bool(group[1] & _IGNORECASE)) and not group[2] & _IGNORECASE
        if inner_fold == fold:
            return _reaches_of([*inner, *items[1:]], anchors, fold)
    return None


def _after_spelt_anchor(items: list[Any], wanted: list[str], fold: bool) -> Reach | None:
    """The reach past an anchor that `items` spell themselves, one literal after another, wherever
    they stand in the sequence (the last such; the `@` of `user:password@host`, after a run of any
    length): every match holds it there, followed by a match of the items after it. None: no such."""
    for start in range(len(items) - 1, -1, -1):
        for anchor in wanted:
            run = items[start:start + len(anchor)]
            if len(run) == len(anchor) and all(
                    str(op) == "LITERAL" and (chr(arg).lower() if fold else chr(arg)) == char
                    for (op, arg), char in zip(run, anchor, strict=True)):
                rest = items[start + len(anchor):]
                count = _width(rest)
                if count == 0:
                    return Reach(frozenset(), 0)
                return Reach(frozenset(_chars_within(rest, count, fold)), count, frozenset(_first(rest, fold)[0]))
    return None


@functools.cache
def reach_of(rule: secret_rules.Rule) -> Reach:
    """The reach past the anchors of one rule (see above): the least over the ways its matches go."""
    found = _reaches_of(_parse(rule.pattern), rule.anchors, rule.fold)
    return Reach(frozenset(), 0) if not found else functools.reduce(least, found)


@functools.cache
def reaches() -> dict[str, Reach]:
    """Every anchor's reach (see above), over all the rules it names."""
    out: dict[str, Reach] = {}
    for rule in secret_rules.RULES:
        own = reach_of(rule)
        for anchor in rule.anchors:
            had = out.get(anchor)
            out[anchor] = own if had is None else least(had, own)
    return out


def least(one: Reach, other: Reach) -> Reach:
    """What two reaches of one anchor both promise (none where either is of nothing)."""
    if not one.length or not other.length:
        return Reach(frozenset(), 0)
    return Reach(one.chars | other.chars, min(one.length, other.length), one.first | other.first)
