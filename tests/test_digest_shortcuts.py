"""The shortcuts that make gate 2 fast give exactly the answers of the long way round.

Each shortcut is compared with what it replaces, on generated documents: pydantic on the whole
document (trimmed unknown keys), `_uri` on each URI (URIs checked together), the walk of every key
and string (the character rule's byte and joined checks), the nesting check on every document
(deferred to refusals), and the walk of the digest's review (its sources) in the egress.
No test here measures time; bench/ does (as ratios).
"""

from __future__ import annotations

import copy
import json
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from ito_training_mcp import scan_strings
from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.egress import clean as egress
from ito_training_mcp.envelope import ErrorCode, success
from ito_training_mcp.errors import ManifestRefusal
from ito_training_mcp.gates.manifest import characters as manifest_characters
from ito_training_mcp.gates.manifest import digest, strict_json
from ito_training_mcp.gates.manifest import review as review_layout
from ito_training_mcp.gates.manifest import schema as manifest
from ito_training_mcp.gates.manifest import values as manifest_values
from ito_training_mcp.gates.manifest.characters import CHARACTER_CLASSES

from .conftest import CANARY_GITHUB, CANARY_TOKEN, EXAMPLE_MANIFEST

Doc = dict[str, Any]
EXAMPLE: Doc = json.loads(EXAMPLE_MANIFEST.read_bytes())
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def full_schema_verdict(document: Any) -> Any:
    """What pydantic says about the whole, untrimmed document, as the gate reports it."""
    try:
        manifest.TrainingManifest.model_validate(document, strict=True)
    except ValidationError as exc:
        return exc.error_count(), manifest._schema_problems(exc)
    return "valid"


def fast_schema_verdict(document: Any) -> Any:
    """The gate's verdict; a count it stopped at is marked "at least"."""
    validated = manifest._validate(document)
    if isinstance(validated, manifest.TrainingManifest):
        return "valid"
    if validated.at_least:
        return "at least", validated.count, validated.problems
    return validated.count, validated.problems


def assert_same_verdict(document: Any) -> None:
    """The gate's verdict is the whole document's: valid or not, the same problems shown, and the same
    count, unless the value rules stopped counting (then a lower bound past COUNTED_MAX)."""
    fast, full = fast_schema_verdict(document), full_schema_verdict(document)
    if fast == "valid" or full == "valid" or fast[0] != "at least":
        assert fast == full
        return
    _, count, problems = fast
    assert problems == full[1]
    assert manifest.COUNTED_MAX < count <= full[0]


# ---------------------------------------------------------------------------- unknown keys trimmed

# Where unknown keys can go: the root and every object the schema reads as a model.
PLACES: list[tuple[str | int, ...]] = [(), ("model",), ("budget",), ("checkpoints",), ("data", 0),
                                        ("data", 1), ("data", 0, "decontamination"), ("data", 1, "decontamination")]


def _at(doc: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


@st.composite
def documents_with_unknown_keys(draw: st.DrawFn) -> Doc:
    doc = copy.deepcopy(EXAMPLE)
    for place in draw(st.lists(st.sampled_from(PLACES), max_size=4)):
        target = _at(doc, place)
        for i in range(draw(st.integers(0, 60))):
            target[f"extra_{draw(st.integers(0, 9))}_{i}"] = draw(st.sampled_from([1, "x", None, [1], {"a": 1}]))
    if draw(st.booleans()):  # and something else wrong, so that field errors come before the extras
        broken = draw(st.sampled_from(["model", "target", "budget", "data"]))
        doc[broken] = draw(st.sampled_from([None, "x", 7, [], {}]))
    if draw(st.integers(0, 4)) == 0:  # a data list past its limit: pydantic reports the length alone
        doc["data"] = [copy.deepcopy(doc["data"][0]) | {"extra": 1} for _ in range(257)]
    return doc


@SETTINGS
@given(documents_with_unknown_keys())
def test_trimmed_validation_reports_what_the_whole_document_would(document: Doc) -> None:
    assert_same_verdict(document)


def test_tens_of_thousands_of_unknown_keys_count_in_full_and_show_the_first_twenty() -> None:
    document = {f"tokenizer_{i:06d}": 1 for i in range(30_000)}
    count, problems = fast_schema_verdict(document)
    assert (count, problems) == full_schema_verdict(document)
    assert count == 30_007 and len(problems) == 20
    assert problems[7] == {"pointer": "/tokenizer_000000", "problem": "extra_forbidden"}


def test_many_unknown_keys_in_every_data_reference() -> None:
    document = copy.deepcopy(EXAMPLE)
    for ref in document["data"]:
        ref.update({f"k{i}": i for i in range(300)})
    assert fast_schema_verdict(document) == full_schema_verdict(document)
    assert fast_schema_verdict(document)[0] == 300 * len(document["data"])


# ---------------------------------------------------------------------------- URIs checked together

URIS = st.one_of(
    st.sampled_from(["s3://bucket/key", "gs://b/k", "https://h/p", "ito://x", "hf://org/repo", "az://c/b"]),
    st.tuples(st.sampled_from(["s3://", "gs://", "https://", "http://", "s3:/", "https", "ito", "s3://x://", ""]),
              st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(list("\t\n\x0b\x0c\r ?#@/:\x85\xa0"))),
                      max_size=12)).map("".join),
)


# Every place a rule checked with the whole manifest applies, in document order.
RULE_PLACES: list[tuple[str | int, ...]] = [
    ("data", 0, "uri"), ("data", 0, "decontamination", "eval_suites"), ("data", 0, "decontamination", "report"),
    ("data", 0, "decontamination", "checked_at"), ("data", 1, "uri"), ("data", 1, "decontamination", "eval_suites"),
    ("data", 1, "decontamination", "report"), ("data", 1, "decontamination", "checked_at"), ("checkpoints", "storage")]
RULE_VALUES = st.one_of(
    URIS, st.sampled_from(["2026-02-30", "2026-01-01", "20260101", "", " x", "x" * 2049, "s3://" + "y" * 2044]),
    st.integers(0, 3), st.none(), st.just({"k": "v"}),
    st.lists(st.sampled_from(["ok", "x y", " x", "a  b", "", "q\u00a0r", "é é", "x" * 201, "p "]), max_size=4))


def _put(document: Doc, place: tuple[str | int, ...], value: Any) -> Doc:
    document = copy.deepcopy(document)
    holder = _at(document, place[:-1])
    holder[place[-1]] = copy.deepcopy(value)
    return document


def _two_references() -> Doc:
    document = copy.deepcopy(EXAMPLE)
    document["data"] = [copy.deepcopy(document["data"][0]) for _ in range(2)]
    return document


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, len(RULE_PLACES) - 1), RULE_VALUES), max_size=4, unique_by=lambda e: e[0]),
       st.sampled_from([None, ("model", "name"), ("budget", "ceiling_usd"), ("data", 1, "name"), ("zzz",)]))
def test_values_checked_together_get_each_values_own_verdict_in_document_order(
        edits: list[tuple[int, Any]], other: tuple[str, ...] | None) -> None:
    """The URI, date and label-list rules run once for the whole manifest, yet every value gets the
    verdict it gets alone, at its own pointer, among pydantic's errors (`other`: one more elsewhere)
    in document order: a manifest with several of these wrong reports what each alone reports."""
    base = _two_references() if other is None else _put(_two_references(), other, " padded")
    alone = [] if other is None else list(fast_schema_verdict(base)[1])
    document = base
    for index, value in sorted(edits):
        document = _put(document, RULE_PLACES[index], value)
        verdict = fast_schema_verdict(_put(base, RULE_PLACES[index], value))
        alone += [] if verdict == "valid" else [p for p in verdict[1] if p not in alone]
    together = fast_schema_verdict(document)
    assert (together if together == "valid" else sorted(together[1], key=_rank)) == (
        "valid" if not alone else sorted(alone, key=_rank))
    if together != "valid":
        assert together[1] == sorted(together[1], key=_rank)  # already in document order
        assert together == full_schema_verdict(document)


# pydantic's order: a model's fields as declared, then its unknown keys; list items by index.
FIELD_ORDER: dict[str, list[str]] = {
    "": ["schema_version", "description", "model", "target", "data", "post_training", "budget", "checkpoints"],
    "model": ["name", "parameter_count", "revision"], "data": ["name", "uri", "revision", "decontamination"],
    "decontamination": ["method", "eval_suites", "report", "checked_at"],
    "budget": ["ceiling_usd", "max_incremental_cost_usd"], "checkpoints": ["interval_steps", "retain_last", "storage"]}


def _rank(problem: dict[str, str]) -> tuple[int, ...]:
    key: list[int] = []
    model: str | None = ""
    for part in problem["pointer"].split("/")[1:]:
        if part.isdigit():
            key.append(int(part))
            continue
        fields = FIELD_ORDER.get(model, []) if model is not None else []
        key.append(fields.index(part) if part in fields else len(fields))
        model = part if part in FIELD_ORDER and part in fields else None
    return tuple(key)


LABELS_TO_TRY = st.lists(st.lists(st.sampled_from(["a", "b", "x y", " ", "  ", "\n", "\t", "\u00a0", "\u2009", "\u3000",
                                                   "é", "密"]), min_size=1, max_size=5).map("".join),
                         min_size=1, max_size=6)


REFUSED_LABELS = st.sampled_from([5, "", "x" * 201, None, {"k": "v"}, True, "\ud800", "a\udfffb"])


@SETTINGS
@given(st.one_of(LABELS_TO_TRY, st.lists(st.one_of(LABELS_TO_TRY.map(lambda labels: labels[0]), REFUSED_LABELS),
                                         min_size=1, max_size=6)))
def test_a_listed_label_gets_the_label_patterns_verdict(suites: list[Any]) -> None:
    """One look at all eval suites (the pattern per label only when that look finds a space out of
    place) answers exactly as pydantic's pattern on every label: the same errors at the same places,
    also in a list that holds labels of the wrong type or length (an attacker review's find: the
    padded labels of such a list went unreported)."""
    document = _put(EXAMPLE, ("data", 0, "decontamination", "eval_suites"), suites)
    try:
        manifest.TrainingManifest.model_validate(document, strict=True)
        got: Any = "ok"
    except ValidationError as exc:
        got = [(e["loc"][4:], e["type"], e["msg"]) for e in exc.errors(include_url=False)]
    try:
        TypeAdapter(list[manifest.Label]).validate_python(suites, strict=True)
        expected: Any = "ok"
    except ValidationError as exc:
        expected = [(e["loc"], e["type"], e["msg"]) for e in exc.errors(include_url=False)]
    assert got == expected


def test_the_other_space_separators_are_the_patterns() -> None:
    """The label pattern's space separators are Unicode's (Zs), and the plain space aside, the ones
    searched for one by one."""
    import re
    import unicodedata

    spaces = {chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Zs"}
    in_pattern = re.compile(f"[{manifest_values._SPACES}]")
    assert {chr(c) for c in range(0x110000) if in_pattern.match(chr(c))} == spaces
    assert set(manifest_values._OTHER_SPACE_CHARS) == spaces - {" "}
    # A printable text holds none of them: the look that settles most texts in one pass.
    assert not any(space.isprintable() for space in manifest_values._OTHER_SPACE_CHARS)
    long_labels = "\n".join(["Tiếng Việt đánh giá", "한국어 평가", "ＧＰＴ"] * 2000)
    assert not manifest_values._holds_other_space(long_labels)
    for space in manifest_values._OTHER_SPACE_CHARS:
        assert manifest_values._holds_other_space(long_labels + space)
        assert manifest_values._holds_other_space(space + long_labels, [*long_labels.split("\n"), space])


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(st.lists(st.sampled_from(["a", "é", " ", "  ", "\n", "\u00a0", "\u2009", "\u3000", "\u200b", "\u00a0 "]),
                         max_size=5).map("".join), min_size=1, max_size=8))
def test_the_labels_that_miss_are_found_without_the_pattern(labels: list[str]) -> None:
    """`labels_pass` never passes a list that holds an empty label or a miss, and those found by three
    searches per label are exactly the empty ones and the pattern's misses, each with pydantic's
    own error (`string_too_short`, `string_pattern_mismatch`)."""
    expected = [i for i, label in enumerate(labels) if not manifest_values._LABEL_RE.fullmatch(label)]
    assert manifest_values._misses(labels) == expected
    found = list(manifest_values.label_problems(labels))
    assert [i for i, _ in found] == expected
    assert [error.type for _, error in found] == [
        "string_pattern_mismatch" if labels[i] else "string_too_short" for i in expected]
    if manifest_values.labels_pass(labels):
        assert expected == []


@SETTINGS
@given(st.lists(URIS, min_size=1, max_size=4), st.lists(st.sampled_from(["2026-01-01", "2024-02-29", "2026-02-29",
                                                                         "2026-1-01", "x"]), min_size=1, max_size=3),
       st.lists(LABELS_TO_TRY, min_size=1, max_size=3), st.booleans())
def test_the_look_at_all_values_misses_nothing(uris: list[str], dates: list[str], suites: list[list[str]],
                                               controls_possible: bool) -> None:
    """`problems_of_valid` settles a manifest on one look per rule only when every value passes on its
    own; otherwise it gives exactly each value's verdict. (Without control characters in the bytes,
    as `controls_possible=False` promises, a URI has none either.)"""
    if not controls_possible:
        uris = [u for u in uris if u.isprintable()] or ["s3://b/k"]
    uris = [u for u in uris if manifest_values.URI_MIN <= len(u) <= manifest_values.URI_MAX] or ["s3://b/k"]
    places = ([(("u", i), manifest_values.URI, u) for i, u in enumerate(uris)]
              + [(("d", i), manifest_values.DATE, d) for i, d in enumerate(dates)]
              + [(("s", i), manifest_values.SUITES, s) for i, s in enumerate(suites)])
    exact = manifest_values.problems_at(places)
    quick = manifest_values.problems_of_valid(uris, dates, suites, lambda: places, controls_possible=controls_possible)
    assert [(e["loc"], str(e["type"])) for e in quick] == [(e["loc"], str(e["type"])) for e in exact]


# ---------------------------------------------------------------------------- the character rule

FORBIDDEN_CHARS = [chr(c) for c in (0x00, 0x08, 0x09, 0x0A, 0x0D, 0x1B, 0x7F, 0x85, 0x9F, 0x200E, 0x202E, 0x2066,
                                    0x2069, 0x061C, 0x2028, 0x2029)]
HARMLESS = ["a", " ", "é", "’", "—", "\u200b", "\u200d", "密", "\U0001f600", "\\", '"', "\u2027", "\u202f"]
text_parts = st.lists(st.sampled_from(FORBIDDEN_CHARS + HARMLESS * 3), max_size=8).map("".join)
json_values = st.recursive(st.one_of(st.integers(), text_parts),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text_parts, inner, max_size=3),
                           max_leaves=12)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["description", "data", "x", "model"]) | text_parts, json_values, max_size=4),
       st.booleans())
def test_character_rule_shortcuts_find_what_the_walk_finds(document: Doc, ascii_only: bool) -> None:
    from ito_training_mcp.secret_scan import DocumentStrings

    walked = manifest_characters._walk(document)
    keys, values = DocumentStrings(document).get()
    held = manifest_characters.holds_forbidden(document, keys, values)
    assert (manifest_characters.character_problems(document) if held else []) == walked
    content = json.dumps(document, ensure_ascii=ascii_only).encode()
    if walked:  # the look at the bytes never misses a document the walk refuses
        assert manifest_characters.may_hold_forbidden(content)
    if b"\\" not in content and manifest_characters.may_hold_forbidden(content):  # and is certain without escapes
        assert walked and held


# Characters the egress does not show as themselves though gate 2 allows them (no-break and other
# spaces, private use, unassigned, a noncharacter), beside what it shows and what the rule forbids.
NOT_SHOWN_ALLOWED = ["\u00a0", "\u3000", "\u202f", "\ue000", "\U000f0000", "\u0378", "\U00050000", "\ufdd0"]
SHOWN = ["a", "é", "e\u0301", "ệ", "密", "한", "ह", "ｆ", "\U0001f600", "\U00030000", "’", "\\", '"', "\u2801"]
mixed_text = st.lists(st.sampled_from(SHOWN * 4 + NOT_SHOWN_ALLOWED + FORBIDDEN_CHARS + ["\u200b", "\u034f"]),
                      max_size=10).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.dictionaries(mixed_text, mixed_text | st.lists(mixed_text, max_size=3), max_size=4), st.booleans())
def test_the_bytes_said_shown_as_is_only_when_every_key_and_string_shows(document: Doc, ascii_only: bool) -> None:
    """gate 2's verdict for the egress (`look_at_bytes(...).shown_as_is`): never said of a document one
    of whose keys or strings holds a character the egress would escape, once the character rule passed."""
    from ito_training_mcp.egress.invisible import shows
    from ito_training_mcp.secret_scan import DocumentStrings

    content = json.dumps(document, ensure_ascii=ascii_only).encode()
    look = manifest_characters.look_at_bytes(content)
    keys, values = DocumentStrings(document).get()
    if look.shown_as_is and not manifest_characters._walk(document):
        assert all(shows(ch) or ch in "\n\t" for text in (*keys, *values) for ch in text)
    if not ascii_only and all(shows(ch) for text in (*keys, *values) for ch in text):
        # said wherever it is true of text with no escape whose bytes could begin a forbidden character
        assert look.shown_as_is or b"\\" in content or not manifest_characters._utf8_search(
            manifest_characters._C0).begun(content)


def test_the_search_for_characters_not_shown_agrees_with_the_egress_on_every_code_point() -> None:
    """Below the planes it takes whole, the class is exactly the characters the egress escapes, but
    layout; above, everything. Every forbidden character is one of them."""
    from ito_training_mcp import byte_facts
    from ito_training_mcp.egress.invisible import NOT_SHOWN_WHOLE_FROM, shows

    if byte_facts.facts(b"a") is None:
        pytest.skip("RE2 is not installed")

    def not_shown(ch: str) -> bool:
        found = byte_facts.facts(ch.encode())
        assert found is not None
        return found.not_shown

    below = [chr(c) for c in range(NOT_SHOWN_WHOLE_FROM) if not 0xD800 <= c < 0xE000]
    shown = [ch for ch in below if shows(ch)]
    assert not not_shown("".join(shown))
    assert not {chr(c) for c in manifest_characters._code_points()} & set(shown)  # so every forbidden one is in it
    for ch in below:
        if not shows(ch):
            assert not_shown(ch) == (ch not in "\t\n\r"), hex(ord(ch))
    for c in range(NOT_SHOWN_WHOLE_FROM, 0x110000, 97):
        assert not_shown(chr(c)), hex(c)
    assert not_shown("\U0010ffff")


@pytest.mark.parametrize("text", ["a", "Tiếng Việt", "e\u0301", "한국어", "\u1100\u1161", "ｐａｓｓｗｏｒｄ", "password",
                                  "xghp_x", "\u00a0", "\ue000", "पासवर्ड", "密码", "Passwort", "\u200b"])
def test_the_one_pass_answers_each_question_as_its_own_search_does(text: str) -> None:
    """byte_facts against the searches it stands for: the egress's characters, NFKC's "may compose",
    and the scanner's anchors as written."""
    from ito_training_mcp import byte_facts, decomposed_anchors
    from ito_training_mcp.egress.invisible import shows
    from ito_training_mcp.secret_engine import default_engine

    data = f'{{"k": "{text}"}}'.encode()
    found = byte_facts.facts(data)
    if found is None:
        pytest.skip("RE2 is not installed")
    assert found.not_shown == any(not shows(ch) for ch in text)
    assert found.composing == decomposed_anchors.may_compose(data)
    assert found.anchor == (default_engine().next_anchor(data, 0) >= 0)
    assert found.forbidden == any(ord(ch) in manifest_characters._forbidden_points() for ch in text)


def test_every_forbidden_character_is_seen_in_the_bytes_raw_and_escaped() -> None:
    points = manifest_characters._code_points()
    assert {chr(c) for c in points} == {ch for _, r in CHARACTER_CLASSES for ch in _expand(r)}
    for c in points:
        doc = {"description": f"a{chr(c)}b"}
        assert manifest_characters.may_hold_forbidden(json.dumps(doc).encode()), hex(c)
        if c >= 0x20:
            assert manifest_characters.may_hold_forbidden(json.dumps(doc, ensure_ascii=False).encode()), hex(c)
            # after another character that is not ASCII: the one pass, not the look at the first one
            later = json.dumps({"description": f"é{chr(c)}b"}, ensure_ascii=False).encode()
            assert manifest_characters.may_hold_forbidden(later), hex(c)
    assert not manifest_characters.may_hold_forbidden(json.dumps({"d": "a’—é密\u00a0\u2801"}, ensure_ascii=False).encode())


def _expand(ranges: str) -> set[str]:
    out: set[str] = set()
    i = 0
    while i < len(ranges):
        if i + 2 < len(ranges) and ranges[i + 1] == "-":
            out.update(chr(c) for c in range(ord(ranges[i]), ord(ranges[i + 2]) + 1))
            i += 3
        else:
            out.add(ranges[i])
            i += 1
    return out


# ---------------------------------------------------------------------------- nesting, checked on refusal


def _deep(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@pytest.mark.parametrize("leaf", [CANARY_GITHUB, "a\u202eb", 1], ids=["credential", "bidi", "plain"])
def test_too_deep_wins_over_every_later_refusal(leaf: Any) -> None:
    document = {**EXAMPLE, "notes": _deep(40, leaf)}
    with pytest.raises(ManifestRefusal) as caught:
        manifest.parse_manifest(json.dumps(document).encode())
    assert caught.value.code is ErrorCode.MANIFEST_INVALID_JSON
    assert "nesting is deeper than 32 levels" in caught.value.message


@pytest.mark.parametrize("levels", [31, 32, 33])
@pytest.mark.parametrize("ascii_only", [True, False], ids=["ascii", "non-ascii"])
def test_the_nesting_limit_is_the_same_with_and_without_the_walk_of_every_string(levels: int, ascii_only: bool) -> None:
    """The scanner's walk of a non-ASCII document counts its levels, and the nesting check uses that
    count; an ASCII one is settled without the walk, and the check walks itself."""
    leaf = "e" if ascii_only else "\u00e9"
    document = {**EXAMPLE, "data": "x", "notes": _deep(levels - 4, [leaf, 1, {"k": [2.5, None]}])}
    with pytest.raises(ManifestRefusal) as caught:
        manifest.parse_manifest(json.dumps(document, ensure_ascii=ascii_only).encode())
    assert (caught.value.code is ErrorCode.MANIFEST_INVALID_JSON) == (levels > strict_json.MAX_DEPTH)


JSON_VALUES = st.recursive(st.one_of(st.integers(), st.none(), st.booleans(), st.text(max_size=3),
                                     st.decimals(allow_nan=False, allow_infinity=False, places=1)),
                           lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=3), inner,
                                                                                        max_size=4),
                           max_leaves=40)


@SETTINGS
@given(JSON_VALUES)
def test_the_walk_of_every_string_counts_levels_and_bounds_lengths(document: Any) -> None:
    from ito_training_mcp import document_strings

    collected = document_strings.collect(document)
    depth = collected.depth
    assert not strict_json.depth_exceeds(document, depth)
    assert depth == 0 or strict_json.depth_exceeds(document, depth - 1)
    assert max(map(len, collected.values), default=0) <= document_strings.DocumentStrings(document).longest_value_bound()


def test_a_document_the_schema_accepts_is_never_too_deep() -> None:
    """Why the nesting walk may be skipped for an accepted manifest: the schema nests five levels."""
    parsed = manifest.parse_manifest(EXAMPLE_MANIFEST.read_bytes())
    assert not strict_json.depth_exceeds(json.loads(parsed.model_dump_json()), 5)


def test_depth_walk_treats_lists_of_strings_and_mixed_lists_alike() -> None:
    assert strict_json.depth_exceeds(_deep(33, "x"), 32)
    assert not strict_json.depth_exceeds(_deep(32, "x"), 32)
    assert strict_json.depth_exceeds(["a", "b", _deep(32, 1)], 32)
    assert not strict_json.depth_exceeds({"a": ["x"] * 1000, "b": {"c": "d"}}, 3)


# ---------------------------------------------------------------------------- the review's way out

review_strings = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
# A label is words separated by single spaces (class `whitespace` otherwise).
review_labels = review_strings.map(lambda s: " ".join(s.split()) or "x")


@st.composite
def manifests(draw: st.DrawFn) -> manifest.TrainingManifest:
    doc = copy.deepcopy(EXAMPLE)
    doc["description"] = draw(st.none() | review_strings)
    doc["model"]["name"] = draw(review_labels)
    for ref in doc["data"]:
        ref["name"] = draw(review_labels)
        ref["revision"] = draw(st.none() | st.just("a" * 40))
        ref["decontamination"]["method"] = draw(review_labels)
        ref["decontamination"]["eval_suites"] = draw(st.lists(review_labels, min_size=1, max_size=3))
    return manifest.TrainingManifest.model_validate(doc, strict=True)


def _keys_and_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(s for v in value.values() for s in _keys_and_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _keys_and_strings(v)]
    return []


@SETTINGS
@given(manifests())
def test_every_key_and_string_of_a_review_is_in_its_sources(parsed: manifest.TrainingManifest) -> None:
    review = parsed.review()
    sources = digest.review_sources(review, review_layout.review_strings(review))
    for text in _keys_and_strings(review):
        assert any(text in source for source in sources), text


def test_a_review_that_is_not_the_digests_is_walked_string_by_string() -> None:
    """`data.review` as a plain tree: an escape in a single-line field is escaped, even inside what a
    JSON serialisation would have turned into `\\u001b`."""
    data = {"review": {"model": {"name": "a\x1bb", "revision": "x\ny"}, "description": "p\nq"}}
    out = egress.clean_envelope(success(data, notice="n", live_api_contacted=False))
    assert out.data is not None
    assert out.data["review"] == {"model": {"name": "a⟨U+001B⟩b", "revision": "x⟨U+000A⟩y"}, "description": "p\nq"}


def _digest_data(content: bytes) -> Doc:
    parsed = manifest.parse_manifest(content)
    file = digest.FileBytes(path="/m.json", content=content, sha256="0" * 64)
    return digest.DigestedManifest(file=file, manifest=parsed).summary()


def test_the_digests_review_is_checked_through_its_sources() -> None:
    data = _digest_data(EXAMPLE_MANIFEST.read_bytes())
    assert isinstance(data["review"], egress.LocalTree) and data["review"].shown_as_is
    env = success(data, notice="n", live_api_contacted=False)
    assert egress.clean_envelope(env) is env


def test_an_unprintable_character_in_the_review_is_escaped_everywhere() -> None:
    """A private-use character passes gate 2 (it is neither a §10 character nor invisible); it leaves
    escaped, in the tree and in the laid-out text."""
    document = copy.deepcopy(EXAMPLE)
    document["data"][0]["name"] = "shard\ue000zero"
    data = _digest_data(json.dumps(document, ensure_ascii=False).encode())
    assert not data["review"].shown_as_is
    out = egress.clean_envelope(success(data, notice="n", live_api_contacted=False))
    assert out.data is not None
    assert out.data["review"]["data"][0]["name"] == "shard⟨U+E000⟩zero"
    assert "shard⟨U+E000⟩zero" in out.data["review_text"]


def test_a_registered_credential_in_the_review_is_redacted_though_the_bytes_were_ascii() -> None:
    document = copy.deepcopy(EXAMPLE)
    document["data"][0]["decontamination"]["method"] = f"by {CANARY_TOKEN[:6]}-{CANARY_TOKEN[6:]}"
    secret = f"{CANARY_TOKEN[:6]}-{CANARY_TOKEN[6:]}"
    Credential(secret, "ITO_API_KEY")
    data = _digest_data(json.dumps(document).encode())
    assert data["review"].shown_as_is
    wire = egress.clean_envelope(success(data, notice="n", live_api_contacted=False)).to_json()
    assert secret not in wire and "<redacted>" in wire


# ---------------------------------------------------------------------------- the manifest's text as the source

@st.composite
def documents(draw: st.DrawFn) -> Doc:
    doc = copy.deepcopy(EXAMPLE)
    doc["description"] = draw(st.none() | review_strings)
    doc["model"]["name"] = draw(review_labels)
    for ref in doc["data"]:
        ref["name"] = draw(review_labels)
        ref["decontamination"]["eval_suites"] = draw(st.lists(review_labels, min_size=1, max_size=3))
    return doc


@SETTINGS
@given(documents(), st.booleans())
def test_a_manifest_without_a_backslash_holds_every_string_of_its_review(doc: Doc, ascii_only: bool) -> None:
    """Why the egress may check the manifest's text instead of a joined copy of the review's strings:
    with no backslash in it, JSON has no escape, so every key and string of the review is in the text
    (the derived size and amounts are appended). With one, the review's own strings are used."""
    content = json.dumps(doc, ensure_ascii=ascii_only).encode()
    review = manifest.TrainingManifest.model_validate(doc, strict=True).review()
    text = digest.verbatim_sources(content.decode(), review)
    if b"\\" in content:
        assert text is None
        return
    assert text is not None
    for string in _keys_and_strings(review):
        assert any(string in part for part in (*text, digest.REVIEW_KEYS)), string


PRINTABLE_LABELS = st.text(st.sampled_from(list("abcXYZ019-_/.:éü密")), min_size=1, max_size=12)


@SETTINGS
@given(st.lists(st.tuples(PRINTABLE_LABELS, st.lists(PRINTABLE_LABELS, min_size=1, max_size=3), st.booleans()),
                min_size=1, max_size=3))
def test_the_parsed_references_are_the_reviews_own(refs: list[tuple[str, list[str], bool]]) -> None:
    """The digest's review takes the data references of the document it validated as they are: they
    equal what the manifest builds, key for key (`revision` absent comes out as null)."""
    doc = copy.deepcopy(EXAMPLE)
    doc["data"] = [copy.deepcopy(EXAMPLE["data"][0]) for _ in refs]
    for ref, (name, suites, drop) in zip(doc["data"], refs, strict=True):
        ref["name"], ref["decontamination"]["eval_suites"] = name, suites
        if drop:
            ref.pop("revision", None)
    manifest_, _, references = manifest.parse_with_text(json.dumps(doc).encode())
    assert manifest_.review(references) == manifest_.review()
    assert all(list(ref) == list(built) or set(ref) == set(built)
               for ref, built in zip(manifest_.review(references)["data"], manifest_.review()["data"], strict=True))


@pytest.mark.parametrize("raw", [False, True])  # the space escaped in the file, or written as it is
async def test_a_registered_credential_split_by_a_no_break_space_in_a_digested_manifest_never_leaves(
        write_file: Any, raw: bool) -> None:
    """A no-break space passes gate 2 and is not shown as itself: the description that, without it,
    holds the configured credential leaves as a redaction note, and no part of the credential leaves."""
    from ito_training_mcp.service import TrainingService

    doc = copy.deepcopy(EXAMPLE)
    doc["description"] = "see " + CANARY_TOKEN[:12] + "\u00a0" + CANARY_TOKEN[12:] + " for details" * 80
    env = await TrainingService({"ITO_API_KEY": CANARY_TOKEN}).digest_manifest(
        write_file(json.dumps(doc, ensure_ascii=not raw)))
    assert env.ok and env.data is not None, env
    assert env.data["review"]["description"] == egress.HIDDEN_CREDENTIAL_NOTE
    if raw:  # the manifest's text is the review's source: with the space taken out it holds the credential
        assert env.data["review_text"] == egress.REVIEW_WITHHELD_NOTE
    assert CANARY_TOKEN[12:] not in env.to_json()


@pytest.mark.parametrize("description", ["plain words", "two\nlines"])  # without and with a backslash
async def test_a_registered_credential_in_a_digested_manifest_never_leaves(write_file: Any, description: str) -> None:
    from ito_training_mcp.service import TrainingService

    doc = copy.deepcopy(EXAMPLE)
    doc["description"] = description
    doc["model"]["name"] = "acme/" + CANARY_TOKEN
    env = await TrainingService({"ITO_API_KEY": CANARY_TOKEN}).digest_manifest(write_file(doc))
    assert env.ok and env.data is not None, env
    assert (b"\\" in json.dumps(doc).encode()) == ("\n" in description)
    assert CANARY_TOKEN not in env.to_json()
    assert env.data["review_text"] == egress.REVIEW_WITHHELD_NOTE
    assert env.data["review"]["model"]["name"] == "acme/<redacted>"


def test_the_summary_is_made_once_in_the_digesting_thread(tmp_path: Any) -> None:
    from ito_training_mcp.gates.config import ManifestSettings

    path = tmp_path / "manifest.json"
    path.write_bytes(EXAMPLE_MANIFEST.read_bytes())
    path.chmod(0o600)
    digested = digest.digest_manifest_file(str(path), ManifestSettings.from_env({}), summarize=True)
    made = digested._summary
    assert made is not None and digested.summary() is made and digested.summary() is made
    assert digest.digest_manifest_file(str(path), ManifestSettings.from_env({}))._summary is None


# ---------------------------------------------------------------------------- the rules, however validated

def _bad_values(document: Doc) -> Doc:
    document["data"][0]["uri"] = "s3://evil host/\u202e?x@y"
    document["data"][0]["decontamination"]["checked_at"] = "2024-02-30"
    document["data"][0]["decontamination"]["eval_suites"] = ["  padded\u3000"]
    document["checkpoints"]["storage"] = "https://"
    return document


@pytest.mark.parametrize("shape", ["dict", "OrderedDict", "references as models", "list subclass", "int date"])
def test_the_rules_hold_for_python_objects_too(shape: str) -> None:
    """From an attacker review: the rules located their values in plain dicts and lists only, so a
    manifest validated from other Python objects (a dict subclass, the references as models) got a
    bad value through. They are located in the validated manifest now."""
    from collections import OrderedDict

    class Items(list[Any]):
        pass

    document: Any = _bad_values(copy.deepcopy(EXAMPLE))
    if shape == "OrderedDict":
        document = OrderedDict(document, data=[OrderedDict(ref) for ref in document["data"]],
                               checkpoints=OrderedDict(document["checkpoints"]))
    elif shape == "references as models":
        document["data"] = [manifest.DataRef.model_validate(ref, strict=True) for ref in document["data"]]
        document["checkpoints"] = manifest.CheckpointPolicy.model_validate(document["checkpoints"], strict=True)
    elif shape == "list subclass":
        document["data"] = Items(document["data"])
    elif shape == "int date":
        document = copy.deepcopy(EXAMPLE)
        document["data"] = [OrderedDict(ref) for ref in document["data"]]
        document["data"][0]["decontamination"] = OrderedDict(document["data"][0]["decontamination"], checked_at=20240101)
    with pytest.raises(ValidationError) as refused:
        manifest.TrainingManifest.model_validate(document, strict=True)
    kinds = {e["type"] for e in refused.value.errors()}
    assert kinds & {"uri_not_ascii", "value_error", "string_pattern_mismatch"}, kinds


@pytest.mark.parametrize("shape", ["str subclass URI", "list subclass labels"])
def test_subclasses_keep_their_value_problems_among_other_errors(shape: str) -> None:
    """From an attacker review: the one look at each rule's values, among pydantic's other errors,
    took only exact types, so a URI of a str subclass or eval suites in a list subclass lost their
    problems when something else was wrong too."""

    class Text(str):
        pass

    class Items(list[Any]):
        pass

    document = copy.deepcopy(EXAMPLE)
    if shape == "str subclass URI":
        document["data"][0]["uri"] = Text("ftp://x")
        expected = [(("data", 0, "uri"), "string_pattern_mismatch")]
    else:
        document["data"][0]["decontamination"]["eval_suites"] = Items(["", " a"])
        at = ("data", 0, "decontamination", "eval_suites")
        expected = [((*at, 0), "string_too_short"), ((*at, 1), "string_pattern_mismatch")]
    document["zzz"] = 1
    with pytest.raises(ValidationError) as refused:
        manifest.TrainingManifest.model_validate(document, strict=True)
    assert [(e["loc"], e["type"]) for e in refused.value.errors()] == [*expected, (("zzz",), "extra_forbidden")]


@pytest.mark.parametrize("override", ["truthy", "falsy", "long"])
def test_a_label_is_read_as_its_text_whatever_its_class_answers(override: str) -> None:
    """From a second attacker review: the label rule asked a str subclass for its truth and length,
    which it may answer otherwise than its text (pydantic reads the text), so an empty label could
    lose its problem, a good one gain one, or the rule raise `IndexError`."""

    class Truthy(str):
        def __bool__(self) -> bool:
            return True

    class Falsy(str):
        def __bool__(self) -> bool:
            return False

    class Long(str):
        def __len__(self) -> int:
            return 5

    kind = {"truthy": Truthy, "falsy": Falsy, "long": Long}[override]
    document = copy.deepcopy(EXAMPLE)
    document["data"][0]["decontamination"]["eval_suites"] = [kind(""), kind("a b"), kind("mmlu")]
    at = ("data", 0, "decontamination", "eval_suites")
    for extra in (False, True):
        if extra:
            document["zzz"] = 1
        with pytest.raises(ValidationError) as refused:
            manifest.TrainingManifest.model_validate(document, strict=True)
        expected = [((*at, 0), "string_too_short")] + ([(("zzz",), "extra_forbidden")] if extra else [])
        assert [(e["loc"], e["type"]) for e in refused.value.errors()] == expected


def test_labels_too_long_are_trimmed_before_pydantic_makes_an_error_of_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every label one character too long (4,608 of them in a mebibyte): the gate shows the first 20
    problems, as validating the whole document would, and stops counting past COUNTED_MAX ("at
    least"); pydantic is given only the first 20 such labels, once (it made an error object of each,
    then was run again)."""
    document = copy.deepcopy(EXAMPLE)
    ref = copy.deepcopy(document["data"][0])
    document["data"] = [copy.deepcopy(ref) | {"decontamination": {**ref["decontamination"], "eval_suites": [
        f"{i:03d}{j:02d}" + "x" * (manifest.LABEL_MAX - 4) for j in range(18)]}} for i in range(256)]
    assert full_schema_verdict(document)[0] == 256 * 18
    assert_same_verdict(document)
    validated: list[int] = []
    real = manifest.TrainingManifest.model_validate
    monkeypatch.setattr(manifest.TrainingManifest, "model_validate", lambda doc, **kw: validated.append(sum(
        len(r["decontamination"]["eval_suites"]) for r in doc["data"])) or real(doc, **kw))
    marker, count, problems = fast_schema_verdict(document)
    assert marker == "at least" and count > manifest.COUNTED_MAX and len(problems) == manifest.MAX_SCHEMA_PROBLEMS
    assert len(validated) == 1 and validated[0] < 300  # 20 labels too long, and one placeholder per list


@SETTINGS
@given(st.lists(st.lists(st.sampled_from(["mmlu", "x" * 201, "y" * 200, "a  b", "\u00e9" * 201]), min_size=1,
                         max_size=4), min_size=1, max_size=12))
def test_lists_of_labels_some_too_long_get_the_whole_documents_verdict(lists: list[list[str]]) -> None:
    document = copy.deepcopy(EXAMPLE)
    ref = document["data"][0]
    document["data"] = [copy.deepcopy(ref) | {"decontamination": {**ref["decontamination"], "eval_suites": labels}}
                        for labels in lists]
    assert_same_verdict(document)


def test_many_value_problems_show_the_first_twenty_and_stop_counting() -> None:
    """256 references with 100 padded labels, a bad URI, report and date each (26,368 problems): the
    gate shows the first 20 in document order, as validating the whole would, makes only those 20
    into errors, and stops counting past COUNTED_MAX ("at least")."""
    document = copy.deepcopy(EXAMPLE)
    ref = copy.deepcopy(document["data"][0])
    ref["decontamination"]["eval_suites"] = ["\u00e9 "] * 100
    ref["decontamination"]["checked_at"] = "2024-02-30"
    ref["uri"], ref["decontamination"]["report"] = "s3://\u00e9", "s3://a b"
    document["data"] = [copy.deepcopy(ref) for _ in range(256)]
    assert full_schema_verdict(document)[0] == 256 * 103
    assert_same_verdict(document)
    marker, count, problems = fast_schema_verdict(document)
    assert marker == "at least"
    assert count == manifest.COUNTED_MAX + 1 and len(problems) == manifest.MAX_SCHEMA_PROBLEMS
    assert problems[:3] == [{"pointer": "/data/0/uri", "problem": "uri_not_ascii"},
                            {"pointer": "/data/0/decontamination/eval_suites/0", "problem": "whitespace"},
                            {"pointer": "/data/0/decontamination/eval_suites/1", "problem": "whitespace"}]
    tally = manifest_values.Tally(manifest.MAX_SCHEMA_PROBLEMS)  # no cap: every problem counted
    with pytest.raises(ValidationError) as refused:
        manifest.TrainingManifest.model_validate(document, strict=True, context={manifest.TALLY: tally})
    assert refused.value.error_count() == manifest.MAX_SCHEMA_PROBLEMS
    assert tally.left_out == 256 * 103 - manifest.MAX_SCHEMA_PROBLEMS and not tally.capped
    with pytest.raises(ManifestRefusal) as gate:
        manifest.parse_manifest(json.dumps(document).encode())
    assert f"(at least {manifest.COUNTED_MAX + 1} problem(s);" in gate.value.message


# ---------------------------------------------------------------------------- the scanner's joined texts

SCANNED_TEXTS = st.lists(st.lists(st.sampled_from(["a", "é", "e\u0301", "\ufb01", "\uff21", "\u200b", "\u00ad", "\u2060",
                                                   " ", "ghp_", "\u3164", "\u1160", "\ufe0f", "x"]),
                                  max_size=6).map("".join), min_size=1, max_size=6)


@SETTINGS
@given(SCANNED_TEXTS, st.booleans())
def test_texts_normalised_together_are_each_text_normalised(texts: list[str], bounded: bool) -> None:
    """The scanner normalises many non-ASCII strings in one NFKC pass over them joined by NUL (a
    starter that composes with nothing) when that holds no invisible character; otherwise each on its
    own. Either way the result is each text's own `normalize`, joined, with the same findings."""
    from ito_training_mcp import scan_strings, secret_scan

    found: dict[int, set[str]] = {}
    together = scan_strings.joined(texts, found, bounded)
    each = [secret_scan.normalize(text) for text in texts]
    expected = {i: {secret_scan.HIDDEN} for i, text in enumerate(each) if text is None}
    assert found == expected
    assert_each_normalised_or_left_out(together.split("\x00"), [text or "" for text in each])


def assert_each_normalised_or_left_out(parts: list[str], each: list[str]) -> None:
    """Each part is its text's `normalize`, or empty where that holds no anchor: a text in NFKD that
    the search of decomposed anchors passes over can hold no finding and is not normalised."""
    from ito_training_mcp.secret_engine import default_engine

    engine = default_engine()
    assert len(parts) == len(each)
    for part, clean in zip(parts, each, strict=True):
        assert part == clean or (part == "" and engine.next_anchor(engine.prepare(clean), 0) < 0), (part, clean)


# Texts that take the scanner off its joint path: more kinds of invisible character than one text may
# hold, NUL inside a text, runs of combining marks too long to normalise, many texts with findings.
MANY_KIND_TEXTS = st.lists(st.lists(st.sampled_from(
    ["a", "\u00e9", "e\u0301", "\ufb01", "\uff21", "\u65e5", " ", "ghp_", "x" * 9, "\x00", "\u0301" * 31,
     *(chr(c) for c in (0x200B, 0x200C, 0x200D, 0x2060, 0x2061, 0x2062, 0xFE00, 0xFE01, 0xFE0F, 0xFEFF,
                        0x00AD, 0x180E, 0xE0020, 0xE0041, 0x13430, 0x1343F, 0x0600))]),
    max_size=16).map("".join), min_size=1, max_size=40)


def _each_on_its_own(texts: list[str]) -> tuple[dict[int, set[str]], list[str]]:
    """What the scanner made of the texts before the joint path: each text's own `normalize`, up to
    the text that gives the MAX_FINDINGS-th finding."""
    from ito_training_mcp import secret_scan

    found: dict[int, set[str]] = {}
    each: list[str] = []
    for index, text in enumerate(texts):
        if len(found) >= secret_scan.MAX_FINDINGS:
            break
        clean = secret_scan.normalize(text)
        if clean is None:
            found[index] = {secret_scan.HIDDEN}
        each.append(clean or "")
    return found, each


@SETTINGS
@given(MANY_KIND_TEXTS)
def test_texts_cleaned_one_by_one_only_where_they_need_it_are_each_text_normalised(texts: list[str]) -> None:
    """Past what one cleaning of all the texts may do, only the texts holding an invisible character
    (or NUL, or too long a run) are cleaned on their own: the result is still each text's own
    `normalize`, with the same texts reported hidden, up to the last finding that could be reported.
    A bounded scan whose budget is not spent comes to the same."""
    from ito_training_mcp import secret_scan

    expected_found, expected = _each_on_its_own(texts)
    for budget in (scan_strings.UNBOUNDED, secret_scan._Budget(1 << 30)):
        found: dict[int, set[str]] = {}
        together, _ = secret_scan._joined_prepared(texts, found, budget)
        assert found == expected_found
        assert_each_normalised_or_left_out(together.split("\x00")[:len(expected)], expected)


@SETTINGS
@given(MANY_KIND_TEXTS, st.integers(0, 40_000), st.integers(0, 3))
def test_a_spent_budget_reports_what_it_did_not_clean_as_unexamined(texts: list[str], left: int, free: int) -> None:
    """In a bounded scan, each text cleaned on its own past the first few is charged; once the budget
    cannot pay for one, the texts that need cleaning are reported unexamined instead, in document
    order, up to MAX_FINDINGS: never a text that needs none, never hidden text passed over in silence."""
    from ito_training_mcp import secret_scan

    expected_found, expected = _each_on_its_own(texts)
    found: dict[int, set[str]] = {}
    together, _ = secret_scan._joined_prepared(texts, found, secret_scan._Budget(left, free))
    cleaned = together.split("\x00")
    needing = [i for i, text in enumerate(texts)
               if (not text.isascii() and secret_scan.normalize(text) != unicodedata.normalize("NFKC", text))
               or "\x00" in text or secret_scan.normalize(text) is None]
    assert set(found) <= set(needing)
    for index, kinds in found.items():
        assert kinds in ({secret_scan.UNEXAMINED}, expected_found.get(index))
        assert cleaned[index] == ""
    reported_before = [i for i in needing if i < max(found, default=-1)]
    assert all(i in found or cleaned[i] == expected[i] for i in reported_before)
    if len(found) < secret_scan.MAX_FINDINGS:
        assert all(i in found or cleaned[i] == expected[i] for i in needing)
        assert len(cleaned) == len(texts)


def test_a_small_document_is_never_cut_short_for_its_cleaning() -> None:
    """From an attacker review: in a refused 2 KB document, forty strings needing a cleaning each went
    `unexamined`, and a token after sixty of them was no longer named. The first FREE_CLEANINGS are
    free: the bounded scan finds what the full one finds."""
    from ito_training_mcp import secret_scan

    kinds = [chr(c) for c in (*range(0x200B, 0x200E), *range(0x2060, 0x2065), *range(0xFE00, 0xFE09))]
    for count in (40, secret_scan.FREE_CLEANINGS, 97, 300):
        notes = [f"a{kinds[i % len(kinds)]}b" for i in range(count)] + ["ghp_" + "a1B2c3D4e5" * 4]
        document = {**json.loads(EXAMPLE_MANIFEST.read_bytes()), "notes": notes}
        bounded = secret_scan.scan(document, bounded=True)
        assert bounded == secret_scan.scan(document) == [secret_scan.Finding(f"/notes/{count}", "github_token")]


def test_the_look_for_invisible_characters_by_their_first_byte_misses_none() -> None:
    """The RE2 engine settles a text with none of the bytes that begin an invisible character in
    UTF-8 without its search; every invisible character still is found, with NUL or without."""
    from ito_training_mcp import secret_engine, secret_rules

    engines = [secret_engine.default_engine(), secret_engine.python_engine()]
    for low, high in secret_rules.INVISIBLE_RANGES:
        for code in {low, high, (low + high) // 2}:
            for engine in engines:
                data = engine.prepare(f"d\u00e9j\u00e0 {chr(code)} \u4e2d")
                assert engine.invisible(data, 0) is not None, hex(code)
                assert (engine.invisible(data, 0, nul=False) is not None) == (code != 0), hex(code)
    for engine in engines:
        assert engine.invisible(engine.prepare("d\u00e9j\u00e0 \u4e2d\u3000\u00a0"), 0) is None


@st.composite
def documents_with_many_value_problems(draw: st.DrawFn) -> Doc:
    """Up to 256 references with up to 100 eval-suite labels drawn from good, padded and refused ones,
    bad URIs and dates here and there, an unknown key now and then: hundreds to tens of thousands of
    problems."""
    pool = ["ok", "a b", "\u00e9 ", " x", "", "x" * 201, 7, None, {"k": 1}, "a  b", "\u3000y", "\ud800"]
    document = copy.deepcopy(EXAMPLE)
    refs = []
    for index in range(draw(st.sampled_from([1, 3, 40, 256]))):
        ref = copy.deepcopy(EXAMPLE["data"][0])
        size = draw(st.sampled_from([1, 5, 100]))
        ref["decontamination"]["eval_suites"] = draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size))
        if draw(st.integers(0, 9)) < 3:
            ref["uri"] = draw(st.sampled_from(["s3://\u00e9", "s3://a b", 5, "s3://ok"]))
        if draw(st.integers(0, 9)) < 3:
            ref["decontamination"]["checked_at"] = draw(st.sampled_from(["2024-02-30", 1, "2024-01-01"]))
        if draw(st.integers(0, 9)) < 1:
            ref[f"extra{index}"] = 1
        refs.append(ref)
    document["data"] = refs
    return document


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(documents_with_many_value_problems())
def test_many_value_problems_report_what_validating_everything_would(document: Doc) -> None:
    """The gate's shortcuts for refused documents (twenty errors made by the value rules, their
    errors counted rather than merged among thousands of pydantic's, refused labels past the first
    twenty left out before a first look) give the count and the twenty problems of the whole."""
    assert_same_verdict(document)


# ---------------------------------------------------------------------------- the character rule's look spares the scanner's


def _labels_manifest(*labels: str) -> bytes:
    ref = EXAMPLE["data"][0]
    doc = {**EXAMPLE, "data": [{**ref, "decontamination": {**ref["decontamination"], "eval_suites": list(labels)}}]}
    return json.dumps(doc, ensure_ascii=False).encode()


def test_bytes_with_no_forbidden_character_spare_the_scanner_its_search_for_invisible_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A manifest in another script that the character rule's look at the bytes clears is not searched
    again for invisible characters by the scanner; one it does not clear is; and a credential among
    such labels is still found."""
    from ito_training_mcp.secret_engine import default_engine

    engine = default_engine()
    searched: list[int] = []
    real = engine.invisible

    def counting(data: Any, pos: int, *, nul: bool = True) -> Any:
        searched.append(len(data))
        return real(data, pos, nul=nul)

    monkeypatch.setattr(engine, "invisible", counting)
    clean = _labels_manifest("Tiếng Việt mmlu", "한국어 평가", "密码学 评测", "पाठ परीक्षा")
    assert not manifest_characters.may_hold_forbidden(clean)
    manifest.parse_with_text(clean)
    assert searched == []
    with pytest.raises(ManifestRefusal) as refused:  # a word joiner: the rule's look cannot clear it
        manifest.parse_with_text(_labels_manifest("Tiếng\u2060Việt"))
    assert searched and refused.value.code is ErrorCode.MANIFEST_SCHEMA
    with pytest.raises(ManifestRefusal) as found:
        manifest.parse_with_text(_labels_manifest("Tiếng Việt", f"đánh giá {CANARY_GITHUB}", "한국어"))
    assert found.value.code is ErrorCode.MANIFEST_SECRET
    assert found.value.details["findings"] == [{"pointer": "/data/0/decontamination/eval_suites/1",
                                                "kind": "github_token", "in_key": False}]
    hidden = CANARY_GITHUB[:2] + "\u200d" + CANARY_GITHUB[2:]  # a joiner inside the prefix: only a look finds it
    with pytest.raises(ManifestRefusal) as joined:
        manifest.parse_with_text(_labels_manifest("Tiếng Việt", f"đánh giá {hidden}"))
    assert joined.value.code is ErrorCode.MANIFEST_SECRET


def test_a_forbidden_character_first_among_those_not_ascii_settles_the_look_without_the_one_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A text the rule refuses usually shows a forbidden character early: the look stops there; one
    whose first such character is innocent takes the one pass, which finds it all the same."""
    from ito_training_mcp import byte_facts

    passes: list[int] = []
    real = byte_facts.facts
    monkeypatch.setattr(byte_facts, "facts", lambda data: passes.append(len(data)) or real(data))
    early = json.dumps({"notes": ["\u200b" * 64 + str(i) for i in range(500)]}, ensure_ascii=False).encode()
    assert manifest_characters.look_at_bytes(early) == (True, False, None) and passes == []
    late = json.dumps({"notes": ["é", *["\u200b" * 64 + str(i) for i in range(500)]]}, ensure_ascii=False).encode()
    look = manifest_characters.look_at_bytes(late)
    assert (look.forbidden_possible and passes == [len(late)]) or byte_facts.facts(b"a") is None


def test_the_anchor_search_taken_ahead_is_the_scan_s_first() -> None:
    """Gate 2's worker searches ASCII bytes for the first anchor while the JSON is parsed: the scan
    takes that answer for its first search, goes on searching past it, and finds what it finds
    without it; nowhere settles a document at once."""
    from ito_training_mcp import secret_scan

    prefix = "ghp_"
    credential = prefix + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    document = {"description": "a tokenizer note", "data": ["x" * 5000, {"note": credential}]}
    text = json.dumps(document)
    encoded = text.encode()
    first = secret_scan.first_ascii_anchor(encoded)
    assert first is not None and 0 <= first < text.index(credential)  # "token" comes first
    assert secret_scan.scan(document, source=text, encoded=encoded, first_places=lambda: (first, None)) == \
        secret_scan.scan(document) != []
    clean = {"description": "plain words", "data": ["x" * 5000]}
    clean_bytes = json.dumps(clean).encode()
    assert secret_scan.first_ascii_anchor(clean_bytes) == -1
    # The answer is trusted (a wrong one would hide the credential): only gate 2's own look gives it.
    assert secret_scan.scan(document, source=text, encoded=encoded, first_places=lambda: (-1, None)) == []
    assert secret_scan.first_ascii_anchor("é".encode()) is None  # not ASCII: the scan searches itself


def test_the_search_of_a_text_in_neither_form_is_taken_ahead_and_trusted() -> None:
    """For bytes that may be in neither normal form (letters composed and not), gate 2's worker also
    takes the scanner's first search of them (`first_any_form_place`); the scan takes that answer,
    and finds what it finds without it."""
    from ito_training_mcp import look_ahead, secret_scan

    prefix = "ghp_"
    labels = [f"Tie\u0302\u0301ng Việt {i}" for i in range(200)]
    document = {"labels": labels, "note": prefix + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"}
    text = json.dumps(document, ensure_ascii=False)
    encoded = text.encode()
    looked = look_ahead.LookAhead()
    looked.take(encoded)
    ascii_anchor, any_form_place = looked.first_places(encoded)
    look = looked.look(encoded)
    assert look is not None and ascii_anchor is None and any_form_place is not None
    assert 0 <= any_form_place == secret_scan.first_any_form_place(encoded)
    # for the very object looked at: equal bytes in another object get nothing (the checks look themselves)
    assert looked.look(bytes(bytearray(encoded))) is None
    assert looked.first_places(bytes(bytearray(encoded))) == (None, None)
    facts = look.facts
    assert secret_scan.scan(document, source=text, encoded=encoded, facts=facts,
                            first_places=lambda: (None, any_form_place)) == secret_scan.scan(document) != []
    # The answer is trusted (a wrong one would hide the credential): only gate 2's own look gives it.
    assert secret_scan.scan(document, source=text, encoded=encoded, facts=facts, first_places=lambda: (None, -1)) == []
    for labels_as, expected in ((labels, -1), ([unicodedata.normalize("NFC", label) for label in labels], None)):
        other = json.dumps({"labels": labels_as}, ensure_ascii=False).encode()
        taken = look_ahead.LookAhead()
        taken.take(other)
        assert taken.first_places(other) == (None, expected)  # nowhere; in NFKC (not searched: no need)
    refused = json.dumps({"labels": [label + "\u200b" for label in labels]}, ensure_ascii=False).encode()
    taken = look_ahead.LookAhead()  # invisible characters (refused): searched in any form first, too
    taken.take(refused)
    assert taken.first_places(refused) == (None, secret_scan.first_any_form_place(refused)) != (None, None)
    escaped = json.dumps({"labels": labels}).encode()  # backslashes: neither look is taken
    taken = look_ahead.LookAhead()
    taken.take(escaped)
    assert taken.look(escaped) is None and taken.first_places(escaped) == (None, None)


def test_a_look_ahead_that_fails_leaves_the_checks_to_look_themselves(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's look never raises: what failed is None, the gate looks itself and decides alike."""
    from ito_training_mcp import look_ahead

    content = json.dumps({"labels": ["Tiếng Việt"] * 50}, ensure_ascii=False).encode()

    def failing(data: bytes) -> Any:
        raise MemoryError("out of memory in the worker")

    monkeypatch.setattr(look_ahead, "look_at_bytes", failing)
    taken = look_ahead.LookAhead()
    taken.take(content)
    assert taken.look(content) is None and taken.first_places(content) == (None, None)
    with pytest.raises(manifest.ManifestRefusal):  # not a manifest: refused the same way as without it
        manifest.parse_checked(content, taken)
