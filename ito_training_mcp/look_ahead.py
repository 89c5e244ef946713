"""What gate 2 can learn from a manifest's bytes before they are parsed, taken by another thread.

The service reads a manifest in a worker thread. Once the read's checks have passed, the worker
hands the bytes to the caller's thread, which parses them (the parse holds the GIL), and meanwhile
takes the looks that need no parse (`LookAhead.take`): first the character rule's look at the bytes,
which the checks want once the JSON is parsed, then the secret scanner's first search of them (for
ASCII bytes, for its anchors; for bytes that may be in neither normal form, for the places where a
string's NFKC could hold one), which the scan wants after the schema. Those searches (RE2's,
Hyperscan's) let go of the GIL, so the two threads work at once; each answer is published as soon
as it is taken, and asked for when it is needed (`manifest.parse_checked`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from ito_training_mcp import secret_scan
from ito_training_mcp.gates.manifest.characters import BytesLook, look_at_bytes

WAIT_S = 5.0  # bounded work that cannot hang (a few searches of a mebibyte at most): milliseconds
# How long a thread holding the GIL keeps one that asks for it waiting, while a parse runs beside a
# look (`prompt_turns`); CPython's default is 5 ms, longer than the parse of a mebibyte.
TURN_S = 5e-4


class LookAhead:
    """The looks at one manifest's bytes that need no parse: taken by one thread (`take`), asked for
    by another (`look`, `first_places`), each for the very bytes object looked at. An answer that is
    not there in time, or that failed, is None: the checks then look themselves."""

    def __init__(self) -> None:
        self._content: bytes | None = None
        self._look: BytesLook | None = None
        self._places: tuple[int | None, int | None] = (None, None)
        self._looked = threading.Event()
        self._searched = threading.Event()

    def take(self, content: bytes) -> None:
        """Both looks at `content`, each published as soon as it is taken. Bytes that hold a backslash
        get neither: the character rule looks at those knowing the text's length, and the scanner
        does not look at them whole. Never raises (the checks meet a failure themselves)."""
        try:
            if b"\\" in content:
                return
            self._content = content
            self._look = look = look_at_bytes(content)
            self._looked.set()
            facts = look.facts  # taken for text that is not ASCII
            ascii_anchor = secret_scan.first_ascii_anchor(content)
            # searched in any form: text that may be in neither normal form, and text that may hold
            # invisible characters (all forbidden: a refusal, whose scan searches it so first)
            in_any_form = ascii_anchor is None and (look.forbidden_possible if facts is None else
                                                    facts.forbidden or (facts.nfkc_unsure and facts.nfkd_unsure))
            several = facts is None or facts.several
            self._places = (ascii_anchor, secret_scan.first_any_form_place(content, several) if in_any_form else None)
        except Exception:  # noqa: S110 - the checks meet the failure themselves
            pass
        finally:
            self._looked.set()
            self._searched.set()

    def look(self, content: bytes) -> BytesLook | None:
        """The character rule's look at `content`, or None."""
        return self._look if self._looked.wait(WAIT_S) and self._content is content else None

    def first_places(self, content: bytes) -> tuple[int | None, int | None]:
        """`secret_scan.first_ascii_anchor` and `secret_scan.first_any_form_place` of `content`, each
        None when not taken."""
        return self._places if self._searched.wait(WAIT_S) and self._content is content else (None, None)


_turns = threading.Lock()
_looking = 0  # parses under way beside a look (`prompt_turns`)
_interval_before: float | None = None  # the interval to restore once none is


@contextlib.contextmanager
def prompt_turns() -> Iterator[None]:
    """While a parse runs beside the worker's look and hash: the interpreter's switch interval at most
    TURN_S. For a block without a suspension point (a task abandoned inside it would keep the count).

    The looks are mostly searches that let go of the GIL, but each must take it back to hand over its
    answer and start the next, and the hash after them once more. The parse holds the GIL meanwhile,
    and CPython makes a thread that asks for it wait a switch interval (5 ms) before the holder is
    asked to let go: longer than the parse of a mebibyte, so the looks and the hash used to finish
    only once the parse waited for them, as if taken after it (0.15x-0.35x of the two shapes'
    ratios, bench/README.md). The interval is process-wide: it is lowered when the first such block
    begins (never raised: a host's shorter interval stays) and restored when the last one ends, unless
    the host set one meanwhile."""
    global _looking, _interval_before
    with _turns:
        if _looking == 0:
            current = sys.getswitchinterval()
            _interval_before = current if current > TURN_S else None
            if _interval_before is not None:
                sys.setswitchinterval(TURN_S)
        _looking += 1
    try:
        yield
    finally:
        with _turns:
            _looking -= 1
            if _looking == 0 and _interval_before is not None:
                if sys.getswitchinterval() == TURN_S:  # (a host that set its own meanwhile keeps it)
                    sys.setswitchinterval(_interval_before)
                _interval_before = None
