"""The secret scanner: credentials in a parsed JSON document, in one string, and where they stand in text.

`scan_document` reports where (a JSON pointer) and what kind, never the value; `text_kinds` the kinds in
one string; `spans` the character ranges to mask in text as written; `pointer` the masking rule for
keys every manifest refusal shares; `INVISIBLE` the characters the scanner drops. scan.py holds the
pipeline, rules.py and providers.py the rules, docs/scanner.md the overview.
"""

from __future__ import annotations

from .chars import INVISIBLE_RANGES
from .names import is_credential_key_name as _is_credential_key_name
from .scan import LIMIT, Finding, pointer, scan_document, spans, text_kinds

INVISIBLE: frozenset[int] = frozenset(code for low, high in INVISIBLE_RANGES for code in range(low, high + 1))


def is_credential_key_name(name: str) -> bool:
    """Does this object key name a credential by itself ("password", "apiKey", "HF_TOKEN", "密码")?"""
    return _is_credential_key_name(name)


__all__ = ["INVISIBLE", "INVISIBLE_RANGES", "LIMIT", "Finding", "is_credential_key_name", "pointer",
           "scan_document", "spans", "text_kinds"]
