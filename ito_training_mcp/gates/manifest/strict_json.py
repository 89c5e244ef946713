"""Strict JSON for reviewed documents: UTF-8 only, no byte-order mark, no duplicate keys, no NaN or
Infinity, no lone surrogate, at most 32 levels of nesting, and numbers with a fraction kept as `Decimal`.

A reviewer reads one meaning from a file; a parser that silently keeps the last of two duplicate keys,
or rounds a number, would let the bytes say something else. Backend answers use the same parser with
`decimal_fractions=False` (their money is carried in strings; other fractions stay floats).
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

MAX_DEPTH = 32


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


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # "1e999" is a valid JSON number, but not one a float can carry
        raise _Constant
    return value


_DECIMAL = json.JSONDecoder(object_pairs_hook=_pairs, parse_float=Decimal, parse_constant=_constant)
_FLOAT = json.JSONDecoder(object_pairs_hook=_pairs, parse_float=_finite_float, parse_constant=_constant)
_BRACKETS = str.maketrans("[{]}", "(())")
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Is valid JSON `text` nested deeper than `limit` levels? Counted on its brackets outside strings,
    each pass removing the innermost pairs: a few string operations, whatever the document holds."""
    if text.count("[") + text.count("{") <= limit:
        return False
    if "\\" in text:  # escaped backslashes and quotes out first: a quote after one does not end a string
        text = text.replace("\\\\", "").replace('\\"', "")
    outside = "".join(text.split('"')[::2])  # every other quote opens a string: what lies between is content
    nesting = _NOT_BRACKETS.sub("", outside).translate(_BRACKETS)
    for _ in range(limit):
        if not nesting:
            return False
        nesting = nesting.replace("()", "")
    return bool(nesting)


def decode(data: bytes) -> str:
    """The text of UTF-8 JSON bytes, or `StrictJSONError` (not UTF-8, or a byte-order mark)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StrictJSONError("the file is not valid UTF-8") from None
    if text.startswith("\ufeff"):
        raise StrictJSONError("the file starts with a byte-order mark")
    return text


def loads(data: bytes, *, decimal_fractions: bool = True) -> Any:
    """Parse UTF-8 JSON bytes strictly or raise `StrictJSONError`."""
    return loads_text(decode(data), decimal_fractions=decimal_fractions)


def loads_text(text: str, *, decimal_fractions: bool = True, check_depth: bool = True) -> Any:
    """`loads` of text that `decode` returned. `check_depth=False` leaves the nesting limit to the caller
    (`too_deep`), who must ask before trusting or refusing the document (the manifest gate asks only before
    a refusal: a document its closed schema accepts nests five levels at most)."""
    try:
        value = (_DECIMAL if decimal_fractions else _FLOAT).decode(text)
    except _Duplicate:
        raise StrictJSONError("an object has a duplicate key") from None
    except _Constant:
        raise StrictJSONError("NaN and Infinity are not JSON numbers") from None
    except RecursionError:
        raise StrictJSONError(f"nesting is deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:  # the position only: the decoder's message stays out
        raise StrictJSONError(f"not valid JSON (line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, ArithmeticError):  # an integer past Python's digit limit, an exponent past Decimal's
        raise StrictJSONError("a number cannot be represented") from None
    if check_depth and too_deep(text):
        raise StrictJSONError(f"nesting is deeper than {MAX_DEPTH} levels")
    if "\\" in text and ("\\ud" in text or "\\uD" in text) and not _encodable(value):
        raise StrictJSONError("a string escapes a lone UTF-16 surrogate, which is not text")
    return value


def _encodable(value: Any) -> bool:
    """A pair of surrogate escapes decodes to one character; a lone one cannot be written as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
