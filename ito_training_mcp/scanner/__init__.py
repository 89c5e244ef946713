"""The secret scanner: credentials in a parsed JSON document, in one string, and where they stand in text.

`scan_document` reports where (a JSON pointer) and what kind, never the value; `text_kinds` the kinds in
one string; `spans` the character ranges to mask in text as written; `pointer` the masking rule for
keys every manifest refusal shares; `is_credential_key_name` whether a key names a credential;
`INVISIBLE` the characters the scanner drops. scan.py holds the pipeline, rules.py and providers.py the
rules; docs/scanner.md gives the overview.
"""

from __future__ import annotations

from .chars import INVISIBLE_RANGES
from .scan import LIMIT, Finding, is_credential_key_name, pointer, scan_document, spans, text_kinds

INVISIBLE: frozenset[int] = frozenset(code for low, high in INVISIBLE_RANGES for code in range(low, high + 1))

__all__ = ["INVISIBLE", "INVISIBLE_RANGES", "LIMIT", "Finding", "is_credential_key_name", "pointer",
           "scan_document", "spans", "text_kinds"]
