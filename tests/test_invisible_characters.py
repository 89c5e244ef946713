"""The class `invisible` (invisible.py): Unicode's Default_Ignorable_Code_Point plus U+2800.

The table is compared with the property as Unicode derives it (DerivedCoreProperties: Cf, plus
Other_Default_Ignorable_Code_Point, plus Variation_Selector, minus White_Space, the interlinear
annotation characters, the Egyptian format controls and the prepended concatenation marks), the
general categories taken from Python's own Unicode database. Every such character is refused in a
manifest and shown as `⟨U+XXXX⟩` by the egress, including those Python calls printable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ito_training_mcp.egress import clean as egress
from ito_training_mcp.egress.invisible import DEFAULT_IGNORABLE, INVISIBLE_POINTS, has_invisible, is_invisible
from ito_training_mcp.gates.manifest.characters import character_class
from ito_training_mcp.service import TrainingService

from .conftest import WriteFile

# PropList.txt (Unicode 14): the properties unicodedata does not expose.
OTHER_DEFAULT_IGNORABLE = [(0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x2065, 0x2065),
                           (0x3164, 0x3164), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0xE0000, 0xE0000),
                           (0xE0002, 0xE001F), (0xE0080, 0xE00FF), (0xE01F0, 0xE0FFF)]
VARIATION_SELECTOR = [(0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF)]
PREPENDED_CONCATENATION_MARK = [(0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891),
                                (0x08E2, 0x08E2), (0x110BD, 0x110BD), (0x110CD, 0x110CD)]
EXCLUDED = [(0xFFF9, 0xFFFB), (0x13430, 0x1343F)]


def _points(ranges: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> set[int]:
    return {c for low, high in ranges for c in range(low, high + 1)}


def test_the_table_is_default_ignorable_code_point_as_unicode_derives_it() -> None:
    assert unicodedata.unidata_version.startswith("14.")  # the PropList lines above are Unicode 14's
    cf = {c for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"}
    white_space = {c for c in range(0x110000) if chr(c).isspace() and unicodedata.category(chr(c)) != "Cc"}
    derived = ((cf | _points(OTHER_DEFAULT_IGNORABLE) | _points(VARIATION_SELECTOR)) - white_space
               - _points(EXCLUDED) - _points(PREPENDED_CONCATENATION_MARK))
    assert _points(DEFAULT_IGNORABLE) == derived
    assert INVISIBLE_POINTS == derived | {0x2800}


# The ones Python calls printable: str.isprintable alone would let them through.
PRINTABLE_INVISIBLE = sorted(c for c in INVISIBLE_POINTS if chr(c).isprintable())


def test_has_invisible_finds_each_in_latin_1_text_and_beyond() -> None:
    """Text of Latin-1 alone is settled by one search for U+00AD (the only one below U+0100)."""
    for code in sorted(INVISIBLE_POINTS):
        for text in (f"d\u00e9j\u00e0{chr(code)}", f"{chr(code)}\u00e9", f"\u4e2d{chr(code)}"):
            assert has_invisible(text), (hex(code), text)
    assert not has_invisible("d\u00e9j\u00e0 \u00ff\u00a0") and not has_invisible("\u4e2d\u00e9")


def test_some_invisible_characters_are_printable_to_python() -> None:
    assert {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x2800, 0x3164, 0xFE0F, 0xFFA0} <= set(
        PRINTABLE_INVISIBLE)


@pytest.mark.parametrize("code", PRINTABLE_INVISIBLE, ids=lambda c: f"U+{c:04X}")
def test_every_printable_invisible_character_leaves_escaped(code: int) -> None:
    ch = chr(code)
    shown = f"a⟨U+{code:04X}⟩b"
    assert egress.clean_line(f"a{ch}b") == shown
    assert egress.escape(f"a{ch}b", multiline=True) == shown
    assert egress.clean_text(f"a{ch}b\nc", multiline=True) == f"{shown}\nc"


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40))
def test_property_nothing_invisible_or_unprintable_leaves(text: str) -> None:
    out = egress.clean_line(text)
    assert out.isprintable() and not has_invisible(out)
    assert not any(is_invisible(ch) for ch in out)
    if has_invisible(text):
        assert character_class(text) is not None  # and refused in a manifest


# ---------------------------------------------------------------- homoglyphs and blanks in a manifest

FAKE_STORAGE = "s3://acme-ml-checkp\u043eints/atlas-8b-support/"  # Cyrillic small o
FAKE_DATA = "hf://datasets/acm\u0435/preference-pairs-v4"  # Cyrillic small ie


def _digest(path: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    done = subprocess.run([sys.executable, "-c", "from ito_training_mcp.doors.cli.main import main; raise SystemExit(main())",
                           "digest", "--json", "--manifest", path], capture_output=True, text=True, env=env,
                          check=False, timeout=60)
    assert "\u043e" not in done.stdout + done.stderr and "\u0435" not in done.stdout + done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_look_alike_uris_are_refused_naming_pointer_and_class(write_file: WriteFile,
                                                               example_document: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(example_document))
    doc["checkpoints"]["storage"] = FAKE_STORAGE
    doc["data"][1]["uri"] = FAKE_DATA
    env = _digest(write_file(doc))
    assert env["ok"] is False and env["error"]["code"] == "MANIFEST_SCHEMA", env
    problems = {(p["pointer"], p["problem"]) for p in env["error"]["details"]["problems"]}
    assert problems == {("/checkpoints/storage", "uri_not_ascii"), ("/data/1/uri", "uri_not_ascii")}


@pytest.mark.parametrize("blank", ["\u034f", "\u17b5", "\ufe0f", "\u3164", "\u2800", "\u115f", "\U000e0041"])
@pytest.mark.parametrize("where", [("data", 0, "uri"), ("model", "name"), ("data", 0, "name")])
async def test_a_blank_character_is_refused_anywhere(write_file: WriteFile, example_document: dict[str, Any],
                                                      blank: str, where: tuple[str | int, ...]) -> None:
    doc = json.loads(json.dumps(example_document))
    holder: Any = doc
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = holder[where[-1]][:6] + blank + holder[where[-1]][6:]
    env = egress.clean_envelope(await TrainingService({}).digest_manifest(write_file(doc))).to_dict()
    assert env["ok"] is False, env
    text = json.dumps(env, ensure_ascii=False)
    assert blank not in text
    pointer = "/" + "/".join(map(str, where))
    assert any(p.get("pointer") == pointer and "invisible" in json.dumps(p) for p in
               env["error"]["details"].get("problems", env["error"]["details"].get("findings", []))), env


def test_a_long_text_in_other_scripts_is_searched_in_utf8_with_the_same_answers() -> None:
    """Past a few kilobytes, text that is not Latin-1 is searched by RE2 in UTF-8 after a look at its
    bytes: every invisible character is found there, at either end, and none is invented (a lone
    surrogate, a character that shares a first byte with one of them)."""
    from ito_training_mcp.egress import invisible

    long_text = "Tiếng Việt đánh giá 한국어 평가 " * 300
    assert len(long_text) > invisible._LONG_TEXT and not invisible.has_invisible(long_text)
    assert invisible._utf8_search() is not None
    for code in sorted(invisible.INVISIBLE_POINTS):
        assert invisible.has_invisible(long_text + chr(code)), hex(code)
        assert invisible.has_invisible(chr(code) + long_text), hex(code)
    neighbours = [0x17B3, 0x17B6, 0x180A, 0x1810, 0x200A, 0x2070, 0x3163, 0x3165, 0xFDFF, 0xFE10, 0xE1000, 0xD800]
    for code in neighbours:
        assert not invisible.has_invisible(long_text + chr(code)), hex(code)
