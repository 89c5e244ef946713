"""The one way out (contract §10): every string that leaves this server passes through here.

Envelopes, progress messages, stderr log lines, audit lines and CLI output all use these
functions; nothing writes a string out any other way. For each string, in this order:

1. **Redaction.** Every credential this process resolved (registered with `redact`) and provider
   token shapes become `<redacted>`. A string that still holds one once its invisible characters
   are removed is replaced whole: a zero-width space inside an echoed token cannot smuggle the
   token out in two visible halves.
2. **Escaping.** Every character Python does not call printable -- C0 and C1 controls, DEL,
   bidi controls and marks, zero-width and other format characters, line and paragraph separators,
   surrogates, private-use and unassigned code points, spaces other than U+0020 -- and every
   character that shows as nothing although Python calls it printable (`invisible.py`: the combining
   grapheme joiner, variation selectors, Hangul fillers, the braille blank ...) is written as
   `⟨U+XXXX⟩` (the same convention the desk uses). No terminal can interpret what it cannot see,
   and no reader can miss it.
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
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from ito_training_mcp.egress.invisible import has_invisible, not_shown_ranges, re2_class, shows
from ito_training_mcp.egress.redact import Redactor
from ito_training_mcp.envelope import Envelope
from ito_training_mcp.secret_scan import value_kinds

Progress = Callable[[float, float | None, str | None], Awaitable[None]]

HIDDEN_CREDENTIAL_NOTE = "<redacted: held a credential behind invisible characters>"
_KEPT_IN_MULTILINE = re.compile(r"([\n\t])")
# Envelope fields that are multi-line by design; everything else is one line.
MULTILINE_FIELDS = frozenset({("data", "review_text"), ("data", "review", "description")})
# Envelope fields built locally from a manifest that already passed the scanner and the character
# rule at gate 2. They are not relayed backend text (scanning a composed text again could only
# produce false alarms), and hold no token shape; the configured credential and escaping still apply.
LOCALLY_SCANNED = frozenset({("data", "review"), ("data", "review_text")})
_RELAYED_ROOTS = frozenset({("data",), ("error", "details")})
_MULTILINE_PARENTS = frozenset(field[:-1] for field in MULTILINE_FIELDS)
_CONTAINERS = (dict, list, tuple)


class LocalTree(dict[str, Any]):
    """A tree of text this server built itself from a manifest that passed gate 2 (the digest's review),
    with `sources`: strings in which every key and every string of the tree occurs (the builder
    guarantees it; a test keeps it so). At a LOCALLY_SCANNED field the egress checks those sources,
    already joined, instead of walking a mebibyte of tree: nothing unprintable but newline and tab
    (which the character rule at gate 2 allows in the description only) and no registered credential.
    `shown_as_is` is gate 2's verdict from its look at the manifest's bytes
    (`manifest_characters.look_at_bytes`): no `\\u` escape, and no character that is not shown as
    itself (for ASCII: no DEL), so that, the character rule having passed, every key and string
    shows as itself but for newline and tab: then only the registered credentials are looked for.
    Anything else in such a field is walked as usual."""

    __slots__ = ("shown_as_is", "sources")

    def __init__(self, tree: dict[str, Any], *, sources: tuple[str, ...], shown_as_is: bool = False) -> None:
        super().__init__(tree)
        self.sources = sources
        self.shown_as_is = shown_as_is


class LocalText(str):
    """Text this server laid out itself from the strings of a manifest that passed gate 2 (the digest's
    `review_text`), with `strings`: every one of those strings, unbroken. The layout wraps long values,
    which may split a string -- a registered credential too -- across two lines, where no search of the
    text finds it; so the credential is looked for in `strings`, and a text whose strings hold one is
    withheld whole (`REVIEW_WITHHELD_NOTE`). `strings` may come in parts (each is searched whole).
    `shown_as_is`: gate 2's verdict that every one of those strings shows as itself, newline and tab
    aside (see `LocalTree`; the layout adds only labels, spaces and newlines)."""

    strings: tuple[str, ...]
    shown_as_is: bool

    def __new__(cls, text: str, *, strings: str | tuple[str, ...], shown_as_is: bool = False) -> LocalText:
        made = super().__new__(cls, text)
        made.strings = (strings,) if isinstance(strings, str) else strings
        made.shown_as_is = shown_as_is
        return made


REVIEW_WITHHELD_NOTE = "<redacted: the review held a credential; it is not shown>"


def visible(code_point: str) -> str:
    """How one unprintable or invisible character is shown: `⟨U+202E⟩`."""
    return f"⟨U+{ord(code_point):04X}⟩"


def _escape_all(text: str) -> str:
    return "".join(ch if shows(ch) else visible(ch) for ch in text)


# ASCII is printable but for C0 and DEL: in a long ASCII text, one byte search per such character
# (memchr speed) is several times faster than `str.isprintable`, which looks each character up.
_ASCII_UNPRINTABLE = tuple(chr(c) for c in (*range(0x20), 0x7F))
_ASCII_UNPRINTABLE_MULTILINE = tuple(c for c in _ASCII_UNPRINTABLE if c not in "\n\t")
_LONG = 512


def _printable(text: str, multiline: bool) -> bool:
    """Is every character shown as itself (printable and not invisible; newline and tab too, when
    `multiline`)?"""
    if not multiline:
        return _shown_as_is(text)
    if len(text) > _LONG and text.isascii():
        return not any(c in text for c in _ASCII_UNPRINTABLE_MULTILINE)
    if text.isprintable():  # C speed: the common case costs one pass
        return not has_invisible(text)
    if "\n" not in text and "\t" not in text:  # (a byte search each, where removing them copies the text)
        return False
    return text.replace("\n", "").replace("\t", "").isprintable() and not has_invisible(text)


def _shown_as_is(text: str) -> bool:
    """Is every character shown as itself (printable and not invisible)?"""
    if len(text) > _LONG and text.isascii():  # `isascii` costs nothing for a str
        return not any(c in text for c in _ASCII_UNPRINTABLE)
    return text.isprintable() and not has_invisible(text)


def escape(text: str, *, multiline: bool = False) -> str:
    """Show every unprintable or invisible character as `⟨U+XXXX⟩`; keep newline and tab only when
    `multiline`."""
    if _shown_as_is(text):
        return text
    if not multiline:
        return _escape_all(text)
    return "".join(
        part if part in ("\n", "\t") or _shown_as_is(part) else _escape_all(part)
        for part in _KEPT_IN_MULTILINE.split(text)
    )


def _strip_unprintable(text: str, keep: str) -> str:
    """`text` without the characters it would not show as themselves, but those in `keep`. A long text
    is not stripped one character at a time (~2 us each: a mebibyte of manifest with one no-break
    space took 380 ms): the few such characters are found by RE2 in its UTF-8 and cut out; past
    `_FEW` of them, each distinct one is removed by a replace (a pass in C), or, when there are many
    distinct ones, by one translation (~150 ns a character)."""
    if len(text) <= _LONG:
        return "".join(ch for ch in text if shows(ch) or ch in keep)
    search = _not_shown_utf8(keep)
    if search is not None and (data := _utf8(text)) is not None:
        pieces: list[bytes] = []
        pos = 0
        for count, match in enumerate(search.finditer(data)):
            if count == _FEW:
                break
            pieces.append(data[pos:match.start()])
            pos = match.end()
        else:
            pieces.append(data[pos:])
            return b"".join(pieces).decode("utf-8")
    odd = [ch for ch in set(text) if not (shows(ch) or ch in keep)]
    if len(odd) > _FEW:
        return text.translate(dict.fromkeys(map(ord, odd)))
    for ch in odd:
        text = text.replace(ch, "")
    return text


_FEW = 64


def _utf8(text: str) -> bytes | None:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None


@functools.cache
def _not_shown_utf8(keep: str) -> Any:
    """RE2's search of UTF-8 for every character `shows` says no to, but those in `keep` (built once,
    ~100 ms); None without RE2."""
    try:
        import re2  # type: ignore[import-untyped]  # no type information shipped
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        return None
    options = re2.Options()
    options.never_capture = True
    layout = [(ord(ch), ord(ch)) for ch in "\t\n\r" if ch not in keep]  # not_shown_ranges leaves these out
    return re2.compile(re2_class((*not_shown_ranges(), *layout)), options)


def clean_text(
    text: str, *, multiline: bool = False, redactor: Redactor | None = None, shapes: bool = True
) -> str:
    """The egress of one string: secrets redacted, a credential hidden behind invisible characters
    replaced whole, unprintable characters escaped. `shapes=False` skips the token-shape patterns
    for text that already passed the full scanner (never the configured credential, never escaping)."""
    redactor = redactor or Redactor()
    text = redactor.redact(text, shapes=shapes)
    if _printable(text, multiline):
        return text
    shown = _strip_unprintable(text, "\n\t" if multiline else "")
    if redactor.holds_secret(shown) if shapes else redactor.holds_known(shown):
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

    return value_kinds


# ---------------------------------------------------------------------- envelopes


class _Walk:
    """One pass over an envelope's fields; remembers whether anything changed."""

    def __init__(self) -> None:
        self.changed = False
        self.redactor = Redactor()
        self._checked: dict[tuple[int, bool], tuple[str, bool]] = {}  # the same text is checked once
        self._shown: dict[tuple[int, bool], tuple[str, bool]] = {}  # and looked at once

    def _text_clean(self, text: str, multiline: bool, printable: bool = False) -> bool:
        key = (id(text), multiline)
        if key not in self._checked:  # the text is kept with its verdict, so its id stays its own
            clean = (printable or self._printable(text, multiline)) and not self.redactor.holds_known(text)
            self._checked[key] = (text, clean)
        return self._checked[key][1]

    def _printable(self, text: str, multiline: bool) -> bool:
        """`_printable`, once per text: a digest's review and its text share their sources (the
        manifest's text, a mebibyte)."""
        key = (id(text), multiline)
        if key not in self._shown:
            self._shown[key] = (text, _printable(text, multiline))
        return self._shown[key][1]

    def is_clean(self, parts: list[tuple[tuple[str, ...], Any]]) -> bool:
        """The quick path for the usual envelope: all of its text at once. Every string is printable,
        no secret or token shape is in the text, and the relayed strings together give the scanner
        no finding -- then no string needs work. (The scanner finds in a newline-joined text whatever
        it finds in one of its lines; test_egress pins that.) Anything else takes the full walk."""
        own: list[str] = []
        relayed: list[str] = []
        for path, value in parts:
            if not self._collect(value, path, False, own, relayed):
                return False
        everything = own + relayed
        if not _shown_as_is("".join(everything)) or self.redactor.holds_secret("\n".join(everything)):
            return False
        return not relayed or not _value_kinds()("\n".join(relayed))

    def _collect(self, value: Any, path: tuple[str, ...], relayed: bool, own: list[str], out: list[str]) -> bool:
        if path in _RELAYED_ROOTS:
            relayed = True
        if path in LOCALLY_SCANNED:
            return self._already_clean(value, path)
        if len(path) >= 2:  # below the roots nothing changes zone: gather the rest in one sweep
            (out if relayed else own).extend(_strings(value))
            return True
        if isinstance(value, str):
            (out if relayed else own).append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                (out if relayed else own).append(str(key))
                if not self._collect(item, (*path, str(key)), relayed, own, out):
                    return False
        elif isinstance(value, list | tuple):
            return all(self._collect(item, path, relayed, own, out) for item in value)
        return True

    def string(self, text: str, path: tuple[str, ...], relayed: bool, scanned: bool) -> str:
        out = relayed_text(text) if relayed else text
        out = clean_text(out, multiline=path in MULTILINE_FIELDS, redactor=self.redactor, shapes=not scanned)
        if out != text:
            self.changed = True
        return out

    def value(self, value: Any, path: tuple[str, ...], relayed: bool = False, scanned: bool = False) -> Any:
        if path in _RELAYED_ROOTS:
            relayed = True
        if path in LOCALLY_SCANNED:
            relayed, scanned = False, True
            if self._already_clean(value, path):
                return value
            if isinstance(value, LocalText) and self._withheld(value):
                self.changed = True
                return REVIEW_WITHHELD_NOTE
        if isinstance(value, str):
            return self.string(value, path, relayed, scanned)
        if scanned and path not in _MULTILINE_PARENTS and isinstance(value, _CONTAINERS) and \
                self._plain(value.values() if isinstance(value, dict) else value, ()) and self._plain_tree(value):
            return value  # the whole subtree at once (a list of data references, say), once its own
            # strings are (a string of its own that is not shown, the description, spares the join)
        if isinstance(value, list | tuple):
            if scanned and not any(isinstance(item, _CONTAINERS) for item in value) and self._plain(value, ()):
                return list(value)  # a list of labels at once
            return [self.value(item, path, relayed, scanned) for item in value]
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            if scanned and (path not in _MULTILINE_PARENTS) and self._plain(value.values(), value):
                # every key and string here at once; only what is not a string is walked
                return {key: item if isinstance(item, str) else self.value(item, (*path, key), relayed, scanned)
                        for key, item in value.items()}
            for index, (key, item) in enumerate(value.items()):
                name = self.string(key, (*path, "<key>"), relayed, scanned) if isinstance(key, str) else key
                if name in out:  # two keys cleaned to the same text: keep both, distinguishably
                    name = f"{name} #{index}"
                    self.changed = True
                out[name] = self.value(item, (*path, str(key)), relayed, scanned)
            return out
        return value

    def _plain(self, values: Any, keys: Any) -> bool:
        """Do these keys and string values (of a manifest that passed gate 2) show as themselves, and
        hold no registered credential, all together? (One look instead of one walk step each; a
        credential only the joining made sends them to the walk all the same.)"""
        strings = [v for v in values if isinstance(v, str)]
        if any(not isinstance(key, str) for key in keys):
            return False
        joined = " ".join((*keys, *strings))
        return _shown_as_is(joined) and not self.redactor.holds_known(joined)

    def _plain_tree(self, value: Any) -> bool:
        """`_plain` for every key and string of a subtree, joined (`_joined_strings`)."""
        joined = _joined_strings(value)
        return joined is not None and _shown_as_is(joined) and not self.redactor.holds_known(joined)

    def _withheld(self, text: LocalText) -> bool:
        """Do the strings under a laid-out text hold a registered credential (behind invisible ones too)?"""
        if not self.redactor.knows_any:
            return False
        for strings in text.strings:
            if self.redactor.holds_known(strings):
                return True
            if (not text.shown_as_is and not self._printable(strings, True)
                    and self.redactor.holds_known(_strip_unprintable(strings, "\n\t"))):
                return True
        return False

    def _already_clean(self, value: Any, path: tuple[str, ...]) -> bool:
        """The fast path for a digest's review (up to a mebibyte of text): it passed the scanner and the
        character rule at gate 2, so only a registered credential or another unprintable character (a
        zero-width space, say) could need work. Every key and string is checked at once, joined by
        spaces: nothing unprintable, no registered credential, and newline and tab only in the fields
        that are multi-line by design. Anything else (a credential that only the joining made, too)
        takes the walk, string by string."""
        if isinstance(value, LocalText):
            return self._text_clean(value, True, value.shown_as_is) and not self._withheld(value)
        if isinstance(value, str):
            return self._text_clean(value, path in MULTILINE_FIELDS)
        if isinstance(value, LocalTree):
            return all(self._text_clean(text, True, value.shown_as_is) for text in value.sources)
        joined = _joined_strings(value)
        if joined is None or not _printable(joined, True) or self.redactor.holds_known(joined):
            return False
        if "\n" not in joined and "\t" not in joined:
            return True
        breaks = joined.count("\n") + joined.count("\t")
        if isinstance(value, dict):
            allowed = [value.get(field[-1]) for field in MULTILINE_FIELDS if field[:-1] == path]
            breaks -= sum(text.count("\n") + text.count("\t") for text in allowed if isinstance(text, str))
        return breaks == 0


def _joined_strings(value: Any) -> str | None:
    """Every key and string in `value` joined by spaces (a list of strings is joined in C: the digest's
    review holds lists of thousands of labels); None when a key is not a string."""
    parts: list[str] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            parts.append(node)
        elif isinstance(node, dict):
            parts.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            try:
                parts.append(" ".join(node))
            except TypeError:  # not all strings
                stack.extend(node)
    try:
        return " ".join(parts)
    except TypeError:  # a key that is not a string: the walk handles it
        return None


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for key, item in node.items():
                yield str(key)
                stack.append(item)
        elif isinstance(node, list | tuple):
            stack.extend(node)


def clean_envelope(envelope: Envelope) -> Envelope:
    """Every string and key of an envelope through the egress; the same object when nothing changed.

    The walk reads the model's fields directly (not its JSON form), so even text that could not be
    encoded -- a lone surrogate -- is escaped rather than failing the call."""
    walk = _Walk()
    parts: list[tuple[tuple[str, ...], Any]] = [(("notice",), envelope.notice)]
    if envelope.data is not None:
        parts.append((("data",), envelope.data))
    if envelope.error is not None:
        parts += [(("error", "message"), envelope.error.message), (("error", "details"), envelope.error.details)]
    if walk.is_clean(parts):
        return envelope
    fields: dict[str, Any] = {"ok": envelope.ok, "live_api_contacted": envelope.live_api_contacted,
                              "notice": walk.value(envelope.notice, ("notice",))}
    if envelope.data is not None:
        fields["data"] = walk.value(envelope.data, ("data",))
    if envelope.error is not None:
        error = envelope.error
        fields["error"] = {"code": error.code, "retryable": error.retryable, "gate": error.gate,
                           "message": walk.value(error.message, ("error", "message")),
                           "details": walk.value(error.details, ("error", "details"))}
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
