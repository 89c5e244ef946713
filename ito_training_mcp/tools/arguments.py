"""The published argument schemas: exactly what gate 0 (`inputs.py`) accepts, in portable JSON Schema.

Each builder mirrors one rule of gate 0, so a client that validates arguments against the
schema and the server agree on every call (tests/test_input_schemas_match_gate0.py checks this
both ways, property-based). What no schema can say is left to the server: whether a value
*looks like a credential*. An "integer" is a JSON number with no fractional part in both: `5.0`
is accepted as `5` by gate 0 as by JSON Schema (never a boolean, never `5.5`).

Portability rules, from what mainstream clients do with a tool's `inputSchema`:

- Only `type`, `properties`, `required`, `enum`, `pattern`, `minLength`/`maxLength`,
  `minimum`/`maximum`, `description` and `additionalProperties`, and an `anyOf` with `null` for an
  optional value: the subset every provider's function calling and Ajv's strict mode accept. A rule
  between arguments (exactly one of `run_id` / `idempotency_key`) is gate 0's, stated in the
  arguments' descriptions and refused with INVALID_INPUT.
- Patterns avoid lookaround and use only ASCII classes, so ECMA-262, RE2 and Python engines
  read them alike. `$` means end of string (ECMA-262), as JSON Schema specifies.

An optional argument also accepts `null`, because gate 0 treats `null` as "not given".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ito_training_mcp.gates.inputs import KEY_PATTERN, MAX_LOG_LIMIT, MAX_WAIT_SECONDS

Schema = dict[str, Any]

_ID_CHARS = "[A-Za-z0-9._:-]"
_NOT_DOT = "[A-Za-z0-9_:-]"
# 1-128 characters of [A-Za-z0-9._:-], at least one of them not a dot (".." is no id), no lookahead.
ID_SCHEMA_PATTERN = f"^{_ID_CHARS}*{_NOT_DOT}{_ID_CHARS}*$"
# The same, or empty: an empty confirmation reference is a well-formed "not confirmed yet".
OPTIONAL_REF_PATTERN = f"^({_ID_CHARS}*{_NOT_DOT}{_ID_CHARS}*)?$"
CURSOR_PATTERN = "^[A-Za-z0-9._:=-]*$"
MAX_ID_CHARS = 128
MAX_CURSOR_CHARS = 512


def _nullable(schema: Schema, description: str) -> Schema:
    return {"anyOf": [schema, {"type": "null"}], "description": description}


def identifier(description: str, *, optional: bool = False) -> Schema:
    """A booking id, run id: 1-128 chars of [A-Za-z0-9._:-], not only dots."""
    schema: Schema = {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS, "pattern": ID_SCHEMA_PATTERN}
    return _nullable(schema, description) if optional else {**schema, "description": description}


def idempotency_key(description: str, *, optional: bool = False) -> Schema:
    """16-255 chars of [A-Za-z0-9._:-]."""
    schema: Schema = {"type": "string", "minLength": 16, "maxLength": 255, "pattern": KEY_PATTERN}
    return _nullable(schema, description) if optional else {**schema, "description": description}


def confirmation_ref(description: str) -> Schema:
    """Optional: absent, null and "" all mean "the person has not confirmed yet" (CONFIRMATION_REQUIRED)."""
    return _nullable({"type": "string", "maxLength": MAX_ID_CHARS, "pattern": OPTIONAL_REF_PATTERN}, description)


def manifest_path(description: str) -> Schema:
    """Gate 0 checks only the type; the manifest gate checks the path itself (MANIFEST_PATH_INVALID)."""
    return {"type": "string", "minLength": 1, "description": description}


def bounded_integer(description: str, *, low: int, high: int) -> Schema:
    return _nullable({"type": "integer", "minimum": low, "maximum": high}, description)


def cursor(description: str) -> Schema:
    return _nullable({"type": "string", "maxLength": MAX_CURSOR_CHARS, "pattern": CURSOR_PATTERN}, description)


def one_of_strings(values: tuple[str, ...], description: str) -> Schema:
    """A closed set of strings, e.g. an action name."""
    return {"type": "string", "enum": list(values), "description": description}


def wait_seconds(description: str) -> Schema:
    return bounded_integer(description, low=0, high=MAX_WAIT_SECONDS)


def log_limit(description: str) -> Schema:
    return bounded_integer(description, low=1, high=MAX_LOG_LIMIT)


@dataclass(frozen=True)
class Arguments:
    """A tool's arguments: one JSON Schema per argument, which are required, and at most one "exactly one
    of" group (non-null values; gate 0 enforces it, the descriptions say it)."""

    properties: Mapping[str, Schema]
    required: tuple[str, ...] = ()
    exactly_one_of: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = set(self.properties)
        if not set(self.required) <= names or not set(self.exactly_one_of) <= names:
            raise ValueError("required and exactly_one_of must name declared arguments")
        if self.exactly_one_of and len(self.exactly_one_of) < 2:
            raise ValueError("exactly_one_of needs at least two arguments")

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.properties)

    def schema(self, title: str) -> Schema:
        schema: Schema = {
            "type": "object",
            "properties": {name: dict(prop) for name, prop in self.properties.items()},
            "additionalProperties": False,
        }
        if self.required:
            schema["required"] = list(self.required)
        return schema
