"""The egress redactor's token shapes stay linear in the text, whatever a backend sends.

The JWT shape used to be `eyJ[...]{8,4096}\\.eyJ...`: at every "eyJ" the run went up to 4096
characters and gave them all back when no "." followed, seconds of event-loop CPU per mebibyte of
"eyJeyJ...". Now RE2 decides whether a text holds a shape and Python's spelling (possessive runs, a
JWT looked for once per run of token characters) masks them. Tested here: both spellings find
exactly what the plain textbook pattern finds (property, on short texts where backtracking costs
nothing), and a mebibyte of each hostile kind is redacted correctly inside the suite's normal
timeout (before the fix, the first kind alone took seconds).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ito_training_mcp.egress import redact
from ito_training_mcp.egress.redact import MASK, Redactor, holds_shape

# The shapes as one would first write them: correct, and backtracking (used on short texts only).
TEXTBOOK = re.compile(
    r"(?i:bearer)\s{1,8}[A-Za-z0-9._~+/=-]{8,}"
    r"|(?:gh[pousr]_|github_pat_|hf_|xox[abposr]-|sk-|sk_live_|sk_test_|rk_live_)[A-Za-z0-9_-]{10,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
)
PIECES = ["eyJ", "a", "Z9", "aaaaaaaa", ".", " ", "\u00a0", "\t", "Bearer", "bEaReR ", "sk-", "ghp_", "hf_", "AKIA",
          "ASIA", "A" * 16, "-", "_", "/", "=", "é", "<", "xoxb-", "github_pat_", "\n"]
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)
MIB = 1 << 20


@settings(max_examples=500, deadline=None)
@given(texts)
def test_property_both_spellings_find_what_the_textbook_pattern_finds(text: str) -> None:
    expected = TEXTBOOK.search(text) is not None
    assert (redact._MASKING.search(text) is not None) == expected
    assert redact._finder()(text) == expected
    assert holds_shape(text) == expected


@settings(max_examples=300, deadline=None)
@given(texts)
def test_property_masking_leaves_no_shape_and_keeps_other_text(text: str) -> None:
    masked = Redactor().redact(text)
    assert TEXTBOOK.search(masked) is None
    if TEXTBOOK.search(text) is None:
        assert masked == text


def test_a_real_jwt_is_masked_whole() -> None:
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJlc2lnbmF0dXJl"
    assert Redactor().redact(f"token={jwt} end") == f"token={MASK} end"
    long_jwt = "eyJ" + "a" * 20_000 + ".eyJ" + "b" * 20_000 + "." + "c" * 20_000  # no length cap: masked whole
    assert Redactor().redact(long_jwt) == MASK


HOSTILE = {
    "eyJ run": "eyJ" * (MIB // 3),
    "eyJ runs between dots": ("eyJ" * 100 + ".") * (MIB // 301),
    "short first segments": "eyJaaaaaaa." * (MIB // 11),
    "eyJ after each dot": "eyJaaaaaaaa.eyJ" * (MIB // 15),
    "token characters only": "A" * MIB,
    "bearer words": "bearer " * (MIB // 7),
    "prefixes": "sk-ghp_" * (MIB // 7),
    "almost AWS": "AKIA" + "A" * 15 + " " * (MIB // 20),
}


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_mebibyte_is_redacted_in_one_pass(kind: str) -> None:
    """Before the fix, "eyJ run" alone took seconds per mebibyte; each kind is now one linear pass."""
    text = HOSTILE[kind]
    masked = Redactor().redact(text)
    assert not holds_shape(masked)
    assert (masked == text) == (TEXTBOOK.search(text[:4096]) is None and not holds_shape(text))
