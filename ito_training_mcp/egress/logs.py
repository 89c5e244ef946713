"""Logging for both doors: always to stderr (on stdio, stdout belongs to the protocol), always
through the egress (redacted, one line, no raw control or bidi character)."""

from __future__ import annotations

import logging
import os
import sys

from ito_training_mcp.egress.clean import clean_line

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class EgressFilter(logging.Filter):
    """Render the record, pass it through the egress, and freeze the result so no argument is
    formatted later. Tracebacks are cut down to the exception type: some formatters show local
    values, and an exception message may carry data."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed format string must not silence the record, nor leak its args
            message = f"{record.msg!s} [unformattable arguments]"
        if record.exc_info:
            exc_type = record.exc_info[0]
            message = f"{message} [{exc_type.__name__ if exc_type else 'exception'}]"
            record.exc_info = None
            record.exc_text = None
        record.stack_info = None
        record.msg = clean_line(message)
        record.args = None
        return True


def configure(level: str | None = None) -> None:
    """Install one stderr handler on the root logger before the SDK's own basicConfig runs."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(EgressFilter())
    root.addHandler(handler)
    chosen = (level or os.environ.get("ITO_TRAINING_LOG_LEVEL") or "WARNING").upper()
    root.setLevel(chosen if chosen in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "WARNING")
