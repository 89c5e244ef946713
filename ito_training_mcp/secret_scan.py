"""A focused scanner for credentials in a parsed JSON document and in single strings (contract §6).

Why our own and not detect-secrets: a `# pragma: allowlist secret` inside a JSON string silences
detect-secrets, it misses `Bearer ...`, `sk-proj-...`, `hf_...` and credential-named keys with
low-entropy values, and it flags every sha256 we legitimately carry. This scanner looks at every
key and every string value of the parsed document (so JSON escapes cannot hide a token), knows no
allow-list of any kind, and reports only where and what kind -- never the value. The formats are in
secret_rules.py; docs/threat-model.md lists them and what the scanner cannot see.

Text is normalised before matching (NFKC, then invisible format characters removed), so a
full-width `ｇｈｐ＿` or a zero-width joiner inside `ghp_` does not hide a token.

Speed: a document is not scanned string by string. The strings are joined with NUL (which no
pattern crosses) and one pass finds every place where an *anchor* of some rule occurs (`ghp_`,
`AKIA`, `password` ...); only the strings around those places are checked against the rules that
the anchors name. Past `_MAX_SEGMENTS` such strings, each rule that can still match is run once
over the rest of the text instead. Either way the work is linear in the size of the document and
does not depend on the number of strings. When the caller passes the document's JSON text and it
is ASCII without escapes, that text is searched directly and a clean document never needs the
walk at all; anything found there is settled by the walk, which alone knows JSON pointers.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .secret_engine import Engine, default_engine
from .secret_rules import RULES

MAX_FINDINGS = 20
_POINTER_MAX = 200
_MAX_SEGMENTS = 64
_KEY_NAME = "credential_key_name"
# A string with more distinct invisible characters than this is reported rather than cleaned: no
# legitimate text needs so many (a few flags of subdivisions use about ten), and each costs a pass.
_MAX_INVISIBLE_KINDS = 12
HIDDEN = "hidden_characters"
_CONTAINERS = (dict, list)

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class Finding:
    """Where (a JSON pointer; any key that is not a plain identifier shows as `*`) and what kind.
    Never the value."""

    pointer: str
    kind: str
    in_key: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"pointer": self.pointer, "kind": self.kind, "in_key": self.in_key}


def escape_pointer_token(token: str) -> str:
    """One JSON-pointer reference token (RFC 6901): `~` as `~0`, `/` as `~1`."""
    return token.replace("~", "~0").replace("/", "~1")


_escape = escape_pointer_token  # the name manifest.py has used


def normalize(text: str) -> str | None:
    """NFKC, then without format characters (Cf) and other invisible ones: what a reader would see.

    None when the text holds more kinds of invisible character than any legitimate text needs.
    """
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    engine = default_engine()
    text = unicodedata.normalize("NFKC", text)
    data = engine.prepare(text)
    found = engine.invisible(data, 0)
    if found is None:
        return text
    removed: set[Any] = set()
    while found is not None:
        # Look ahead over the next occurrences first: text stuffed with many different invisible
        # characters is reported without paying one pass per character.
        ahead: list[Any] = []
        at: tuple[int, int] | None = found
        while at is not None and len(ahead) < 64:
            ahead.append(data[at[0]:at[1]])
            at = engine.invisible(data, at[1])
        fresh = set(ahead) - removed
        removed |= fresh
        if len(removed) > _MAX_INVISIBLE_KINDS:
            return None
        for char in fresh:
            data = data.replace(char, data[:0])  # every occurrence of that character
        found = engine.invisible(data, found[0])  # nothing before it was invisible
    text = data.decode("utf-8", "surrogatepass") if isinstance(data, bytes) else data
    return unicodedata.normalize("NFKC", text)  # removing one can bring two composable characters together


def _kinds(engine: Engine, data: Any, memo: dict[Any, set[str]] | None = None) -> set[str]:
    if memo is not None:
        if data not in memo:
            memo[data] = _kinds(engine, data)
        return memo[data]
    kinds: set[str] = set()
    for index in sorted(engine.anchored_rules(data)):
        kind = RULES[index].kind
        if kind not in kinds and engine.rule_match(index, data) is not None:
            kinds.add(kind)
    return kinds


def value_kinds(text: str) -> list[str]:
    """The kinds of credential found in one string (empty when none). Linear in its length."""
    engine = default_engine()
    clean = normalize(text)
    return [HIDDEN] if clean is None else sorted(_kinds(engine, engine.prepare(clean)))


def credential_key_name(key: str) -> bool:
    """password, apiKey, PRIVATE_KEY, client-secrets, hf_token, Passwort... but not max_tokens,
    tokenizer, token_budget or secretary."""
    engine = default_engine()
    clean = normalize(key)
    return clean is not None and engine.key_name_match(engine.prepare(clean)) is not None


def _key_kinds(engine: Engine, data: Any, memo: dict[Any, set[str]] | None = None) -> set[str]:
    """A key holding a token shape reports that; a key that merely names a credential, the name."""
    kinds = set(_kinds(engine, data, memo))
    if not kinds and engine.key_name_match(data) is not None:
        kinds.add(_KEY_NAME)
    return kinds


# ---------------------------------------------------------------------------- many strings at once


def _separator(data: Any, char: str) -> Any:
    return char.encode() if isinstance(data, bytes) else char


def _joined(texts: list[str], found: dict[int, set[str]]) -> str:
    """The texts normalised and joined with NUL; a text too hidden to clean is reported and left out."""
    joined = "\x00".join(texts)
    if joined.isascii() and joined.count("\x00") == len(texts) - 1:
        return joined  # the common case, settled in two passes over the bytes
    cleaned = [normalize(text) for text in texts]
    for index, text in enumerate(cleaned):
        if text is None:
            found[index] = {HIDDEN}
    return "\x00".join(text or "" for text in cleaned)


def _locate(engine: Engine, texts: list[str], keys: bool, memo: dict[Any, set[str]]) -> dict[int, set[str]]:
    """The kinds found in each of `texts`, for the strings that have any.

    Bounded: it stops once MAX_FINDINGS strings have findings (enough to report).
    """
    found: dict[int, set[str]] = {}
    data = engine.prepare(_joined(texts, found))
    sep = _separator(data, "\x00")
    check = _key_kinds if keys else _kinds
    pos = index = counted = checked = 0
    while len(found) < MAX_FINDINGS:
        at = engine.next_anchor(data, pos)
        if at < 0:
            return found
        if checked == _MAX_SEGMENTS:
            _locate_by_rules(engine, data, sep, pos, index, keys, found)
            return found
        checked += 1
        index += data.count(sep, counted, at)
        start = data.rfind(sep, 0, at) + 1
        end = data.find(sep, at)
        end = len(data) if end < 0 else end
        kinds = check(engine, data[start:end], memo)
        if kinds:
            found[index] = set(kinds)
        pos = counted = end + 1
        index += 1
    return found


def _locate_by_rules(engine: Engine, data: Any, sep: Any, pos: int, index: int, keys: bool,
                     found: dict[int, set[str]]) -> None:
    """After many candidate strings: every rule that can still match runs once over the rest."""
    rest = data[pos:]
    searches: list[tuple[str, Any]] = [
        (RULES[rule].kind, lambda d, p, rule=rule: engine.rule_match(rule, d, p))
        for rule in sorted(engine.anchored_rules(rest))
    ]
    if keys:
        searches.append((_KEY_NAME, engine.key_name_match))
    for kind, search in searches:
        at, at_index, counted, hits = pos, index, pos, 0
        while hits < MAX_FINDINGS:
            match = search(data, at)
            if match is None:
                break
            inside = max(match[1] - 1, match[0])
            at_index += data.count(sep, counted, inside)
            kinds = found.setdefault(at_index, set())
            if kind == _KEY_NAME:
                if not kinds:  # a token shape in a key takes precedence over its name
                    kinds.add(kind)
            else:
                kinds.discard(_KEY_NAME)
                kinds.add(kind)
            hits += 1
            end = data.find(sep, inside)
            if end < 0:
                break
            at = counted = end + 1
            at_index += 1


def _raw_text_is_clean(engine: Engine, text: str, memo: dict[Any, set[str]]) -> bool:
    """True when the JSON text (ASCII, no escapes) holds no credential in any key or string.

    Each anchor occurrence is checked within the string around it (in JSON text without escapes
    every `"` delimits a string). False means "let the walk decide", not "found".
    """
    data = engine.prepare(text)
    quote = _separator(data, '"')
    colon = _separator(data, ":")
    pos = 0
    for _ in range(_MAX_SEGMENTS):
        at = engine.next_ascii_anchor(data, pos)
        if at < 0:
            return True
        start = data.rfind(quote, 0, at) + 1
        end = data.find(quote, at)
        end = len(data) if end < 0 else end
        segment = data[start:end]
        if _kinds(engine, segment, memo):
            return False
        after = data[end + 1:end + 65]
        is_key = after.lstrip()[:1] == colon or (len(after) == 64 and not after.strip())  # long whitespace: assume
        if is_key and engine.key_name_match(segment) is not None:
            return False
        pos = end + 1
    return engine.next_ascii_anchor(data, pos) < 0


# ---------------------------------------------------------------------------- documents


def _collect(document: Any) -> tuple[list[str], list[str]]:
    """Every distinct key, and every string value in the order `_pointers` visits them."""
    keys: dict[str, None] = {}
    values: list[str] = [document] if type(document) is str else []
    stack = [document] if type(document) in _CONTAINERS else []
    while stack:
        node = stack.pop()
        if type(node) is dict:
            keys.update(dict.fromkeys(node))
            children: Any = node.values()
        else:
            children = node
        values += [child for child in children if type(child) is str]
        stack += [child for child in children if type(child) in _CONTAINERS]
    return list(keys), values


def _pointers(document: Any, key_kinds: dict[str, list[str]], value_kinds_at: dict[int, set[str]],
              mask: dict[str, bool]) -> Iterator[Finding]:
    """The findings in document order (containers depth-first, last pushed first, as `_collect`).

    A pointer is built for a finding and for each container on the way, not for every member:
    a container whose keys and strings hold nothing costs a few C-level list operations.
    """
    if type(document) is str:
        yield from (Finding("", kind) for kind in sorted(value_kinds_at.get(0, ())))
    index = int(type(document) is str)
    pending = sorted(value_kinds_at, reverse=True)
    stack: list[tuple[Any, str]] = [(document, "")] if type(document) in _CONTAINERS else []
    while stack:
        node, pointer = stack.pop()
        names: list[Any] = list(node) if type(node) is dict else list(range(len(node)))
        children = list(node.values()) if type(node) is dict else node
        strings = [i for i, child in enumerate(children) if type(child) is str]
        events: list[tuple[int, int, list[str]]] = []  # (position, 0 key / 1 value, kinds)
        if key_kinds and type(node) is dict and not key_kinds.keys().isdisjoint(node):
            events += [(i, 0, key_kinds[name]) for i, name in enumerate(names) if name in key_kinds]
        while pending and pending[-1] < index + len(strings):
            at = pending.pop()
            events.append((strings[at - index], 1, sorted(value_kinds_at[at])))
        for position, is_value, kinds in sorted(events):
            child_pointer = f"{pointer}/{_token(names[position], mask)}"
            yield from (Finding(child_pointer, kind, in_key=not is_value) for kind in kinds)
        index += len(strings)
        stack += [(child, f"{pointer}/{_token(names[i], mask)}") for i, child in enumerate(children)
                  if type(child) in _CONTAINERS]


def _token(name: str | int, mask: dict[str, bool]) -> str:
    if isinstance(name, int):
        return str(name)
    masked = mask.get(name)
    if masked is None:
        masked = not _PLAIN_KEY.fullmatch(name)
    return "*" if masked else escape_pointer_token(name)


def scan(document: Any, *, source: bytes | str | None = None) -> list[Finding]:
    """Every credential-looking key or string in the document, in document order, bounded.

    `source`, if given, must be the JSON text `document` was parsed from: when it is ASCII without
    escapes, a document with nothing to report is settled on that text alone.
    """
    engine = default_engine()
    memo: dict[Any, set[str]] = {}  # what a string holds, once per scan
    if source is not None:
        try:
            text = source if isinstance(source, str) else source.decode("utf-8")
        except UnicodeDecodeError:
            text = "\\"
        if text.isascii() and "\\" not in text and _raw_text_is_clean(engine, text, memo):
            return []

    keys, values = _collect(document)
    key_found = _locate(engine, keys, True, memo)
    key_kinds = {keys[i]: sorted(kinds) for i, kinds in key_found.items()}
    value_found = _locate(engine, values, False, memo)
    if not key_kinds and not value_found:
        return []
    # A key that holds a token shape, or is not a plain identifier, shows as `*`.
    mask = {key: not _PLAIN_KEY.fullmatch(key) or any(k != _KEY_NAME for k in kinds)
            for key, kinds in key_kinds.items()}
    findings: list[Finding] = []
    for finding in _pointers(document, key_kinds, value_found, mask):
        findings.append(finding)
        if len(findings) >= MAX_FINDINGS:
            break
    findings.sort(key=lambda f: f.pointer)
    return [Finding(f.pointer[:_POINTER_MAX], f.kind, f.in_key) for f in findings[:MAX_FINDINGS]]
