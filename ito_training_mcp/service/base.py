"""The service's shared machinery: the call runner, the generic door and the gates every
operation shares (availability, manifest, capabilities, credential, identity, entitlement).

Operations live by concern in `submit.py`, `lifecycle.py` (and later modules) as mixins of
`ServiceBase`; `TrainingService` in `__init__` combines them. A gate refuses by raising `Refusal`;
`_run` turns that into the envelope and records whether any request left this process. Gates 0-2
are local: they run before any credential is read or socket opened.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from pydantic import BaseModel

from .. import credentials, inputs
from ..config import BackendSettings, ManifestSettings
from ..envelope import Envelope, ErrorCode, Gate, refusal, success
from ..errors import Refusal

if TYPE_CHECKING:
    import httpx

    from ..backend_client import BackendClient, Exchange
    from ..backend_models import Capabilities, Eligibility, Run
    from ..manifest import DigestedManifest

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
M = TypeVar("M", bound=BaseModel)

log = logging.getLogger("ito_training_mcp")

CLOCK_SKEW = timedelta(seconds=60)
RECOVERY_BACKOFF_S = (0.1, 0.25, 0.5, 1.0)
ELIGIBILITY_REASONS = frozenset({"expired", "revoked", "released", "incomplete", "mismatch"})



@dataclass
class Call:
    """Per-call bookkeeping: did any request leave this process for the backend, and which validated
    identifiers (never secrets, never content) describe the call for the audit trail."""

    tool: str
    exchange: Exchange | None = field(default=None)
    facts: dict[str, str] = field(default_factory=dict)

    def note(self, **facts: str | None) -> None:
        self.facts.update({name: value for name, value in facts.items() if value is not None})

    @property
    def contacted(self) -> bool:
        return self.exchange is not None and self.exchange.contacted


Outcome = tuple[dict[str, Any], str]


class ServiceBase:
    """What every operation shares. Not used on its own: see `TrainingService`.

    `env` defaults to the live process environment; `transport` lets tests route the backend
    client through a custom httpx transport; `clock` gives the current UTC time.
    """

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._env = env
        self._transport = transport
        self._clock = clock or (lambda: datetime.now(UTC))
        # Positive answers only, each within its freshness window (ITO_TRAINING_CAPABILITIES_TTL_S).
        self._capabilities_cache: dict[str, tuple[float, Capabilities]] = {}
        self._identity_cache: dict[tuple[str, str], tuple[float, str]] = {}

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    # ------------------------------------------------------------------ runner

    async def _run(self, tool: str, body: Callable[[Call], Awaitable[Outcome]]) -> Envelope:
        """Run one operation: refusals and defects become envelopes; the audit trail gets one line."""
        from ..audit import AuditLog

        call = Call(tool)
        try:
            audit = AuditLog.from_env(self.env)
            if audit is not None:
                audit.check()
        except Refusal as r:
            return r.envelope(live_api_contacted=False)
        envelope = await self._envelope(call, body)
        if audit is not None:
            try:
                audit.record(tool, envelope, call.facts)
            except Exception as exc:  # the call already happened: say so on stderr, never crash
                log.error("audit trail: could not record %s (%s)", tool, type(exc).__name__)
        return envelope

    async def _envelope(self, call: Call, body: Callable[[Call], Awaitable[Outcome]]) -> Envelope:
        envelope = await self._outcome(call, body)
        return _egress(envelope)

    async def _outcome(self, call: Call, body: Callable[[Call], Awaitable[Outcome]]) -> Envelope:
        try:
            data, notice = await body(call)
            return success(data, notice=notice, live_api_contacted=call.contacted)
        except Refusal as r:
            log.info("%s refused: %s at gate %s", call.tool, r.code.value, r.gate.value if r.gate else "-")
            return r.envelope(live_api_contacted=call.contacted)
        except Exception as exc:  # a defect: fail closed, log the type only (messages may carry data)
            log.error("%s failed with an internal error of type %s", call.tool, type(exc).__name__)
            return refusal(
                ErrorCode.INTERNAL_ERROR,
                "The server hit an internal error and stopped before doing anything further.",
                live_api_contacted=call.contacted, gate=None,
            )

    # ------------------------------------------------------------------ the generic door

    async def invoke(
        self, tool: str, arguments: Mapping[str, Any], *, progress: Progress | None = None
    ) -> Envelope:
        """Run a tool by name with raw arguments, as both doors receive them.

        Unknown arguments are refused at gate 0 rather than ignored: an agent that sends
        `force` or `api_key` must learn that no such thing exists.
        """
        from ..tool_specs import ALL_TOOLS

        spec = next((s for s in ALL_TOOLS if s.name == tool), None)
        if spec is None:
            return refusal(
                ErrorCode.INVALID_INPUT, "Unknown tool.", live_api_contacted=False, gate=Gate.INPUT,
                details={"argument": "tool", "problem": "unknown"},
            )
        try:
            inputs.reject_unknown_arguments(arguments, spec.argument_names)
        except Refusal as exc:
            unknown = exc

            async def refuse(call: Call) -> Outcome:
                raise unknown

            return await self._run(tool, refuse)
        method: Callable[..., Awaitable[Envelope]] = getattr(self, tool)
        kwargs: dict[str, Any] = {name: arguments.get(name) for name in spec.argument_names}
        if spec.reports_progress:
            kwargs["progress"] = progress
        return await method(**kwargs)

    # ------------------------------------------------------------------ gates, in contract order

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
        from ..manifest import digest_manifest_file

        settings = ManifestSettings.from_env(self.env)
        return await anyio.to_thread.run_sync(digest_manifest_file, path, settings)

    async def _gate_capabilities(
        self, api: BackendClient, settings: BackendSettings, operations: tuple[str, ...] = ()
    ) -> Capabilities:
        """Gate 3: the backend offers training and every lifecycle operation (and `operations`, which
        the person's-step tools add). No credential yet."""
        from ..backend_models import CONTRACT_VERSION, REQUIRED_OPERATIONS, Capabilities

        origin = settings.endpoint.base_url
        cached = self._capabilities_cache.get(origin)
        fetched = cached is None or time.monotonic() >= cached[0]
        if not fetched and cached is not None:
            caps = cached[1]
        else:
            _, caps = await api.request("GET", "/v1/capabilities", Capabilities, gate=Gate.CAPABILITIES, auth=False)
            if caps.contract_version != CONTRACT_VERSION:
                raise Refusal(
                    ErrorCode.TRAINING_UNAVAILABLE,
                    f"The backend speaks a contract version this client does not support (expected "
                    f"{CONTRACT_VERSION}).",
                    gate=Gate.CAPABILITIES, details={"reason": "contract_version_unsupported"},
                )
            if not caps.training.available:
                raise Refusal(
                    ErrorCode.TRAINING_UNAVAILABLE,
                    "The canonical backend reports that managed training is not available.",
                    gate=Gate.CAPABILITIES, details={"reason": "backend_reports_unavailable"},
                )
        missing = [op for op in (*REQUIRED_OPERATIONS, *operations) if op not in caps.training.operations]
        if missing:
            raise Refusal(
                ErrorCode.LIFECYCLE_INCOMPLETE,
                "The backend does not offer every operation this needs: " + ", ".join(missing) + ".",
                gate=Gate.CAPABILITIES, details={"missing_operations": missing},
            )
        if fetched and settings.capabilities_ttl_s > 0 and not missing:
            self._capabilities_cache[origin] = (time.monotonic() + settings.capabilities_ttl_s, caps)
        return caps

    def _authenticate(self, api: BackendClient) -> None:
        """Only now, after gate 3, is the credential resolved."""
        api.authenticate(credentials.resolve_credential(self.env))

    async def _account_id(self, api: BackendClient, settings: BackendSettings, gate: Gate) -> str:
        """`GET /v1/me`, cached per origin and credential within the freshness window."""
        from ..backend_models import Me

        cache_key = (settings.endpoint.base_url, api.credential_fingerprint())
        cached = self._identity_cache.get(cache_key)
        if cached is not None and time.monotonic() < cached[0]:
            return cached[1]
        _, me = await api.request("GET", "/v1/me", Me, gate=gate)
        if settings.capabilities_ttl_s > 0:
            self._identity_cache[cache_key] = (time.monotonic() + settings.capabilities_ttl_s, me.account_id)
        return me.account_id

    async def _gate_entitlement(
        self, api: BackendClient, settings: BackendSettings, booking_id: str
    ) -> tuple[str, Eligibility]:
        """Gate 4: fresh eligibility of this booking, bound to the authenticated account."""
        from ..backend_client import segment
        from ..backend_models import Eligibility

        account_id = await self._account_id(api, settings, Gate.ENTITLEMENT)
        _, el = await api.request(
            "GET", f"/v1/bookings/{segment(booking_id)}/training-eligibility", Eligibility, gate=Gate.ENTITLEMENT
        )

        def not_eligible(reason: str, message: str) -> Refusal:
            return Refusal(ErrorCode.BOOKING_NOT_ELIGIBLE, message, gate=Gate.ENTITLEMENT,
                           details={"reason": reason, "booking_id": booking_id})

        if el.booking_id != booking_id or el.account_id != account_id:
            raise not_eligible("mismatch", "The eligibility answer is not bound to this booking and account.")
        if not el.eligible:
            reason = el.reason if el.reason in ELIGIBILITY_REASONS else "not_eligible"
            raise not_eligible(reason, f"The backend says this booking is not eligible for training ({reason}).")
        now = self._clock()
        age = now - el.checked_at
        if age > timedelta(seconds=settings.entitlement_max_age_s) or age < -CLOCK_SKEW:
            raise Refusal(
                ErrorCode.ENTITLEMENT_STALE,
                f"The eligibility answer is not fresh (checked {int(age.total_seconds())} s ago; at most "
                f"{settings.entitlement_max_age_s:g} s is accepted).",
                gate=Gate.ENTITLEMENT, details={"age_s": int(age.total_seconds())},
            )
        if el.term_ends_at <= now:
            raise not_eligible("expired", "The booking's term is over.")
        return account_id, el

    async def _lookup_by_key(self, api: BackendClient, key: str, gate: Gate) -> Run | None:
        from ..backend_models import RunList

        _, found = await api.request("GET", "/v1/training-runs", RunList, gate=gate, params={"idempotency_key": key})
        if not found.runs:
            return None
        run = found.runs[0]
        if run.idempotency_key != key:
            raise Refusal(ErrorCode.BACKEND_INVALID_RESPONSE, "The backend returned a run for another key.",
                          gate=gate)
        return run


    @asynccontextmanager
    async def _backend(self, settings: BackendSettings, call: Call) -> AsyncIterator[BackendClient]:
        from ..backend_client import BackendClient, Exchange

        call.exchange = Exchange()
        async with BackendClient(settings, call.exchange, transport=self._transport) as api:
            yield api

    # ------------------------------------------------------------------ lifecycle (read-only)

    @asynccontextmanager
    async def _authenticated(
        self, call: Call, operations: tuple[str, ...] = ()
    ) -> AsyncIterator[tuple[BackendClient, BackendSettings]]:
        """Gates 1 and 3 (with any `operations` beyond the lifecycle's), then the credential: what every
        lifecycle operation needs first."""
        settings = self._gate_availability()                             # 1 availability
        async with self._backend(settings, call) as api:
            await self._gate_capabilities(api, settings, operations)     # 3 capabilities
            self._authenticate(api)
            yield api, settings

    async def _get_run(self, api: BackendClient, run_id: str) -> Run:
        from ..backend_client import run_path
        from ..backend_models import Run

        _, run = await api.request("GET", run_path(run_id), Run, gate=None)
        if run.run_id != run_id:
            raise Refusal(ErrorCode.BACKEND_INVALID_RESPONSE, "The backend answered with another run.", gate=None)
        return run

    async def _read_run(self, call: Call, run_id: object, suffix: str, model: type[M]) -> tuple[str, M]:
        """A read-only lifecycle GET: gate 0 on the run id, then gates 1 and 3 and the credential."""
        from ..backend_client import run_path

        run_ref = inputs.identifier(run_id, "run_id")                        # 0 input
        call.note(run_id=run_ref)
        async with self._authenticated(call) as (api, _):
            _, found = await api.request("GET", run_path(run_ref, suffix), model, gate=None)
        return run_ref, found

    @staticmethod
    async def _recovery_pause(round_: int) -> None:
        """The bounded backoff before recovery round `round_` (1-based) of a mutation."""
        await anyio.sleep(RECOVERY_BACKOFF_S[min(round_ - 1, len(RECOVERY_BACKOFF_S) - 1)])


def _egress(envelope: Envelope) -> Envelope:
    """Every envelope leaves through the redactor: the configured credential, token shapes a backend
    echoed, and unencodable text never reach an agent, whatever field they hid in. Envelopes built
    only from local, validated input skip the work."""
    import json

    from ..redact import has_registered_secrets, needs_redaction, scrub

    if not envelope.live_api_contacted and not has_registered_secrets():
        # Nothing came from a backend and no credential was ever loaded: everything in this envelope
        # was produced here from validated input (the manifest passed the secret scan).
        return envelope
    wire = envelope.to_dict()
    text = json.dumps(wire, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        if not needs_redaction(text):  # the common case: one serialisation and a few substring tests
            return envelope
    return Envelope.model_validate(scrub(wire))

def _safe_text(text: str) -> str:
    """Backend text is relayed as is, unless it looks like it holds a credential."""
    from ..secret_scan import value_kinds

    kinds = value_kinds(text)
    return f"<redacted: looked like a credential ({', '.join(kinds)})>" if kinds else text


