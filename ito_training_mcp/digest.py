"""What gate 2 gives: the digested manifest (the exact bytes, their SHA-256, the validated content)
and its summary, the review a person is shown (`data.review`, `data.review_text`) with what the
egress needs to check it without walking it (`LocalTree`, `LocalText`).

`digest_manifest_file` is gate 2 in one place: secure read -> strict JSON -> secret scan -> character
rule -> schema (`manifest.parse_manifest`). The service runs the read in a worker thread
(`read_manifest`) and the rest on its own (`digest_bytes`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr

from .config import ManifestSettings
from .egress import LocalText, LocalTree
from .manifest import SCHEMA_VERSION, TrainingManifest, parse_checked
from .manifest_characters import shown_as_is
from .review_layout import review_strings, review_text
from .safe_read import FileBytes, ReadHooks, read_regular_file

# Every key of a review, for `review_sources` (a test keeps this complete).
REVIEW_KEYS = ("model name parameter_count size revision target data uri decontamination method eval_suites report "
               "checked_at post_training budget ceiling_usd max_incremental_cost_usd checkpoints interval_steps "
               "retain_last storage description")


def review_sources(review: dict[str, Any], strings: str) -> tuple[str, ...]:
    """Strings in which every key and string of `review` occurs, for the egress (`LocalTree`):
    `strings` (`review_strings`) holds all of them but the description and the data revisions."""
    revisions = "\n".join(ref["revision"] or "" for ref in review["data"])
    return strings, review["description"] or "", revisions, REVIEW_KEYS


def verbatim_sources(text: str, review: dict[str, Any]) -> tuple[str, ...] | None:
    """For a manifest that passed gate 2 and holds no backslash: its text, and the review's derived
    strings (the size and the two amounts as the review writes them). JSON without a backslash has no
    escape, so every string of the manifest stands in its text as it is, and every string of the
    review is in one of these: the egress checks them instead of a joined copy of the review's
    strings (`review_strings`). None when the manifest holds a backslash."""
    if "\\" in text:  # one character search
        return None
    budget = review["budget"]
    return text, "\n".join((review["model"]["size"], budget["ceiling_usd"], budget["max_incremental_cost_usd"]))


class DigestedManifest(BaseModel):
    """A manifest that passed gate 2: the bytes, their digest, and the parsed content."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    file: FileBytes
    manifest: TrainingManifest

    _summary: dict[str, Any] | None = PrivateAttr(default=None)
    _text: str | None = PrivateAttr(default=None)  # what the bytes decoded to, kept from the parse
    _references: list[dict[str, Any]] | None = PrivateAttr(default=None)  # the parsed data references
    _shown_as_is: bool | None = PrivateAttr(default=None)  # gate 2's verdict on the bytes, if it looked

    @property
    def sha256(self) -> str:
        return self.file.sha256

    def summary(self) -> dict[str, Any]:
        """What the digest shows: the path, the digest, the review and its text. Made once, by the
        first caller (`digest_bytes(summarize=True)`, or whoever shows it first)."""
        if self._summary is None:
            self._summary = self._summarize()
        return self._summary

    def _summarize(self) -> dict[str, Any]:
        review = self.manifest.review(self._references)
        decoded = self.file.content.decode("utf-8") if self._text is None else self._text
        shown = shown_as_is(self.file.content) if self._shown_as_is is None else self._shown_as_is
        verbatim = verbatim_sources(decoded, review)
        strings = (review_strings(review),) if verbatim is None else verbatim
        sources = review_sources(review, strings[0]) if verbatim is None else (*verbatim, REVIEW_KEYS)
        return {
            "path": self.file.path,
            "sha256": self.file.sha256,
            "size_bytes": self.file.size_bytes,
            "schema_version": SCHEMA_VERSION,
            "review": LocalTree(review, sources=sources, shown_as_is=shown),
            "review_text": LocalText(review_text(review, self.file.sha256, shown_as_is=shown), strings=strings,
                                     shown_as_is=shown),
        }


def read_manifest(path: object, settings: ManifestSettings, *, hooks: ReadHooks | None = None) -> FileBytes:
    """Gate 2's read: once, securely, with the SHA-256 of the bytes read (the part that can block)."""
    return read_regular_file(path, max_bytes=settings.max_bytes, roots=settings.roots, hooks=hooks)


def digest_bytes(file: FileBytes, *, summarize: bool = False) -> DigestedManifest:
    """The rest of gate 2 on what `read_manifest` read: strict JSON, secret scan, character rule and
    schema. `summarize`: make the summary now, too."""
    parsed = parse_checked(file.content)
    digested = DigestedManifest(file=file, manifest=parsed.manifest)
    digested._text, digested._references, digested._shown_as_is = parsed.text, parsed.references, parsed.shown_as_is
    if summarize:
        digested.summary()
    return digested


def digest_manifest_file(
    path: object, settings: ManifestSettings, *, hooks: ReadHooks | None = None, summarize: bool = False
) -> DigestedManifest:
    """Gate 2: read once, securely; parse strictly; scan; validate. The file is never read twice."""
    return digest_bytes(read_manifest(path, settings, hooks=hooks), summarize=summarize)
