"""`ito-training`: the CLI door over the same core and envelope as the MCP tools.

`--json` prints the envelope the MCP tools return, with its words for a person: the notice is the
CLI's own sentence for the person at the terminal (`person.py`; the core's notices are written
for an agent), the refusal message names CLI verbs and flags instead of tools and arguments,
`error.details.argument` names the flag, and the notice ends with the next command to run
(`next_steps.py`). The exit code is 0 iff ok, 1 for a refusal, 2 for a usage error (also
printed as an INVALID_INPUT envelope that names the flag at fault and never what was typed: a
mistyped flag may be followed by a secret; `usage.py`). Everything printed passes the egress
(`egress/clean.py`): no raw control or bidi character reaches the terminal, whatever a manifest or a
backend put in a string (`render.py`, also the progress bar). Ctrl-C ends with an envelope too
(exit 1, never a traceback): for a mutation that may have been sent, SUBMISSION_OUTCOME_UNKNOWN; a
closed stdout ends quietly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import anyio

from ito_training_mcp.doors.cli import skill_install
from ito_training_mcp.doors.cli.next_steps import PROG
from ito_training_mcp.doors.cli.person import for_cli
from ito_training_mcp.doors.cli.render import ProgressBar, render_human, render_json, terminal_columns
from ito_training_mcp.doors.cli.usage import Parser, UsageError, from_leftovers
from ito_training_mcp.egress import logs
from ito_training_mcp.egress.clean import clean_line
from ito_training_mcp.envelope import Envelope, ErrorCode, ErrorInfo, Gate
from ito_training_mcp.errors import Refusal
from ito_training_mcp.gates.manifest.review import review_lines
from ito_training_mcp.service import TrainingService

__all__ = ["COMMANDS", "UsageError", "build_parser", "main", "parse", "render_human", "render_json", "run"]

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class Command:
    tool: str
    build: Callable[[argparse.Namespace], dict[str, Any]]
    help: str


COMMANDS: dict[str, Command] = {
    "check": Command(
        "check_training_availability",
        lambda a: {"booking_id": a.booking} if a.booking is not None else {},
        "Is managed training available (and is this booking eligible)?",
    ),
    "digest": Command(
        "digest_manifest",
        lambda a: {"manifest_path": a.manifest},
        "Read and digest a manifest locally, and print its review summary.",
    ),
    "plan": Command(
        "plan_training",
        lambda a: {"booking_id": a.booking, "manifest_path": a.manifest},
        "Have the backend check a manifest for a booking, estimate its cost and open a confirmation request; "
        "prints the review URL where the person confirms (nothing is created).",
    ),
    "request-confirmation": Command(
        "request_confirmation",
        lambda a: {"action": f"training.{a.action}", "run_id": a.run},
        "Open a confirmation request to cancel, clean up or restart a run (a restart only as the backend "
        "proposed it); prints the review URL (nothing changes yet).",
    ),
    "confirmation": Command(
        "confirmation_status",
        lambda a: _present({"request_id": a.request, "wait_seconds": a.wait}),
        "Whether the person decided a confirmation request; prints the confirmation ref and the next command "
        "once confirmed. --wait polls until they decide.",
    ),
    "train": Command(
        "submit_training",
        lambda a: {
            "booking_id": a.booking,
            "manifest_path": a.manifest,
            "confirmation_ref": a.confirmation_ref,
            "idempotency_key": a.idempotency_key,
        },
        "Submit a reviewed, confirmed manifest (creates at most one run per idempotency key).",
    ),
    "status": Command(
        "training_status",
        lambda a: _present({"run_id": a.run, "idempotency_key": a.idempotency_key, "wait_seconds": a.wait}),
        "A run's state and stage gates, by --run or by --idempotency-key; --wait polls until it finishes.",
    ),
    "logs": Command(
        "training_logs",
        lambda a: _present({"run_id": a.run, "cursor": a.cursor, "limit": a.limit}),
        "One page of a run's log lines; for the next page, pass the cursor it prints with --cursor.",
    ),
    "metrics": Command("training_metrics", lambda a: {"run_id": a.run}, "A run's metrics."),
    "checkpoints": Command("list_checkpoints", lambda a: {"run_id": a.run}, "A run's checkpoints."),
    "cancel": Command(
        "cancel_training",
        lambda a: {"run_id": a.run, "confirmation_ref": a.confirmation_ref, "idempotency_key": a.idempotency_key},
        "Cancel a run (needs its own training.cancel confirmation and idempotency key).",
    ),
    "cleanup": Command(
        "cleanup_training",
        lambda a: {"run_id": a.run, "confirmation_ref": a.confirmation_ref, "idempotency_key": a.idempotency_key},
        "Clean up a finished run, never the booking (needs its own training.cleanup confirmation and idempotency "
        "key).",
    ),
    "restart": Command(
        "restart_training",
        lambda a: {"run_id": a.run, "confirmation_ref": a.confirmation_ref, "idempotency_key": a.idempotency_key},
        "Restart a run from the checkpoint the backend proposed after a loss spike (needs its own "
        "training.restart confirmation and idempotency key).",
    ),
}


def _present(arguments: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in arguments.items() if v is not None}


class CliParser(Parser):
    """The top-level parser; `subcommands` holds each verb's own parser (for its flag names)."""

    subcommands: dict[str, Parser]


def build_parser() -> CliParser:
    parser = CliParser(
        prog=PROG,
        description="Check and submit ML training on Itô GPU bookings. Fails closed; never handles secrets.",
    )
    parser.subcommands = {}
    parser.add_argument("--json", action="store_true", help="print the result envelope as JSON")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    def add(name: str) -> argparse.ArgumentParser:
        p: Parser = sub.add_parser(name, help=COMMANDS[name].help, description=COMMANDS[name].help)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the envelope as JSON")
        parser.subcommands[name] = p
        return p

    p = add("check")
    p.add_argument("--booking", metavar="ID", help="completed booking id to check eligibility for")
    p = add("digest")
    p.add_argument("--manifest", metavar="PATH", required=True, help="absolute path of the manifest file")
    p = add("plan")
    p.add_argument("--booking", metavar="ID", required=True, help="server-verified booking id")
    p.add_argument("--manifest", metavar="PATH", required=True, help="absolute path of the manifest to plan")
    p = add("request-confirmation")
    p.add_argument("--action", choices=["cancel", "cleanup", "restart"], required=True,
                   help="what the person is asked to confirm for the run")
    p.add_argument("--run", metavar="RUN_ID", required=True)
    p = add("confirmation")
    p.add_argument("--request", metavar="REQUEST_ID", required=True, help="the request id plan or "
                   "request-confirmation printed")
    p.add_argument("--wait", metavar="SECONDS", type=int, help="poll until the person decides, at most this long")
    p.add_argument("--manifest", metavar="PATH", help="the manifest that was planned: only written into the train "
                   "command printed once it is confirmed (never read here)")
    p = add("train")
    p.add_argument("--booking", metavar="ID", required=True, help="server-verified booking id")
    p.add_argument("--manifest", metavar="PATH", required=True, help="absolute path of the reviewed manifest")
    p.add_argument("--confirmation-ref", metavar="REF", required=True,
                   help="the reference 'ito-training confirmation' printed once the plan was confirmed")
    p.add_argument("--idempotency-key", metavar="KEY", required=True,
                   help="stable key: reuse it for every retry of this run")
    p = add("status")
    p.add_argument("--run", metavar="RUN_ID", help="run id (or give --idempotency-key)")
    p.add_argument("--idempotency-key", metavar="KEY", help="the submit's idempotency key (or give --run)")
    p.add_argument("--wait", metavar="SECONDS", type=int, help="poll until the run finishes, at most this long")
    p = add("logs")
    p.add_argument("--run", metavar="RUN_ID", required=True)
    p.add_argument("--cursor", metavar="CURSOR", help="next_cursor from the previous page")
    p.add_argument("--limit", metavar="N", type=int, help="lines per page (1-1000)")
    for name in ("metrics", "checkpoints"):
        add(name).add_argument("--run", metavar="RUN_ID", required=True)
    for name in ("cancel", "cleanup", "restart"):
        p = add(name)
        p.add_argument("--run", metavar="RUN_ID", required=True)
        p.add_argument("--confirmation-ref", metavar="REF", required=True,
                       help=f"the reference of the training.{name} confirmation for this run")
        p.add_argument("--idempotency-key", metavar="KEY", required=True, help="stable key for this action")
    sub.add_parser("backend", help="Run the reference backend (conformance/demo server; never trains).",
                   add_help=False)
    sub.add_parser("desk", help="Operator and desk actions on a local reference backend.", add_help=False)
    sub.add_parser("skill", help="Install the agent skill for harnesses that load SKILL.md from disk "
                                 "(ito-training skill install --help).", add_help=False)
    return parser


def _usage_envelope(error: UsageError) -> Envelope:
    """A usage error as an INVALID_INPUT envelope. Built here rather than with `refusal`, whose notice
    forbids retrying with other arguments: for a malformed command line, correcting it is the step."""
    return Envelope(
        ok=False, live_api_contacted=False,
        notice="The command line is malformed, so nothing was run or sent. Correct the flag named in the "
               "message (what was typed is never repeated); 'ito-training COMMAND --help' lists each command's "
               "flags.",
        error=ErrorInfo(code=ErrorCode.INVALID_INPUT, message=error.message, retryable=False, gate=Gate.INPUT,
                        details={"argument": error.argument, "problem": "usage", "reason": error.reason}),
    )


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line, or a UsageError that names the flag at fault and no value."""
    parser = build_parser()
    args, leftovers = parser.parse_known_args(list(argv))
    command = getattr(args, "command", None)
    if leftovers:
        sub = parser.subcommands.get(command or "")
        known = sub.known_flags() if sub is not None else parser.known_flags()
        raise from_leftovers(f"{PROG} {command}" if command else PROG, leftovers, known)
    if command is None:
        raise UsageError(f"{PROG}: a command is required; see '{PROG} --help'.", argument="command",
                         reason="missing")
    return args


def _interrupted(message: str, notice: str) -> Envelope:
    return Envelope(
        ok=False, live_api_contacted=False, notice=notice,
        error=ErrorInfo(code=ErrorCode.BACKEND_TIMEOUT, message=message, retryable=True, gate=None,
                        details={"interrupted": True}),
    )


def interrupted_envelope() -> Envelope:
    """Ctrl-C outside a tool call (while starting or printing): nothing was sent."""
    return _interrupted("Interrupted before the call started. Nothing was sent.",
                        "The command was interrupted before anything was sent; nothing changed. Run it again when "
                        "you want to.")


REFERENCE_MISSING = (
    "{prog} {command}: the reference backend is not installed. It is a separate package: install it with "
    "'pip install ito-training-reference' (from a checkout of this repository: 'pip install ./reference').\n"
)


def _reference(command: str, argv: list[str], *, stdout: TextIO, stderr: TextIO) -> int:
    """`backend` and `desk` belong to the reference backend, a package of its own: loaded only here."""
    try:
        if command == "backend":
            from ito_training_reference import main as backend_main

            return backend_main(argv)
        from ito_training_reference.desk_cli import run as desk_run
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("ito_training_reference"):
            raise
        stderr.write(REFERENCE_MISSING.format(prog=PROG, command=command))
        return 2
    return desk_run(argv, stdout=stdout, stderr=stderr)


def run(argv: Sequence[str], *, stdout: TextIO, stderr: TextIO) -> int:
    """Parse, dispatch to the core, print. Never raises for bad input."""
    if list(argv[:1]) in (["backend"], ["desk"]):
        return _reference(argv[0], list(argv[1:]), stdout=stdout, stderr=stderr)
    if list(argv[:1]) == ["skill"] or list(argv[:2]) == ["--json", "skill"]:

        rest = list(argv[1:]) if argv[0] == "skill" else [*argv[2:], "--json"]
        return skill_install.run(rest, stdout=stdout, stderr=stderr)
    want_json = "--json" in argv
    try:
        args = parse(argv)
        if args.command in ("backend", "desk", "skill"):  # after other options: these own their options
            raise UsageError(f"{PROG} {args.command} must be the first argument; it takes its own options "
                             f"(see '{PROG} {args.command} --help').", argument="command", reason="position")
    except UsageError as exc:
        if want_json:
            print(render_json(_usage_envelope(exc)), file=stdout)
        else:
            print(clean_line(exc.message), file=stderr)
        return EXIT_USAGE

    verb = args.command
    command = COMMANDS[verb]
    arguments = command.build(args)
    # What the printed next command may carry beyond the tool's arguments: `confirmation --manifest`.
    context = {**arguments, "manifest_path": args.manifest} if verb == "confirmation" and args.manifest else arguments
    bar = ProgressBar(stderr) if stderr.isatty() else None
    interrupted: list[Envelope] = []
    service = TrainingService(on_interrupted=interrupted.append)
    try:
        envelope = _dispatch(service, interrupted, command.tool, arguments, bar)
    finally:
        if bar is not None:
            bar.finish()
    shown, next_command = for_cli(verb, context, envelope)
    whole = _whole_review(service, envelope) if not args.json else None
    print(render_json(shown) if args.json else render_human(shown, verb, next_command, whole), file=stdout)
    return EXIT_OK if envelope.ok else EXIT_REFUSED


def _whole_review(service: TrainingService, envelope: Envelope) -> list[str] | None:
    """For a person at a terminal: the whole review of the manifest a digest or plan read (a result carries a
    shortened one), laid out for this terminal."""
    data = envelope.data or {}
    sha256 = data.get("sha256") or data.get("manifest_sha256")
    if not isinstance(sha256, str) or "review" not in data:
        return None
    try:
        digested = anyio.run(service.full_review, sha256)
    except Refusal:  # busy: the shortened review stands
        return None
    if digested is None:
        return None
    return review_lines(digested.review(), digested.sha256, terminal_columns())


def _dispatch(service: TrainingService, interrupted: list[Envelope], tool: str, arguments: dict[str, Any],
              bar: ProgressBar | None = None) -> Envelope:
    """Run one tool. Ctrl-C cancels it: the core writes its audit line and hands back the envelope of
    the interrupted call (SUBMISSION_OUTCOME_UNKNOWN when a mutation may have been sent)."""

    async def go() -> Envelope:
        return await service.invoke(tool, arguments, progress=bar)

    try:
        return anyio.run(go)
    except KeyboardInterrupt:
        return interrupted[-1] if interrupted else interrupted_envelope()


def _interrupted_text(argv: Sequence[str], want_json: bool) -> str:
    """What Ctrl-C outside a tool call prints: the desk and skill commands speak their own forms."""
    if list(argv[:1]) == ["desk"]:
        message = ("Interrupted. If a request had already been sent to the backend it may have taken effect; "
                   "check with 'ito-training desk requests' or 'ito-training desk runs'.")
        if want_json:
            return json.dumps({"ok": False, "error": {"code": "interrupted", "message": message}}, indent=2)
        return message
    if "skill" in list(argv[:2]):
        envelope = _interrupted("Interrupted while installing the skill; some files may have been written.",
                                "Run the same 'ito-training skill install' command again: files that are already "
                                "identical are left as they are.")
        return render_json(envelope) if want_json else render_human(envelope)
    envelope = interrupted_envelope()
    return render_json(envelope) if want_json else render_human(envelope)


def main(argv: Sequence[str] | None = None) -> int:

    args = sys.argv[1:] if argv is None else list(argv)
    try:
        logs.configure()
        return run(args, stdout=sys.stdout, stderr=sys.stderr)
    except KeyboardInterrupt:  # outside a tool call: nothing was sent by this door
        return _emit_last(_interrupted_text(args, "--json" in args))
    except BrokenPipeError:  # the reader went away (`| head`): nothing more can be said to it
        _silence_stdout()
        return EXIT_REFUSED


def _emit_last(text: str) -> int:
    try:
        print(text, file=sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    return EXIT_REFUSED


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot raise again."""

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # pragma: no cover - stdout without a descriptor
        pass
