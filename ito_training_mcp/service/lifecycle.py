"""Following a run (status, logs, metrics, checkpoints) and its mutations: cancel, cleanup, and the restart
a person confirmed after the backend proposed it."""

from __future__ import annotations

from typing import Any

from ito_training_mcp.backend.client import BackendClient, BackendRefusal, run_path, segment
from ito_training_mcp.backend.models import (
    RESTART_OPERATION,
    TERMINAL_STATES,
    Checkpoints,
    CleanupResult,
    Confirmation,
    Logs,
    Metrics,
    Run,
    RunState,
)
from ito_training_mcp.egress.clean import clean_progress, quoted
from ito_training_mcp.envelope import Envelope, ErrorCode, Gate
from ito_training_mcp.errors import InputRefusal, Refusal
from ito_training_mcp.gates import inputs
from ito_training_mcp.gates.config import BackendSettings
from ito_training_mcp.service.base import Outcome, Progress, ServiceBase
from ito_training_mcp.service.call import Call
from ito_training_mcp.service.notices import (
    NOTICE_CANCELLED,
    NOTICE_CLEANED,
    NOTICE_GATE_FAILED,
    NOTICE_LOGS,
    NOTICE_LOGS_END,
    NOTICE_NO_RUN,
    NOTICE_READ_ONLY,
    NOTICE_RESTART_PROPOSED,
    NOTICE_RESTARTED,
    NOTICE_STATUS,
    NOTICE_STILL_RUNNING,
    NOTICE_TERMINAL,
    clamp_note,
)
from ito_training_mcp.service.waiting import MonotonicClock, Position, Waited, wait_data, wait_until


class LifecycleOperations(ServiceBase):
    """training_status, training_logs, training_metrics, list_checkpoints, cancel_training, cleanup_training,
    restart_training."""

    async def training_status(
        self,
        run_id: object = None,
        idempotency_key: object = None,
        wait_seconds: object = None,
        *,
        progress: Progress | None = None,
    ) -> Envelope:
        if progress is not None:
            progress = clean_progress(progress)  # the stage name in each message is backend text

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
            started = MonotonicClock().now()  # the wait's budget counts from here: backend reads spend it
            async with self._authenticated(call, waits=wait > 0) as (api, settings):
                if run_ref is None:
                    assert key is not None
                    found = await self._lookup_by_key(api, key, Gate.IDEMPOTENCY)
                    if found is None:
                        return {"found": False, "idempotency_key": key, "run_id": None, "state": None}, NOTICE_NO_RUN
                    run_ref = found.run_id
                waited = await self._follow_run(api, settings, run_ref, min(wait, settings.max_wait_s), progress,
                                                started)
            run = waited.last[0]
            data = _run_status(run)
            data["wait"] = wait_data(wait, settings.max_wait_s, waited)
            notice = _status_notice(run, waited.timed_out)
            return data, notice + (clamp_note(settings.max_wait_s) if wait > settings.max_wait_s else "")

        return await self._run("training_status", body)

    async def _follow_run(
        self, api: BackendClient, settings: BackendSettings, run_id: str, budget_s: int, progress: Progress | None,
        started: float,
    ) -> Waited[tuple[Run, int | None]]:
        """Fetch the run; with a budget, poll until it is terminal, or waits for the user's decision on a
        restart the backend proposed, or the budget is spent, reporting its position (stages passed, out
        of all stages) and, while it runs, the step its metrics report. A revoked credential ends the
        wait at once (no further request). Each poll's reads end within what is left of the budget."""

        async def fetch(deadline_s: float | None) -> tuple[Run, int | None]:
            with api.within(deadline_s):
                run = await self._get_run(api, run_id)
                step = None
                if progress is not None and budget_s > 0 and run.state.value == "running":
                    step = await self._current_step(api, run_id)
            return run, step

        return await wait_until(
            fetch, lambda seen: seen[0].state in TERMINAL_STATES or seen[0].pending_restart is not None,
            lambda seen: run_position(*seen),
            budget_s=budget_s, interval_s=settings.poll_interval_s, progress=progress, started=started,
        )

    async def _current_step(self, api: BackendClient, run_id: str) -> int | None:
        """The step the run's metrics report, for the progress message only. Any refusal but an
        authentication one leaves the message without it."""

        try:
            _, metrics = await api.request("GET", run_path(run_id, "/metrics"), Metrics, gate=None)
        except BackendRefusal as r:
            if r.code in (ErrorCode.CREDENTIAL_REVOKED, ErrorCode.AUTH_REJECTED, ErrorCode.AUTH_FORBIDDEN):
                raise
            return None
        return metrics.step

    async def training_logs(self, run_id: object, cursor: object = None, limit: object = None) -> Envelope:
        async def body(call: Call) -> Outcome:

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
                {"ts": line.model_dump(mode="json")["ts"], "stage": line.stage, "message": line.message}
                for line in logs.lines
            ]
            data = {"run_id": run_ref, "lines": lines, "next_cursor": logs.next_cursor}
            return data, NOTICE_LOGS if logs.next_cursor else NOTICE_LOGS_END

        return await self._run("training_logs", body)

    async def training_metrics(self, run_id: object) -> Envelope:
        async def body(call: Call) -> Outcome:

            run_ref, metrics = await self._read_run(call, run_id, "/metrics", Metrics)
            return {"run_id": run_ref, **metrics.model_dump(mode="json")}, NOTICE_READ_ONLY

        return await self._run("training_metrics", body)

    async def list_checkpoints(self, run_id: object) -> Envelope:
        async def body(call: Call) -> Outcome:

            run_ref, found = await self._read_run(call, run_id, "/checkpoints", Checkpoints)
            checkpoints = [c.model_dump(mode="json") for c in found.checkpoints]
            return {"run_id": run_ref, "checkpoints": checkpoints}, NOTICE_READ_ONLY

        return await self._run("list_checkpoints", body)

    # ------------------------------------------------------------------ lifecycle mutations

    async def cancel_training(self, run_id: object, confirmation_ref: object, idempotency_key: object) -> Envelope:
        return await self._run_mutation("cancel_training", "cancel", run_id, confirmation_ref, idempotency_key)

    async def cleanup_training(self, run_id: object, confirmation_ref: object, idempotency_key: object) -> Envelope:
        return await self._run_mutation("cleanup_training", "cleanup", run_id, confirmation_ref, idempotency_key)

    async def restart_training(self, run_id: object, confirmation_ref: object, idempotency_key: object) -> Envelope:
        return await self._run_mutation("restart_training", "restart", run_id, confirmation_ref, idempotency_key)

    async def _run_mutation(
        self, tool: str, action: str, run_id: object, confirmation_ref: object, idempotency_key: object
    ) -> Envelope:
        """Cancel, cleanup and restart: their own confirmation (bound to the run; a restart's also to the
        backend's proposal) and their own idempotency key.

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
            async with self._authenticated(call, _extra_operations(action)) as (api, settings):  # 1, 3
                account_id = await self._account_id(api, settings, Gate.CONFIRMATION)
                await self._gate_action_confirmation(api, ref, account_id, run_ref, f"training.{action}")  # 6
                result, recovered = await self._send_mutation(api, settings, action, run_ref, ref, key)  # 7
            return _mutation_data(action, run_ref, key, result, recovered), _mutation_notice(action)

        return await self._run(tool, body)

    async def _gate_action_confirmation(
        self, api: BackendClient, ref: str, account_id: str, run_id: str, action: str
    ) -> None:

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

    async def _after_redirected_mutation(self, api: BackendClient, redirect: Any, run_id: str) -> Refusal:
        """The refusal for a redirected cancel/cleanup, with the run's state read once (never re-sent)."""

        try:
            run = await self._get_run(api, run_id)
        except BackendRefusal:
            extra: dict[str, Any] = {"outcome": "unknown"}
        else:
            extra = {"run_state": run.state.value}
        return BackendRefusal(
            redirect.code, redirect.message, gate=redirect.gate, redirected=True,
            details={**(redirect.details or {}), **extra}, next_step=redirect.next_step,
        )

    async def _send_mutation(
        self, api: BackendClient, settings: BackendSettings, action: str, run_id: str, ref: str, key: str
    ) -> tuple[Any, bool]:

        model: type[Run] | type[CleanupResult] = CleanupResult if action == "cleanup" else Run
        last: BackendRefusal | None = None
        for round_ in range(settings.recovery_attempts + 1):
            if round_ > 0:
                await self._recovery_pause(round_)
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
                if r.redirected:  # an answer, not a lost response: one status read, nothing re-sent
                    raise await self._after_redirected_mutation(api, r, run_id) from None
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


def _extra_operations(action: str) -> tuple[str, ...]:
    return (RESTART_OPERATION,) if action == "restart" else ()


def _run_status(run: Run) -> dict[str, Any]:
    """Everything the backend reports about the run, stage gates and evals exactly as reported."""
    data = run.as_data()
    data["found"] = True
    data["terminal"] = run.state in _terminal_states()
    data["failed_gates"] = [stage["name"] for stage in data["stages"] if stage["gate"]["status"] == "failed"]
    return data


def _terminal_states() -> frozenset[Any]:

    return TERMINAL_STATES


def run_position(run: Run, step: int | None = None) -> Position:
    """A run's position for progress: stages whose gate passed, plus one half while the next stage runs,
    out of all stages; the words name the state, the current stage and (while running) the step."""
    passed = sum(1 for stage in run.stages if stage.gate.status == "passed")
    current = next((stage.name for stage in run.stages if stage.state in ("running", "paused")), None)
    value = passed + (0.5 if current is not None and run.state.value == "running" else 0.0)
    words = f"run {run.run_id}: {run.state.value}"
    if current is not None:
        words += f", stage {quoted(current)}"
    if run.pending_restart is not None:
        words += f", paused: restart from step {run.pending_restart.checkpoint_step} proposed"
    if run.stages:
        words += f" ({passed}/{len(run.stages)} stages passed)"
    if step is not None:
        words += f", step {step}"
    return Position(value, float(len(run.stages)) if run.stages else None, words)


def _status_notice(run: Run, timed_out: bool) -> str:

    if run.state is RunState.GATE_FAILED:
        return NOTICE_GATE_FAILED
    if run.pending_restart is not None:
        return NOTICE_RESTART_PROPOSED
    if timed_out:
        return NOTICE_STILL_RUNNING
    if run.state in _terminal_states():
        return NOTICE_TERMINAL
    return NOTICE_STATUS


_DETAILS_OF_STATUS = frozenset({"stages", "proposed_actions", "interruptions"})


def _mutation_data(action: str, run_id: str, key: str, result: Any, recovered: bool) -> dict[str, Any]:

    data: dict[str, Any] = {}
    if isinstance(result, Run):
        # The run as it now is, without its stages (training_status shows them). The run carries its submit
        # key; this action has its own, and that is the one to retry with.
        data.update({k: v for k, v in _run_status(result).items() if k not in _DETAILS_OF_STATUS
                     or (k == "proposed_actions" and action == "restart")})
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
    ask = (f"call request_confirmation with action training.{action} and this run_id, show the user the review_url "
           f"(they decide at the Itô desk), call confirmation_status with the request_id, and once it is confirmed "
           f"call {tool}")
    confirm_again = (f"Ask the user whether to confirm again; if yes, {ask} with the new confirmation_ref and the "
                     "same idempotency_key.")
    if refused.code is ErrorCode.CONFIRMATION_REQUIRED:
        return f"No confirmation_ref yet: {ask} with the returned confirmation_ref and one stable idempotency_key."
    if refused.code in (ErrorCode.CONFIRMATION_NOT_FOUND, ErrorCode.CONFIRMATION_EXPIRED,
                        ErrorCode.CONFIRMATION_MISMATCH):
        return confirm_again
    if refused.code is ErrorCode.CONFIRMATION_CONSUMED:
        return (f"That confirmation was already used. If this is a retry, call {tool} with the idempotency_key of "
                f"the first attempt; otherwise: {confirm_again[0].lower()}{confirm_again[1:]}")
    if refused.code is ErrorCode.VALIDATION_REJECTED and (refused.details or {}).get("reason") == "no_restart_proposed":
        return ("The backend has no pending restart proposal for this run (it was decided, or the run moved on): "
                "nothing was restarted. Report the run's state with training_status; do not retry.")
    if refused.code is ErrorCode.VALIDATION_REJECTED and (refused.details or {}).get("reason") == "run_active":
        return ("The run is still active: it must finish, or be cancelled with cancel_training (its own "
                "confirmation, through request_confirmation), before cleanup. Report its state to the user.")
    return None


def _mutation_notice(action: str) -> str:
    if action == "cancel":
        return NOTICE_CANCELLED
    if action == "restart":
        return NOTICE_RESTARTED
    return NOTICE_CLEANED

