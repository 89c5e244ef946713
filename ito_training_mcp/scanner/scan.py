"""The secret scanner: a parsed JSON document in, findings out (where and what kind, never the value).

The pipeline, top to bottom:

1. Strings. Every object key and every string value, in document order, with where it stands
   (an explicit stack: the document may nest deeply). Keys come first in the text searched, so the
   rules that read keys alone search that part only.
2. Normalise. The strings are joined by NUL (no pattern matches NUL, so no match spans two strings)
   and made into the text the rules read: invisible and format characters dropped (chars.py), then
   NFKC (the standard library's unicodedata) wherever a character NFKC could change stands
   (full-width letters, ligatures, math letters, decomposed accents ...). Common wide punctuation is
   replaced directly. Combining marks past the 30th of a run are dropped first: CPython reorders
   marks with an insertion sort, quadratic in a run's length, and marks never make a token.
3. Triggers. One RE2-set pass over that text finds which rules' trigger literals occur.
4. Candidates. Each triggered rule's own pattern finds candidates; the rule's check confirms each
   (checks.py: placeholders, checksums, randomness, a credential's name and a value).
5. Findings. A JSON pointer (keys masked unless plain and harmless) and the kind, in document order.

Every step is linear in the input, and the verdict never depends on how long a step took.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from . import chars, checks, names
from .rules import RULES, Rule

LIMIT = 20
POINTER_MAX = 200
MAX_MARKS = 30  # combining marks kept in a run
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_IDENT_TAIL = re.compile(r"[\w.$@-]*\Z")
_WORD = re.compile(r"[\w.-]+")
_LOOK_BACK = 48  # bytes before a name read for the words that belong to it ("the api" of "the api key is")


@dataclass(frozen=True)
class Finding:
    """Where (a JSON pointer; a key that is not a plain identifier shows as `*`) and what kind. Never the value."""

    pointer: str
    kind: str
    in_key: bool

    def as_dict(self) -> dict[str, Any]:
        return {"pointer": self.pointer, "kind": self.kind, "in_key": self.in_key}


# ---------------------------------------------------------------------------- 1. strings

Path = tuple[str | int, ...]


class _Strings:
    """A document's keys and string values in document order: `keys[i]` stands at `key_at[i]` (the
    object's path, the key, the index of its value in `values` or -1, the document order), `values[j]`
    at `value_at[j]` (the container's path, the key or index or None for the document itself, the
    document order)."""

    def __init__(self, document: Any) -> None:
        self.keys: list[str] = []
        self.key_at: list[tuple[Path, str, int, int]] = []
        self.values: list[str] = []
        self.value_at: list[tuple[Path, str | int | None, int]] = []
        if isinstance(document, str):
            self.values.append(document)
            self.value_at.append(((), None, 0))
            return
        order = 0
        stack: list[tuple[Path, Iterator[tuple[str | int, Any]]]] = [((), _items(document))]
        while stack:
            path, items = stack[-1]
            for token, value in items:
                if isinstance(token, str):
                    self.keys.append(token)
                    self.key_at.append((path, token, len(self.values) if isinstance(value, str) else -1, order))
                    order += 1
                if isinstance(value, str):
                    self.values.append(value)
                    self.value_at.append((path, token, order))
                    order += 1
                elif isinstance(value, dict | list):
                    stack.append(((*path, token), _items(value)))
                    break
            else:
                stack.pop()


def _items(container: Any) -> Iterator[tuple[str | int, Any]]:
    if isinstance(container, dict):
        return iter(container.items())
    return enumerate(container) if isinstance(container, list) else iter(())


# ---------------------------------------------------------------------------- 2. normalise

def _ranges_class(ranges: Iterable[tuple[int, int]]) -> str:
    return "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in ranges)


def _re2(pattern: str) -> Any:
    options = re2.Options()
    options.max_mem = 64 << 20
    return re2.compile(pattern, options)


@functools.cache
def _unstable() -> Any:
    """A character NFKC may change, with the one before it (NFKC may join them)."""
    return _re2(f"[^\\x00]?[{_ranges_class(chars.UNSTABLE_RANGES)}]+")


@functools.cache
def _long_mark_run() -> Any:
    return _re2(f"[\\p{{M}}\\x{{ff9e}}\\x{{ff9f}}]{{{MAX_MARKS + 1},}}")


_INVISIBLE = re.compile("[" + "".join(
    chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in chars.INVISIBLE_RANGES) + "]+")
_WINDOW_COST = 256  # characters of whole-text NFKC that cost about as much as normalising one window


def _nfkc(text: str) -> str:
    """Invisible characters dropped, runs of combining marks cut at MAX_MARKS, NFKC."""
    text = _INVISIBLE.sub("", text)
    data = text.encode("utf-8", "surrogatepass")
    runs = [m.span() for m in _long_mark_run().finditer(data)]
    if runs:
        data = b"".join(_cut_runs(data, runs))
        text = data.decode("utf-8", "surrogatepass")
    text = unicodedata.normalize("NFKC", text)
    return text if text.isascii() else _INVISIBLE.sub("", text)


def _cut_runs(data: bytes, runs: list[tuple[int, int]]) -> Iterator[bytes]:
    done = 0
    for start, end in runs:
        run = data[start:end].decode("utf-8", "surrogatepass")
        yield data[done:start]
        yield run[:MAX_MARKS].encode("utf-8", "surrogatepass")
        done = end
    yield data[done:]


def normalise(texts: list[str]) -> bytes:
    """The texts as the rules read them, as UTF-8 joined by NUL (each text's own NULs dropped).

    Text holding no character NFKC could change is its own NFKC form; otherwise each window (such
    a run with the character before it) is normalised in place, or, where windows are dense, the
    whole text at once: the result is the same, the cost the lower."""
    joined = "\x00".join(texts)
    if joined.count("\x00") != len(texts) - 1:
        joined = "\x00".join(t.replace("\x00", "") for t in texts)
    if joined.isascii():
        return joined.encode("ascii")
    for wide, narrow in chars.WIDE_PUNCTUATION:
        if wide in joined:
            joined = joined.replace(wide, narrow)
    data = joined.encode("utf-8", "surrogatepass")
    most = 64 + len(joined) // _WINDOW_COST
    windows: list[tuple[int, int]] = []
    for match in _unstable().finditer(data):
        windows.append(match.span())
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


@functools.lru_cache(maxsize=4096)
def _nfkc_window(window: bytes) -> bytes:
    return _nfkc(window.decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------- 3. triggers

@dataclass(frozen=True)
class _Compiled:
    triggers: Any  # an RE2 set of every rule's triggers
    rules_of: tuple[tuple[int, ...], ...]  # trigger index -> indexes in RULES


@functools.cache
def _compiled() -> _Compiled:
    options = re2.Options()
    options.max_mem = 64 << 20
    options.never_capture = True
    triggers = re2.Set.SearchSet(options)
    index: dict[str, list[int]] = {}
    for i, rule in enumerate(RULES):
        for trigger in rule.triggers:
            index.setdefault(("(?i)" if rule.fold else "") + re2.escape(trigger), []).append(i)
    for pattern in index:
        triggers.Add(pattern)
    triggers.Compile()
    return _Compiled(triggers, tuple(tuple(v) for v in index.values()))


@functools.cache
def _pattern(i: int) -> tuple[Any, int]:
    """A rule's compiled pattern and the number of its group `v`."""
    compiled = _re2(RULES[i].pattern)
    return compiled, compiled.groupindex.get("v", 0)


def _triggered(data: bytes) -> list[int]:
    """The indexes in RULES of the rules whose triggers occur in `data`, in RULES order."""
    compiled = _compiled()
    hits = compiled.triggers.Match(data)
    return sorted({i for hit in hits for i in compiled.rules_of[hit]}) if hits else []


# ---------------------------------------------------------------------------- 4. candidates

def _confirmed(rule: Rule, match: Any, data: bytes, begin: int) -> bool:
    """Does the rule's check confirm this match? `begin`: where the match's string starts."""
    value = match.group("v").decode("utf-8", "replace")
    if rule.check != "assigned":
        return checks.CHECKS[rule.check](value)
    start = match.start()
    before = data[max(begin, start - _LOOK_BACK):start].decode("utf-8", "ignore").split("\n")[-1]
    operator = match.group("o").decode("utf-8", "replace").strip(" \t\"'`")
    if operator.startswith(">") and (not _IDENT_TAIL.sub("", before).endswith("<")
                                     or not data[match.end():match.end() + 64].lstrip().startswith(b"</")):
        return False  # `<name>value</name>` only
    ident = _IDENT_TAIL.search(before).group()  # type: ignore[union-attr]  # matches the empty string
    prose = before[:len(before) - len(ident)]
    words = [] if ident or not prose[-1:].isspace() else prose.split()[-3:]
    while words and not _WORD.fullmatch(words[0]):
        words.pop(0)
    name = " ".join([*words, ident + match.group("n").decode("utf-8", "replace")])
    return checks.assigned(name, value, spaced=operator == "")


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


def _matches(text: _Text, rules: list[int], end_of_keys: int, limit: int,
             on_key_name: Callable[[int], str | None]) -> dict[tuple[int, str], None]:
    """(string index, kind) for every confirmed candidate, at most `limit` per rule (the first ones in
    document order, which are all a report of `limit` findings can show)."""
    found: dict[tuple[int, str], None] = {}
    for i in rules:
        rule = RULES[i]
        count = 0
        stop = end_of_keys if rule.keys_only else len(text.data)
        compiled, v = _pattern(i)
        for match in compiled.finditer(text.data, 0, stop):
            index = text.string_at(match.start(v) if rule.check != "key_name" else match.end() - 1)
            if rule.check == "key_name":
                kind = on_key_name(index)
                if kind is None:
                    continue
                found[(index, kind)] = None
            elif (index, rule.kind) in found or not _confirmed(rule, match, text.data, text.start_of(index)):
                continue
            else:
                found[(index, rule.kind)] = None
            count += 1
            if count == limit:
                break
    return found


# ---------------------------------------------------------------------------- 5. findings

def scan_document(document: Any, *, limit: int = LIMIT) -> list[Finding]:
    """Every key and string value of a parsed JSON document, in document order: at most `limit` findings."""
    strings = _Strings(document)
    n_keys = len(strings.keys)
    text = _Text(normalise(strings.keys + strings.values))
    rules = _triggered(text.data)
    if not rules:
        return []
    end_of_keys = text.start_of(n_keys) if n_keys < len(strings.keys) + len(strings.values) else len(text.data)
    weak_values: dict[int, int] = {}  # value index -> key index, for keys whose name asks their value be read

    def on_key_name(index: int) -> str | None:
        key = text.data[text.start_of(index):text.start_of(index + 1) - 1].decode("utf-8", "replace")
        power = names.strength(key)
        if power == names.STRONG:
            return "credential_key_name"
        value = strings.key_at[index][2]
        if power == names.WEAK and value >= 0:
            weak_values[value] = index
        return None

    found = _matches(text, rules, end_of_keys, limit, on_key_name)
    for value, key in weak_values.items():
        start = text.start_of(n_keys + value)
        content = text.data[start:text.start_of(n_keys + value + 1) - 1].decode("utf-8", "replace")
        if checks.assigned(strings.keys[key], content, spaced=False):
            found[(n_keys + value, "credential_assignment")] = None
    return _report(strings, found, limit)


def _report(strings: _Strings, found: dict[tuple[int, str], None], limit: int) -> list[Finding]:
    n_keys = len(strings.keys)
    rows = []
    for index, kind in found:
        if index < n_keys:
            path, key, _, order = strings.key_at[index]
            rows.append((order, kind, (*path, key), True))
        else:
            path, token, order = strings.value_at[index - n_keys]
            rows.append((order, kind, path if token is None else (*path, token), False))
    rows.sort(key=lambda row: (row[0], row[1]))
    return [Finding(pointer(where), kind, in_key) for _, kind, where, in_key in rows[:limit]]


def text_kinds(text: str) -> list[str]:
    """The sorted kinds found in one string read as a value (credential key names apart)."""
    data = _Text(normalise([text]))
    rules = [i for i in _triggered(data.data) if not RULES[i].keys_only]
    return sorted({kind for _, kind in _matches(data, rules, 0, 1, lambda index: None)})


def is_credential_key_name(name: str) -> bool:
    """Does this object key name a credential by itself ("password", "apiKey", "HF_TOKEN", "密码")?"""
    return names.strength(normalise([name]).decode("utf-8", "replace")) == names.STRONG


def spans(text: str) -> list[tuple[int, int]]:
    """The character ranges of what the rules find in `text` as written (no normalisation), merged."""
    data = text.encode("utf-8", "surrogatepass")
    found: list[tuple[int, int]] = []
    for i in _triggered(data):
        rule = RULES[i]
        if rule.keys_only:
            continue
        compiled, v = _pattern(i)
        for match in compiled.finditer(data):
            if _confirmed(rule, match, data, data.rfind(b"\x00", 0, match.start()) + 1):
                found.append(match.span(v))
    merged: list[list[int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if text.isascii():
        return [(a, b) for a, b in merged]
    return [(len(data[:a].decode("utf-8", "surrogatepass")), len(data[:b].decode("utf-8", "surrogatepass")))
            for a, b in merged]


# ---------------------------------------------------------------------------- pointers

@functools.lru_cache(maxsize=1024)
def _key_token(key: str) -> str:
    if not _PLAIN_KEY.fullmatch(key) or text_kinds(key):
        return "*"
    return key.replace("~", "~0").replace("/", "~1")


def pointer(path: Iterable[str | int]) -> str:
    """An RFC 6901 pointer, cut to POINTER_MAX characters: a key shows only when it is a plain identifier
    (`[A-Za-z0-9_.-]{1,64}`) holding no credential itself, else as `*`; array indexes always show."""
    return "".join(f"/{part}" if isinstance(part, int) else f"/{_key_token(part)}" for part in path)[:POINTER_MAX]
