"""A suite-wide guard: every envelope any test gets from the core validates against the outputSchema
its tool publishes.

Loaded from conftest.py. It wraps the core's tool methods and `invoke` (both doors reach the core
through them), records each envelope that does not validate, and fails the test that produced it,
naming the tool and the first violation. Over MCP the client validates successful results itself;
this also covers refusals, the CLI and direct calls.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.protocols import Validator

from ito_training_mcp.envelope import Envelope
from ito_training_mcp.service import TrainingService
from ito_training_mcp.tools.specs import TOOLS_BY_NAME

violations: list[str] = []


@functools.cache
def validators(tool: str) -> tuple[Validator, ...]:
    """The tool's outputSchema under draft-07 and 2020-12: clients compile it with either."""
    schema = TOOLS_BY_NAME[tool].output_schema()
    Draft7Validator.check_schema(schema)
    Draft202012Validator.check_schema(schema)
    return Draft7Validator(schema), Draft202012Validator(schema)


def problems(tool: str, envelope: Envelope) -> list[str]:
    """Each way this envelope breaks its tool's outputSchema (none for a tool that is not listed)."""
    if tool not in TOOLS_BY_NAME:
        return []
    found: list[str] = []
    for validator in validators(tool):
        errors = sorted(validator.iter_errors(envelope.to_dict()), key=lambda e: list(e.absolute_path))
        found += [f"{tool} ({type(validator).__name__}) at /{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
                  for e in errors]
    return found


def _checked(tool: str, method: Callable[..., Awaitable[Envelope]]) -> Callable[..., Awaitable[Envelope]]:
    @functools.wraps(method)
    async def wrapped(*args: Any, **kwargs: Any) -> Envelope:
        envelope = await method(*args, **kwargs)
        violations.extend(problems(tool, envelope))
        return envelope

    return wrapped


@pytest.fixture(scope="session", autouse=True)
def _guard_every_envelope() -> Iterator[None]:
    patch = pytest.MonkeyPatch()
    for name in TOOLS_BY_NAME:
        if hasattr(TrainingService, name):
            patch.setattr(TrainingService, name, _checked(name, getattr(TrainingService, name)))
    invoke = TrainingService.invoke

    @functools.wraps(invoke)
    async def checked_invoke(self: TrainingService, tool: str, arguments: Any, **kwargs: Any) -> Envelope:
        envelope = await invoke(self, tool, arguments, **kwargs)
        violations.extend(problems(tool, envelope))
        return envelope

    patch.setattr(TrainingService, "invoke", checked_invoke)
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _no_envelope_breaks_its_schema() -> Iterator[None]:
    start = len(violations)
    yield
    found = violations[start:]
    assert not found, "envelopes that break their tool's outputSchema:\n" + "\n".join(dict.fromkeys(found))
