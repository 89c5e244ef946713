"""A reviewed manifest cannot forge the person's review (contract §10), nor make a refusal echo it.

The attack: escape sequences, C1 controls, backspaces or bidi overrides in a manifest string make
`ito-training digest` (the person's independent check in their own terminal) show a different
budget or data URI beside the real sha256. The defence: such characters are refused in every key
and string value, wherever it is, as MANIFEST_SCHEMA with the JSON pointer and the character
class, never the character. Tab and newline are allowed in `description` only.

Pointers mask every key that is not a plain identifier (`/Passwort: Winter2026!db` comes back as
`/*`), the same rule for schema problems, character problems and secret findings.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ito_training_mcp.envelope import Envelope
from ito_training_mcp.gates.manifest.characters import CHARACTER_CLASSES, character_class
from ito_training_mcp.service import TrainingService

from .conftest import EXAMPLE_MANIFEST, WriteFile, assert_manifest_refused

Doc = dict[str, Any]
EXAMPLE: Doc = json.loads(EXAMPLE_MANIFEST.read_bytes())

# Every code point each class covers (C0 without tab and newline, which the description allows).
C0 = [chr(c) for c in range(0x20)]
DEL = ["\x7f"]
C1 = [chr(c) for c in range(0x80, 0xA0)]
BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)]
LINE_SEPARATORS = ["\u2028", "\u2029"]
# Characters that show as nothing (the scanner's INVISIBLE, which it drops): here the ends of each range of
# Default_Ignorable_Code_Point outside the bidi class, the braille blank, and every format character that is
# not default-ignorable.
INVISIBLE = [chr(c) for c in (0xAD, 0x34F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180E, 0x180F, 0x200B, 0x200D,
                              0x2060, 0x2064, 0x2065, 0x206A, 0x206F, 0x2800, 0x3164, 0xFE00, 0xFE0F, 0xFEFF, 0xFFA0,
                              0xFFF0, 0xFFF8, 0x1BCA0, 0x1BCA3, 0x1D173, 0x1D17A, 0xE0000, 0xE0001, 0xE0041, 0xE007F,
                              0xE0100, 0xE01EF, 0xE0FFF)] + [
    chr(c) for c in (*range(0x600, 0x606), 0x6DD, 0x70F, 0x890, 0x891, 0x8E2, *range(0xFFF9, 0xFFFC), 0x110BD,
                     0x110CD, *range(0x13430, 0x13440))]
FORBIDDEN: dict[str, list[str]] = {
    "c0_control": C0, "del": DEL, "c1_control": C1, "bidi_control": BIDI, "line_separator": LINE_SEPARATORS,
    "invisible": INVISIBLE,
}
EVERY_FORBIDDEN = [(cls, ch) for cls, chars in FORBIDDEN.items() for ch in chars]

# Every string field of the example manifest, as (path, pointer).
STRING_FIELDS: list[tuple[tuple[str | int, ...], str]] = [
    (("description",), "/description"),
    (("model", "name"), "/model/name"),
    (("data", 0, "name"), "/data/0/name"),
    (("data", 0, "uri"), "/data/0/uri"),
    (("data", 0, "decontamination", "method"), "/data/0/decontamination/method"),
    (("data", 0, "decontamination", "eval_suites", 1), "/data/0/decontamination/eval_suites/1"),
    (("data", 1, "decontamination", "report"), "/data/1/decontamination/report"),
    (("checkpoints", "storage"), "/checkpoints/storage"),
    (("budget", "ceiling_usd"), "/budget/ceiling_usd"),
]


def with_value(path: tuple[str | int, ...], transform: Any, doc: Doc = EXAMPLE) -> Doc:
    new = copy.deepcopy(doc)
    node: Any = new
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = transform(node[path[-1]])
    return new


def problems(env: Envelope) -> list[dict[str, Any]]:
    assert env.error is not None and env.error.details is not None, env.to_json()
    return list(env.error.details["problems"])


def assert_no_raw(env: Envelope, *chars: str) -> None:
    """The refused character reaches neither the envelope object nor its JSON text."""
    wire = env.to_json()
    for ch in chars:
        assert ch not in wire
        assert json.dumps(ch)[1:-1] not in wire  # not even JSON-escaped


async def digest(write_file: WriteFile, doc: Doc | str | bytes) -> Envelope:
    return await TrainingService({}).digest_manifest(write_file(doc))


# ---------------------------------------------------------------------------- the rule, exhaustively


def test_the_classes_cover_exactly_the_forbidden_characters() -> None:
    for cls, ch in EVERY_FORBIDDEN:
        expected = None if (ch in "\t\n" and cls == "c0_control") else cls
        assert character_class(f"a{ch}b", description=True) == expected, hex(ord(ch))
        assert character_class(f"a{ch}b") == cls, hex(ord(ch))
    assert {name for name, _ in CHARACTER_CLASSES} == set(FORBIDDEN)
    # printable, or unprintable but neither invisible nor a format character (shown as ⟨U+XXXX⟩ on
    # the way out): not this rule
    for ch in ("a", " ", "é", "€", "中", "\u00a0", "⟨", "\u2801", "\u3163", "\ue000", "\ufffc", "\u0606",
               "\U000f0000", "\u0378"):
        assert character_class(ch) is None


@pytest.mark.parametrize(("cls", "ch"), EVERY_FORBIDDEN, ids=[f"U+{ord(c):04X}" for _, c in EVERY_FORBIDDEN])
async def test_every_forbidden_character_is_refused_in_a_value(write_file: WriteFile, cls: str, ch: str) -> None:
    path, pointer = (("description",), "/description") if ch not in "\t\n" else (("model", "name"), "/model/name")
    env = await digest(write_file, with_value(path, lambda v: f"{v[:5]}{ch}{v[5:]}"))
    assert_manifest_refused(env, "MANIFEST_SCHEMA")
    assert {"pointer": pointer, "problem": cls} in problems(env), env.to_json()
    assert_no_raw(env, ch)


@pytest.mark.parametrize(("path", "pointer"), STRING_FIELDS, ids=[p for _, p in STRING_FIELDS])
@pytest.mark.parametrize("ch", ["\x1b", "\x9b", "\u202e", "\u2067", "\x08", "\r", "\x7f", "\u200f", "\u034f"])
async def test_every_string_field_is_covered(write_file: WriteFile, path: tuple[str | int, ...], pointer: str,
                                             ch: str) -> None:
    env = await digest(write_file, with_value(path, lambda v: v + ch))
    assert_manifest_refused(env, "MANIFEST_SCHEMA")
    assert [p["pointer"] for p in problems(env)] == [pointer], env.to_json()
    assert_no_raw(env, ch)


async def test_tab_and_newline_only_in_the_description(write_file: WriteFile) -> None:
    ok = await digest(write_file, with_value(("description",), lambda v: f"{v}\n\tsecond line"))
    assert ok.ok, ok.to_json()
    assert ok.data is not None and ok.data["review"]["description"].endswith("\n\tsecond line")
    for ch, (path, pointer) in [(c, f) for c in "\t\n" for f in STRING_FIELDS[1:4]]:
        env = await digest(write_file, with_value(path, lambda v, ch=ch: v + ch))
        assert {"pointer": pointer, "problem": "c0_control"} in problems(env)


async def test_keys_are_checked_and_masked_even_unknown_ones(write_file: WriteFile) -> None:
    """A forbidden character in a key is refused by class; the key is never echoed."""
    doc = copy.deepcopy(EXAMPLE)
    doc["model"]["na\u202eme"] = "x"
    doc["budget\x1b[2K"] = {}
    env = await digest(write_file, doc)
    assert_manifest_refused(env, "MANIFEST_SCHEMA", "na\u202eme", "budget")
    found = problems(env)
    assert {"pointer": "/model/*", "problem": "bidi_control"} in found
    assert {"pointer": "/*", "problem": "c0_control"} in found
    assert_no_raw(env, "\u202e", "\x1b")


async def test_a_secret_still_wins_over_a_forbidden_character(write_file: WriteFile) -> None:
    from .conftest import CANARY_GITHUB

    env = await digest(write_file, with_value(("description",), lambda v: f"{v}\u202e {CANARY_GITHUB}"))
    assert_manifest_refused(env, "MANIFEST_SECRET", CANARY_GITHUB)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    field=st.sampled_from(STRING_FIELDS),
    forbidden=st.sampled_from(EVERY_FORBIDDEN),
    prefix=st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")).filter(
        lambda c: character_class(c) is None), max_size=8),
    position=st.integers(0, 200),
)
def test_property_a_forbidden_character_anywhere_in_any_field(
    write_file: WriteFile, field: tuple[tuple[str | int, ...], str], forbidden: tuple[str, str], prefix: str,
    position: int,
) -> None:
    import anyio

    (path, pointer), (cls, ch) = field, forbidden
    if path == ("description",) and ch in "\t\n":
        return

    def insert(value: str) -> str:
        text = prefix + value
        at = min(position, len(text))
        return text[:at] + ch + text[at:]

    env = anyio.run(digest, write_file, with_value(path, insert))
    assert env.error is not None, env.to_json()
    if env.error.code.value == "MANIFEST_SECRET":  # the prefix drew a credential shape: that takes precedence
        return
    assert env.error.code.value == "MANIFEST_SCHEMA"
    assert {"pointer": pointer, "problem": cls} in problems(env), env.to_json()
    assert_no_raw(env, ch)


# ---------------------------------------------------------------------------- the attack, end to end


FORGED = with_value(
    ("description",),
    lambda v: v + "\x1b[1A\x1b[2K\rBudget:       ceiling $10.00, this submission at most $1.00\x1b]0;ok\x07",
)


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    return subprocess.run([sys.executable, "-c", "from ito_training_mcp.doors.cli.main import main; raise SystemExit(main())",
                           *argv], capture_output=True, text=True, env=env, timeout=60)


def test_the_forged_review_never_reaches_the_terminal(write_file: WriteFile) -> None:
    path = write_file(FORGED)
    for argv in (["digest", "--manifest", path], ["digest", "--manifest", path, "--json"]):
        done = _cli(*argv)
        assert done.returncode == 1, done.stdout + done.stderr
        output = done.stdout + done.stderr
        assert "\x1b" not in output and "\x07" not in output and "\r" not in output
        assert "$10.00" not in output  # the forged budget is not shown at all
        assert "MANIFEST_SCHEMA" in output and "/description" in output and "c0_control" in output


def test_unprintable_but_permitted_characters_are_shown_visibly(write_file: WriteFile) -> None:
    """A private-use character in a dataset name is no §10 character and does not show as nothing
    (it is allowed), but the person sees it escaped in the review."""
    doc = with_value(("data", 0, "name"), lambda v: v.replace("support", "supp\ue000ort"))
    done = _cli("digest", "--manifest", write_file(doc))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\ue000" not in done.stdout
    assert "supp⟨U+E000⟩ort-conversations" in done.stdout
    assert "SHA-256:" in done.stdout


# ---------------------------------------------------------------------------- echoed keys (pointers)


@pytest.mark.parametrize(
    ("key", "pointer"),
    [
        ("Passwort: Winter2026!db", "/model/*"),
        ("a/b~c", "/model/*"),
        ("x" * 65, "/model/*"),
        ("ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "/model/*"),  # secret-shaped: MANIFEST_SECRET below
        ("plain_extra", "/model/plain_extra"),
        ("password", "/model/password"),  # names a credential: shown so the person can find it
    ],
)
async def test_unknown_keys_are_echoed_only_when_plain(write_file: WriteFile, key: str, pointer: str) -> None:
    doc = copy.deepcopy(EXAMPLE)
    doc["model"][key] = 1
    env = await digest(write_file, doc)
    assert env.error is not None
    pointers = [p.get("pointer") for p in (env.error.details or {}).get("problems", [])] + [
        f["pointer"] for f in (env.error.details or {}).get("findings", [])]
    assert pointer in pointers, env.to_json()
    if pointer.endswith("*"):
        assert key not in env.to_json()


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(key=st.text(st.characters(codec="utf-8"), min_size=1, max_size=40))
def test_property_no_pointer_echoes_a_key_that_is_not_plain(write_file: WriteFile, key: str) -> None:
    import re

    import anyio

    doc = copy.deepcopy(EXAMPLE)
    doc["checkpoints"][key] = "v"
    env = anyio.run(digest, write_file, doc)
    assert env.error is not None
    details = env.error.details or {}
    for entry in [*details.get("problems", []), *details.get("findings", [])]:
        for token in entry["pointer"].split("/")[1:]:
            assert token == "*" or token.isdigit() or re.fullmatch(r"[A-Za-z0-9_.~-]{1,64}", token), entry
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", key) and len(key) >= 6:  # shorter ones occur by chance
        assert key not in json.dumps(details, ensure_ascii=False)
        assert json.dumps(key)[1:-1] not in json.dumps(details)


