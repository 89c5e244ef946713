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
holds no escapes (and, if it is not ASCII, is NFKC already with no invisible character), that text
is searched directly and a clean document never needs the walk at all; anything found there is
settled by the walk, which alone knows JSON pointers.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import compress, count, repeat
from typing import Any

from . import decomposed_anchors, pointers
from .byte_facts import ByteFacts
from .document_strings import DocumentStrings as DocumentStrings
from .document_strings import Span as _Span
from .scan_strings import BOUNDED_FLOOR as BOUNDED_FLOOR
from .scan_strings import FREE_CLEANINGS as FREE_CLEANINGS
from .scan_strings import HIDDEN as HIDDEN
from .scan_strings import LONG_STRING as LONG_STRING
from .scan_strings import MAX_FINDINGS as MAX_FINDINGS
from .scan_strings import UNBOUNDED as _UNBOUNDED
from .scan_strings import UNEXAMINED as UNEXAMINED
from .scan_strings import Budget as _Budget
from .scan_strings import joined_prepared as _joined_prepared
from .scan_strings import separator as _separator
from .secret_engine import Engine, default_engine
from .secret_rules import RULES
from .text_normal import MAX_INVISIBLE_KINDS as MAX_INVISIBLE_KINDS
from .text_normal import few_invisible_kinds, long_combining_run
from .text_normal import normalize as normalize

_POINTER_MAX = pointers.MAX_POINTER_CHARS
_MAX_SEGMENTS = 64
_KEY_NAME = "credential_key_name"
BOUNDED_PASSES = 3  # the work a bounded scan may spend: this many passes over the document's text,
# plus BOUNDED_FLOOR bytes

_PLAIN_KEY = pointers.PLAIN_KEY  # one rule for which keys are shown, kept in pointers.py


@dataclass(frozen=True)
class Finding:
    """Where (a JSON pointer; any key that is not a plain identifier shows as `*`) and what kind.
    Never the value."""

    pointer: str
    kind: str
    in_key: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"pointer": self.pointer, "kind": self.kind, "in_key": self.in_key}


escape_pointer_token = pointers.escape_token  # one JSON-pointer reference token (RFC 6901)




class _Memo:
    """What each string holds, once per scan (the raw JSON text and the walk meet the same strings).
    Keyed by length and ends, then compared whole: hashing a mebibyte-long string would cost more
    than comparing it."""

    def __init__(self) -> None:
        self._buckets: dict[tuple[int, Any, Any], list[tuple[Any, set[str]]]] = {}

    def get(self, data: Any) -> set[str] | None:
        for seen, kinds in self._buckets.get((len(data), data[:8], data[-8:]), ()):
            if seen == data:
                return kinds
        return None

    def put(self, data: Any, kinds: set[str]) -> None:
        self._buckets.setdefault((len(data), data[:8], data[-8:]), []).append((data, kinds))


def _kinds(engine: Engine, data: Any, memo: _Memo | None = None, budget: _Budget = _UNBOUNDED) -> set[str]:
    if memo is not None:
        known = memo.get(data)
        if known is None:
            known = _kinds(engine, data, None, budget)
            memo.put(data, known)
        return known
    if not budget.affords(len(data)):
        return {UNEXAMINED}
    if len(data) > LONG_STRING:
        long_kinds = _long_kinds(engine, data, budget)
        if long_kinds is not None:
            return long_kinds
    budget.spend(len(data))
    kinds: set[str] = set()
    for index in sorted(engine.anchored_rules(data)):
        kind = RULES[index].kind
        if kind in kinds:
            continue
        if not budget.affords(len(data)):
            kinds.add(UNEXAMINED)
            break
        match = engine.rule_match(index, data)
        budget.spend(len(data) if match is None else match[1])
        if match is not None:
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


def _long_kinds(engine: Engine, data: Any, budget: _Budget) -> set[str] | None:
    """A long string, checked without the pass that finds every anchor (which costs more than a rule
    search): the formats that its first anchor calls for are searched, together with the anchors of
    every other format, in one search that stops at whichever comes first. A match is a finding, and
    the search goes on from it for the formats left. Another format's anchor makes the string
    UNEXAMINED in a bounded scan; otherwise (and when the first anchor's formats cannot be told) the
    answer is None: the full check decides. A long log page with one credential word costs two
    searches instead of the anchor pass and a search per format."""
    bounded = budget.left is not None
    probe = engine.rule_anchor(data)
    budget.spend(len(data) if probe is None else probe[0])
    if probe is None:
        return set()
    first = probe[1]
    if not first:
        return None
    kinds: set[str] = set()
    left, pos = first, 0
    while left:
        found = engine.rule_or_other(left, first, data, pos)
        budget.spend(len(data) - pos if found is None else found[1] - pos)
        if found is None:
            return kinds
        rule, pos = found
        if rule < 0:
            return kinds | {UNEXAMINED} if bounded else None
        kinds.add(RULES[rule].kind)
        left = frozenset(r for r in left if RULES[r].kind not in kinds)
    other = engine.other_rule_anchor(first, data, pos)  # every format found: is any other's anchor left?
    budget.spend(len(data) - pos if other < 0 else other - pos)
    if other < 0:
        return kinds
    return kinds | {UNEXAMINED} if bounded else None


def _key_kinds(engine: Engine, data: Any, memo: _Memo | None = None,
               budget: _Budget = _UNBOUNDED) -> set[str]:
    """A key holding a token shape reports that; a key that merely names a credential, the name."""
    kinds = set(_kinds(engine, data, memo, budget))
    if not kinds:
        if not budget.affords(len(data)):
            kinds.add(UNEXAMINED)
        elif engine.key_name_match(data) is not None:
            kinds.add(_KEY_NAME)
        budget.spend(len(data))
    return kinds


# ---------------------------------------------------------------------------- many strings at once


def _locate(engine: Engine, texts: list[str], keys: bool, memo: _Memo,
            budget: _Budget, longest: int | None = None, runs_checked: bool = False) -> dict[int, set[str]]:
    """The kinds found in each of `texts`, for the strings that have any (`longest`: see `scan_strings.joined`).

    Bounded: it stops once MAX_FINDINGS strings have findings (enough to report).
    """
    found: dict[int, set[str]] = {}
    joined, data = _joined_prepared(texts, found, budget, longest, runs_checked)
    data = engine.prepare(joined) if data is None else data
    next_anchor = engine.next_ascii_anchor if joined.isascii() else engine.next_anchor
    sep = _separator(data, "\x00")
    pos = index = counted = checked = 0
    while len(found) < MAX_FINDINGS:
        at = next_anchor(data, pos)
        if at < 0:
            return found
        if checked == _MAX_SEGMENTS:
            _locate_by_rules(engine, data, sep, pos, index, keys, found, budget)
            return found
        checked += 1
        index += data.count(sep, counted, at)
        start = data.rfind(sep, 0, at) + 1
        end = data.find(sep, at)
        end = len(data) if end < 0 else end
        kinds = (_key_kinds if keys else _kinds)(engine, data[start:end], memo, budget)
        if kinds:
            found[index] = set(kinds)
        pos = counted = end + 1
        index += 1
    return found


def _unexamined(engine: Engine, data: Any, sep: Any, pos: int, index: int, found: dict[int, set[str]]) -> None:
    """The work is spent: every further string holding an anchor is reported unexamined (up to the
    findings limit), without searching its rules."""
    counted = pos
    while len(found) < MAX_FINDINGS:
        at = engine.next_anchor(data, pos)
        if at < 0:
            return
        index += data.count(sep, counted, at)
        kinds = found.setdefault(index, set())
        kinds.discard(_KEY_NAME)
        kinds.add(UNEXAMINED)
        end = data.find(sep, at)
        if end < 0:
            return
        pos = counted = end + 1
        index += 1


def _locate_by_rules(engine: Engine, data: Any, sep: Any, pos: int, index: int, keys: bool,
                     found: dict[int, set[str]], budget: _Budget) -> None:
    """After many candidate strings: every rule that can still match runs once over the rest."""
    rest = data[pos:]
    if not budget.affords(len(rest)):
        _unexamined(engine, data, sep, pos, index, found)
        return
    budget.spend(len(rest))
    searches: list[tuple[str, Any]] = [
        (RULES[rule].kind, lambda d, p, rule=rule: engine.rule_match(rule, d, p))
        for rule in sorted(engine.anchored_rules(rest))
    ]
    if keys:
        searches.append((_KEY_NAME, engine.key_name_match))
    for kind, search in searches:
        if not budget.affords(len(rest)):
            _unexamined(engine, data, sep, pos, index, found)
            return
        budget.spend(len(rest))
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


_LOOK_NORMALISES = 1 << 16
# The characters whose NFKD holds `"` or `\\` (a test checks them against unicodedata): a JSON text
# holding one is not searched in its NFKD, whose strings would not be its own.
QUOTE_OR_ESCAPE_MAKERS = "\ufe68\uff02\uff3c"
_HANGUL_SYLLABLE_LEADS = (b"\xea", b"\xeb", b"\xec", b"\xed")  # U+AC00..U+D7A3 begin so in UTF-8 (and little else)
# Strings the look at a text in neither form may normalise and check (~5 us each) before leaving the
# text to the walk: one per list of labels of a mebibyte manifest with a ligature in each.
_MAX_ANY_FORM_SEGMENTS = 512


def _raw_text_is_clean(engine: Engine, text: str, memo: _Memo, budget: _Budget, runs_checked: bool = False,
                       data: Any = None, invisible_checked: bool = False, facts: ByteFacts | None = None,
                       first_places: Callable[[], tuple[int | None, int | None]] | None = None) -> bool:
    """True when the JSON text (no escapes) holds no credential in any key or string.

    Each anchor occurrence is checked within the string around it (in JSON text without escapes
    every `"` delimits a string). False means "let the walk decide", not "found". Text that is not
    ASCII is searched as it stands only when it holds no invisible character and is NFKC already:
    then so is each of its strings (`"` is a starter that composes with nothing), and each is
    its own `normalize`. Text in NFKD is searched for decomposed anchors (decomposed_anchors.py),
    and each string where one is found is normalised before it is checked. `invisible_checked`: the
    caller knows the text holds no invisible character. `facts`: `byte_facts.facts(data)`, which
    answer whether the text may compose, whether an anchor occurs in it as written, and (when they
    can) whether it is in NFKC or NFKD. `first_places`: gives what `first_ascii_anchor(data)` and
    `first_any_form_place(data)` returned, when the caller searched ahead; asked only when this look
    takes one of those searches first.
    """
    ascii_only = text.isascii()
    if not ascii_only and not runs_checked and long_combining_run(text):
        return False
    data = engine.prepare(text) if data is None else data
    decomposed = False  # text in NFKD: searched for the places its NFKC could hold an anchor
    any_form = None  # text in neither form or holding invisible characters: decomposed_anchors.any_form_search
    kinds_fit: Callable[[], bool] | None = None  # text holding invisible characters: `_kinds_fit`
    segment_runs_checked = True
    if not ascii_only and not invisible_checked and engine.invisible(data, 0) is not None:
        # Invisible characters (a document the character rule refuses): the cleaning removes them, so
        # the text is searched as it stands with them allowed between the characters that could
        # make an anchor (`decomposed_anchors.any_form_pattern`); clean once no string can hold more
        # kinds of them than the cleaning takes either (the walk reports such a string, HIDDEN):
        # settled first when a few steps can tell, else asked last (`_kinds_fit`).
        kinds_fit = _kinds_fit(data)
        any_form = decomposed_anchors.any_form_search() if kinds_fit is not None else None
        if any_form is None:
            return False
        decomposed, segment_runs_checked = True, False
    elif not ascii_only:
        # The facts, when given, settle either form at once where Unicode's quick check would.
        # Otherwise: NFKD's look is cheap whatever the text. A text in NFKD is in NFKC too unless it
        # holds a character that may compose (a look at its bytes, then at most one search): NFKC's
        # own look would normalise all of it to tell.
        in_nfkd = (facts is not None and not facts.nfkd_unsure) or unicodedata.is_normalized("NFKD", text)
        decomposed = in_nfkd and (decomposed_anchors.may_compose(data) if facts is None else facts.composing)
        neither = not in_nfkd and not ((facts is not None and not facts.nfkc_unsure) or (
            not decomposed_anchors.holds_latin_marks(data) and unicodedata.is_normalized("NFKC", text)))
        if neither:
            # Neither form (a no-break space in an ASCII manifest, full-width forms, letters composed
            # and not): searched as it stands for the places where the NFKC of a string could hold an
            # anchor, and for the characters that search cannot follow (`any_form_pattern`, which
            # shows why it misses none). Each string found is normalised before its check, as the
            # walk would; its marks are counted again, since decomposition can lengthen a run of them.
            any_form = decomposed_anchors.any_form_search() if isinstance(data, bytes) else None
            if any_form is None:
                return False
            decomposed, segment_runs_checked = True, False
    if facts is not None and not decomposed and not facts.anchor:
        return True  # searched as it stands (NFKC, or NFKD that composes nothing), and no anchor in it
    next_anchor = (engine.next_ascii_anchor if ascii_only else any_form if any_form is not None else
                   engine.next_decomposed_anchor if decomposed else engine.next_anchor)
    ahead = None if first_places is None or not (ascii_only or any_form is not None) else \
        first_places()[0 if ascii_only else 1]
    if ahead is not None:  # the first search, taken ahead
        search_on = next_anchor
        next_anchor = lambda data, pos: ahead if pos == 0 else search_on(data, pos)  # noqa: E731
    # A bounded scan (of a document refused anyway) takes the search in any form only to settle a text
    # where it finds nothing: the walk, with a budget of its own, checks the strings it would find.
    limit = _MAX_SEGMENTS if any_form is None else 0 if budget.left is not None else _MAX_ANY_FORM_SEGMENTS
    unsure = decomposed_anchors.unsure_characters() if any_form is not None else None
    clean = _found_strings_clean(engine, data, next_anchor, decomposed, segment_runs_checked, limit, memo, budget,
                                 unsure)
    if clean is None:  # a character the search in any form cannot follow (a ligature, say)
        return kinds_fit is None and _decomposed_whole_is_clean(engine, text, data, memo, budget)
    return clean and (kinds_fit is None or kinds_fit())


def _decomposed_whole_is_clean(engine: Engine, text: str, data: Any, memo: _Memo, budget: _Budget) -> bool:
    """The look at a text in neither form that holds a character the search in any form cannot follow
    (two starters or more in its NFKD: a ligature, a fraction): its NFKD is searched for decomposed
    anchors, when that leaves every quote where it was (U+FF02 decomposes into one) and makes no
    backslash, and holds no Hangul syllable (two or three jamo each, composed again for each string
    found). False: let the walk decide."""
    if not isinstance(data, bytes) or any(lead in data for lead in _HANGUL_SYLLABLE_LEADS) \
            or any(char in text for char in QUOTE_OR_ESCAPE_MAKERS):
        return False
    spelt = unicodedata.normalize("NFKD", text)
    if spelt.count('"') != text.count('"') or "\\" in spelt:
        return False
    clean = _found_strings_clean(engine, engine.prepare(spelt), engine.next_decomposed_anchor, True, False,
                                 _MAX_SEGMENTS, memo, budget)
    return clean is True


def _found_strings_clean(engine: Engine, data: Any, next_anchor: Callable[[Any, int], int], decomposed: bool,
                         segment_runs_checked: bool, limit: int, memo: _Memo, budget: _Budget,
                         unsure: frozenset[int] | None = None) -> bool | None:
    """`_raw_text_is_clean`'s check of each string its search finds (at most `limit`), in JSON text
    without escapes (every `"` delimits a string). `decomposed`: each is normalised before its check
    (its runs of marks counted again unless `segment_runs_checked`). None when the search finds one of
    the `unsure` characters (UTF-8 `data`)."""
    normalising = _LOOK_NORMALISES  # characters of found strings this look may normalise before the walk does
    quote = _separator(data, '"')
    colon = _separator(data, ":")
    pos = 0
    as_written = 0  # strings checked as they are (not changed by NFKC): at most _MAX_SEGMENTS of them

    def unsure_at(at: int) -> bool:
        return unsure is not None and ord(data[at:at + 4].decode("utf-8", "ignore")[:1] or "\0") in unsure

    for _ in range(limit):
        at = next_anchor(data, pos)
        if at < 0:
            return True
        if unsure_at(at):
            return None
        start = data.rfind(quote, 0, at) + 1
        end = data.find(quote, at)
        end = len(data) if end < 0 else end
        segment = data[start:end]
        if decomposed:  # the string as a reader sees it (its runs of marks are checked)
            if len(segment) > 4 * normalising:  # more characters than that whatever they are: not decoded
                return False
            raw = segment.decode("utf-8", "surrogatepass") if isinstance(segment, bytes) else segment
            normalising -= len(raw)
            if normalising < 0:  # so many: the walk would do it all again (an attacker review: 2.4x)
                return False
            # A text in NFKD without invisible characters has none in its NFKC either: NFKC alone,
            # which gives the text itself at the cost of a look when it is normal already.
            shown = (unicodedata.normalize("NFKC", raw) if segment_runs_checked
                     else normalize(raw, runs_checked=False))
            if shown is None:
                return False
            if shown is not raw and shown != raw:
                segment = engine.prepare(shown)
            else:
                as_written += 1
                if as_written > _MAX_SEGMENTS:
                    return False
        if _kinds(engine, segment, memo, budget):
            return False
        after = data[end + 1:end + 65]
        is_key = after.lstrip()[:1] == colon or (len(after) == 64 and not after.strip())  # long whitespace: assume
        if is_key and (not budget.affords(len(segment)) or engine.key_name_match(segment) is not None):
            return False
        budget.spend(len(segment) if is_key else 0)
        pos = end + 1
    at = next_anchor(data, pos)
    return None if at >= 0 and unsure_at(at) else at < 0


def _kinds_fit(data: Any) -> Callable[[], bool] | None:
    """Can no string of UTF-8 JSON text `data` (without escapes) hold more kinds of invisible
    character than `normalize` cleans? Certain when none holds more of them than that, or the whole
    text holds no more kinds than that. None when it can (or there is no RE2); else the question's
    answer, to ask when it is needed: the steps from one run to the next have told already, or
    the pass that tells is taken then."""
    crowded = decomposed_anchors.crowded_string_search()
    if crowded is None or not isinstance(data, bytes):
        return None
    if crowded(data, 0) < 0:
        return lambda: True
    told = few_invisible_kinds(data, ahead_only=True)
    if told is None:
        return lambda: few_invisible_kinds(data) is True
    return (lambda: True) if told else None


def first_ascii_anchor(encoded: bytes) -> int | None:
    """Where the look at an ASCII JSON text (`encoded`) finds its first anchor (-1: nowhere), searched
    ahead of the scan: by a worker thread while the caller's thread parses the text (the search lets
    go of the GIL). None when the text is not ASCII or the engine does not search bytes."""
    engine = default_engine()
    if not encoded.isascii() or not engine.searches_bytes:
        return None
    return engine.next_ascii_anchor(encoded, 0)


def first_any_form_place(encoded: bytes) -> int | None:
    """Where the look at a JSON text in neither normal form (`encoded`, UTF-8) finds its first place
    (`decomposed_anchors.any_form_search`; -1: nowhere), searched ahead of the scan as
    `first_ascii_anchor` is. None without RE2 or when the engine does not search bytes."""
    search = decomposed_anchors.any_form_search()
    if search is None or not default_engine().searches_bytes:
        return None
    return search(encoded, 0)


# ---------------------------------------------------------------------------- documents


def _pointers(document: Any, spans: list[_Span], key_kinds: dict[str, list[str]],
              value_kinds_at: dict[int, set[str]], token: Callable[[str | int], str]) -> Iterator[Finding]:
    """The findings in document order (containers in the order `document_strings.collect` visited them; within one,
    by position, a key before its value). A pointer is built only for a container that holds a
    finding (and its ancestors): a long list of clean strings costs one step."""
    if isinstance(document, str):
        yield from (Finding("", kind) for kind in sorted(value_kinds_at.get(0, ())))
    pending = sorted(value_kinds_at)
    next_pending = bisect.bisect_left(pending, int(isinstance(document, str)))
    built: dict[int, str] = {}

    def pointer_of(span: int) -> str:
        chain = []
        while span >= 0 and span not in built:
            chain.append(span)
            span = spans[span].parent
        text = built.get(span, "")
        for index in reversed(chain):
            if spans[index].parent >= 0:
                text = f"{text}/{token(spans[index].name)}"
            built[index] = text
        return text

    for index, span in enumerate(spans):
        events: list[tuple[int, int, list[str]]] = []  # (position, 0 key / 1 value, kinds)
        node = span.node
        if key_kinds and type(node) is dict and not key_kinds.keys().isdisjoint(node):
            events += [(i, 0, key_kinds[name]) for i, name in enumerate(node) if name in key_kinds]
        end = next_pending
        while end < len(pending) and pending[end] < span.first + span.strings:
            end += 1
        if end > next_pending:
            children = list(node.values()) if type(node) is dict else node
            positions = (range(len(children)) if span.only_strings
                         else list(compress(count(), map(isinstance, children, repeat(str)))))
            events += [(positions[at - span.first], 1, sorted(value_kinds_at[at])) for at in pending[next_pending:end]]
            next_pending = end
        if events:
            base = pointer_of(index)
            names: list[Any] = list(node) if type(node) is dict else list(range(len(node)))
            for position, is_value, kinds in sorted(events):
                child_pointer = f"{base}/{token(names[position])}"
                yield from (Finding(child_pointer, kind, in_key=not is_value) for kind in kinds)


def _tokens() -> Callable[[str | int], str]:
    """Pointer tokens as `pointers.key_token` makes them (one masking rule for every pointer a
    manifest refusal reports), each key's once per scan."""
    cache: dict[str, str] = {}

    def token(name: str | int) -> str:
        if isinstance(name, int):
            return str(name)
        shown = cache.get(name)
        if shown is None:
            shown = cache[name] = pointers.key_token(name)
        return shown

    return token


def _text_size(source: bytes | str | None, strings: DocumentStrings) -> int:
    if source is not None:
        return len(source)
    keys, values = strings.get()
    return sum(map(len, keys)) + sum(map(len, values))


def scan(document: Any, *, source: bytes | str | None = None, strings: DocumentStrings | None = None,
         bounded: bool = False, source_invisible_free: bool = False, encoded: bytes | None = None,
         facts: ByteFacts | None = None,
         first_places: Callable[[], tuple[int | None, int | None]] | None = None) -> list[Finding]:
    """Every credential-looking key or string in the document, in document order, bounded.

    `source`, if given, must be the JSON text `document` was parsed from: when it holds no escapes
    (and, if it is not ASCII, no invisible character), a document with nothing to report is usually
    settled on that text alone (see `_raw_text_is_clean`). `strings`, if given,
    collects the document's keys and strings once for this scan and the caller.
    `source_invisible_free`: the caller has found that `source`, as it stands, holds no invisible
    character (the manifest's character rule refuses all of them, and looks at the bytes first): the
    look at the text is then spared that search, a pass over it. `encoded`: the UTF-8 of a `source`
    given as text, when the caller has it (the bytes it decoded): the look is spared encoding it.
    `facts`: `byte_facts.facts(encoded)`, when the caller took them: the look is spared the searches
    they answer (whether the text may compose, whether an anchor occurs as written). `first_places`:
    gives `first_ascii_anchor(encoded)` and `first_any_form_place(encoded)`, when the caller searched
    ahead (in another thread: the searches let go of the GIL); asked only when the look needs one.

    `bounded` is for a document the caller refuses anyway (the manifest gate: one its schema refused,
    so never a valid manifest): the anchor and rule searches may then spend at most BOUNDED_PASSES
    passes over the text plus BOUNDED_FLOOR bytes. A string whose searches do not fit in what is left
    is reported as UNEXAMINED instead of searched: a single string that holds the anchors of many
    formats (every format's prefix, or a mebibyte of random text) would otherwise make each of those
    rules search all of it. Without `bounded` every rule that an anchor calls for is searched.
    """
    engine = default_engine()
    strings = strings or DocumentStrings(document)
    def fresh() -> _Budget:
        if not bounded:
            return _Budget(None)
        size = _text_size(source, strings)
        free = FREE_CLEANINGS + (BOUNDED_FLOOR - size) // 512 if size <= BOUNDED_FLOOR else 0
        return _Budget(BOUNDED_PASSES * size + BOUNDED_FLOOR, free)

    budget, memo = fresh(), _Memo()
    runs_checked = False
    if source is not None:
        try:
            text = source if isinstance(source, str) else source.decode("utf-8")
        except UnicodeDecodeError:
            text = "\\"
        # A text without escapes shows every string as it is: one look for a run of combining marks
        # too long to normalise serves the raw text and every string.
        encoded = source if isinstance(source, bytes) else encoded
        if "\\" in text:
            data = None
        else:
            data = engine.prepare(text) if encoded is None else engine.prepare_encoded(text, encoded)
        runs_checked = data is not None and not long_combining_run(text, data if isinstance(data, bytes) else None)
        if runs_checked and _raw_text_is_clean(engine, text, memo, budget, runs_checked=True, data=data,
                                               invisible_checked=source_invisible_free,
                                               facts=facts if data is encoded else None,
                                               first_places=first_places if data is encoded else None):
            return []
        if not text.isascii():  # the walk decides as if this look had not been made: with all its budget
            budget, memo = fresh(), _Memo()

    keys, values = strings.get()
    key_found = _locate(engine, keys, True, memo, budget, runs_checked=runs_checked)
    key_kinds = {keys[i]: sorted(kinds) for i, kinds in key_found.items()}
    value_found = _locate(engine, values, False, memo, budget, strings.longest_value_bound() if bounded else None,
                          runs_checked)
    if not key_kinds and not value_found:
        return []
    findings: list[Finding] = []
    for finding in _pointers(document, strings.spans(), key_kinds, value_found, _tokens()):
        findings.append(finding)
        if len(findings) >= MAX_FINDINGS:
            break
    findings.sort(key=lambda f: f.pointer)
    return [Finding(f.pointer[:_POINTER_MAX], f.kind, f.in_key) for f in findings[:MAX_FINDINGS]]
