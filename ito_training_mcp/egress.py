"""The one way out (contract §10): every string that leaves this server passes through here.

Envelopes, progress messages, stderr log lines, audit lines and CLI output all use these
functions; nothing writes a string out any other way. For each string, in this order:

1. **Redaction.** Every credential this process resolved (registered with `redact`) and provider
   token shapes become `<redacted>`. A string that still holds one once its invisible characters
   are removed is replaced whole: a zero-width space inside an echoed token cannot smuggle the
   token out in two visible halves.
2. **Escaping.** Every character Python does not call printable -- C0 and C1 controls, DEL,
   bidi controls and marks, zero-width and other format characters, line and paragraph separators,
   surrogates, private-use and unassigned code points, spaces other than U+0020 -- is written as
   `⟨U+XXXX⟩` (the same convention the desk uses). No terminal can interpret what it cannot see.
   Newline and tab survive only in texts that are multi-line by design (the review text and the
   manifest's description), never CR, ESC or anything else.

Relayed backend text -- everything in an envelope's `data` and `error.details` except the review a
local digest produced -- additionally passes the full manifest scanner (`secret_scan.value_kinds`)
and is replaced by a redaction note on any finding: a training job can print a PEM key or a
database URL with its password; this server does not forward it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from typing import Any

from .envelope import Envelope
from .redact import Redactor

Progress = Callable[[float, float | None, str | None], Awaitable[None]]

HIDDEN_CREDENTIAL_NOTE = "<redacted: held a credential behind invisible characters>"
_KEPT_IN_MULTILINE = re.compile(r"([\n\t])")
# Envelope fields that are multi-line by design; everything else is one line.
MULTILINE_FIELDS = frozenset({("data", "review_text"), ("data", "review", "description")})
# Envelope fields built locally from a manifest that already passed the scanner at gate 2. They
# are not relayed backend text; scanning a composed text again could only produce false alarms.
LOCALLY_SCANNED = frozenset({("data", "review"), ("data", "review_text")})
_RELAYED_ROOTS = frozenset({("data",), ("error", "details")})


def visible(code_point: str) -> str:
    """How one unprintable character is shown: `⟨U+202E⟩`."""
    return f"⟨U+{ord(code_point):04X}⟩"


def _escape_all(text: str) -> str:
    return "".join(ch if ch.isprintable() else visible(ch) for ch in text)


def _printable(text: str, multiline: bool) -> bool:
    if text.isprintable():  # C speed: the common case costs one pass
        return True
    return multiline and all(part.isprintable() for part in _KEPT_IN_MULTILINE.split(text) if part not in "\n\t")


def escape(text: str, *, multiline: bool = False) -> str:
    """Show every unprintable character as `⟨U+XXXX⟩`; keep newline and tab only when `multiline`."""
    if text.isprintable():
        return text
    if not multiline:
        return _escape_all(text)
    return "".join(
        part if part in ("\n", "\t") or part.isprintable() else _escape_all(part)
        for part in _KEPT_IN_MULTILINE.split(text)
    )


def _strip_unprintable(text: str, keep: str) -> str:
    return "".join(ch for ch in text if ch.isprintable() or ch in keep)


def clean_text(text: str, *, multiline: bool = False, redactor: Redactor | None = None) -> str:
    """The egress of one string: secrets redacted, a credential hidden behind invisible characters
    replaced whole, unprintable characters escaped."""
    redactor = redactor or Redactor()
    text = redactor.redact(text)
    if _printable(text, multiline):
        return text
    if redactor.holds_secret(_strip_unprintable(text, "\n\t" if multiline else "")):
        return HIDDEN_CREDENTIAL_NOTE
    return escape(text, multiline=multiline)


def clean_line(text: str) -> str:
    """One line for a terminal, a log or a progress bar: nothing in it can start another line."""
    return clean_text(text, multiline=False)


def relay_note(kinds: list[str]) -> str:
    return f"<redacted: looked like a credential ({', '.join(kinds)})>"


def relayed_text(text: str) -> str:
    """Backend text relayed to an agent: the full manifest scanner, then the egress of any string."""
    kinds = _value_kinds()(text)
    return relay_note(kinds) if kinds else text


@functools.cache
def _value_kinds() -> Callable[[str], list[str]]:
    from .secret_scan import value_kinds  # lazy: keeps start-up light

    return value_kinds


# ---------------------------------------------------------------------- envelopes


class _Walk:
    """One pass over an envelope's wire form; remembers whether anything changed."""

    def __init__(self) -> None:
        self.changed = False
        self.redactor = Redactor()

    def string(self, text: str, path: tuple[str, ...], relayed: bool) -> str:
        out = relayed_text(text) if relayed else text
        out = clean_text(out, multiline=path in MULTILINE_FIELDS, redactor=self.redactor)
        if out != text:
            self.changed = True
        return out

    def value(self, value: Any, path: tuple[str, ...], relayed: bool) -> Any:
        if path in _RELAYED_ROOTS:
            relayed = True
        if path in LOCALLY_SCANNED:
            relayed = False
        if isinstance(value, str):
            return self.string(value, path, relayed)
        if isinstance(value, list | tuple):
            return [self.value(item, path, relayed) for item in value]
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for index, (key, item) in enumerate(value.items()):
                name = self.string(key, (*path, "<key>"), relayed) if isinstance(key, str) else key
                if name in out:  # two keys cleaned to the same text: keep both, distinguishably
                    name = f"{name} #{index}"
                    self.changed = True
                out[name] = self.value(item, (*path, str(key)), relayed)
            return out
        return value


def clean_envelope(envelope: Envelope) -> Envelope:
    """Every string and key of an envelope through the egress; the same object when nothing changed.

    The walk reads the model's fields directly (not its JSON form), so even text that could not be
    encoded -- a lone surrogate -- is escaped rather than failing the call."""
    walk = _Walk()
    fields: dict[str, Any] = {"ok": envelope.ok, "live_api_contacted": envelope.live_api_contacted,
                              "notice": walk.value(envelope.notice, ("notice",), False)}
    if envelope.data is not None:
        fields["data"] = walk.value(envelope.data, ("data",), False)
    if envelope.error is not None:
        error = envelope.error
        fields["error"] = {"code": error.code, "retryable": error.retryable, "gate": error.gate,
                           "message": walk.value(error.message, ("error", "message"), False),
                           "details": walk.value(error.details, ("error", "details"), False)}
    if not walk.changed:
        return envelope
    return Envelope.model_validate(fields)


def clean_progress(progress: Progress) -> Progress:
    """A progress callback whose message always passes the egress first. A message carries backend
    text (a stage name), so it is relayed text too. Cleaning is idempotent: wrapping twice costs a
    little and changes nothing."""

    async def report(value: float, total: float | None, message: str | None) -> None:
        await progress(value, total, None if message is None else clean_line(relayed_text(message)))

    return report
