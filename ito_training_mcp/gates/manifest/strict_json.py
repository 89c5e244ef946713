"""Strict JSON for reviewed documents: UTF-8 only, no duplicate keys, no NaN/Infinity,
bounded nesting, and numbers with a fraction kept as `Decimal` (never float arithmetic).

A reviewer reads one meaning from a file; a parser that silently keeps the last of two
duplicate keys, or rounds a number, would let the bytes say something else.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from itertools import chain
from typing import Any

MAX_DEPTH = 32
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class StrictJSONError(ValueError):
    """The document is not strict JSON. `reason` is a fixed phrase, never document content."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Duplicate(Exception):
    pass


class _Constant(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Duplicate
    return result


def _constant(_name: str) -> Any:
    raise _Constant


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_float=Decimal, parse_constant=_constant)
# For documents whose money is carried in strings (backend responses): fractions stay JSON numbers,
# so values such as eval scores are relayed with the type the sender gave them.
def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # "1e999" is a valid JSON number, but not one a float can carry
        raise _Constant
    return value


_FLOAT_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_float=_finite_float, parse_constant=_constant)
# The same without the duplicate-key hook, a Python call per object: for text holding many objects,
# duplicates are then found by counting (see `_has_duplicate`).
_PLAIN_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_constant)
_PLAIN_FLOAT_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_constant)
_MANY_OBJECTS = 1024  # past this many objects (a valid manifest has about 520 at most), counting costs less


class _ManyObjects(Exception):
    pass


def _parse(text: str, decimal_fractions: bool) -> Any:
    """The document, parsed with the duplicate-key hook up to _MANY_OBJECTS objects; a text holding
    more is parsed again without it (`_without_hook`). A refusal is always the hooked parse's."""
    made = 0

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal made
        made += 1
        if made > _MANY_OBJECTS:
            raise _ManyObjects
        return _pairs(items)

    counted = json.JSONDecoder(object_pairs_hook=pairs, parse_float=Decimal if decimal_fractions else _finite_float,
                               parse_constant=_constant)
    try:
        return counted.decode(text)
    except _ManyObjects:
        pass
    value = _without_hook(text, decimal_fractions)
    return (_DECODER if decimal_fractions else _FLOAT_DECODER).decode(text) if value is _NOT_PARSED else value


_NOT_PARSED = object()


def _without_hook(text: str, decimal_fractions: bool) -> Any:
    """The document parsed without the hook, or _NOT_PARSED: when the plain parse refuses the text,
    finds a duplicate in it, or cannot tell (an escaped colon)."""
    if "\\u003a" in text or "\\u003A" in text:
        return _NOT_PARSED
    try:
        value = (_PLAIN_DECODER if decimal_fractions else _PLAIN_FLOAT_DECODER).decode(text)
        return _NOT_PARSED if _has_duplicate(text, value) else value
    except (ValueError, ArithmeticError, RecursionError, _Constant):
        return _NOT_PARSED


def _has_duplicate(text: str, value: Any) -> bool:
    """Did the plain decoder drop a pair of `text` (a duplicate key) to make `value`?

    Outside strings, a JSON text holds `:` only between a key and its value, and `json.dumps`
    writes the colons inside strings as they are: the decoded document written back holds as many
    colons as the text unless a pair was dropped, which takes at least its separator with it. (An
    escaped colon, `\\u003a`, would count in one and not the other: such text is parsed with the hook.)
    """
    written = json.dumps(value, ensure_ascii=False, default=str, check_circular=False)
    return written.count(":") != text.count(":")


_CONTAINERS = (dict, list)  # what the decoders build; nothing else holds children


def depth_exceeds(value: Any, limit: int = MAX_DEPTH, *, source: bytes | None = None) -> bool:
    """Is `value` nested deeper than `limit` levels of arrays and objects? Level by level,
    iteratively, so a hostile document cannot exhaust the stack here. Each level's children are
    gathered in C and looked at once each, but for a long list of strings (labels), which is passed
    over at C speed. `source`, the JSON text `value` was parsed from: when a level has many children
    other than such strings, and the text holds many objects and few strings beside them, its brackets are
    counted instead (`_brackets_exceed`, whose cost grows with the strings as the walk's grows with
    the objects; a document with few children per level is walked, without a look at its text)."""
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        objects = [node for node in level if type(node) is dict]
        lists = [node for node in level if type(node) is list]
        long = [node for node in lists if len(node) > _SHORT_LIST]
        mixed = []
        for node in long:
            try:
                "".join(node)  # nothing but strings: no level below
            except TypeError:
                mixed.append(node)
        if source is not None and len(level) + sum(map(len, objects)) + sum(map(len, mixed)) > _MANY_OBJECTS:
            if (braces := source.count(b"{")) > _MANY_OBJECTS and 4 * braces > source.count(b'"'):
                return _brackets_exceed(source, limit)
            source = None  # decided: the walk goes on
        below = [child for child in chain(chain.from_iterable(map(dict.values, objects)),
                                          chain.from_iterable(node for node in lists if len(node) <= _SHORT_LIST),
                                          chain.from_iterable(mixed))
                 if type(child) in _CONTAINERS]
        level = below
    return False


_SHORT_LIST = 8
_TO_BRACKETS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _brackets_exceed(source: bytes, limit: int) -> bool:
    """`depth_exceeds` of valid JSON text, in a few byte operations instead of a step per container.

    Escapes out, every other `"` opens a string: what lies between is content and its brackets do
    not nest. The brackets outside strings, written as one kind, are a tree: each pass of removing
    every `()` removes its leaves, and the text is nested deeper than `limit` when `limit` passes
    leave something. (Hundreds of thousands of empty objects took 46 ms walked, about 2 ms so.)
    """
    if b"\\" in source:  # escaped backslashes out first: a quote after one ends the string
        source = source.replace(b"\\\\", b"").replace(b'\\"', b"")
    nesting = b"".join(source.split(b'"')[::2]).translate(_TO_BRACKETS, _NOT_BRACKETS)
    for _ in range(limit):
        if not nesting:
            return False
        nesting = nesting.replace(b"()", b"")
    return bool(nesting)


def too_deep(max_depth: int = MAX_DEPTH) -> StrictJSONError:
    return StrictJSONError(f"nesting is deeper than {max_depth} levels")


def loads(data: bytes, *, max_depth: int | None = MAX_DEPTH, decimal_fractions: bool = True) -> Any:
    """Parse UTF-8 JSON bytes strictly or raise `StrictJSONError`.

    `decimal_fractions` (the default, for reviewed manifests) parses numbers with a fraction as
    `Decimal`; without it they are floats (backend answers, where money is a string by contract).
    `max_depth=None` leaves the nesting check (one walk over every container) to the caller, who
    must then call `depth_exceeds` before trusting or reporting anything about the document:
    the manifest gate does, and skips it when its closed schema accepted the document (the schema
    nests five levels, so a document it accepts is never too deep). Nesting the parser itself
    cannot handle is refused here in any case.
    """
    return loads_text(decode(data), max_depth=max_depth, decimal_fractions=decimal_fractions, source=data)


def decode(data: bytes) -> str:
    """The text of UTF-8 JSON bytes, or `StrictJSONError` (not UTF-8, or a byte-order mark)."""
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise StrictJSONError("the file is not valid UTF-8") from None
    if text.startswith("\ufeff"):
        raise StrictJSONError("the file starts with a byte-order mark")
    return text


def loads_text(text: str, *, max_depth: int | None = MAX_DEPTH, decimal_fractions: bool = True,
               source: bytes | None = None) -> Any:
    """`loads` of text that `decode` returned (from `source`, if the caller has the bytes)."""
    try:
        value = _parse(text, decimal_fractions)
    except _Duplicate:
        raise StrictJSONError("an object has a duplicate key") from None
    except _Constant:
        raise StrictJSONError("NaN and Infinity are not JSON numbers") from None
    except RecursionError:
        raise too_deep(MAX_DEPTH if max_depth is None else max_depth) from None
    except json.JSONDecodeError as exc:
        # Position only: the decoder's message would quote nothing, but keep it to fixed text.
        raise StrictJSONError(f"not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, ArithmeticError):
        # An integer literal longer than Python's conversion limit, or an exponent beyond Decimal's range.
        raise StrictJSONError("a number cannot be represented") from None
    if max_depth is not None and depth_exceeds(value, max_depth, source=source):
        raise too_deep(max_depth)
    if "\\" in text and _SURROGATE_ESCAPE.search(text) and not _is_valid_unicode(value):
        raise StrictJSONError("a string escapes a lone UTF-16 surrogate, which is not text")
    return value


def _is_valid_unicode(value: Any) -> bool:
    """Pairs of surrogate escapes decode to one character; a lone one cannot be encoded as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
