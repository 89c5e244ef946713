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

from ito_training_mcp.egress.clean import escape

REVIEW_WIDTH = 79  # the SHA-256 line (label column + 64 hex digits) fits exactly
VALUE_COLUMN = 15  # len("Post-training: ")
MIN_WIDTH = VALUE_COLUMN + 24
INDENT = " " * VALUE_COLUMN
ITEM = "  - "
LABELS = ("Model:", "Target:", "Post-training:", "Budget:", "Checkpoints:", "Data:", "SHA-256:")
NOT_SHOWN = "Not shown:"  # review_text's row counting the data references it leaves out
TEXT_MAX_LINES = 400  # review_text's length: what a person can read in a conversation
_CLOSING_LINES = 3  # room kept for the `Not shown:` row (two lines at most) and the SHA-256 row


@functools.lru_cache(maxsize=16)
def _chunker(limit: int) -> re.Pattern[str]:
    """The layout's usual wrap: the longest chunk of at most `limit` characters that ends before a
    space (dropped) or at the end of the text; else exactly `limit` characters. Each chunk backtracks
    at most `limit` characters, so a text costs at most `limit` steps per character: used for values
    of up to `FAST_FROM` characters."""
    return re.compile(f"(.{{1,{limit}}})(?: |\\Z)|(.{{{limit}}})")


@functools.lru_cache(maxsize=16)
def _fast_chunker(limit: int) -> re.Pattern[str]:
    """The wrap of a long value: one chunk, after at most one space (a break, dropped): the next
    `limit` characters when none of them is a space; else, when a space follows within the window's
    last quarter, the text up to the first such space; else up to `limit` characters (the rest, or a
    hard break). Nothing backtracks (the quarter is scanned possessively): linear, with all the work
    in C (~3-6 ms for a mebibyte, against ~10-20 ms for `_chunker`). Lines are a little more ragged
    and a last short line may end before a space where the rest would have fitted."""
    keep = limit - limit // 4
    return re.compile(f" ?([^ ]{{{limit}}}|.{{{keep}}}[^ ]{{0,{limit - keep}}}+(?= )|.{{1,{limit}}})")


FAST_FROM = 1024  # characters of a value from which the linear wrap is used


def wrap(text: str, columns: int, *, fast: bool | None = None) -> list[str]:
    """`text` in chunks of at most `columns` terminal columns, broken at a space where there is one
    (with `fast`, only where one lies in a chunk's last quarter; by default, for a text longer than
    `FAST_FROM` characters)."""
    limit = columns if text.isascii() else max(1, columns // 2)
    if len(text) <= limit:
        return [text]
    if len(text) > FAST_FROM if fast is None else fast:
        return _fast_chunker(limit).findall(text) or [""]
    return [soft or hard for soft, hard in _chunker(limit).findall(text)] or [""]


def review_fields(review: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) for every line the layout starts before the data references (`Data:` last)."""
    model, budget, checkpoints = review["model"], review["budget"], review["checkpoints"]
    return [
        ("Model:", f"{model['name']} ({model['size']} parameters) @ {model['revision']}"),
        ("Target:", f"{review['target']}"),
        ("Post-training:", " -> ".join(review["post_training"]) or "none"),
        ("Budget:", f"ceiling ${budget['ceiling_usd']}, this submission at most ${budget['max_incremental_cost_usd']}"),
        ("Checkpoints:", f"every {checkpoints['interval_steps']} steps, keep {checkpoints['retain_last']}, "
                         f"to {checkpoints['storage']}"),
        ("Data:", ""),
    ]


def data_value(ref: dict[str, Any]) -> str:
    """What the layout shows of one data reference, after `ITEM`."""
    d = ref["decontamination"]
    return "".join((ref["name"], ": ", ref["uri"], " (decontaminated by ", d["method"], " against ",
                    ", ".join(d["eval_suites"]), " on ", d["checked_at"], "; report ", d["report"], ")"))


def review_lines(review: dict[str, Any], sha256: str, width: int = REVIEW_WIDTH) -> list[str]:
    """The whole review laid out at most `width` columns wide (`MIN_WIDTH` at least): every line
    starts with a label (padded to `VALUE_COLUMN`), with `ITEM`, or with `VALUE_COLUMN` spaces."""
    return _laid_out(review, sha256, width, shown_as_is=False, max_lines=None).split("\n")


def review_text(review: dict[str, Any], sha256: str, *, shown_as_is: bool = False) -> str:
    """The review as text, `REVIEW_WIDTH` columns wide and at most `TEXT_MAX_LINES` lines: the first
    lines of `review_lines` at that width, with the data references that fit (the first always),
    then a `Not shown:` row that counts the others, then the SHA-256 row. `shown_as_is`: the caller
    knows every string of the review shows as itself (gate 2's verdict on the bytes), so none needs
    escaping."""
    return _laid_out(review, sha256, REVIEW_WIDTH, shown_as_is=shown_as_is, max_lines=TEXT_MAX_LINES)


_BREAK = "\n" + INDENT


def _laid_out(review: dict[str, Any], sha256: str, width: int, *, shown_as_is: bool, max_lines: int | None) -> str:
    columns = max(width, MIN_WIDTH) - VALUE_COLUMN

    def block(label: str, value: str) -> str:
        chunks = wrap(value if shown_as_is else escape(value), columns)
        head = label if label == ITEM else label.ljust(VALUE_COLUMN)
        return head + _BREAK.join(chunks) if value else head.rstrip(" ")

    blocks = [block(label, value) for label, value in review_fields(review)]
    room = None if max_lines is None else max_lines - sum(b.count("\n") + 1 for b in blocks) - _CLOSING_LINES
    data = review["data"]
    shown = 0
    for ref in data:
        laid = block(ITEM, data_value(ref))
        if room is not None:
            room -= laid.count("\n") + 1
            if room < 0 and shown:
                break
        blocks.append(laid)
        shown += 1
    if shown < len(data):
        blocks.append(block(NOT_SHOWN, f"{len(data) - shown} of {len(data)} data references: every one is in "
                                       "data.review.data, and the desk's review page shows them all"))
    blocks.append(block("SHA-256:", sha256))
    return "\n".join(blocks)


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
