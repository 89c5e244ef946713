"""The reviewed training manifest, `ito.training.manifest.v1` (contract §6), and its digest.

The pydantic models are the one source of the schema: `manifest_json_schema()` is what the repo
file `schemas/ito.training.manifest.v1.schema.json` and the MCP resource publish (a test keeps
them equal). The models are strict (no coercion), closed (unknown keys refused) and carry money
as `Decimal` parsed from decimal strings, never floats.

`digest_manifest_file` is gate 2 in one place: secure read -> strict JSON -> secret scan ->
character rule -> schema. The digest is the SHA-256 of the bytes read from the descriptor, and those same bytes
are what a submit sends.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from . import secret_scan, strict_json
from .config import ManifestSettings
from .egress import LocalText, LocalTree
from .envelope import ErrorCode
from .errors import ManifestRefusal
from .manifest_characters import CHARACTER_CLASSES as CHARACTER_CLASSES
from .manifest_characters import character_class as character_class
from .manifest_characters import character_problems, may_hold_forbidden
from .manifest_values import (
    DATA_MAX,
    DATE,
    SUITES,
    SUITES_MAX,
    SUITES_MIN,
    URI,
    IsoDate,
    Label,
    Labels,
    Money,
    Place,
    Tally,
    Uri,
    merged,
    places_in,
    problems_at,
    problems_of_valid,
)
from .manifest_values import LABEL_PATTERN as _LABEL_PATTERN
from .manifest_values import URI_NOT_ASCII as URI_NOT_ASCII
from .manifest_values import WHITESPACE as WHITESPACE
from .pointers import pointer as safe_pointer
from .review_layout import review_strings
from .review_layout import review_text as review_text
from .safe_read import FileBytes, ReadHooks, read_regular_file
from .schema_trim import trim_unknown_keys

SCHEMA_VERSION = "ito.training.manifest.v1"
SCHEMA_ID = "https://ito.example/schemas/ito.training.manifest.v1.schema.json"
_IMMUTABLE_REVISION = r"^([0-9a-f]{40}|[0-9a-f]{64}|sha256:[0-9a-f]{64})$"
MAX_SCHEMA_PROBLEMS = 20
NO_CONTROLS = "ito.no_controls"  # validation context: True when the bytes hold no control character
TALLY = "ito.tally"  # validation context: a `Tally` for the value rules' errors


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
    eval_suites: Labels = Field(min_length=SUITES_MIN, max_length=SUITES_MAX,
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

    @model_validator(mode="wrap")
    @classmethod
    def _values_checked_together(cls, data: Any, handler: ModelWrapValidatorHandler[TrainingManifest],
                                 info: ValidationInfo) -> TrainingManifest:
        """The URI, check-date and eval-suite label rules, for all values at once (`manifest_values`),
        with their errors where pydantic would have put them. A manifest already made was checked then."""
        if isinstance(data, TrainingManifest):
            return handler(data)
        context = info.context if isinstance(info.context, dict) else {}
        tally = context.get(TALLY)
        try:
            manifest = handler(data)
        except ValidationError as exc:
            ours = problems_at(places_in(data), tally)
            if ours:
                raise merged(cls.__name__, exc, ours, _order) from None
            raise
        refs = manifest.data
        decontaminations = [ref.decontamination for ref in refs]
        problems = problems_of_valid(
            [ref.uri for ref in refs] + [d.report for d in decontaminations] + [manifest.checkpoints.storage],
            [d.checked_at for d in decontaminations], [d.eval_suites for d in decontaminations],
            lambda: _places_of(manifest), controls_possible=context.get(NO_CONTROLS) is not True, tally=tally)
        if problems:
            raise ValidationError.from_exception_data(cls.__name__, problems)
        return manifest

    def review(self, references: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Exactly what the manifest asks for, shaped for a person to confirm. `references`: the data
        references of the very document this manifest was validated from (gate 2 passes them on), as
        the review's own: validated strictly, under a closed schema, they hold exactly the review's
        keys and values, and only `revision` may be absent. Building them again costs a mebibyte
        manifest ~0.3 ms."""
        if references is not None:
            data = [ref if "revision" in ref else {**ref, "revision": None} for ref in references]
        else:
            data = [
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
            ]
        return {
            "model": {
                "name": self.model.name,
                "parameter_count": self.model.parameter_count,
                "size": _human_size(self.model.parameter_count),
                "revision": self.model.revision,
            },
            "target": self.target.value,
            "data": data,
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


# Every key of a review, for `review_sources` (a test keeps this complete).
REVIEW_KEYS = ("model name parameter_count size revision target data uri decontamination method eval_suites report "
               "checked_at post_training budget ceiling_usd max_incremental_cost_usd checkpoints interval_steps "
               "retain_last storage description")


def review_sources(review: dict[str, Any], strings: str) -> tuple[str, ...]:
    """Strings in which every key and string of `review` occurs, for the egress (`LocalTree`):
    `strings` (`review_strings`) holds all of them but the description and the data revisions."""
    revisions = "\n".join(ref["revision"] or "" for ref in review["data"])
    return strings, review["description"] or "", revisions, REVIEW_KEYS


def verbatim_sources(text: str, review: dict[str, Any]) -> tuple[str, ...] | None:
    """For a manifest that passed gate 2 and holds no backslash: its text, and the review's derived
    strings (the size and the two amounts as the review writes them). JSON without a backslash has no
    escape, so every string of the manifest stands in its text as it is, and every string of the
    review is in one of these: the egress checks them instead of a joined copy of the review's
    strings (`review_strings`). None when the manifest holds a backslash."""
    if "\\" in text:  # one character search
        return None
    budget = review["budget"]
    return text, "\n".join((review["model"]["size"], budget["ceiling_usd"], budget["max_incremental_cost_usd"]))


def _schema_problems(exc: ValidationError) -> list[dict[str, str]]:
    """Locations and fixed messages only: pydantic's input values are file content, and so are
    keys (an unknown key is masked in its pointer unless it is a plain identifier)."""
    problems: list[dict[str, str]] = []
    for err in exc.errors(include_url=False, include_input=False, include_context=True)[:MAX_SCHEMA_PROBLEMS]:
        message = err["msg"] if err["type"] in ("value_error", "assertion_error") else err["type"]
        if err["type"] == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == _LABEL_PATTERN:
            message = WHITESPACE  # the only way a label misses its pattern
        problems.append({"pointer": safe_pointer(err["loc"]), "problem": str(message)[:200]})
    return problems


# The objects the schema validates as models, and where in them their nested models are.
_NESTED_MODELS: dict[type[BaseModel], dict[str, tuple[type[BaseModel], bool]]] = {
    TrainingManifest: {"model": (Model, False), "data": (DataRef, True), "budget": (Budget, False),
                       "checkpoints": (CheckpointPolicy, False)},
    DataRef: {"decontamination": (Decontamination, False)},
}


class _SchemaRefusal:
    """What the schema found wrong: how many problems, and the first MAX_SCHEMA_PROBLEMS of them."""

    def __init__(self, count: int, problems: list[dict[str, str]]) -> None:
        self.count = count
        self.problems = problems


def _validate(document: Any, *, controls_possible: bool = True) -> TrainingManifest | _SchemaRefusal:
    """The schema's verdict. Turning pydantic's errors into Python objects is what costs on a hostile
    document (45,000 unknown keys: ~60 ms, against ~10 ms to validate them), and only the first
    MAX_SCHEMA_PROBLEMS are reported: unknown keys past those are left out before validating (at the
    top level always, a cheap look; in nested objects when the count shows many problems), which
    changes neither the count nor the problems reported (see schema_trim.py). `controls_possible`:
    False when the caller knows from the bytes that no string holds a control character (the
    character rule's look at them), so the URI rule skips its printability pass."""
    trimmed, left_out = trim_unknown_keys(document, TrainingManifest, {}, keep=MAX_SCHEMA_PROBLEMS)
    tally = Tally(MAX_SCHEMA_PROBLEMS)  # the value rules make at most this many errors, and count the rest
    try:
        return TrainingManifest.model_validate(trimmed, strict=True,
                                               context={NO_CONTROLS: not controls_possible, TALLY: tally})
    except ValidationError as exc:
        count = exc.error_count() + left_out + tally.left_out
        if exc.error_count() > _MANY_PROBLEMS:
            deeper, _ = trim_unknown_keys(trimmed, TrainingManifest, _NESTED_MODELS, keep=MAX_SCHEMA_PROBLEMS)
            try:
                TrainingManifest.model_validate(deeper, strict=True, context={TALLY: Tally(MAX_SCHEMA_PROBLEMS)})
            except ValidationError as fewer:
                exc = fewer
        return _SchemaRefusal(count, _schema_problems(exc))


def _places_of(manifest: TrainingManifest) -> list[Place]:
    """The values of the rules checked together, as the validated manifest holds them, in document
    order (a reference's URI, then its eval suites, report and check date; the checkpoint storage)."""
    places: list[Place] = []
    for index, ref in enumerate(manifest.data):
        d = ref.decontamination
        at = ("data", index, "decontamination")
        places += [(("data", index, "uri"), URI, ref.uri), ((*at, "eval_suites"), SUITES, d.eval_suites),
                   ((*at, "report"), URI, d.report), ((*at, "checked_at"), DATE, d.checked_at)]
    places.append((("checkpoints", "storage"), URI, manifest.checkpoints.storage))
    return places


def _order(loc: tuple[str | int, ...]) -> tuple[int, ...]:
    """Where pydantic reports an error at `loc` among the others: a model's fields in their order, an
    unknown key after them, list items by index."""
    model: type[BaseModel] | None = TrainingManifest
    key: list[int] = []
    for part in loc:
        if isinstance(part, int):
            key.append(part)
            continue
        fields = _field_index(model) if model is not None else {}
        key.append(fields.get(part, len(fields)))
        nested = _NESTED_MODELS.get(model, {}).get(part) if model is not None else None
        model = nested[0] if nested is not None else None
    return tuple(key)


@functools.cache
def _field_index(model: type[BaseModel]) -> dict[str, int]:
    return {name: index for index, name in enumerate(model.model_fields)}


_MANY_PROBLEMS = 256


def _invalid_json(exc: strict_json.StrictJSONError) -> ManifestRefusal:
    return ManifestRefusal(
        ErrorCode.MANIFEST_INVALID_JSON, f"The manifest is not strict JSON: {exc.reason}.", check="json"
    )


def parse_manifest(content: bytes) -> TrainingManifest:
    """Strict JSON -> secret scan -> character rule -> schema, or raise `ManifestRefusal`."""
    return _parsed(content)[0]


def _parsed(content: bytes) -> tuple[TrainingManifest, str, list[dict[str, Any]]]:
    """`parse_manifest`, with the text the bytes decoded to and the validated document's data
    references (see `TrainingManifest.review`).

    The refusals come in that order. The schema is consulted first, silently: a document it refuses
    is refused whatever the scan finds, so the scan may bound its work there (see `secret_scan.scan`);
    a document it accepts is scanned in full. The nesting limit of strict JSON is checked before any
    refusal is raised; a document the schema accepts nests five levels at most.
    """
    try:
        text = strict_json.decode(content)
        document = strict_json.loads_text(text, max_depth=None)
    except strict_json.StrictJSONError as exc:
        raise _invalid_json(exc) from None
    forbidden_possible = may_hold_forbidden(content)  # a look at the bytes: C0 and DEL are in its classes
    validated = _validate(document, controls_possible=forbidden_possible)

    def refuse(refusal: ManifestRefusal) -> ManifestRefusal:
        if strict_json.depth_exceeds(document):
            return _invalid_json(strict_json.too_deep())
        return refusal

    strings = secret_scan.DocumentStrings(document)
    findings = secret_scan.scan(document, source=text, strings=strings,
                                bounded=isinstance(validated, _SchemaRefusal))
    if findings:
        raise refuse(ManifestRefusal(
            ErrorCode.MANIFEST_SECRET,
            f"The manifest contains {len(findings)} value(s) that look like credentials; "
            "see details.findings for where. The values are not shown.",
            check="secret_scan",
            details={"findings": [f.as_dict() for f in findings]},
        ))
    characters = character_problems(document, *strings.get()) if forbidden_possible else []
    if characters:
        classes = sorted({str(p["problem"]) for p in characters})
        raise refuse(ManifestRefusal(
            ErrorCode.MANIFEST_SCHEMA,
            f"The manifest contains characters that could make a reviewer see something other than what is "
            f"submitted ({', '.join(classes)}); see details.problems for where. They are not shown.",
            check="schema",
            details={"problems": characters},
        ))
    if not isinstance(document, dict):
        raise refuse(ManifestRefusal(
            ErrorCode.MANIFEST_SCHEMA, "The manifest must be a JSON object.", check="schema",
            details={"problems": [{"pointer": "", "problem": "must be an object"}]},
        ))
    if isinstance(validated, _SchemaRefusal):
        raise refuse(ManifestRefusal(
            ErrorCode.MANIFEST_SCHEMA,
            f"The manifest does not match {SCHEMA_VERSION} ({validated.count} problem(s); see details.problems).",
            check="schema",
            details={"problems": validated.problems},
        ))
    return validated, text, document["data"]


class DigestedManifest(BaseModel):
    """A manifest that passed gate 2: the bytes, their digest, and the parsed content."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    file: FileBytes
    manifest: TrainingManifest

    _summary: dict[str, Any] | None = PrivateAttr(default=None)
    _text: str | None = PrivateAttr(default=None)  # what the bytes decoded to, kept from the parse
    _references: list[dict[str, Any]] | None = PrivateAttr(default=None)  # the parsed data references

    @property
    def sha256(self) -> str:
        return self.file.sha256

    def summary(self) -> dict[str, Any]:
        """What the digest shows: the path, the digest, the review and its text. Made once, by the
        first caller (`digest_bytes(summarize=True)`, or whoever shows it first)."""
        if self._summary is None:
            self._summary = self._summarize()
        return self._summary

    def _summarize(self) -> dict[str, Any]:
        review = self.manifest.review(self._references)
        decoded = self.file.content.decode("utf-8") if self._text is None else self._text
        printable = _ascii_printable(decoded)
        verbatim = verbatim_sources(decoded, review)
        strings = (review_strings(review),) if verbatim is None else verbatim
        sources = review_sources(review, strings[0]) if verbatim is None else (*verbatim, REVIEW_KEYS)
        return {
            "path": self.file.path,
            "sha256": self.file.sha256,
            "size_bytes": self.file.size_bytes,
            "schema_version": SCHEMA_VERSION,
            "review": LocalTree(review, sources=sources, ascii_printable=printable),
            "review_text": LocalText(review_text(review, self.file.sha256, ascii_printable=printable), strings=strings,
                                     ascii_printable=printable),
        }


def _ascii_printable(text: str) -> bool:
    """For a manifest that passed gate 2: ASCII text without a `\\u` escape holds ASCII strings, in
    which the character rule left no control character but tab and newline (in the description)."""
    return text.isascii() and ("\\" not in text or "\\u" not in text)  # `isascii` is a flag; then memchr


def read_manifest(path: object, settings: ManifestSettings, *, hooks: ReadHooks | None = None) -> FileBytes:
    """Gate 2's read: once, securely, with the SHA-256 of the bytes read (the part that can block)."""
    return read_regular_file(path, max_bytes=settings.max_bytes, roots=settings.roots, hooks=hooks)


def digest_bytes(file: FileBytes, *, summarize: bool = False) -> DigestedManifest:
    """The rest of gate 2 on what `read_manifest` read: strict JSON, secret scan, character rule and
    schema. `summarize`: make the summary now, too."""
    manifest, text, references = _parsed(file.content)
    digested = DigestedManifest(file=file, manifest=manifest)
    digested._text, digested._references = text, references
    if summarize:
        digested.summary()
    return digested


def digest_manifest_file(
    path: object, settings: ManifestSettings, *, hooks: ReadHooks | None = None, summarize: bool = False
) -> DigestedManifest:
    """Gate 2: read once, securely; parse strictly; scan; validate. The file is never read twice."""
    return digest_bytes(read_manifest(path, settings, hooks=hooks), summarize=summarize)


if __name__ == "__main__":  # python -m ito_training_mcp.manifest > schemas/ito.training.manifest.v1.schema.json
    import json
    import sys

    sys.stdout.write(json.dumps(manifest_json_schema(), indent=2, sort_keys=True) + "\n")
