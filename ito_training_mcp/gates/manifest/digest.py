"""What gate 2 gives: the digested manifest (the exact bytes, their SHA-256, the validated content)
and its summary, the review a person is shown (`data.review`, `data.review_text`) with what the
egress needs to check it without walking it (`LocalTree`, `LocalText`).

`digest_manifest_file` is gate 2 in one place: secure read -> strict JSON -> secret scan -> character
rule -> schema (`manifest.parse_manifest`). The service runs the read in a worker thread
(`read_manifest`) and the rest on its own (`digest_bytes`).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, PrivateAttr

from ito_training_mcp.egress.clean import LocalText, LocalTree
from ito_training_mcp.files import FileBytes, ReadHooks, read_regular_file
from ito_training_mcp.gates.config import ManifestSettings
from ito_training_mcp.gates.manifest.characters import shown_as_is
from ito_training_mcp.gates.manifest.review import review_strings, review_text
from ito_training_mcp.gates.manifest.schema import SCHEMA_VERSION, Parsed, TrainingManifest, parse_checked
from ito_training_mcp.look_ahead import LookAhead, prompt_turns

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


def read_manifest(path: object, settings: ManifestSettings, *, hooks: ReadHooks | None = None,
                  on_read: Callable[[bytes], None] | None = None) -> FileBytes:
    """Gate 2's read: once, securely, with the SHA-256 of the bytes read (the part that can block).
    `on_read`: see `read_regular_file`."""
    return read_regular_file(path, max_bytes=settings.max_bytes, roots=settings.roots, hooks=hooks, on_read=on_read)


def digest_bytes(file: FileBytes, *, summarize: bool = False) -> DigestedManifest:
    """The rest of gate 2 on what `read_manifest` read: strict JSON, secret scan, character rule and
    schema. `summarize`: make the summary now, too."""
    return _digested(file, parse_checked(file.content), summarize)


def _digested(file: FileBytes, parsed: Parsed, summarize: bool) -> DigestedManifest:
    digested = DigestedManifest(file=file, manifest=parsed.manifest)
    digested._text, digested._references, digested._shown_as_is = parsed.text, parsed.references, parsed.shown_as_is
    if summarize:
        digested.summary()
    return digested


async def read_and_digest(path: object, settings: ManifestSettings, *, summarize: bool = False) -> DigestedManifest:
    """Gate 2 as the service runs it. The read can block, so it runs in a worker thread, and so does
    its SHA-256 (~1.1 ms a mebibyte here); the checks (`digest_bytes`) run on the caller's thread.
    Under asyncio the worker hands the bytes over as soon as every check of the read has passed,
    with a call that does not wait, and then looks at them (`look_ahead.py`: the character rule's
    look, and the scanner's first search) and hashes them. The parse, which holds the GIL, and the
    searches and the hash, which let go of it, run at once (`look_ahead.prompt_turns` keeps the
    worker's waits for the GIL short meanwhile); the checks take each look when they need it. The
    digest is of the very object checked. Under any other event loop: the read and its hash,
    then the checks."""
    loop = _running_asyncio_loop()
    if loop is None:
        return digest_bytes(await anyio.to_thread.run_sync(functools.partial(read_manifest, path, settings)),
                            summarize=summarize)
    handed: asyncio.Future[bytes] = loop.create_future()
    hashed: list[FileBytes] = []
    hashed_now = threading.Event()
    ahead = LookAhead()

    def hand_over(content: bytes) -> None:
        if len(content) >= _HAND_OVER_FROM:  # a small file is hashed at once: nothing to gain
            loop.call_soon_threadsafe(_settle, handed, content)
            ahead.take(content)

    def read_and_hash() -> FileBytes:
        file = read_manifest(path, settings, on_read=hand_over)
        hashed.append(file)
        hashed_now.set()
        return file

    reading = asyncio.ensure_future(anyio.to_thread.run_sync(read_and_hash))
    reading.add_done_callback(_retrieved)  # a refusal met after the hand-over leaves the hash to finish alone
    await asyncio.wait((handed, reading), return_when=asyncio.FIRST_COMPLETED)
    if not handed.done():  # a small file, or the read refused (or failed) before handing anything over
        return digest_bytes(reading.result(), summarize=summarize)  # raises the read's refusal
    content = handed.result()
    with prompt_turns():  # the worker's looks and hash take the GIL back within the parse (no await in it)
        parsed = parse_checked(content, ahead)
        # Past the look the worker only hashes what it read (bounded work that cannot hang, and
        # usually done by now): waiting for it here spares two turns of the event loop.
        hashed_in_time = hashed_now.wait(_HASH_WAIT_S)
    file = hashed[0] if hashed_in_time else await reading
    if file.content is not content:  # pragma: no cover - read_regular_file hands over what it returns
        raise RuntimeError("gate 2: the bytes hashed are not the bytes checked")
    return _digested(file, parsed, summarize)


_HASH_WAIT_S = 5.0  # the SHA-256 of the largest manifest allowed takes milliseconds
_HAND_OVER_FROM = 64 << 10  # bytes; below, hashing costs less than handing over (~50 us)


def _running_asyncio_loop() -> asyncio.AbstractEventLoop | None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another event loop (anyio runs on trio too)
        return None
    return loop if asyncio.current_task() is not None else None


def _settle(future: asyncio.Future[bytes], content: bytes) -> None:
    if not future.done():
        future.set_result(content)


def _retrieved(task: asyncio.Future[FileBytes]) -> None:
    if not task.cancelled():
        task.exception()


def digest_manifest_file(
    path: object, settings: ManifestSettings, *, hooks: ReadHooks | None = None, summarize: bool = False
) -> DigestedManifest:
    """Gate 2: read once, securely; parse strictly; scan; validate. The file is never read twice."""
    return digest_bytes(read_manifest(path, settings, hooks=hooks), summarize=summarize)
