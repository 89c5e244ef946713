"""`ito-training desk ...`: the operator's (and, headless, the person's) commands over the
reference backend's operator API, instead of hand-written curl.

Where the backend is: `--url` or `ITO_DESK_URL` (default http://127.0.0.1:8765); only loopback
addresses, since the operator API answers nobody else and its token must not travel. The
operator token comes from the file `ito-training backend` writes (`<--db>.operator-token`, or
`--operator-token-file`), read with the same owner and mode checks; it is never printed.

Output: human text by default, `--json` for `{"ok": true, "data": ...}` / `{"ok": false,
"error": {"code", "message", "status"?}}`. Exit codes as the main CLI: 0 done, 1 refused by the
backend or backend unreachable, 2 usage (including an unusable token file or URL). Usage errors
name the flag at fault, never the value typed; text from the backend is escaped for the terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import urlsplit

import httpx

from ito_training_mcp.doors.cli.usage import UsageError

from .cliutil import QuietParser, TokenFileError, read_operator_token, terminal_safe
from .operator_client import OperatorClient, OperatorError

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2
DEFAULT_URL = "http://127.0.0.1:8765"
DEFAULT_DB = "ito-reference-backend.sqlite3"
TOKEN_SUFFIX = ".operator-token"  # noqa: S105 - a file name suffix
PROG = "ito-training desk"
_HINTS = {
    "not_found": "the operator API answered 404: wrong operator token, or a backend without it",
    "request_decided": "the request was already confirmed or declined",
    "request_expired": "the request expired undecided; the agent must ask again",
    "request_not_found": "no such confirmation request",
    "run_terminal": "the run has already ended",
    "run_paused": "the run's stage is paused on a restart proposal; only the person's decision (or a cancel) moves it",
    "run_not_running": "the run has no running stage of that kind (a loss spike needs a training stage)",
    "stage_passed": "that stage has already passed",
    "stage_not_found": "the run has no stage of that name",
    "unsigned_response": "the answer was not signed by the backend that holds this operator token; whatever "
                         "listens at --url is not that backend (check --url and that the backend is running)",
    "invalid_response": "the answer was not the operator API's; check --url and that the backend is running",
}


@dataclass
class Out:
    stdout: TextIO
    stderr: TextIO
    json: bool

    def note(self, text: str) -> None:
        print(text, file=self.stderr)


# -- parser --------------------------------------------------------------------------------------
def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The connection options and --json, accepted before or after the sub-command."""
    default = None if top else argparse.SUPPRESS
    parser.add_argument("--json", action="store_true", default=False if top else argparse.SUPPRESS,
                        help="print JSON")
    parser.add_argument("--url", metavar="URL", default=default,
                        help=f"the backend (default $ITO_DESK_URL or {DEFAULT_URL}; loopback only)")
    parser.add_argument("--db", metavar="PATH", default=default,
                        help=f"the backend's database path, to find its token file (default {DEFAULT_DB})")
    parser.add_argument("--operator-token-file", metavar="PATH", default=default,
                        help="the operator token file (default <--db>.operator-token)")
    parser.add_argument("--tls-ca", metavar="PEM", default=default,
                        help="for an https --url: trust the certificates in this file (the backend's own "
                             "--tls-cert, say) instead of the system's")


def build_parser() -> argparse.ArgumentParser:
    parser = QuietParser(prog=PROG, allow_abbrev=False,
                         description="Operator and desk actions on the reference backend (loopback only).")
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=QuietParser)

    def add(name: str, help_text: str, into: Any = sub) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = into.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
        _common(p, top=False)
        return p

    accounts = add("accounts", "Create or list accounts.").add_subparsers(
        dest="action", metavar="ACTION", parser_class=QuietParser)
    p = add("create", "Create an account.", accounts)
    p.add_argument("--account", metavar="ID", help="account id (default: generated)")
    p.add_argument("--budget-limit", metavar="USD", help='ceiling for any manifest\'s ceiling_usd (e.g. "5000.00")')
    p.add_argument("--data-scheme", metavar="SCHEME", action="append", help="allowed data URI scheme (repeatable)")
    p.add_argument("--checkpoint-prefix", metavar="PREFIX", action="append",
                   help="allowed checkpoint storage prefix (repeatable)")
    add("list", "List accounts.", accounts)

    tokens = add("tokens", "Mint, list or revoke API tokens.").add_subparsers(
        dest="action", metavar="ACTION", parser_class=QuietParser)
    p = add("mint", "Mint an API token (shown once, or written to a new 0600 file with --out).", tokens)
    p.add_argument("--account", metavar="ID", required=True)
    p.add_argument("--read-only", action="store_true", help="training:read only")
    p.add_argument("--expires-in", metavar="SECONDS", type=int, help="lifetime in seconds (default: no expiry)")
    p.add_argument("--out", metavar="PATH", help="write the token to this new file (0600) instead of printing it")
    p = add("list", "List token ids and their state (never the tokens).", tokens)
    p.add_argument("--account", metavar="ID")
    p = add("revoke", "Revoke a token by its id.", tokens)
    p.add_argument("token_id", metavar="TOKEN_ID")

    bookings = add("bookings", "Create, list or show bookings.").add_subparsers(
        dest="action", metavar="ACTION", parser_class=QuietParser)
    p = add("create", "Record a booking (completed by default).", bookings)
    p.add_argument("--account", metavar="ID", required=True)
    p.add_argument("--booking", metavar="ID", help="booking id (default: generated)")
    p.add_argument("--state", choices=["completed", "expired", "revoked", "released", "incomplete"])
    p.add_argument("--gpu", metavar="NAME")
    p.add_argument("--nodes", metavar="N", type=int)
    p.add_argument("--gpus-per-node", metavar="N", type=int)
    p.add_argument("--region", metavar="NAME")
    p.add_argument("--fabric", metavar="NAME")
    p.add_argument("--term-days", metavar="DAYS", type=float, help="days until the term ends (default 7)")
    p = add("list", "List bookings.", bookings)
    p.add_argument("--account", metavar="ID")
    p = add("show", "Show one booking as stored.", bookings)
    p.add_argument("booking_id", metavar="BOOKING_ID")

    p = add("login-link", "Mint a single-use desk sign-in link (10 minutes) for one account.")
    p.add_argument("--account", metavar="ID", required=True)
    p = add("requests", "List confirmation requests, newest first.")
    p.add_argument("--account", metavar="ID")
    p.add_argument("--status", choices=["pending", "confirmed", "declined", "expired"])
    for name, verb in (("confirm", "Confirm"), ("decline", "Decline")):
        p = add(name, f"{verb} a pending request as if the person did (headless; recorded as the operator).")
        p.add_argument("request_id", metavar="REQUEST")
        p.add_argument("--by", metavar="NAME", help="who decided, recorded with the decision (default operator)")
    add("runs", "List every run, newest first.")
    for name, help_text in (("advance", "Advance a run one step."), ("finish", "Pass every remaining stage."),
                            ("fail-gate", "Fail a stage's gate (default the running one); the run ends in "
                                          "gate_failed.")):
        p = add(name, help_text)
        p.add_argument("--run", metavar="RUN", dest="run", help="the run (also accepted without --run)")
        p.add_argument("run_id", metavar="RUN", nargs="?", help=argparse.SUPPRESS)
    p.add_argument("--stage", metavar="STAGE", help="the stage to fail; the stages before it pass first")
    p = add("interrupt", "Interrupt a run's running stage (a node failure): it resumes from its last checkpoint, "
                         "with the detection and resume times reported in its status and metrics.")
    p.add_argument("--run", metavar="RUN", dest="run", required=True)
    p.add_argument("--detect-s", metavar="SECONDS", type=float, help="time to detect it (default 150)")
    p.add_argument("--resume-s", metavar="SECONDS", type=float, help="time to resume after it (default 420)")
    p.add_argument("run_id", nargs="?", help=argparse.SUPPRESS)
    p = add("spike", "Make the loss spike in a run's running training stage: the stage pauses and the backend "
                     "proposes a restart from the last good checkpoint, which only the person can confirm.")
    p.add_argument("--run", metavar="RUN", dest="run", required=True)
    p.add_argument("--factor", metavar="X", type=float, help="how many times the loss jumps (default 3)")
    p.add_argument("run_id", nargs="?", help=argparse.SUPPRESS)
    return parser


def _run_id(args: argparse.Namespace) -> str:
    """`--run RUN`, as every other command names a run (a bare `RUN` is read the same way)."""
    given = [v for v in (args.run, args.run_id) if v is not None]
    if not given:
        raise UsageError(f"{PROG} {args.command}: --run is required; see '{PROG} {args.command} --help'.",
                         argument="--run")
    if len(given) == 2 and given[0] != given[1]:
        raise UsageError(f"{PROG} {args.command}: the run is given twice, differently; give it once as --run RUN.",
                         argument="--run")
    return str(given[0])


# -- connection ----------------------------------------------------------------------------------
def _url(args: argparse.Namespace, env: dict[str, str]) -> str:
    value = args.url if args.url is not None else env.get("ITO_DESK_URL", DEFAULT_URL)
    source = "--url" if args.url is not None else "ITO_DESK_URL"
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        raise UsageError(f"{PROG}: {source} is not a URL.", argument=source) from None
    if parts.scheme not in ("http", "https") or parts.username or parts.password or parts.query or parts.fragment:
        raise UsageError(f"{PROG}: {source} must be an http(s) URL without credentials or query.", argument=source)
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError(f"{PROG}: {source} must be a loopback address: the operator API answers nobody else.",
                         argument=source)
    netloc = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{netloc}" + ("" if port is None else f":{port}") + parts.path.rstrip("/")


def _token(args: argparse.Namespace) -> str:
    explicit = args.operator_token_file is not None
    path = args.operator_token_file if explicit else f"{args.db or DEFAULT_DB}{TOKEN_SUFFIX}"
    if not explicit and args.db is None and not os.path.lexists(path):
        raise UsageError(
            f"{PROG}: no operator token file at ./{path} (the default, in the current directory). Run this where "
            f"'ito-training backend' was started, or pass --db PATH (the backend's database; its token file is "
            f"PATH{TOKEN_SUFFIX}) or --operator-token-file PATH.", argument="--db")
    if not explicit and args.db is not None and not os.path.lexists(path):
        raise UsageError(
            f"{PROG}: no operator token file beside the --db database (expected <--db>{TOKEN_SUFFIX}). --db must be "
            f"the database 'ito-training backend' was started with: the backend writes PATH{TOKEN_SUFFIX} next to "
            "it when it starts. Or pass --operator-token-file PATH.", argument="--db")
    try:
        return read_operator_token(path)
    except TokenFileError as exc:  # names the flag, never a path that was typed
        where = "--operator-token-file" if explicit else ("<--db>" + TOKEN_SUFFIX if args.db else f"./{path}")
        raise UsageError(f"{PROG}: {exc} ({where}); start 'ito-training backend', or pass --db PATH or "
                         "--operator-token-file PATH.", argument="--operator-token-file") from None


# -- commands ------------------------------------------------------------------------------------
Result = tuple[Any, Callable[[Any], str]]


def _table(rows: list[list[str]], header: list[str]) -> str:
    if not rows:
        return "(none)"
    cells = [header, *[[terminal_safe(str(c), 80) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def _run_line(run: dict[str, Any]) -> str:
    stages = ", ".join(f"{s['name']} {s['state']}" for s in run.get("stages", []))
    return terminal_safe(f"{run['run_id']}: {run['state']} ({stages})")


def _request_line(r: dict[str, Any]) -> list[str]:
    subject = r.get("run_id") or (r.get("manifest_sha256") or "")[:12]
    return [r["request_id"], r["account_id"], r["action"], r["status"], r["max_cost_usd"], str(subject),
            r["expires_at"]]


def _interrupted(run: dict[str, Any]) -> str:
    last = (run.get("interruptions") or [{}])[-1]
    return terminal_safe(f"{_run_line(run)}\ninterrupted at step {last.get('step')}: detected after "
                         f"{last.get('detect_s')} s, resumed from step {last.get('resumed_from_step')} after "
                         f"{last.get('resume_s')} s; {last.get('steps_lost')} step(s) run again")


def _proposed(run: dict[str, Any]) -> str:
    found = (run.get("proposed_actions") or [{}])[0]
    return terminal_safe(f"{_run_line(run)}\nloss spike at step {found.get('spike_step')}; stage "
                         f"{found.get('stage')} paused. Proposed: restart from step {found.get('checkpoint_step')} "
                         f"({found.get('repeated_steps')} step(s) again, about ${found.get('repeated_cost_usd')}); "
                         "the agent asks the person with request_confirmation (training.restart)")


def _decided(r: dict[str, Any]) -> str:
    if r["status"] == "confirmed":
        return terminal_safe(f"{r['request_id']} confirmed (confirmation ref {r['confirmation_ref']}); the agent "
                             "picks it up with confirmation_status.")
    return terminal_safe(f"{r['request_id']} {r['status']}; nothing was confirmed.")


def _mint_token(op: Any, args: argparse.Namespace, out: Out) -> Result:
    scopes = ["training:read"] if args.read_only else None
    fd = None
    if args.out is not None:  # create the file first: never mint a token that cannot be stored
        try:
            fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                         0o600)
        except OSError as exc:
            raise UsageError(f"{PROG}: --out: cannot create a new file there ({exc.strerror}); it must not exist.",
                             argument="--out") from None
    try:
        token_id, token = op.token(args.account, scopes=scopes, expires_in_s=args.expires_in)
    except BaseException:
        if fd is not None:
            os.close(fd)
            os.unlink(args.out)
        raise
    if fd is not None:
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        data = {"token_id": token_id, "account_id": args.account, "token_file": os.path.abspath(args.out)}
        return data, lambda d: f"token {d['token_id']} written to the new file given by --out (mode 0600)"
    out.note("warning: the token is shown this once and cannot be shown again; store it now (a 0600 file for "
             "ITO_TOKEN_FILE), or mint with --out PATH next time.")
    return {"token_id": token_id, "account_id": args.account, "token": token}, lambda d: str(d["token"])


def _booking_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for flag, key in (("booking", "booking_id"), ("state", "state"), ("gpu", "gpu"), ("nodes", "nodes"),
                      ("gpus_per_node", "gpus_per_node"), ("region", "region"), ("fabric", "fabric")):
        if getattr(args, flag) is not None:
            body[key] = getattr(args, flag)
    if args.term_days is not None:
        body["term_ends_in_s"] = args.term_days * 86400
    return body


def _execute(op: Any, args: argparse.Namespace, out: Out) -> Result:
    command, action = args.command, getattr(args, "action", None)
    booking_columns = ["BOOKING", "ACCOUNT", "STATE", "GPUS", "FABRIC", "TERM ENDS"]

    def booking_row(b: dict[str, Any]) -> list[str]:
        return [b["booking_id"], b["account_id"], b["state"], f"{b['nodes']}x{b['gpus_per_node']} {b['gpu']}",
                b["fabric"], b["term_ends_at"]]

    if command == "accounts" and action == "create":
        settings: dict[str, Any] = {}
        if args.budget_limit is not None:
            settings["budget_limit_usd"] = args.budget_limit
        if args.data_scheme:
            settings["allowed_data_schemes"] = args.data_scheme
        if args.checkpoint_prefix:
            settings["allowed_checkpoint_prefixes"] = args.checkpoint_prefix
        account = op.account(args.account, **settings)
        return {"account_id": account}, lambda d: terminal_safe(f"account {d['account_id']} created")
    if command == "accounts" and action == "list":
        return op.accounts(), lambda rows: _table(
            [[a["account_id"], a["budget_limit_usd"], a["created_at"]] for a in rows],
            ["ACCOUNT", "BUDGET LIMIT", "CREATED"])
    if command == "tokens" and action == "mint":
        return _mint_token(op, args, out)
    if command == "tokens" and action == "list":
        return op.tokens(args.account), lambda rows: _table(
            [[t["token_id"], t["account_id"], " ".join(t["scopes"]),
              "revoked" if t["revoked"] else "expired" if t["expired"] else "active"] for t in rows],
            ["TOKEN", "ACCOUNT", "SCOPES", "STATE"])
    if command == "tokens" and action == "revoke":
        op.revoke(args.token_id)
        return {"token_id": args.token_id, "revoked": True}, lambda d: "token revoked"
    if command == "bookings" and action == "create":
        booking = op.booking(args.account, **_booking_body(args))
        return booking, lambda b: _table([booking_row(b)], booking_columns)
    if command == "bookings" and action == "list":
        return op.bookings(args.account), lambda rows: _table([booking_row(b) for b in rows], booking_columns)
    if command == "bookings" and action == "show":
        return op.get_booking(args.booking_id), lambda b: _table([booking_row(b)], booking_columns)
    if command == "login-link":
        link = op.login_link(args.account)
        out.note(terminal_safe(f"single-use sign-in link for account {link['account_id']}, valid until "
                               f"{link['expires_at']}; give it only to that person."))
        return link, lambda d: terminal_safe(d["url"])
    if command == "requests":
        return op.confirmation_requests(args.account, args.status), lambda rows: _table(
            [_request_line(r) for r in rows], ["REQUEST", "ACCOUNT", "ACTION", "STATUS", "MAX COST", "RUN/DIGEST",
                                               "EXPIRES"])
    if command in ("confirm", "decline"):
        decide = op.confirm_request if command == "confirm" else op.decline_request
        return decide(args.request_id, decided_by=args.by or "operator"), _decided
    if command == "runs":
        return op.runs(), lambda rows: "\n".join(_run_line(r) for r in rows) or "(none)"
    if command == "advance":
        return op.advance(_run_id(args)), _run_line
    if command == "finish":
        return op.finish(_run_id(args)), _run_line
    if command == "fail-gate":
        return op.fail_gate(_run_id(args), stage=args.stage), _run_line
    if command == "interrupt":
        return op.interrupt(_run_id(args), args.detect_s, args.resume_s), _interrupted
    if command == "spike":
        return op.spike(_run_id(args), args.factor), _proposed
    raise UsageError(f"{PROG}: a command is required; see '{PROG} --help'.", argument="command")


# -- entry points --------------------------------------------------------------------------------
def _fail(out: Out, code: str, message: str, status: int | None = None) -> None:
    if out.json:
        error: dict[str, Any] = {"code": code, "message": message}
        if status is not None:
            error["status"] = status
        print(json.dumps({"ok": False, "error": error}, indent=2), file=out.stdout)
    else:
        print(terminal_safe(message), file=out.stderr)


def run(argv: Sequence[str], *, stdout: TextIO, stderr: TextIO, env: dict[str, str] | None = None) -> int:
    """Parse, call the operator API, print. Never raises for bad input, a refusal or a closed pipe."""
    try:
        code = _run(argv, stdout=stdout, stderr=stderr, env=dict(os.environ) if env is None else env)
        stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep the interpreter's final flush quiet too.
        _silence(stdout)
        return EXIT_REFUSED
    return code


def _silence(stream: TextIO) -> None:
    try:
        fileno = stream.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)


def _run(argv: Sequence[str], *, stdout: TextIO, stderr: TextIO, env: dict[str, str]) -> int:

    out = Out(stdout, stderr, "--json" in argv)
    try:
        with contextlib.redirect_stdout(stdout):  # --help writes to sys.stdout
            args = build_parser().parse_args(list(argv))
        out.json = bool(args.json)
        if args.command is None or (args.command in ("accounts", "tokens", "bookings") and args.action is None):
            raise UsageError(f"{PROG}: a command is required; see '{PROG} --help'.", argument="command")
        url, token = _url(args, env), _token(args)
    except UsageError as exc:
        _fail(out, "usage", exc.message)
        return EXIT_USAGE
    except SystemExit as exc:  # --help printed its text
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE

    try:
        with OperatorClient(url, token, tls_ca=args.tls_ca) as op:
            data, human = _execute(op, args, out)
    except UsageError as exc:
        _fail(out, "usage", exc.message)
        return EXIT_USAGE
    except OperatorError as exc:
        hint = _HINTS.get(exc.code, "the backend refused the request")
        _fail(out, exc.code, f"{PROG}: refused ({exc.status} {exc.code}): {hint}.", exc.status)
        return EXIT_REFUSED
    except httpx.TimeoutException:
        _fail(out, "timeout", f"{PROG}: the backend did not answer in time.")
        return EXIT_REFUSED
    except httpx.HTTPError:
        _fail(out, "unreachable", f"{PROG}: cannot reach the backend (is 'ito-training backend' running?).")
        return EXIT_REFUSED
    if out.json:
        print(json.dumps({"ok": True, "data": data}, indent=2, ensure_ascii=True), file=stdout)
    else:
        print(human(data), file=stdout)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    return run(sys.argv[1:] if argv is None else argv, stdout=sys.stdout, stderr=sys.stderr)
