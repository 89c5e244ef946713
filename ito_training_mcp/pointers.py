"""JSON pointers that are safe to report: an object key is shown only when it is harmless.

A key is file content like any value: `{"Passwort: Winter2026!db": 1}` must not come back as the
pointer `/Passwort: Winter2026!db`. A key is shown (with `~` and `/` escaped as RFC 6901 says) only
when it is a plain identifier of at most 64 characters of `[A-Za-z0-9_.-]` and holds no credential
shape; anything else is shown as `*`. A key that merely names a credential (`password`) is shown:
that is where the person must look. Array indexes are always shown.

The same rule as the secret scanner's findings, so every pointer a manifest refusal reports --
secret findings, schema problems, forbidden characters -- masks keys the same way.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

MASK = "*"
MAX_POINTER_CHARS = 200
PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def key_token(key: str) -> str:
    """One object key as a pointer token: the escaped key when it is harmless, else `*`."""
    return _plain_key_token(key) if PLAIN_KEY.fullmatch(key) else MASK


@functools.lru_cache(maxsize=1024)  # a refusal's pointers name the schema's few keys over and over
def _plain_key_token(key: str) -> str:
    from ito_training_mcp.secret_scan import value_kinds

    return MASK if value_kinds(key) else escape_token(key)


def pointer(path: Iterable[str | int]) -> str:
    """A bounded JSON pointer for a location given as keys (str) and array indexes (int)."""
    text = "".join(f"/{part}" if isinstance(part, int) else f"/{key_token(part)}" for part in path)
    return text[:MAX_POINTER_CHARS]
