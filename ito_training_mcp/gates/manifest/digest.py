"""Gate 2 in one place: read the manifest once, securely; parse it strictly; scan it; validate it.

The bytes hashed are the bytes parsed and, later, the bytes sent: `DigestedManifest` carries them. The
service runs the gate in a worker thread, a bounded number at a time (`ManifestGate`): a read can block
on a slow disk, and a mebibyte's parse and checks take milliseconds that the event loop must not wait for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from ito_training_mcp.envelope import ErrorCode, Gate
from ito_training_mcp.errors import Refusal
from ito_training_mcp.files import FileBytes, ReadHooks, read_regular_file
from ito_training_mcp.gates.config import ManifestSettings
from ito_training_mcp.gates.manifest.review import review
from ito_training_mcp.gates.manifest.schema import (
    SCHEMA_VERSION,
    TrainingManifest,
    parse_manifest,
)

T = TypeVar("T")


@dataclass(frozen=True)
class DigestedManifest:
    """A manifest that passed gate 2: the bytes, their digest, and the validated content."""

    file: FileBytes
    manifest: TrainingManifest
    _review: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)

    @property
    def sha256(self) -> str:
        return self.file.sha256

    def review(self) -> dict[str, Any]:
        """The whole review (made once)."""
        if not self._review:
            self._review.append(review(self.manifest))
        return self._review[0]

    def facts(self) -> dict[str, Any]:
        return {"path": self.file.path, "sha256": self.file.sha256, "size_bytes": self.file.size_bytes,
                "schema_version": SCHEMA_VERSION}


def digest_manifest_file(path: object, settings: ManifestSettings, *, hooks: ReadHooks | None = None
                         ) -> DigestedManifest:
    """Gate 2: read once, securely; parse strictly; scan; validate. Raises `ManifestRefusal`."""
    file = read_regular_file(path, max_bytes=settings.max_bytes, roots=settings.roots, hooks=hooks)
    return DigestedManifest(file=file, manifest=parse_manifest(file.content))


class ManifestGate:
    """Gate 2 off the event loop, `limit` manifests at a time: the rest wait for a turn, at most `wait_s`
    seconds, then are refused (RATE_LIMITED, retryable, nothing sent). Memory stays bounded however many
    calls arrive at once."""

    def __init__(self, limit: int = 1, wait_s: float = 30.0) -> None:
        self._turns = anyio.Semaphore(limit)
        self._wait_s = wait_s

    async def digest(self, path: str, settings: ManifestSettings,
                     then: Callable[[DigestedManifest], T] | None = None) -> tuple[DigestedManifest, T | None]:
        """The digested manifest, and what `then` makes of it in the same worker thread (a review, say)."""

        def work() -> tuple[DigestedManifest, T | None]:
            digested = digest_manifest_file(path, settings)
            return digested, None if then is None else then(digested)

        return await self.run(work)

    async def run(self, work: Callable[[], T]) -> T:
        """`work` (a manifest's parse and checks) in a worker thread, when its turn comes."""
        with anyio.move_on_after(self._wait_s) as waited:
            await self._turns.acquire()
        if waited.cancelled_caught:
            raise Refusal(ErrorCode.RATE_LIMITED, f"This server is busy reading other manifests; no turn came "
                          f"within {self._wait_s:.0f} s. Nothing was sent.", gate=Gate.MANIFEST,
                          details={"reason": "manifest_reads_busy"})
        try:
            return await anyio.to_thread.run_sync(work)
        finally:
            self._turns.release()
