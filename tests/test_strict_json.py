"""Strict JSON for many objects: the parse without the duplicate-key hook and the nesting count on
the text's brackets must answer exactly as the hooked parse and the walk of the document do."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ito_training_mcp.gates.manifest import characters as manifest_characters
from ito_training_mcp.gates.manifest import strict_json

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None)

_KEYS = st.sampled_from(["a", "b", "a:b", ":", "\\", '"', "[", "{}", "é"])
_LEAVES = st.one_of(st.sampled_from(["x", "x:y", "[[", "]}", '"', "\\", "\\\\\"", "é"]), st.integers(-3, 3),
                    st.none(), st.booleans(), st.decimals(allow_nan=False, allow_infinity=False, places=2))
_TREES = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(_KEYS, inner, max_size=3)), max_leaves=24)
# Ways to spoil a text: a duplicate key, a constant, an escaped colon (with and without a duplicate),
# bad syntax, a number too long to represent.
_SPOILERS = st.sampled_from(['{"a": 1, "a": 2}', '{"k": {"b": "x:y", "b": 1}}', '{"c": NaN}', '{"\\u003a": 1}',
                             '{"\\u003a": 1, "\\u003A": 2}', '{"d": [1,]}', '{"e": 1' + "0" * 5000 + "}",
                             '{"f": "ok"}', '{"g": Infinity}'])


def _hooked(text: str) -> tuple[str, Any]:
    """What the parse with the hook on every object answers (the parse before this change)."""
    try:
        return "value", strict_json._DECODER.decode(text)
    except Exception as exc:  # the kind of refusal is what is compared
        return "error", type(exc).__name__


def _counted(text: str) -> tuple[str, Any]:
    try:
        return "value", strict_json._parse(text, True)
    except Exception as exc:
        return "error", type(exc).__name__


@SETTINGS
@given(st.lists(_TREES, min_size=1, max_size=6), st.lists(_SPOILERS, max_size=2),
       st.sampled_from([0, 5, 1100]), st.sampled_from([0, 5, 1100]))
def test_many_objects_parse_as_the_hooked_parse_does(trees: list[Any], spoilers: list[str], before: int,
                                                     after: int) -> None:
    """Past _MANY_OBJECTS objects the text is parsed without the hook and duplicates are found by
    counting colons: the document, or the kind of refusal, is the hooked parse's, wherever the
    duplicate, constant or escaped colon stands among the objects."""
    parts = [json.dumps(tree, default=str) for tree in trees] + spoilers
    text = "[" + ", ".join(['{"p": 0}'] * before + parts + ['{"q": "r:s"}'] * after) + "]"
    assert _counted(text) == _hooked(text)


def test_a_duplicate_past_many_objects_is_refused_as_a_duplicate() -> None:
    padding = ", ".join(['{"p": "a:b"}'] * 3000)
    for text in (f'[{padding}, {{"a": "x:y", "a": 1}}]', f'[{{"a": 1, "a": 1}}, {padding}]',
                 f'[{padding}, {{"k": [{{"z": 1, "y": 2, "z": 3}}]}}]'):
        with pytest.raises(strict_json.StrictJSONError, match=r"^an object has a duplicate key$"):
            strict_json.loads_text(text)
    assert len(strict_json.loads_text(f'[{padding}, {{"a": 1, "b": 1}}]')) == 3001


@SETTINGS
@given(_TREES, st.integers(0, 8), st.booleans())
def test_brackets_of_the_text_nest_as_the_document_does(tree: Any, limit: int, ascii_only: bool) -> None:
    """Strings full of brackets, quotes and backslashes do not count; the text's structure does."""
    source = json.dumps(tree, default=str, ensure_ascii=ascii_only).encode()
    assert strict_json._brackets_exceed(source, limit) == strict_json.depth_exceeds(tree, limit)


def test_depth_from_the_source_with_many_containers() -> None:
    """With many containers the text's brackets decide; deep and shallow documents among thousands of
    empty objects and bracket-filled strings."""
    filler = [{}] * 3000 + ["[[[{{{"] * 100
    for depth in (31, 32, 33, 40):
        nested: Any = "]]]"
        for _ in range(depth):
            nested = [nested]
        document = [*filler, nested]
        source = json.dumps(document).encode()
        assert strict_json.depth_exceeds(document, 32, source=source) == (depth + 1 > 32)
        assert strict_json.depth_exceeds(document, 32) == (depth + 1 > 32)
        if depth + 1 > 32:
            with pytest.raises(strict_json.StrictJSONError, match=r"^nesting is deeper than 32 levels$"):
                strict_json.loads(source)


def test_character_walk_stops_at_the_limit_in_document_order() -> None:
    """Thousands of bad strings: the first MAX_CHARACTER_PROBLEMS, in order; an object's keys come
    first (last key first), then its values."""
    document = {"notes": ["\u200b"] * 5000}
    problems = manifest_characters._walk(document)
    assert [p["pointer"] for p in problems] == [f"/notes/{i}" for i in range(manifest_characters.MAX_CHARACTER_PROBLEMS)]
    keyed = {"a\u200b": "x", "b\u200b": "\u202e", "c": ["\x07"]}
    assert [(p["pointer"], p["problem"]) for p in manifest_characters._walk(keyed)] == [
        ("/*", "invisible"), ("/*", "invisible"), ("/*", "bidi_control"), ("/c/0", "c0_control")]


def _walk_one_by_one(document: Any) -> list[dict[str, Any]]:
    """The character rule's walk as it was: every key and string looked at, one by one."""
    problems: list[dict[str, Any]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), document)]
    while stack and len(problems) < manifest_characters.MAX_CHARACTER_PROBLEMS:
        path, node = stack.pop()
        if isinstance(node, str):
            found = manifest_characters.character_class(node, description=path == ("description",))
            if found:
                problems.append({"pointer": manifest_characters.safe_pointer(path), "problem": found})
        elif isinstance(node, dict):
            for key, child in reversed(node.items()):
                found = manifest_characters.character_class(key)
                if found:
                    problems.append({"pointer": manifest_characters.safe_pointer((*path, key)), "problem": found})
                stack.append(((*path, key), child))
        elif isinstance(node, list):
            stack.extend(((*path, index), child) for index, child in reversed(list(enumerate(node))))
    return problems[:manifest_characters.MAX_CHARACTER_PROBLEMS]


_CHARS = st.lists(st.sampled_from(["a", "\u200b", "\x07", "\u202e", "\t", "\n", "\u2028", " ", "", "\u0600"]),
                  max_size=3).map("".join)
_CHAR_TREES = st.recursive(st.one_of(_CHARS, st.integers()),
                           lambda inner: st.one_of(st.lists(inner, max_size=30), st.lists(_CHARS, max_size=40),
                                                   st.dictionaries(_CHARS, inner, max_size=8)), max_leaves=120)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["description", "a", "b\u200b"]), _CHAR_TREES, max_size=4) | _CHAR_TREES)
def test_the_character_walk_finds_what_looking_at_each_string_finds(document: Any) -> None:
    """The walk passes over a container's clean keys and strings at once and finds a list's bad
    strings by searching them joined: the same problems, in the same order, as one look at each."""
    assert manifest_characters._walk(document) == _walk_one_by_one(document)


def test_empty_containers_count_for_depth_but_take_no_span() -> None:
    """From an attacker review: 350,000 empty objects beside a credential cost the scan a step and a
    span each (1.2 s a mebibyte). An empty container holds no string and no key, so no finding and
    no pointer needs it; its level still counts for the nesting check."""
    from ito_training_mcp.document_strings import collect

    collected = collect({"a": [[[]]], "b": [{}] * 1000, "c": {"d": {}}})
    assert collected.depth == 4
    assert [span[2] for span in collected.spans] == ["", "c", "b", "a", 0]
    assert collect([[[[{}]]]]).depth == 5
