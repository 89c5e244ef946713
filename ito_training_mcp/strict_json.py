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


_CONTAINERS = (dict, list)  # what the decoders build; nothing else holds children


def depth_exceeds(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Is `value` nested deeper than `limit` levels of arrays and objects? Level by level,
    iteratively, so a hostile document cannot exhaust the stack here. Each level's children are
    gathered in C and looked at once each (300,000 empty objects cost no Python call each), but for
    a long list of strings (labels), which is passed over at C speed."""
    level = [value] if type(value) in _CONTAINERS else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        objects = [node for node in level if type(node) is dict]
        lists = [node for node in level if type(node) is list]
        long = [node for node in lists if len(node) > _SHORT_LIST]
        below = [child for child in chain(chain.from_iterable(map(dict.values, objects)),
                                          chain.from_iterable(node for node in lists if len(node) <= _SHORT_LIST))
                 if type(child) in _CONTAINERS]
        for node in long:
            try:
                "".join(node)  # nothing but strings: no level below
            except TypeError:
                below += [child for child in node if type(child) in _CONTAINERS]
        level = below
    return False


_SHORT_LIST = 8


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
    return loads_text(decode(data), max_depth=max_depth, decimal_fractions=decimal_fractions)


def decode(data: bytes) -> str:
    """The text of UTF-8 JSON bytes, or `StrictJSONError` (not UTF-8, or a byte-order mark)."""
    try:
        text = data.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise StrictJSONError("the file is not valid UTF-8") from None
    if text.startswith("\ufeff"):
        raise StrictJSONError("the file starts with a byte-order mark")
    return text


def loads_text(text: str, *, max_depth: int | None = MAX_DEPTH, decimal_fractions: bool = True) -> Any:
    """`loads` of text that `decode` returned."""
    try:
        value = (_DECODER if decimal_fractions else _FLOAT_DECODER).decode(text)
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
    if max_depth is not None and depth_exceeds(value, max_depth):
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
