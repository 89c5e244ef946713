"""What gate 2 can learn from a manifest's bytes before they are parsed.

The service reads a manifest in a worker thread. Once the read's checks have passed, the worker
hands the bytes to the caller's thread, which parses them (the parse holds the GIL), and meanwhile
takes the looks that need no parse: the character rule's look at the bytes, and the secret
scanner's first search of them (for ASCII bytes, for its anchors; for bytes that may be in neither
normal form, for the places where a string's NFKC could hold one). Those searches (RE2's, Hyperscan's) let go of the
GIL, so the two threads work at once; the checks take the look once the JSON is parsed
(`manifest.parse_checked`).
"""

from __future__ import annotations

from typing import NamedTuple

from . import secret_scan
from .manifest_characters import BytesLook, look_at_bytes


class LookAhead(NamedTuple):
    """What gate 2 learns from a manifest's bytes alone (`look_ahead`)."""

    content: bytes  # the very bytes looked at (the checks use the look only for this object)
    look: BytesLook  # the character rule's look at them
    ascii_anchor: int | None  # for ASCII bytes, `secret_scan.first_ascii_anchor`; None otherwise
    any_form_place: int | None  # for bytes that may be in neither form, `secret_scan.first_any_form_place`


def look_ahead(content: bytes) -> LookAhead | None:
    """The looks at `content` that need no parse. None for bytes that hold a backslash: the character
    rule looks at those knowing the text's length, and the scanner does not look at them whole."""
    if b"\\" in content:
        return None
    look = look_at_bytes(content)
    facts = look.facts  # taken for text that is not ASCII
    maybe_neither = facts is not None and facts.nfkc_unsure and facts.nfkd_unsure
    return LookAhead(content, look, secret_scan.first_ascii_anchor(content),
                     secret_scan.first_any_form_place(content) if maybe_neither else None)
