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
the anchors name (`text_kinds`). Past `text_kinds.MAX_SEGMENTS` such strings, each rule that can
still match is run once over the rest of the text instead (in an unbounded scan, one search for the
matches of the rules anchored so far and the anchors of the others tells first whether any can:
`_nothing_more`). Either way the work is linear in the size of the document and does not depend on
the number of strings. When the caller passes the document's JSON text and it holds no escapes, that
text is searched directly (`raw_look`) and a clean document usually never needs the walk at all;
anything found there is settled by the walk, which alone knows JSON pointers.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import compress, count, repeat
from typing import Any

from ito_training_mcp import decomposed_anchors, pointers
from ito_training_mcp.byte_facts import ByteFacts
from ito_training_mcp.document_strings import DocumentStrings as DocumentStrings
from ito_training_mcp.document_strings import Span as _Span
from ito_training_mcp.raw_look import QUOTE_OR_ESCAPE_MAKERS as QUOTE_OR_ESCAPE_MAKERS
from ito_training_mcp.raw_look import first_any_form_place as first_any_form_place
from ito_training_mcp.raw_look import first_ascii_anchor as first_ascii_anchor
from ito_training_mcp.raw_look import text_is_clean as _raw_text_is_clean
from ito_training_mcp.scan_strings import BOUNDED_FLOOR as BOUNDED_FLOOR
from ito_training_mcp.scan_strings import FREE_BELOW
from ito_training_mcp.scan_strings import FREE_CLEANINGS as FREE_CLEANINGS
from ito_training_mcp.scan_strings import HIDDEN as HIDDEN
from ito_training_mcp.scan_strings import LONG_STRING as LONG_STRING
from ito_training_mcp.scan_strings import MAX_FINDINGS as MAX_FINDINGS
from ito_training_mcp.scan_strings import UNEXAMINED as UNEXAMINED
from ito_training_mcp.scan_strings import Budget as _Budget
from ito_training_mcp.scan_strings import joined_prepared as _joined_prepared
from ito_training_mcp.scan_strings import separator as _separator
from ito_training_mcp.secret_engine import Engine, default_engine
from ito_training_mcp.secret_rules import RULES
from ito_training_mcp.text_kinds import KEY_NAME as _KEY_NAME
from ito_training_mcp.text_kinds import MAX_SEGMENTS as _MAX_SEGMENTS
from ito_training_mcp.text_kinds import Memo as _Memo
from ito_training_mcp.text_kinds import credential_key_name as credential_key_name
from ito_training_mcp.text_kinds import key_kinds as _key_kinds
from ito_training_mcp.text_kinds import kinds as _kinds
from ito_training_mcp.text_kinds import value_kinds as value_kinds
from ito_training_mcp.text_normal import MAX_INVISIBLE_KINDS as MAX_INVISIBLE_KINDS
from ito_training_mcp.text_normal import long_combining_run, texts_found
from ito_training_mcp.text_normal import normalize as normalize

_POINTER_MAX = pointers.MAX_POINTER_CHARS
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




# ---------------------------------------------------------------------------- many strings at once


class _Progress:
    """How far the walk of one list of strings has come, over the slices it may be taken in: how
    many strings holding an anchor it checked one by one (past _MAX_SEGMENTS, rule by rule), how
    many characters of the list come after the slice at hand, what making that slice ready cost,
    and which of the searches over the rest of the list (None: the search for anchored rules; a
    rule's index; the key-name search) the budget was charged for already, each once for all of
    that rest."""

    __slots__ = ("after", "checked", "made", "paid")

    def __init__(self) -> None:
        self.checked = 0
        self.after = 0
        self.made = 0  # the slice at hand made ready: its length, and what the texts made on the way cost
        self.paid: set[int | str | None] = set()


def _locate(engine: Engine, texts: list[str], keys: bool, memo: _Memo,
            budget: _Budget, longest: int | None = None, runs_checked: bool = False,
            limit: int = MAX_FINDINGS, progress: _Progress | None = None,
            all_text: str | None = None, invisible_free: bool = False) -> dict[int, set[str]]:
    """The kinds found in each of `texts`, for the strings that have any (`longest`: see `scan_strings.joined`).

    Bounded: it stops once `limit` strings have findings (enough to report). `progress`: the walk's
    so far, when `texts` is one slice of a longer list (`_locate_in_slices`). `all_text`: `texts`
    joined by NUL, if the caller joined them. `invisible_free`: see `scan_strings.joined_prepared`.
    """
    found: dict[int, set[str]] = {}
    made: list[int] = []
    joined, data = _joined_prepared(texts, found, budget, longest, runs_checked, limit, all_text, made,
                                    invisible_free)
    data = engine.prepare(joined) if data is None else data
    next_anchor = engine.next_ascii_anchor if joined.isascii() else engine.next_anchor
    sep = _separator(data, "\x00")
    progress = _Progress() if progress is None else progress
    progress.made = len(data) + sum(made)
    pos = index = counted = 0
    while len(found) < limit:
        at = next_anchor(data, pos)
        if at < 0:
            return found
        if progress.checked == _MAX_SEGMENTS:
            _locate_by_rules(engine, data, sep, pos, index, keys, found, budget, limit, progress,
                             len(data) / max(len(joined), 1))
            return found
        progress.checked += 1
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


def _locate_distinct(engine: Engine, values: list[str], memo: _Memo, budget: _Budget,
                     runs_checked: bool, invisible_free: bool = False) -> dict[int, set[str]]:
    """`_locate` of a full scan's string values, each distinct one walked once: a manifest's references
    often repeat one list of labels, and the walk normalises and searches what it is given. Equal
    strings have equal kinds, so each finding goes to every string equal to the one found, in document
    order, up to MAX_FINDINGS: the first of them are all strings the walk of the distinct ones reached
    (it takes them in the order each first occurs, and stops at as many with findings).

    A slice at a time (`_locate_in_slices`), as a bounded walk, where no string can be reported
    before the walk reaches it: `runs_checked` and `invisible_free`. Otherwise in one piece, where the
    strings with too long a run of marks or with invisible characters are reported first, those of
    the whole list (an attacker review: taken a slice at a time, credentials came first instead)."""
    def walk(texts: list[str]) -> dict[int, set[str]]:
        if runs_checked and invisible_free:
            return _locate_in_slices(engine, texts, memo, budget, None, runs_checked, invisible_free)
        return _locate(engine, texts, False, memo, budget, None, runs_checked, invisible_free=invisible_free)

    distinct = list(dict.fromkeys(values))
    if 2 * len(distinct) > len(values):  # few repeats: walked as they are
        return walk(values)
    found = walk(distinct)
    if not found:
        return found
    kinds_of = {distinct[index]: kinds for index, kinds in found.items()}
    spread: dict[int, set[str]] = {}
    for index, value in enumerate(values):
        kinds = kinds_of.get(value)
        if kinds is not None:
            spread[index] = set(kinds)
            if len(spread) == MAX_FINDINGS:
                break
    return spread


def _unexamined(engine: Engine, data: Any, sep: Any, pos: int, index: int, found: dict[int, set[str]],
                limit: int) -> None:
    """The work is spent: every further string holding an anchor is reported unexamined (up to the
    findings `limit`), without searching its rules."""
    counted = pos
    while len(found) < limit:
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
                     found: dict[int, set[str]], budget: _Budget, limit: int, progress: _Progress,
                     scale: float) -> None:
    """After many candidate strings: every rule that can still match runs once over the rest. The
    rest is that of the whole list: a search is charged, once, for this slice's rest and the
    slices after it (`progress.after` characters, at `scale` units of `data` each)."""
    if budget.left is None and not keys and _nothing_more(engine, data, sep, pos):
        return
    rest = data[pos:]
    ahead = len(rest) + int(progress.after * scale)

    def paid(search: int | str | None) -> bool:
        if search in progress.paid:
            return True
        if not budget.affords(ahead):
            return False
        budget.spend(ahead)
        progress.paid.add(search)
        return True

    if not paid(None):
        _unexamined(engine, data, sep, pos, index, found, limit)
        return
    searches: list[tuple[int | str, str, Any]] = [
        (rule, RULES[rule].kind, lambda d, p, rule=rule: engine.rule_match(rule, d, p))
        for rule in sorted(engine.anchored_rules(rest))
    ]
    if keys:
        searches.append((_KEY_NAME, _KEY_NAME, engine.key_name_match))
    for charged, kind, search in searches:
        if not paid(charged):
            _unexamined(engine, data, sep, pos, index, found, limit)
            return
        at, at_index, counted, hits = pos, index, pos, 0
        while hits < limit:
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


_RULE_SETS = 4  # sets of rules `_nothing_more` searches for before it leaves the answer to the rule passes


def _nothing_more(engine: Engine, data: Any, sep: Any, pos: int) -> bool:
    """True when no rule matches in `data` (strings joined by `sep`) from `pos` on: told by one search
    for the matches of the rules whose anchors were found and for the anchors of all the others,
    where `_locate_by_rules` would pass over the rest once to learn which rules are anchored and then
    once for each. Each other anchor found brings its string's rules into the search, which starts
    again (at most _RULE_SETS times). False: a match, or more kinds of anchor than that; the rule
    passes then decide, as if this search had not been made (an unbounded walk: it spends no budget)."""
    rules: frozenset[int] = frozenset()
    at = engine.other_rule_anchor(rules, data, pos)
    for _ in range(_RULE_SETS):
        if at < 0:
            return True
        begin = data.rfind(sep, 0, at - 1) + 1
        end = data.find(sep, at - 1)
        more = frozenset(engine.anchored_rules(data[begin:len(data) if end < 0 else end]))
        if more <= rules:  # nothing new to search for (every rule is in already, say): the passes decide
            return False
        rules |= more
        # (from the separator before `pos`: a rule that checks the character before its match reads it
        # there, as `rule_match` does, for a match at the string's start)
        found = engine.rule_or_other(rules, rules, data, pos - 1 if pos else 0)
        if found is None:
            return True
        rule, at = found
        if rule >= 0:
            return False
        # (`at` is where the other anchor starts: its string is the one holding `at + 1`)
        at += 1
    return False


FIRST_SLICE = 1 << 13  # characters of strings in a bounded walk's first slice of text not ASCII
LAST_SLICE = 1 << 17  # each next slice holds twice as many, up to this many


def _locate_in_slices(engine: Engine, texts: list[str], memo: _Memo, budget: _Budget, longest: int | None,
                      runs_checked: bool, invisible_free: bool = False) -> dict[int, set[str]]:
    """`_locate` of the values, a slice of them at a time, in order: each made ready (normalised,
    cleaned) only when the walk reaches it. A walk ends early, once it has MAX_FINDINGS strings to
    report (or, bounded, its budget is spent), and the strings after that were never looked at, but
    NFKC of text not in that form costs ten passes over it and more: 600 strings of full-width
    anchors took 7 ms to normalise, of which the walk used the first eighty; a full walk of labels
    with a credential in each normalised all of them (a refusal at 9x the parse, 5x so). Each slice is
    charged a pass over what it became (NFKC can make one character eighteen: U+FDFA); once the
    budget is spent, the strings of the slices left that could hold a finding are reported
    unexamined without being made ready (`_unexamined_where_placed`). ASCII text costs nothing to
    make ready, and goes in one piece; so do a single string and a list holding NUL (the separator).
    A slice ends with the string that holds its last character. `invisible_free`: the caller knows
    that no string holds an invisible character (spared a search for them, in each slice and in the
    slices left)."""
    if len(texts) < 2:
        return _locate(engine, texts, False, memo, budget, longest, runs_checked, invisible_free=invisible_free)
    joined = "\x00".join(texts)
    if joined.isascii() or len(joined) <= FIRST_SLICE or joined.count("\x00") != len(texts) - 1:
        return _locate(engine, texts, False, memo, budget, longest, runs_checked, all_text=joined,
                       invisible_free=invisible_free)
    found: dict[int, set[str]] = {}
    progress = _Progress()
    places = decomposed_anchors.any_form_search() if engine.searches_bytes else None
    start = at = 0  # the slice's first string, and where it starts in `joined`
    size = FIRST_SLICE
    while start < len(texts) and len(found) < MAX_FINDINGS:
        end = joined.find("\x00", at + size) if at + size < len(joined) else -1
        stop = len(texts) if end < 0 else start + joined.count("\x00", at, end) + 1
        if places is not None and budget.left is not None and budget.left <= 0:
            _unexamined_where_placed(engine, places, joined[at:] if end < 0 else joined[at:end], start, found,
                                     invisible_free)
        else:
            progress.after = max(len(joined) - end - 1, 0) if end >= 0 else 0
            part = _locate(engine, texts[start:stop], False, memo, budget, longest, runs_checked,
                           MAX_FINDINGS - len(found), progress, invisible_free=invisible_free)
            found.update((start + index, kinds) for index, kinds in part.items())
            budget.spend(progress.made)  # the slice made ready and searched: a pass over what it became
        start, at, size = stop, end + 1, min(2 * size, LAST_SLICE)
    return found


def _unexamined_where_placed(engine: Engine, places: Callable[[bytes, int], int], joined: str, first: int,
                             found: dict[int, set[str]], invisible_free: bool = False) -> None:
    """The budget is spent before a slice (`joined`, its strings joined by NUL, the first of them the
    list's `first`) was made ready: each of its strings that could hold a finding is reported
    unexamined (up to MAX_FINDINGS), without normalising any: where the search in any form finds a
    place (every anchor its cleaning could hold, and runs of marks too long), and where an invisible
    character stands (a string with too many kinds of them is a finding of its own)."""
    data = joined.encode("utf-8", "surrogatepass")

    def invisible(data: bytes, pos: int) -> int:
        at = engine.invisible(data, pos, nul=False)
        return -1 if at is None else at[0]

    # (the search for invisible characters costs 2 ns a byte where most characters begin as one of
    # them does: U+FDFA's bytes as U+FEFF's)
    held = () if invisible_free else texts_found(invisible, data)
    for index in heapq.merge(texts_found(places, data), held):
        if len(found) >= MAX_FINDINGS:
            return
        found.setdefault(first + index, set()).add(UNEXAMINED)


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
    they answer (whether the text may compose, whether an anchor occurs as written, whether it holds
    too long a run of combining marks). `first_places`:
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
        free = FREE_CLEANINGS + (FREE_BELOW - size) // 512 if size <= FREE_BELOW else 0
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
        if data is not None and facts is not None and data is encoded:  # the facts' pass looked for one
            runs_checked = not facts.long_run
        else:
            runs_checked = data is not None and not long_combining_run(text, data if isinstance(data, bytes) else None)
        if runs_checked and _raw_text_is_clean(engine, text, memo, budget, runs_checked=True, data=data,
                                               invisible_checked=source_invisible_free,
                                               facts=facts if data is encoded else None,
                                               first_places=first_places if data is encoded else None):
            return []
        if not text.isascii():  # the walk decides as if this look had not been made: with all its budget
            budget, memo = fresh(), _Memo()

    keys, values = strings.get()
    invisible_free = source_invisible_free and source is not None and "\\" not in text  # no escape makes one
    key_found = _locate(engine, keys, True, memo, budget, runs_checked=runs_checked, invisible_free=invisible_free)
    key_kinds = {keys[i]: sorted(kinds) for i, kinds in key_found.items()}
    value_found = (_locate_in_slices(engine, values, memo, budget, strings.longest_value_bound(), runs_checked,
                                     invisible_free)
                   if bounded else _locate_distinct(engine, values, memo, budget, runs_checked, invisible_free))
    if not key_kinds and not value_found:
        return []
    findings: list[Finding] = []
    for finding in _pointers(document, strings.spans(), key_kinds, value_found, _tokens()):
        findings.append(finding)
        if len(findings) >= MAX_FINDINGS:
            break
    findings.sort(key=lambda f: f.pointer)
    return [Finding(f.pointer[:_POINTER_MAX], f.kind, f.in_key) for f in findings[:MAX_FINDINGS]]
