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
# Literal triggers of _SHAPES, as one alternation of literals (a C-level scan): text holding none of
# them, and no registered secret, needs no work.
_TRIGGERS = re.compile(
    "|".join(re.escape(t) for t in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_", "xox", "sk-",
                                    "sk_", "rk_live_", "AKIA", "ASIA", "eyJ"))
    + "|[Bb][Ee][Aa][Rr][Ee][Rr]"
)
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

    def holds_secret(self, text: str) -> bool:
        """Does this text contain a registered secret or a provider token shape?"""
        if any(secret in text for secret in self._secrets):
            return True
        return _TRIGGERS.search(text) is not None and _SHAPES.search(text) is not None

    def redact(self, text: str) -> str:
        if not self.holds_secret(text):  # the common case: substring tests and one literal scan
            return text
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return _SHAPES.sub(MASK, text)
