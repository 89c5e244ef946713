"""Gate 2, the content checks (contract §6): strict JSON, then the closed, strict schema.

Every refusal must name where the problem is (a JSON pointer in details.problems) and never
what the file says: a distinctive marker placed in the offending field never appears in the
message or anywhere in the envelope.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from ito_training_mcp.envelope import Envelope
from ito_training_mcp.gates.manifest import strict_json
from ito_training_mcp.gates.manifest.schema import manifest_json_schema
from ito_training_mcp.service import TrainingService

from .conftest import assert_manifest_refused

WriteFile = Callable[..., str]
Doc = dict[str, Any]

MARK = "ZQXcontentmark"


# ---------------------------------------------------------------------------- helpers


def assert_refused(env: Envelope, code: str, *absent: str) -> None:
    assert_manifest_refused(env, code, *absent)


def problem_pointers(env: Envelope) -> list[str]:
    assert env.error is not None
    assert env.error.details is not None
    problems = env.error.details["problems"]
    assert problems, env.to_json()
    for p in problems:
        assert set(p) == {"pointer", "problem"}
    return [p["pointer"] for p in problems]


def mutated(doc: Doc, mutate: Callable[[Doc], object]) -> Doc:
    new = copy.deepcopy(doc)
    mutate(new)
    return new


async def digest(service: TrainingService, write_file: WriteFile, content: bytes | Doc | list[Any] | str) -> Envelope:
    return await service.digest_manifest(write_file(content))


async def assert_schema_refusal(
    service: TrainingService, write_file: WriteFile, doc: Doc | list[Any], pointer: str, *absent: str
) -> Envelope:
    env = await digest(service, write_file, doc)
    assert_refused(env, "MANIFEST_SCHEMA", *absent)
    assert pointer in problem_pointers(env), env.to_json()
    return env


def set_at(path: tuple[str | int, ...], value: Any) -> Callable[[Doc], None]:
    def mutate(doc: Doc) -> None:
        node: Any = doc
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return mutate


def _pointer(path: tuple[str | int, ...]) -> str:
    return "".join(f"/{p}" for p in path)


# ---------------------------------------------------------------------------- the baseline


async def test_example_manifest_is_accepted(service: TrainingService, manifest_path: str) -> None:
    env = await service.digest_manifest(manifest_path)
    assert env.ok is True, env.to_json()
    assert env.live_api_contacted is False


# ---------------------------------------------------------------------------- strict JSON


async def test_invalid_utf8(service: TrainingService, write_file: WriteFile, example_document: Doc) -> None:
    doc = mutated(example_document, set_at(("description",), f"{MARK} PLACEHOLDER"))
    raw = json.dumps(doc, ensure_ascii=False).encode().replace(b"PLACEHOLDER", b"\xff\xfe\xc3(")
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON", MARK)


async def test_utf16_document(service: TrainingService, write_file: WriteFile, example_bytes: bytes) -> None:
    raw = example_bytes.decode().encode("utf-16")
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON")


async def test_byte_order_mark(service: TrainingService, write_file: WriteFile, example_document: Doc) -> None:
    doc = mutated(example_document, set_at(("description",), MARK))
    raw = b"\xef\xbb\xbf" + json.dumps(doc).encode()
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON", MARK)


def _with_duplicate(raw: str, key: str, value: str) -> str:
    """Insert a second member named `key` right after the first `"key": ` member's opening."""
    needle = f'"{key}": '
    index = raw.index(needle)
    return raw[:index] + f'"{key}": {value}, ' + raw[index:]


async def test_duplicate_key_top_level(service: TrainingService, write_file: WriteFile, example_document: Doc) -> None:
    raw = _with_duplicate(json.dumps(example_document), "description", json.dumps(MARK))
    assert raw.count('"description"') == 2
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON", MARK)


async def test_duplicate_key_nested(service: TrainingService, write_file: WriteFile, example_document: Doc) -> None:
    raw = _with_duplicate(json.dumps(example_document), "ceiling_usd", json.dumps("99999999." + MARK))
    assert raw.count('"ceiling_usd"') == 2
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON", MARK)


async def test_duplicate_key_through_escapes(service: TrainingService, write_file: WriteFile,
                                            example_document: Doc) -> None:
    """`"target"` and `"t\\u0061rget"` are the same key once decoded."""
    raw = json.dumps(example_document).replace('"target": ', '"t\\u0061rget": "rl", "target": ', 1)
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON")


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
async def test_non_finite_number_literals(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                          literal: str) -> None:
    raw = json.dumps(example_document).replace('"interval_steps": 500', f'"interval_steps": {literal}')
    assert literal in raw
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON")


def _nested_list(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


async def test_nesting_deeper_than_32(service: TrainingService, write_file: WriteFile, example_document: Doc) -> None:
    # the top-level object is level 1, so 32 more levels under a key make 33
    doc = mutated(example_document, set_at(("notes",), _nested_list(32, MARK)))
    assert_refused(await digest(service, write_file, doc), "MANIFEST_INVALID_JSON", MARK)


def test_exactly_32_levels_is_accepted_by_strict_json() -> None:
    assert strict_json.loads(("[" * 32 + "]" * 32).encode()) == _nested_list(31, [])
    assert strict_json.loads(json.dumps(_nested_list(32, 1)).encode()) == _nested_list(32, 1)
    objects = '{"a":' * 32 + "1" + "}" * 32
    assert isinstance(strict_json.loads(objects.encode()), dict)
    mixed = '{"a":[' * 16 + "1" + "]}" * 16
    assert isinstance(strict_json.loads(mixed.encode()), dict)


@pytest.mark.parametrize(
    "text",
    ["[" * 33 + "]" * 33, '{"a":' * 33 + "1" + "}" * 33, '{"a":[' * 16 + "{}" + "]}" * 16],
    ids=["arrays-33", "objects-33", "mixed-33"],
)
def test_33_levels_is_refused_by_strict_json(text: str) -> None:
    with pytest.raises(strict_json.StrictJSONError):
        strict_json.loads(text.encode())


@pytest.mark.parametrize(
    "raw",
    [b"[" * 100_000, b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000],
    ids=["open-arrays", "closed-arrays", "open-objects", "closed-objects"],
)
async def test_100000_nested_brackets_do_not_crash(service: TrainingService, write_file: WriteFile,
                                                   raw: bytes) -> None:
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON")


@pytest.mark.parametrize("suffix", [b" x", b"{}", b"\x00", b"\n,", b'"' + MARK.encode() + b'"'],
                         ids=["word", "second-object", "nul", "comma", "string"])
async def test_trailing_garbage(service: TrainingService, write_file: WriteFile, example_bytes: bytes,
                                suffix: bytes) -> None:
    assert_refused(await digest(service, write_file, example_bytes + suffix), "MANIFEST_INVALID_JSON", MARK)


async def test_trailing_whitespace_is_fine(service: TrainingService, write_file: WriteFile,
                                           example_bytes: bytes) -> None:
    env = await digest(service, write_file, example_bytes + b"\n\n  \t\n")
    assert env.ok is True, env.to_json()


@pytest.mark.parametrize("raw", [b"", b"   ", b"{", b'{"a" 1}', b"{'a': 1}", b'{"a": 1,}', b"// c\n{}", b'{"a":"\x01"}'],
                         ids=["empty", "blank", "open", "no-colon", "single-quotes", "trailing-comma", "comment",
                              "raw-control-char"])
async def test_not_json(service: TrainingService, write_file: WriteFile, raw: bytes) -> None:
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON")


async def test_huge_integer_literal(service: TrainingService, write_file: WriteFile, example_document: Doc) -> None:
    digits = "7" * 5000
    raw = json.dumps(example_document).replace('"parameter_count": 8030261248', f'"parameter_count": {digits}')
    assert digits in raw
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON", digits[:50])


async def test_large_but_representable_integer_is_a_schema_problem(
    service: TrainingService, write_file: WriteFile, example_document: Doc
) -> None:
    doc = mutated(example_document, set_at(("model", "parameter_count"), int("9" * 400)))
    await assert_schema_refusal(service, write_file, doc, "/model/parameter_count", "9" * 50)


@pytest.mark.parametrize("number", ["1e99999999999999999999", "1e-99999999999999999999", "-2.5E+9999999999999999999"])
async def test_exponent_overflow_is_invalid_json(service: TrainingService, write_file: WriteFile,
                                                 example_document: Doc, number: str) -> None:
    raw = json.dumps(example_document).replace('"parameter_count": 8030261248', f'"parameter_count": {number}')
    assert number in raw
    assert_refused(await digest(service, write_file, raw), "MANIFEST_INVALID_JSON")


def test_strict_json_exponent_overflow_raises_strict_json_error() -> None:
    with pytest.raises(strict_json.StrictJSONError):
        strict_json.loads(b"[1e99999999999999999999]")


def test_fractions_are_decimals_not_floats() -> None:
    value = strict_json.loads(b'{"a": 0.1, "b": 1e400, "c": 10}')
    assert value == {"a": Decimal("0.1"), "b": Decimal("1e400"), "c": 10}
    assert isinstance(value["a"], Decimal)
    assert isinstance(value["c"], int)


@pytest.mark.parametrize("document", [[], ["schema_version"], "ito.training.manifest.v1", 42, None, True],
                         ids=["empty-array", "array", "string", "number", "null", "bool"])
async def test_top_level_not_an_object(service: TrainingService, write_file: WriteFile, document: Any) -> None:
    env = await digest(service, write_file, json.dumps(document))
    assert_refused(env, "MANIFEST_SCHEMA")
    assert problem_pointers(env) == [""]


async def test_example_as_top_level_array(service: TrainingService, write_file: WriteFile,
                                          example_document: Doc) -> None:
    env = await digest(service, write_file, [example_document])
    assert_refused(env, "MANIFEST_SCHEMA")


# ---------------------------------------------------------------------------- lone surrogates


async def test_lone_surrogate_in_value_is_refused_and_envelope_is_utf8(
    service: TrainingService, write_file: WriteFile, example_document: Doc
) -> None:
    raw = json.dumps(mutated(example_document, set_at(("description",), "\ud800 " + MARK)))
    assert "\\ud800" in raw
    env = await digest(service, write_file, raw)
    assert env.ok is False
    assert env.error is not None
    assert env.error.code.value in ("MANIFEST_INVALID_JSON", "MANIFEST_SCHEMA")
    assert_refused(env, env.error.code.value, MARK)


async def test_lone_surrogate_in_unknown_key_envelope_is_utf8(
    service: TrainingService, write_file: WriteFile, example_document: Doc
) -> None:
    raw = json.dumps(mutated(example_document, set_at(("notes\udc80",), 1)))
    env = await digest(service, write_file, raw)
    assert env.ok is False
    assert env.error is not None
    assert env.error.code.value in ("MANIFEST_INVALID_JSON", "MANIFEST_SCHEMA")
    env.to_json().encode("utf-8")


async def test_lone_surrogate_in_credential_key_envelope_is_utf8(
    service: TrainingService, write_file: WriteFile, example_document: Doc
) -> None:
    raw = json.dumps(mutated(example_document, set_at(("password\ud800",), 1)))
    env = await digest(service, write_file, raw)
    assert env.ok is False
    assert env.error is not None
    assert env.error.code.value in ("MANIFEST_INVALID_JSON", "MANIFEST_SECRET")
    env.to_json().encode("utf-8")


# ---------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    ("path", "pointer"),
    [
        (("ZQXunknown",), "/ZQXunknown"),
        (("model", "ZQXunknown"), "/model/ZQXunknown"),
        (("data", 1, "ZQXunknown"), "/data/1/ZQXunknown"),
        (("data", 0, "decontamination", "ZQXunknown"), "/data/0/decontamination/ZQXunknown"),
        (("budget", "ZQXunknown"), "/budget/ZQXunknown"),
        (("checkpoints", "ZQXunknown"), "/checkpoints/ZQXunknown"),
    ],
    ids=["top", "model", "data", "decontamination", "budget", "checkpoints"],
)
async def test_unknown_key(service: TrainingService, write_file: WriteFile, example_document: Doc,
                           path: tuple[str | int, ...], pointer: str) -> None:
    value = f"value-{MARK}"
    doc = mutated(example_document, set_at(path, value))
    await assert_schema_refusal(service, write_file, doc, pointer, value)


async def test_unknown_key_that_is_not_a_plain_identifier_is_masked(service: TrainingService, write_file: WriteFile,
                                                                     example_document: Doc) -> None:
    """A key is file content: only plain identifiers are echoed in a pointer; `/` and `~` never are."""
    doc = mutated(example_document, set_at(("model", "a/b~c"), 1))
    await assert_schema_refusal(service, write_file, doc, "/model/*", "a/b~c", "a~1b~0c")


# ---------------------------------------------------------------------------- required fields


def _required_paths() -> list[tuple[str | int, ...]]:
    """Every required member of the published schema, at every level (arrays: first element)."""
    schema = manifest_json_schema()
    defs = schema.get("$defs", {})

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def walk(node: dict[str, Any], prefix: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
        node = resolve(node)
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            yield from walk(node["items"], (*prefix, 0))
            return
        for name, sub in node.get("properties", {}).items():
            if name in node.get("required", []):
                yield (*prefix, name)
            if isinstance(sub, dict):
                yield from walk(sub, (*prefix, name))

    return list(walk(schema, ()))


REQUIRED_PATHS = _required_paths()

# What contract §6 makes mandatory, in this implementation's field names.
CONTRACT_REQUIRED = {
    "/schema_version", "/model", "/model/name", "/model/parameter_count", "/model/revision", "/target",
    "/data", "/data/0/name", "/data/0/uri", "/data/0/decontamination", "/data/0/decontamination/method",
    "/data/0/decontamination/eval_suites", "/data/0/decontamination/report", "/data/0/decontamination/checked_at",
    "/post_training", "/budget", "/budget/ceiling_usd", "/budget/max_incremental_cost_usd", "/checkpoints",
    "/checkpoints/interval_steps", "/checkpoints/retain_last", "/checkpoints/storage",
}


def test_schema_requires_everything_the_contract_requires() -> None:
    assert {_pointer(p) for p in REQUIRED_PATHS} >= CONTRACT_REQUIRED


@pytest.mark.parametrize("path", REQUIRED_PATHS, ids=[_pointer(p) for p in REQUIRED_PATHS])
async def test_missing_required_field(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                      path: tuple[str | int, ...]) -> None:
    def drop(doc: Doc) -> None:
        node: Any = doc
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    await assert_schema_refusal(service, write_file, mutated(example_document, drop), _pointer(path))


@pytest.mark.parametrize("index", [0, 1])
async def test_missing_field_in_later_data_ref_names_its_index(
    service: TrainingService, write_file: WriteFile, example_document: Doc, index: int
) -> None:
    doc = copy.deepcopy(example_document)
    del doc["data"][index]["decontamination"]["checked_at"]
    await assert_schema_refusal(service, write_file, doc, f"/data/{index}/decontamination/checked_at")


# ---------------------------------------------------------------------------- money


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ceiling_usd", Decimal("1500.5")),
        ("ceiling_usd", 1500),
        ("max_incremental_cost_usd", Decimal("12.25")),
        ("max_incremental_cost_usd", 100),
    ],
    ids=["float-ceiling", "int-ceiling", "float-incremental", "int-incremental"],
)
async def test_money_as_json_number_is_refused(service: TrainingService, write_file: WriteFile,
                                               example_document: Doc, field: str, value: Any) -> None:
    raw = json.dumps(example_document).replace(
        f'"{field}": {json.dumps(example_document["budget"][field])}', f'"{field}": {value}'
    )
    assert f'"{field}": {value}' in raw
    env = await digest(service, write_file, raw)
    assert_refused(env, "MANIFEST_SCHEMA")
    assert f"/budget/{field}" in problem_pointers(env)


@pytest.mark.parametrize(
    "value",
    ["-5.00", "0", "0.00", "0.0", "1.005", "1,500.00", "1500.", ".50", "01500.00", "1e3", " 100.00", "100.00 ",
     "100000000.01", "NaN", "Infinity", ""],
)
async def test_bad_money_string(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                value: str) -> None:
    doc = mutated(example_document, set_at(("budget", "ceiling_usd"), value))
    await assert_schema_refusal(service, write_file, doc, "/budget/ceiling_usd")


@pytest.mark.parametrize(("ceiling", "incremental"), [("1", "1"), ("0.01", "0.01"), ("100000000.00", "0.5"),
                                                      ("4800", "4800.00")])
async def test_good_money_strings(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                  ceiling: str, incremental: str) -> None:
    doc = mutated(example_document, set_at(("budget",), {"ceiling_usd": ceiling,
                                                          "max_incremental_cost_usd": incremental}))
    env = await digest(service, write_file, doc)
    assert env.ok is True, env.to_json()
    assert env.data is not None
    assert env.data["review"]["budget"]["ceiling_usd"] == f"{Decimal(ceiling):.2f}"


async def test_incremental_above_ceiling(service: TrainingService, write_file: WriteFile,
                                         example_document: Doc) -> None:
    doc = mutated(example_document, set_at(("budget",), {"ceiling_usd": "100.00",
                                                         "max_incremental_cost_usd": "100.01"}))
    env = await assert_schema_refusal(service, write_file, doc, "/budget")
    assert env.error is not None
    assert "100.01" not in env.to_json()


# ---------------------------------------------------------------------------- other fields


@pytest.mark.parametrize("revision", ["main", "latest", "v1.0", "4e1c9a2", "HEAD", "refs/heads/main",
                                      "4E1C9A2F7B3D5E8C0A6F1D2B9E7C4A3F5D8B0E6C", "sha256:abc", ""])
async def test_mutable_model_revision(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                      revision: str) -> None:
    doc = mutated(example_document, set_at(("model", "revision"), revision))
    await assert_schema_refusal(service, write_file, doc, "/model/revision")


async def test_mutable_revision_value_is_not_echoed(service: TrainingService, write_file: WriteFile,
                                                    example_document: Doc) -> None:
    value = f"release-{MARK}"
    doc = mutated(example_document, set_at(("model", "revision"), value))
    await assert_schema_refusal(service, write_file, doc, "/model/revision", value)


@pytest.mark.parametrize("revision", ["0" * 64, "sha256:" + "a" * 64, "f" * 40])
async def test_immutable_revisions_accepted(service: TrainingService, write_file: WriteFile,
                                            example_document: Doc, revision: str) -> None:
    env = await digest(service, write_file, mutated(example_document, set_at(("model", "revision"), revision)))
    assert env.ok is True, env.to_json()


@pytest.mark.parametrize("target", [f"target-{MARK}", "FINE_TUNE", "fine-tune", "", 3, None, ["rl"]])
async def test_bad_target(service: TrainingService, write_file: WriteFile, example_document: Doc,
                          target: Any) -> None:
    doc = mutated(example_document, set_at(("target",), target))
    await assert_schema_refusal(service, write_file, doc, "/target", MARK)


@pytest.mark.parametrize("target", ["pretrain", "continued_pretrain", "fine_tune", "rl"])
async def test_every_target_accepted(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                     target: str) -> None:
    env = await digest(service, write_file, mutated(example_document, set_at(("target",), target)))
    assert env.ok is True, env.to_json()


@pytest.mark.parametrize(
    "steps",
    [["sft", f"ppo-{MARK}"], ["sft", "sft"], ["dpo", "sft", "dpo"], ["sft", "dpo", "rlvr", "sft"], "sft", [1], None],
    ids=["unknown", "duplicate", "duplicate-3", "four", "string", "number", "null"],
)
async def test_bad_post_training(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                 steps: Any) -> None:
    doc = mutated(example_document, set_at(("post_training",), steps))
    env = await digest(service, write_file, doc)
    assert_refused(env, "MANIFEST_SCHEMA", MARK)
    assert any(p.startswith("/post_training") for p in problem_pointers(env))


@pytest.mark.parametrize("steps", [[], ["rlvr"], ["dpo", "sft"], ["sft", "dpo", "rlvr"]])
async def test_good_post_training(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                  steps: list[str]) -> None:
    env = await digest(service, write_file, mutated(example_document, set_at(("post_training",), steps)))
    assert env.ok is True, env.to_json()
    assert env.data is not None
    assert env.data["review"]["post_training"] == steps


async def test_empty_data_list(service: TrainingService, write_file: WriteFile, example_document: Doc) -> None:
    await assert_schema_refusal(service, write_file, mutated(example_document, set_at(("data",), [])), "/data")


@pytest.mark.parametrize(
    "uri",
    [f"s3://bucket/path?versionId={MARK}", f"s3://bucket/path#{MARK}", f"ftp://bucket/{MARK}",
     f"file:///etc/{MARK}", f"s3://bucket/with space/{MARK}", "s3://", f"/abs/{MARK}"],
    ids=["query", "fragment", "ftp", "file", "space", "empty-host", "no-scheme"],
)
async def test_bad_data_uri(service: TrainingService, write_file: WriteFile, example_document: Doc,
                            uri: str) -> None:
    doc = mutated(example_document, set_at(("data", 0, "uri"), uri))
    await assert_schema_refusal(service, write_file, doc, "/data/0/uri", MARK)


@pytest.mark.parametrize("version", ["ito.training.manifest.v2", "ito.training.manifest.v1 ", "", 1, None])
async def test_wrong_schema_version(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                    version: Any) -> None:
    doc = mutated(example_document, set_at(("schema_version",), version))
    await assert_schema_refusal(service, write_file, doc, "/schema_version")


@pytest.mark.parametrize("checked_at", ["2026-02-30", "2026-13-01", "2026-1-1", "20261120", "2026-11-20T00:00:00Z",
                                        "yesterday", 20261120])
async def test_invalid_date(service: TrainingService, write_file: WriteFile, example_document: Doc,
                            checked_at: Any) -> None:
    doc = mutated(example_document, set_at(("data", 1, "decontamination", "checked_at"), checked_at))
    await assert_schema_refusal(service, write_file, doc, "/data/1/decontamination/checked_at")


@pytest.mark.parametrize(
    ("path", "raw_value"),
    [
        (("checkpoints", "interval_steps"), '"500"'),
        (("checkpoints", "interval_steps"), "true"),
        (("checkpoints", "interval_steps"), "500.0"),
        (("checkpoints", "interval_steps"), "5e2"),
        (("checkpoints", "interval_steps"), "0"),
        (("checkpoints", "interval_steps"), "-1"),
        (("checkpoints", "retain_last"), '"3"'),
        (("checkpoints", "retain_last"), "1001"),
        (("model", "parameter_count"), '"8030261248"'),
        (("model", "parameter_count"), "0"),
        (("model", "name"), "42"),
        (("model", "name"), '""'),
        (("data", 0, "decontamination", "eval_suites"), "[]"),
        (("data", 0, "decontamination", "eval_suites"), '"mmlu"'),
        (("description",), "7"),
        (("model",), '"ito-labs/atlas-8b"'),
    ],
)
async def test_wrong_types_are_refused_not_coerced(
    service: TrainingService, write_file: WriteFile, example_document: Doc, path: tuple[str | int, ...],
    raw_value: str,
) -> None:
    placeholder = "ZQX_PLACEHOLDER_VALUE"
    raw = json.dumps(mutated(example_document, set_at(path, placeholder)))
    raw = raw.replace(json.dumps(placeholder), raw_value)
    await assert_schema_refusal(service, write_file, raw, _pointer(path))


async def test_string_number_marker_not_echoed(service: TrainingService, write_file: WriteFile,
                                               example_document: Doc) -> None:
    value = f"500{MARK}"
    doc = mutated(example_document, set_at(("checkpoints", "interval_steps"), value))
    await assert_schema_refusal(service, write_file, doc, "/checkpoints/interval_steps", value)


async def test_many_problems_are_bounded(service: TrainingService, write_file: WriteFile,
                                         example_document: Doc) -> None:
    doc = mutated(example_document, set_at(("data",), [{"name": MARK} for _ in range(50)]))
    env = await digest(service, write_file, doc)
    assert_refused(env, "MANIFEST_SCHEMA", MARK)
    assert 1 <= len(problem_pointers(env)) <= 20
