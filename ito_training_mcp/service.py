"""The core: every operation of contract §2 as a plain async method returning an `Envelope`.

The MCP tools and the CLI are thin adapters over this class; it knows nothing of either.
Each operation reads top to bottom in gate order (contract §3). A gate refuses by raising
`Refusal`; `_run` turns that into the envelope and records whether any request left this
process. Gates 0-2 are local: they run before any credential is read or socket opened.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from . import inputs
from .config import BackendSettings, ManifestSettings
from .envelope import Envelope, ErrorCode, Gate, refusal, success
from .errors import Refusal
from .manifest import DigestedManifest, digest_manifest_file

log = logging.getLogger("ito_training_mcp")

NOTICE_DIGESTED = (
    "The manifest was read and digested locally; nothing was sent anywhere. Show the user data.review_text "
    "and the sha256. Only the user can confirm this digest, out of band at the Itô desk; then call "
    "submit_training with their confirmation_ref and a stable idempotency_key."
)


@dataclass
class Call:
    """Per-call bookkeeping: did any request leave this process for the backend?"""

    tool: str
    contacted: bool = False


Outcome = tuple[dict[str, Any], str]


class TrainingService:
    """The one core behind both doors. `env` defaults to the live process environment."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    # ------------------------------------------------------------------ runner

    async def _run(self, tool: str, body: Callable[[Call], Awaitable[Outcome]]) -> Envelope:
        call = Call(tool)
        try:
            data, notice = await body(call)
            return success(data, notice=notice, live_api_contacted=call.contacted)
        except Refusal as r:
            log.info("%s refused: %s at gate %s", tool, r.code.value, r.gate.value if r.gate else "-")
            return r.envelope(live_api_contacted=call.contacted)
        except Exception as exc:  # a defect: fail closed, log the type only (messages may carry data)
            log.error("%s failed with an internal error of type %s", tool, type(exc).__name__)
            return refusal(
                ErrorCode.INTERNAL_ERROR,
                "The server hit an internal error and stopped before doing anything further.",
                live_api_contacted=call.contacted, gate=None,
            )

    # ------------------------------------------------------------------ gates shared by operations

    def _gate_availability(self) -> BackendSettings:
        """Gate 1: a backend is configured, and its configuration is sound. Nothing is sent."""
        settings = BackendSettings.from_env(self.env)
        if settings is None:
            raise Refusal(
                ErrorCode.TRAINING_UNAVAILABLE,
                "Managed training is not available: no canonical Itô training backend is configured "
                "(ITO_API_URL is unset). No credential was read and no request was sent.",
                gate=Gate.AVAILABILITY,
                details={"reason": "backend_not_configured", "setting": "ITO_API_URL"},
            )
        return settings

    async def _gate_manifest(self, path: str) -> DigestedManifest:
        """Gate 2: secure read, strict JSON, secret scan, schema; the digest of the bytes read."""
        settings = ManifestSettings.from_env(self.env)
        return await anyio.to_thread.run_sync(digest_manifest_file, path, settings)

    def _gates_backend_pending(self, settings: BackendSettings) -> Refusal:
        """Gates 3-7 need the backend client; until it exists, fail closed without sending."""
        del settings
        return Refusal(
            ErrorCode.TRAINING_UNAVAILABLE,
            "A backend is configured, but this build has no client for the canonical training API yet, "
            "so nothing can be checked or submitted. No credential was read and no request was sent.",
            gate=Gate.AVAILABILITY,
            details={"reason": "backend_client_unavailable"},
        )

    # ------------------------------------------------------------------ the generic door

    async def invoke(self, tool: str, arguments: Mapping[str, Any]) -> Envelope:
        """Run a tool by name with raw arguments, as both doors receive them.

        Unknown arguments are refused at gate 0 rather than ignored: an agent that sends
        `force` or `api_key` must learn that no such thing exists.
        """
        from .tool_specs import CORE_TOOLS

        spec = next((s for s in CORE_TOOLS if s.name == tool), None)
        if spec is None:
            return refusal(
                ErrorCode.INVALID_INPUT, "Unknown tool.", live_api_contacted=False, gate=Gate.INPUT,
                details={"argument": "tool", "problem": "unknown"},
            )
        try:
            inputs.reject_unknown_arguments(arguments, spec.argument_names)
        except Refusal as r:
            return r.envelope(live_api_contacted=False)
        method: Callable[..., Awaitable[Envelope]] = getattr(self, tool)
        return await method(**{name: arguments.get(name) for name in spec.argument_names})

    # ------------------------------------------------------------------ operations

    async def check_training_availability(self, booking_id: object = None) -> Envelope:
        async def body(call: Call) -> Outcome:
            inputs.optional_identifier(booking_id, "booking_id")          # 0 input
            settings = self._gate_availability()                         # 1 availability
            raise self._gates_backend_pending(settings)                  # 3-4 capabilities, entitlement

        return await self._run("check_training_availability", body)

    async def digest_manifest(self, manifest_path: object) -> Envelope:
        async def body(call: Call) -> Outcome:
            path = inputs.manifest_path(manifest_path)                   # 0 input
            digested = await self._gate_manifest(path)                   # 2 manifest (local only)
            return digested.summary(), NOTICE_DIGESTED

        return await self._run("digest_manifest", body)

    async def submit_training(
        self,
        booking_id: object,
        manifest_path: object,
        confirmation_ref: object,
        idempotency_key: object,
    ) -> Envelope:
        async def body(call: Call) -> Outcome:
            inputs.identifier(booking_id, "booking_id")                  # 0 input
            path = inputs.manifest_path(manifest_path)
            inputs.idempotency_key(idempotency_key)
            inputs.confirmation_ref(confirmation_ref)
            settings = self._gate_availability()                         # 1 availability
            await self._gate_manifest(path)                              # 2 manifest
            raise self._gates_backend_pending(settings)                  # 3-7

        return await self._run("submit_training", body)
