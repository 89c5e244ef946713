"""The one way out: every string that leaves this server passes through here.

Envelopes, progress messages, stderr log lines, audit lines and CLI output all use these functions; nothing
writes a string out any other way. For each string, in this order:

1. **Relayed text is scanned.** Text the backend sent (anything in an envelope's `data` and
   `error.details` but the review this server built from a manifest that passed gate 2) goes through the
   secret scanner and is replaced by a note on any finding: a training job can print a PEM key or a
   database URL with its password; this server does not forward it.
2. **Redaction.** Every credential this process resolved and every credential shape in the text become
   `<redacted>`. A string that still holds one once its invisible characters are removed is replaced whole:
   a zero-width space inside an echoed token cannot smuggle it out in two visible halves.
3. **Escaping.** Every character Python does not call printable (controls, bidi controls, format and
   private-use characters, surrogates, spaces other than U+0020 ...) and every character that shows as
   nothing although Python calls it printable is written as `⟨U+XXXX⟩`. Newline and tab survive only in
   text that is multi-line by design (the review text and the manifest's description).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from ito_training_mcp.egress import redact
from ito_training_mcp.envelope import Envelope
from ito_training_mcp.scanner import INVISIBLE, INVISIBLE_RANGES, text_kinds

Progress = Callable[[float, float | None, str | None], Awaitable[None]]

HIDDEN_CREDENTIAL_NOTE = "<redacted: held a credential behind invisible characters>"
# Envelope fields that are multi-line by design; everything else is one line.
MULTILINE_FIELDS = frozenset({("data", "review_text"), ("data", "review", "description")})
# Built here from a manifest that passed gate 2's scanner: not relayed text (scanning text this server
# composed could only raise false alarms). Registered credentials and escaping still apply.
LOCAL_FIELDS = frozenset({("data", "review"), ("data", "review_text")})
_RELAYED_ROOTS = frozenset({("data",), ("error", "details")})


def visible(code_point: str) -> str:
    """How one unprintable or invisible character is shown: `⟨U+202E⟩`."""
    return f"⟨U+{ord(code_point):04X}⟩"


def shows(ch: str) -> bool:
    """Is this character shown as itself: printable, and not one that shows as nothing?"""
    return ch.isprintable() and ord(ch) not in INVISIBLE


_SHOWS_NOTHING = re.compile("[" + "".join(chr(lo) if lo == hi else f"{chr(lo)}-{chr(hi)}"
                                           for lo, hi in INVISIBLE_RANGES) + "]")


def _all_shown(text: str, keep: str = "") -> bool:
    """Does every character show as itself (`keep`: newline and tab too)? In C but for one search."""
    if keep:
        text = text.replace("\n", "").replace("\t", "")
    return text.isprintable() and (text.isascii() or _SHOWS_NOTHING.search(text) is None)


def escape(text: str, *, multiline: bool = False) -> str:
    """Every unprintable or invisible character as `⟨U+XXXX⟩`; newline and tab kept only when `multiline`."""
    keep = "\n\t" if multiline else ""
    if _all_shown(text, keep):
        return text
    return "".join(ch if shows(ch) or ch in keep else visible(ch) for ch in text)


def quoted(text: str) -> str:
    """A string from the manifest or the backend, in a sentence of this server's, as quoted data: JSON string
    syntax (a quote or a backslash inside it is escaped, so nothing in it can end the quote), and nothing
    unprintable shown raw."""
    return escape(json.dumps(text, ensure_ascii=False))


def relay_note(kinds: list[str]) -> str:
    return f"<redacted: looked like a credential ({', '.join(kinds)})>"


def clean_text(text: str, *, multiline: bool = False, relayed: bool = False, shapes: bool = True) -> str:
    """The egress of one string. `relayed`: text from the backend (scanned whole); `shapes=False`: text built
    from a manifest that passed the scanner (only registered credentials are looked for)."""
    if relayed and (kinds := text_kinds(text)):
        return relay_note(kinds)
    text = redact.redact(text, shapes=shapes)
    keep = "\n\t" if multiline else ""
    if _all_shown(text, keep):
        return text
    shown = "".join(ch for ch in text if shows(ch) or ch in keep)
    if redact.holds_known(shown) or (shapes and text_kinds(shown)):
        return HIDDEN_CREDENTIAL_NOTE
    return escape(text, multiline=multiline)


def clean_line(text: str) -> str:
    """One line for a terminal, a log or a progress bar: nothing in it can start another line."""
    return clean_text(text)


def relayed_line(text: str) -> str:
    """One line of backend text (a stage name in a progress message, say)."""
    return clean_text(text, relayed=True)


def _clean(value: Any, path: tuple[str, ...], relayed: bool, local: bool) -> Any:
    if path in _RELAYED_ROOTS:
        relayed = True
    if path in LOCAL_FIELDS:
        relayed, local = False, True
    if isinstance(value, str):
        return clean_text(value, multiline=path in MULTILINE_FIELDS, relayed=relayed, shapes=not local)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for index, (key, item) in enumerate(value.items()):
            name = clean_text(str(key), relayed=relayed, shapes=not local)
            if name in out:  # two keys cleaned to the same text: keep both, distinguishably
                name = f"{name} #{index}"
            out[name] = _clean(item, (*path, str(key)), relayed, local)
        return out
    if isinstance(value, list | tuple):
        return [_clean(item, path, relayed, local) for item in value]
    return value


def clean_envelope(envelope: Envelope) -> Envelope:
    """Every string and key of an envelope through the egress. The walk reads the model's fields (not its
    JSON form), so even text that could not be encoded -- a lone surrogate -- is escaped, not an error."""
    fields: dict[str, Any] = {"ok": envelope.ok, "live_api_contacted": envelope.live_api_contacted,
                              "notice": clean_text(envelope.notice)}
    if envelope.data is not None:
        fields["data"] = _clean(envelope.data, ("data",), False, False)
    if envelope.error is not None:
        error = envelope.error
        fields["error"] = {"code": error.code, "retryable": error.retryable, "gate": error.gate,
                           "message": clean_text(error.message),
                           "details": _clean(error.details, ("error", "details"), False, False)}
    return Envelope.model_validate(fields)


def clean_progress(progress: Progress) -> Progress:
    """A progress callback whose message always passes the egress first (a message may carry backend text,
    a stage name, so it is relayed text). Cleaning is idempotent."""

    async def report(value: float, total: float | None, message: str | None) -> None:
        await progress(value, total, None if message is None else relayed_line(message))

    return report
