"""The review a result carries: bounded for an agent, whole for a person.

`review_data` is what digest_manifest and plan_training put in `data`: the review within the first bounds
that fit (`gates/manifest/review.py`), its text, what is left out, and the MCP resource that serves the
whole review. `Reviews` keeps the bytes of the last few manifests this process digested, so that resource
and the CLI can show a review whole.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from ito_training_mcp.egress.clean import escape
from ito_training_mcp.errors import ManifestRefusal
from ito_training_mcp.files import FileBytes
from ito_training_mcp.gates.manifest.digest import DigestedManifest
from ito_training_mcp.gates.manifest.review import BOUNDS, REVIEW_WIDTH, review_lines, review_text, summary
from ito_training_mcp.gates.manifest.schema import parse_manifest

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
    """The bytes of the last few digested manifests, by digest (bounded in count and bytes).

    Bytes, not parsed manifests: a parsed mebibyte is some hundred thousand objects, which every full
    garbage collection would walk again (a pause of 100 ms or more for each call in flight). A review is
    read seldom; `get` parses the bytes anew."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, FileBytes] = OrderedDict()

    def keep(self, digested: DigestedManifest) -> None:
        self._kept[digested.sha256] = digested.file
        self._kept.move_to_end(digested.sha256)
        while len(self._kept) > KEPT or (
                len(self._kept) > 1 and sum(f.size_bytes for f in self._kept.values()) > KEPT_BYTES):
            self._kept.popitem(last=False)

    def get(self, sha256: str) -> DigestedManifest | None:
        """The kept manifest, through gate 2 again (a few milliseconds a mebibyte: call it off the event
        loop). None if it is not kept, or if gate 2 now refuses it: it holds a credential this process has
        learnt since it was digested (a token file is read only after gate 3), and a review could split
        that value where the egress would no longer recognise it. Such a manifest is forgotten."""
        file = self._kept.get(sha256)
        if file is None:
            return None
        try:
            return DigestedManifest(file=file, manifest=parse_manifest(file.content))
        except ManifestRefusal:
            self._kept.pop(sha256, None)
            return None
