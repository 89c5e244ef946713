"""The data-reference URI check gives exactly the verdict, error type and message of the published
pattern (which pydantic used to apply itself), on generated and edge-case strings."""

from __future__ import annotations

from typing import Annotated, Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter, ValidationError

from ito_training_mcp import manifest

PATTERN = TypeAdapter(Annotated[str, Field(min_length=6, max_length=2048, pattern=manifest._URI_PATTERN)])
CHECK = TypeAdapter(manifest.Uri)


def verdict(adapter: TypeAdapter[Any], value: str) -> Any:
    try:
        adapter.validate_python(value, strict=True)
    except ValidationError as exc:
        return [(e["type"], e["msg"]) for e in exc.errors(include_url=False, include_input=False, include_context=False)]
    return "ok"


schemes = st.sampled_from(["s3://", "gs://", "az://", "hf://", "https://", "ito://", "http://", "S3://", "s3:/", "https", "ito", ""])
tails = st.text(st.one_of(st.characters(), st.sampled_from(list("\t\n\x0b\x0c\r ?#@/:\x1c\x85\xa0\u2003\u3000\u2028"))),
                max_size=40)


@settings(max_examples=200, deadline=None)
@given(schemes, tails)
def test_same_verdict_as_the_pattern(scheme: str, tail: str) -> None:
    assert verdict(CHECK, scheme + tail) == verdict(PATTERN, scheme + tail)


def test_same_verdict_at_the_length_limits() -> None:
    for value in ["s3://", "s3://a", "ito://" + "a" * 2042, "ito://" + "a" * 2043, "https://", "https:///"]:
        assert verdict(CHECK, value) == verdict(PATTERN, value), value
