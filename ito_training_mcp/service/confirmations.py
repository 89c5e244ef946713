"""The person's step: `plan_training`, `request_confirmation` and `confirmation_status`.

A confirmation is created only by a person, at the Itô desk, where they sign in themselves; the
agent only ever holds an opaque, non-authorising reference. These operations are how the agent
asks for one and learns the outcome:

    plan_training (gates 0-4 as in submit, then POST /v1/training-plans with the bytes hashed at
    gate 2) or request_confirmation (cancel / cleanup of a run, or the restart the backend proposed
    after a loss spike) -> a pending request with a review_url -> the person decides at the desk ->
    confirmation_status (polls; reports the decision and, once confirmed, the confirmation_ref) ->
    submit / cancel / cleanup / restart, whose gate 6 is unchanged.

Every answer is checked for what its types cannot say: the plan and its request are bound to this
account, booking and digest, the request to the manifest's maximum incremental cost, a cancel or
cleanup request to its run. Neither POST is keyed, so nothing here retries one; a plan this process
opened that still waits for the person is refused rather than opened again (`open_plans.py`); an
unused request simply expires.

`review_offer` and `with_elicitation` are what the MCP door needs to offer the review_url through
URL-mode elicitation: the door does the protocol exchange; what it means is decided here.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from ito_training_mcp.backend.client import BackendClient, BackendRefusal, segment
from ito_training_mcp.backend.models import CONFIRMATION_OPERATIONS, RESTART_OPERATION, ConfirmationRequest, Plan
from ito_training_mcp.egress.clean import clean_envelope, clean_line, clean_progress
from ito_training_mcp.envelope import Envelope, ErrorCode, Gate, success
from ito_training_mcp.errors import Refusal
from ito_training_mcp.gates import inputs
from ito_training_mcp.gates.manifest.digest import DigestedManifest
from ito_training_mcp.service.base import Outcome, Progress, ServiceBase
from ito_training_mcp.service.call import Call
from ito_training_mcp.service.notices import (
    NOTICE_PLAN_INVALID,
    NOTICE_PLAN_VALID,
    clamp_note,
    elicited,
    request_opened,
    request_status,
)
from ito_training_mcp.service.open_plans import OpenPlan
from ito_training_mcp.service.waiting import MonotonicClock, Position, wait_data, wait_until

RUN_ACTIONS = ("training.cancel", "training.cleanup", "training.restart")
NEXT_TOOL = {"training.create": "submit_training", "training.cancel": "cancel_training",
             "training.cleanup": "cleanup_training", "training.restart": "restart_training"}
ELICITATION_KEY = "ito_review"

_MAYBE_OPENED = (
    "If the backend opened a confirmation request before the answer was lost, that request simply expires "
    "unused: nothing is created or spent until the user confirms at the Itô desk and the mutation is called. "
    "Tell the user; call {tool} again later, once."
)
_TOO_MANY = (
    "This account already has as many undecided confirmation requests as the backend allows. Ask the user to "
    "decide or decline the pending ones at the Itô desk (or let them expire); do not open more in a loop."
)


def _operations(action: str | None = None) -> tuple[str, ...]:
    """The operations beyond the lifecycle's seven these tools need (asking for a restart needs `restart`)."""

    return (*CONFIRMATION_OPERATIONS, *((RESTART_OPERATION,) if action == "training.restart" else ()))


class ConfirmationOperations(ServiceBase):
    """plan_training, request_confirmation, confirmation_status."""

    async def plan_training(self, booking_id: object, manifest_path: object) -> Envelope:
        async def body(call: Call) -> Outcome:
            booking = inputs.identifier(booking_id, "booking_id")            # 0 input
            path = inputs.manifest_path(manifest_path)
            call.note(booking_id=booking)
            settings = self._gate_availability()                             # 1 availability
            digested, review = await self._gate_manifest(path, reviewed=True)  # 2 manifest
            call.note(manifest_sha256=digested.sha256)
            intent = (settings.endpoint.base_url, booking, digested.sha256)
            waiting = self._open_plans.pending(*intent, self._clock())      # the same plan, still pending
            if waiting is not None:
                raise _plan_still_pending(waiting)
            async with self._backend(settings, call) as api:
                await self._gate_capabilities(api, settings, _operations())           # 3 capabilities (+2)
                self._authenticate(api)
                account_id, _ = await self._gate_entitlement(api, settings, booking)  # 4 entitlement
                plan = await self._post_plan(api, booking, digested)                  # the plan, unkeyed
            _check_plan(plan, account_id, booking, digested)
            opened = plan.confirmation_request
            call.note(plan_id=plan.plan_id, request_id=_request_id(opened))
            if opened is not None:
                self._open_plans.remember(*intent, OpenPlan(opened.request_id, opened.review_url, opened.expires_at))
            return _plan_data(plan, digested, review), NOTICE_PLAN_VALID if plan.valid else NOTICE_PLAN_INVALID

        return await self._run("plan_training", body)

    async def request_confirmation(self, action: object, run_id: object) -> Envelope:
        async def body(call: Call) -> Outcome:
            chosen = inputs.one_of(action, "action", RUN_ACTIONS)            # 0 input
            run_ref = inputs.identifier(run_id, "run_id")
            call.note(action=chosen, run_id=run_ref)
            async with self._authenticated(call, _operations(chosen)) as (api, settings):  # 1, 3 (+2), credential
                account_id = await self._account_id(api, settings, Gate.CONFIRMATION)
                request = await self._post_request(api, chosen, run_ref)
            if (request.account_id, request.action, request.run_id) != (account_id, chosen, run_ref) or (
                request.status != "pending"
            ):
                raise _invalid("The backend's confirmation request is not a pending request for this action, run "
                               "and account.")
            call.note(request_id=request.request_id)
            data = {
                "request_id": request.request_id, "action": request.action, "status": request.status,
                "review_url": request.review_url, "expires_at": _rfc3339(request, "expires_at"),
                "run_id": run_ref, "booking_id": request.booking_id, "max_cost_usd": f"{request.max_cost_usd}",
            }
            return data, request_opened(chosen, run_ref)

        return await self._run("request_confirmation", body)

    async def confirmation_status(
        self, request_id: object, wait_seconds: object = None, *, progress: Progress | None = None
    ) -> Envelope:
        if progress is not None:
            progress = clean_progress(progress)  # relayed through the egress, like every outgoing string

        async def body(call: Call) -> Outcome:
            request_ref = inputs.identifier(request_id, "request_id")        # 0 input
            wait = inputs.bounded_int(wait_seconds, "wait_seconds", default=0, low=0, high=inputs.MAX_WAIT_SECONDS)
            call.note(request_id=request_ref)
            started = MonotonicClock().now()  # the wait's budget counts from here: backend reads spend it
            # 1, 3 (+2), credential
            async with self._authenticated(call, _operations(), waits=wait > 0) as (api, settings):
                account_id = await self._account_id(api, settings, Gate.CONFIRMATION)

                async def fetch(deadline_s: float | None) -> ConfirmationRequest:
                    with api.within(deadline_s):  # a poll ends within what is left of the budget
                        return await self._get_request(api, request_ref, account_id)

                waited = await wait_until(
                    fetch, lambda r: r.status != "pending", request_position,
                    budget_s=min(wait, settings.max_wait_s), interval_s=settings.poll_interval_s, progress=progress,
                    started=started,
                )
            request = waited.last
            call.note(action=request.action)
            if request.status != "pending":
                self._open_plans.settled(request.request_id)
            data = _request_data(request)
            data["wait"] = wait_data(wait, settings.max_wait_s, waited)
            notice = request_status(request.action, request.status)
            return data, notice + (clamp_note(settings.max_wait_s) if wait > settings.max_wait_s else "")

        return await self._run("confirmation_status", body)

    # ------------------------------------------------------------------ backend requests

    async def _post_plan(self, api: BackendClient, booking_id: str, digested: DigestedManifest) -> Plan:
        """`POST /v1/training-plans` with the exact bytes hashed at gate 2 and their digest. Not keyed,
        never resent."""

        body = {
            "booking_id": booking_id,
            "manifest_sha256": digested.sha256,
            "manifest_b64": base64.b64encode(digested.file.content).decode("ascii"),
        }
        try:
            _, plan = await api.request("POST", "/v1/training-plans", Plan, gate=Gate.CONFIRMATION, json_body=body)
        except BackendRefusal as r:
            raise _opening_refused(r, "plan_training") from None
        return plan

    async def _post_request(self, api: BackendClient, action: str, run_id: str) -> ConfirmationRequest:
        """`POST /v1/confirmation-requests`: a request to cancel, clean up or restart a run. Not keyed, never
        resent."""

        try:
            _, request = await api.request("POST", "/v1/confirmation-requests", ConfirmationRequest,
                                           gate=Gate.CONFIRMATION, json_body={"action": action, "run_id": run_id})
        except BackendRefusal as r:
            raise _opening_refused(r, "request_confirmation") from None
        return request

    async def _get_request(self, api: BackendClient, request_id: str, account_id: str) -> ConfirmationRequest:

        _, request = await api.request("GET", f"/v1/confirmation-requests/{segment(request_id)}",
                                       ConfirmationRequest, gate=Gate.CONFIRMATION)
        if request.request_id != request_id or request.account_id != account_id:
            raise _invalid("The backend answered with another account's or another confirmation request.")
        return request


# ---------------------------------------------------------------------- checks and shapes


def _invalid(message: str) -> Refusal:
    return Refusal(ErrorCode.BACKEND_INVALID_RESPONSE, message, gate=Gate.CONFIRMATION)


def _plan_still_pending(waiting: OpenPlan) -> Refusal:
    """plan_training for a booking and manifest whose request, opened by this server, still waits for the
    person: refused before anything is sent, naming that request."""
    rid = waiting.request_id
    return Refusal(
        ErrorCode.IDEMPOTENCY_IN_FLIGHT,
        f"A confirmation request for this booking and manifest is still pending ({rid}); no second plan was "
        "opened and nothing was sent.",
        gate=Gate.IDEMPOTENCY, retryable=False,
        details={"reason": "plan_pending", "request_id": rid, "review_url": waiting.review_url,
                 "expires_at": waiting.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ")},
        next_step=(f"Do not plan this manifest again: confirmation request {rid} for the same booking and manifest "
                   "is still waiting for the user at the Itô desk. Call confirmation_status with request_id "
                   f"{rid} (with wait_seconds to wait) to learn their decision, and show the user its review_url "
                   "if they have not opened it."),
    )


def _opening_refused(refused: BackendRefusal, tool: str) -> Refusal:
    """A refusal to open a plan or request, with the next step that fits the person's step."""
    details = refused.details or {}
    if details.get("backend_code") == "too_many_pending_requests" and details.get("status") == 409:
        return Refusal(
            ErrorCode.RATE_LIMITED,
            "The backend refuses to open another confirmation request: this account has too many undecided ones.",
            gate=refused.gate, details={"reason": "too_many_pending_requests", "status": 409}, next_step=_TOO_MANY,
        )
    if refused.code is ErrorCode.DIGEST_MISMATCH:
        refused.next_step = (
            "The backend computed a different digest for the manifest bytes this server sent. Nothing was opened. "
            "Tell the user; call digest_manifest and plan_training again once; if it persists, hand control back."
        )
    elif refused.code is ErrorCode.VALIDATION_REJECTED and details.get("reason") == "no_restart_proposed":
        refused.next_step = (
            "The backend has no pending restart proposal for this run: a restart is only ever its proposal after a "
            "loss spike (training_status shows it in data.proposed_actions), decided once. Report the run's state; "
            "do not ask again."
        )
    elif refused.code is ErrorCode.VALIDATION_REJECTED and details.get("reason") == "run_active":
        refused.next_step = (
            "Cleanup needs a finished run and this one is still active. Report its state (training_status); it must "
            "finish, or be cancelled first (request_confirmation with action training.cancel, then cancel_training)."
        )
    elif refused.code in (ErrorCode.BACKEND_TIMEOUT, ErrorCode.BACKEND_ERROR) and not refused.redirected:
        refused.next_step = _MAYBE_OPENED.format(tool=tool)
    return refused


def _check_plan(plan: Plan, account_id: str, booking_id: str, digested: DigestedManifest) -> None:
    """The plan and its request are bound to this account, booking and digest, and the request asks the
    person to confirm exactly the manifest's maximum incremental cost."""
    if (plan.account_id, plan.booking_id, plan.manifest_sha256) != (account_id, booking_id, digested.sha256):
        raise _invalid("The backend's plan is not bound to this account, booking and manifest digest.")
    request = plan.confirmation_request
    if request is None:
        return
    bound = (request.account_id, request.action, request.booking_id, request.manifest_sha256, request.run_id)
    if bound != (account_id, "training.create", booking_id, digested.sha256, None) or request.plan_id not in (
        None, plan.plan_id
    ):
        raise _invalid("The backend's confirmation request is not bound to this plan's account, booking and digest.")
    if request.status != "pending":
        raise _invalid("The backend's newly opened confirmation request is not pending.")
    if request.max_cost_usd != digested.manifest.budget.max_incremental_cost_usd:
        raise _invalid("The backend's confirmation request would have the user confirm another maximum cost than "
                       "the manifest's max_incremental_cost_usd.")


def _rfc3339(model: Any, name: str) -> Any:
    return model.model_dump(mode="json", include={name})[name]


def _request_id(request: ConfirmationRequest | None) -> str | None:
    return None if request is None else request.request_id


def _plan_data(plan: Plan, digested: DigestedManifest, review: dict[str, Any]) -> dict[str, Any]:
    request = plan.confirmation_request
    checks = [
        {"name": c.name, "status": c.status, "reason": c.reason,
         "message": c.message}
        for c in plan.checks
    ]
    estimate = None
    if plan.estimate is not None:
        lines = None if plan.estimate.stages is None else [
            {"name": line.name, "gpu_hours": line.gpu_hours, "usd": f"{line.usd}"} for line in plan.estimate.stages]
        estimate = {"usd": f"{plan.estimate.usd}", "gpu_hours": plan.estimate.gpu_hours,
                    "basis": plan.estimate.basis, "stages": lines}
    opened = None
    if request is not None:
        opened = {"request_id": request.request_id, "action": request.action, "status": request.status,
                  "review_url": request.review_url, "expires_at": _rfc3339(request, "expires_at"),
                  "max_cost_usd": f"{request.max_cost_usd}"}
    return {
        "plan_id": plan.plan_id,
        "booking_id": plan.booking_id,
        "account_id": plan.account_id,
        "manifest_sha256": plan.manifest_sha256,
        "valid": plan.valid,
        "checks": checks,
        "failed_checks": [c.name for c in plan.checks if c.status == "failed"],
        "estimate": estimate,
        "parallelism": None if plan.parallelism is None else plan.parallelism.model_dump(mode="json"),
        "confirmation_request": opened,
        "max_cost_usd": f"{digested.manifest.budget.max_incremental_cost_usd}",
        "created_at": _rfc3339(plan, "created_at"),
        **{key: value for key, value in review.items() if key not in ("sha256", "path")},
    }


def _request_data(request: ConfirmationRequest) -> dict[str, Any]:
    dumped = request.model_dump(mode="json")
    return {
        "request_id": request.request_id,
        "action": request.action,
        "status": request.status,
        "confirmation_ref": request.confirmation_ref,
        "next_tool": NEXT_TOOL[request.action] if request.status == "confirmed" else None,
        "booking_id": request.booking_id,
        "run_id": request.run_id,
        "plan_id": request.plan_id,
        "manifest_sha256": request.manifest_sha256,
        "max_cost_usd": f"{request.max_cost_usd}",
        "review_url": request.review_url,
        "expires_at": dumped["expires_at"],
        "decided_at": dumped["decided_at"],
    }


def request_position(request: ConfirmationRequest) -> Position:
    """A request's position for progress: 0 while pending, 1 once decided, out of 1."""
    pending = request.status == "pending"
    words = f"confirmation request {request.request_id} ({request.action}): {request.status}"
    if pending:
        words += ", waiting for the user's decision at the Itô desk"
    return Position(0.0 if pending else 1.0, 1.0, words)


# ---------------------------------------------------------------------- URL-mode elicitation (for the door)


@dataclass(frozen=True)
class ReviewOffer:
    """A review link to offer the person through their client: where, and what to tell them."""

    request_id: str
    action: str
    url: str
    message: str


def review_offer(tool: str, envelope: Envelope) -> ReviewOffer | None:
    """The review link of a request this result has just opened, or None."""
    data = envelope.data
    if not envelope.ok or data is None or "elicitation" in data:
        return None
    if tool == "plan_training":
        request = data.get("confirmation_request")
        if not isinstance(request, dict):
            return None
        what = (f"this training plan at the Itô desk: booking {data['booking_id']}, at most {request['max_cost_usd']} "
                f"USD for this submission, manifest sha256 {str(data['manifest_sha256'])[:12]}...")
    elif tool == "request_confirmation":
        request = data
        verb = {"training.cancel": "cancelling",
                "training.restart": f"restarting (at most {data.get('max_cost_usd')} USD for the steps run again)"
                }.get(data["action"], "cleaning up (the booking stays untouched)")
        what = f"{verb} training run {data['run_id']} at the Itô desk"
    else:
        return None
    if request.get("status") != "pending":
        return None
    message = (f"Review and confirm {what}. You sign in there yourself; opening the link confirms nothing, and you "
               "can decline there.")
    return ReviewOffer(str(request["request_id"]), str(request["action"]), str(request["review_url"]),
                       clean_line(message))


def with_elicitation(envelope: Envelope, offer: ReviewOffer, user_action: str) -> Envelope:
    """The result after the review link was offered through the client. `user_action` is the client's
    answer ("accept", "decline", "cancel") or "unanswered"; none of them is a confirmation."""
    assert envelope.data is not None
    data = {**envelope.data, "elicitation": {"mode": "url", "user_action": user_action,
                                             "request_id": offer.request_id}}
    return clean_envelope(
        success(data, notice=elicited(user_action, offer.action), live_api_contacted=envelope.live_api_contacted)
    )
