"""Last line of defence: scrub known secret values and token shapes from every log record.

The code never logs a secret on purpose; this filter makes an accident harmless. Resolved
credentials register their value here; provider token shapes are masked too.
"""

from __future__ import annotations

import logging
import re
import threading

_lock = threading.Lock()
_secrets: set[str] = set()
_SHAPES = re.compile(
    r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|(?:gh[pousr]_|github_pat_|hf_|xox[abposr]-|sk-|sk_live_|sk_test_|rk_live_)[A-Za-z0-9_-]{10,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
)
MASK = "<redacted>"


def register_secret(value: str) -> None:
    if len(value) >= 8:
        with _lock:
            _secrets.add(value)


def redact(text: str) -> str:
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    return _SHAPES.sub(MASK, text)


class RedactingFilter(logging.Filter):
    """Render the record, redact it, and freeze the result so no argument is formatted later."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info:
            # Tracebacks can carry local values in some formatters; keep only the exception type.
            exc_type = record.exc_info[0]
            message = f"{message} [{exc_type.__name__ if exc_type else 'exception'}]"
            record.exc_info = None
            record.exc_text = None
        record.msg = redact(message)
        record.args = None
        return True
