"""Results an agent can hold: every envelope's JSON is at most `RESULT_MAX_BYTES`.

Clients warn, refuse or move a result to a file well before a mebibyte; a tool result here is a summary a
person can read, never an echo. Tools whose answers can grow (log pages, checkpoint lists, stages with
their evals) are shortened here when they are too long: long lists keep their first items and long strings
are cut, a little more at each step until the envelope fits, and `data.left_out` counts what was left out.
Identifiers, digests, links, money, states and failed checks are never cut. The digest and the plan shape
their review themselves (`gates/manifest/review.py`) and pass here like any other result.
"""

from __future__ import annotations

from typing import Any

from ito_training_mcp.envelope import Envelope

RESULT_MAX_BYTES = 16 * 1024
# Never cut: what the next call or the person's decision needs whole (and every key ending in one of
# PROTECTED_ENDINGS: ids, keys, digests, links, times).
PROTECTED = frozenset({
    "sha256", "resource", "confirmation_ref", "next_cursor", "path", "failed_checks", "failed_gates", "budget",
    "estimate", "state", "status", "action", "left_out", "usd",
})
PROTECTED_ENDINGS = ("_id", "_key", "_sha256", "_url", "_at", "_usd")
# (items kept of a long list, characters kept of a long string), from generous to tight
_STEPS = ((32, 512), (16, 256), (8, 128), (4, 96), (2, 64), (1, 64))
SHORTENED_NOTE = " Part of this answer was left out to keep it short (data.left_out counts what)."


def size(envelope: Envelope) -> int:
    """The bytes of the envelope as the text copy of a tool result carries it."""
    return len(envelope.model_dump_json().encode("utf-8"))


def fit(envelope: Envelope, limit: int = RESULT_MAX_BYTES) -> Envelope:
    """`envelope` within `limit` bytes: the same object when it fits already."""
    if size(envelope) <= limit or envelope.data is None:
        return envelope
    for items, characters in _STEPS:
        left = {"list_items": 0, "strings_cut": 0}
        data = _shrink(envelope.data, items, characters, left)
        data["left_out"] = {**(data.get("left_out") or {}), **{k: v for k, v in left.items() if v}}
        shortened = envelope.model_copy(update={"data": data, "notice": envelope.notice + SHORTENED_NOTE})
        if size(shortened) <= limit:
            return shortened
    return shortened  # the tightest step: what is left is protected


def _shrink(value: Any, items: int, characters: int, left: dict[str, int]) -> Any:
    if isinstance(value, str):
        if len(value) > characters:
            left["strings_cut"] += 1
            return value[:characters] + "…"
        return value
    if isinstance(value, dict):
        return {key: item if key in PROTECTED or key.endswith(PROTECTED_ENDINGS) else
                _shrink(item, items, characters, left) for key, item in value.items()}
    if isinstance(value, list):
        if len(value) > items:
            left["list_items"] += len(value) - items
        return [_shrink(item, items, characters, left) for item in value[:items]]
    return value
