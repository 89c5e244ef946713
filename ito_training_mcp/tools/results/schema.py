"""The per-tool envelope schema published as `outputSchema`.

It says what the contract says: `ok: true` carries `data` and no `error`, `ok: false` carries `error`
and no `data`. It is written in the part of JSON Schema that draft-07, 2020-12 and the LLM vendors'
subsets share, so any client can compile it: a root `anyOf` of two closed object branches told apart by
`ok` (`enum: [true]` / `enum: [false]`), every `$ref` inlined, no `const` (a one-value `enum` says the
same; Gemini's subset lacks `const`), no `dependentSchemas`, `not`, `if`/`then` or `$defs`.
tests/test_output_schemas.py checks every schema against the draft-07 and 2020-12 metaschemas and
validates real envelopes with both; tests/envelope_schema_guard.py validates every envelope any test
produces against its tool's schema.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from pydantic import TypeAdapter

Schema = dict[str, Any]


def inline_refs(schema: Schema) -> Schema:
    """The same schema with every local `#/$defs/...` reference replaced by its target, and no `$defs`.

    Generated schemas here are acyclic; a cycle would be a defect, so it raises rather than loops.
    """
    defs: dict[str, Any] = schema.get("$defs", {})

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            name = ref.removeprefix("#/$defs/")
            if name == ref or name not in defs or name in seen:
                raise ValueError(f"cannot inline reference {ref!r}")
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return {**resolve(defs[name], (*seen, name)), **resolve(siblings, seen)}
        return {k: resolve(v, seen) for k, v in node.items() if k != "$defs"}

    resolved: Schema = resolve(schema, ())
    return resolved


def _compact(node: Any) -> Any:
    """Shorter, the same types: no value patterns, formats or descriptions (the input schemas, the tool
    descriptions and the skill carry those), and a nullable scalar as a list of types rather than an `anyOf`."""
    if isinstance(node, list):
        return [_compact(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _compact(v) for k, v in node.items()
           if k not in ("pattern", "format", "description") or not isinstance(v, str)}
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = next(o for o in options if o != {"type": "null"})
        if set(other) <= {"type", "description"} and isinstance(other.get("type"), str):
            del out["anyOf"]
            out.update({**other, "type": [other["type"], "null"]})
    return out


def _strip_titles(node: Any) -> Any:
    """Drop the generated per-field `title`s ("Run Id"): names and descriptions already say it."""
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    # A string under "title" is the keyword; a property named "title" would hold a dict and stays.
    return {k: _strip_titles(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}


_LEFT_OUT: Schema = {"type": "object", "additionalProperties": {"type": "integer"}}


@cache
def data_schema(model: Any) -> Schema:
    """The JSON Schema of one tool's `data`, inlined. Every result may say what it leaves out (`left_out`,
    egress/fit.py), so every object branch allows it."""
    schema: Schema = _compact(_strip_titles(inline_refs(TypeAdapter(model).json_schema())))
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") == "object":
            branch.setdefault("properties", {}).setdefault("left_out", _LEFT_OUT)
    return schema


@cache
def error_schema() -> Schema:
    """The refusal, compact: the codes and what to do for each are in the skill's decision table."""
    return {
        "type": "object",
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "retryable": {"type": "boolean"},
                       "gate": {"type": ["string", "null"]}, "details": {"type": ["object", "null"]}},
        "required": ["code", "message", "retryable", "gate"],
    }


def portable(node: Any) -> Any:
    """The same schema with every `const` written as a one-value `enum`.

    Both mean the same in draft-07 and 2020-12; Gemini's schema subset has `enum` but no `const`.
    """
    if isinstance(node, list):
        return [portable(item) for item in node]
    if not isinstance(node, dict):
        return node
    # A dict under "const" would be a property of that name (a schema), not the keyword: kept as is.
    keyword = "const" in node and not isinstance(node["const"], dict)
    out = {k: portable(v) for k, v in node.items() if not (keyword and k == "const")}
    if keyword:
        out["enum"] = [node["const"]]
    return out


def envelope_schema(tool: str, data_model: Any) -> Schema:
    """The tool's `outputSchema`: the envelope with this tool's typed `data`."""
    schema: Schema = {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "live_api_contacted": {"type": "boolean"},
            "notice": {"type": "string"},
            "data": copy.deepcopy(data_schema(data_model)),
            "error": copy.deepcopy(error_schema()),
        },
        "required": ["ok", "live_api_contacted", "notice"],
        "additionalProperties": False,
        # ok: true comes with data, ok: false with error
        "anyOf": [{"properties": {"ok": {"enum": [True]}, "error": {"type": "null"}}, "required": ["data"]},
                  {"properties": {"ok": {"enum": [False]}, "data": {"type": "null"}}, "required": ["error"]}],
    }
    result: Schema = portable(schema)
    return result
