"""Availability, digest and submit: the gates of contract §3 read top to bottom in `submit_training`."""

from __future__ import annotations

import base64
from typing import Any

from ito_training_mcp.backend.client import BackendClient, BackendRefusal, segment
from ito_training_mcp.backend.models import Confirmation, Run
from ito_training_mcp.envelope import Envelope, ErrorCode, Gate
from ito_training_mcp.errors import Refusal
from ito_training_mcp.gates import inputs
from ito_training_mcp.gates.config import BackendSettings
from ito_training_mcp.gates.manifest.digest import DigestedManifest
from ito_training_mcp.service.base import Outcome, ServiceBase, log
from ito_training_mcp.service.call import Call
from ito_training_mcp.service.notices import (
    NOTICE_AVAILABLE,
    NOTICE_CREATED,
    NOTICE_DIGESTED,
    NOTICE_ELIGIBLE,
    NOTICE_EXISTING,
    NOTICE_RECOVERED,
)


class SubmitOperations(ServiceBase):
    """check_training_availability, digest_manifest and submit_training, with gates 5-7."""

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
            digested, review = await self._gate_manifest(path, reviewed=True)  # 2 manifest (local only)
            call.note(manifest_sha256=digested.sha256)
            return review, NOTICE_DIGESTED

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
            digested, _ = await self._gate_manifest(path)                    # 2 manifest
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

        body = {
            "booking_id": booking_id,
            "confirmation_ref": ref,
            "manifest_sha256": digested.sha256,
            "manifest_b64": base64.b64encode(digested.file.content).decode("ascii"),
        }
        last: BackendRefusal | None = None
        for round_ in range(settings.recovery_attempts + 1):
            if round_ > 0:
                await self._recovery_pause(round_)
            try:
                status, run = await api.request("POST", "/v1/training-runs", Run, gate=Gate.CREATE,
                                                 json_body=body, idempotency_key=key, mutation=True)
            except BackendRefusal as r:
                if r.redirected:  # an answer, not a lost response: never re-sent
                    existing = await self._lookup_once_after_redirect(api, r, key)
                    return self._own_run(existing, booking_id, key, digested.sha256), False, True
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

    async def _lookup_once_after_redirect(self, api: BackendClient, redirect: BackendRefusal, key: str) -> Run:
        """After a redirected create: one lookup by key so the agent learns whether a run exists; the
        create is never re-sent. Returns the run if one exists, else raises the redirect refusal with
        what the lookup found."""

        try:
            found = await self._lookup_by_key(api, key, Gate.CREATE)
        except BackendRefusal:
            extra: dict[str, Any] = {"submission_outcome": "unknown", "idempotency_key": key}
        else:
            if found is not None:
                return found
            extra = {"run_found_by_key": False, "idempotency_key": key}
        raise BackendRefusal(
            redirect.code, redirect.message, gate=redirect.gate, redirected=True,
            details={**(redirect.details or {}), **extra}, next_step=redirect.next_step,
        ) from None

    @staticmethod
    def _own_run(run: Run, booking_id: str, key: str, sha256: str) -> Run:
        if (run.booking_id, run.idempotency_key, run.manifest_sha256) != (booking_id, key, sha256):
            raise Refusal(ErrorCode.BACKEND_INVALID_RESPONSE,
                          "The backend answered with a run that does not match this submission.", gate=Gate.CREATE)
        return run

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
    }


