"""The review a result carries: bounded for an agent, whole for a person.

`review_data` is what digest_manifest and plan_training put in `data`: the review within the first bounds
that fit (`gates/manifest/review.py`), its text, what is left out, and the MCP resource that serves the
whole review. `Reviews` keeps the last few digested manifests of this process, so that resource and the
CLI can show a review whole.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from ito_training_mcp.egress.clean import escape
from ito_training_mcp.gates.manifest.digest import DigestedManifest
from ito_training_mcp.gates.manifest.review import BOUNDS, REVIEW_WIDTH, review_lines, review_text, summary

RESOURCE_TEMPLATE = "ito-training://manifests/{sha256}/review"
REVIEW_BUDGET = 9_000  # bytes of a result's review, its text and the facts beside it
KEPT = 8  # digested manifests kept for their whole review
KEPT_BYTES = 16 << 20  # and at most this many manifest bytes among them


def resource_uri(sha256: str) -> str:
    return RESOURCE_TEMPLATE.format(sha256=sha256)


def review_data(digested: DigestedManifest) -> dict[str, Any]:
    """The digest's facts and its review, shortened until they fit REVIEW_BUDGET."""
    full = digested.review()
    for bounds in BOUNDS:
        shown, left = summary(full, bounds)
        left_out = {key: count for key, count in left.items() if count}
        data = {
            **digested.facts(),
            "review": shown,
            "review_text": review_text(shown, digested.sha256, left_out),
            "left_out": left_out,
            "full_review": {"resource": resource_uri(digested.sha256), "complete_here": not left_out},
        }
        if len(escape(json.dumps(data, ensure_ascii=False)).encode("utf-8")) <= REVIEW_BUDGET:
            break
    return data


def full_review_text(digested: DigestedManifest, width: int = REVIEW_WIDTH) -> str:
    return "\n".join(review_lines(digested.review(), digested.sha256, width))


class Reviews:
    """The last few digested manifests, by digest (bounded in count and bytes)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, DigestedManifest] = OrderedDict()

    def keep(self, digested: DigestedManifest) -> None:
        self._kept[digested.sha256] = digested
        self._kept.move_to_end(digested.sha256)
        while len(self._kept) > KEPT or (
                len(self._kept) > 1 and sum(d.file.size_bytes for d in self._kept.values()) > KEPT_BYTES):
            self._kept.popitem(last=False)

    def get(self, sha256: str) -> DigestedManifest | None:
        """The kept manifest, unless it holds a credential learnt since it was digested (then forgotten:
        a new digest refuses it)."""
        digested = self._kept.get(sha256)
        if digested is not None and digested.holds_known_credential():
            del self._kept[sha256]
            return None
        return digested
