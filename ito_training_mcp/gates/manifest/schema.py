"""The reviewed training manifest, `ito.training.manifest.v1`: its models, its JSON Schema and its parse.

The pydantic models are the one source of the schema: `manifest_json_schema()` is what the repository file
`schemas/ito.training.manifest.v1.schema.json` and the MCP resource publish (a test keeps them equal). The
models are strict (no coercion), closed (unknown keys refused) and carry money as `Decimal` parsed from
decimal strings, never floats.

`parse_manifest` is gate 2 after the read: strict JSON -> secret scan -> character rule -> schema. Refusals
name JSON pointers and fixed problems, never file content.
"""

from __future__ import annotations

import difflib
import json
import re
from datetime import date
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ito_training_mcp.egress import redact
from ito_training_mcp.envelope import ErrorCode
from ito_training_mcp.errors import ManifestRefusal
from ito_training_mcp.gates.manifest import strict_json
from ito_training_mcp.gates.manifest.characters import character_problems, strings_of
from ito_training_mcp.scanner import Finding, pointer, scan_document

SCHEMA_VERSION = "ito.training.manifest.v1"
SCHEMA_ID = "https://ito.example/schemas/ito.training.manifest.v1.schema.json"
MAX_SCHEMA_PROBLEMS = 20
MASK = "*"  # a key a pointer does not show

# ---------------------------------------------------------------------------- value types

URI_SCHEMES = ("s3", "gs", "az", "hf", "https", "ito")
# Printable ASCII after the scheme, but for space, `?`, `#` and `@`: the URI the person reads is the URI
# used, with no look-alike letter from another script and nothing invisible; no credentials, query or
# fragment.
URI_PATTERN = r"^(s3|gs|az|hf|https|ito)://[\x21\x22\x24-\x3e\x41-\x7e]+$"
_URI = re.compile(URI_PATTERN)
URI_NOT_ASCII = "uri_not_ascii"
REVISION_PATTERN = r"^([0-9a-f]{40}|[0-9a-f]{64}|sha256:[0-9a-f]{64})$"
# A label (a model, dataset, method or eval-suite name) is words separated by single spaces: no space at
# either end, no run of spaces, no other kind of space. Padding could push its text to where the review's
# own lines are.
_SPACES = "\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000"
LABEL_PATTERN = f"^[^{_SPACES}]+(?: [^{_SPACES}]+)*$"
WHITESPACE = "whitespace"  # the problem of a label that misses LABEL_PATTERN
DATA_MAX = 256
MONEY_MAX = Decimal("100000000.00")
_MONEY_PATTERN = r"^(0|[1-9][0-9]{0,8})(\.[0-9]{1,2})?$"
_MONEY = re.compile(_MONEY_PATTERN)


def _money(value: object) -> Decimal:
    if not isinstance(value, str):
        raise ValueError('money must be a decimal string such as "1500.00", not a JSON number')
    if not _MONEY.fullmatch(value):
        raise ValueError('money must be a non-negative decimal string with at most two decimals, e.g. "1500.00"')
    try:
        amount = Decimal(value)
    except InvalidOperation:  # pragma: no cover - the pattern already guarantees a decimal
        raise ValueError("money must be a decimal string") from None
    if amount <= 0:
        raise ValueError("money must be greater than zero")
    if amount > MONEY_MAX:
        raise ValueError("money exceeds the maximum this schema accepts")
    return amount


def _uri(value: str) -> str:
    if not value.isascii():
        raise PydanticCustomError(URI_NOT_ASCII, "A URI must be ASCII: an internationalised host name in its xn-- "
                                                 "form, any other character percent-encoded")
    if not _URI.match(value) or value.endswith("://"):
        raise PydanticCustomError("uri", "must be a URI with a scheme of " + ", ".join(URI_SCHEMES) +
                                  ", printable ASCII, and no space, credentials, query or fragment")
    return value


def _real_date(value: str) -> str:
    try:
        date.fromisoformat(value)
    except ValueError:
        raise ValueError("must be a real calendar date") from None
    return value


Money = Annotated[
    Decimal,
    BeforeValidator(_money),
    PlainSerializer(lambda d: f"{d:.2f}", return_type=str),
    WithJsonSchema({"type": "string", "pattern": _MONEY_PATTERN, "description": 'Decimal USD, e.g. "1500.00".'}),
]
Uri = Annotated[
    str,
    Field(min_length=6, max_length=2048, json_schema_extra={"pattern": URI_PATTERN},
          description=f"A stable location: scheme one of {', '.join(URI_SCHEMES)}; printable ASCII only "
                      "(internationalised host names in their xn-- form); no credentials, query string or "
                      "fragment."),
    AfterValidator(_uri),
]
Label = Annotated[str, Field(min_length=1, max_length=200, pattern=LABEL_PATTERN)]
IsoDate = Annotated[str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", json_schema_extra={"format": "date"}),
                    AfterValidator(_real_date)]
Revision = Annotated[str, Field(pattern=REVISION_PATTERN)]

# ---------------------------------------------------------------------------- the models


class TrainingTarget(StrEnum):
    PRETRAIN = "pretrain"
    CONTINUED_PRETRAIN = "continued_pretrain"
    FINE_TUNE = "fine_tune"
    RL = "rl"


class PostTrainingStep(StrEnum):
    SFT = "sft"
    DPO = "dpo"
    RLVR = "rlvr"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Model(_Strict):
    name: Label = Field(description="Model name, e.g. an organisation/model identifier.")
    parameter_count: int = Field(gt=0, le=10**14, description="Model size as a parameter count.")
    revision: Revision = Field(description="Immutable revision: a full 40- or 64-hex commit id or sha256:<64 hex>. "
                                           "Branch names and tags such as 'main' or 'latest' are refused.")


class Decontamination(_Strict):
    method: Label = Field(description="How the data was decontaminated, e.g. '13-gram overlap'.")
    eval_suites: list[Label] = Field(min_length=1, max_length=100, description="Eval suites the data was checked "
                                                                               "against.")
    report: Uri = Field(description="Where the decontamination report lives.")
    checked_at: IsoDate = Field(description="Date of the decontamination check (YYYY-MM-DD).")


class DataRef(_Strict):
    name: Label = Field(description="Short name of the dataset for the reviewer.")
    uri: Uri
    revision: Revision | None = Field(default=None, description="Immutable dataset revision, if versioned.")
    decontamination: Decontamination


class Budget(_Strict):
    ceiling_usd: Money = Field(description="Hard ceiling for the whole run, in USD.")
    max_incremental_cost_usd: Money = Field(
        description="The most this submission may add to spend, in USD; at most the ceiling. "
                    "The confirmation's max_cost_usd must cover it."
    )

    @model_validator(mode="after")
    def _incremental_within_ceiling(self) -> Budget:
        if self.max_incremental_cost_usd > self.ceiling_usd:
            raise ValueError("max_incremental_cost_usd must not exceed ceiling_usd")
        return self


class CheckpointPolicy(_Strict):
    interval_steps: int = Field(gt=0, le=10**9, description="Save a checkpoint every N optimizer steps.")
    retain_last: int = Field(gt=0, le=1000, description="How many recent checkpoints to keep.")
    storage: Uri = Field(description="Where checkpoints are written.")


class TrainingManifest(_Strict):
    """ito.training.manifest.v1: everything a person must see before confirming a training run."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        title="ito.training.manifest.v1",
        json_schema_extra={"$id": SCHEMA_ID, "$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    schema_version: Literal["ito.training.manifest.v1"]
    description: str | None = Field(default=None, max_length=2000, description="Free text for the reviewer.")
    model: Model
    target: TrainingTarget = Field(description="pretrain, continued_pretrain, fine_tune or rl.")
    data: list[DataRef] = Field(min_length=1, max_length=DATA_MAX)
    post_training: list[PostTrainingStep] = Field(
        max_length=3, description="Ordered post-training steps from sft, dpo, rlvr; [] for none."
    )
    budget: Budget
    checkpoints: CheckpointPolicy

    @field_validator("post_training")
    @classmethod
    def _steps_unique(cls, steps: list[PostTrainingStep]) -> list[PostTrainingStep]:
        if len(set(steps)) != len(steps):
            raise ValueError("each post-training step may appear once")
        return steps

    @field_validator("target", mode="before")
    @classmethod
    def _target_from_string(cls, value: object) -> object:
        if isinstance(value, str):  # strict mode refuses a str for an enum; the JSON form is the string
            try:
                return TrainingTarget(value)
            except ValueError:
                raise ValueError("must be one of pretrain, continued_pretrain, fine_tune, rl") from None
        return value

    @field_validator("post_training", mode="before")
    @classmethod
    def _steps_from_strings(cls, value: object) -> object:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            try:
                return [PostTrainingStep(v) for v in value]
            except ValueError:
                raise ValueError("each step must be one of sft, dpo, rlvr") from None
        return value


def manifest_json_schema() -> dict[str, Any]:
    """The published JSON Schema, generated from the models (validation mode)."""
    schema = TrainingManifest.model_json_schema(mode="validation")
    schema["additionalProperties"] = False
    return schema


# ---------------------------------------------------------------------------- the parse

# The models at each place of a manifest, for "did you mean" on an unknown key.
_NESTED: dict[type[BaseModel], dict[str, type[BaseModel]]] = {
    TrainingManifest: {"model": Model, "data": DataRef, "budget": Budget, "checkpoints": CheckpointPolicy},
    DataRef: {"decontamination": Decontamination},
}
# Fixed words for pydantic's errors whose own message would name a pattern or a class.
_PROBLEMS = {
    "missing": "required",
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "list_type": "must be a list",
    "model_type": "must be an object",
    "dict_type": "must be an object",
    "model_attributes_type": "must be an object",
    "string_too_short": "must not be empty",
    "too_short": "must not be empty",
}


def parse_manifest(content: bytes) -> TrainingManifest:
    """Strict JSON -> secret scan -> character rule -> schema, or raise `ManifestRefusal`.

    The nesting limit of strict JSON is checked before any refusal is raised, not on the way: a document
    the closed schema accepts nests five levels at most, so only a document refused for something else
    can be too deep, and then that is what it is refused for."""
    try:
        text = strict_json.decode(content)
        document = strict_json.loads_text(text, check_depth=False)
    except strict_json.StrictJSONError as exc:
        raise _invalid_json(exc.reason) from None

    def refuse(code: ErrorCode, message: str, check: str, details: dict[str, Any]) -> ManifestRefusal:
        if strict_json.too_deep(text):
            return _invalid_json(f"nesting is deeper than {strict_json.MAX_DEPTH} levels")
        refusal = ManifestRefusal(code, message, check=check, details=details)
        return refusal if _claims_to_be_a_manifest(document) else _keys_withheld(refusal)

    findings = scan_document(document, source=content) + configured_credentials(document, text)
    if findings:
        raise refuse(ErrorCode.MANIFEST_SECRET,
                     f"The manifest contains {len(findings)} value(s) that look like credentials; see "
                     "details.findings for where. The values are not shown.",
                     "secret_scan", {"findings": [f.as_dict() for f in findings]})
    characters = character_problems(document, content)
    if characters:
        classes = ", ".join(sorted({p["problem"] for p in characters}))
        raise refuse(ErrorCode.MANIFEST_SCHEMA,
                     f"The manifest contains characters that could make a reviewer see something other than what "
                     f"is submitted ({classes}); see details.problems for where. They are not shown.",
                     "schema", {"problems": characters})
    if not isinstance(document, dict):
        raise refuse(ErrorCode.MANIFEST_SCHEMA, "The manifest must be a JSON object.", "schema",
                     {"problems": [{"pointer": "", "problem": "must be an object"}]})
    try:
        return TrainingManifest.model_validate(document, strict=True)
    except ValidationError as exc:
        problems = [_problem(error) for error in exc.errors(include_url=False, include_input=False)]
        raise refuse(ErrorCode.MANIFEST_SCHEMA,
                     f"The manifest does not match {SCHEMA_VERSION} ({len(problems)} problem(s); see "
                     "details.problems).", "schema", {"problems": problems[:MAX_SCHEMA_PROBLEMS]}) from None


def configured_credentials(document: Any, text: str) -> list[Finding]:
    """Where the document holds a credential this process knows (`ITO_API_KEY`, or one it resolved): such a
    value has no shape the scanner could know, and no review may carry it."""
    known = redact.known_secrets()
    if not known or not (redact.holds_known(text, known) or ("\\" in text and redact.holds_known(
            json.dumps(document, ensure_ascii=False), known))):
        return []
    return [Finding(pointer(path), "configured_credential", in_key=path[-1] == string if path else False)
            for path, string in strings_of(document) if redact.holds_known(string, known)][:MAX_SCHEMA_PROBLEMS]


def _invalid_json(reason: str) -> ManifestRefusal:
    return ManifestRefusal(ErrorCode.MANIFEST_INVALID_JSON, f"The manifest is not strict JSON: {reason}.",
                           check="json")


def _problem(error: Any) -> dict[str, str]:
    """One schema problem: where (keys masked as in every manifest refusal) and what, in fixed words."""
    location: tuple[str | int, ...] = tuple(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        message = "unknown key" + _did_you_mean(location)
    elif kind == "string_pattern_mismatch":
        message = "must be an immutable revision: 40 or 64 hex digits, or sha256: and 64" if (
            location and location[-1] == "revision") else (
            "must be a date in YYYY-MM-DD form" if location and location[-1] == "checked_at" else WHITESPACE)
    elif kind in _PROBLEMS:
        message = _PROBLEMS[kind]
    elif kind == "value_error":
        message = str(error["msg"]).removeprefix("Value error, ")
    else:
        message = str(error["msg"])
    return {"pointer": pointer(location), "problem": message[:200]}


def _did_you_mean(location: tuple[str | int, ...]) -> str:
    """"; did you mean 'x'?" for an unknown key close to a known one at that place, else ""."""
    model: type[BaseModel] | None = TrainingManifest
    for part in location[:-1]:
        if isinstance(part, int) or model is None:
            continue
        model = _NESTED.get(model, {}).get(part)
    key = location[-1] if location else None
    if model is None or not isinstance(key, str):
        return ""
    close = difflib.get_close_matches(key.lower(), list(model.model_fields), n=1, cutoff=0.75)
    return f"; did you mean '{close[0]}'?" if close else ""


def _claims_to_be_a_manifest(document: Any) -> bool:
    """Does the document say it is a manifest (`schema_version`)? Only then may a refusal name its keys."""
    return type(document) is dict and document.get("schema_version") == SCHEMA_VERSION


def _keys_withheld(refusal: ManifestRefusal) -> ManifestRefusal:
    """The refusal of a document that does not say it is a manifest, naming none of its keys: in every
    pointer, a token that is not a field name of the manifest schema shows as `*` (the schema's own
    words stay, so `/schema_version` still says what is wrong). Otherwise any JSON file the server can
    read would tell which keys it has (a file oracle)."""
    details = dict(refusal.details or {})
    for name in ("findings", "problems"):
        entries = details.get(name)
        if isinstance(entries, list):
            details[name] = [{**entry, "pointer": _schema_words_only(str(entry.get("pointer", "")))}
                             for entry in entries]
    details["not_a_manifest"] = True
    check = str(details.pop("check", "schema"))
    return ManifestRefusal(
        refusal.code,
        f"{refusal.message} The file does not say it is an {SCHEMA_VERSION} document (schema_version), so no key "
        "of it is named: a key that is not a field of the manifest schema shows as *.",
        check=check, details=details,
    )


def _schema_words_only(pointer: str) -> str:
    return "".join(f"/{token if token in _SCHEMA_WORDS else MASK}" for token in pointer.split("/")[1:])


_SCHEMA_WORDS = frozenset(
    name for model in (TrainingManifest, Model, DataRef, Decontamination, Budget, CheckpointPolicy)
    for name in model.model_fields)


# python -m ito_training_mcp.gates.manifest.schema > schemas/ito.training.manifest.v1.schema.json
if __name__ == "__main__":
    import sys

    sys.stdout.write(json.dumps(manifest_json_schema(), indent=2, sort_keys=True) + "\n")
