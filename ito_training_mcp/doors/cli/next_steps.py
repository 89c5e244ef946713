"""Next steps for a person at a terminal: CLI verbs and flags, not MCP tools and arguments.

Two parts. The words: the core writes its notices for agents ("Tell the user ...", "call
training_status with the same idempotency_key"); the notice the CLI prints is its own, written for
the person (`person.py`). What the CLI does keep from the core -- the refusal message, a
description rather than an instruction -- passes ONE mapping, tool to verb (`VERBS`) and argument
to flag (`FLAGS`), with references into the envelope (`data.x`, `error.details.y`) turned into
words (`translate`). tests/test_cli_next_steps.py renders every code and every notice of the core
through the CLI and fails on any tool name, snake_case argument or agent-addressed phrase left.

The command: `next_command` builds the one command to run next from what the call returned (the
run id, the request id, the key), so the person can copy it. A value is only put in a command when
it is an identifier of the documented shape that the egress left unchanged, or a path that is
shell-quoted; otherwise the flag's placeholder (RUN_ID, KEY, PATH ...) stands in.

Suggested idempotency keys are derived from the confirmation REQUEST: one intent is one request
(a plan, or a cancel or cleanup request), so `train-<request_id>`, `cancel-<request_id>`,
`cleanup-<request_id>` is the same for every retry of that intent and different for the next one.
A second, deliberately confirmed run of the same manifest therefore gets a key of its own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from ito_training_mcp.egress.clean import clean_line
from ito_training_mcp.envelope import Envelope, ErrorCode

PROG = "ito-training"

# Every tool the core offers, and the CLI verb that calls it.
VERBS: dict[str, str] = {
    "check_training_availability": "check",
    "digest_manifest": "digest",
    "plan_training": "plan",
    "request_confirmation": "request-confirmation",
    "confirmation_status": "confirmation",
    "submit_training": "train",
    "training_status": "status",
    "training_logs": "logs",
    "training_metrics": "metrics",
    "list_checkpoints": "checkpoints",
    "cancel_training": "cancel",
    "cleanup_training": "cleanup",
    "restart_training": "restart",
}
TOOLS: dict[str, str] = {verb: tool for tool, verb in VERBS.items()}

# Every tool argument, and the CLI flag that carries it (the same flag in every verb).
FLAGS: dict[str, str] = {
    "booking_id": "--booking",
    "manifest_path": "--manifest",
    "confirmation_ref": "--confirmation-ref",
    "idempotency_key": "--idempotency-key",
    "run_id": "--run",
    "request_id": "--request",
    "wait_seconds": "--wait",
    "action": "--action",
    "cursor": "--cursor",
    "limit": "--limit",
}
ARGUMENTS: dict[str, str] = {flag: argument for argument, flag in FLAGS.items()}
PLACEHOLDERS: dict[str, str] = {
    "--booking": "BOOKING_ID", "--manifest": "PATH", "--confirmation-ref": "REF", "--idempotency-key": "KEY",
    "--run": "RUN_ID", "--request": "REQUEST_ID", "--wait": "SECONDS", "--action": "cancel|cleanup|restart",
    "--cursor": "CURSOR", "--limit": "N",
}
DEFAULT_WAIT_S = 55  # the core's longest single wait (ITO_TRAINING_MAX_WAIT_S default)

# Words for the envelope fields a notice refers to; any other field reads as its name in words.
_FIELD_WORDS = {
    "sha256": "SHA-256", "review_text": "review summary", "review_url": "review URL",
    "max_cost_usd": "maximum cost", "next_cursor": "next cursor", "failed_gates": "failed gates",
    "failed_checks": "failed checks", "confirmation_ref": "confirmation reference", "run_id": "run id",
    "request_id": "request id", "booking_id": "booking id", "idempotency_key": "idempotency key",
    "retry_after_s": "retry-after seconds", "confirmation_request": "confirmation request",
    "cleaned": "list of what was cleaned", "proposed_actions": "proposed actions",
}
_SNAKE_ARGUMENTS = sorted((a for a in FLAGS if "_" in a), key=len, reverse=True)
_TOOL_ALTERNATION = "|".join(sorted(map(re.escape, VERBS), key=len, reverse=True))
_ARG_ALTERNATION = "|".join(map(re.escape, sorted(FLAGS, key=len, reverse=True)))

_FIELD_REF = re.compile(r"(?<![\w.])(data|error)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?![\w])")
_ASSIGNED = re.compile(rf"(?<![\w-])({_ARG_ALTERNATION}) = ")
_CALL_TOOL = re.compile(rf"\b([Cc])all(s|ing|ed)? ({_TOOL_ALTERNATION})\b")
_TOOL = re.compile(rf"(?<![\w-])({_TOOL_ALTERNATION})(?![\w-])")
_CALL_AGAIN = re.compile(r"\b([Cc])all again\b")
_THE_ARGUMENT = re.compile(rf"\b([Tt]he|[Aa]n?|[Ee]very|[Aa]ny) argument (?:({_ARG_ALTERNATION})\b|(?=named\b))")
_TOOL_ARGUMENTS = re.compile(r"\btool arguments?\b")
_SNAKE_ARG = re.compile(rf"(?<![\w-])({'|'.join(map(re.escape, _SNAKE_ARGUMENTS))})(?![\w])")
_BARE_FIELDS = sorted((f for f in _FIELD_WORDS if f not in FLAGS and "_" in f), key=len, reverse=True)
_BARE_FIELD = re.compile(rf"(?<![\w.-])({'|'.join(map(re.escape, _BARE_FIELDS))})(?![\w])")
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_KEY = re.compile(r"[A-Za-z0-9._:-]{16,255}")
_CURSOR = re.compile(r"[A-Za-z0-9._:=-]{1,512}")


def command(verb: str) -> str:
    return f"'{PROG} {verb}'"


def _field_words(match: re.Match[str]) -> str:
    root, path = match.group(1), [p for p in match.group(2).split(".") if p]
    if root == "error":
        if not path:
            return "the error"
        if path == ["message"]:
            return "the error message"
        if path[0] == "details":
            return "the error details" if len(path) == 1 else f"the {_words(path[-1])} in the error details"
        return f"the error's {_words(path[-1])}"
    return f"the result's {_words(path[-1])}"


def _words(field: str) -> str:
    return _FIELD_WORDS.get(field, field.replace("_", " "))


def translate(text: str) -> str:
    """An agent's notice or message, reworded for a person at a terminal."""
    text = _FIELD_REF.sub(_field_words, text)
    text = _ASSIGNED.sub(lambda m: f"{FLAGS[m.group(1)]} set to ", text)
    text = _CALL_TOOL.sub(
        lambda m: f"{'R' if m.group(1) == 'C' else 'r'}un{_RUN_SUFFIX[m.group(2) or '']} {command(VERBS[m.group(3)])}",
        text,
    )
    text = _TOOL.sub(lambda m: command(VERBS[m.group(1)]), text)
    text = _CALL_AGAIN.sub(lambda m: f"{'R' if m.group(1) == 'C' else 'r'}un it again", text)
    text = _THE_ARGUMENT.sub(lambda m: f"{m.group(1)} flag " + (FLAGS[m.group(2)] if m.group(2) else ""), text)
    text = _TOOL_ARGUMENTS.sub("command-line flags", text)
    text = _BARE_FIELD.sub(lambda m: _words(m.group(1)), text)
    return _SNAKE_ARG.sub(lambda m: FLAGS[m.group(1)], text)


_RUN_SUFFIX = {"": "", "s": "s", "ing": "ning", "ed": ""}


# ---------------------------------------------------------------------------- the next command


def _id(value: object) -> str | None:
    if isinstance(value, str) and _ID.fullmatch(value) and set(value) != {"."} and clean_line(value) == value:
        return value
    return None


def _key(value: object) -> str | None:
    if isinstance(value, str) and _KEY.fullmatch(value) and clean_line(value) == value:
        return value
    return None


def _path(value: object) -> str | None:
    if (isinstance(value, str) and value.startswith("/") and len(value) <= 4096 and value.isprintable()
            and clean_line(value) == value):
        return shlex.quote(value)
    return None


def build(verb: str, *pairs: tuple[str, str | None]) -> str:
    """`ito-training VERB --flag value ...`, placeholders for unknown values."""
    parts = [PROG, verb]
    for flag, value in pairs:
        parts += [flag, value if value is not None else PLACEHOLDERS[flag]]
    return " ".join(parts)


def request_key(action: str, request_id: object) -> str | None:
    """The key for the mutation a confirmation request authorises (`train`, `cancel`, `cleanup`):
    derived from the request, so every retry of that intent reuses it and the next intent (a new
    plan, a new request) gets another. Padded to the 16 characters a key needs at least."""
    request = _id(request_id)
    return None if request is None else _key(f"{action}-{request}".ljust(16, "-"))


def _wait() -> tuple[str, str]:
    return ("--wait", str(DEFAULT_WAIT_S))


def next_command(verb: str, arguments: Mapping[str, Any], envelope: Envelope) -> str | None:
    """The one command a person runs next, or None when there is nothing to run.

    `arguments` are the tool's arguments plus what the command line carried for the next step only
    (`confirmation --manifest`, which completes the printed train command and is never read)."""
    data = envelope.data or {}
    if envelope.error is not None:
        return _after_refusal(verb, arguments, envelope)
    run_id = _id(data.get("run_id")) or _id(arguments.get("run_id"))
    if verb == "check":
        booking = data.get("booking")
        if not isinstance(booking, dict):
            return build("check", ("--booking", None))
        if not booking.get("eligible"):
            return None
        return build("plan", ("--booking", _id(booking.get("booking_id")) or _id(arguments.get("booking_id"))),
                     ("--manifest", None))
    if verb == "digest":
        return build("plan", ("--booking", None), ("--manifest", _path(data.get("path"))))
    if verb == "plan":
        opened = data.get("confirmation_request")
        if data.get("valid") and isinstance(opened, dict):
            return _confirmation(_id(opened.get("request_id")), _path(arguments.get("manifest_path")))
        return None  # the person changes the manifest (or the booking) first
    if verb == "request-confirmation":
        return _confirmation(_id(data.get("request_id")), None)
    if verb == "confirmation":
        return _after_decision(data, arguments)
    if verb == "train":
        return build("status", ("--run", run_id), _wait())
    if verb == "status":
        if data.get("found") is False:
            return build("status", ("--idempotency-key", _key(data.get("idempotency_key"))), _wait())
        if data.get("terminal"):
            return build("logs", ("--run", run_id))
        if any(isinstance(p, dict) and p.get("status") == "pending" for p in data.get("proposed_actions") or []):
            return build("request-confirmation", ("--action", "restart"), ("--run", run_id))
        return build("status", ("--run", run_id), _wait())
    if verb == "logs":
        cursor = _cursor(data.get("next_cursor"))
        if cursor is not None:
            return build("logs", ("--run", run_id), ("--cursor", cursor))
        # The end for now: the same page again later shows lines added since (the core's advice).
        same = _cursor(arguments.get("cursor"))
        return build("logs", ("--run", run_id), *((("--cursor", same),) if same is not None else ()))
    if verb == "cancel":
        return build("request-confirmation", ("--action", "cleanup"), ("--run", run_id))
    if verb == "restart":
        return build("status", ("--run", run_id), _wait())
    return None


def _cursor(value: object) -> str | None:
    if isinstance(value, str) and _CURSOR.fullmatch(value) and clean_line(value) == value:
        return value
    return None


def _confirmation(request_id: str | None, manifest: str | None) -> str:
    """`confirmation --request R --wait 55`, with `--manifest PATH` when the path is known: it is
    carried only to fill in the train command printed once the person confirmed."""
    extra = (("--manifest", manifest),) if manifest is not None else ()
    return build("confirmation", ("--request", request_id), _wait(), *extra)


def _after_decision(data: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """After `confirmation`: the mutation once confirmed, waiting again while pending."""
    status, action = data.get("status"), data.get("action")
    request_id = _id(data.get("request_id")) or _id(arguments.get("request_id"))
    manifest = _path(arguments.get("manifest_path"))
    if status == "pending":
        return _confirmation(request_id, manifest if action == "training.create" else None)
    if status == "declined" and action == "training.restart":  # the run goes on from where it paused
        return build("status", ("--run", _id(data.get("run_id"))), _wait())
    if status != "confirmed":
        return None  # declined: stop; expired: only if the person still wants it, plan or request again
    ref = _id(data.get("confirmation_ref"))
    run_id = _id(data.get("run_id"))
    if action == "training.create":
        return build("train", ("--booking", _id(data.get("booking_id"))), ("--manifest", manifest),
                     ("--confirmation-ref", ref), ("--idempotency-key", request_key("train", request_id)))
    if action in ("training.cancel", "training.cleanup", "training.restart"):
        verb = str(action).removeprefix("training.")
        return build(verb, ("--run", run_id), ("--confirmation-ref", ref),
                     ("--idempotency-key", request_key(verb, request_id)))
    return None


_LOOK_UP_BY_KEY = frozenset({ErrorCode.SUBMISSION_OUTCOME_UNKNOWN, ErrorCode.IDEMPOTENCY_IN_FLIGHT,
                             ErrorCode.CONFIRMATION_CONSUMED})
_CONFIRM_AGAIN = frozenset({ErrorCode.CONFIRMATION_REQUIRED, ErrorCode.CONFIRMATION_NOT_FOUND,
                            ErrorCode.CONFIRMATION_EXPIRED, ErrorCode.CONFIRMATION_MISMATCH})


def _after_refusal(verb: str, arguments: Mapping[str, Any], envelope: Envelope) -> str | None:
    error = envelope.error
    assert error is not None
    if error.code is ErrorCode.INVALID_INPUT:
        return None  # nothing typed is repeated: the person fixes the flag named in the message
    details = error.details or {}
    run_id = _id(details.get("run_id")) or _id(arguments.get("run_id"))
    if details.get("reason") == "run_active":  # a cleanup (or its request) of a run still going: follow it
        return build("status", ("--run", run_id), _wait())
    if error.code is ErrorCode.RUN_NOT_CANCELLABLE:  # finished or being cancelled: its state says which
        return build("status", ("--run", run_id))
    redirected = (error.code is ErrorCode.BACKEND_INVALID_RESPONSE and details.get("setting") == "ITO_API_URL"
                  and details.get("reason") != "origin_unproven")  # unproven: nothing was sent with the token
    if verb == "train":
        key = _key(details.get("idempotency_key")) or _key(arguments.get("idempotency_key"))
        if error.code in _LOOK_UP_BY_KEY or (error.code is ErrorCode.BACKEND_ERROR and error.retryable) or redirected:
            return build("status", ("--idempotency-key", key))
        if error.code in _CONFIRM_AGAIN:
            return build("plan", ("--booking", _id(arguments.get("booking_id"))),
                         ("--manifest", _path(arguments.get("manifest_path"))))
        return None
    if details.get("reason") == "no_restart_proposed":  # nothing to restart: its state says what happened
        return build("status", ("--run", run_id))
    if verb in ("cancel", "cleanup", "restart"):
        if error.code in _LOOK_UP_BY_KEY | {ErrorCode.BACKEND_ERROR} or redirected:
            return build("status", ("--run", run_id))
        if error.code in _CONFIRM_AGAIN:
            return build("request-confirmation", ("--action", verb), ("--run", run_id))
    return None


def details_for_cli(details: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`details.argument` names the flag in the CLI (as a usage error does), not the tool argument."""
    if not details:
        return None if details is None else dict(details)
    shown = dict(details)
    argument = shown.get("argument")
    if isinstance(argument, str) and argument in FLAGS:
        shown["argument"] = FLAGS[argument]
    return shown
