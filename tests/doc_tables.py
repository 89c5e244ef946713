"""Tables in the docs that are generated from the code, so they cannot drift from it.

`python -m tests.doc_tables` rewrites them in place; `tests/test_docs.py` fails when a file differs
from what this module renders. A generated table sits between two HTML comments:

    <!-- BEGIN GENERATED: <name> (python -m tests.doc_tables) -->
    ...
    <!-- END GENERATED: <name> -->
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from ito_training_mcp.envelope import CODES

REPO = Path(__file__).resolve().parent.parent


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def error_codes() -> str:
    """The code registry, in its declared order: code, group, retryable, the notice's next step."""
    rows = ["| code | group | retryable | next step the notice names |", "|---|---|---|---|"]
    for code, info in CODES.items():
        rows.append(f"| `{code.value}` | {info.group} | {'yes' if info.retryable else 'no'} | {_cell(info.next_step)} |")
    return "\n".join(rows)


# (file, block name) -> renderer
TABLES: dict[tuple[str, str], Callable[[], str]] = {
    ("docs/contract.md", "error codes"): error_codes,
}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- BEGIN GENERATED: {re.escape(name)} \(python -m tests\.doc_tables\) -->\n)(.*?)"
        rf"(<!-- END GENERATED: {re.escape(name)} -->)",
        re.DOTALL,
    )


def render(text: str, name: str, body: str) -> str:
    """`text` with the named block's content replaced by `body`; KeyError when the markers are missing."""
    pattern = _block(name)
    if len(pattern.findall(text)) != 1:
        raise KeyError(f"exactly one generated block {name!r} expected")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(3), text)


def expected(relative: str) -> str:
    text = (REPO / relative).read_text()
    for (file, name), renderer in TABLES.items():
        if file == relative:
            text = render(text, name, renderer())
    return text


def main() -> int:
    changed = []
    for relative in sorted({file for file, _ in TABLES}):
        path = REPO / relative
        new = expected(relative)
        if new != path.read_text():
            path.write_text(new)
            changed.append(relative)
    print("rewrote: " + ", ".join(changed) if changed else "generated tables are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
