"""What a backend response must look like on the wire before a single body byte is read.

The client asks for `Accept-Encoding: identity` and accepts nothing else: a compressed body can
decode to a thousand times its size (more when codings are stacked, `gzip, gzip`), so no cap on
the wire could bound it, and a cap on decoded bytes is reached only after the memory is spent.
Framing must be unambiguous (never both `Transfer-Encoding` and `Content-Length`), and a declared
length must be a plain count within the cap. Header values are compared as raw bytes: a
non-ASCII look-alike of `identity` is not `identity`.

Every problem is reported as fixed text; header values are never echoed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ASCII_COUNT = re.compile(r"[0-9]{1,15}")  # str.isdigit() also accepts '²' and other digits int() refuses
_OWS = b" \t"

TOO_LARGE = "The backend's response is larger than the size cap."


def _values(raw: Iterable[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    return [value for key, value in raw if key.lower() == name]


def head_problem(status: int, raw: Iterable[tuple[bytes, bytes]], cap: int) -> str | None:
    """Why this status line and these headers are not acceptable, or None when they are."""
    raw = tuple(raw)
    if not 200 <= status <= 599:
        return "The backend answered with a status this client does not accept."
    encodings = _values(raw, b"content-encoding")
    if encodings and (len(encodings) > 1 or encodings[0].strip(_OWS).lower() != b"identity"):
        return ("The backend's response is content-encoded (for example compressed); this client asks for and "
                "accepts only the identity encoding, so the body was not read.")
    transfer = _values(raw, b"transfer-encoding")
    lengths = _values(raw, b"content-length")
    if transfer and (len(transfer) > 1 or transfer[0].strip(_OWS).lower() != b"chunked" or lengths):
        return "The backend's response is framed ambiguously (Transfer-Encoding), so the body was not read."
    if lengths:
        text = lengths[0].strip(_OWS).decode("latin-1")
        if len(lengths) > 1 or not ASCII_COUNT.fullmatch(text):
            return "The backend's response has an invalid Content-Length."
        if int(text) > cap:
            return TOO_LARGE
    return None
