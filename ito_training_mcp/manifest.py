"""The reviewed training manifest, `ito.training.manifest.v1` (contract §6), and its digest.

The pydantic models are the one source of the schema: `manifest_json_schema()` is what the repo
file `schemas/ito.training.manifest.v1.schema.json` and the MCP resource publish (a test keeps
them equal). The models are strict (no coercion), closed (unknown keys refused) and carry money
as `Decimal` parsed from decimal strings, never floats.

`digest_manifest_file` is gate 2 in one place: secure read -> strict JSON -> secret scan ->
schema. The digest is the SHA-256 of the bytes read from the descriptor, and those same bytes
are what a submit sends.
"""

from __future__ import annotations

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

from . import secret_scan, strict_json
from .config import ManifestSettings
from .envelope import ErrorCode
from .errors import ManifestRefusal
from .pointers import pointer as safe_pointer
from .safe_read import FileBytes, ReadHooks, read_regular_file

SCHEMA_VERSION = "ito.training.manifest.v1"
SCHEMA_ID = "https://ito.example/schemas/ito.training.manifest.v1.schema.json"
MONEY_MAX = Decimal("100000000.00")
_MONEY_PATTERN = r"^(0|[1-9][0-9]{0,8})(\.[0-9]{1,2})?$"
_MONEY_RE = re.compile(_MONEY_PATTERN)
_IMMUTABLE_REVISION = r"^([0-9a-f]{40}|[0-9a-f]{64}|sha256:[0-9a-f]{64})$"
_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_URI_SCHEMES = ("s3", "gs", "az", "hf", "https", "ito")
_URI_PATTERN = r"^(s3|gs|az|hf|https|ito)://[^\s?#@]+$"


def _money(value: object) -> Decimal:
    if not isinstance(value, str):
        raise ValueError('money must be a decimal string such as "1500.00", not a JSON number')
    if not _MONEY_RE.fullmatch(value):
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


Money = Annotated[
    Decimal,
    BeforeValidator(_money),
    PlainSerializer(lambda d: f"{d:.2f}", return_type=str),
    WithJsonSchema({"type": "string", "pattern": _MONEY_PATTERN, "description": 'Decimal USD, e.g. "1500.00".'}),
]


def _iso_date(value: object) -> str:
    if not isinstance(value, str) or not re.fullmatch(_DATE_PATTERN, value):
        raise ValueError("must be a date in YYYY-MM-DD form")
    try:
        date.fromisoformat(value)
    except ValueError:
        raise ValueError("must be a real calendar date") from None
    return value


IsoDate = Annotated[str, BeforeValidator(_iso_date), WithJsonSchema({"type": "string", "format": "date"})]
# _URI_PATTERN, checked without a regex scan of every character on the common (ASCII) path: data
# references are long paths, and the pattern constraint was most of the schema's cost. The same
# test, the same error type and message; `\s` is Unicode White_Space, as in the published pattern.
_URI_FORBIDDEN_ASCII = b"\t\n\x0b\x0c\r ?#@"
_URI_UNICODE = re.compile("(?:s3|gs|az|hf|https|ito)://[^\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a"
                          "\u2028\u2029\u202f\u205f\u3000?#@]+")


def _uri(value: str) -> str:
    if value.isascii():
        scheme, separator, rest = value.partition("://")
        raw = value.encode()
        ok = (bool(separator) and scheme in _URI_SCHEMES and bool(rest)
              and len(raw.translate(None, _URI_FORBIDDEN_ASCII)) == len(raw))
    else:
        ok = _URI_UNICODE.fullmatch(value) is not None
    if not ok:
        raise PydanticCustomError("string_pattern_mismatch", "String should match pattern '{pattern}'",
                                  {"pattern": _URI_PATTERN})
    return value


Uri = Annotated[
    str,
    Field(min_length=6, max_length=2048, json_schema_extra={"pattern": _URI_PATTERN},
          description=f"A stable location: scheme one of {', '.join(_URI_SCHEMES)}; no credentials, "
                      "query string or fragment."),
    AfterValidator(_uri),
]
Label = Annotated[str, Field(min_length=1, max_length=200)]


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
    revision: str = Field(
        pattern=_IMMUTABLE_REVISION,
        description="Immutable revision: a full 40- or 64-hex commit id or sha256:<64 hex>. "
                    "Branch names and tags such as 'main' or 'latest' are refused.",
    )


class Decontamination(_Strict):
    method: Label = Field(description="How the data was decontaminated, e.g. '13-gram overlap'.")
    eval_suites: list[Label] = Field(min_length=1, max_length=100,
                                     description="Eval suites the data was checked against.")
    report: Uri = Field(description="Where the decontamination report lives.")
    checked_at: IsoDate = Field(description="Date of the decontamination check (YYYY-MM-DD).")


class DataRef(_Strict):
    name: Label = Field(description="Short name of the dataset for the reviewer.")
    uri: Uri
    revision: str | None = Field(
        default=None, pattern=_IMMUTABLE_REVISION, description="Immutable dataset revision, if versioned."
    )
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
    data: list[DataRef] = Field(min_length=1, max_length=256)
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
        # Strict mode refuses a str for an enum; the JSON form is the string.
        if isinstance(value, str):
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

    def review(self) -> dict[str, Any]:
        """Exactly what the manifest asks for, shaped for a person to confirm."""
        return {
            "model": {
                "name": self.model.name,
                "parameter_count": self.model.parameter_count,
                "size": _human_size(self.model.parameter_count),
                "revision": self.model.revision,
            },
            "target": self.target.value,
            "data": [
                {
                    "name": ref.name,
                    "uri": ref.uri,
                    "revision": ref.revision,
                    "decontamination": {
                        "method": ref.decontamination.method,
                        "eval_suites": list(ref.decontamination.eval_suites),
                        "report": ref.decontamination.report,
                        "checked_at": ref.decontamination.checked_at,
                    },
                }
                for ref in self.data
            ],
            "post_training": [s.value for s in self.post_training],
            "budget": {
                "ceiling_usd": f"{self.budget.ceiling_usd:.2f}",
                "max_incremental_cost_usd": f"{self.budget.max_incremental_cost_usd:.2f}",
            },
            "checkpoints": {
                "interval_steps": self.checkpoints.interval_steps,
                "retain_last": self.checkpoints.retain_last,
                "storage": self.checkpoints.storage,
            },
            "description": self.description,
        }


def _human_size(count: int) -> str:
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if count >= scale:
            return f"{count / scale:.3g}{unit}"
    return str(count)


def manifest_json_schema() -> dict[str, Any]:
    """The published JSON Schema, generated from the models (validation mode)."""
    schema = TrainingManifest.model_json_schema(mode="validation")
    schema["additionalProperties"] = False
    return schema


def review_text(review: dict[str, Any], sha256: str) -> str:
    """A short plain-text rendering of the review summary, for people and terminals."""
    model = review["model"]
    lines = [
        f"Model:        {model['name']} ({model['size']} parameters) @ {model['revision']}",
        f"Target:       {review['target']}",
        f"Post-training: {' -> '.join(review['post_training']) or 'none'}",
        f"Budget:       ceiling ${review['budget']['ceiling_usd']}, "
        f"this submission at most ${review['budget']['max_incremental_cost_usd']}",
        f"Checkpoints:  every {review['checkpoints']['interval_steps']} steps, keep "
        f"{review['checkpoints']['retain_last']}, to {review['checkpoints']['storage']}",
        "Data:",
    ]
    for ref in review["data"]:
        d = ref["decontamination"]
        lines.append(
            f"  - {ref['name']}: {ref['uri']} (decontaminated by {d['method']} against "
            f"{', '.join(d['eval_suites'])} on {d['checked_at']}; report {d['report']})"
        )
    lines.append(f"SHA-256:      {sha256}")
    return "\n".join(lines)


def _schema_problems(exc: ValidationError) -> list[dict[str, str]]:
    """Locations and fixed messages only: pydantic's input values are file content, and so are
    keys (an unknown key is masked in its pointer unless it is a plain identifier)."""
    problems: list[dict[str, str]] = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False)[:20]:
        message = err["msg"] if err["type"] in ("value_error", "assertion_error") else err["type"]
        problems.append({"pointer": safe_pointer(err["loc"]), "problem": str(message)[:200]})
    return problems


# Characters that could make a terminal or a viewer show something other than the bytes the person
# confirms (contract §10), by class. Tab and newline are allowed in the description only.
CHARACTER_CLASSES: tuple[tuple[str, str], ...] = (
    ("c0_control", "\x00-\x1f"),
    ("del", "\x7f"),
    ("c1_control", "\x80-\x9f"),
    # The embeddings, overrides and isolates of §10, plus (an extension) the implicit marks
    # LRM, RLM and ALM: they too reorder what a reviewer sees around digits and punctuation.
    ("bidi_control", "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"),
    # Extension: Unicode's own line and paragraph separators start a new line in some viewers.
    ("line_separator", "\u2028\u2029"),
)
_FORBIDDEN = re.compile("[" + "".join(ranges for _, ranges in CHARACTER_CLASSES) + "]")
_CLASS_OF = [(name, re.compile(f"[{ranges}]")) for name, ranges in CHARACTER_CLASSES]
# A quick look at the JSON text before walking the parsed document: a forbidden character in a key or
# string either stands there raw (strict JSON allows no raw C0 inside a string, and tab, newline and
# carriage return outside one are only layout) or as an escape. Text showing neither holds none.
_FORBIDDEN_RAW = re.compile("[" + "".join(ranges for name, ranges in CHARACTER_CLASSES if name != "c0_control") + "]")
_FORBIDDEN_ESCAPE = re.compile(r"\\(?:[bfnrt]|u(?:00[01]|007|00[89]|061|200|202|206))", re.IGNORECASE)
_MAX_CHARACTER_PROBLEMS = 20


def character_class(text: str, *, description: bool = False) -> str | None:
    """The class of the first forbidden character in `text`, or None. Never the character itself."""
    if description:
        text = text.replace("\t", "").replace("\n", "")
    match = _FORBIDDEN.search(text)
    if match is None:
        return None
    return next(name for name, pattern in _CLASS_OF if pattern.fullmatch(match.group()))


def _character_problems(document: Any) -> list[dict[str, Any]]:
    """Every key and string value holding a forbidden character, wherever it is (even under an
    unknown key), reported by pointer and class, bounded."""
    problems: list[dict[str, Any]] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), document)]
    while stack and len(problems) < _MAX_CHARACTER_PROBLEMS:
        path, node = stack.pop()
        if isinstance(node, str):
            found = character_class(node, description=path == ("description",))
            if found:
                problems.append({"pointer": safe_pointer(path), "problem": found})
        elif isinstance(node, dict):
            for key, child in reversed(node.items()):
                found = character_class(key)
                if found:
                    problems.append({"pointer": safe_pointer((*path, key)), "problem": found})
                stack.append(((*path, key), child))
        elif isinstance(node, list):
            stack.extend(((*path, index), child) for index, child in reversed(list(enumerate(node))))
    return problems[:_MAX_CHARACTER_PROBLEMS]


def parse_manifest(content: bytes) -> TrainingManifest:
    """Strict JSON -> secret scan -> schema, or raise `ManifestRefusal`."""
    try:
        document = strict_json.loads(content)
    except strict_json.StrictJSONError as exc:
        raise ManifestRefusal(
            ErrorCode.MANIFEST_INVALID_JSON, f"The manifest is not strict JSON: {exc.reason}.", check="json"
        ) from None
    findings = secret_scan.scan(document, source=content)
    if findings:
        raise ManifestRefusal(
            ErrorCode.MANIFEST_SECRET,
            f"The manifest contains {len(findings)} value(s) that look like credentials; "
            "see details.findings for where. The values are not shown.",
            check="secret_scan",
            details={"findings": [f.as_dict() for f in findings]},
        )
    text = content.decode("utf-8", "replace")
    quick = _FORBIDDEN_RAW.search(text) is None and _FORBIDDEN_ESCAPE.search(text) is None
    characters = [] if quick else _character_problems(document)
    if characters:
        classes = sorted({str(p["problem"]) for p in characters})
        raise ManifestRefusal(
            ErrorCode.MANIFEST_SCHEMA,
            f"The manifest contains characters that could make a reviewer see something other than what is "
            f"submitted ({', '.join(classes)}); see details.problems for where. They are not shown.",
            check="schema",
            details={"problems": characters},
        )
    if not isinstance(document, dict):
        raise ManifestRefusal(
            ErrorCode.MANIFEST_SCHEMA, "The manifest must be a JSON object.", check="schema",
            details={"problems": [{"pointer": "", "problem": "must be an object"}]},
        )
    try:
        return TrainingManifest.model_validate(document, strict=True)
    except ValidationError as exc:
        problems = _schema_problems(exc)
        raise ManifestRefusal(
            ErrorCode.MANIFEST_SCHEMA,
            f"The manifest does not match {SCHEMA_VERSION} ({exc.error_count()} problem(s); see details.problems).",
            check="schema",
            details={"problems": problems},
        ) from None


class DigestedManifest(BaseModel):
    """A manifest that passed gate 2: the bytes, their digest, and the parsed content."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    file: FileBytes
    manifest: TrainingManifest

    @property
    def sha256(self) -> str:
        return self.file.sha256

    def summary(self) -> dict[str, Any]:
        review = self.manifest.review()
        return {
            "path": self.file.path,
            "sha256": self.file.sha256,
            "size_bytes": self.file.size_bytes,
            "schema_version": SCHEMA_VERSION,
            "review": review,
            "review_text": review_text(review, self.file.sha256),
        }


def digest_manifest_file(
    path: object, settings: ManifestSettings, *, hooks: ReadHooks | None = None
) -> DigestedManifest:
    """Gate 2: read once, securely; parse strictly; scan; validate. The file is never read twice."""
    file = read_regular_file(path, max_bytes=settings.max_bytes, roots=settings.roots, hooks=hooks)
    return DigestedManifest(file=file, manifest=parse_manifest(file.content))


if __name__ == "__main__":  # python -m ito_training_mcp.manifest > schemas/ito.training.manifest.v1.schema.json
    import json
    import sys

    sys.stdout.write(json.dumps(manifest_json_schema(), indent=2, sort_keys=True) + "\n")
