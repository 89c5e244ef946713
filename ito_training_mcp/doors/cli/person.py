"""The CLI's own words for the person at the terminal.

The core writes every notice for an agent: "Tell the user ...", "call training_status with ...",
"hand control back". At a terminal the reader IS the user, so the CLI does not reword those
sentences; it says what happened and what the person does next from its own table:

- a refusal, by its error code, refined by the situation the verb and the error details describe
  (an interruption, a redirect, which check the token file failed, a cleanup of a run that is still
  active, a request that may have been opened before an answer was lost, ...);
- a success, by the core's notice: every notice in `service/notices.py`, and every notice its
  functions make, has its sentence here; the note about a clamped wait is worded separately.

A success notice the table does not know falls back to the word mapping of `cli_next_steps`
(`translate`). tests/test_cli_next_steps.py renders every code and every notice of the core
through the CLI and rejects agent-addressed phrases, so a notice added to the core fails there
until it has its sentence here. The error message, which describes rather than instructs, keeps
the core's words through the mapping (`person_message`).

"The next command" in these sentences is the `Next command:` the CLI prints after them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from ito_training_mcp.doors.cli.next_steps import details_for_cli, next_command, translate
from ito_training_mcp.envelope import Envelope, ErrorCode, ErrorInfo
from ito_training_mcp.service import notices

MUTATIONS = {"train": "submission", "cancel": "cancel", "cleanup": "cleanup", "restart": "restart"}
_ACTIONS = ("training.create", "training.cancel", "training.cleanup", "training.restart")
_STATUSES = ("pending", "confirmed", "declined", "expired")
_USER_ACTIONS = ("accept", "decline", "cancel", "unanswered")

_NO_SUBSTITUTE = ("There is nothing to work around here: a local trainer, an SSH session or a compute purchase "
                  "would skip the checks and your confirmation.")
_FIX_MANIFEST = ("Fix the manifest file (the details say where), then run 'ito-training digest' on it again to see "
                 "the new review summary.")
_CONFIRM_AGAIN = ("This confirmation cannot be used. If you still want the run, plan it again ('ito-training "
                  "plan'), review and confirm it at the Itô desk, then run the train command that "
                  "'ito-training confirmation' prints.")

# What a person does after each refusal, by code, when the situation adds nothing more specific.
BY_CODE: dict[ErrorCode, str] = {
    ErrorCode.INVALID_INPUT:
        "Correct the value of the flag named in the details and run the command again; nothing was changed.",
    ErrorCode.TRAINING_UNAVAILABLE:
        "Managed training is not available from the configured backend (the reason is in the details), so "
        "nothing can be submitted. " + _NO_SUBSTITUTE,
    ErrorCode.LIFECYCLE_INCOMPLETE:
        "The backend does not offer every operation a run needs (the missing ones are in the details), so "
        "nothing can be submitted safely; its operator has to add them. " + _NO_SUBSTITUTE,
    ErrorCode.CONFIG_INVALID:
        "Fix the setting named in the details in this command's environment, then run it again. Nothing was sent.",
    ErrorCode.MANIFEST_PATH_INVALID:
        "Give the absolute, normalised path of the manifest: no '.', '..' or symlinks, and inside "
        "ITO_TRAINING_MANIFEST_ROOTS when that is set.",
    ErrorCode.MANIFEST_NOT_FOUND: "Nothing readable exists at that path: check the manifest's absolute path.",
    ErrorCode.MANIFEST_SYMLINK: "Give the manifest's real path: a symlink anywhere on the path is refused.",
    ErrorCode.MANIFEST_NOT_REGULAR: _FIX_MANIFEST,
    ErrorCode.MANIFEST_UNSAFE_OWNER:
        "The manifest file must be owned by you (and the directories above it by you or root); fix the ownership "
        "and run the command again.",
    ErrorCode.MANIFEST_UNSAFE_PERMISSIONS:
        "Remove group and other write permission (and extra hard links) from the manifest and the directories "
        "above it, for example with chmod 600 on the file, then run the command again.",
    ErrorCode.MANIFEST_TOO_LARGE: _FIX_MANIFEST,
    ErrorCode.MANIFEST_CHANGED:
        "The file changed while it was being read. Finish editing it, then run the command again.",
    ErrorCode.MANIFEST_INVALID_JSON: _FIX_MANIFEST,
    ErrorCode.MANIFEST_SCHEMA: _FIX_MANIFEST,
    ErrorCode.MANIFEST_SECRET:
        "The manifest holds something that looks like a credential at the JSON pointer(s) in the details; it was "
        "neither sent nor shown. Remove it from the file, and rotate it if it was real.",
    ErrorCode.AUTH_MISSING:
        "No Itô credential is configured: set ITO_TOKEN_FILE (the path of a 0600 file holding the token) or "
        "ITO_API_KEY in this command's environment. A token never goes on the command line.",
    ErrorCode.AUTH_REJECTED:
        "The backend rejected the configured credential. Check the token with whoever issued it.",
    ErrorCode.AUTH_FORBIDDEN:
        "The credential is not allowed to do this; only the account's owner can change that.",
    ErrorCode.CREDENTIAL_REVOKED:
        "The credential is revoked or has expired, and this command will not use it again. Get a new token and "
        "point ITO_TOKEN_FILE (or ITO_API_KEY) at it.",
    ErrorCode.BOOKING_NOT_FOUND:
        "The backend knows no such booking for this account: check the id of a completed Itô booking.",
    ErrorCode.BOOKING_NOT_ELIGIBLE:
        "This booking cannot be used for training (the reason is in the details); choose another booking. "
        + _NO_SUBSTITUTE,
    ErrorCode.ENTITLEMENT_STALE:
        "The backend's eligibility answer was too old to trust. Run 'ito-training check' with the booking again "
        "in a little while.",
    ErrorCode.CONFIRMATION_REQUIRED:
        "A submission needs your confirmation first: plan the run ('ito-training plan'), review and confirm it at "
        "the Itô desk, then run the train command that 'ito-training confirmation' prints.",
    ErrorCode.CONFIRMATION_NOT_FOUND: _CONFIRM_AGAIN,
    ErrorCode.CONFIRMATION_EXPIRED: _CONFIRM_AGAIN,
    ErrorCode.CONFIRMATION_CONSUMED:
        "That confirmation was already used. If you are repeating an earlier train command, 'ito-training status' "
        "with the same --idempotency-key shows the run it created. For another run, plan it again and confirm it "
        "at the Itô desk.",
    ErrorCode.CONFIRMATION_MISMATCH: _CONFIRM_AGAIN,
    ErrorCode.DIGEST_MISMATCH:
        "The manifest's bytes differ from what was confirmed. Run 'ito-training digest' to see what it says now; "
        "if you want this version, plan it again and confirm the new digest at the Itô desk.",
    ErrorCode.IDEMPOTENCY_CONFLICT:
        "This idempotency key already belongs to a run with a different manifest or booking; nothing was created. "
        "Use another key only if you want a separate, new run.",
    ErrorCode.IDEMPOTENCY_IN_FLIGHT:
        "A submission with this key is still being processed. Check it with 'ito-training status' and the same "
        "--idempotency-key; never submit it again with a new key.",
    ErrorCode.SUBMISSION_OUTCOME_UNKNOWN:
        "The submission may or may not have created a run. Check with 'ito-training status' and the same "
        "--idempotency-key. Running the same train command again can never create a second run; never use a new "
        "key for it.",
    ErrorCode.VALIDATION_REJECTED:
        "The backend rejected it (the reason is in the message and the details). Change the manifest or choose "
        "another booking, then plan again.",
    ErrorCode.BUDGET_EXCEEDED:
        "The plan exceeds the budget. Only a change to the manifest's budget can fix that; then plan again, for a "
        "new confirmation.",
    ErrorCode.RUN_NOT_FOUND: "This account has no run with that id: check the run id.",
    ErrorCode.RUN_NOT_CANCELLABLE:
        "The run has already finished or is being cancelled, so there is nothing to cancel; the next command "
        "shows its state.",
    ErrorCode.BACKEND_UNREACHABLE:
        "The backend could not be reached, so nothing was sent. Check that it is running and that ITO_API_URL "
        "points at it (the address is in the details), then run the command again.",
    ErrorCode.BACKEND_TIMEOUT:
        "The backend did not answer within the deadline (ITO_TRAINING_TIMEOUT_S). Try the same command again later.",
    ErrorCode.BACKEND_INVALID_RESPONSE:
        "The backend answered with something this client does not accept, so retrying will not help. Report it "
        "to the backend's operator.",
    ErrorCode.BACKEND_ERROR:
        "The backend failed to answer (the details say how). Try the same command again later.",
    ErrorCode.RATE_LIMITED:
        "The backend is rate limiting this account. Wait (the details give the seconds when they are known) "
        "before running the same command again.",
    ErrorCode.INTERNAL_ERROR:
        "This tool hit a defect and stopped rather than guess. Please report it; there is nothing to work around.",
}


def person_notice(verb: str, arguments: Mapping[str, Any], envelope: Envelope, next_command: str | None) -> str:
    """The notice the CLI prints, without its `Next command:` (the caller appends it)."""
    del arguments  # the situation is in the envelope; kept for the call's symmetry with next_command
    if envelope.error is not None:
        text = _refusal(verb, envelope.error)
    else:
        text = _success(envelope.notice, envelope.data or {})
    if (next_command or "").startswith("ito-training train ") and " --manifest PATH " in (next_command or ""):
        text += (" In the next command, put the path of the manifest you planned for PATH (its SHA-256 must still "
                 "be the one confirmed); 'ito-training confirmation --manifest PATH' fills it in.")
    return text


def person_message(message: str) -> str:
    """An error message (a description) in CLI words: tools and arguments named as verbs and flags,
    and the person addressed as 'you'."""
    text = translate(message)
    text = text.replace("the user this server runs as", "the account this command runs as")
    return re.sub(r"\bthe user(?='s\b| confirmed\b)", "you", text).replace("you's", "your")


# ---------------------------------------------------------------------------- refusals


def _refusal(verb: str, error: ErrorInfo) -> str:
    situational = _situation(verb, error)
    return situational if situational is not None else BY_CODE[error.code]


def _situation(verb: str, error: ErrorInfo) -> str | None:
    """The sentence for a refusal whose situation says more than its code; None otherwise."""
    code, details = error.code, error.details or {}
    action = MUTATIONS.get(verb)
    if details.get("interrupted"):
        if code is not ErrorCode.SUBMISSION_OUTCOME_UNKNOWN:
            return ("The command was interrupted before it finished; nothing was created, cancelled or cleaned up. "
                    "Run it again when you want to.")
        if verb not in MUTATIONS:
            return None
        if verb in ("cancel", "cleanup", "restart"):
            return (f"The command was interrupted after the {action} may have reached the backend, so whether it "
                    f"took effect is unknown. Check the run with the next command; if the {action} has not "
                    f"happened, run the same {verb} command again (same key and reference), never with a new key.")
        return ("The command was interrupted after the submission may have reached the backend, so whether a run "
                "was created is unknown. Check with the next command (same key). Running the same train command "
                "again can never create a second run; never use a new key for it.")
    if code is ErrorCode.TRAINING_UNAVAILABLE and details.get("reason") == "backend_not_configured":
        return ("No Itô training backend is configured (ITO_API_URL is unset), so training is not available "
                "from here: that is today's answer in production. Nothing was read or sent. To try the whole "
                "flow, run the reference backend on this machine ('ito-training backend', from the separate "
                "ito-training-reference package) and set ITO_API_URL to the address it prints.")
    if code is ErrorCode.RATE_LIMITED and details.get("reason") == "manifest_reads_busy":
        return ("This process is busy reading other manifests and none of them finished in time; nothing was "
                "sent. Run the command again in a moment.")
    if code is ErrorCode.BACKEND_INVALID_RESPONSE and details.get("reason") == "origin_unproven":
        return ("The program listening at ITO_API_URL did not prove that it is the Itô backend your API token "
                "belongs to, so the token was not sent. Another program may hold that port, or the backend does not "
                "offer the origin proof plain http needs: check what listens there, or use an https ITO_API_URL.")
    if code is ErrorCode.BACKEND_INVALID_RESPONSE and details.get("setting") == "ITO_API_URL":
        then = (" Once it is fixed, check with the next command whether anything took effect before running this "
                "command again.") if action is not None else ""
        return ("The backend answered with a redirect, which is never followed: ITO_API_URL must point at the API "
                "origin itself. Fix the setting before trying again; nothing was re-sent." + then)
    if code is ErrorCode.BACKEND_INVALID_RESPONSE and details.get("booking_untouched") is False:
        return ("Check the booking at once: the backend reports that the cleanup changed it, which was never "
                "authorised.")
    if code is ErrorCode.RATE_LIMITED and details.get("reason") == "too_many_pending_requests":
        return ("This account already has as many undecided confirmation requests as the backend allows. Decide "
                "or decline the pending ones at the Itô desk (or let them expire) before opening another.")
    if verb in ("plan", "request-confirmation") and code in (ErrorCode.BACKEND_TIMEOUT, ErrorCode.BACKEND_ERROR):
        return ("If the backend opened a confirmation request before its answer was lost, that request simply "
                "expires unused: nothing is created or spent until someone confirms it at the Itô desk and the "
                "command that uses it runs. Try again later, once.")
    if verb == "plan" and code is ErrorCode.DIGEST_MISMATCH:
        return ("The backend computed a different digest for the manifest bytes it received; nothing was opened. "
                "Run the same plan command once more; if it happens again, report it to the backend's operator.")
    if code is ErrorCode.VALIDATION_REJECTED and details.get("reason") == "no_restart_proposed":
        return ("The backend has no pending restart proposal for this run: a restart is only ever its proposal after "
                "a loss spike, decided once. Nothing was restarted; the next command shows the run's state.")
    if code is ErrorCode.VALIDATION_REJECTED and details.get("reason") == "run_active":
        return ("Cleanup needs a finished run, and this one is still active: it has to finish, or be cancelled "
                "first (request a cancel confirmation, then cancel). The next command follows it.")
    if verb == "confirmation" and code is ErrorCode.CONFIRMATION_NOT_FOUND:
        return ("The backend knows no such confirmation request for this account: check the request id that "
                "'ito-training plan' or 'ito-training request-confirmation' printed.")
    if code is ErrorCode.AUTH_MISSING:
        return _credential(details, error.message)
    if verb in ("cancel", "cleanup", "restart"):
        return _run_action(verb, code, bool(error.retryable))
    if code is ErrorCode.BACKEND_ERROR:
        said = (f"The backend answered with HTTP status {details['status']}. " if "status" in details else
                "The connection to the backend broke before its answer arrived. ")
        if not error.retryable:
            return said + "Retrying will not help."
        if verb == "train":
            return said + ("Before trying again later, check with the next command whether a run was created; then "
                           "run the same train command again (same key).")
        return said + "Try the same command again later."
    return None


def _run_action(verb: str, code: ErrorCode, retryable: bool) -> str | None:
    """Cancel, cleanup and restart: their own confirmation (through request-confirmation) and key."""
    def request(how: str) -> str:
        return (f"request a new {verb} confirmation for this run ({how}), confirm it at the Itô desk, then run the "
                f"{verb} command that 'ito-training confirmation' prints")

    if code is ErrorCode.CONFIRMATION_REQUIRED:
        return f"A {verb} needs its own confirmation first: {request('the next command')}."
    if code in (ErrorCode.CONFIRMATION_NOT_FOUND, ErrorCode.CONFIRMATION_EXPIRED, ErrorCode.CONFIRMATION_MISMATCH):
        return f"This confirmation cannot be used for this {verb}. If you still want it, {request('the next command')}."
    if code is ErrorCode.CONFIRMATION_CONSUMED:
        return (f"That confirmation was already used. If you are repeating an earlier {verb} command, the next "
                f"command shows whether it took effect; otherwise "
                f"{request(f'ito-training request-confirmation --action {verb}')}.")
    if code in (ErrorCode.SUBMISSION_OUTCOME_UNKNOWN, ErrorCode.IDEMPOTENCY_IN_FLIGHT):
        return (f"The {verb} may or may not have taken effect. Check the run with the next command; if the {verb} "
                f"has not happened, run the same {verb} command again (same key and reference), never with a new "
                "key.")
    if code is ErrorCode.BACKEND_ERROR:
        return ("The backend failed to answer (the details say how). Check the run with the next "
                "command; " + (f"if the {verb} has not happened, run the same {verb} command again later (same key "
                                "and reference)." if retryable else "retrying will not help."))
    return None


def _credential(details: Mapping[str, Any], message: str) -> str:
    """AUTH_MISSING: which setting, and what is wrong with it (the message names the fix)."""
    setting, problem = details.get("setting"), str(details.get("problem", ""))
    if setting == "ITO_TOKEN_FILE":
        if problem in ("file_mode_0600", "file_permissions"):
            fix = re.search(r"\brun (chmod 600 .+)$", message)
            return ("The token file's permissions are too open: run "
                    + (fix.group(1) if fix else "chmod 600 on it") + " (only you can), then try again.")
        if problem == "file_owner":
            return "The token file must belong to the account this command runs as; only its owner can fix that."
        if problem == "file_symlink":
            return "Point ITO_TOKEN_FILE at the real file: a symlink anywhere on the path is refused."
        if problem == "malformed":
            return "The token file does not hold a usable token; put the token alone in it."
        if problem.startswith("file_"):
            return "ITO_TOKEN_FILE does not name a usable file (the message says why): correct the setting."
    if setting == "ITO_API_KEY" and problem == "malformed":
        return ("ITO_API_KEY is set but does not hold a usable token: correct it in this command's environment, or "
                "use ITO_TOKEN_FILE instead.")
    return BY_CODE[ErrorCode.AUTH_MISSING]


# ---------------------------------------------------------------------------- successes


def _success(notice: str, data: Mapping[str, Any]) -> str:
    core, clamped = _without_clamp_note(notice)
    text = _success_table().get(core)
    run_id = data.get("run_id")
    if text is None and isinstance(run_id, str):
        for action in _ACTIONS:
            if core == notices.request_opened(action, run_id):
                text = _opened(action, run_id)
    if text is None:
        text = translate(core)  # a notice this table does not know yet (the tests catch it)
    if clamped is not None:
        text = (f"{text} The wait asked for (--wait) was above this command's limit of {clamped} s "
                "(ITO_TRAINING_MAX_WAIT_S), so it waited at most that long.").strip()
    return text


def _without_clamp_note(notice: str) -> tuple[str, int | None]:
    found = re.search(r"limit of (\d+) s", notice)
    if found is not None:
        note = notices.clamp_note(int(found.group(1)))
        if notice.endswith(note):
            return notice.removesuffix(note), int(found.group(1))
    return notice, None


@functools.cache
def _success_table() -> dict[str, str]:
    """The core's success notices, each with the person's sentence."""
    n = notices
    table = {
        n.NOTICE_DIGESTED:
            "The manifest was read and digested on this machine; nothing was sent anywhere. Read the review summary "
            "and the SHA-256 above; then plan it for a booking: the backend checks it and opens a confirmation "
            "request that you review and confirm at the Itô desk.",
        n.NOTICE_AVAILABLE:
            "Training is available on the configured backend; nothing has been created. Next, check the booking "
            "you want to train on.",
        n.NOTICE_ELIGIBLE:
            "Training is available and this booking is eligible right now; nothing has been created. Next, plan a "
            "run from your manifest: the plan shows what you would confirm, the backend's checks and its estimate "
            "('ito-training digest' shows the review summary alone, without contacting the backend).",
        n.NOTICE_CREATED:
            "One training run was created. Running the same train command again (same --idempotency-key) returns "
            "this run and never creates a second one, so never change the key to retry. Follow the run with the "
            "next command.",
        n.NOTICE_RECOVERED:
            "The first answer was lost or unclear, so the run was looked up by its idempotency key and found; no "
            "second run was created. Follow it with the next command.",
        n.NOTICE_EXISTING:
            "A run already existed for this idempotency key, so that run is shown unchanged: nothing new started, "
            "and the confirmation reference given to this command was not used. Repeating an earlier train command "
            "looks exactly like this. If you confirmed a new run, its confirmation is still unused: run the train "
            "command that 'ito-training confirmation' printed for it, whose key is its own.",
        n.NOTICE_NO_RUN:
            "No run exists for this idempotency key. If a submission with this key is still in flight it may "
            "appear shortly; otherwise no run was created. Running the train command again with the same key can "
            "never create a second run; never use a new key for the same run.",
        n.NOTICE_STATUS: "The run is in progress; the next command follows it.",
        n.NOTICE_STILL_RUNNING:
            "The wait ended before the run finished; it is still in progress. The next command keeps following it.",
        n.NOTICE_TERMINAL: "The run has finished: its state and each stage's gate are shown above.",
        n.NOTICE_GATE_FAILED:
            "A stage's eval gate failed (listed above) and the run stopped in gate_failed. Nothing can override a "
            "failed gate, and submitting again will not get around it.",
        n.NOTICE_LOGS: "More log lines follow: the next command reads the next page.",
        n.NOTICE_LOGS_END:
            "These are the latest log lines. If the run has finished (ito-training status --run shows its state), "
            "this is the whole log and what follows is cleanup: ito-training request-confirmation --action cleanup. "
            "While it runs, the next command reads the lines added since, from the same cursor.",
        n.NOTICE_READ_ONLY: "This is a read-only answer from the backend; nothing was changed.",
        n.NOTICE_CANCELLED:
            "The run was cancelled (or is being cancelled) as confirmed. Nothing else was changed; the booking is "
            "untouched. Cleaning up is a separate action with its own confirmation: the next command requests it.",
        n.NOTICE_CLEANED:
            "The run's artefacts listed above were cleaned up as confirmed. The booking was not released or "
            "modified.",
        n.NOTICE_RESTART_PROPOSED:
            "The backend paused the run after a loss spike and proposes a restart from an earlier checkpoint (shown "
            "above, with the steps that would run again and their cost). Nothing happens unless you decide: if you "
            "want the restart, the next command asks for it and you confirm at the Itô desk; declining there lets "
            "the run continue from where it paused.",
        n.NOTICE_RESTARTED:
            "The run restarted from the proposed checkpoint as confirmed; the steps since it run again. Nothing else "
            "was changed; the booking is untouched. The next command follows the run.",
        n.NOTICE_PLAN_VALID:
            "The backend checked this plan and opened a confirmation request; nothing was created or spent. Open "
            "the review URL above and sign in at the Itô desk yourself (the link carries no sign-in); read what "
            "the desk shows, including the estimate and the maximum cost, and confirm or decline there. The next "
            "command waits for the decision and, once it is confirmed, prints the train command. Do not plan the "
            "same manifest again while this request is pending.",
        n.NOTICE_PLAN_INVALID:
            "The backend's checks refused this plan (the failed checks and their reasons are above). No "
            "confirmation request was opened and nothing was created. Change the manifest (or choose another "
            "booking), then plan again.",
    }
    for action in _ACTIONS:
        for status in _STATUSES:
            table[n.request_status(action, status)] = _decided(action, status)
        for user_action in _USER_ACTIONS:
            table[n.elicited(user_action, action)] = (
                "The review link was offered through your client; that is not a decision. Decide at the Itô desk, "
                "where you sign in yourself; the next command waits for the decision.")
    return table


def _opened(action: str, run_id: str) -> str:
    verb = action.removeprefix("training.")
    what = {"cancel": f"to cancel run {run_id}", "cleanup": f"to clean up run {run_id}",
            "restart": f"to restart run {run_id} from the proposed checkpoint"}.get(verb, f"for {action}")
    return (f"A confirmation request {what} was opened; nothing has changed yet. Open the review "
            "URL above and sign in at the Itô desk yourself (the link carries no sign-in); read it and confirm or "
            f"decline there. The next command waits for the decision and, once it is confirmed, prints the {verb} "
            "command with a key of its own.")


def _decided(action: str, status: str) -> str:
    verb = {"training.create": "train", "training.cancel": "cancel", "training.cleanup": "cleanup",
            "training.restart": "restart"}[action]
    if status == "confirmed":
        does = {"train": "submits exactly the manifest that was confirmed", "cancel": "cancels the run",
                "cleanup": "cleans the run up", "restart": "restarts the run from the proposed checkpoint"}[verb]
        return (f"Confirmed at the Itô desk. The next command {does}, with this confirmation and the idempotency "
                f"key of this request; if it has to be retried, run exactly the same command again. The reference "
                "is single use and expires.")
    if status == "declined" and verb == "restart":
        return ("Declined at the Itô desk: nothing was restarted, and the run continues from where it paused. The "
                "next command follows it; stopping it would be a cancel of its own.")
    if status == "declined":
        return "Declined at the Itô desk: nothing will be created, cancelled or cleaned up for this request."
    if status == "expired" and verb == "cancel":
        return ("The request expired before anyone decided it, or the run finished first; nothing happened. Check "
                "the run's state first (ito-training status --run with the run id above): a finished run cannot be "
                "cancelled, only cleaned up.")
    if status == "expired":
        again = "plan it again" if verb == "train" else f"request a new {verb} confirmation"
        return (f"The request expired before anyone decided it; nothing happened. If you still want this, {again} "
                "and decide at the Itô desk.")
    return ("Nobody has decided yet: open the review link and decide at the Itô desk. The next command keeps "
            "waiting. Nothing happens until it is confirmed, and there is no need to open another request.")


def for_cli(verb: str, arguments: Mapping[str, Any], envelope: Envelope) -> tuple[Envelope, str | None]:
    """The envelope as the CLI prints it (the notice in the person's words, the message through the
    mapping, the flag named), and the next command. The JSON form carries the command at the end
    of its notice."""
    nxt = next_command(verb, arguments, envelope)
    notice = person_notice(verb, arguments, envelope, nxt)
    if nxt is not None:
        notice = f"{notice} Next command: {nxt}"
    update: dict[str, Any] = {"notice": notice}
    if envelope.error is not None:
        update["error"] = envelope.error.model_copy(update={
            "message": person_message(envelope.error.message), "details": details_for_cli(envelope.error.details)})
    return envelope.model_copy(update=update), nxt
