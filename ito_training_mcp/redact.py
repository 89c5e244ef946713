"""Known secret values and token shapes, and how to mask them.

Every credential this process resolves registers its value here (`credentials.Credential`);
provider token shapes are masked too. `egress.py` applies this to every string that leaves the
server; nothing else should call it directly.
"""

from __future__ import annotations

import re
import threading

_lock = threading.Lock()
_secrets: set[str] = set()
# Bounded quantifiers only: a substitution over hostile text must stay linear.
_SHAPES = re.compile(
    r"(?i:bearer)\s{1,8}[A-Za-z0-9._~+/=-]{8,4096}"
    r"|(?:gh[pousr]_|github_pat_|hf_|xox[abposr]-|sk-|sk_live_|sk_test_|rk_live_)[A-Za-z0-9_-]{10,4096}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,4096}"
)
# Literal triggers of _SHAPES, plus a case-folded test for "bearer": text holding none of them, and no
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

    def holds_known(self, text: str) -> bool:
        """Does this text contain a registered secret?"""
        return any(secret in text for secret in self._secrets)

    def holds_secret(self, text: str) -> bool:
        """Does this text contain a registered secret or a provider token shape?"""
        if self.holds_known(text):
            return True
        return _triggered(text) and _SHAPES.search(text) is not None

    def redact(self, text: str, *, shapes: bool = True) -> str:
        """Registered secrets, and (unless `shapes` is false) token shapes, become `<redacted>`."""
        if not (self.holds_secret(text) if shapes else self.holds_known(text)):  # the common case
            return text
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return _SHAPES.sub(MASK, text) if shapes else text
