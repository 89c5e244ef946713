"""The notices an agent reads on success: what happened, and the one next step."""

from __future__ import annotations

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
