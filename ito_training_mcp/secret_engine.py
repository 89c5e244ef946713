"""The two regular-expression engines behind the secret scanner, with one interface.

`Re2Engine` (google-re2, a DFA: linear time whatever the pattern or the input) is used whenever
the `re2` module imports; `PythonEngine` (the standard library's backtracking `re`, with every
repetition bounded) gives the same answers more slowly, for platforms without an RE2 wheel. A
test runs the corpus through both.

Texts are handled as `data`: UTF-8 bytes for RE2 (positions are byte offsets), `str` for Python.
Both find the same matches: the patterns are written in the subset of syntax the two read the
same way (see secret_rules.py).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Sequence
from functools import cache, cached_property
from typing import Any, Protocol

from ito_training_mcp import decomposed_anchors, secret_rules
from ito_training_mcp.egress.invisible import utf8_starts
from ito_training_mcp.secret_rules import RULES, Rule

# A rule whose match fails its `boundary` check more often than this in one text is settled by one
# pass of a variant that checks the boundary itself (slower: it cannot jump from anchor to anchor).
_MAX_NEAR_MISSES = 16
_INVISIBLE_POINTS = [code for low, high in secret_rules.INVISIBLE_RANGES for code in range(low, high + 1)]


class Engine(Protocol):
    """What the scanner needs from an engine. `data` is what `prepare` returned."""

    name: str
    searches_bytes: bool  # `prepare` gives the text's UTF-8, and `prepare_encoded` the bytes given

    def prepare(self, text: str) -> Any: ...

    def prepare_encoded(self, text: str, encoded: bytes) -> Any:
        """What `prepare(text)` returns, given `encoded`, the UTF-8 of `text` (the bytes it was read as)."""

    def anchored_rules(self, data: Any) -> set[int]:
        """Indexes of the rules at least one of whose anchors occurs in `data`."""

    def next_anchor(self, data: Any, pos: int) -> int:
        """Where the next anchor of any rule or key name starts at or after `pos` (-1: none)."""

    def next_decomposed_anchor(self, data: Any, pos: int) -> int:
        """For `data` in NFKD: where the next place starts, at or after `pos`, whose NFKC could hold an
        anchor of any rule or key name (-1: none). See decomposed_anchors.py."""

    def next_ascii_anchor(self, data: Any, pos: int) -> int:
        """The same for ASCII `data`: a position inside the first anchor that ends at or after `pos`.

        Anchors never contain NUL or `"`, so that anchor lies in the first string holding one.
        """

    def rule_match(self, index: int, data: Any, pos: int = 0) -> tuple[int, int] | None:
        """The first match of rule `index` at or after `pos` that passes its boundary check."""

    def key_name_match(self, data: Any, pos: int = 0) -> tuple[int, int] | None:
        """The first key name naming a credential at or after `pos` (`data` holds key names only)."""

    def invisible(self, data: Any, pos: int, *, nul: bool = True) -> tuple[int, int] | None:
        """The first invisible character (see secret_rules.INVISIBLE_RANGES) at or after `pos`
        (`nul=False`: NUL does not count, for texts joined by it)."""

    def invisible_kinds(self, data: Any, limit: int, *, nul: bool = True) -> list[str] | None:
        """The distinct invisible characters `data` holds, sorted; None when there are more than
        `limit`, or when that cannot be told (`nul` as for `invisible`)."""

    def rule_anchor(self, data: Any) -> tuple[int, frozenset[int]] | None:
        """Where the first anchor of any rule in `data` ends, and the rules it triggers (empty when the
        text found cannot be told apart: the caller then asks `anchored_rules`); None when no rule's
        anchor occurs. A search that stops at the first anchor, not a pass that finds them all."""

    def other_rule_anchor(self, rules: frozenset[int], data: Any, pos: int = 0) -> int:
        """Where the first anchor (at or after `pos`) of a rule not in `rules` ends in `data`, or -1."""

    def invisible_or_rule_anchor(self, data: Any) -> tuple[int, frozenset[int] | None] | None:
        """One search for whichever comes first, an invisible character or a rule's anchor: (end,
        None) for the character, (end, rules) as `rule_anchor` for the anchor, None for neither."""

    def rule_or_other(self, rules: frozenset[int], others_than: frozenset[int], data: Any,
                      pos: int) -> tuple[int, int] | None:
        """One search from `pos` for whichever comes first: a match of one of `rules` (boundary
        checked), or an anchor of a rule not in `others_than`. (rule, start) for a match, (-1, start)
        for such an anchor, None for neither."""


def _ascii_anchors() -> list[tuple[str, bool]]:
    anchors = {(a, rule.fold) for rule in RULES for a in rule.anchors}
    anchors |= {(stem, True) for stem in secret_rules.KEY_NAME_STEMS}
    return sorted(a for a in anchors if a[0].isascii())


class _LiteralScanner:
    """Hyperscan (a SIMD multi-literal matcher), when installed, for the anchor pass over ASCII JSON
    text: about four times faster than RE2's DFA there. One scratch space per thread."""

    def __init__(self, hyperscan: Any) -> None:
        anchors = _ascii_anchors()
        self._hs = hyperscan
        self._db = hyperscan.Database()
        self._db.compile(expressions=[re.escape(a).encode() for a, _ in anchors], ids=list(range(len(anchors))),
                         elements=len(anchors),
                         flags=[hyperscan.HS_FLAG_CASELESS if fold else 0 for _, fold in anchors])
        self._lengths = [len(a) for a, _ in anchors]
        self._local = threading.local()

    def first(self, data: bytes, pos: int) -> int:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._hs.Scratch(self._db)
        found: list[int] = []

        def on_match(anchor: int, _start: int, end: int, _flags: int, _context: object) -> bool:
            found.append(end - self._lengths[anchor])
            return True  # stop: matches come in order of their end

        with contextlib.suppress(self._hs.ScanTerminated):
            self._db.scan(memoryview(data)[pos:] if pos else data, match_event_handler=on_match, scratch=scratch)
        return pos + found[0] if found else -1


def _anchor_pattern(anchor: str, fold: bool) -> str:
    return f"(?i:{re.escape(anchor)})" if fold else re.escape(anchor)


def _anchor_table() -> tuple[list[str], list[tuple[int, ...]]]:
    """Every distinct anchor (as a pattern) and the rules it triggers; key-name stems trigger none."""
    triggers: dict[str, list[int]] = {}
    for index, rule in enumerate(RULES):
        for anchor in rule.anchors:
            triggers.setdefault(_anchor_pattern(anchor, rule.fold), []).append(index)
    for stem in secret_rules.KEY_NAME_STEMS:
        triggers.setdefault(_anchor_pattern(stem, True), [])
    return list(triggers), [tuple(v) for v in triggers.values()]


class _AnchorProbe:
    """The searches behind `rule_anchor` and `other_rule_anchor`, for one engine's `compile`."""

    def __init__(self, compile_: Any, prepare: Any, dialect: Any, invisible: str) -> None:
        self._compile = compile_
        self._dialect = dialect
        self._invisible = compile_(invisible)
        entries: dict[tuple[str, bool], set[int]] = {}
        for index, rule in enumerate(RULES):
            for anchor in rule.anchors:
                entries.setdefault((anchor, rule.fold), set()).add(index)
        self._entries = entries
        self._exact = {prepare(anchor): frozenset(rules) for (anchor, fold), rules in entries.items() if not fold}
        self._folded: dict[str, set[int]] = {}
        for (anchor, fold), rules in entries.items():
            if fold:
                self._folded.setdefault(anchor.lower(), set()).update(rules)
        self._any = compile_(self._alternation(entries))
        self._any_or_invisible = compile_(f"{invisible}|{self._alternation(entries)}")
        self._others: dict[frozenset[int], Any] = {}  # compiled on first use, per set of rules
        self._combined: dict[tuple[frozenset[int], frozenset[int]], Any] = {}  # likewise
        self._own = [compile_(dialect(_bounded(rule) if rule.boundary else rule.pattern)) for rule in RULES]

    @staticmethod
    def _alternation(entries: Any) -> str:
        return "|".join(_anchor_pattern(anchor, fold) for anchor, fold in sorted(entries))

    def first(self, data: Any) -> tuple[int, frozenset[int]] | None:
        return self._named(self._any.search(data))

    def first_or_invisible(self, data: Any) -> tuple[int, frozenset[int] | None] | None:
        match = self._any_or_invisible.search(data)
        if match is not None and self._invisible.match(data, int(match.start())) is not None:
            return int(match.end()), None
        return self._named(match)

    def _named(self, match: Any) -> tuple[int, frozenset[int]] | None:
        if match is None:
            return None
        found = match.group()
        text = found.decode("utf-8", "surrogatepass") if isinstance(found, bytes) else found
        return int(match.end()), self._exact.get(found, frozenset()) | frozenset(self._folded.get(text.lower(), ()))

    def _other_alternation(self, rules: frozenset[int]) -> str:
        return self._alternation({entry for entry, triggered in self._entries.items() if triggered - rules})

    def _others_pattern(self, rules: frozenset[int]) -> Any:
        if rules not in self._others:
            pattern = self._compile(self._other_alternation(rules))
            if len(self._others) >= 256:  # the rules of one anchor, or of a few: never many sets
                return pattern
            self._others[rules] = pattern
        return self._others[rules]

    def other(self, rules: frozenset[int], data: Any, pos: int) -> int:
        match = self._others_pattern(rules).search(data, pos)
        return -1 if match is None else int(match.end())

    def rule_or_other(self, rules: frozenset[int], others_than: frozenset[int], data: Any,
                      pos: int) -> tuple[int, int] | None:
        key = (rules, others_than)
        pattern = self._combined.get(key)
        if pattern is None:
            own = "|".join(f"(?:{self._dialect(_bounded(RULES[r]) if RULES[r].boundary else RULES[r].pattern)})"
                           for r in sorted(rules))
            # The other anchors first: where an anchor and a match start at one place, the anchor is found.
            pattern = self._compile(f"(?:{self._other_alternation(others_than)})|{own}")
            if len(self._combined) < 256:
                self._combined[key] = pattern
        match = pattern.search(data, pos)
        if match is None:
            return None
        start = int(match.start())
        if self._others_pattern(others_than).match(data, start) is not None:
            return -1, start
        # Which rule matched there. Should none of them match on its own (it cannot), the answer is
        # "another anchor": the caller then reports or checks in full rather than guess.
        return next((r for r in sorted(rules) if self._own[r].match(data, start) is not None), -1), start


def _bounded(rule: Rule) -> str:
    return f"(?:^|[^{rule.boundary}])(?:{rule.pattern})"


class Re2Engine:
    name = "re2"
    searches_bytes = True

    def __init__(self, re2: Any, literals: _LiteralScanner | None = None) -> None:
        self._re2 = re2
        self._literals = literals
        options = re2.Options()
        options.max_mem = 32 << 20
        options.never_capture = True
        anchors, self._triggers = _anchor_table()
        self._anchor_set = re2.Set.SearchSet(options)
        for anchor in anchors:
            self._anchor_set.Add(anchor)
        self._anchor_set.Compile()
        self.anchor_pattern = "|".join(anchors)  # for byte_facts' one pass
        self._any_anchor = re2.compile(self.anchor_pattern, options)
        self._rules = [re2.compile(secret_rules.for_re2(rule.pattern), options) for rule in RULES]
        self._bounded = [re2.compile(secret_rules.for_re2(_bounded(rule)), options) if rule.boundary else None
                         for rule in RULES]
        self._forbidden_before = [frozenset(secret_rules.boundary_chars(rule.boundary).encode()) for rule in RULES]
        self._key_name = re2.compile(secret_rules.for_re2(secret_rules.KEY_NAME), options)
        self._invisible = re2.compile(secret_rules.invisible_class(re2=True), options)
        self._invisible_not_nul = re2.compile(secret_rules.invisible_class(re2=True, nul=False), options)
        # The bytes that begin an invisible character other than NUL in UTF-8: a text holding none of
        # them (most do not) is settled by a few byte searches.
        self._invisible_begun = utf8_starts(c for a, b in secret_rules.INVISIBLE_RANGES
                                            for c in range(max(a, 1), b + 1))
        self._probe = _AnchorProbe(lambda pattern: re2.compile(pattern, options), self.prepare, secret_rules.for_re2,
                                   secret_rules.invisible_class(re2=True))

    def prepare(self, text: str) -> bytes:
        return text.encode("utf-8", "surrogatepass")

    def prepare_encoded(self, text: str, encoded: bytes) -> bytes:
        return encoded

    def anchored_rules(self, data: bytes) -> set[int]:
        found = self._anchor_set.Match(data)
        return {rule for anchor in found or () for rule in self._triggers[anchor]}

    def next_anchor(self, data: bytes, pos: int) -> int:
        match = self._any_anchor.search(data, pos)
        return -1 if match is None else int(match.start())

    def next_ascii_anchor(self, data: bytes, pos: int) -> int:
        return self.next_anchor(data, pos) if self._literals is None else self._literals.first(data, pos)

    @cached_property
    def _decomposed_anchor(self) -> Any:
        """Compiled at first use (~10 ms): only text written with combining marks asks for it."""
        options = self._re2.Options()
        options.max_mem = 32 << 20
        options.never_capture = True
        return self._re2.compile(decomposed_anchors.pattern(re2=True), options)

    def next_decomposed_anchor(self, data: bytes, pos: int) -> int:
        match = self._decomposed_anchor.search(data, pos)
        return -1 if match is None else int(match.start())

    def rule_match(self, index: int, data: bytes, pos: int = 0) -> tuple[int, int] | None:
        return _first_bounded(self._rules[index], self._bounded[index], self._forbidden_before[index], data, pos)

    def key_name_match(self, data: bytes, pos: int = 0) -> tuple[int, int] | None:
        match = self._key_name.search(data, pos)
        return None if match is None else (int(match.start()), int(match.end()))

    def invisible(self, data: bytes, pos: int, *, nul: bool = True) -> tuple[int, int] | None:
        if pos == 0 and not (nul and b"\x00" in data) and not self._invisible_begun(data):
            return None  # (only from the start: a caller stepping through many would pay for each)
        match = (self._invisible if nul else self._invisible_not_nul).search(data, pos)
        return None if match is None else (int(match.start()), int(match.end()))

    @cached_property
    def _invisible_set(self) -> Any:
        """Every invisible character as a pattern of one set: one pass says which occur (built at
        first use, ~2 ms: few texts hold any)."""
        options = self._re2.Options()
        options.max_mem = 32 << 20
        options.never_capture = True
        found = self._re2.Set.SearchSet(options)
        for code in _INVISIBLE_POINTS:
            found.Add(f"\\x{{{code:x}}}")
        found.Add(r"\z")  # the text's end: missing when the search did not go through (out of memory)
        found.Compile()
        return found

    def invisible_kinds(self, data: bytes, limit: int, *, nul: bool = True) -> list[str] | None:
        if self.invisible(data, 0, nul=nul) is None:
            return []
        matched = self._invisible_set.Match(data) or ()
        if len(_INVISIBLE_POINTS) not in matched:  # as if there were too many
            return None
        kinds = sorted(chr(_INVISIBLE_POINTS[index]) for index in matched
                       if index < len(_INVISIBLE_POINTS) and (nul or _INVISIBLE_POINTS[index]))
        return None if len(kinds) > limit else kinds

    def rule_anchor(self, data: bytes) -> tuple[int, frozenset[int]] | None:
        return self._probe.first(data)

    def other_rule_anchor(self, rules: frozenset[int], data: bytes, pos: int = 0) -> int:
        return self._probe.other(rules, data, pos)

    def invisible_or_rule_anchor(self, data: bytes) -> tuple[int, frozenset[int] | None] | None:
        return self._probe.first_or_invisible(data)

    def rule_or_other(self, rules: frozenset[int], others_than: frozenset[int], data: bytes,
                      pos: int) -> tuple[int, int] | None:
        return self._probe.rule_or_other(rules, others_than, data, pos)


class PythonEngine:
    name = "python"
    searches_bytes = False

    def __init__(self) -> None:
        anchors, self._triggers = _anchor_table()
        self._anchors = [re.compile(anchor) for anchor in anchors]
        self._any_anchor = re.compile("|".join(anchors))
        self._rules = [re.compile(secret_rules.for_python(rule.pattern)) for rule in RULES]
        self._bounded = [re.compile(secret_rules.for_python(_bounded(rule))) if rule.boundary else None
                         for rule in RULES]
        self._forbidden_before = [frozenset(secret_rules.boundary_chars(rule.boundary)) for rule in RULES]
        self._key_name = re.compile(secret_rules.for_python(secret_rules.KEY_NAME))
        self._invisible = re.compile(secret_rules.invisible_class(re2=False))
        self._invisible_not_nul = re.compile(secret_rules.invisible_class(re2=False, nul=False))
        self._probe = _AnchorProbe(re.compile, self.prepare, secret_rules.for_python,
                                   secret_rules.invisible_class(re2=False))

    def prepare(self, text: str) -> str:
        return text

    def prepare_encoded(self, text: str, encoded: bytes) -> str:
        return text

    def anchored_rules(self, data: str) -> set[int]:
        return {rule for anchor, rules in zip(self._anchors, self._triggers, strict=True) if rules
                and anchor.search(data) for rule in rules}

    def next_anchor(self, data: str, pos: int) -> int:
        match = self._any_anchor.search(data, pos)
        return -1 if match is None else match.start()

    def next_ascii_anchor(self, data: str, pos: int) -> int:
        return self.next_anchor(data, pos)

    @cached_property
    def _decomposed_anchor(self) -> Any:
        return re.compile(decomposed_anchors.pattern(re2=False))

    def next_decomposed_anchor(self, data: str, pos: int) -> int:
        match = self._decomposed_anchor.search(data, pos)
        return -1 if match is None else match.start()

    def rule_match(self, index: int, data: str, pos: int = 0) -> tuple[int, int] | None:
        return _first_bounded(self._rules[index], self._bounded[index], self._forbidden_before[index], data, pos)

    def key_name_match(self, data: str, pos: int = 0) -> tuple[int, int] | None:
        match = self._key_name.search(data, pos)
        return None if match is None else (match.start(), match.end())

    def invisible(self, data: str, pos: int, *, nul: bool = True) -> tuple[int, int] | None:
        match = (self._invisible if nul else self._invisible_not_nul).search(data, pos)
        return None if match is None else (match.start(), match.end())

    def invisible_kinds(self, data: str, limit: int, *, nul: bool = True) -> list[str] | None:
        kinds = sorted(set((self._invisible if nul else self._invisible_not_nul).findall(data)))
        return None if len(kinds) > limit else kinds

    def rule_anchor(self, data: str) -> tuple[int, frozenset[int]] | None:
        return self._probe.first(data)

    def other_rule_anchor(self, rules: frozenset[int], data: str, pos: int = 0) -> int:
        return self._probe.other(rules, data, pos)

    def invisible_or_rule_anchor(self, data: str) -> tuple[int, frozenset[int] | None] | None:
        return self._probe.first_or_invisible(data)

    def rule_or_other(self, rules: frozenset[int], others_than: frozenset[int], data: str,
                      pos: int) -> tuple[int, int] | None:
        return self._probe.rule_or_other(rules, others_than, data, pos)


def _first_bounded(pattern: Any, bounded: Any, forbidden: frozenset[Any], data: Sequence[Any],
                   pos: int) -> tuple[int, int] | None:
    """The first match from `pos` whose preceding character is not forbidden.

    The plain pattern starts with its anchor, so the engine skips quickly to each occurrence; a
    match glued to a preceding letter or digit is a near miss and the search goes on. Past
    `_MAX_NEAR_MISSES` of them, one pass of the variant that checks the boundary itself decides.
    """
    for _ in range(_MAX_NEAR_MISSES):
        match = pattern.search(data, pos)
        if match is None:
            return None
        start = int(match.start())
        if not forbidden or start == 0 or data[start - 1] not in forbidden:
            return start, int(match.end())
        pos = start + 1
    match = bounded.search(data, pos - 1 if pos > 0 else 0)
    return None if match is None else (int(match.start()), int(match.end()))


@cache
def default_engine() -> Engine:
    """RE2 when it is installed (it is a dependency on every platform with a wheel), else Python;
    Hyperscan for the ASCII anchor pass when it is installed too."""
    try:
        import re2  # type: ignore[import-untyped]  # no type information shipped
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        return PythonEngine()
    return Re2Engine(re2, _literal_scanner())


def _literal_scanner() -> _LiteralScanner | None:
    try:
        import hyperscan
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        return None
    return _LiteralScanner(hyperscan)


@cache
def re2_only_engine() -> Engine:
    """RE2 without Hyperscan (for tests that compare the two anchor passes)."""
    import re2

    return Re2Engine(re2)


@cache
def python_engine() -> Engine:
    return PythonEngine()
