"""The secret scanner: a parsed JSON document in, findings out (where and what kind, never the value).

The pipeline, top to bottom:

1. Strings. Every object key and every string value (an explicit stack: the document may nest
   deeply). Keys come first in the text searched, so that the rule reading keys alone searches that
   part only. Where each string stands is worked out only when something is found.
2. Text. The strings are joined by NUL (no pattern matches NUL, so no match spans two strings) and
   encoded as UTF-8.
3. Triggers. One RE2-set pass finds which rules' trigger literals occur, and whether the text holds a
   character NFKC could change. If it does, the text is normalised and the pass repeated: invisible
   and format characters dropped, combining marks right after an ASCII letter or digit dropped,
   runs of combining marks cut at 30 (CPython reorders marks with an insertion sort, quadratic in a
   run's length; marks never make a token), NFKC with the standard library's unicodedata. Common
   wide punctuation is replaced directly; NFKC runs on windows around the other characters.
4. Candidates. Each triggered rule's own pattern finds candidates; the rule's check confirms each
   (checks.py: placeholders, checksums, randomness, a credential's name and a value).
5. Findings. A JSON pointer (a key masked unless plain and harmless) and the kind, in document order.

Every step is linear in the input, and the verdict never depends on how long a step took.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import accumulate
from typing import Any, NamedTuple

from . import chars, checks, engine, names
from .rules import RULES

LIMIT = 20
POINTER_MAX = 200
MAX_MARKS = 30  # combining marks kept in a run
_PLAIN_KEY = r"[A-Za-z0-9_.-]{1,64}"
_WORD_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_TOKEN_BYTES = _WORD_BYTES | frozenset(b"+=-")  # what a token longer than its format goes on with
# Where a rule asks a boundary before or after a token (besides `\b`): `spans` drops them all.
_BEFORE, _AFTER = "(?:^|[^A-Za-z0-9_~.])", ("(?:[^0-9A-Za-z_-]|$)", "(?:[^A-Za-z0-9_~.-]|$)")
_REPETITION = r"\\.|\[(?:\\.|[^\]\\])*\]|(\{[0-9]+(?:,[0-9]*)?\}|[+*])\??"  # group 1: a quantifier
_WORD = r"[\w.-]+"
_LOOK_BACK = 48  # bytes before a name read for the words that belong to it ("the api" of "the api key is")


class Finding(NamedTuple):
    """Where (a JSON pointer; a key that is not a plain identifier shows as `*`) and what kind. Never the value."""

    pointer: str
    kind: str
    in_key: bool

    def as_dict(self) -> dict[str, Any]:
        return {"pointer": self.pointer, "kind": self.kind, "in_key": self.in_key}


# ---------------------------------------------------------------------------- 1. strings

Path = tuple[str | int, ...]
Order = tuple[tuple[int, int], ...]  # sorts in document order: (position in its container, 0 key / 1 value)


def _texts(document: Any) -> tuple[list[str], list[str]]:
    """Every key and every string value of the document (an explicit stack: it may nest deeply). The
    order is `_places`'s; where each stands is worked out only when something is found."""
    if isinstance(document, str):
        return [], [document]
    keys: list[str] = []
    values: list[str] = []
    stack: list[Any] = [document] if type(document) is dict or type(document) is list else []
    while stack:
        node = stack.pop()
        if type(node) is dict:
            keys.extend(node)
            node = node.values()
        for value in node:
            kind = type(value)
            if kind is str:
                values.append(value)
            elif kind is dict or kind is list:
                stack.append(value)
    return keys, values


class _Places(NamedTuple):
    """Where `_texts`'s keys and values stand: for key i its member's path, its document order and the
    index of its value among the values (-1: not a string); for value j its path and document order."""

    keys: list[tuple[Path, Order, int]]
    values: list[tuple[Path, Order]]


def _places(document: Any) -> _Places:
    if isinstance(document, str):
        return _Places([], [((), ())])
    keys: list[tuple[Path, Order, int]] = []
    values: list[tuple[Path, Order]] = []
    stack: list[tuple[Path, Order, Any]] = [((), (), document)]
    while stack:
        path, order, node = stack.pop()
        first = len(keys)
        if type(node) is dict:
            keys.extend(((*path, key), (*order, (n, 0)), -1) for n, key in enumerate(node))
            members: Iterable[tuple[str | int, Any]] = node.items()
        else:
            members = enumerate(node) if type(node) is list else ()
        for n, (token, value) in enumerate(members):
            kind = type(value)
            if kind is str:
                if type(node) is dict:
                    keys[first + n] = (*keys[first + n][:2], len(values))
                values.append(((*path, token), (*order, (n, 1))))
            elif kind is dict or kind is list:
                stack.append(((*path, token), (*order, (n, 1)), value))
    return _Places(keys, values)


# ---------------------------------------------------------------------------- 2. normalise

def _ranges_class(ranges: Iterable[tuple[int, int]]) -> str:
    return "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges)


def _python_class(ranges: Iterable[tuple[int, int]]) -> str:
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


_UNSTABLE = f"[{_ranges_class(chars.UNSTABLE_RANGES)}]"  # a character NFKC may change or join
_WINDOW = f"[^\\x00]?{_UNSTABLE}+"  # such characters with the one before them
_INVISIBLE = f"[{_ranges_class(chars.INVISIBLE_RANGES)}]"
_INVISIBLE_RUN = f"[{_python_class(chars.INVISIBLE_RANGES)}]+"  # for `re`
_LONG_MARK_RUN = f"[\\p{{M}}\\x{{ff9e}}\\x{{ff9f}}]{{{MAX_MARKS + 1},}}"
# Combining marks right after an ASCII letter or digit, as two `re` patterns (`re` is fast on a class of
# BMP characters alone): those of the BMP, and those beyond it.
_MARKS_AFTER_ASCII = tuple(
    f"(?<=[A-Za-z0-9])[{_python_class((a, b) for a, b in chars.MARK_RANGES if (a > 0xFFFF) == wide)}]+"
    for wide in (False, True))
_WINDOW_COST = 256  # characters of whole-text NFKC that cost about as much as normalising one window


def _visible(text: str) -> str:
    """The text without its invisible characters (looked for with RE2 first: much faster than `re`)."""
    data = text.encode("utf-8", "surrogatepass")
    return engine.python(_INVISIBLE_RUN).sub("", text) if engine.found(engine.compiled(_INVISIBLE), data) else text


def _nfkc(text: str) -> str:
    """Invisible characters dropped, combining marks right after an ASCII letter or digit dropped (no
    token holds one: an accent on a token's letter must not hide the token), runs of combining marks
    cut at MAX_MARKS, NFKC."""
    text = engine.python(_MARKS_AFTER_ASCII[0]).sub("", _visible(text))
    if max(text, default="") > "\uffff":
        text = engine.python(_MARKS_AFTER_ASCII[1]).sub("", text)
    data = text.encode("utf-8", "surrogatepass")
    pieces, done = [], 0
    for start, end in engine.spans(engine.compiled(_LONG_MARK_RUN), data):
        pieces.append(data[done:start])
        pieces.append(data[start:end].decode("utf-8", "surrogatepass")[:MAX_MARKS].encode("utf-8", "surrogatepass"))
        done = end
    if pieces:
        pieces.append(data[done:])
        text = b"".join(pieces).decode("utf-8", "surrogatepass")
    text = unicodedata.normalize("NFKC", text)
    return text if text.isascii() else _visible(text)


def _join(texts: list[str]) -> str:
    """The texts joined by NUL, each text's own NULs dropped."""
    joined = "\x00".join(texts)
    if joined.count("\x00") != len(texts) - 1:
        joined = "\x00".join(t.replace("\x00", "") for t in texts)
    return joined


def _normal(joined: str) -> bytes:
    """NUL-joined text as the rules read it, in UTF-8.

    Wide punctuation is replaced directly. Text holding no other character NFKC could change is
    then its own NFKC form; otherwise each window (a run of such characters with the one before it)
    is normalised in place, or, where windows are dense, the whole text at once: the result is the
    same, the cost the lower."""
    if joined.isascii():
        return joined.encode("ascii")
    for wide, narrow in chars.WIDE_PUNCTUATION:
        if wide in joined:
            joined = joined.replace(wide, narrow)
    data = joined.encode("utf-8", "surrogatepass")
    most = 64 + len(joined) // _WINDOW_COST
    windows: list[tuple[int, int]] = []
    for window in engine.spans(engine.compiled(_WINDOW), data):
        windows.append(window)
        if len(windows) > most:
            return _nfkc(joined).encode("utf-8", "surrogatepass")
    if not windows:
        return data
    out, done = [], 0
    for start, end in windows:
        out.append(data[done:start])
        out.append(_nfkc_window(data[start:end]))
        done = end
    out.append(data[done:])
    return b"".join(out)


def normalise(texts: list[str]) -> bytes:
    """The texts as the rules read them, as UTF-8 joined by NUL (each text's own NULs dropped)."""
    return _normal(_join(texts))


@functools.lru_cache(maxsize=4096)
def _nfkc_window(window: bytes) -> bytes:
    return _nfkc(window.decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------- 3. triggers

class _Compiled(NamedTuple):
    triggers: Any  # an RE2 set: every rule's triggers, the wide punctuation, the unstable characters
    rules_of: tuple[tuple[int, ...], ...]  # set index -> indexes in RULES
    wide: int  # the set index of the wide punctuation
    unstable: int  # the set index of the other characters NFKC may change


def _spelt(trigger: str) -> str:
    """A trigger as a pattern that also matches it with wide punctuation where it has ASCII punctuation
    (`:A` in `123：AA...`), so that text not yet normalised shows every trigger its NFKC form holds."""
    return "".join(f"[{c}{_WIDE_OF[c]}]" if c in _WIDE_OF else c if c.isalnum() or c == "_" or not c.isascii()
                   else "\\" + c for c in trigger)


_WIDE_OF = {narrow: "".join(w for w, n in chars.WIDE_PUNCTUATION if n == narrow)
            for _, narrow in chars.WIDE_PUNCTUATION}


@functools.cache
def _compiled() -> _Compiled:
    index: dict[str, list[int]] = {}
    for i, rule in enumerate(RULES):
        for trigger in rule.triggers:
            pattern = trigger if rule.pattern_triggers else _spelt(trigger)
            index.setdefault(("(?i)" if rule.fold else "") + pattern, []).append(i)
    index["[" + "".join(w for w, _ in chars.WIDE_PUNCTUATION) + "]"] = []
    index[_UNSTABLE] = []
    return _Compiled(engine.trigger_set(list(index)), tuple(tuple(v) for v in index.values()), len(index) - 2,
                     len(index) - 1)


def _prepare(texts: list[str]) -> tuple[bytes, list[int]]:
    """`normalise(texts)` and the indexes in RULES of the rules whose triggers occur in it, in RULES
    order. One set pass over the text as given tells whether it needs normalising at all: not where it
    holds no character NFKC could change, nor where it holds only wide punctuation and no trigger."""
    joined = _join(texts)
    data = joined.encode("utf-8", "surrogatepass")
    compiled = _compiled()
    hits = compiled.triggers.Match(data) or []
    if not joined.isascii() and (compiled.unstable in hits or (
            compiled.wide in hits and any(compiled.rules_of[hit] for hit in hits))):
        data = _normal(joined)
        hits = compiled.triggers.Match(data) or []
    return data, sorted({i for hit in hits for i in compiled.rules_of[hit]})


def _finder(i: int, loose: bool = False) -> Any:
    """A rule's pattern compiled to find whole matches (no groups: RE2's automaton alone), a leading
    `\\b` left to the caller (RE2 jumps from one occurrence of the literal that follows to the next).
    `loose`: without the boundaries a token's pattern asks before and after it (for masking)."""
    return engine.compiled(_loose(i) if loose else RULES[i].pattern.removeprefix("\\b"))


def _loose(i: int) -> str:
    pattern = RULES[i].pattern.replace("\\b", "").removeprefix(_BEFORE)
    for guard in _AFTER:
        pattern = pattern.removesuffix(guard)
    return pattern


@functools.cache
def _shortest(i: int) -> Any:
    """The loose pattern with every repetition lazy: the shortest token a match could begin with (a token
    glued to a placeholder word is still a token)."""
    return engine.compiled(engine.python(_REPETITION).sub(lambda m: m.group(1) + "?" if m.group(1) else m.group(),
                                                          _loose(i)))


@functools.cache
def _parser(i: int) -> re.Pattern[str] | None:
    """For a rule whose secret is part of its match (group `v`), the pattern that splits a match."""
    rule = RULES[i]
    return re.compile(rule.parse or rule.pattern) if "(?P<" in rule.pattern else None


# ---------------------------------------------------------------------------- 4. candidates

class _Text:
    """Normalised strings joined by NUL, and where each starts (computed when first needed)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._starts: list[int] | None = None

    def string_at(self, offset: int) -> int:
        if self._starts is None:
            self._starts = [0, *accumulate(len(part) + 1 for part in self.data.split(b"\x00"))]
        return bisect_right(self._starts, offset) - 1

    def start_of(self, index: int) -> int:
        self.string_at(0)
        assert self._starts is not None
        return self._starts[index]


def _secret(i: int, data: bytes, start: int, end: int) -> tuple[tuple[int, int] | None, int]:
    """Where the secret of rule `i`'s match `data[start:end]` is, if the rule's check confirms it, and
    where to search on: after the match, or, where a name followed by a space or a type was refused,
    after that name (`passwordless password=...`: what follows it may be a name and a value itself)."""
    rule, parser, text = RULES[i], _parser(i), data[start:end].decode("utf-8", "replace")
    if parser is None:
        return ((start, end) if checks.CHECKS[rule.check](text) else None), end
    match = parser.fullmatch(text)
    if match is None:  # the engines read this match differently: take it whole
        return ((start, end) if rule.check != "assigned" and checks.CHECKS[rule.check](text) else None), end
    group = "w" if rule.check == "assigned" and match.group("v") is None else "v"
    value = match.group(group)
    where = start + len(text[:match.start(group)].encode()), start + len(text[:match.end(group)].encode())
    if rule.check != "assigned":
        return (where if checks.CHECKS[rule.check](value) else None), end
    if _assigned(data, start, end, match, value):
        return where, end
    if group == "w" or any(c.isalpha() for c in match.group("o")):  # after a space or a type
        return None, start + len(text[:match.end("n")].encode())
    return None, end


def _assigned(data: bytes, start: int, end: int, match: re.Match[str], value: str) -> bool:
    """Does the name before `value` (with the words before it, where they belong to it) name a credential,
    and the value look like one?"""
    reach = max(0, start - _LOOK_BACK)
    before = data[data.rfind(b"\x00", reach, start) + 1 or reach:start]
    before_text = before.decode("utf-8", "ignore").split("\n")[-1]
    operator = (match.group("o") or match.group("p")).strip(" \t\"'`")
    cut = len(before_text)  # where the name's own characters before the match begin ("my_" of "my_password")
    while cut and (before_text[cut - 1].isalnum() or before_text[cut - 1] in "_.$@-"):
        cut -= 1
    ident, prose = before_text[cut:], before_text[:cut]
    if operator.startswith(">") and (not prose.endswith("<") or not data[end:end + 64].lstrip().startswith(b"</")):
        return False  # `<name>value</name>` only
    words = [] if ident or not prose[-1:].isspace() else prose.split()[-3:]
    while words and not engine.python(_WORD).fullmatch(words[0]):
        words.pop(0)
    name = ident + match.group("n")
    if words and names.strength(name) != names.STRONG:  # "the api key is", "public key:"
        name = " ".join([*words, name])
    return checks.assigned(name, value, spaced=operator == "")


def _matches(text: _Text, rules: list[int], end_of_keys: int, limit: int,
             on_key_name: Callable[[int], str | None]) -> dict[tuple[int, str], None]:
    """(string index, kind) for every confirmed candidate, at most `limit` per rule (the first ones in
    document order, which are all a report of `limit` findings can show). A string that has a kind
    already is not searched again for it. Equal candidates (with what stands around them) are
    checked once."""
    found: dict[tuple[int, str], None] = {}
    verdicts: dict[tuple[int, int, bytes], tuple[bool, int]] = {}  # confirmed, and where to search on
    data = text.data
    for i in rules:
        rule, finder = RULES[i], _finder(i)
        bounded = rule.pattern.startswith("\\b")  # left to here by _finder
        context = _LOOK_BACK if rule.check == "assigned" else 0  # what a verdict depends on around a match
        stop = end_of_keys if rule.keys_only else len(data)
        count = pos = 0
        while count < limit and pos < stop:
            for start, end in engine.spans(finder, data, pos, stop):
                if bounded and start and data[start - 1] in _WORD_BYTES:
                    continue
                if not rule.keys_only:
                    back = max(0, start - context)
                    key = (i, start - back, data[back:end + (64 if context else 0)])
                    if (verdict := verdicts.get(key)) is None:
                        where, resume = _secret(i, data, start, end)
                        verdict = verdicts[key] = where is not None, resume - start
                    if not verdict[0]:
                        if start + verdict[1] < end:
                            pos = start + verdict[1]
                            break
                        continue
                index = text.string_at(end - 1)
                kind = on_key_name(index) if rule.keys_only else rule.kind
                if kind is None or (index, kind) in found:
                    continue
                found[(index, kind)] = None
                count += 1
                pos = text.start_of(index + 1)  # the next string: this one has the kind
                break
            else:
                break
    return found


# ---------------------------------------------------------------------------- 5. findings

def scan_document(document: Any, *, limit: int = LIMIT, source: bytes | None = None) -> list[Finding]:
    """Every key and string value of a parsed JSON document, in document order: at most `limit` findings.
    `source`: the JSON bytes it was parsed from, when at hand (see `_quiet`)."""
    if source is not None and _quiet(source):
        return []
    keys, values = _texts(document)
    data, rules = _prepare(keys + values)
    if not rules:
        return []
    text, n_keys = _Text(data), len(keys)
    end_of_keys = text.start_of(n_keys) if values else len(data)
    places: list[_Places] = []  # worked out when first needed
    weak: dict[int, int] = {}  # value index -> key index, for keys whose name asks their value be read

    def where() -> _Places:
        if not places:
            places.append(_places(document))
        return places[0]

    def on_key_name(index: int) -> str | None:
        key = data[text.start_of(index):text.start_of(index + 1) - 1].decode("utf-8", "replace")
        power = names.strength(key)
        if power == names.STRONG:
            return "credential_key_name"
        if power == names.WEAK and (value := where().keys[index][2]) >= 0:
            weak[value] = index
        return None

    found = _matches(text, rules, end_of_keys, limit, on_key_name)
    for value, key in weak.items():
        start = text.start_of(n_keys + value)
        content = data[start:text.start_of(n_keys + value + 1) - 1].decode("utf-8", "replace")
        if checks.assigned(keys[key], content, spaced=False):
            found[(n_keys + value, "credential_assignment")] = None
    if not found:
        return []
    rows = []
    for index, kind in found:
        path, order = where().keys[index][:2] if index < n_keys else where().values[index - n_keys]
        rows.append((order, index >= n_keys, kind, path))
    rows.sort(key=lambda row: row[:3])
    return [Finding(pointer(path), kind, not is_value) for _, is_value, kind, path in rows[:limit]]


def _quiet(source: bytes) -> bool:
    """JSON bytes that hold no rule's trigger as they stand, read where that settles it: every string of
    ASCII JSON without a backslash is spelt out in it, already in its normal form, so a trigger in a
    string would show here too. Most manifests end here, without their strings gathered one by one.
    A NUL byte means the bytes are not UTF-8 JSON (`json.loads` reads UTF-16 and UTF-32 too)."""
    return (source.isascii() and b"\\" not in source and b"\x00" not in source
            and not _compiled().triggers.Match(source))


def text_kinds(text: str) -> list[str]:
    """The sorted kinds found in one string read as a value (credential key names apart)."""
    data, rules = _prepare([text])
    return sorted({kind for _, kind in _matches(_Text(data), [i for i in rules if not RULES[i].keys_only], 0, 1,
                                                lambda index: None)})


def is_credential_key_name(name: str) -> bool:
    """Does this object key name a credential by itself ("password", "apiKey", "HF_TOKEN", "密码")?"""
    return names.strength(normalise([name]).decode("utf-8", "replace")) == names.STRONG


def spans(text: str) -> list[tuple[int, int]]:
    """The character ranges of what the rules find in `text` as written (no normalisation), merged. A
    token needs no boundary before or after it, and one longer than its format is masked whole."""
    data = text.encode("utf-8", "surrogatepass")
    found: list[tuple[int, int]] = []
    hits = _compiled().triggers.Match(data) or []
    for i in sorted({i for hit in hits for i in _compiled().rules_of[hit]}):
        if RULES[i].keys_only:
            continue
        reach = 0  # where the last token run ended (each byte is read once per rule)
        pos = 0
        while (match := _finder(i, loose=True).search(data, pos)) is not None:
            start, end = match.span()
            where, pos = _secret(i, data, start, end)
            pos = max(pos, start + 1)
            if where is None and RULES[i].check == "shape":
                where = _glued(i, data, start, end)
            if where is None:
                continue
            first, last = where
            if last <= reach:
                last = reach
            else:
                while last < len(data) and data[last] in _TOKEN_BYTES:
                    last += 1
            reach = last
            found.append((first, last))
    merged: list[list[int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if text.isascii():
        return [(a, b) for a, b in merged]
    out, byte, char = [], 0, 0  # byte offsets to character offsets, in one pass
    for a, b in merged:
        char += len(data[byte:a].decode("utf-8", "surrogatepass"))
        start, byte = char, a
        char += len(data[byte:b].decode("utf-8", "surrogatepass"))
        out.append((start, char))
        byte = b
    return out


def _glued(i: int, data: bytes, start: int, end: int) -> tuple[int, int] | None:
    """For a match of a token's rule that is no token (`sk-...` glued to `todo`, or a false start just
    before a real token): the first shortest token of the rule beginning inside it, masked to its end or
    beyond."""
    pos = start
    while pos < end and (match := _shortest(i).search(data, pos)) and match.start() < end:
        if (where := _secret(i, data, match.start(), match.end())[0]) is not None:
            return where[0], max(where[1], end)
        pos = match.start() + 1
    return None


# ---------------------------------------------------------------------------- pointers

@functools.lru_cache(maxsize=1024)
def _key_token(key: str) -> str:
    if not engine.python(_PLAIN_KEY).fullmatch(key) or text_kinds(key):
        return "*"
    return key.replace("~", "~0").replace("/", "~1")


def pointer(path: Iterable[str | int]) -> str:
    """An RFC 6901 pointer, cut to POINTER_MAX characters: a key shows only when it is a plain identifier
    (`[A-Za-z0-9_.-]{1,64}`) holding no credential itself, else as `*`; array indexes always show."""
    return "".join(f"/{part}" if isinstance(part, int) else f"/{_key_token(part)}" for part in path)[:POINTER_MAX]
