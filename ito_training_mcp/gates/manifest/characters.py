"""The manifest's character rule (contract §10): no key or string may hold a character that could make
a terminal or a viewer show something other than the bytes the person confirms.

Cost: a valid manifest is settled on its bytes. Strict JSON allows no raw C0 character inside a
string (and outside one only layout), so a forbidden character in a key or string stands there raw
(UTF-8 of a class other than C0) or as an escape. ASCII text without such an escape (one byte
search each for `\\` and DEL) holds none, and that is the usual manifest. Otherwise every key and
string is checked at once, joined; only when that finds something is the document walked for
pointers.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from functools import cache
from itertools import accumulate, compress
from typing import Any, NamedTuple

from ito_training_mcp import byte_facts
from ito_training_mcp.byte_facts import ByteFacts
from ito_training_mcp.egress.invisible import character_class as invisible_class
from ito_training_mcp.egress.invisible import re2_class, runs, utf8_starts
from ito_training_mcp.pointers import pointer as safe_pointer

# Characters that could make a terminal or a viewer show something other than the bytes the person
# confirms (contract §10), by class. Tab and newline are allowed in the description only.
CHARACTER_CLASSES: tuple[tuple[str, str], ...] = (
    ("c0_control", "\x00-\x1f"),
    ("del", "\x7f"),
    ("c1_control", "\x80-\x9f"),
    # The embeddings, overrides and isolates of §10, plus (an extension) the implicit marks
    # LRM, RLM and ALM: they too reorder what a reviewer sees around digits and punctuation.
    ("bidi_control", "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"),
    # Extension: Unicode's own line and paragraph separators start a new line in some viewers.
    ("line_separator", "\u2028\u2029"),
    # Extension: characters that show as nothing (Default_Ignorable_Code_Point, and U+2800 BRAILLE
    # PATTERN BLANK; see invisible.py): a zero-width joiner or a variation selector in a URI or a name
    # makes another string that looks the same. The bidi marks above keep their own class.
    ("invisible", invisible_class()),
    # Extension: the format characters (Cf) that are not default-ignorable: prepended concatenation
    # marks (Arabic number signs U+0600-U+0605, U+06DD, U+0890, U+0891, U+08E2, Syriac U+070F, Kaithi
    # U+110BD, U+110CD), interlinear annotation (U+FFF9-U+FFFB, which hides the annotated text) and the
    # Egyptian hieroglyph format controls (U+13430-U+1343F). Most viewers draw them as nothing or
    # out of place, and the secret scanner removes them before it looks (secret_rules'
    # INVISIBLE_RANGES, of which a test keeps this rule's classes a superset).
    ("format_control", "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\ufff9-\ufffb\U000110bd\U000110cd"
                       "\U00013430-\U0001343f"),
)
MAX_CHARACTER_PROBLEMS = 20
_CONTAINERS = (dict, list)
_CONTAINER_TYPES = frozenset({dict, list})
_STRING_AND_CONTAINER_TYPES = frozenset({str, dict, list})
_JSON_TYPES = frozenset({str, dict, list, int, float, Decimal, bool, type(None)})
_BREAKS = "\t\n"  # allowed in the description
_FORBIDDEN = re.compile("[" + "".join(ranges for _, ranges in CHARACTER_CLASSES) + "]")
_CLASS_OF = [(name, re.compile(f"[{ranges}]")) for name, ranges in CHARACTER_CLASSES]
# An escape that may stand for a forbidden character, by its first three or four hex digits
# (over-inclusive: `\\u0610` matches too). Supplementary characters are escaped as surrogate pairs:
# U+110BD.. is \\ud804.., U+13430.. is \\ud80d.., U+1BCA0.. is \\ud82f.., U+1D173.. is \\ud834..,
# U+E0000..U+E0FFF is \\udb40..\\udb43.
_FORBIDDEN_ESCAPE = re.compile(
    rb"\\(?:[bfnrt]|u(?:00[01789a]|034|06[01d]|070|08[9e]|11[56]|17b|180|20[026]|280|316|fe[0f]|ff[af]|d804|d80d"
    rb"|d82f|d834|db4[0-3]))",
    re.IGNORECASE)


def _code_points(exclude: str = "") -> list[int]:
    points: set[int] = set()
    for _name, ranges in CHARACTER_CLASSES:
        for match in re.finditer(r"(.)(?:-(.))?", ranges, re.DOTALL):
            low = ord(match.group(1))
            points.update(range(low, ord(match.group(2) or match.group(1)) + 1))
    return sorted(points - {ord(c) for c in exclude})


class _Utf8Search(NamedTuple):
    begun: Callable[[bytes], bool]  # could the bytes hold one? (a few byte searches; False is certain)
    search: Callable[[bytes], bool]  # do they? (one linear pass)

    def __call__(self, data: bytes) -> bool:
        return self.begun(data) and self.search(data)


@cache
def _utf8_search(exclude: str) -> _Utf8Search:
    """Does UTF-8 `data` hold a forbidden character other than those in `exclude`? A look for the
    bytes that begin one (a few byte searches: most text holds none of them), then one linear pass:
    RE2 where installed (a dependency), else Python's `re` over the decoded text."""
    points = _code_points(exclude)
    ranges = runs(points)
    begun = utf8_starts(points)
    try:
        import re2  # type: ignore[import-untyped]  # no type information shipped
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        pattern = re.compile("[" + "".join(re.escape(chr(a)) + "-" + re.escape(chr(b)) for a, b in ranges) + "]")
        return _Utf8Search(begun, lambda data: pattern.search(data.decode("utf-8", "surrogatepass")) is not None)
    compiled = _re2_class(re2, ranges)
    return _Utf8Search(begun, lambda data: compiled.search(data) is not None)


def _re2_class(re2: Any, ranges: list[tuple[int, int]]) -> Any:
    options = re2.Options()
    options.never_capture = True
    return re2.compile(re2_class(ranges), options)


class BytesLook(NamedTuple):
    """What one look at a strict JSON text's bytes says about its keys and strings."""

    forbidden_possible: bool  # False: none can hold a forbidden character (certain)
    # True: every one shows as itself, but for tab and newline (certain, for a text the character rule
    # then passes: the escapes it allows make only those). False: not known. None: not looked at
    # (`shown_as_is` answers).
    shown_as_is: bool | None
    facts: ByteFacts | None = None  # byte_facts' answers, when the look took them (for the scanner)


def look_at_bytes(content: bytes, *, characters: int | None = None) -> BytesLook:
    """One look at the bytes of a strict JSON text (of `characters` characters, if the caller knows).
    A key or string holds a character raw or as an escape; outside them there is only layout. In a
    text that is not ASCII, the search for those is replaced by `byte_facts`' one pass, which looks
    for every character not shown as itself (a superset) and answers the scanner's questions too,
    at the cost of one search (~3 ms a mebibyte): finding no such character, it answers both. The
    scanner's look at such a text without escapes searches all of it at least once, which the pass
    usually spares (a manifest seldom holds an anchor as written). A text with escapes, where the
    scanner does not look, takes the pass only when its bytes could begin a forbidden character (a
    few byte searches tell), or when it is mostly in other scripts (a quarter of its characters or
    more not ASCII, told by `characters`), where those byte searches cost as much (~3 ms a
    mebibyte of Devanagari)."""
    escapes = b"\\" in content
    if escapes and _FORBIDDEN_ESCAPE.search(content) is not None:
        return BytesLook(True, False)
    if content.isascii():
        forbidden = b"\x7f" in content
        return BytesLook(forbidden, not forbidden and not _unicode_escapes(content))
    forbidden_search = _utf8_search(_C0)
    mostly_other_scripts = characters is not None and 4 * (len(content) - characters) >= characters
    if escapes and not mostly_other_scripts and not forbidden_search.begun(content):
        return BytesLook(False, None)
    if _first_other_is_forbidden(content):  # a refusal: settled without a pass over all of it
        return BytesLook(True, False)
    found = byte_facts.facts(content)
    if found is None:  # without RE2
        return BytesLook(forbidden_search(content), False)
    return BytesLook(found.forbidden, not found.not_shown and not _unicode_escapes(content), found)


_OTHER = re.compile(rb"[\x80-\xff]")
_FIRST_LOOK = 16 << 10  # bytes looked through for the first character that is not ASCII


def _first_other_is_forbidden(content: bytes) -> bool:
    """Is the first character that is not ASCII, within the first `_FIRST_LOOK` bytes, a forbidden
    one? (A text the rule refuses usually shows one early; the one pass could not stop there.)"""
    found = _OTHER.search(content, 0, _FIRST_LOOK)
    if found is None:
        return False
    first = content[found.start():found.start() + 4].decode("utf-8", "ignore")[:1]
    return bool(first) and ord(first) in _forbidden_points()


@cache
def _forbidden_points() -> frozenset[int]:
    return frozenset(_code_points(_C0))


def forbidden_raw_ranges() -> list[tuple[int, int]]:
    """The forbidden code points a strict JSON text can hold raw (raw C0 is only layout there), as runs."""
    return runs(_code_points(_C0))


def shown_as_is(content: bytes) -> bool:
    """Does every key and string of this strict JSON text show as itself, but for tab and newline,
    provided the character rule passes it? True is certain; False may only mean "not known". A
    `\\u` escape can make any character, so a text with one is not known (a `\\\\u`, an escaped
    backslash and a letter, counts too: that only costs the egress its own look); the escapes the
    rule allows make only tab and newline. Otherwise one pass over the bytes (`byte_facts`) for a
    character that is not shown as itself (`invisible.not_shown_ranges`), layout aside."""
    if _unicode_escapes(content):
        return False
    if content.isascii():
        return b"\x7f" not in content
    found = byte_facts.facts(content)
    return found is not None and not found.not_shown


def _unicode_escapes(content: bytes) -> bool:
    return b"\\" in content and b"\\u" in content


_C0 = "".join(chr(c) for c in range(0x20))  # raw C0 is layout here


def may_hold_forbidden(content: bytes) -> bool:
    """False when no key or string of this strict JSON text can hold a forbidden character."""
    return look_at_bytes(content).forbidden_possible


def _holds_forbidden(text: str) -> bool:
    """Does `text` hold a forbidden character other than tab and newline?"""
    if text.isascii():
        return any(c in text for c in _ASCII_FORBIDDEN)
    return _utf8_search(_BREAKS)(text.encode("utf-8", "surrogatepass"))


_ASCII_FORBIDDEN = tuple(chr(c) for c in _code_points(_BREAKS) if c < 0x80)


def character_class(text: str, *, description: bool = False) -> str | None:
    """The class of the first forbidden character in `text`, or None. Never the character itself."""
    if description:
        text = text.replace("\t", "").replace("\n", "")
    match = _FORBIDDEN.search(text)
    if match is None:
        return None
    return next(name for name, pattern in _CLASS_OF if pattern.fullmatch(match.group()))


def character_problems(document: Any) -> list[dict[str, Any]]:
    """Every key and string value holding a forbidden character, wherever it is (even under an
    unknown key), reported by pointer and class, bounded. Whether there is any is `holds_forbidden`'s
    cheaper question."""
    return _walk(document)


def holds_forbidden(document: Any, keys: list[str], values: list[str]) -> bool:
    """Does a key or string value of `document` hold a forbidden character? One look at them all
    together: `keys` and `values` are every key and every string value of `document` (as
    `secret_scan.DocumentStrings` collects them). The caller may know without it: when
    `may_hold_forbidden` finds one in a text without escapes (outside strings JSON allows only
    layout, raw C0 is never inside one, and the tab and newline the description may hold are
    always escaped)."""
    description = document.get("description") if type(document) is dict else None
    breaks = 0
    if type(description) is str:
        breaks = description.count("\n") + description.count("\t")
    joined = " ".join(keys) + " " + " ".join(values)
    # tab and newline, if any, must all be in the description
    return _holds_forbidden(joined) or joined.count("\n") + joined.count("\t") != breaks


def _holding_forbidden(strings: list[str], joined: str) -> Iterator[tuple[int, str]]:
    """The strings of a list that hold a forbidden character, with their indices, in order: found in
    `joined` (them joined by a space) by one search each, and placed by their lengths' running sum
    (a list of 350,000 strings with one bad one costs one pass, not 350,000 looks)."""
    ends: list[int] = []
    pos = 0
    while (match := _FORBIDDEN.search(joined, pos)) is not None:
        if not ends:  # string i ends (exclusive) at ends[i] + i in `joined`
            ends = list(accumulate(map(len, strings)))
        low, high = 0, len(strings) - 1
        while low < high:  # the first string that ends after the match
            middle = (low + high) // 2
            if ends[middle] + middle <= match.start():
                low = middle + 1
            else:
                high = middle
        yield low, strings[low]
        pos = ends[low] + low + 1


def _walk(document: Any) -> list[dict[str, Any]]:
    """The first MAX_CHARACTER_PROBLEMS problems, depth first: on entering an object its keys (last
    first), then its values and the items of a list in order. Each container's children are taken
    one at a time, so the walk stops at the limit (a list of thousands of bad strings costs twenty
    steps, not a step each), and a container's keys or strings that hold no forbidden character
    together are passed over at once (a list of 350,000 clean strings is one search, not 350,000)."""
    problems: list[dict[str, Any]] = []
    if isinstance(document, str):
        found = character_class(document)
        return [{"pointer": safe_pointer(()), "problem": found}] if found else []
    stack: list[tuple[tuple[str | int, ...], Iterator[tuple[str | int, Any]]]] = []

    def enter(path: tuple[str | int, ...], node: Any) -> None:
        if isinstance(node, dict):
            if _FORBIDDEN.search(" ".join(node)) is not None:  # the keys at once: most hold nothing
                keys = list(node)
                for key in reversed([*compress(keys, map(_FORBIDDEN.search, keys))]):  # a search each, in C
                    if len(problems) >= MAX_CHARACTER_PROBLEMS:
                        break
                    found = character_class(key)
                    if found:
                        problems.append({"pointer": safe_pointer((*path, key)), "problem": found})
            if path and _FORBIDDEN.search(" ".join(v for v in node.values() if isinstance(v, str))) is None:
                stack.append((path, ((k, v) for k, v in node.items() if v and isinstance(v, _CONTAINERS))))
            else:  # (the document's own values: its description may hold tab and newline)
                stack.append((path, iter(node.items())))
        elif isinstance(node, list):
            try:
                joined = " ".join(node)  # a list of strings, at once
            except TypeError:
                kinds = set(map(type, node))
                clean = _FORBIDDEN.search(" ".join(v for v in node if isinstance(v, str))) is None
                wanted = _CONTAINER_TYPES if clean else _STRING_AND_CONTAINER_TYPES
                if kinds <= _JSON_TYPES:  # what a parser makes: the rest (500,000 numbers, or empty objects,
                    # which hold nothing) passed over in C
                    wanted_here = map(operator.and_, map(wanted.__contains__, map(type, node)), map(bool, node))
                    stack.append((path, compress(enumerate(node), wanted_here)))
                else:
                    stack.append((path, enumerate(node)))
            else:
                stack.append((path, _holding_forbidden(node, joined)))

    enter((), document)
    while stack and len(problems) < MAX_CHARACTER_PROBLEMS:
        path, children = stack[-1]
        step = next(children, None)
        if step is None:
            stack.pop()
            continue
        name, child = step
        if isinstance(child, str):
            found = character_class(child, description=path == () and name == "description")
            if found:
                problems.append({"pointer": safe_pointer((*path, name)), "problem": found})
        else:
            enter((*path, name), child)
    return problems[:MAX_CHARACTER_PROBLEMS]
