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

# Format characters (Unicode category Cf, e.g. U+200B-U+200D, U+00AD, U+2060, U+FEFF, bidi controls,
# tag characters), which render as nothing, and NUL. A test keeps this list a superset of Cf.
_FORMAT_RANGES = (
    (0x00, 0x00), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891),
    (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F),
    (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)
_FORMAT_CHARS = tuple(chr(c) for low, high in _FORMAT_RANGES for c in range(low, high + 1))
# Invisible characters that are not Cf (so `str.isprintable` does not reveal them): the combining
# grapheme joiner, Hangul fillers (after NFKC), Khmer inherent vowels, Mongolian variation
# selectors, variation selectors.
_INVISIBLE_PRINTABLE = tuple(
    chr(c) for c in (0x34F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, *range(0xFE00, 0xFE10))
)
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


def normalize(text: str) -> str:
    """NFKC, then without format characters and other invisible ones: what a reader would see."""
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    text = unicodedata.normalize("NFKC", text)
    before = len(text)
    if not text.isprintable():
        for char in _FORMAT_CHARS:
            if char in text:
                text = text.replace(char, "")
    for char in _INVISIBLE_PRINTABLE:
        if char in text:
            text = text.replace(char, "")
    if len(text) != before:  # removing a character can bring two composable ones together
        text = unicodedata.normalize("NFKC", text)
    return text


def _kinds(engine: Engine, data: Any) -> set[str]:
    kinds: set[str] = set()
    for index in sorted(engine.anchored_rules(data)):
        kind = RULES[index].kind
        if kind not in kinds and engine.rule_match(index, data) is not None:
            kinds.add(kind)
    return kinds


def value_kinds(text: str) -> list[str]:
    """The kinds of credential found in one string (empty when none). Linear in its length."""
    engine = default_engine()
    return sorted(_kinds(engine, engine.prepare(normalize(text))))


def credential_key_name(key: str) -> bool:
    """password, apiKey, PRIVATE_KEY, client-secrets, hf_token, Passwort... but not max_tokens,
    tokenizer, token_budget or secretary."""
    engine = default_engine()
    return engine.key_name_match(engine.prepare(normalize(key))) is not None


def _key_kinds(engine: Engine, data: Any) -> set[str]:
    """A key holding a token shape reports that; a key that merely names a credential, the name."""
    kinds = _kinds(engine, data)
    if not kinds and engine.key_name_match(data) is not None:
        kinds.add(_KEY_NAME)
    return kinds


# ---------------------------------------------------------------------------- many strings at once


def _separator(data: Any, char: str) -> Any:
    return char.encode() if isinstance(data, bytes) else char


def _locate(engine: Engine, texts: list[str], keys: bool) -> dict[int, set[str]]:
    """The kinds found in each of `texts` (normalised, NUL-free), for the strings that have any.

    Bounded: it stops once MAX_FINDINGS strings have findings (enough to report).
    """
    data = engine.prepare("\x00".join(texts))
    sep = _separator(data, "\x00")
    check = _key_kinds if keys else _kinds
    found: dict[int, set[str]] = {}
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
        kinds = check(engine, data[start:end])
        if kinds:
            found[index] = kinds
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


def _raw_text_is_clean(engine: Engine, text: str) -> bool:
    """True when the JSON text (ASCII, no escapes) holds no credential in any key or string.

    Each anchor occurrence is checked within the string around it (in JSON text without escapes
    every `"` delimits a string). False means "let the walk decide", not "found".
    """
    data = engine.prepare(text)
    quote = _separator(data, '"')
    colon = _separator(data, ":")
    pos = 0
    for _ in range(_MAX_SEGMENTS):
        at = engine.next_anchor(data, pos)
        if at < 0:
            return True
        start = data.rfind(quote, 0, at) + 1
        end = data.find(quote, at)
        end = len(data) if end < 0 else end
        segment = data[start:end]
        if _kinds(engine, segment):
            return False
        is_key = data[end + 1:end + 65].lstrip()[:1] == colon
        if is_key and engine.key_name_match(segment) is not None:
            return False
        pos = end + 1
    return engine.next_anchor(data, pos) < 0


# ---------------------------------------------------------------------------- documents


def _walk(document: Any, mask: dict[str, bool] | None) -> Iterator[tuple[str, str | None, Any]]:
    """Yield (pointer, key, value) for every member and element, iteratively, in one fixed order.

    With `mask` (key -> shown as `*`), pointers are built; without, they are empty strings.
    """
    masked = mask or {}
    build = mask is not None
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                child_pointer = f"{pointer}/{'*' if masked[key] else escape_pointer_token(key)}" if build else ""
                yield child_pointer, key, child
                stack.append((child_pointer, child))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                child_pointer = f"{pointer}/{index}" if build else ""
                yield child_pointer, None, child
                stack.append((child_pointer, child))


def scan(document: Any, *, source: bytes | str | None = None) -> list[Finding]:
    """Every credential-looking key or string in the document, in document order, bounded.

    `source`, if given, must be the JSON text `document` was parsed from: when it is ASCII without
    escapes, a document with nothing to report is settled on that text alone.
    """
    engine = default_engine()
    if source is not None:
        try:
            text = source if isinstance(source, str) else source.decode("utf-8")
        except UnicodeDecodeError:
            text = "\\"
        if text.isascii() and "\\" not in text and _raw_text_is_clean(engine, text):
            return []

    root_is_text = isinstance(document, str)
    values: list[str] = [document] if root_is_text else []
    keys: dict[str, int] = {}
    for _, key, value in _walk(document, None):
        if key is not None and key not in keys:
            keys[key] = len(keys)
        if isinstance(value, str):
            values.append(value)
    key_list = list(keys)
    key_found = _locate(engine, [normalize(k) for k in key_list], keys=True)
    key_kinds = {key_list[i]: sorted(kinds) for i, kinds in key_found.items()}
    value_found = _locate(engine, [normalize(v) for v in values], keys=False)
    if not key_kinds and not value_found:
        return []

    # Pointers only now: a key that holds a token shape, or is not a plain identifier, is masked.
    mask = {key: not _PLAIN_KEY.fullmatch(key) or any(k != _KEY_NAME for k in key_kinds.get(key, ())) for key in keys}
    findings: list[Finding] = []
    if root_is_text:
        findings.extend(Finding("", kind) for kind in sorted(value_found.get(0, ())))
    value_index = int(root_is_text)
    for pointer, key, value in _walk(document, mask):
        if len(findings) >= MAX_FINDINGS:
            break
        if key is not None:
            findings.extend(Finding(pointer, kind, in_key=True) for kind in key_kinds.get(key, ()))
        if isinstance(value, str):
            findings.extend(Finding(pointer, kind) for kind in sorted(value_found.get(value_index, ())))
            value_index += 1
    findings.sort(key=lambda f: f.pointer)
    return [Finding(f.pointer[:_POINTER_MAX], f.kind, f.in_key) for f in findings[:MAX_FINDINGS]]
