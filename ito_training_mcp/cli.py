"""`ito-training`: the CLI door over the same core and envelope as the MCP tools.

`--json` prints the envelope exactly as the MCP tools return it. The exit code is 0 iff ok,
1 for a refusal, 2 for a usage error (which is also printed as an INVALID_INPUT envelope).
Argument errors never echo what was typed: a mistyped flag may be followed by a secret.
Everything printed passes the egress (`egress.py`): no raw control or bidi character reaches the
terminal, whatever a manifest or a backend put in a string. Ctrl-C ends with an envelope too (exit
1, never a traceback): for a mutation that may have been sent, SUBMISSION_OUTCOME_UNKNOWN.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TextIO

from .egress import clean_envelope, clean_line, clean_text
from .envelope import Envelope, ErrorCode, Gate, refusal

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    def __init__(self, message: str, *, argument: str = "argv") -> None:
        super().__init__(message)
        self.message = message
        self.argument = argument


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        del message  # argparse quotes the offending values; we never echo them
        raise UsageError(f"{self.prog}: missing, unknown or malformed arguments; see '{self.prog} --help'.")


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
        "One page of a run's log lines; pass --cursor next_cursor for the next page.",
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
        "Clean up a finished run; never touches the booking (own training.cleanup confirmation and key).",
    ),
}


def _present(arguments: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in arguments.items() if v is not None}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ito-training",
        description="Check and submit ML training on Itô GPU bookings. Fails closed; never handles secrets.",
        allow_abbrev=False,
    )
    parser.add_argument("--json", action="store_true", help="print the result envelope as JSON")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def add(name: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=COMMANDS[name].help, description=COMMANDS[name].help, allow_abbrev=False)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the envelope as JSON")
        return p

    p = add("check")
    p.add_argument("--booking", metavar="ID", help="completed booking id to check eligibility for")
    p = add("digest")
    p.add_argument("--manifest", metavar="PATH", required=True, help="absolute path of the manifest file")
    p = add("train")
    p.add_argument("--booking", metavar="ID", required=True, help="server-verified booking id")
    p.add_argument("--manifest", metavar="PATH", required=True, help="absolute path of the reviewed manifest")
    p.add_argument("--confirmation-ref", metavar="REF", required=True,
                   help="opaque reference of the user's out-of-band confirmation")
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
    for name in ("cancel", "cleanup"):
        p = add(name)
        p.add_argument("--run", metavar="RUN_ID", required=True)
        p.add_argument("--confirmation-ref", metavar="REF", required=True,
                       help=f"reference of the user's training.{name} confirmation for this run")
        p.add_argument("--idempotency-key", metavar="KEY", required=True, help="stable key for this action")
    sub.add_parser("backend", help="Run the reference backend (conformance/demo server; never trains).",
                   add_help=False)
    sub.add_parser("desk", help="Operator and desk actions on a local reference backend.", add_help=False)
    sub.add_parser("skill", help="Install the agent skill for harnesses that load SKILL.md from disk "
                                 "(ito-training skill install --help).", add_help=False)
    return parser


def _usage_envelope(error: UsageError) -> Envelope:
    return refusal(
        ErrorCode.INVALID_INPUT, error.message, live_api_contacted=False, gate=Gate.INPUT,
        details={"argument": error.argument, "problem": "usage"},
    )


def render_human(envelope: Envelope) -> str:
    """A short readable form; `--json` is the exact one. Every line passes the egress, and only the
    review text (multi-line by design, built by this server) keeps its line breaks."""
    envelope = clean_envelope(envelope)
    if envelope.error is not None:
        err = envelope.error
        lines = [f"REFUSED {err.code.value}" + (f" (gate: {err.gate.value})" if err.gate else ""), err.message]
        for finding in (err.details or {}).get("findings", []):
            lines.append(f"  at {finding['pointer'] or '/'}: {finding['kind']}")
        for problem in (err.details or {}).get("problems", []):
            lines.append(f"  at {problem['pointer'] or '/'}: {problem['problem']}")
        lines.append(f"Next: {envelope.notice}")
    else:
        data = envelope.data or {}
        lines = ["OK"]
        if "review_text" in data:
            lines.extend(clean_text(str(data["review_text"]), multiline=True).split("\n"))
        else:
            lines.extend(json.dumps(data, indent=2, ensure_ascii=False).split("\n"))
        lines.append(envelope.notice)
    lines.append(f"(live API contacted: {'yes' if envelope.live_api_contacted else 'no'})")
    return "\n".join(clean_line(line) for line in lines)


def render_json(envelope: Envelope) -> str:
    """The envelope as the MCP tools return it, after the egress."""
    return clean_envelope(envelope).to_json(indent=2)


def interrupted_envelope() -> Envelope:
    """Ctrl-C outside a tool call (while starting or printing): nothing was sent."""
    return refusal(
        ErrorCode.BACKEND_TIMEOUT, "Interrupted before the call started. Nothing was sent.",
        live_api_contacted=False, gate=None, details={"interrupted": True},
        next_step="Tell the user the command was interrupted; nothing changed. Run it again when asked to.",
    )


def run(argv: Sequence[str], *, stdout: TextIO, stderr: TextIO) -> int:
    """Parse, dispatch to the core, print. Never raises for bad input."""
    if list(argv[:1]) == ["backend"]:
        from .reference_backend import main as backend_main

        return backend_main(list(argv[1:]))
    if list(argv[:1]) == ["desk"]:
        from .reference_backend.desk_cli import run as desk_run

        return desk_run(list(argv[1:]), stdout=stdout, stderr=stderr)
    if list(argv[:1]) == ["skill"] or list(argv[:2]) == ["--json", "skill"]:
        from . import skill_install

        rest = list(argv[1:]) if argv[0] == "skill" else [*argv[2:], "--json"]
        return skill_install.run(rest, stdout=stdout, stderr=stderr)
    want_json = "--json" in argv
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv))
        if args.command is None:
            raise UsageError("ito-training: a command is required; see 'ito-training --help'.", argument="command")
    except UsageError as exc:
        envelope = _usage_envelope(exc)
        if want_json:
            print(render_json(envelope), file=stdout)
        else:
            print(clean_line(exc.message), file=stderr)
        return EXIT_USAGE

    if args.command in ("backend", "desk", "skill"):  # only reachable after other options: these own their options
        envelope = _usage_envelope(UsageError(f"ito-training {args.command} must be the first argument; it takes "
                                              f"its own options (see 'ito-training {args.command} --help').",
                                              argument="command"))
        print(render_json(envelope) if want_json else clean_line(envelope.error.message if envelope.error else ""),
              file=stdout if want_json else stderr)
        return EXIT_USAGE
    command = COMMANDS[args.command]
    envelope = _dispatch(command.tool, command.build(args), stderr if stderr.isatty() else None)
    print(render_json(envelope) if args.json else render_human(envelope), file=stdout)
    return EXIT_OK if envelope.ok else EXIT_REFUSED


def _dispatch(tool: str, arguments: dict[str, Any], terminal: TextIO | None = None) -> Envelope:
    """Run one tool. Ctrl-C cancels it: the core writes its audit line and hands back the envelope of
    the interrupted call (SUBMISSION_OUTCOME_UNKNOWN when a mutation may have been sent)."""
    import anyio

    from .service import TrainingService

    interrupted: list[Envelope] = []

    async def bar(value: float, total: float | None, message: str | None) -> None:
        assert terminal is not None
        width = 24
        filled = int(width * value / total) if total else 0
        # The message passed the egress in the core; the bar's own carriage return is the only control.
        terminal.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {value:5.0f}s {message or ''}"[:160])
        terminal.flush()

    async def go() -> Envelope:
        service = TrainingService(on_interrupted=interrupted.append)
        try:
            return await service.invoke(tool, arguments, progress=bar if terminal is not None else None)
        finally:
            if terminal is not None and tool == "training_status":
                terminal.write("\n")

    try:
        return anyio.run(go)
    except KeyboardInterrupt:
        return interrupted[-1] if interrupted else interrupted_envelope()


def main(argv: Sequence[str] | None = None) -> int:
    from . import logs

    try:
        logs.configure()
        return run(sys.argv[1:] if argv is None else argv, stdout=sys.stdout, stderr=sys.stderr)
    except KeyboardInterrupt:  # outside a tool call: nothing was sent
        want_json = "--json" in (sys.argv[1:] if argv is None else argv)
        envelope = interrupted_envelope()
        return _emit_last(render_json(envelope) if want_json else render_human(envelope))
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
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # pragma: no cover - stdout without a descriptor
        pass
