"""What one string holds: the secret scanner's check of one key or string, once cleaned.

The anchors a string holds name the formats to search for (`secret_rules`); a long string is checked
by two searches that stop early instead of the pass that finds every anchor. Within a bounded scan's
budget (`scan_strings.Budget`), a string the work does not fit is UNEXAMINED. Shared by the scan of a
document (`secret_scan`) and its look at the JSON text as it stands (`raw_look`).
"""

from __future__ import annotations

from typing import Any

from ito_training_mcp.scan_strings import HIDDEN, LONG_STRING, UNBOUNDED, UNEXAMINED, Budget
from ito_training_mcp.secret_engine import Engine, default_engine
from ito_training_mcp.secret_rules import RULES
from ito_training_mcp.text_normal import normalize

KEY_NAME = "credential_key_name"  # the kind of a key that names a credential
# Strings around anchors checked one by one before the rules run over the rest of the text at once.
MAX_SEGMENTS = 64


class Memo:
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


def kinds(engine: Engine, data: Any, memo: Memo | None = None, budget: Budget = UNBOUNDED) -> set[str]:
    """The kinds of credential the engine's prepared `data` (one string, cleaned) holds, within `budget`
    (UNEXAMINED where it runs out); `memo`: what each string held, once per scan."""
    if memo is not None:
        known = memo.get(data)
        if known is None:
            known = kinds(engine, data, None, budget)
            memo.put(data, known)
        return known
    if not budget.affords(len(data)):
        return {UNEXAMINED}
    if len(data) > LONG_STRING:
        found_long = _long_kinds(engine, data, budget)
        if found_long is not None:
            return found_long
    budget.spend(len(data))
    found: set[str] = set()
    for index in sorted(engine.anchored_rules(data)):
        kind = RULES[index].kind
        if kind in found:
            continue
        if not budget.affords(len(data)):
            found.add(UNEXAMINED)
            break
        match = engine.rule_match(index, data)
        budget.spend(len(data) if match is None else match[1])
        if match is not None:
            found.add(kind)
    return found


def value_kinds(text: str) -> list[str]:
    """The kinds of credential found in one string (empty when none). Linear in its length."""
    engine = default_engine()
    clean = normalize(text)
    return [HIDDEN] if clean is None else sorted(kinds(engine, engine.prepare(clean)))


def credential_key_name(key: str) -> bool:
    """password, apiKey, PRIVATE_KEY, client-secrets, hf_token, Passwort... but not max_tokens,
    tokenizer, token_budget or secretary."""
    engine = default_engine()
    clean = normalize(key)
    return clean is not None and engine.key_name_match(engine.prepare(clean)) is not None


def _long_kinds(engine: Engine, data: Any, budget: Budget) -> set[str] | None:
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
    found: set[str] = set()
    left, pos = first, 0
    while left:
        hit = engine.rule_or_other(left, first, data, pos)
        budget.spend(len(data) - pos if hit is None else hit[1] - pos)
        if hit is None:
            return found
        rule, pos = hit
        if rule < 0:
            return found | {UNEXAMINED} if bounded else None
        found.add(RULES[rule].kind)
        left = frozenset(r for r in left if RULES[r].kind not in found)
    other = engine.other_rule_anchor(first, data, pos)  # every format found: is any other's anchor left?
    budget.spend(len(data) - pos if other < 0 else other - pos)
    if other < 0:
        return found
    return found | {UNEXAMINED} if bounded else None


def key_kinds(engine: Engine, data: Any, memo: Memo | None = None, budget: Budget = UNBOUNDED) -> set[str]:
    """A key holding a token shape reports that; a key that merely names a credential, the name."""
    found = set(kinds(engine, data, memo, budget))
    if not found:
        if not budget.affords(len(data)):
            found.add(UNEXAMINED)
        elif engine.key_name_match(data) is not None:
            found.add(KEY_NAME)
        budget.spend(len(data))
    return found
