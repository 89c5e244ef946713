"""The core: every operation of contract §2 as a plain async method returning an `Envelope`.

The MCP tools and the CLI are thin adapters over this class; it knows nothing of either.
Each operation reads top to bottom in gate order (contract §3). A gate refuses by raising
`Refusal`; `_run` turns that into the envelope and records whether any request left this
process. Gates 0-2 are local: they run before any credential is read or socket opened.
"""

from __future__ import annotations

import base64
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

from . import credentials, inputs
from .config import BackendSettings, ManifestSettings
from .envelope import Envelope, ErrorCode, Gate, refusal, success
from .errors import InputRefusal, Refusal

if TYPE_CHECKING:
    import httpx

    from .backend_client import BackendClient, Exchange
    from .backend_models import Capabilities, Eligibility, Run
    from .manifest import DigestedManifest

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
M = TypeVar("M", bound=BaseModel)

log = logging.getLogger("ito_training_mcp")

CLOCK_SKEW = timedelta(seconds=60)
RECOVERY_BACKOFF_S = (0.1, 0.25, 0.5, 1.0)
ELIGIBILITY_REASONS = frozenset({"expired", "revoked", "released", "incomplete", "mismatch"})

NOTICE_DIGESTED = (
    "The manifest was read and digested locally; nothing was sent anywhere. Show the user data.review_text "
    "and the sha256. Only the user can confirm this digest, out of band at the Itô desk; then call "
    "submit_training with their confirmation_ref and a stable idempotency_key."
)
NOTICE_AVAILABLE = (
    "Training is available on the configured backend. Next: write or locate the manifest and call "
    "digest_manifest; nothing has been created."
)
NOTICE_ELIGIBLE = (
    "Training is available and this booking is eligible right now (data.booking). Next: call digest_manifest "
    "on the reviewed manifest; nothing has been created."
)
NOTICE_CREATED = (
    "One training run was created (data.run_id). Do not submit again: a retry with the same idempotency_key "
    "returns this same run. Next: follow it with training_status."
)
NOTICE_RECOVERED = (
    "The first answer was lost or unclear, so the run was looked up by its idempotency key and found "
    "(data.run_id); no second run was created. Do not submit again. Next: follow it with training_status."
)
NOTICE_NO_RUN = (
    "No run exists for this idempotency key. If a submit with this key is still in flight it may appear "
    "shortly; otherwise no run was created. A retry of submit_training with the SAME key can never create "
    "a second run; never use a new key for the same intent."
)
NOTICE_STATUS = "The run is in progress. Call training_status again (optionally with wait_seconds) to follow it."
NOTICE_STILL_RUNNING = (
    "The wait ended before the run finished; it is still in progress. Call training_status again to keep "
    "following it."
)
NOTICE_TERMINAL = "The run has finished (data.state). Report the outcome and each stage's gate to the user."
NOTICE_GATE_FAILED = (
    "A stage's eval gate failed (data.failed_gates) and the run stopped in gate_failed. Report it to the user "
    "exactly as shown. Nothing can override a failed gate; do not resubmit to get around it."
)
NOTICE_LOGS = "More log lines follow: call training_logs again with cursor = data.next_cursor."
NOTICE_LOGS_END = "These are the latest log lines; call again later with the same cursor for new ones."
NOTICE_READ_ONLY = "Read-only answer from the backend; nothing was changed."
NOTICE_CANCELLED = (
    "The run was cancelled (or is cancelling) as the user confirmed. Nothing else was changed; the booking is "
    "untouched. Cleanup is a separate action with its own confirmation."
)
NOTICE_CLEANED = (
    "The run's artefacts listed in data.cleaned were cleaned up as the user confirmed. The booking was not "
    "released or modified."
)
NOTICE_EXISTING = (
    "A run already existed for this idempotency key and was returned unchanged (created: false); nothing new "
    "was created and no confirmation was used. Next: follow it with training_status."
)


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


class TrainingService:
    """The one core behind both doors.

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
        from .audit import AuditLog

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
        from .tool_specs import ALL_TOOLS

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
        from .manifest import digest_manifest_file

        settings = ManifestSettings.from_env(self.env)
        return await anyio.to_thread.run_sync(digest_manifest_file, path, settings)

    async def _gate_capabilities(self, api: BackendClient, settings: BackendSettings) -> Capabilities:
        """Gate 3: the backend offers training and every lifecycle operation. No credential yet."""
        from .backend_models import CONTRACT_VERSION, REQUIRED_OPERATIONS, Capabilities

        origin = settings.endpoint.base_url
        cached = self._capabilities_cache.get(origin)
        if cached is not None and time.monotonic() < cached[0]:
            return cached[1]
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
        missing = [op for op in REQUIRED_OPERATIONS if op not in caps.training.operations]
        if missing:
            raise Refusal(
                ErrorCode.LIFECYCLE_INCOMPLETE,
                "The backend does not offer every lifecycle operation a training run needs: "
                + ", ".join(missing) + ".",
                gate=Gate.CAPABILITIES, details={"missing_operations": missing},
            )
        if settings.capabilities_ttl_s > 0:
            self._capabilities_cache[origin] = (time.monotonic() + settings.capabilities_ttl_s, caps)
        return caps

    def _authenticate(self, api: BackendClient) -> None:
        """Only now, after gate 3, is the credential resolved."""
        api.authenticate(credentials.resolve_credential(self.env))

    async def _account_id(self, api: BackendClient, settings: BackendSettings, gate: Gate) -> str:
        """`GET /v1/me`, cached per origin and credential within the freshness window."""
        from .backend_models import Me

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
        from .backend_client import segment
        from .backend_models import Eligibility

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
        from .backend_models import RunList

        _, found = await api.request("GET", "/v1/training-runs", RunList, gate=gate, params={"idempotency_key": key})
        if not found.runs:
            return None
        run = found.runs[0]
        if run.idempotency_key != key:
            raise Refusal(ErrorCode.BACKEND_INVALID_RESPONSE, "The backend returned a run for another key.",
                          gate=gate)
        return run

    async def _gate_idempotency(self, api: BackendClient, key: str, booking_id: str, sha256: str) -> Run | None:
        """Gate 5: an existing run for this key is returned as it is; another request's key is refused."""
        run = await self._lookup_by_key(api, key, Gate.IDEMPOTENCY)
        if run is not None and (run.manifest_sha256 != sha256 or run.booking_id != booking_id):
            raise Refusal(
                ErrorCode.IDEMPOTENCY_CONFLICT,
                "This idempotency key already belongs to a run with a different manifest or booking.",
                gate=Gate.IDEMPOTENCY, details={"run_id": run.run_id, "idempotency_key": key},
            )
        return run

    async def _gate_confirmation(
        self, api: BackendClient, ref: str, account_id: str, booking_id: str, digested: DigestedManifest
    ) -> None:
        """Gate 6: the user's confirmation is bound to this account, action, booking, digest and cost."""
        from .backend_client import segment
        from .backend_models import Confirmation

        _, c = await api.request("GET", f"/v1/confirmations/{segment(ref)}", Confirmation, gate=Gate.CONFIRMATION)

        def refuse(code: ErrorCode, message: str, reason: str) -> Refusal:
            return Refusal(code, message, gate=Gate.CONFIRMATION, details={"reason": reason, "confirmation_ref": ref})

        if c.ref != ref or c.account_id != account_id:
            raise refuse(ErrorCode.CONFIRMATION_MISMATCH, "The confirmation belongs to another account.", "account")
        if c.action != "training.create":
            raise refuse(ErrorCode.CONFIRMATION_MISMATCH, "The confirmation is for another action.", "action")
        if c.booking_id != booking_id:
            raise refuse(ErrorCode.CONFIRMATION_MISMATCH, "The confirmation is for another booking.", "booking")
        if c.consumed:
            raise refuse(ErrorCode.CONFIRMATION_CONSUMED, "The confirmation was already used.", "consumed")
        if c.expires_at <= self._clock():
            raise refuse(ErrorCode.CONFIRMATION_EXPIRED, "The confirmation has expired.", "expired")
        if c.manifest_sha256 != digested.sha256:
            raise refuse(ErrorCode.DIGEST_MISMATCH,
                         "The manifest's digest differs from the digest the user confirmed.", "digest")
        cost = digested.manifest.budget.max_incremental_cost_usd
        if cost > c.max_cost_usd:
            raise refuse(
                ErrorCode.CONFIRMATION_MISMATCH,
                f"The manifest may add up to ${cost:.2f}, more than the ${c.max_cost_usd:.2f} the user confirmed.",
                "cost_above_confirmed",
            )

    async def _gate_create(
        self,
        api: BackendClient,
        settings: BackendSettings,
        *,
        booking_id: str,
        ref: str,
        key: str,
        digested: DigestedManifest,
    ) -> tuple[Run, bool, bool]:
        """Gate 7: create, recovering by key after anything ambiguous. Returns (run, created, recovered);
        `created` is true only when this call received the backend's 201.

        The bytes sent are the bytes hashed at gate 2. After an answer that may hide a created run
        (timeout after sending, broken connection, 5xx, in-flight), the key is looked up before any
        retry, and a retry resends the same key and bytes; after a bounded number of rounds the
        outcome is reported as unknown. At most one run per key, whatever the network does.
        """
        from .backend_client import BackendRefusal
        from .backend_models import Run

        body = {
            "booking_id": booking_id,
            "confirmation_ref": ref,
            "manifest_sha256": digested.sha256,
            "manifest_b64": base64.b64encode(digested.file.content).decode("ascii"),
        }
        last: BackendRefusal | None = None
        for round_ in range(settings.recovery_attempts + 1):
            if round_ > 0:
                await anyio.sleep(RECOVERY_BACKOFF_S[min(round_ - 1, len(RECOVERY_BACKOFF_S) - 1)])
            try:
                status, run = await api.request("POST", "/v1/training-runs", Run, gate=Gate.CREATE,
                                                 json_body=body, idempotency_key=key, mutation=True)
            except BackendRefusal as r:
                if not r.ambiguous:
                    raise
                last = r
            else:
                return self._own_run(run, booking_id, key, digested.sha256), status == 201, round_ > 0
            log.info("submit outcome ambiguous (%s); looking the key up before any retry", last.code.value)
            try:
                found = await self._lookup_by_key(api, key, Gate.CREATE)
            except BackendRefusal as r:
                if r.code in (ErrorCode.CREDENTIAL_REVOKED, ErrorCode.AUTH_REJECTED, ErrorCode.AUTH_FORBIDDEN):
                    raise BackendRefusal(
                        r.code, r.message + " The submission's outcome is unknown: once a valid credential is "
                        "configured, call training_status with the same idempotency_key.",
                        gate=r.gate, details={**(r.details or {}), "submission_outcome": "unknown",
                                              "idempotency_key": key},
                    ) from None
                continue
            if found is not None:
                return self._own_run(found, booking_id, key, digested.sha256), False, True
        raise Refusal(
            ErrorCode.SUBMISSION_OUTCOME_UNKNOWN,
            "The backend did not give a trustworthy answer and the run could not be found by its key after "
            f"{settings.recovery_attempts} lookups; a run may or may not exist.",
            gate=Gate.CREATE,
            details={"idempotency_key": key, "last_code": last.code.value if last else None},
        )

    @staticmethod
    def _own_run(run: Run, booking_id: str, key: str, sha256: str) -> Run:
        if (run.booking_id, run.idempotency_key, run.manifest_sha256) != (booking_id, key, sha256):
            raise Refusal(ErrorCode.BACKEND_INVALID_RESPONSE,
                          "The backend answered with a run that does not match this submission.", gate=Gate.CREATE)
        return run

    @asynccontextmanager
    async def _backend(self, settings: BackendSettings, call: Call) -> AsyncIterator[BackendClient]:
        from .backend_client import BackendClient, Exchange

        call.exchange = Exchange()
        async with BackendClient(settings, call.exchange, transport=self._transport) as api:
            yield api

    # ------------------------------------------------------------------ operations

    async def check_training_availability(self, booking_id: object = None) -> Envelope:
        async def body(call: Call) -> Outcome:
            booking = inputs.optional_identifier(booking_id, "booking_id")    # 0 input
            call.note(booking_id=booking)
            settings = self._gate_availability()                             # 1 availability
            async with self._backend(settings, call) as api:
                caps = await self._gate_capabilities(api, settings)                    # 3 capabilities
                data: dict[str, Any] = {
                    "available": True,
                    "contract_version": caps.contract_version,
                    "operations": list(caps.training.operations),
                    "booking": None,
                }
                if booking is None:
                    return data, NOTICE_AVAILABLE
                self._authenticate(api)
                account_id, el = await self._gate_entitlement(api, settings, booking)   # 4 entitlement
            data["account_id"] = account_id
            data["booking"] = el.model_dump(mode="json")
            return data, NOTICE_ELIGIBLE

        return await self._run("check_training_availability", body)

    async def digest_manifest(self, manifest_path: object) -> Envelope:
        async def body(call: Call) -> Outcome:
            path = inputs.manifest_path(manifest_path)                       # 0 input
            digested = await self._gate_manifest(path)                       # 2 manifest (local only)
            call.note(manifest_sha256=digested.sha256)
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
            booking = inputs.identifier(booking_id, "booking_id")            # 0 input
            path = inputs.manifest_path(manifest_path)
            key = inputs.idempotency_key(idempotency_key)
            call.note(booking_id=booking, idempotency_key=key)
            ref = inputs.confirmation_ref(confirmation_ref)
            call.note(confirmation_ref=ref)
            settings = self._gate_availability()                             # 1 availability
            digested = await self._gate_manifest(path)                       # 2 manifest
            call.note(manifest_sha256=digested.sha256)
            async with self._backend(settings, call) as api:
                await self._gate_capabilities(api, settings)                           # 3 capabilities
                self._authenticate(api)
                account_id, _ = await self._gate_entitlement(api, settings, booking)   # 4 entitlement
                existing = await self._gate_idempotency(api, key, booking, digested.sha256)  # 5 idempotency
                if existing is not None:
                    return _submission(existing, created=False, recovered=False), NOTICE_EXISTING
                await self._gate_confirmation(api, ref, account_id, booking, digested)  # 6 confirmation
                run, created, recovered = await self._gate_create(             # 7 create
                    api, settings, booking_id=booking, ref=ref, key=key, digested=digested
                )
            notice = NOTICE_CREATED if created else NOTICE_RECOVERED if recovered else NOTICE_EXISTING
            return _submission(run, created=created, recovered=recovered), notice

        return await self._run("submit_training", body)

    # ------------------------------------------------------------------ lifecycle (read-only)

    @asynccontextmanager
    async def _authenticated(self, call: Call) -> AsyncIterator[tuple[BackendClient, BackendSettings]]:
        """Gates 1 and 3, then the credential: what every lifecycle operation needs first."""
        settings = self._gate_availability()                             # 1 availability
        async with self._backend(settings, call) as api:
            await self._gate_capabilities(api, settings)                 # 3 capabilities
            self._authenticate(api)
            yield api, settings

    async def _get_run(self, api: BackendClient, run_id: str) -> Run:
        from .backend_client import run_path
        from .backend_models import Run

        _, run = await api.request("GET", run_path(run_id), Run, gate=None)
        if run.run_id != run_id:
            raise Refusal(ErrorCode.BACKEND_INVALID_RESPONSE, "The backend answered with another run.", gate=None)
        return run

    async def training_status(
        self,
        run_id: object = None,
        idempotency_key: object = None,
        wait_seconds: object = None,
        *,
        progress: Progress | None = None,
    ) -> Envelope:
        async def body(call: Call) -> Outcome:
            run_ref = inputs.optional_identifier(run_id, "run_id")           # 0 input
            key = None if idempotency_key is None else inputs.idempotency_key(idempotency_key)
            if (run_ref is None) == (key is None):
                raise Refusal(
                    ErrorCode.INVALID_INPUT, "Give exactly one of run_id or idempotency_key.", gate=Gate.INPUT,
                    details={"argument": "run_id", "problem": "exactly_one_of_run_id_or_idempotency_key"},
                )
            wait = inputs.bounded_int(wait_seconds, "wait_seconds", default=0, low=0, high=inputs.MAX_WAIT_SECONDS)
            call.note(run_id=run_ref, idempotency_key=key)
            async with self._authenticated(call) as (api, settings):
                if run_ref is None:
                    assert key is not None
                    found = await self._lookup_by_key(api, key, Gate.IDEMPOTENCY)
                    if found is None:
                        return {"found": False, "idempotency_key": key, "run_id": None, "state": None}, NOTICE_NO_RUN
                    run_ref = found.run_id
                run, waited, timed_out = await self._poll(api, settings, run_ref, wait, progress)
            data = _run_status(run)
            data["wait"] = {"requested_s": wait, "waited_s": round(waited, 3), "timed_out": timed_out}
            return data, _status_notice(run, timed_out)

        return await self._run("training_status", body)

    async def _poll(
        self, api: BackendClient, settings: BackendSettings, run_id: str, wait_s: int, progress: Progress | None
    ) -> tuple[Run, float, bool]:
        """Fetch the run; with a wait, poll with bounded backoff until terminal or the deadline.

        A revoked credential raises at once (no further request). Progress goes up with elapsed
        time, so clients can draw a bar; its message names the state and the current stage.
        """
        from .backend_models import TERMINAL_STATES

        started = time.monotonic()
        interval = settings.poll_interval_s
        last_progress = -1.0
        while True:
            run = await self._get_run(api, run_id)
            elapsed = time.monotonic() - started
            terminal = run.state in TERMINAL_STATES
            if progress is not None and wait_s > 0:
                value = float(wait_s) if terminal else max(min(elapsed, float(wait_s)), last_progress + 0.001)
                if value > last_progress:
                    last_progress = value
                    await progress(value, float(wait_s), _progress_message(run))
            if terminal or wait_s == 0:
                return run, elapsed, False
            remaining = wait_s - elapsed
            if remaining <= 0:
                return run, elapsed, True
            await anyio.sleep(min(interval, remaining))
            interval = min(interval * 1.5, max(settings.poll_interval_s, 10.0))

    async def training_logs(self, run_id: object, cursor: object = None, limit: object = None) -> Envelope:
        async def body(call: Call) -> Outcome:
            from .backend_client import run_path
            from .backend_models import Logs

            run_ref = inputs.identifier(run_id, "run_id")                    # 0 input
            call.note(run_id=run_ref)
            page_cursor = inputs.cursor(cursor)
            page_limit = inputs.bounded_int(limit, "limit", default=200, low=1, high=inputs.MAX_LOG_LIMIT)
            params: dict[str, str | int] = {"limit": page_limit}
            if page_cursor is not None:
                params["cursor"] = page_cursor
            async with self._authenticated(call) as (api, _):
                try:
                    _, logs = await api.request("GET", run_path(run_ref, "/logs"), Logs, gate=None, params=params)
                except Refusal as r:
                    if (r.details or {}).get("status") == 400 and page_cursor is not None:
                        raise InputRefusal("The backend does not accept this cursor; pass next_cursor back unchanged, "
                                           "or omit it to start from the first line.",
                                           argument="cursor", problem="rejected_by_backend") from None
                    raise
            lines = [
                {"ts": line.model_dump(mode="json")["ts"], "stage": line.stage, "message": _safe_text(line.message)}
                for line in logs.lines
            ]
            data = {"run_id": run_ref, "lines": lines, "next_cursor": logs.next_cursor}
            return data, NOTICE_LOGS if logs.next_cursor else NOTICE_LOGS_END

        return await self._run("training_logs", body)

    async def training_metrics(self, run_id: object) -> Envelope:
        async def body(call: Call) -> Outcome:
            from .backend_models import Metrics

            run_ref, metrics = await self._read_run(call, run_id, "/metrics", Metrics)
            return {"run_id": run_ref, **metrics.model_dump(mode="json")}, NOTICE_READ_ONLY

        return await self._run("training_metrics", body)

    async def list_checkpoints(self, run_id: object) -> Envelope:
        async def body(call: Call) -> Outcome:
            from .backend_models import Checkpoints

            run_ref, found = await self._read_run(call, run_id, "/checkpoints", Checkpoints)
            checkpoints = [{**c.model_dump(mode="json"), "uri": _safe_text(c.uri)} for c in found.checkpoints]
            return {"run_id": run_ref, "checkpoints": checkpoints}, NOTICE_READ_ONLY

        return await self._run("list_checkpoints", body)

    async def _read_run(self, call: Call, run_id: object, suffix: str, model: type[M]) -> tuple[str, M]:
        """A read-only lifecycle GET: gate 0 on the run id, then gates 1 and 3 and the credential."""
        from .backend_client import run_path

        run_ref = inputs.identifier(run_id, "run_id")                        # 0 input
        call.note(run_id=run_ref)
        async with self._authenticated(call) as (api, _):
            _, found = await api.request("GET", run_path(run_ref, suffix), model, gate=None)
        return run_ref, found

    # ------------------------------------------------------------------ lifecycle mutations

    async def cancel_training(self, run_id: object, confirmation_ref: object, idempotency_key: object) -> Envelope:
        return await self._run_mutation("cancel_training", "cancel", run_id, confirmation_ref, idempotency_key)

    async def cleanup_training(self, run_id: object, confirmation_ref: object, idempotency_key: object) -> Envelope:
        return await self._run_mutation("cleanup_training", "cleanup", run_id, confirmation_ref, idempotency_key)

    async def _run_mutation(
        self, tool: str, action: str, run_id: object, confirmation_ref: object, idempotency_key: object
    ) -> Envelope:
        """Cancel and cleanup: their own confirmation (bound to the run) and their own idempotency key.

        The confirmation is checked before the request for account, action and run. Whether it is
        consumed or expired is left to the backend, which is authoritative and replays the stored
        result for a retry with the same key (a retry must not be refused for using the
        confirmation it already used). Ambiguous answers are resolved by status, then by resending
        the same key and body, a bounded number of times.
        """

        async def body(call: Call) -> Outcome:
            try:
                return await mutate(call)
            except Refusal as r:
                r.next_step = r.next_step or _mutation_next_step(r, action)
                raise

        async def mutate(call: Call) -> Outcome:
            run_ref = inputs.identifier(run_id, "run_id")                    # 0 input
            key = inputs.idempotency_key(idempotency_key)
            call.note(run_id=run_ref, idempotency_key=key, action=action)
            ref = inputs.confirmation_ref(confirmation_ref)
            call.note(confirmation_ref=ref)
            async with self._authenticated(call) as (api, settings):         # 1, 3
                account_id = await self._account_id(api, settings, Gate.CONFIRMATION)
                await self._gate_action_confirmation(api, ref, account_id, run_ref, f"training.{action}")  # 6
                result, recovered = await self._send_mutation(api, settings, action, run_ref, ref, key)  # 7
            return _mutation_data(action, run_ref, key, result, recovered), _mutation_notice(action)

        return await self._run(tool, body)

    async def _gate_action_confirmation(
        self, api: BackendClient, ref: str, account_id: str, run_id: str, action: str
    ) -> None:
        from .backend_client import segment
        from .backend_models import Confirmation

        _, c = await api.request("GET", f"/v1/confirmations/{segment(ref)}", Confirmation, gate=Gate.CONFIRMATION)
        reason = None
        if c.ref != ref or c.account_id != account_id:
            reason = "account"
        elif c.action != action:
            reason = "action"
        elif c.run_id != run_id:
            reason = "run"
        if reason is not None:
            raise Refusal(
                ErrorCode.CONFIRMATION_MISMATCH,
                f"The confirmation is not for {action} of this run by this account ({reason}).",
                gate=Gate.CONFIRMATION, details={"reason": reason, "confirmation_ref": ref},
            )

    async def _send_mutation(
        self, api: BackendClient, settings: BackendSettings, action: str, run_id: str, ref: str, key: str
    ) -> tuple[Any, bool]:
        from .backend_client import BackendRefusal, run_path
        from .backend_models import CleanupResult, Run

        model: type[Run] | type[CleanupResult] = Run if action == "cancel" else CleanupResult
        last: BackendRefusal | None = None
        for round_ in range(settings.recovery_attempts + 1):
            if round_ > 0:
                await anyio.sleep(RECOVERY_BACKOFF_S[min(round_ - 1, len(RECOVERY_BACKOFF_S) - 1)])
                try:
                    await self._get_run(api, run_id)  # status first, as after an ambiguous submit
                except BackendRefusal as r:
                    if r.code in (ErrorCode.CREDENTIAL_REVOKED, ErrorCode.AUTH_REJECTED, ErrorCode.RUN_NOT_FOUND):
                        raise
            try:
                _, result = await api.request(
                    "POST", run_path(run_id, f"/{action}"), model, gate=Gate.CREATE,
                    json_body={"confirmation_ref": ref}, idempotency_key=key, mutation=True,
                )
            except BackendRefusal as r:
                if not r.ambiguous:
                    raise
                last = r
                continue
            return result, round_ > 0
        raise Refusal(
            ErrorCode.SUBMISSION_OUTCOME_UNKNOWN,
            f"The {action} request got no trustworthy answer after {settings.recovery_attempts + 1} attempts with "
            "the same idempotency key; it may or may not have taken effect.",
            gate=Gate.CREATE,
            details={"action": action, "run_id": run_id, "idempotency_key": key,
                     "last_code": last.code.value if last else None},
            next_step=(
                f"Call training_status with run_id to see the run's state; if the {action} has not happened, retry "
                f"{action}_training with the same idempotency_key and confirmation_ref. Never use a new key."
            ),
        )


def _egress(envelope: Envelope) -> Envelope:
    """Every envelope leaves through the redactor: the configured credential, token shapes a backend
    echoed, and unencodable text never reach an agent, whatever field they hid in. Envelopes built
    only from local, validated input skip the work."""
    import json

    from .redact import has_registered_secrets, needs_redaction, scrub

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


def _submission(run: Run, *, created: bool, recovered: bool) -> dict[str, Any]:
    data = run.as_data()
    return {
        "booking_id": run.booking_id,
        "run_id": run.run_id,
        "manifest_sha256": run.manifest_sha256,
        "idempotency_key": run.idempotency_key,
        "state": run.state.value,
        "created": created,
        "recovered_after_ambiguous_response": recovered,
        "account_id": run.account_id,
        "created_at": data["created_at"],
        "updated_at": data["updated_at"],
        "stages": data["stages"],
    }


def _run_status(run: Run) -> dict[str, Any]:
    """Everything the backend reports about the run, stage gates and evals exactly as reported."""
    data = run.as_data()
    data["found"] = True
    data["terminal"] = run.state in _terminal_states()
    data["failed_gates"] = [stage["name"] for stage in data["stages"] if stage["gate"]["status"] == "failed"]
    return data


def _terminal_states() -> frozenset[Any]:
    from .backend_models import TERMINAL_STATES

    return TERMINAL_STATES


def _progress_message(run: Run) -> str:
    passed = sum(1 for stage in run.stages if stage.gate.status == "passed")
    current = next((stage.name for stage in run.stages if stage.state == "running"), None)
    where = f", stage {current}" if current else ""
    return f"run {run.run_id}: {run.state.value}{where} ({passed}/{len(run.stages)} gates passed)"


def _status_notice(run: Run, timed_out: bool) -> str:
    from .backend_models import RunState

    if run.state is RunState.GATE_FAILED:
        return NOTICE_GATE_FAILED
    if timed_out:
        return NOTICE_STILL_RUNNING
    if run.state in _terminal_states():
        return NOTICE_TERMINAL
    return NOTICE_STATUS


def _safe_text(text: str) -> str:
    """Backend text is relayed as is, unless it looks like it holds a credential."""
    from .secret_scan import value_kinds

    kinds = value_kinds(text)
    return f"<redacted: looked like a credential ({', '.join(kinds)})>" if kinds else text


def _mutation_data(action: str, run_id: str, key: str, result: Any, recovered: bool) -> dict[str, Any]:
    from .backend_models import CleanupResult, Run

    data: dict[str, Any] = {}
    if isinstance(result, Run):
        data.update(_run_status(result))
        # The run carries its submit key; this action has its own, and that is the one to retry with.
        data["submit_idempotency_key"] = data.pop("idempotency_key")
    elif isinstance(result, CleanupResult):
        if not result.booking_untouched:
            raise Refusal(
                ErrorCode.BACKEND_INVALID_RESPONSE,
                "The backend reports that cleanup modified the booking, which this product never authorises.",
                gate=Gate.CREATE, details={"run_id": run_id, "booking_untouched": False},
                next_step="Tell the user at once: the booking may have been changed without their authorisation.",
            )
        data.update({"cleaned": list(result.cleaned), "booking_untouched": True})
    data.update({"action": action, "run_id": run_id, "idempotency_key": key,
                 "recovered_after_ambiguous_response": recovered})
    return data


def _mutation_next_step(refused: Refusal, action: str) -> str | None:
    """Cancel and cleanup refusals point at their own confirmation and tool, not at a submit."""
    tool = f"{action}_training"
    confirm_again = (
        f"Ask the user to create a new confirmation out of band for training.{action} of this run; then call "
        f"{tool} again with the new confirmation_ref and the same idempotency_key."
    )
    if refused.code is ErrorCode.CONFIRMATION_REQUIRED:
        return (f"Ask the user to confirm training.{action} of this run out of band at the Itô desk and give you "
                f"the confirmation reference; then call {tool} with it.")
    if refused.code in (ErrorCode.CONFIRMATION_NOT_FOUND, ErrorCode.CONFIRMATION_EXPIRED,
                        ErrorCode.CONFIRMATION_MISMATCH):
        return confirm_again
    if refused.code is ErrorCode.CONFIRMATION_CONSUMED:
        return (f"That confirmation was already used. If this is a retry, call {tool} with the idempotency_key of "
                f"the first attempt; otherwise: {confirm_again[0].lower()}{confirm_again[1:]}")
    if refused.code is ErrorCode.VALIDATION_REJECTED and (refused.details or {}).get("reason") == "run_active":
        return ("The run is still active: it must finish, or be cancelled with cancel_training (its own "
                "confirmation), before cleanup. Report its state to the user.")
    return None


def _mutation_notice(action: str) -> str:
    if action == "cancel":
        return NOTICE_CANCELLED
    return NOTICE_CLEANED
