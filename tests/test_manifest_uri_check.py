"""The manifest's URI rule gives exactly the verdict, error type and message of the published pattern
(which pydantic used to apply itself) on ASCII strings, generated and edge-case; a URI with any other
character is refused by both, the rule naming its own problem (`uri_not_ascii`): no look-alike letter
and nothing invisible can stand in a URI the person reviews. The rule runs with the whole manifest
(`manifest_values`), so each value is tried where a manifest holds it."""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter, ValidationError

from ito_training_mcp.gates.manifest import schema as manifest
from ito_training_mcp.gates.manifest import values as manifest_values

from .conftest import EXAMPLE_MANIFEST

PATTERN = TypeAdapter(Annotated[str, Field(min_length=6, max_length=2048, pattern=manifest_values.URI_PATTERN)])
EXAMPLE = json.loads(EXAMPLE_MANIFEST.read_bytes())


PLACES = (("data", 0, "uri"), ("data", 0, "decontamination", "report"), ("checkpoints", "storage"))


def in_manifest(value: str) -> Any:
    """The verdict on one URI as a manifest gives it: the same at each of the three places a URI goes,
    and nothing anywhere else."""
    verdicts = []
    for place in PLACES:
        document = copy.deepcopy(EXAMPLE)
        holder: Any = document
        for key in place[:-1]:
            holder = holder[key]
        holder[place[-1]] = value
        errors: list[Any] = []
        try:
            manifest.TrainingManifest.model_validate(document, strict=True)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
        assert all(e["loc"] == place for e in errors), errors
        verdicts.append([(e["type"], e["msg"]) for e in errors] or "ok")
    assert all(v == verdicts[0] for v in verdicts), verdicts
    return verdicts[0]


CHECK = in_manifest


def verdict(check: Any, value: str) -> Any:
    if check is CHECK:
        return in_manifest(value)
    try:
        check.validate_python(value, strict=True)
    except ValidationError as exc:
        return [(e["type"], e["msg"]) for e in exc.errors(include_url=False, include_input=False, include_context=False)]
    return "ok"


schemes = st.sampled_from(["s3://", "gs://", "az://", "hf://", "https://", "ito://", "http://", "S3://", "s3:/", "https", "ito", ""])
tails = st.text(st.one_of(st.characters(), st.sampled_from(list("\t\n\x0b\x0c\r ?#@/:\x1c\x85\xa0\u2003\u3000\u2028"))),
                max_size=40)


@settings(max_examples=200, deadline=None)
@given(schemes, tails)
def test_same_verdict_as_the_pattern(scheme: str, tail: str) -> None:
    value = scheme + tail
    if value.isascii() or len(value) < 6 or len(value) > 2048:
        assert verdict(CHECK, value) == verdict(PATTERN, value)
    elif any(0xD800 <= ord(c) <= 0xDFFF for c in value):  # not text at all: both refuse it as such
        assert verdict(CHECK, value) == verdict(PATTERN, value) != "ok"
    else:
        assert verdict(CHECK, value) == [(manifest.URI_NOT_ASCII, NOT_ASCII)]
        assert verdict(PATTERN, value) != "ok"


NOT_ASCII = "A URI must be ASCII: an internationalised host name in its xn-- form, any other character percent-encoded"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["s3://", "https://", "hf://"]), st.text(max_size=20), st.characters(min_codepoint=0x80),
       st.text(max_size=20))
def test_no_uri_holds_a_character_outside_ascii(scheme: str, before: str, other: str, after: str) -> None:
    """Confusables (Cyrillic о for Latin o) and invisible characters alike: any non-ASCII character."""
    assert verdict(CHECK, scheme + "acme" + before + other + after) != "ok"


def test_a_look_alike_bucket_is_refused_and_its_ascii_twin_accepted() -> None:
    assert verdict(CHECK, "s3://acme-ml-checkpoints/atlas-8b-support/") == "ok"
    assert verdict(CHECK, "s3://acme-ml-checkp\u043eints/atlas-8b-support/") == [(manifest.URI_NOT_ASCII, NOT_ASCII)]
    assert verdict(CHECK, "https://xn--hggingface-8ib.co/x") == "ok"  # an IDN in its xn-- form is ASCII


def test_same_verdict_at_the_length_limits() -> None:
    for value in ["s3://", "s3://a", "ito://" + "a" * 2042, "ito://" + "a" * 2043, "https://", "https:///"]:
        assert verdict(CHECK, value) == verdict(PATTERN, value), value
