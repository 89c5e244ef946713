"""Every key and every string value of a parsed JSON document, collected once: the secret scanner and
the manifest's character rule both need them, and one walk serves both. The walk also records each
container (`Span`), so that the scanner can build a JSON pointer only for a container that holds a
finding, and counts how deep the containers nest (the gate's nesting check, for free when the walk
was made)."""

from __future__ import annotations

import operator
from decimal import Decimal
from itertools import compress, repeat
from typing import Any, NamedTuple

_CONTAINERS = (dict, list)
_CONTAINER_TYPES = frozenset(_CONTAINERS)


class Span(NamedTuple):
    """One container as `collect` visits it: its place (parent span, name in it) and its strings."""

    node: Any
    parent: int  # index of the parent's span; -1 for the document itself
    name: str | int  # its key or index in the parent (unused for the document itself)
    first: int  # index in `values` of its first string value
    strings: int  # how many string values it holds
    only_strings: bool  # every child is a string (then a value's position is its index minus `first`)


_LOOSE = 1 << 14  # past this many characters, a list's strings together bound each of them too loosely
_Raw = tuple[Any, int, "str | int", int, int, bool]  # a Span's fields, before it is needed as one
# What a list can hold that is neither a string nor below it: a list of numbers needs no look at each.
_SCALARS_AND_CONTAINERS = frozenset({int, float, Decimal, bool, type(None), dict, list})


class Collected(NamedTuple):
    keys: list[str]  # every distinct key, in the order first met
    values: list[str]  # every string value, in the order `_pointers` visits them
    spans: list[_Raw]  # the containers in that order (as `Span` fields)
    depth: int  # how many levels of containers the document nests (0: none)
    # No string value is longer than the longest of these: the strings of the lists that hold only
    # strings, as the length of each such list's strings together, and every other string value.
    lists_longest: int
    scattered: list[str]


def collect(document: Any) -> Collected:
    """One walk of the document: see `Collected`. A container holding nothing but strings (a long list
    of labels) is taken whole."""
    keys: dict[str, Any] = {}  # only its keys are used: insertion order, each once
    values: list[str] = [document] if isinstance(document, str) else []
    scattered: list[str] = list(values)
    lists_longest = 0
    spans: list[_Raw] = []
    stack: list[tuple[Any, int, str | int, int]] = [(document, -1, "", 1)] if type(document) in _CONTAINERS else []
    deepest = 0
    while stack:
        node, parent, name, level = stack.pop()
        if level > deepest:
            deepest = level
        first = len(values)
        here = len(spans)
        if type(node) is dict:  # an object's values are mostly of mixed kinds: no join to try
            keys.update(node)
            strings = [child for child in node.values() if isinstance(child, str)]
            values += strings
            scattered += strings
            spans.append((node, parent, name, first, len(strings), len(strings) == len(node)))
            below = [(child, here, key, level + 1) for key, child in node.items() if type(child) in _CONTAINERS]
            deepest = _below(stack, below, level, deepest)
            continue
        try:
            together = len("".join(node))  # are they all strings? C speed, and no copy is kept
        except TypeError:
            kinds = set(map(type, node))  # a list of numbers holds no string and nothing below
            if not kinds <= _SCALARS_AND_CONTAINERS or str in kinds:
                strings = list(compress(node, map(isinstance, node, repeat(str))))
                values += strings
                scattered += strings
            spans.append((node, parent, name, first, len(values) - first, False))
            if dict in kinds or list in kinds:  # picked in C: a list of 350,000 empty objects is one pass
                containers = list(map(_CONTAINER_TYPES.__contains__, map(type, node)))
                full = list(compress(enumerate(node), map(operator.and_, containers, map(bool, node))))
                if len(full) < sum(containers):  # empty ones: see `_below`
                    deepest = max(deepest, level + 1)
                stack += [(child, here, key, level + 1) for key, child in full]
        else:
            values += node
            if together > _LOOSE:  # a long list of short strings: their own longest, one pass in C
                together = max(map(len, node))
            lists_longest = max(lists_longest, together)
            spans.append((node, parent, name, first, len(node), True))
    return Collected(list(keys), values, spans, deepest, lists_longest, scattered)


def _below(stack: list[tuple[Any, int, str | int, int]], below: list[tuple[Any, int, str | int, int]], level: int,
           deepest: int) -> int:
    """Push the containers below one onto the walk's stack, but for the empty ones: they hold no
    string and no key, so no finding and no pointer ever needs them (250,000 empty objects beside
    a credential cost a step and a span each). Only their level counts, for the depth."""
    full = [entry for entry in below if entry[0]]
    if len(full) < len(below):
        deepest = max(deepest, level + 1)
    stack += full
    return deepest


class DocumentStrings:
    """Every distinct key and every string value of a parsed document, collected on first use: the
    scanner and the manifest's character rule both need them, and one walk serves both."""

    def __init__(self, document: Any) -> None:
        self.document = document
        self._collected: Collected | None = None

    def _all(self) -> Collected:
        if self._collected is None:
            self._collected = collect(self.document)
        return self._collected

    def get(self) -> tuple[list[str], list[str]]:
        collected = self._all()
        return collected.keys, collected.values

    def spans(self) -> list[Span]:
        return list(map(Span._make, self._all().spans))

    def depth(self) -> int | None:
        """How many levels of containers the document nests, if the walk has been made (it counts
        them on the way); None if not."""
        return None if self._collected is None else self._collected.depth

    def longest_value_bound(self) -> int:
        """A length no string value exceeds (for most documents, in a few steps rather than one per
        string)."""
        collected = self._all()
        return max(collected.lists_longest, max(map(len, collected.scattered), default=0))
