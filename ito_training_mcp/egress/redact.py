"""Known secret values and token shapes, and how to mask them.

Every credential this process resolves registers its value here (`credentials.Credential`);
provider token shapes are masked too. `egress.py` applies this to every string that leaves the
server; nothing else should call it directly.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable

_lock = threading.Lock()
_secrets: set[str] = set()

# Provider token shapes, in two spellings that find the same texts (a test compares them): RE2's,
# linear in the text whatever the input, decides whether a text holds a shape at all; Python's, also
# linear by construction (below), masks them. (RE2 finds one match cheaply, but its Python wrapper
# costs microseconds per match, while `re.sub` replaces in C.) A backend's mebibyte of "eyJeyJ..." is
# one pass, not one pass per "eyJ". Every run is unbounded: a token is masked whole, however long.
#
# RE2: `\s` is spelt out as Python's Unicode whitespace (RE2's `\s` is ASCII only), so that
# "Bearer<NBSP>token" is a bearer token to both.
_SPACE = r"[\t-\r\x{1c}-\x{20}\x{85}\p{Z}]"
SHAPES_RE2 = (
    r"(?i:bearer)" + _SPACE + r"{1,8}[A-Za-z0-9._~+/=-]{8,}"
    r"|(?:gh[pousr]_|github_pat_|hf_|xox[abposr]-|sk-|sk_live_|sk_test_|rk_live_)[A-Za-z0-9_-]{10,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
)
# Python's backtracking `re`, written to stay linear: every run is possessive (it never gives back a
# character), and a JWT is looked for only from the start of a run of token characters (the lookbehind),
# where one lookahead finds its "eyJ" in that run. A run of "eyJeyJ..." is thus scanned once, not once
# per "eyJ". The token characters glued before a JWT are masked with it.
SHAPES_PYTHON = (
    r"(?i:bearer)\s{1,8}+[A-Za-z0-9._~+/=-]{8,}+"
    r"|(?:gh[pousr]_|github_pat_|hf_|xox[abposr]-|sk-|sk_live_|sk_test_|rk_live_)[A-Za-z0-9_-]{10,}+"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|(?<![A-Za-z0-9_-])(?=[A-Za-z0-9_-]*?eyJ[A-Za-z0-9_-]{8})[A-Za-z0-9_-]++\.eyJ[A-Za-z0-9_-]{8,}+"
    r"\.[A-Za-z0-9_-]{8,}+"
)
_MASKING = re.compile(SHAPES_PYTHON)


@functools.cache
def _finder() -> Callable[[str], bool]:
    """Does a text hold a token shape? RE2 (a dependency) over its UTF-8 bytes (a lone surrogate
    passes through as bytes no shape contains); Python's spelling where RE2 cannot be imported."""
    try:
        import re2  # type: ignore[import-untyped]  # no type information shipped
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        return lambda text: _MASKING.search(text) is not None
    options = re2.Options()
    options.never_capture = True
    compiled = re2.compile(SHAPES_RE2, options)
    return lambda text: compiled.search(text.encode("utf-8", "surrogatepass")) is not None


def holds_shape(text: str) -> bool:
    """Does `text` hold a provider token shape?"""
    return _triggered(text) and _finder()(text)


# Literal triggers of the shapes, plus a case-folded test for "bearer": text holding none of them, and no
# registered secret, needs no work. Short texts are tested with one alternation of literals; long ones
# with substring searches, which scan a mebibyte several times faster than the alternation does.
_TRIGGER_LITERALS = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_", "xox", "sk-", "sk_", "rk_live_",
                     "AKIA", "ASIA", "eyJ")
_TRIGGERS = re.compile("|".join(re.escape(t) for t in _TRIGGER_LITERALS))
_LONG_TEXT = 4096


def _triggered(text: str) -> bool:
    if len(text) < _LONG_TEXT:
        found = _TRIGGERS.search(text) is not None
    else:
        found = any(trigger in text for trigger in _TRIGGER_LITERALS)
    return found or "bearer" in text.lower()


MASK = "<redacted>"


def register_secret(value: str) -> None:
    if len(value) >= 8:
        with _lock:
            _secrets.add(value)


def known_secrets() -> tuple[str, ...]:
    """Every credential value this process has resolved so far (for comparisons, never for output)."""
    with _lock:
        return tuple(_secrets)


class Redactor:
    """A snapshot of the known secrets, to redact many strings with one lock acquisition."""

    def __init__(self) -> None:
        self._secrets = sorted(known_secrets(), key=len, reverse=True)

    @property
    def knows_any(self) -> bool:
        """Is any secret registered (else `holds_known` is False for every text)?"""
        return bool(self._secrets)

    def holds_known(self, text: str) -> bool:
        """Does this text contain a registered secret?"""
        return any(secret in text for secret in self._secrets)

    def holds_secret(self, text: str) -> bool:
        """Does this text contain a registered secret or a provider token shape?"""
        if self.holds_known(text):
            return True
        return holds_shape(text)

    def redact(self, text: str, *, shapes: bool = True) -> str:
        """Registered secrets, and (unless `shapes` is false) token shapes, become `<redacted>`."""
        if not (self.holds_secret(text) if shapes else self.holds_known(text)):  # the common case
            return text
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return _MASKING.sub(MASK, text) if shapes else text
