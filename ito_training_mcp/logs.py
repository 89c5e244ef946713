"""Logging for both doors: always to stderr (on stdio, stdout belongs to the protocol), always redacted."""

from __future__ import annotations

import logging
import os
import sys

from .redact import RedactingFilter

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str | None = None) -> None:
    """Install one stderr handler on the root logger before the SDK's own basicConfig runs."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(RedactingFilter())
    root.addHandler(handler)
    chosen = (level or os.environ.get("ITO_TRAINING_LOG_LEVEL") or "WARNING").upper()
    root.setLevel(chosen if chosen in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "WARNING")
