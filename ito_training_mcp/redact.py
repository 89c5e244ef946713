"""Last line of defence: scrub known secret values and token shapes from every log record.

The code never logs a secret on purpose; this filter makes an accident harmless. Resolved
credentials register their value here; provider token shapes are masked too.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any

_lock = threading.Lock()
_secrets: set[str] = set()
# Bounded quantifiers only: a substitution over hostile text must stay linear.
_SHAPES = re.compile(
    r"(?i:bearer)\s{1,8}[A-Za-z0-9._~+/=-]{8,4096}"
    r"|(?:gh[pousr]_|github_pat_|hf_|xox[abposr]-|sk-|sk_live_|sk_test_|rk_live_)[A-Za-z0-9_-]{10,4096}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,4096}"
)
# Literal triggers of _SHAPES (substring tests beat a regex alternation on long text): text holding
# none of them, and no registered secret, needs no work.
_SHAPE_TRIGGERS = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_", "xox", "sk-", "sk_", "rk_live_",
                   "AKIA", "ASIA", "eyJ")
MASK = "<redacted>"


def register_secret(value: str) -> None:
    if len(value) >= 8:
        with _lock:
            _secrets.add(value)


def needs_redaction(text: str) -> bool:
    """Cheap test: could `redact` change this text (or the strings this JSON text encodes)?"""
    with _lock:
        known = tuple(_secrets)
    if any(secret in text or json.dumps(secret)[1:-1] in text for secret in known):
        return True
    if any(trigger in text for trigger in _SHAPE_TRIGGERS) or "bearer" in text.lower():
        return _SHAPES.search(text) is not None
    return False


def has_registered_secrets() -> bool:
    with _lock:
        return bool(_secrets)


def redact(text: str) -> str:
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, MASK)
    return _SHAPES.sub(MASK, text)


def scrub(value: Any) -> Any:
    """Redact every string (and key) of a JSON-like value, and make it encodable as UTF-8.

    The egress filter for envelopes: whatever a backend echoes -- the configured token, a token
    shape in a stage name, a lone surrogate -- does not leave this process through a result.
    """
    if isinstance(value, str):
        text = redact(value)
        return text.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(text) else text
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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
