"""The regular-expression engines as the scanner uses them, each pattern compiled once, when first used.

RE2 (google-re2, through its public API) searches text: linear whatever the input, with a generous memory
budget. Python's `re` reads short pieces RE2 has already found (a candidate, a name, a value), where its
groups and look-arounds help.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


@functools.cache
def compiled(pattern: str, groups: bool = False) -> Any:
    """`pattern` compiled by RE2 (`groups`: keep its capturing groups). Without groups, named groups are
    made plain too: RE2 keeps them despite `never_capture`, and a capturing group sends every match
    through its submatch engine, ten times slower than the automaton."""
    options = re2.Options()
    options.max_mem = 64 << 20
    options.never_capture = not groups
    return re2.compile(pattern if groups else _NAMED_GROUP.sub("(?:", pattern), options)


@functools.cache
def python(pattern: str) -> re.Pattern[str]:
    """`pattern` compiled by Python's `re` (for short pieces of text only)."""
    return re.compile(pattern)


def spans(pattern: Any, data: bytes, pos: int = 0, stop: int | None = None) -> Iterator[tuple[int, int]]:
    """The spans of the leftmost non-overlapping matches of a compiled pattern in data[pos:stop]."""
    for match in pattern.finditer(data, pos, len(data) if stop is None else stop):
        yield match.span()


def found(pattern: Any, data: bytes) -> bool:
    """Does the compiled pattern match anywhere in `data`?"""
    return pattern.search(data) is not None


def trigger_set(patterns: list[str]) -> Any:
    """An RE2 set of `patterns` (Match(data) gives the indexes of those that occur)."""
    options = re2.Options()
    options.max_mem = 64 << 20
    options.never_capture = True
    triggers = re2.Set.SearchSet(options)
    for pattern in patterns:
        triggers.Add(pattern)
    triggers.Compile()
    return triggers
