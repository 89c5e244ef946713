"""The manifest's character rule: no key or string may hold a character that could make a terminal or a
viewer show something other than the bytes the person confirms. Problems name the JSON pointer and the
character's class, never the character.

Strict JSON has no raw C0 character inside a string, and outside strings only layout: so a forbidden
character stands in the text either raw or as an escape. One search of the text finds both; a text whose
only such finds are escaped tabs and newlines, exactly as many as the description holds, holds none
anywhere else. Otherwise every key and string is looked at, to say where.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no types

from ito_training_mcp.scanner import INVISIBLE_RANGES, pointer

_BIDI = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
# By class, in the order a character is classified. Tab and newline are allowed in the description only.
CHARACTER_CLASSES: tuple[tuple[str, str], ...] = (
    ("c0_control", "\x00-\x1f"),
    ("del", "\x7f"),
    ("c1_control", "\x80-\x9f"),
    # The embeddings, overrides and isolates, and the implicit marks LRM, RLM and ALM: all reorder what a
    # reviewer sees around digits and punctuation.
    ("bidi_control", _BIDI),
    ("line_separator", "\u2028\u2029"),  # start a new line in some viewers
    # Characters that show as nothing (default-ignorable code points, format characters, the blank braille
    # cell): a zero-width joiner in a URI or a name makes another string that looks the same. The secret
    # scanner drops the same characters before it looks.
    ("invisible", "".join(chr(lo) if lo == hi else f"{chr(lo)}-{chr(hi)}" for lo, hi in INVISIBLE_RANGES)),
)
MAX_CHARACTER_PROBLEMS = 20
_FORBIDDEN = re.compile("[" + "".join(ranges for _, ranges in CHARACTER_CLASSES) + "]")
# A raw forbidden character (C0 cannot stand raw in a string), searched by RE2 (a class this large costs
# Python's `re` ~20 ns a character).
_RAW = re2.compile(("[" + "".join(ranges for name, ranges in CHARACTER_CLASSES if name != "c0_control") + "]"
                    ).encode() + rb"|\\[ubfr]")
_CLASS_OF = [(name, re.compile(f"[{ranges}]")) for name, ranges in CHARACTER_CLASSES]


def character_class(text: str, *, description: bool = False) -> str | None:
    """The class of the first forbidden character in `text`, or None (`description`: tab and newline allowed)."""
    if description:
        text = text.replace("\t", "").replace("\n", "")
    match = _FORBIDDEN.search(text)
    if match is None:
        return None
    return next(name for name, pattern in _CLASS_OF if pattern.fullmatch(match.group()))


def character_problems(document: Any, content: bytes) -> list[dict[str, str]]:
    """Every key and string of `document` (parsed from the JSON bytes `content`) holding a forbidden character,
    even under an unknown key: its pointer and class, at most MAX_CHARACTER_PROBLEMS of them."""
    if _only_description_breaks(document, content):
        return []
    problems: list[dict[str, str]] = []
    for path, string in strings_of(document):
        found = character_class(string, description=path == ("description",))
        if found:
            problems.append({"pointer": pointer(path), "problem": found})
            if len(problems) == MAX_CHARACTER_PROBLEMS:
                break
    return problems


def _only_description_breaks(document: Any, content: bytes) -> bool:
    """Do the bytes hold no forbidden character but escaped tabs and newlines, as many as the description
    holds? (An escaped backslash before an `n`, say, only sends the document to the walk.)"""
    escapes = b"\\" in content  # one byte search: most manifests hold no escape at all
    if content.isascii():  # then DEL is the only forbidden character that can stand raw
        if b"\x7f" in content or (escapes and any(e in content for e in (b"\\u", b"\\b", b"\\f", b"\\r"))):
            return False
    elif _RAW.search(content) is not None:  # a raw forbidden character, or an escape that may stand for one
        return False
    breaks = content.count(b"\\n") + content.count(b"\\t") if escapes else 0
    if not breaks:
        return True
    description = document.get("description") if isinstance(document, dict) else None
    return isinstance(description, str) and breaks == description.count("\n") + description.count("\t")


def strings_of(document: Any) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every key and string value with its path, depth first in document order (a key's path is its own)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), document)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            yield path, node
        elif isinstance(node, dict):
            for key in node:
                yield (*path, key), key
            stack.extend(((*path, key), value) for key, value in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend(((*path, index), item) for index, item in reversed(list(enumerate(node))))
