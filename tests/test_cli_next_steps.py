"""The CLI speaks to a person: next steps name CLI verbs and flags, never MCP tools and arguments,
and address the person, never an agent.

The core writes notices for agents. The CLI prints its own sentence for the person (cli_person.py)
and passes the refusal message through one mapping (tool -> verb, argument -> flag, `data.x` ->
words). These tests render, through the CLI's own renderers (human and `--json`), every code's next
step in the registry, every success notice in `service/notices.py`, the core's situation-specific
next steps and every gate-0 refusal message, and assert that no tool name, no snake_case argument
name and no agent-addressed phrase ("the user", "hand control back", "data.") survives. A notice
added to the core in a new phrasing fails here until the CLI has words for it.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import pytest

from ito_training_mcp.doors.cli import main as cli
from ito_training_mcp.doors.cli.next_steps import FLAGS, VERBS, next_command, translate
from ito_training_mcp.doors.cli.person import for_cli
from ito_training_mcp.doors.cli.render import render_human, render_json
from ito_training_mcp.envelope import CODES, Envelope, ErrorCode, Gate, refusal, success
from ito_training_mcp.errors import Refusal
from ito_training_mcp.service import TrainingService, notices
from ito_training_mcp.tools.specs import ALL_TOOLS

TOOL_NAMES = sorted(spec.name for spec in ALL_TOOLS)
ARGUMENT_NAMES = sorted({name for spec in ALL_TOOLS for name in spec.argument_names})
SNAKE_ARGUMENTS = [name for name in ARGUMENT_NAMES if "_" in name]
FORBIDDEN = re.compile(
    r"(?<![\w-])(" + "|".join(map(re.escape, sorted({*TOOL_NAMES, *VERBS, *SNAKE_ARGUMENTS, *FLAGS}
                                                   - {"action", "cursor", "limit"}, key=len, reverse=True)))
    + r")(?![\w])"
)
VERB_OF = {spec.name: VERBS[spec.name] for spec in ALL_TOOLS}
SAMPLE_DATA: dict[str, Any] = {"run_id": "run_1", "state": "running", "stages": []}


# Words for an agent, not for the person at the terminal (who is "the user"), and a known garble.
AGENT_PHRASES = re.compile(
    r"\bthe user\b|\bhand(?:s|ing)? control back\b|\breturn control\b|\bcalling agent\b|\btell them\b|"
    r"\bask them\b|\bshow them\b|\bfor them\b|\bdrive the desk\b|"
    r"(?<![\w.])(?:data|error)\.[a-z_]|\bthe same run it\b|\bcall (?:again|it)\b|\bwhen asked to\b",
    re.IGNORECASE,
)


def leftovers(text: str) -> list[str]:
    """Tool names, snake_case argument names and agent-addressed phrases still in `text` (dashed flags
    and quoted verbs are fine)."""
    return FORBIDDEN.findall(text) + AGENT_PHRASES.findall(text)


def test_the_phrase_check_can_fail() -> None:
    for agent in ("Tell the user the run failed.", "Hand control back.", "Show the user data.review_text.",
                  "see error.details.files", "Make the same run it again when asked to.",
                  "You cannot confirm for them and must not open or drive the desk yourself."):
        assert leftovers(agent), agent
    assert leftovers("Run 'ito-training status' with --run set to the result's run id.") == []


def cli_outputs(verb: str, envelope: Envelope, arguments: dict[str, Any] | None = None) -> list[str]:
    """What a person sees: the human form whole, and from the JSON form the words (notice, message)."""
    shown, nxt = for_cli(verb, arguments or {}, envelope)
    human = render_human(shown, verb, nxt)
    wire = json.loads(render_json(shown))
    words = [wire["notice"]]
    if wire.get("error"):
        words.append(wire["error"]["message"])
        argument = (wire["error"]["details"] or {}).get("argument")
        if argument is not None:
            words.append(str(argument))
    return [human, *words]


# ---------------------------------------------------------------------------- the mapping


def test_every_tool_has_a_verb_and_every_argument_a_flag() -> None:
    assert set(TOOL_NAMES) <= set(VERBS)
    assert set(ARGUMENT_NAMES) <= set(FLAGS)
    assert len(set(VERBS.values())) == len(VERBS) and len(set(FLAGS.values())) == len(FLAGS)


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda s: s.name)
def test_each_verb_calls_its_tool_and_takes_each_argument_as_its_flag(spec: Any) -> None:
    verb = VERBS[spec.name]
    assert cli.COMMANDS[verb].tool == spec.name
    parser = cli.build_parser().subcommands[verb]
    for argument in spec.argument_names:
        assert FLAGS[argument] in parser.known_flags(), (verb, argument)


# ---------------------------------------------------------------------------- exhaustive: every notice


@pytest.mark.parametrize("code", list(CODES), ids=lambda c: c.value)
def test_every_codes_next_step_names_cli_verbs_and_flags(code: ErrorCode) -> None:
    envelope = refusal(code, f"Refused ({code.value}).", live_api_contacted=False, gate=Gate.INPUT,
                       details={"argument": "idempotency_key", "reason": "x"})
    for verb in VERB_OF.values():
        for text in cli_outputs(verb, envelope):
            assert leftovers(text) == [], (verb, text)


def _success_notices() -> list[tuple[str, str]]:
    """Every notice constant in service/notices.py, and every notice-making function called with
    each value its parameters can take."""
    found = [(name, value) for name, value in vars(notices).items() if name.startswith("NOTICE") and isinstance(
        value, str)]
    samples: dict[str, list[Any]] = {
        "action": ["training.create", "training.cancel", "training.cleanup"], "run_id": ["run_1"],
        "request_id": ["creq_1"], "status": ["pending", "confirmed", "declined", "expired"],
        "user_action": ["accept", "decline", "cancel", "unanswered"], "limit_s": [55],
    }
    for name, function in inspect.getmembers(notices, inspect.isfunction):
        if function.__module__ != notices.__name__ or name.startswith("_"):
            continue
        parameters = list(inspect.signature(function).parameters)
        choices: list[dict[str, Any]] = [{}]
        for parameter in parameters:
            choices = [{**c, parameter: v} for c in choices for v in samples.get(parameter, [55])]
        for kwargs in choices:
            text = function(**kwargs)
            if isinstance(text, str):
                found.append((f"{name}({kwargs})", text))
    assert len(found) >= 15
    return found


@pytest.mark.parametrize(("name", "notice"), _success_notices(), ids=lambda v: v if len(v) < 40 else "")
def test_every_success_notice_names_cli_verbs_and_flags(name: str, notice: str) -> None:
    del name
    for verb in VERB_OF.values():
        for text in cli_outputs(verb, success(dict(SAMPLE_DATA), notice=notice, live_api_contacted=True)):
            assert leftovers(text) == [], (verb, text)


def _core_next_steps() -> list[str]:
    """The next steps the core writes for a specific situation instead of the registry's."""
    from ito_training_mcp.backend.client.refusals import redirect as redirect_refusal
    from ito_training_mcp.service import base, lifecycle

    steps = []
    for action in ("cancel", "cleanup"):
        for code in ErrorCode:
            details = {"reason": "run_active"} if code is ErrorCode.VALIDATION_REJECTED else None
            step = lifecycle._mutation_next_step(Refusal(code, "x", gate=None, details=details), action)
            if step is not None:
                steps.append(step)
        for mutation in (True, False):
            redirect = redirect_refusal(302, Gate.CREATE, mutation)
            steps += [redirect.next_step or "", redirect.message]
    for facts in ({"idempotency_key": "key-0000000000000001"},
                  {"idempotency_key": "key-0000000000000001", "action": "cancel", "run_id": "run_1"},
                  {"idempotency_key": "key-0000000000000001", "action": "cleanup", "run_id": "run_1"}):
        for sent in (True, False):
            call = base.Call(tool="submit_training", facts=dict(facts), mutation_sent=sent)
            interrupted = base._interrupted(call)
            steps.append(interrupted.notice)
    return steps


@pytest.mark.parametrize("step", _core_next_steps())
def test_the_cores_specific_next_steps_name_cli_verbs_and_flags(step: str) -> None:
    for verb in ("train", "cancel", "cleanup", "status"):
        envelope = refusal(ErrorCode.SUBMISSION_OUTCOME_UNKNOWN, "x", live_api_contacted=True, gate=Gate.CREATE,
                           next_step=step)
        for text in cli_outputs(verb, envelope):
            assert leftovers(text) == [], (verb, text)


def _bad_values(schema: dict[str, Any]) -> list[Any]:
    return [5, "", "x" * 300, "a b", -1, 10**6, True, None]


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda s: s.name)
async def test_every_gate_zero_refusal_names_flags(spec: Any) -> None:
    """Each argument in turn made malformed (and one missing): the core's gate-0 message, through the CLI."""
    good: dict[str, Any] = {"booking_id": "bk_1", "manifest_path": "/tmp/m.json", "confirmation_ref": "cf_1",
                            "idempotency_key": "k" * 16, "run_id": "run_1", "request_id": "creq_1",
                            "action": "training.cancel", "wait_seconds": 0, "cursor": "c", "limit": 5}
    service = TrainingService({})
    seen = 0
    for argument in sorted(spec.argument_names):
        for bad in _bad_values({}):
            arguments = {a: good[a] for a in spec.argument_names} | {argument: bad}
            envelope = await service.invoke(spec.name, {k: v for k, v in arguments.items() if v is not None})
            if envelope.error is None or envelope.error.gate is not Gate.INPUT:
                continue
            seen += 1
            for text in cli_outputs(VERBS[spec.name], envelope, arguments):
                assert leftovers(text) == [], text
    assert seen > 0 or not spec.argument_names


# ---------------------------------------------------------------------------- the words themselves


@pytest.mark.parametrize(("agent", "person"), [
    ("call training_status with the same idempotency_key",
     "run 'ito-training status' with the same --idempotency-key"),
    ("Call training_logs again with cursor = data.next_cursor.",
     "Run 'ito-training logs' again with --cursor set to the result's next cursor."),
    ("(data.run_id)", "(the result's run id)"),
    ("the reason in error.details.reason", "the reason in the reason in the error details"),
    ("The argument run_id must be a string.", "The flag --run must be a string."),
    ("optionally with wait_seconds", "optionally with --wait"),
    ("cancelled with cancel_training (its own confirmation)", "cancelled with 'ito-training cancel' (its own "
                                                              "confirmation)"),
    ("every data reference and the data policy", "every data reference and the data policy"),
    ("call submit_training with booking_id = data.booking_id, confirmation_ref = data.confirmation_ref",
     "run 'ito-training train' with --booking set to the result's booking id, --confirmation-ref set to the "
     "result's confirmation reference"),
    ("Show the user the review_url; then call confirmation_status with request_id = "
     "data.confirmation_request.request_id (with wait_seconds)",
     "Show the user the review URL; then run 'ito-training confirmation' with --request set to the result's "
     "request id (with --wait)"),
    ("open a new request (plan_training for a run, request_confirmation for a cancel)",
     "open a new request ('ito-training plan' for a run, 'ito-training request-confirmation' for a cancel)"),
])
def test_translation_examples(agent: str, person: str) -> None:
    assert translate(agent) == person


# ---------------------------------------------------------------------------- the next command


def _submitted(created: bool = True) -> Envelope:
    return success({"run_id": "run_42", "state": "queued", "created": created, "idempotency_key": "k" * 16,
                    "stages": []}, notice=notices.NOTICE_CREATED, live_api_contacted=True)


@pytest.mark.parametrize(("verb", "arguments", "envelope", "expected"), [
    ("train", {}, _submitted(), "ito-training status --run run_42 --wait 55"),
    ("status", {"run_id": "run_42"}, success({"run_id": "run_42", "found": True, "terminal": False},
                                             notice="n", live_api_contacted=True),
     "ito-training status --run run_42 --wait 55"),
    ("status", {}, success({"run_id": "run_42", "found": True, "terminal": True}, notice="n",
                           live_api_contacted=True), "ito-training logs --run run_42"),
    ("logs", {"run_id": "run_42"}, success({"run_id": "run_42", "next_cursor": "log-7", "lines": []}, notice="n",
                                           live_api_contacted=True),
     "ito-training logs --run run_42 --cursor log-7"),
    # The end of the log for now: the same page again later (with the cursor it was read from, if any).
    ("logs", {"run_id": "run_42"}, success({"run_id": "run_42", "next_cursor": None, "lines": []}, notice="n",
                                           live_api_contacted=True), "ito-training logs --run run_42"),
    ("logs", {"run_id": "run_42", "cursor": "log-9"}, success({"run_id": "run_42", "next_cursor": None, "lines": []},
                                                             notice="n", live_api_contacted=True),
     "ito-training logs --run run_42 --cursor log-9"),
    ("check", {"booking_id": "bk-1"}, success({"booking": {"booking_id": "bk-1", "eligible": True}}, notice="n",
                                              live_api_contacted=True),
     "ito-training plan --booking bk-1 --manifest PATH"),
    ("check", {}, success({"booking": None}, notice="n", live_api_contacted=True),
     "ito-training check --booking BOOKING_ID"),
    ("train", {"idempotency_key": "key-of-the-first-try"},
     refusal(ErrorCode.SUBMISSION_OUTCOME_UNKNOWN, "m", live_api_contacted=True, gate=Gate.CREATE),
     "ito-training status --idempotency-key key-of-the-first-try"),
    ("cancel", {"run_id": "run_42"},
     refusal(ErrorCode.SUBMISSION_OUTCOME_UNKNOWN, "m", live_api_contacted=True, gate=Gate.CREATE),
     "ito-training status --run run_42"),
    ("digest", {}, success({"path": "/tmp/a b/m.json", "sha256": "0" * 64}, notice="n", live_api_contacted=False),
     "ito-training plan --booking BOOKING_ID --manifest '/tmp/a b/m.json'"),
    ("plan", {}, success({"valid": True, "confirmation_request": {"request_id": "creq_9"}}, notice="n",
                         live_api_contacted=True), "ito-training confirmation --request creq_9 --wait 55"),
    ("plan", {"manifest_path": "/tmp/a b/m.json"},
     success({"valid": True, "confirmation_request": {"request_id": "creq_9"}}, notice="n", live_api_contacted=True),
     "ito-training confirmation --request creq_9 --wait 55 --manifest '/tmp/a b/m.json'"),
    ("plan", {}, success({"valid": False, "confirmation_request": None}, notice="n", live_api_contacted=True), None),
    ("request-confirmation", {}, success({"request_id": "creq_8"}, notice="n", live_api_contacted=True),
     "ito-training confirmation --request creq_8 --wait 55"),
    ("confirmation", {"request_id": "creq_7"}, success({"status": "pending", "request_id": "creq_7"}, notice="n",
                                                       live_api_contacted=True),
     "ito-training confirmation --request creq_7 --wait 55"),
    ("confirmation", {"request_id": "creq_7", "manifest_path": "/tmp/a b/m.json"},
     success({"status": "pending", "request_id": "creq_7", "action": "training.create"}, notice="n",
             live_api_contacted=True),
     "ito-training confirmation --request creq_7 --wait 55 --manifest '/tmp/a b/m.json'"),
    # Keys come from the request: one intent, one request, one key (never from the booking and digest,
    # which a second, deliberately confirmed run of the same manifest shares with the first).
    ("confirmation", {}, success({"status": "confirmed", "action": "training.create", "confirmation_ref": "cnf_1",
                                  "request_id": "creq_0123456789abcdef", "booking_id": "bk-1",
                                  "manifest_sha256": "ab" * 32}, notice="n", live_api_contacted=True),
     "ito-training train --booking bk-1 --manifest PATH --confirmation-ref cnf_1 --idempotency-key "
     "train-creq_0123456789abcdef"),
    ("confirmation", {"manifest_path": "/srv/m.json"},
     success({"status": "confirmed", "action": "training.create", "confirmation_ref": "cnf_1",
              "request_id": "creq_0123456789abcdef", "booking_id": "bk-1", "manifest_sha256": "ab" * 32},
             notice="n", live_api_contacted=True),
     "ito-training train --booking bk-1 --manifest /srv/m.json --confirmation-ref cnf_1 --idempotency-key "
     "train-creq_0123456789abcdef"),
    ("confirmation", {}, success({"status": "confirmed", "action": "training.cleanup", "confirmation_ref": "cnf_2",
                                  "request_id": "creq_2", "run_id": "run_42"}, notice="n", live_api_contacted=True),
     "ito-training cleanup --run run_42 --confirmation-ref cnf_2 --idempotency-key cleanup-creq_2--"),
    ("confirmation", {}, success({"status": "confirmed", "action": "training.cancel", "confirmation_ref": "cnf_3",
                                  "request_id": "creq_fedcba9876543210", "run_id": "run_42"}, notice="n",
                                 live_api_contacted=True),
     "ito-training cancel --run run_42 --confirmation-ref cnf_3 --idempotency-key cancel-creq_fedcba9876543210"),
    ("confirmation", {}, success({"status": "declined", "action": "training.create"}, notice="n",
                                 live_api_contacted=True), None),
    ("confirmation", {}, success({"status": "expired", "action": "training.cancel"}, notice="n",
                                 live_api_contacted=True), None),
    ("train", {"booking_id": "bk-1", "manifest_path": "/m.json"},
     refusal(ErrorCode.CONFIRMATION_EXPIRED, "m", live_api_contacted=True, gate=Gate.CONFIRMATION),
     "ito-training plan --booking bk-1 --manifest /m.json"),
    ("cleanup", {"run_id": "run_42"},
     refusal(ErrorCode.CONFIRMATION_REQUIRED, "m", live_api_contacted=False, gate=Gate.INPUT),
     "ito-training request-confirmation --action cleanup --run run_42"),
    ("cancel", {}, success({"run_id": "run_42", "state": "cancelled"}, notice="n", live_api_contacted=True),
     "ito-training request-confirmation --action cleanup --run run_42"),
])
def test_the_next_command(verb: str, arguments: dict[str, Any], envelope: Envelope, expected: str | None) -> None:
    assert next_command(verb, arguments, envelope) == expected
    shown, nxt = for_cli(verb, arguments, envelope)
    if expected is not None:
        assert shown.notice.endswith(f"Next command: {expected}")
        assert f"\nNext command: {expected}\n" in render_human(shown, verb, nxt)


@pytest.mark.parametrize("hostile", ["run 1; rm -rf ~", "run_1\u202e", "$(reboot)", "x" * 300, "ghp_" + "C4n4ry7f3b9c1e5a2d4fQ6b8e0cW9xk2L5mZ"])
def test_values_that_are_not_clean_identifiers_become_placeholders(hostile: str) -> None:
    envelope = success({"run_id": hostile, "found": True, "terminal": False}, notice="n", live_api_contacted=True)
    assert next_command("status", {}, envelope) == "ito-training status --run RUN_ID --wait 55"
    refused = refusal(ErrorCode.SUBMISSION_OUTCOME_UNKNOWN, "m", live_api_contacted=True, gate=Gate.CREATE,
                      details={"idempotency_key": hostile})
    assert next_command("train", {"idempotency_key": hostile}, refused) == \
        "ito-training status --idempotency-key KEY"


def test_a_gate_zero_refusal_repeats_nothing_typed() -> None:
    envelope = refusal(ErrorCode.INVALID_INPUT, "The argument run_id must be ...", live_api_contacted=False,
                       gate=Gate.INPUT, details={"argument": "run_id", "problem": "format"})
    shown, nxt = for_cli("status", {"run_id": "typed-by-someone"}, envelope)
    assert nxt is None
    assert shown.error is not None and shown.error.details == {"argument": "--run", "problem": "format"}
    assert "typed-by-someone" not in render_human(shown, "status", nxt) + render_json(shown)


# ---------------------------------------------------------------------------- the person's sentences


ALL_VERBS = sorted(cli.COMMANDS)
FULL_ARGUMENTS: dict[str, Any] = {"run_id": "run_1", "idempotency_key": "k" * 16, "booking_id": "bk-1",
                                  "manifest_path": "/m.json", "request_id": "creq_1"}


def test_every_code_has_a_sentence_for_the_person() -> None:
    from ito_training_mcp.doors.cli.person import BY_CODE

    assert set(BY_CODE) == set(ErrorCode)


def _sentences(text: str) -> None:
    """A notice reads as sentences: a capital first, a full stop last, no doubled words or spaces."""
    assert text[:1].isupper() and text.endswith("."), text
    assert "  " not in text and " ." not in text and not re.search(r"\w\.\.", text), text
    doubled = re.search(r"\b(\w+) \1\b", text)
    assert doubled is None, (doubled.group(0), text)


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.value)
def test_every_refusal_sentence_reads_and_only_points_at_a_command_that_is_printed(code: ErrorCode) -> None:
    for verb in ALL_VERBS:
        for retryable in (True, False):
            for details in (None, {"interrupted": True}, {"reason": "run_active"},
                            {"setting": "ITO_API_URL", "status": 302}, {"setting": "ITO_TOKEN_FILE",
                                                                         "problem": "file_owner"}):
                envelope = refusal(code, "m", live_api_contacted=False, gate=None, retryable=retryable,
                                   details=details)
                shown, nxt = for_cli(verb, FULL_ARGUMENTS, envelope)
                said = shown.notice.removesuffix(f" Next command: {nxt}")
                _sentences(said)
                assert leftovers(said) == [], (verb, said)
                if "the next command" in said.lower():
                    assert nxt is not None, (verb, details, said)


@pytest.mark.parametrize(("name", "notice"), _success_notices(), ids=lambda v: v if len(v) < 40 else "")
def test_every_success_sentence_reads_and_is_not_the_cores(name: str, notice: str) -> None:
    from ito_training_mcp.doors.cli.person import person_notice

    envelope = success(dict(SAMPLE_DATA), notice=notice, live_api_contacted=True)
    said = person_notice("status", {}, envelope, None)
    _sentences(said)
    assert said != notice, name  # the core's agent-facing text is never printed as it is


def test_the_interrupted_notices_are_the_persons() -> None:
    for text in (cli._interrupted_text(["status"], False), cli._interrupted_text(["status", "--json"], True),
                 cli._interrupted_text(["skill", "install"], False)):
        assert leftovers(text) == [] and "Run " in text, text
    assert "Run it again when you want to." in " ".join(render_human(cli.interrupted_envelope()).split())


def test_an_existing_run_says_plainly_that_the_confirmation_given_was_not_used() -> None:
    envelope = success({"run_id": "run_42", "state": "running", "created": False, "idempotency_key": "k" * 16,
                        "recovered_after_ambiguous_response": False, "stages": []},
                       notice=notices.NOTICE_EXISTING, live_api_contacted=True)
    shown, nxt = for_cli("train", {"confirmation_ref": "cnf_new"}, envelope)
    human = " ".join(render_human(shown, "train", nxt).split())
    assert "nothing new started" in shown.notice and "was not used" in shown.notice
    assert "Nothing new started" in human and "was NOT used" in human
    created = success({"run_id": "run_42", "state": "queued", "created": True, "stages": []},
                      notice=notices.NOTICE_CREATED, live_api_contacted=True)
    assert "NOT used" not in render_human(*for_cli("train", {}, created)[:1], "train")


def test_a_placeholder_path_says_how_to_fill_it_in() -> None:
    envelope = success({"status": "confirmed", "action": "training.create", "confirmation_ref": "cnf_1",
                        "request_id": "creq_0123456789abcdef", "booking_id": "bk-1"},
                       notice=notices.request_status("training.create", "confirmed"), live_api_contacted=True)
    shown, nxt = for_cli("confirmation", {}, envelope)
    assert nxt is not None and "--manifest PATH" in nxt and "--manifest PATH' fills it in" in shown.notice
    shown, nxt = for_cli("confirmation", {"manifest_path": "/srv/m.json"}, envelope)
    assert nxt is not None and "--manifest /srv/m.json" in nxt and "PATH" not in shown.notice


def test_the_messages_address_the_person() -> None:
    from ito_training_mcp.doors.cli.person import person_message

    assert person_message("The manifest digest differs from the one the user confirmed.") == \
        "The manifest digest differs from the one you confirmed."
    assert person_message("ITO_TOKEN_FILE (/x) is not owned by the user this server runs as.") == \
        "ITO_TOKEN_FILE (/x) is not owned by the account this command runs as."
    assert person_message("more than the $5.00 the user confirmed; the user's") == \
        "more than the $5.00 you confirmed; your"


def test_checkpoint_sizes_and_waits_read_as_a_person_reads_them() -> None:
    listed = success({"run_id": "run_42", "checkpoints": [
        {"checkpoint_id": "c1", "step": 1000, "created_at": "2026-12-01T00:00:00Z", "size_bytes": 16060522496,
         "uri": "s3://b/c1"},
        {"checkpoint_id": "c2", "step": 2000, "created_at": "2026-12-01T00:00:00Z", "size_bytes": 512,
         "uri": "s3://b/c2"}]}, notice=notices.NOTICE_READ_ONLY, live_api_contacted=True)
    shown, nxt = for_cli("checkpoints", {}, listed)
    human = render_human(shown, "checkpoints", nxt)
    assert "16.1 GB (16060522496 bytes)" in human and "  512 bytes  " in human
    waited = success({"run_id": "run_42", "state": "running", "stages": [],
                      "wait": {"requested_s": 600, "limit_s": 55, "clamped": True, "waited_s": 55, "timed_out": True}},
                     notice=notices.NOTICE_STILL_RUNNING, live_api_contacted=True)
    shown, nxt = for_cli("status", {"run_id": "run_42"}, waited)
    human = render_human(shown, "status", nxt)
    assert "Waited 55 s of the 600 s asked for." in human
    assert human.count("The wait ended before") <= 1  # said once, by the notice, not again by the summary


@pytest.mark.parametrize("verb", ["cancel", "request-confirmation"])
def test_a_run_that_cannot_be_cancelled_points_at_its_state(verb: str) -> None:
    envelope = refusal(ErrorCode.RUN_NOT_CANCELLABLE, "The run can no longer be cancelled.", live_api_contacted=True,
                       gate=Gate.CONFIRMATION, details={"status": 409})
    shown, nxt = for_cli(verb, {"run_id": "run_42", "action": "training.cancel"}, envelope)
    assert nxt == "ito-training status --run run_42"
    assert "nothing to cancel" in shown.notice and shown.notice.endswith(f"Next command: {nxt}")
