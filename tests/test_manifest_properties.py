"""Property tests for gate 2: whatever the bytes, the digest answers with an envelope that
echoes nothing it read; every valid manifest digests to the SHA-256 of its exact bytes; and the
strict JSON parser fails only in its own, content-free way.

Runs are derandomised (the same examples every run) so the suite stays deterministic.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from decimal import Decimal
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ito_training_mcp import scanner
from ito_training_mcp.envelope import Envelope
from ito_training_mcp.gates.manifest import strict_json
from ito_training_mcp.service import TrainingService

from .conftest import EXAMPLE_MANIFEST

EXAMPLE_BYTES = EXAMPLE_MANIFEST.read_bytes()
EXAMPLE_DOC: dict[str, Any] = json.loads(EXAMPLE_BYTES)

# '/' and '~' are escaped in every JSON pointer the server reports ('~1', '~0'), so even if a
# mutation turned this text into an object key it could not reappear verbatim in a pointer.
# It can only appear in the envelope if some value read from the file were echoed.
MARKER = "~/ZQXpropMarker7f31c9/~"
MARKED_DOC = {**EXAMPLE_DOC, "description": f"reviewed {MARKER} plan"}
MARKED_BYTES = json.dumps(MARKED_DOC, indent=2).encode()

_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@contextmanager
def private_file(content: bytes) -> Iterator[str]:
    d = tempfile.mkdtemp()
    os.chmod(d, 0o700)
    try:
        path = Path(d) / "manifest.json"
        path.write_bytes(content)
        os.chmod(path, 0o600)
        yield str(path)
    finally:
        shutil.rmtree(d, ignore_errors=True)


async def digest_bytes(content: bytes) -> Envelope:
    with private_file(content) as path:
        return await TrainingService({}).digest_manifest(path)


def assert_well_formed(env: Envelope) -> dict[str, Any]:
    assert isinstance(env, Envelope)
    assert env.live_api_contacted is False
    wire = json.loads(env.to_json())
    assert wire["ok"] is env.ok
    assert ("data" in wire) is env.ok
    assert ("error" in wire) is (not env.ok)
    env.to_json().encode("utf-8")
    if not env.ok:
        assert env.error is not None
        assert env.error.code.value.startswith("MANIFEST_"), env.to_json()
        assert env.error.gate is not None
        assert env.error.gate.value == "manifest"
    return dict(wire)


# ---------------------------------------------------------------------------- (1) arbitrary bytes


@st.composite
def mutations(draw: st.DrawFn, base: bytes = MARKED_BYTES) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "duplicate"]))
        if not data:
            data.extend(draw(st.binary(min_size=1, max_size=8)))
            continue
        at = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[at] = draw(st.sampled_from(b'{}[]",:\\0-1e.nNtfu \n\x00\xff\xc3'))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 32))]
        elif op == "truncate":
            del data[at:]
        else:
            length = draw(st.integers(1, 64))
            data[at:at] = data[at:at + length]
    return bytes(data)


arbitrary_inputs = st.one_of(
    st.binary(max_size=4096),
    st.tuples(st.binary(max_size=256), st.binary(max_size=256)).map(
        lambda parts: parts[0] + MARKER.encode() + parts[1]
    ),
    mutations(),
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(content=arbitrary_inputs)
async def test_any_bytes_give_an_envelope_that_echoes_nothing(content: bytes) -> None:
    env = await digest_bytes(content)
    assert_well_formed(env)
    if not env.ok:
        assert env.error is not None
        wire = env.to_json()
        wire_ascii = json.dumps(env.to_dict())
        assert MARKER not in wire
        assert MARKER not in wire_ascii
        assert "ZQXpropMarker7f31c9" not in env.error.message


@settings(max_examples=50, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(content=mutations())
async def test_digest_is_deterministic(content: bytes) -> None:
    """The same bytes always give the same answer (no state carried between calls)."""
    first = await digest_bytes(content)
    second = await digest_bytes(content)
    a, b = first.to_dict(), second.to_dict()
    if first.ok:
        a["data"].pop("path")
        b["data"].pop("path")
    assert a == b


# ---------------------------------------------------------------------------- (2) valid manifests digest


_SAFE_LABEL = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.", min_size=1, max_size=24)
_STEPS = ["sft", "dpo", "rlvr"]


def _money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


@st.composite
def valid_documents(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(EXAMPLE_DOC)
    org, name = draw(_SAFE_LABEL), draw(_SAFE_LABEL)
    doc["model"]["name"] = f"{org}/{name}"
    doc["model"]["parameter_count"] = draw(st.integers(1, 10**14))
    doc["model"]["revision"] = draw(st.sampled_from([
        "4e1c9a2f7b3d5e8c0a6f1d2b9e7c4a3f5d8b0e6c", "sha256:" + "ab" * 32, "0123456789abcdef" * 4,
    ]))
    doc["target"] = draw(st.sampled_from(["pretrain", "continued_pretrain", "fine_tune", "rl"]))
    ceiling = draw(st.integers(1, 10_000_000_000))
    incremental = draw(st.integers(1, ceiling))
    doc["budget"] = {"ceiling_usd": _money(ceiling), "max_incremental_cost_usd": _money(incremental)}
    refs = []
    for i in range(draw(st.integers(1, 3))):
        ref = copy.deepcopy(EXAMPLE_DOC["data"][i % 2])
        ref["name"] = f"set-{i}-{draw(_SAFE_LABEL)}"
        refs.append(ref)
    doc["data"] = refs
    mask = draw(st.lists(st.booleans(), min_size=3, max_size=3))
    doc["post_training"] = [step for step, keep in zip(_STEPS, mask, strict=True) if keep]
    doc["checkpoints"]["interval_steps"] = draw(st.integers(1, 10**9))
    doc["checkpoints"]["retain_last"] = draw(st.integers(1, 1000))
    if draw(st.booleans()):
        del doc["description"]
    for text in (doc["model"]["name"], *(r["name"] for r in refs)):
        assume(not scanner.text_kinds(text))
    return doc


@st.composite
def encodings(draw: st.DrawFn, doc: dict[str, Any] | None = None) -> bytes:
    document = draw(valid_documents()) if doc is None else doc
    indent = draw(st.sampled_from([None, 0, 1, 2, 4, "\t"]))
    separators = draw(st.sampled_from([None, (",", ":"), (", ", ": "), (" ,", " : ")]))
    text = json.dumps(document, indent=indent, separators=separators, sort_keys=draw(st.booleans()),
                      ensure_ascii=draw(st.booleans()))
    text = draw(st.sampled_from(["", "\n", " \t\r\n"])) + text + draw(st.sampled_from(["", "\n", "\r\n  "]))
    return text.encode()


@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(content=encodings())
async def test_valid_manifests_digest_to_the_sha256_of_their_bytes(content: bytes) -> None:
    with private_file(content) as path:
        env = await TrainingService({}).digest_manifest(path)
        assert_well_formed(env)
        assert env.ok is True, env.to_json()
        assert env.data is not None
        assert env.data["path"] == path
    assert env.data["sha256"] == hashlib.sha256(content).hexdigest()
    assert env.data["size_bytes"] == len(content)
    document = json.loads(content)
    review = env.data["review"]
    assert review["model"]["name"] == document["model"]["name"]
    assert review["model"]["parameter_count"] == document["model"]["parameter_count"]
    assert review["budget"] == document["budget"]
    assert review["post_training"] == document["post_training"]
    assert [r["name"] for r in review["data"]] == [r["name"] for r in document["data"]]
    assert review["checkpoints"]["interval_steps"] == document["checkpoints"]["interval_steps"]
    assert env.data["sha256"] in env.data["review_text"]


@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(doc=valid_documents())
async def test_different_bytes_same_meaning_have_different_digests(doc: dict[str, Any]) -> None:
    """The digest is of the bytes, not of the parsed meaning: reformatting changes it."""
    compact = json.dumps(doc, separators=(",", ":")).encode()
    spaced = json.dumps(doc, indent=2).encode()
    first = await digest_bytes(compact)
    second = await digest_bytes(spaced)
    assert first.ok and second.ok
    assert first.data is not None
    assert second.data is not None
    assert first.data["review"] == second.data["review"]
    assert first.data["sha256"] != second.data["sha256"]


# ---------------------------------------------------------------------------- (3) strict_json


def _json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
    )
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
        max_leaves=30,
    )


_JSON_TOKENS = st.sampled_from(
    ["{", "}", "[", "]", ",", ":", '"', '"a"', "1", "-0", "1.5e3", "1E-7", "NaN", "-Infinity", "Infinity",
     "true", "null", "\\u0000", "\\ud800", "\\", " ", "\n", "\ufeff", "01", "1.", ".5", "9" * 18]
)

json_like_text = st.one_of(
    st.text(max_size=300),
    _json_values().map(json.dumps),
    st.lists(_JSON_TOKENS, max_size=60).map("".join),
    st.integers(0, 60).map(lambda n: "[" * n + "]" * n),
    st.integers(0, 60).map(lambda n: '{"k":' * n + "0" + "}" * n),
)


@settings(max_examples=500, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(text=json_like_text)
def test_strict_json_raises_only_its_own_error(text: str) -> None:
    raw = text.encode("utf-8", errors="surrogatepass")
    error: strict_json.StrictJSONError | None = None
    try:
        value = strict_json.loads(raw)
    except strict_json.StrictJSONError as exc:
        error = exc
    if error is not None:
        assert error.reason
        assert str(error) == error.reason
        return
    # Whatever it accepts, the standard parser reads the same way.
    assert value == json.loads(text, parse_float=Decimal)


@settings(max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(data=st.binary(max_size=512))
def test_strict_json_raises_only_its_own_error_for_bytes(data: bytes) -> None:
    with suppress(strict_json.StrictJSONError):
        strict_json.loads(data)


@settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(value=_json_values())
def test_strict_json_agrees_with_json_on_clean_documents(value: Any) -> None:
    text = json.dumps(value, allow_nan=True)
    clean = _finite(value) and _depth(value) <= strict_json.MAX_DEPTH
    try:
        parsed = strict_json.loads(text.encode("utf-8", errors="surrogatepass"))
    except strict_json.StrictJSONError:
        assert not clean, text
        return
    assert clean, text
    assert parsed == json.loads(text, parse_float=Decimal)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0
