"""The review as plain text for people and terminals, laid out so that no value can forge a line.

The layout is a column of labels and a column of values. A label starts every line that starts a
field, at column 0; a data reference's line starts with `  - `. Every value is wrapped at a fixed
width with a hanging indent: its continuation lines start at `VALUE_COLUMN`, past every label. So on
a terminal at least as wide as the layout, no line wraps again, and a value's text can never begin
at column 0 or in the label column: padding a model name with spaces (labels cannot hold runs of
spaces anyway, class `whitespace`) or with wide characters cannot make the terminal start a row that
looks like `Budget:` above the real one.

Widths are counted conservatively: an ASCII character is one column, any other character two (no
character a terminal prints is wider), so a non-ASCII value wraps early rather than late. Values are
shown in their egress form first (`egress.escape`: an unprintable or invisible character becomes
`⟨U+XXXX⟩`), and it is that form that is measured and wrapped.

`review_text` is the layout at `REVIEW_WIDTH` columns; `review_lines(review, sha256, width)` lays
the same review out for any terminal width (at least `MIN_WIDTH`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from .egress import escape

REVIEW_WIDTH = 79  # the SHA-256 line (label column + 64 hex digits) fits exactly
VALUE_COLUMN = 15  # len("Post-training: ")
MIN_WIDTH = VALUE_COLUMN + 24
INDENT = " " * VALUE_COLUMN
ITEM = "  - "
LABELS = ("Model:", "Target:", "Post-training:", "Budget:", "Checkpoints:", "Data:", "SHA-256:")


@functools.lru_cache(maxsize=16)
def _chunker(limit: int) -> re.Pattern[str]:
    """At most `limit` characters ending before a space (which is dropped) or at the end; else exactly
    `limit` characters. Each character is looked at a bounded number of times: linear."""
    return re.compile(f"([^\\n]{{1,{limit}}})(?: |\\Z)|([^\\n]{{{limit}}})")


def wrap(text: str, columns: int) -> list[str]:
    """`text` in chunks of at most `columns` terminal columns, broken at a space where there is one."""
    limit = columns if text.isascii() else max(1, columns // 2)
    if len(text) <= limit:
        return [text]
    return [soft or hard for soft, hard in _chunker(limit).findall(text)] or [""]


def review_fields(review: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) for every line the layout starts; the label `ITEM` marks a data reference."""
    model, budget, checkpoints = review["model"], review["budget"], review["checkpoints"]
    fields = [
        ("Model:", f"{model['name']} ({model['size']} parameters) @ {model['revision']}"),
        ("Target:", f"{review['target']}"),
        ("Post-training:", " -> ".join(review["post_training"]) or "none"),
        ("Budget:", f"ceiling ${budget['ceiling_usd']}, this submission at most ${budget['max_incremental_cost_usd']}"),
        ("Checkpoints:", f"every {checkpoints['interval_steps']} steps, keep {checkpoints['retain_last']}, "
                         f"to {checkpoints['storage']}"),
        ("Data:", ""),
    ]
    for ref in review["data"]:
        d = ref["decontamination"]
        fields.append((ITEM, "".join((ref["name"], ": ", ref["uri"], " (decontaminated by ", d["method"], " against ",
                                      ", ".join(d["eval_suites"]), " on ", d["checked_at"], "; report ", d["report"],
                                      ")"))))
    return fields


def review_lines(review: dict[str, Any], sha256: str, width: int = REVIEW_WIDTH) -> list[str]:
    """The review laid out at most `width` columns wide (`MIN_WIDTH` at least): every line starts with
    a label (padded to `VALUE_COLUMN`), with `ITEM`, or with `VALUE_COLUMN` spaces."""
    columns = max(width, MIN_WIDTH) - VALUE_COLUMN
    lines: list[str] = []
    for label, value in [*review_fields(review), ("SHA-256:", sha256)]:
        chunks = wrap(escape(value), columns)
        head = label if label == ITEM else label.ljust(VALUE_COLUMN)
        lines.append(head + chunks[0] if chunks[0] else head.rstrip(" "))
        lines.extend(INDENT + chunk for chunk in chunks[1:])
    return lines


def review_text(review: dict[str, Any], sha256: str) -> str:
    """The review as text, `REVIEW_WIDTH` columns wide."""
    return "\n".join(review_lines(review, sha256))


def review_strings(review: dict[str, Any]) -> str:
    """Every string value of the review but the description and the data revisions, unbroken (the laid
    out text may break one across lines), newline-separated."""
    model, budget = review["model"], review["budget"]
    parts = [model["name"], model["size"], model["revision"], review["target"], *review["post_training"],
             budget["ceiling_usd"], budget["max_incremental_cost_usd"], review["checkpoints"]["storage"]]
    for ref in review["data"]:
        d = ref["decontamination"]
        parts += (ref["name"], ref["uri"], d["method"], *d["eval_suites"], d["report"], d["checked_at"])
    return "\n".join(parts)
