"""The service's shared machinery: the call runner, the generic door and the gates every
operation shares (availability, manifest, capabilities, credential, identity, entitlement).

Operations live by concern in `submit.py`, `lifecycle.py` (and later modules) as mixins of
`ServiceBase`; `TrainingService` in `__init__` combines them. A gate refuses by raising `Refusal`;
`_run` turns that into the envelope, passes it through the egress (`egress/clean.py`: nothing leaves
unredacted or with a raw control or bidi character), and writes the audit line -- also when the
call is interrupted. Gates 0-2 are local: they run before any credential is read or socket opened.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio
import httpx
from pydantic import BaseModel

from ito_training_mcp.backend import credentials
from ito_training_mcp.backend.client import BackendClient, Exchange, run_path, segment
from ito_training_mcp.backend.models import (
    CONTRACT_VERSION,
    REQUIRED_OPERATIONS,
    Capabilities,
    Eligibility,
    Me,
    Run,
    RunList,
)
from ito_training_mcp.egress import redact
from ito_training_mcp.egress.audit import AuditLog
from ito_training_mcp.egress.clean import clean_envelope, clean_progress
from ito_training_mcp.egress.fit import fit
from ito_training_mcp.envelope import Envelope, ErrorCode, Gate, refusal, success
from ito_training_mcp.errors import Refusal
from ito_training_mcp.gates import inputs
from ito_training_mcp.gates.config import ENV_MANIFEST_ROOTS, BackendSettings, ManifestSettings
from ito_training_mcp.gates.manifest.digest import DigestedManifest, ManifestGate
from ito_training_mcp.service.call import Call, CallClient
from ito_training_mcp.service.flight import SingleFlight
from ito_training_mcp.service.open_plans import OpenPlans
from ito_training_mcp.service.reviews import Reviews, review_data
from ito_training_mcp.tools.specs import ALL_TOOLS

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
M = TypeVar("M", bound=BaseModel)

log = logging.getLogger("ito_training_mcp")

CLOCK_SKEW = timedelta(seconds=60)
RECOVERY_BACKOFF_S = (0.1, 0.25, 0.5, 1.0)
ELIGIBILITY_REASONS = frozenset({"expired", "revoked", "released", "incomplete", "mismatch"})
# How long a call waits for another call's capabilities or identity request beyond its deadline.
FLIGHT_MARGIN_S = 1.0


Outcome = tuple[dict[str, Any], str]


class ServiceBase:
    """What every operation shares. Not used on its own: see `TrainingService`.

    `env` defaults to the live process environment; `transport` lets tests route the backend
    client through a custom httpx transport; `clock` gives the current UTC time; `on_interrupted`
    receives the envelope of a call that was cancelled before it finished (the CLI prints it after
    Ctrl-C; over MCP a cancelled request gets no answer). `manifests_under_roots_only`: read manifests
    only under `ITO_TRAINING_MANIFEST_ROOTS`, and refuse while it is unset (the server over streamable
    HTTP, where any local process can call it, so no tool may answer about files elsewhere).
    """

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
        on_interrupted: Callable[[Envelope], None] | None = None,
        manifests_under_roots_only: bool = False,
    ) -> None:
        self._env = env
        self._roots_only = manifests_under_roots_only
        self._transport = transport
        self._clock = clock or (lambda: datetime.now(UTC))
        self._on_interrupted = on_interrupted
        # Positive answers only, each within its freshness window (ITO_TRAINING_CAPABILITIES_TTL_S).
        self._capabilities_cache: dict[str, tuple[float, Capabilities]] = {}
        self._identity_cache: dict[tuple[str, str], tuple[float, str]] = {}
        # Cold concurrency: one capabilities request per origin and one identity request per origin and
        # credential in flight at a time; concurrent calls share its answer (never beyond that flight).
        self._capabilities_flights: SingleFlight[Capabilities] = SingleFlight()
        self._identity_flights: SingleFlight[str] = SingleFlight()
        self._manifests = ManifestGate()
        self._reviews = Reviews()
        # Plans this process opened that still wait for a person (plan_training refuses to repeat one).
        self._open_plans = OpenPlans()
        self._configured_key()

    def _configured_key(self) -> tuple[str, ...]:
        """`ITO_API_KEY` as the environment already holds it in memory (no file is read, nothing is
        resolved): known to the egress from the start, so that a log line or an echo that holds it is
        redacted even before any call resolved the credential, and to gate 0, which refuses it as an
        argument."""
        key = credentials.api_key_in_memory(self.env)
        if key is None:
            return ()
        redact.register_secret(key)
        return (key,)

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    # ------------------------------------------------------------------ runner

    async def _run(self, tool: str, body: Callable[[Call], Awaitable[Outcome]]) -> Envelope:
        """Run one operation: refusals and defects become envelopes, every envelope passes the egress,
        and the audit trail gets one line -- also when the call is cancelled before it finishes."""

        call = Call(tool)
        try:
            audit = AuditLog.from_env(self.env)
            if audit is not None:
                await audit.check()
        except Refusal as r:
            return clean_envelope(r.envelope(live_api_contacted=False))
        guard = inputs.CredentialGuard((*redact.known_secrets(), *self._configured_key()))
        try:
            with inputs.guarding(guard):
                envelope = fit(clean_envelope(fit(await self._outcome(call, body))))
        except anyio.get_cancelled_exc_class():
            # Cancelled (notifications/cancelled, Ctrl-C): the line is written anyway, shielded and bounded.
            with anyio.CancelScope(shield=True):
                envelope = clean_envelope(_interrupted(call))
                await self._audit(audit, call, envelope, "interrupted")
                if self._on_interrupted is not None:
                    self._on_interrupted(envelope)
            raise
        with anyio.CancelScope(shield=True):  # a cancellation arriving now must not cost a finished call its line
            await self._audit(audit, call, envelope, "ok" if envelope.ok else "refused")
        return envelope

    @staticmethod
    async def _audit(audit: AuditLog | None, call: Call, envelope: Envelope, outcome: str) -> None:
        if audit is None:
            return
        unknown = call.mutation_sent and (
            outcome == "interrupted"
            or (envelope.error is not None and envelope.error.code is ErrorCode.SUBMISSION_OUTCOME_UNKNOWN)
        )
        try:
            await audit.record(call.tool, envelope, call.facts, outcome=outcome,
                               submission_outcome="unknown" if unknown else None)
        except Exception as exc:  # the call already happened: say so on stderr, never crash
            log.error("audit trail: could not record %s (%s)", call.tool, type(exc).__name__)

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

        spec = next((s for s in ALL_TOOLS if s.name == tool), None)
        if spec is None:  # fixed text only: the name asked for is never echoed
            return refusal(
                ErrorCode.INVALID_INPUT, "Unknown tool.", live_api_contacted=False, gate=Gate.INPUT,
                details={"argument": "tool", "problem": "unknown"},
            )
        if set(arguments) - spec.argument_names:

            async def refuse(call: Call) -> Outcome:
                # Inside the call, so that an argument *name* holding the configured credential is masked too.
                inputs.reject_unknown_arguments(arguments, spec.argument_names)
                raise AssertionError("unreachable: unknown arguments were found above")

            return await self._run(tool, refuse)
        method: Callable[..., Awaitable[Envelope]] = getattr(self, tool)
        kwargs: dict[str, Any] = {name: arguments.get(name) for name in spec.argument_names}
        if spec.reports_progress:
            kwargs["progress"] = None if progress is None else clean_progress(progress)
        return await method(**kwargs)  # `_run` passed it through the egress

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

    async def _gate_manifest(self, path: str, *, reviewed: bool = False) -> tuple[DigestedManifest, dict[str, Any]]:
        """Gate 2: secure read, strict JSON, secret scan, character rule, schema; the digest of the bytes read,
        and (`reviewed`) the review a result carries. Off the event loop, a bounded number at a time
        (`ManifestGate`). The manifest is kept for its whole review (`full_review`). Over streamable HTTP
        (`manifests_under_roots_only`) a manifest is read only under the configured roots."""
        settings = ManifestSettings.from_env(self.env)
        if self._roots_only and settings.roots is None:
            raise Refusal(
                ErrorCode.CONFIG_INVALID,
                f"This server is reached over streamable HTTP, where it reads manifests only under "
                f"{ENV_MANIFEST_ROOTS}, and that setting is unset. Nothing was read or sent.",
                gate=Gate.MANIFEST, details={"setting": ENV_MANIFEST_ROOTS, "problem": "unset"},
                next_step=(f"Tell the user this server (streamable HTTP) reads manifests only under "
                           f"{ENV_MANIFEST_ROOTS}, which is unset: only they can set it, to the directories that "
                           "hold their manifests, and restart the server. Nothing was read or sent."),
            )
        digested, review = await self._manifests.digest(path, settings, review_data if reviewed else None)
        self._reviews.keep(digested)
        return digested, review or {}

    async def full_review(self, sha256: str) -> DigestedManifest | None:
        """A manifest this process digested lately, by its SHA-256 (for the MCP resource and the CLI),
        checked again off the event loop in its turn (`ManifestGate`)."""
        return await self._manifests.run(lambda: self._reviews.get(sha256))

    async def _gate_capabilities(
        self, api: BackendClient, settings: BackendSettings, operations: tuple[str, ...] = ()
    ) -> Capabilities:
        """Gate 3: the backend offers training and every lifecycle operation (and `operations`, which
        the person's-step tools add). No credential yet.

        Cached per origin within the freshness window; when cold, one request per origin is in
        flight and concurrent calls share its answer."""
        origin = settings.endpoint.base_url
        cached = self._capabilities_cache.get(origin)
        if cached is not None and time.monotonic() < cached[0]:
            caps = cached[1]
        else:

            async def fetch() -> Capabilities:
                caps = await self._fetch_capabilities(api)
                if settings.capabilities_ttl_s > 0:
                    self._capabilities_cache[origin] = (time.monotonic() + settings.capabilities_ttl_s, caps)
                return caps

            wait_s = _flight_wait(api, settings)
            caps = await self._capabilities_flights.run(
                origin, fetch, wait_s=wait_s,
                on_timeout=lambda: _flight_timeout("capabilities", Gate.CAPABILITIES, settings, wait_s),
            )
        _require_operations(caps, operations)  # the cache holds only answers with the lifecycle's seven
        return caps

    @staticmethod
    async def _fetch_capabilities(api: BackendClient) -> Capabilities:

        _, caps = await api.request("GET", "/v1/capabilities", Capabilities, gate=Gate.CAPABILITIES, auth=False)
        if caps.contract_version != CONTRACT_VERSION:
            raise Refusal(
                ErrorCode.TRAINING_UNAVAILABLE,
                f"The backend speaks a contract version this client does not support (expected {CONTRACT_VERSION}).",
                gate=Gate.CAPABILITIES, details={"reason": "contract_version_unsupported"},
            )
        if not caps.training.available:
            raise Refusal(
                ErrorCode.TRAINING_UNAVAILABLE,
                "The canonical backend reports that managed training is not available.",
                gate=Gate.CAPABILITIES, details={"reason": "backend_reports_unavailable"},
            )
        _require_operations(caps, REQUIRED_OPERATIONS)
        return caps

    def _authenticate(self, api: BackendClient) -> None:
        """Only now, after gate 3, is the credential resolved. Before anything that carries an
        argument is sent, every argument of the call is checked again against it: a credential from
        `ITO_TOKEN_FILE` could not be compared at gate 0 without reading the file there."""
        credential = credentials.resolve_credential(self.env)
        guard = inputs.current_guard()
        if guard is not None:
            guard.recheck(credential.appears_in)
        api.authenticate(credential)

    async def _account_id(self, api: BackendClient, settings: BackendSettings, gate: Gate) -> str:
        """`GET /v1/me`, cached per origin and credential within the freshness window; when cold, one
        request per origin and credential is in flight and concurrent calls share its answer."""

        cache_key = (settings.endpoint.base_url, api.credential_fingerprint())
        cached = self._identity_cache.get(cache_key)
        if cached is not None and time.monotonic() < cached[0]:
            return cached[1]

        async def fetch() -> str:
            _, me = await api.request("GET", "/v1/me", Me, gate=gate)
            if settings.capabilities_ttl_s > 0:
                self._identity_cache[cache_key] = (time.monotonic() + settings.capabilities_ttl_s, me.account_id)
            return me.account_id

        wait_s = _flight_wait(api, settings)
        return await self._identity_flights.run(
            cache_key, fetch, wait_s=wait_s,
            on_timeout=lambda: _flight_timeout("identity", gate, settings, wait_s),
        )

    async def _gate_entitlement(
        self, api: BackendClient, settings: BackendSettings, booking_id: str
    ) -> tuple[str, Eligibility]:
        """Gate 4: fresh eligibility of this booking, bound to the authenticated account."""

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

        call.exchange = Exchange()
        async with CallClient(settings, call, transport=self._transport) as api:
            yield api

    # ------------------------------------------------------------------ lifecycle (read-only)

    @asynccontextmanager
    async def _authenticated(
        self, call: Call, operations: tuple[str, ...] = (), *, waits: bool = False
    ) -> AsyncIterator[tuple[BackendClient, BackendSettings]]:
        """Gates 1 and 3 (with any `operations` beyond the lifecycle's), then the credential: what every
        lifecycle operation needs first.

        A call that `waits` (wait_seconds > 0) is bounded as a whole by the server's wait cap
        (`ITO_TRAINING_MAX_WAIT_S`): every backend read it makes, from gate 3 on, ends within the cap
        counted from here, so the call answers before a client's default request timeout (60 s in
        the TypeScript SDK) however slow the backend is."""
        settings = self._gate_availability()                             # 1 availability
        async with self._backend(settings, call) as api:
            if waits and settings.max_wait_s > 0:
                api.limit_to(settings.max_wait_s)
            await self._gate_capabilities(api, settings, operations)     # 3 capabilities
            self._authenticate(api)
            yield api, settings

    async def _get_run(self, api: BackendClient, run_id: str) -> Run:

        _, run = await api.request("GET", run_path(run_id), Run, gate=None)
        if run.run_id != run_id:
            raise Refusal(ErrorCode.BACKEND_INVALID_RESPONSE, "The backend answered with another run.", gate=None)
        return run

    async def _read_run(self, call: Call, run_id: object, suffix: str, model: type[M]) -> tuple[str, M]:
        """A read-only lifecycle GET: gate 0 on the run id, then gates 1 and 3 and the credential."""

        run_ref = inputs.identifier(run_id, "run_id")                        # 0 input
        call.note(run_id=run_ref)
        async with self._authenticated(call) as (api, _):
            _, found = await api.request("GET", run_path(run_ref, suffix), model, gate=None)
        return run_ref, found

    @staticmethod
    async def _recovery_pause(round_: int) -> None:
        """The bounded backoff before recovery round `round_` (1-based) of a mutation."""
        await anyio.sleep(RECOVERY_BACKOFF_S[min(round_ - 1, len(RECOVERY_BACKOFF_S) - 1)])


def _require_operations(caps: Capabilities, operations: tuple[str, ...]) -> None:
    """LIFECYCLE_INCOMPLETE naming every operation in `operations` that the backend does not offer."""
    missing = [op for op in operations if op not in caps.training.operations]
    if missing:
        raise Refusal(
            ErrorCode.LIFECYCLE_INCOMPLETE,
            "The backend does not offer every operation this needs: " + ", ".join(missing) + ".",
            gate=Gate.CAPABILITIES, details={"missing_operations": missing},
        )


def _flight_wait(api: BackendClient, settings: BackendSettings) -> float:
    """How long a call waits for another call's shared request: its deadline and a margin, and never
    past this call's own time budget."""
    left = api.remaining_s()
    full = settings.timeout_s + FLIGHT_MARGIN_S
    return full if left is None else min(full, left)


def _flight_timeout(what: str, gate: Gate, settings: BackendSettings, waited_s: float | None = None) -> Refusal:
    """`waited_s`: set when this call's own time budget (ITO_TRAINING_MAX_WAIT_S) ended the wait first."""
    if waited_s is not None and waited_s < settings.timeout_s:
        return Refusal(
            ErrorCode.BACKEND_TIMEOUT,
            f"This call's time budget (ITO_TRAINING_MAX_WAIT_S) ran out while it waited {waited_s:g} s for another "
            f"call's {what} request to the backend; it sent nothing of its own.",
            gate=gate, retryable=True,
            details={"deadline_s": round(waited_s, 3), "waited_for": what, "budget_spent": True},
            next_step="Make the same call again (with a smaller wait_seconds if this repeats).",
        )
    return Refusal(
        ErrorCode.BACKEND_TIMEOUT,
        f"Another call's {what} request to the backend did not finish within {settings.timeout_s:g} s; this call "
        "waited for it and sent nothing of its own.",
        gate=gate, details={"deadline_s": settings.timeout_s, "waited_for": what},
    )


def _interrupted(call: Call) -> Envelope:
    """The answer of a call cancelled before it finished. Over MCP nobody reads it (a cancelled
    request gets no response) but the audit line records it; the CLI prints it after Ctrl-C."""
    key = call.facts.get("idempotency_key")
    if call.mutation_sent:
        action = call.facts.get("action")
        if action is None:
            next_step = (f"Call training_status with idempotency_key {key} to learn whether a run exists. Never "
                         "submit with a new key; a retry with the same key can never create a second run.")
        else:
            next_step = (f"Call training_status with run_id {call.facts.get('run_id')} to see the run's state; if "
                         f"the {action} has not happened, retry {action}_training with the same idempotency_key "
                         f"({key}) and confirmation_ref. Never use a new key.")
        return refusal(
            ErrorCode.SUBMISSION_OUTCOME_UNKNOWN,
            "The call was interrupted after its mutating request may have reached the backend; whether it took "
            "effect is unknown.",
            live_api_contacted=call.contacted, gate=Gate.CREATE,
            details={"interrupted": True, "submission_outcome": "unknown", "idempotency_key": key},
            next_step=next_step,
        )
    return refusal(
        ErrorCode.BACKEND_TIMEOUT,
        # The contract's code for "ended without the backend's answer"; the words say what really happened.
        "The call was interrupted (cancelled by the client, or stopped by the user) before it finished; the "
        "backend did not time out. Nothing was created, cancelled or cleaned up.",
        live_api_contacted=call.contacted, gate=None, details={"interrupted": True},
        next_step="Tell the user the call was interrupted; nothing changed. Make the same call again when asked to.",
    )
