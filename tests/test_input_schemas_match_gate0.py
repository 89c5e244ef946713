"""Each tool's published inputSchema accepts exactly the argument objects gate 0 accepts.

"Accepts" means gate 0 does not answer INVALID_INPUT: CONFIRMATION_REQUIRED (no confirmation
reference yet) is gate 0's answer to a well-formed call, and a validating client must be able to
reach it. One thing no JSON Schema can say is left out, as documented in input_schemas.py: a
value that looks like a credential (gate 0 refuses it; the schema cannot tell). A float with an
integral value such as 5.0 is drawn like any other number: both take it as the integer 5.

Both directions, property-based: argument objects drawn from gate 0's rules (near-valid and
invalid values, unknown names, wrong types), and argument objects drawn from each schema. The
schemas are checked with ECMA-262 pattern semantics, as JSON Schema specifies (`$` is the end of
the string, not "before a final newline" as in Python's `re`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError, validators

from ito_training_mcp.service import TrainingService
from ito_training_mcp.tools.specs import ALL_TOOLS, TOOLS_BY_NAME, ToolSpec

COMPOSITION = {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$defs"}


def _python_pattern(pattern: str) -> str:
    """ECMA-262 `$` (no multiline) is Python's `\\Z`; our patterns use `$` only at the very end."""
    assert pattern.count("$") == 1 and pattern.endswith("$"), pattern
    return pattern[:-1] + r"\Z"


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not re.search(_python_pattern(pattern), instance):
        yield ValidationError("does not match the pattern")


EcmaValidator = validators.extend(Draft202012Validator, {"pattern": _ecma_pattern})


@functools.cache
def _validator(name: str) -> Any:
    spec = next(s for s in ALL_TOOLS if s.name == name)
    schema = spec.input_schema()
    Draft202012Validator.check_schema(schema)
    return EcmaValidator(schema)


def schema_accepts(spec: ToolSpec, arguments: dict[str, Any]) -> bool:
    """The schema, and the one rule between arguments that it states in words (exactly one of a group)."""
    group = spec.arguments.exactly_one_of
    one = not group or sum(arguments.get(name) is not None for name in group) == 1
    return one and bool(_validator(spec.name).is_valid(arguments))


def gate0(spec: ToolSpec, arguments: dict[str, Any]) -> str:
    """"accepted" unless gate 0 answers INVALID_INPUT: then "refused", or "credential" for a value that
    looks like one (no schema can tell)."""
    envelope = anyio.run(functools.partial(TrainingService({}).invoke, spec.name, arguments))
    if envelope.error is None or envelope.error.code.value != "INVALID_INPUT":
        return "accepted"
    assert envelope.error.gate is not None and envelope.error.gate.value == "input"
    return "credential" if (envelope.error.details or {}).get("problem") == "looks_like_credential" else "refused"


def gate0_accepts(spec: ToolSpec, arguments: dict[str, Any]) -> bool:
    """For property tests: credential-shaped draws are discarded."""
    outcome = gate0(spec, arguments)
    assume(outcome != "credential")
    return outcome == "accepted"


# ---------------------------------------------------------------------- drawn from the schema


def _from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A strategy for the JSON Schema subset input_schemas.py emits (the test fails on anything else)."""
    if "anyOf" in schema:
        return st.one_of(*(_from_schema(branch) for branch in schema["anyOf"]))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema["type"]
    if kind == "null":
        return st.none()
    if kind == "integer":
        whole = st.integers(min_value=schema.get("minimum"), max_value=schema.get("maximum"))
        return st.one_of(whole, whole.map(float))  # JSON Schema's integer includes 5.0
    if kind == "string":
        low, high = schema.get("minLength", 0), schema.get("maxLength", 10_000)
        if "pattern" in schema:
            base = st.from_regex(_python_pattern(schema["pattern"]), fullmatch=True)
        else:
            base = st.text(min_size=low, max_size=min(high, 64))
        return base.filter(lambda s: low <= len(s) <= high)
    if kind == "object":
        properties = schema["properties"]
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {name: _from_schema(properties[name]) for name in sorted(required)},
            optional={name: _from_schema(prop) for name, prop in sorted(properties.items()) if name not in required},
        )
    raise AssertionError(f"schema construct not covered by this generator: {schema}")


# ---------------------------------------------------------------------- drawn from gate 0's rules

_NEAR = "Aa09._:-="
_EDGES = ["", ".", "..", "....", "a", "a.", ".a", "a\n", "\na", "a b", "a/b", "a=b", "=", "é", "a\x00",
          "x" * 127, "x" * 128, "x" * 129, "k" * 15, "k" * 16, "k" * 255, "k" * 256, "." * 16, "." * 129,
          "c" * 512, "c" * 513, "c=" * 256, "/abs/manifest.json", "relative.json"]
_strings = st.one_of(
    st.sampled_from(_EDGES),
    st.text(alphabet=st.sampled_from(list(_NEAR)), max_size=300),
    st.text(alphabet=st.sampled_from(list(_NEAR + "/ \n\t\r\x00é")), max_size=40),
    st.text(max_size=12),
)
_values = st.one_of(
    _strings,  # half of the draws: strings near the id, key, ref and cursor rules
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-3, max_value=1003),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(min_value=-3, max_value=1003).map(float),  # 5.0: an integer to both
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    ),
)
_UNKNOWN = ["force", "api_key", "run", "token"]
_ODD = list(".=/ \n\t\r\x00é_:-")
_LENGTHS = [0, 1, 15, 16, 17, 127, 128, 129, 255, 256, 511, 512, 513]


def _bounds(schema: dict[str, Any]) -> list[int]:
    """The published length and value bounds of one argument, and their neighbours."""
    branches = schema.get("anyOf", [schema])
    found: list[int] = []
    for branch in branches:
        for key in ("minLength", "maxLength", "minimum", "maximum"):
            if key in branch:
                found += [branch[key] - 1, branch[key], branch[key] + 1]
    return found


@st.composite
def _tweaked(draw: st.DrawFn, value: Any, schema: dict[str, Any]) -> Any:
    """A value next to a well-formed one: a character inserted, all dots, a length or number at a bound."""
    bounds = _bounds(schema)
    if isinstance(value, int) and not isinstance(value, bool):
        return draw(st.sampled_from(bounds or [value]))
    if not isinstance(value, str) or not value:
        return draw(_values)
    how = draw(st.sampled_from(["insert", "dots", "length", "length"]))
    if how == "insert":
        at = draw(st.integers(0, len(value)))
        return value[:at] + draw(st.sampled_from(_ODD)) + value[at:]
    if how == "dots":
        return "." * len(value)
    length = draw(st.sampled_from([n for n in bounds + _LENGTHS if n >= 0]))
    return (value * (length // len(value) + 1))[:length]


@st.composite
def _rule_drawn_call(draw: st.DrawFn, spec: ToolSpec) -> dict[str, Any]:
    """A well-formed call with one or two changes: a value tweaked or replaced, an argument dropped or added."""
    arguments: dict[str, Any] = dict(draw(_from_schema(spec.input_schema())))
    names = sorted(spec.argument_names)
    properties = spec.input_schema()["properties"]
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["tweak", "tweak", "tweak", "set", "drop", "unknown"]))
        name = draw(st.sampled_from(_UNKNOWN if kind == "unknown" else names))
        if kind == "drop":
            arguments.pop(name, None)
        elif kind == "tweak":
            current = arguments[name] if arguments.get(name) is not None else draw(_from_schema(properties[name]))
            arguments[name] = draw(_tweaked(current, properties[name]))
        else:
            arguments[name] = draw(_values)
    return arguments


def _rule_drawn(spec: ToolSpec) -> st.SearchStrategy[dict[str, Any]]:
    return _rule_drawn_call(spec)


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda s: s.name)
def test_schema_and_gate0_agree_on_arguments_drawn_from_gate0_rules(spec: ToolSpec) -> None:
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_rule_drawn(spec))
    def agree(arguments: dict[str, Any]) -> None:
        assert schema_accepts(spec, arguments) == gate0_accepts(spec, arguments), arguments

    agree()


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda s: s.name)
def test_every_argument_object_the_schema_accepts_passes_gate0(spec: ToolSpec) -> None:
    schema = spec.input_schema()

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(_from_schema(schema))
    def accepted(arguments: dict[str, Any]) -> None:
        assume(schema_accepts(spec, arguments))  # cross-argument rules (exactly one of) are filtered here
        assert gate0_accepts(spec, arguments), arguments

    accepted()


# ---------------------------------------------------------------------- every boundary, one change at a time

_CANONICAL = {
    "booking_id": "bk_1", "run_id": "run_1", "manifest_path": "/srv/manifests/m.json", "confirmation_ref": "cf_1",
    "idempotency_key": "probe-key-00000001", "cursor": "c:1=", "limit": 10, "wait_seconds": 0,
    "action": "training.cancel", "request_id": "creq_1",
}
_JUNK: list[Any] = [None, "", True, False, 0, -1, 1.5, 0.0, -0.0, 1.0, -1.0, 1e300, float(2**70), 5e-324, [], {},
                    2**70, "a b", "a\n", "\n", "é", "a\x00", "=", "a=b",
                    ".", "..", "." * 16, "/", "a/b", "A" * 20]


def _probes(spec: ToolSpec) -> Iterator[dict[str, Any]]:
    properties = spec.input_schema()["properties"]
    missing = sorted(spec.argument_names - _CANONICAL.keys())
    assert not missing, f"add a well-formed value for {missing} to _CANONICAL in this test"
    base = {name: _CANONICAL[name] for name in sorted(spec.argument_names)}
    if spec.arguments.exactly_one_of:
        base.pop(spec.arguments.exactly_one_of[1])
    yield base
    yield {}
    for unknown in _UNKNOWN:
        yield {**base, unknown: "x"}
    for name, value in _CANONICAL.items():
        if name in spec.argument_names:
            yield {**base, name: value}  # e.g. both of an exactly-one-of pair
    for name in sorted(spec.argument_names):
        yield {k: v for k, v in base.items() if k != name}
        candidates: list[Any] = list(_JUNK)
        valid = _CANONICAL[name]
        for n in _bounds(properties[name]) + _LENGTHS:
            if isinstance(valid, str) and n >= 0:
                candidates.append((valid * (n // len(valid) + 1))[:n])
            elif isinstance(valid, int):
                candidates += [n, float(n), n + 0.5]
        if isinstance(valid, str):
            for odd in _ODD:
                candidates += [odd + valid, valid[:1] + odd + valid[1:], valid + odd]
        for candidate in candidates:
            yield {**base, name: candidate}


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda s: s.name)
def test_schema_and_gate0_agree_at_every_boundary(spec: ToolSpec) -> None:
    checked = 0
    for arguments in _probes(spec):
        outcome = gate0(spec, arguments)
        if outcome == "credential":
            continue
        assert schema_accepts(spec, arguments) == (outcome == "accepted"), arguments
        checked += 1
    assert checked > 50


# ---------------------------------------------------------------------- shape rules for portability


PLAIN = {"type", "properties", "required", "enum", "pattern", "minLength", "maxLength", "minimum", "maximum",
         "description", "additionalProperties", "anyOf", "title"}


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda s: s.name)
def test_every_input_schema_uses_plain_keywords_only(spec: ToolSpec) -> None:
    """Every provider's function calling and Ajv's strict mode accept these; `anyOf` only for an optional
    value (a type or null), never at the root."""
    schema = spec.input_schema()
    assert schema["type"] == "object" and not COMPOSITION & schema.keys()

    def walk(node: Any, root: bool = False) -> None:
        assert isinstance(node, dict) and set(node) <= PLAIN, node
        if "anyOf" in node:
            assert not root and len(node["anyOf"]) == 2 and {"type": "null"} in node["anyOf"], node
        for child in [*node.get("properties", {}).values(), *node.get("anyOf", [])]:
            walk(child)

    walk(schema, root=True)
    Draft202012Validator.check_schema(schema)


def test_exactly_one_of_run_id_or_idempotency_key_is_stated_and_enforced_by_gate0() -> None:
    status = next(s for s in ALL_TOOLS if s.name == "training_status")
    key = "status-key-0000000001"
    for arguments, valid in [
        ({}, False),
        ({"wait_seconds": 5}, False),
        ({"run_id": "run_1"}, True),
        ({"idempotency_key": key}, True),
        ({"run_id": "run_1", "idempotency_key": key}, False),
        ({"run_id": "run_1", "idempotency_key": None}, True),
        ({"run_id": None, "idempotency_key": None, "wait_seconds": 1}, False),
        ({"run_id": "..", "wait_seconds": 1}, False),
    ]:
        assert schema_accepts(status, arguments) is valid, arguments
        assert gate0(status, arguments) == ("accepted" if valid else "refused"), arguments
    for name in ("run_id", "idempotency_key"):
        assert "exactly one of run_id or idempotency_key" in status.input_schema()["properties"][name]["description"]


def test_request_confirmation_takes_only_cancel_or_cleanup() -> None:
    """Creation is confirmed through plan_training; the schema and gate 0 both refuse it here."""
    spec = next(s for s in ALL_TOOLS if s.name == "request_confirmation")
    for action, valid in [("training.cancel", True), ("training.cleanup", True), ("training.create", False),
                          ("Training.Cancel", False), ("training.cancel ", False), ("cancel", False), ("", False)]:
        arguments = {"action": action, "run_id": "run_1"}
        assert schema_accepts(spec, arguments) is valid, arguments
        assert gate0(spec, arguments) == ("accepted" if valid else "refused"), arguments


def test_the_builders_for_the_next_tools() -> None:
    """What a new ToolSpec is made of: declared arguments only, enums for closed sets, a root kept plain."""
    from ito_training_mcp.tools import arguments as arg

    with pytest.raises(ValueError, match="declared"):
        arg.Arguments(properties={"run_id": arg.identifier("r")}, required=("request_id",))
    with pytest.raises(ValueError, match="two"):
        arg.Arguments(properties={"run_id": arg.identifier("r")}, exactly_one_of=("run_id",))
    action = arg.Arguments(
        properties={"action": arg.one_of_strings(("training.cancel", "training.cleanup"), "a"),
                    "run_id": arg.identifier("r")},
        required=("action", "run_id"),
    ).schema("request_confirmationArguments")
    validator = EcmaValidator(action)
    assert validator.is_valid({"action": "training.cancel", "run_id": "run_1"})
    assert not validator.is_valid({"action": "training.create", "run_id": "run_1"})
    assert not COMPOSITION & action.keys()


@pytest.mark.parametrize(("tool", "argument", "value", "accepted"), [
    ("training_status", "wait_seconds", 5.0, True),
    ("training_status", "wait_seconds", 0.0, True),
    ("training_status", "wait_seconds", -0.0, True),
    ("training_logs", "limit", 50.0, True),
    ("training_status", "wait_seconds", 5.5, False),
    ("training_logs", "limit", 1e300, False),
    ("training_logs", "limit", 0.0, False),
    ("training_logs", "limit", True, False),
])
def test_a_whole_float_is_the_integer_to_schema_and_gate0_alike(tool: str, argument: str, value: Any,
                                                                  accepted: bool) -> None:
    """The finding: JSON Schema's "integer" admits 5.0, and gate 0 used to refuse it ("type")."""
    arguments = {"run_id": "r1", argument: value}
    assert Draft202012Validator(TOOLS_BY_NAME[tool].input_schema()).is_valid(arguments) == accepted
    env = anyio.run(TrainingService({}).invoke, tool, arguments)
    refused_here = env.error is not None and env.error.code.value == "INVALID_INPUT"
    assert refused_here != accepted, env.to_json()
