"""What `ito-training` prints: a short human form per verb, the exact JSON, and the progress bar.

Every line passes the egress (`egress/clean.py`) on the way out, after the envelope as a whole did: no
raw control or bidi character reaches the terminal, whatever a manifest or a backend put in a
string. Only the review summary (multi-line by design, built by this server) keeps line breaks.
Human output names fields in words (`run id`, not `run_id`); `--json` prints the envelope's own
keys.
"""

from __future__ import annotations

import os
import shutil
import textwrap
import unicodedata
from collections.abc import Callable
from typing import Any, TextIO

from ito_training_mcp.egress.clean import clean_envelope, clean_line, clean_text
from ito_training_mcp.envelope import Envelope
from ito_training_mcp.gates.manifest.review import REVIEW_WIDTH, review_lines

WRAP = 100
_INDENT = "  "


def words(key: str) -> str:
    return key.replace("_", " ")


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def tree(value: Any, indent: str = "") -> list[str]:
    """Any JSON value as indented `key: value` lines, keys in words."""
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                if isinstance(item, list) and all(not isinstance(x, dict | list) for x in item):
                    lines.append(f"{indent}{words(key)}: {', '.join(_scalar(x) for x in item)}")
                else:
                    lines.append(f"{indent}{words(key)}:")
                    lines.extend(tree(item, indent + _INDENT))
            else:
                lines.append(f"{indent}{words(key)}: {_scalar(item) if item != [] and item != {} else '(none)'}")
    elif isinstance(value, list):
        for item in value:
            sub = tree(item, indent + _INDENT)
            if sub:
                lines.append(f"{indent}- {sub[0].lstrip()}")
                lines.extend(sub[1:])
            else:
                lines.append(f"{indent}- {_scalar(item)}")
    else:
        lines.append(f"{indent}{_scalar(value)}")
    return lines


def _stages(stages: list[dict[str, Any]]) -> list[str]:
    width = max((len(str(s.get("name", ""))) for s in stages), default=0)
    lines = []
    for stage in stages:
        gate = stage.get("gate") or {}
        evals = gate.get("evals") or {}
        shown = ", ".join(f"{k} {_scalar(v)}" for k, v in evals.items()) if isinstance(evals, dict) else ""
        battery = gate.get("battery") if isinstance(gate.get("battery"), dict) else {}
        lines.append(f"{_INDENT}{stage.get('name', '')!s:<{width}}  {stage.get('state', '')}"
                     f"  gate {gate.get('status', '-')}" + (f" [{battery.get('name')}]" if battery else "")
                     + (f" ({shown})" if shown else ""))
    return lines


def _check(data: dict[str, Any]) -> list[str]:
    lines = [f"Training is available ({data.get('contract_version', '')}; operations: "
             f"{', '.join(data.get('operations') or [])})."]
    booking = data.get("booking")
    if isinstance(booking, dict):
        topo = booking.get("gpu_topology") or {}
        said = "eligible" if booking.get("eligible") else f"NOT eligible ({booking.get('reason')})"
        lines.append(f"Booking {booking.get('booking_id')}: {said}")
        lines.append(f"{_INDENT}{topo.get('nodes')} nodes x {topo.get('gpus_per_node')} {topo.get('gpu')}, "
                     f"{booking.get('fabric')}, {booking.get('region')}; term ends {booking.get('term_ends_at')}")
    return lines


def _run(data: dict[str, Any]) -> list[str]:
    if data.get("found") is False:
        return [f"No run exists for idempotency key {data.get('idempotency_key')}."]
    lines = [f"Run {data.get('run_id')}: {data.get('state') or data.get('action', '') + ' done'}"]
    if "created" in data:
        lines[0] += " (created now)" if data["created"] else " (already existed: nothing new was created)"
        if data["created"] is False and not data.get("recovered_after_ambiguous_response"):
            lines.append("Nothing new started: a run already existed for this idempotency key, and the confirmation "
                         "reference given to this command was NOT used.")
    for key in ("booking_id", "manifest_sha256", "idempotency_key", "submit_idempotency_key", "updated_at"):
        if data.get(key) is not None:
            lines.append(f"{_INDENT}{words(key)}: {data[key]}")
    if data.get("stages"):
        lines.append("Stages:")
        lines.extend(_stages(data["stages"]))
    if data.get("failed_gates"):
        lines.append(f"Failed gates: {', '.join(data['failed_gates'])}")
    for proposal in data.get("proposed_actions") or []:
        lines.append(f"PROPOSED by the backend ({proposal.get('status')}, needs your decision): "
                     f"{proposal.get('action')} after a {str(proposal.get('reason')).replace('_', ' ')} at step "
                     f"{proposal.get('spike_step')} of stage {proposal.get('stage')} "
                     f"(loss {proposal.get('spike_loss')}, was {proposal.get('loss_before')})")
        lines.append(f"{_INDENT}restart from step {proposal.get('checkpoint_step')} "
                     f"({proposal.get('checkpoint_id') or 'the start of the stage'}): "
                     f"{proposal.get('repeated_steps')} step(s) run again, about ${proposal.get('repeated_cost_usd')}")
    for item in data.get("interruptions") or []:
        lines.append(f"Interruption at step {item.get('step')} ({item.get('stage')}): detected after "
                     f"{_scalar(item.get('detect_s'))} s, resumed from step {item.get('resumed_from_step')} after "
                     f"{_scalar(item.get('resume_s'))} s; {item.get('steps_lost')} step(s) run again"
                     + ("" if item.get("within_targets") else " (OUTSIDE the detect/resume targets)"))
    lines += _waited(data.get("wait"))
    if data.get("cleaned") is not None:
        lines.append(f"Cleaned up: {', '.join(data['cleaned']) or '(nothing)'}")
    if "booking_untouched" in data:
        lines.append(f"Booking untouched: {_scalar(data['booking_untouched'])}")
    return lines


def _logs(data: dict[str, Any]) -> list[str]:
    lines = [f"Log of run {data.get('run_id')}:"]
    for line in data.get("lines") or []:
        stage = f" [{line.get('stage')}]" if line.get("stage") else ""
        lines.append(f"{_INDENT}{line.get('ts')}{stage} {line.get('message')}")
    lines.append(f"next cursor: {data['next_cursor']}" if data.get("next_cursor") else "(end of the log so far)")
    return lines


_METRICS: dict[str, tuple[str, str, str]] = {  # key: (label, before the value, after it)
    "step": ("Step", "", ""),
    "loss": ("Loss", "", ""),
    "goodput": ("Goodput", "", ""),
    "interruption_rate": ("Interruption rate", "", ""),
    "checkpoint_bandwidth_gbps": ("Checkpoint bandwidth", "", " Gbit/s"),
    "cost_usd_to_date": ("Cost to date", "$", ""),
}


def _metrics(data: dict[str, Any]) -> list[str]:
    rows = [(label, f"{before}{_scalar(data[key])}{after}" if data.get(key) is not None else "-")
            for key, (label, before, after) in _METRICS.items() if key in data]
    rows += [(words(key).capitalize(), _scalar(value)) for key, value in data.items()
             if key not in _METRICS and key != "run_id" and not isinstance(value, dict | list)]
    found = data.get("interruptions")
    if isinstance(found, dict):
        rows.append(("Interruptions", f"{found.get('count')}, mean detect {_scalar(found.get('mean_detect_s'))} s "
                     f"(target < {_scalar(found.get('detect_target_s'))} s), mean resume "
                     f"{_scalar(found.get('mean_resume_s'))} s (target < {_scalar(found.get('resume_target_s'))} s), "
                     f"{found.get('steps_lost')} step(s) run again"
                     + ("" if found.get("within_targets") else "; OUTSIDE the targets")))
    rl = data.get("rl")
    if isinstance(rl, dict):
        rows.append(("RL", f"{str(rl.get('algorithm')).upper()} ({', '.join(rl.get('stability_fixes') or [])}); "
                     f"{rl.get('trainer_gpus')} trainer / {rl.get('rollout_gpus')} rollout GPU(s); rollout staleness "
                     f"{rl.get('staleness_steps')} of at most {rl.get('staleness_bound_steps')} step(s)"))
    width = max((len(label) for label, _ in rows), default=0)
    return [f"Metrics of run {data.get('run_id')}:", *(f"{_INDENT}{label + ':':<{width + 1}} {value}"
                                                       for label, value in rows)]


def _size(value: object) -> str:
    """A byte count as people read it (decimal units), the exact count beside it."""
    if not isinstance(value, int) or isinstance(value, bool):
        return "size unknown"
    if value < 1000:
        return f"{value} bytes"
    scaled, units = float(value) / 1000, ["kB", "MB", "GB", "TB", "PB"]
    while scaled >= 1000 and len(units) > 1:
        scaled, units = scaled / 1000, units[1:]
    return f"{scaled:.1f} {units[0]} ({value} bytes)"


def _waited(wait: object) -> list[str]:
    """How long a --wait waited, when it ended before the change it waited for (the notice says what next)."""
    if isinstance(wait, dict) and wait.get("timed_out"):
        return [f"Waited {_scalar(wait.get('waited_s'))} s of the {_scalar(wait.get('requested_s'))} s asked for."]
    return []


def _checkpoints(data: dict[str, Any]) -> list[str]:
    rows = data.get("checkpoints") or []
    lines = [f"Checkpoints of run {data.get('run_id')}: {len(rows)}"]
    for row in rows:
        lines.append(f"{_INDENT}step {row.get('step')}  {_size(row.get('size_bytes'))}  {row.get('uri')}  "
                     f"({row.get('checkpoint_id')}, {row.get('created_at')})")
    return lines


def terminal_columns() -> int:
    """The width the review is laid out for: the terminal's (`COLUMNS` first), never more than the
    review's own width, and the layout's minimum when that is all there is."""
    return min(shutil.get_terminal_size((REVIEW_WIDTH, 24)).columns, REVIEW_WIDTH)


def _digest(data: dict[str, Any], sha_key: str = "sha256") -> list[str]:
    """The review, laid out again for this terminal (`review_layout`: a value that wraps continues past
    the label column, so no wrapped text can look like a row of its own); `review_text` as it came when
    there is no review tree to lay out."""
    if isinstance(data.get("review_lines"), list):
        return [clean_text(str(line)) for line in data["review_lines"]]
    review, sha256 = data.get("review"), data.get(sha_key)
    if isinstance(review, dict) and isinstance(sha256, str):
        try:
            return review_lines(review, sha256, terminal_columns())
        except (KeyError, TypeError, AttributeError):
            pass  # not the shape this version lays out: the text the core laid out at its own width
    return clean_text(str(data.get("review_text", "")), multiline=True).split("\n")


def _review_url(request: dict[str, Any]) -> list[str]:
    """The link, on a line of its own so it can be opened or copied whole; never pre-authenticated."""
    return [
        "",
        "Review and decide at the Itô desk (sign in there yourself; the link carries no sign-in):",
        f"{_INDENT}{request.get('review_url')}",
        f"{_INDENT}request {request.get('request_id')} ({request.get('action')}): {request.get('status')}, "
        f"expires {request.get('expires_at')}",
        "",
    ]


def _plan(data: dict[str, Any]) -> list[str]:
    verdict = "every check passed" if data.get("valid") else \
        f"REFUSED by the backend's checks: {', '.join(data.get('failed_checks') or [])}"
    lines = [f"Plan {data.get('plan_id')} for booking {data.get('booking_id')}: {verdict}.", "Checks:"]
    checks = data.get("checks") or []
    width = max((len(str(c.get("name", ""))) for c in checks), default=0)
    for check in checks:
        why = ": ".join(str(p) for p in (check.get("reason"), check.get("message")) if p)
        lines.append(f"{_INDENT}{check.get('name', '')!s:<{width}}  {check.get('status')}"
                     + (f"  {why}" if why else ""))
    layout = data.get("parallelism")
    if isinstance(layout, dict):
        lines.append(f"Parallelism: data {layout.get('data')} x tensor {layout.get('tensor')} x pipeline "
                     f"{layout.get('pipeline')} on {layout.get('gpus')} GPU(s), sharding {layout.get('sharding')}, "
                     f"{layout.get('precision')}; why:")
        lines += [f"{_INDENT}{reason}" for reason in layout.get("reasons") or []]
    estimate = data.get("estimate")
    if isinstance(estimate, dict):
        lines.append(f"Estimate: ${estimate.get('usd')} for {_scalar(estimate.get('gpu_hours'))} GPU hours "
                     f"(an estimate, not a cap): {estimate.get('basis')}")
        for line in estimate.get("stages") or []:
            lines.append(f"{_INDENT}{line.get('name')}: ${line.get('usd')} "
                         f"({_scalar(line.get('gpu_hours'))} GPU hours)")
    lines.append(f"Confirming allows at most ${data.get('max_cost_usd')} for this submission; "
                 f"SHA-256 {data.get('manifest_sha256')}.")
    if data.get("review_text"):
        lines += ["", "What is being confirmed:", *_digest(data, "manifest_sha256")]
    request = data.get("confirmation_request")
    if isinstance(request, dict):
        lines += _review_url(request)
    else:
        lines.append("No confirmation request was opened: change the manifest (or the booking), then plan again.")
    return lines


def _opened(data: dict[str, Any]) -> list[str]:
    lines = [f"Confirmation request {data.get('request_id')}: {data.get('action')} of run {data.get('run_id')} "
             f"(booking {data.get('booking_id')}, untouched either way). Nothing has changed yet."]
    if data.get("action") == "training.restart":
        lines.append(f"{_INDENT}confirming allows at most ${data.get('max_cost_usd')} for the steps run again")
    return lines + _review_url(data)


def _decision(data: dict[str, Any]) -> list[str]:
    status, action = data.get("status"), data.get("action")
    subject = f"run {data.get('run_id')}" if data.get("run_id") else f"booking {data.get('booking_id')}"
    lines = [f"Confirmation request {data.get('request_id')} ({action} of {subject}): {str(status).upper()}"]
    if status == "confirmed":
        lines += [f"Confirmation ref: {data.get('confirmation_ref')}",
                  f"{_INDENT}decided {data.get('decided_at')}; single use; it authorises nothing by itself (the "
                  "backend checks it again when the command arrives)."]
        if action == "training.create":
            lines.append(f"{_INDENT}for the manifest with SHA-256 {data.get('manifest_sha256')}, at most "
                         f"${data.get('max_cost_usd')}: submit exactly that file.")
    elif status == "pending":
        lines += [f"Not decided yet. The review link: {data.get('review_url')}",
                  f"{_INDENT}expires {data.get('expires_at')}"]
    elif status == "declined":
        lines.append(f"Declined at the Itô desk on {data.get('decided_at')}; nothing will happen for it.")
    else:
        lines.append("It expired undecided; nothing happened.")
    lines += _waited(data.get("wait"))
    return lines


RENDERERS: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "check": _check, "digest": _digest, "plan": _plan, "request-confirmation": _opened, "confirmation": _decision,
    "train": _run, "status": _run, "cancel": _run, "cleanup": _run, "restart": _run, "logs": _logs,
    "checkpoints": _checkpoints,
    "metrics": _metrics,
}


def _wrap(text: str, prefix: str = "") -> list[str]:
    return textwrap.wrap(text, width=WRAP, initial_indent=prefix, subsequent_indent=" " * len(prefix),
                         break_long_words=False, break_on_hyphens=False) or [prefix.rstrip()]


def render_human(envelope: Envelope, verb: str | None = None, next_command: str | None = None,
                 whole_review: list[str] | None = None) -> str:
    """A short readable form of a (CLI-worded) envelope; `--json` is the exact one. `whole_review`: the
    review laid out whole, shown instead of the envelope's shortened one."""
    envelope = clean_envelope(envelope)
    notice = envelope.notice
    if next_command is not None:
        notice = notice.removesuffix(f" Next command: {next_command}")
    if envelope.error is not None:
        err = envelope.error
        lines = [f"REFUSED {err.code.value}" + (f" (gate: {err.gate.value})" if err.gate else "")]
        lines.append(err.message)  # not wrapped: it may hold a command (chmod 600 PATH) to copy whole
        details = dict(err.details or {})
        for finding in details.pop("findings", []):
            lines.append(f"  at {finding['pointer'] or '/'}: {finding['kind']}")
        for problem in details.pop("problems", []):
            lines.append(f"  at {problem['pointer'] or '/'}: {problem['problem']}")
        lines += tree(details, _INDENT)
        lines += _wrap(notice, "Next: ")
    else:
        data = envelope.data or {}
        renderer = RENDERERS.get(verb or "")
        if whole_review is not None:
            data = {**data, "review_lines": whole_review}
        lines = ["OK", *(renderer(data) if renderer is not None else tree(data))]
        lines += _wrap(notice)
    if next_command is not None:
        lines.append(f"Next command: {next_command}")
    lines.append(f"(live API contacted: {'yes' if envelope.live_api_contacted else 'no'})")
    return "\n".join(clean_line(line) for line in lines)


def render_json(envelope: Envelope) -> str:
    """The envelope after the egress, as JSON."""
    return clean_envelope(envelope).to_json(indent=2)


# ---------------------------------------------------------------------------- the progress bar


def display_width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 0 if unicodedata.combining(ch) else 1
               for ch in text)


def fit(text: str, columns: int) -> str:
    """`text` cut to at most `columns` display columns, with an ellipsis when cut."""
    if display_width(text) <= columns:
        return text
    out, used = [], 0
    for ch in text:
        w = display_width(ch)
        if used + w > columns - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


class ProgressBar:
    """One line on a terminal, redrawn in place: a bar of value/total and the core's words for where
    the thing is (the run's stage n of total, the request's state). Never wider than the terminal
    (one column is left free so no terminal wraps; a narrow one gets the words without the bar, and
    without their subject when they still do not fit), never a raw control character but the leading
    carriage return, and the line is finished with a newline once if anything was drawn."""

    BAR = 20  # the bar's width on a terminal of 80 columns or more; narrower ones give the words the room

    def __init__(self, terminal: TextIO) -> None:
        self.terminal = terminal
        self.drawn = 0  # display width of the last line drawn

    def columns(self) -> int:
        try:
            return max(os.get_terminal_size(self.terminal.fileno()).columns, 10)
        except (OSError, ValueError, AttributeError):
            return 80

    def line(self, value: float, total: float | None, message: str | None, columns: int) -> str:
        words_ = clean_line(message or "")  # the core cleaned it; cleaning is idempotent and cheap
        if display_width(words_) > columns - 1 - self.BAR and ": " in words_:
            # Short of room: drop the subject ("run run_…: ", "confirmation request creq_… (…): "), which the
            # person named on the command line, and keep where it is (state, stage n of total, request status).
            words_ = words_.split(": ", 1)[1]
        size = max(0, min(self.BAR, (columns - 40) // 2))
        if total and size >= 5:
            filled = max(0, min(size, int(size * value / total)))
            head = f"[{'#' * filled}{'.' * (size - filled)}] "
        else:
            head = ""
        return fit(head + words_, columns - 1)

    async def __call__(self, value: float, total: float | None, message: str | None) -> None:
        text = self.line(value, total, message, self.columns())
        width = display_width(text)
        self.terminal.write("\r" + text + " " * max(0, self.drawn - width))
        self.terminal.flush()
        self.drawn = width

    def finish(self) -> None:
        if self.drawn:
            self.terminal.write("\n")
            self.terminal.flush()
            self.drawn = 0
