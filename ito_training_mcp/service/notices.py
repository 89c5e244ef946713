"""The notices an agent reads on success: what happened, and the one next step.

The person's step runs through all of them: plan_training (or request_confirmation for a cancel,
cleanup or restart) opens a request -> the user reviews and decides at the Itô desk, signing in themselves ->
confirmation_status tells the agent the decision and, when confirmed, the confirmation_ref -> the
mutation, with that reference and one stable idempotency key.
"""

from __future__ import annotations

NOTICE_DIGESTED = (
    "The manifest was read and digested locally; nothing was sent anywhere. Show the user data.review_text "
    "and the sha256. Next: call plan_training with the booking_id and this manifest_path: the backend checks "
    "the plan and opens a confirmation request that the user reviews and confirms at the Itô desk."
)
NOTICE_AVAILABLE = (
    "Training is available on the configured backend. Next: write or locate the manifest, call "
    "digest_manifest, then plan_training; nothing has been created."
)
NOTICE_ELIGIBLE = (
    "Training is available and this booking is eligible right now (data.booking). Next: call digest_manifest "
    "on the reviewed manifest, then plan_training; nothing has been created."
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
    "untouched. Cleanup is a separate action with its own confirmation request (request_confirmation)."
)
NOTICE_CLEANED = (
    "The run's artefacts listed in data.cleaned were cleaned up as the user confirmed. The booking was not "
    "released or modified."
)
NOTICE_RESTART_PROPOSED = (
    "The backend paused the run after a loss spike and proposes a restart from an earlier checkpoint "
    "(data.proposed_actions: the checkpoint, the steps that would run again and their cost). Nothing happens "
    "until the user decides; never restart on your own. Tell the user what it proposes and ask whether they want "
    "it. If they do, call request_confirmation with action training.restart and this run_id; they decide at the "
    "Itô desk. Declining there lets the run continue from where it paused; cancelling is a separate request."
)
NOTICE_RESTARTED = (
    "The run restarted from the proposed checkpoint as the user confirmed (the steps since it run again). Nothing "
    "else was changed; the booking is untouched. Next: follow it with training_status."
)
NOTICE_EXISTING = (
    "A run already existed for this idempotency key and was returned unchanged (created: false); nothing new "
    "was created and no confirmation was used. Next: follow it with training_status."
)

# ---------------------------------------------------------------------- the person's step

_AT_THE_DESK = (
    "Show the user the review_url and ask them to open it: they sign in at the Itô desk themselves (the link "
    "carries no sign-in), review what the desk shows, and confirm or decline there. You cannot confirm for them "
    "and must not open or drive the desk yourself."
)
NOTICE_PLAN_VALID = (
    "The backend checked this plan and opened a confirmation request (data.confirmation_request); nothing was "
    "created or spent. " + _AT_THE_DESK + " Point out data.estimate and data.max_cost_usd. Then call "
    "confirmation_status with request_id = data.confirmation_request.request_id (with wait_seconds) to learn "
    "their decision. Once it is confirmed, call submit_training with this booking_id and manifest_path, the "
    "returned confirmation_ref and ONE stable idempotency_key (choose it now, say it, reuse it for every retry). "
    "Do not plan the same manifest again while this request is pending."
)
NOTICE_PLAN_INVALID = (
    "The backend's checks refused this plan (data.failed_checks; each check's reason and message are in "
    "data.checks). No confirmation request was opened and nothing was created. Tell the user what failed and "
    "why; only they can change the manifest (or choose another booking). After a change, call digest_manifest "
    "and plan_training again. Do not call submit_training for this plan."
)


def request_opened(action: str, run_id: str) -> str:
    """The notice of a newly opened cancel or cleanup request."""
    verb = action.removeprefix("training.")
    return (
        f"A confirmation request for {action} of run {run_id} was opened (data.request_id); nothing has changed "
        f"yet. {_AT_THE_DESK} Then call confirmation_status with request_id = data.request_id (with wait_seconds). "
        f"Once it is confirmed, call {verb}_training with run_id {run_id}, the returned confirmation_ref and ONE "
        "stable idempotency_key for this action (not the submit key); reuse it for every retry."
    )


def _mutation_call(action: str) -> str:
    if action == "training.create":
        return ("call submit_training with booking_id = data.booking_id, the same manifest_path you planned (its "
                "sha256 must still be data.manifest_sha256), confirmation_ref = data.confirmation_ref and ONE stable "
                "idempotency_key")
    verb = action.removeprefix("training.")
    return (f"call {verb}_training with run_id = data.run_id, confirmation_ref = data.confirmation_ref and ONE stable "
            "idempotency_key for this action")


def request_status(action: str, status: str) -> str:
    """What the agent does after confirmation_status, by the person's decision."""
    if status == "confirmed":
        return (
            "The user confirmed this request at the Itô desk. Next: " + _mutation_call(action) + "; reuse that key "
            "for every retry. The reference is single use and expires; it authorises nothing by itself: the "
            "backend checks it again when the call arrives."
        )
    if status == "declined" and action == "training.restart":
        return (
            "The user declined the restart at the Itô desk: nothing was restarted, and the backend lets the run "
            "continue from where it paused. Tell the user; follow the run with training_status. Do not ask for the "
            "restart again; if they want the run stopped, that is a cancel (request_confirmation with "
            "training.cancel), only at their request."
        )
    if status == "declined":
        return (
            "The user declined this request at the Itô desk: nothing will be created, cancelled or cleaned up for "
            "it. Stop, tell the user it was declined and hand control back. Do not open a new request or ask them "
            "again unless they bring it up themselves."
        )
    if status == "expired" and action == "training.cancel":
        return (
            "The request expired before anyone decided it, or its run finished first; nothing happened. Call "
            "training_status for the run: a run that has finished cannot be cancelled (its cleanup is a request of "
            "its own). Only if it is still active and the user still wants it cancelled, call "
            "request_confirmation again and show them the new review_url."
        )
    if status == "expired":
        return (
            "The request expired before anyone decided it; nothing happened. Ask the user whether they still want "
            "this. Only if they say yes, open a new request (plan_training for a run, request_confirmation for a "
            "cancel, cleanup or restart) and show them its review_url."
        )
    return (
        "The user has not decided yet (the link to give them is data.review_url). Call confirmation_status again "
        "with wait_seconds to keep waiting. Do not call the mutation without a confirmed reference and do not open "
        "another request."
    )


def elicited(user_action: str, action: str) -> str:
    """What follows an offer of the review_url through the client (URL-mode elicitation). Whatever the
    user did with the link, it confirmed nothing: only the desk's answer counts."""
    if user_action == "accept":
        said = "The user agreed to open the review link through their client."
    elif user_action in ("decline", "cancel"):
        said = ("The user did not open the review link through their client. It stays valid (it is in the data): "
                "show it to them once, without pressing them.")
    else:
        said = "The review link was offered through the client but no answer came back: show it to the user."
    if action == "training.create":
        then = ("call submit_training with this booking_id and manifest_path, the returned confirmation_ref and ONE "
                "stable idempotency_key")
    else:
        then = (f"call {action.removeprefix('training.')}_training with this run_id, the returned confirmation_ref "
                "and ONE stable idempotency_key for this action")
    return (
        said + " That is not a confirmation: a decision exists only once they confirm or decline at the Itô desk, "
        "where they sign in themselves. Next: call confirmation_status with the request_id (with wait_seconds) to "
        f"learn it; once it is confirmed, {then}."
    )


def clamp_note(limit_s: int) -> str:
    return (
        f" wait_seconds was above this server's limit of {limit_s} s (ITO_TRAINING_MAX_WAIT_S), so this call "
        "waited at most that long (data.wait.clamped)."
    )
