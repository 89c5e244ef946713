"""The reviewed training manifest, `ito.training.manifest.v1` (contract §6): its schema and parse.

The pydantic models are the one source of the schema: `manifest_json_schema()` is what the repo
file `schemas/ito.training.manifest.v1.schema.json` and the MCP resource publish (a test keeps
them equal). The models are strict (no coercion), closed (unknown keys refused) and carry money
as `Decimal` parsed from decimal strings, never floats.

`parse_manifest` is gate 2 after the read: strict JSON -> secret scan -> character rule -> schema.
The read, the digest and the review a person is shown are in `digest.py`.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from itertools import chain
from typing import Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ito_training_mcp import secret_scan
from ito_training_mcp.envelope import ErrorCode
from ito_training_mcp.errors import ManifestRefusal
from ito_training_mcp.gates.manifest import strict_json
from ito_training_mcp.gates.manifest.characters import CHARACTER_CLASSES as CHARACTER_CLASSES
from ito_training_mcp.gates.manifest.characters import character_class as character_class
from ito_training_mcp.gates.manifest.characters import character_problems, holds_forbidden, look_at_bytes
from ito_training_mcp.gates.manifest.schema_trim import trim_unknown_keys
from ito_training_mcp.gates.manifest.values import (
    DATA_MAX,
    DATE,
    LABEL_MAX,
    SUITES,
    SUITES_MAX,
    SUITES_MIN,
    URI,
    IsoDate,
    Label,
    Labels,
    ManyErrors,
    Money,
    Place,
    Tally,
    Uri,
    merged,
    places_in,
    problems_at,
    problems_of_valid,
    trim_refused_labels,
)
from ito_training_mcp.gates.manifest.values import LABEL_PATTERN as _LABEL_PATTERN
from ito_training_mcp.gates.manifest.values import URI_NOT_ASCII as URI_NOT_ASCII
from ito_training_mcp.gates.manifest.values import WHITESPACE as WHITESPACE
from ito_training_mcp.look_ahead import LookAhead
from ito_training_mcp.pointers import MASK
from ito_training_mcp.pointers import pointer as safe_pointer

SCHEMA_VERSION = "ito.training.manifest.v1"
SCHEMA_ID = "https://ito.example/schemas/ito.training.manifest.v1.schema.json"
_IMMUTABLE_REVISION = r"^([0-9a-f]{40}|[0-9a-f]{64}|sha256:[0-9a-f]{64})$"
MAX_SCHEMA_PROBLEMS = 20
NO_CONTROLS = "ito.no_controls"  # validation context: True when the bytes hold no control character
TALLY = "ito.tally"  # validation context: a `Tally` for the value rules' errors
# Validation context: every eval-suite label of the document validated, joined by a line break (the
# gate has it from its look for labels that are not strings).
LABELS_TEXT = "ito.labels_text"
ALL_SHOWN = "ito.all_shown"  # validation context: True when the bytes say every string shows as itself
# The value rules stop looking once they have found one problem more than the refusal shows: the
# refusal then says "at least" (a mebibyte can hold a hundred thousand such problems).
COUNTED_MAX = MAX_SCHEMA_PROBLEMS


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
            if tally is not None and not tally.merge_many and exc.error_count() > _MANY_PROBLEMS:
                tally.left_out += len(ours)  # merging means converting all of pydantic's errors first
                tally.unmerged = bool(ours)
                raise ManyErrors(exc) from None
            if ours:
                raise merged(cls.__name__, exc, ours, _order, tally) from None
            raise
        refs = manifest.data
        decontaminations = [ref.decontamination for ref in refs]
        problems = problems_of_valid(
            [ref.uri for ref in refs] + [d.report for d in decontaminations] + [manifest.checkpoints.storage],
            [d.checked_at for d in decontaminations], [d.eval_suites for d in decontaminations],
            lambda: _places_of(manifest), controls_possible=context.get(NO_CONTROLS) is not True, tally=tally,
            labels_text=context.get(LABELS_TEXT), other_spaces_possible=context.get(ALL_SHOWN) is not True)
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
    """What the schema found wrong: how many problems (`at_least`: counting stopped there), and the
    first MAX_SCHEMA_PROBLEMS of them."""

    def __init__(self, count: int, problems: list[dict[str, str]], *, at_least: bool = False) -> None:
        self.count = count
        self.problems = problems
        self.at_least = at_least


def _validate(document: Any, *, controls_possible: bool = True, all_shown: bool = False
              ) -> TrainingManifest | _SchemaRefusal:
    """The schema's verdict. Turning pydantic's errors into Python objects is what costs on a hostile
    document (45,000 unknown keys: ~60 ms, against ~10 ms to validate them), and only the first
    MAX_SCHEMA_PROBLEMS are reported. So, before validating:
    - unknown keys past those are left out at the top level (a cheap look);
    - when some eval-suite label is not a string (one join of them all tells), the labels pydantic
      refuses as such past the first MAX_SCHEMA_PROBLEMS are left out (`trim_refused_labels`);
    and the value rules make that many errors at most and stop counting past COUNTED_MAX (`Tally`).
    When the count still shows many problems, the document is validated again without the unknown
    keys of nested objects. None of this changes the problems reported, nor the count unless the
    rules stopped counting (`at_least`; see schema_trim.py). `controls_possible`: False when the
    caller knows from the bytes that no string holds a control character (the character rule's look
    at them), so the URI rule skips its printability pass. `all_shown`: the caller knows from the
    bytes that every key and string shows as itself (`look_at_bytes`), so the label rule skips its
    look for space separators other than the plain space."""
    trimmed, left_out = trim_unknown_keys(document, TrainingManifest, {}, keep=MAX_SCHEMA_PROBLEMS)
    labels_text = _labels_text(trimmed)
    stopped = False
    if labels_text is None or _labels_too_long(trimmed, labels_text):
        trimmed, refused_labels, stopped = trim_refused_labels(trimmed, keep=MAX_SCHEMA_PROBLEMS,
                                                               stop_after=COUNTED_MAX)
        left_out += refused_labels
        labels_text = None if labels_text is None else _labels_text(trimmed)
    tally = Tally(MAX_SCHEMA_PROBLEMS, merge_many=False, cap=COUNTED_MAX)
    try:
        try:
            return TrainingManifest.model_validate(trimmed, strict=True, context={
                NO_CONTROLS: not controls_possible, TALLY: tally, LABELS_TEXT: labels_text, ALL_SHOWN: all_shown})
        except ManyErrors as many:
            raise many.exc from None
    except ValidationError as exc:
        count = exc.error_count() + left_out + tally.left_out
        if exc.error_count() > _MANY_PROBLEMS:
            deeper, _ = trim_unknown_keys(trimmed, TrainingManifest, _NESTED_MODELS, keep=MAX_SCHEMA_PROBLEMS)
            deeper, *_ = trim_refused_labels(deeper, keep=MAX_SCHEMA_PROBLEMS, stop_after=MAX_SCHEMA_PROBLEMS)
            if deeper is not trimmed or tally.unmerged:
                try:
                    TrainingManifest.model_validate(deeper, strict=True, context={
                        NO_CONTROLS: not controls_possible,
                        TALLY: Tally(MAX_SCHEMA_PROBLEMS, cap=MAX_SCHEMA_PROBLEMS)})
                except ValidationError as fewer:
                    exc = fewer
        return _SchemaRefusal(count, _schema_problems(exc), at_least=tally.capped or stopped)


def _labels_too_long(document: Any, labels_text: str) -> bool:
    """Are there labels longer than LABEL_MAX, in a document whose labels are `labels_text` (see
    `_labels_text`), as far as it pays to look? Thousands of them made pydantic an error object
    each, then a second validation (5x-6x the parse of their bytes; left out past the first twenty,
    ~2x). Looking at every label costs 0.2x-0.3x where there are tens of thousands, so only labels
    half as long as allowed on average, or longer, are looked at (a mebibyte holds ~10,000 of them
    at most); among shorter ones, those too long are at most as many as the short ones, and pydantic
    finds them as before."""
    lists = [ref["decontamination"]["eval_suites"] for ref in document["data"]]
    count = sum(map(len, lists))
    if len(labels_text) - count < LABEL_MAX // 2 * count:  # (without the line breaks that join them)
        return False
    return max(map(len, chain.from_iterable(lists)), default=0) > LABEL_MAX


def _labels_text(document: Any) -> str | None:
    """Every eval-suite label of a parsed manifest document, joined by a line break; None when a label
    is not a string or the document is not shaped like a manifest there. (What it gives for a
    misshapen document is never used: it serves a document the schema accepts.) Labels too long
    are left to the schema: a mebibyte holds ~5,000 of them; so are lone surrogates, which strict
    JSON never gives."""
    if type(document) is not dict or type(data := document.get("data")) is not list or len(data) > DATA_MAX:
        return None
    try:
        return "\n".join(chain.from_iterable(ref["decontamination"]["eval_suites"] for ref in data))
    except (TypeError, KeyError):
        return None


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
    return parse_with_text(content)[0]


def parse_with_text(content: bytes) -> tuple[TrainingManifest, str, list[dict[str, Any]]]:
    """`parse_manifest`, with the text the bytes decoded to and the validated document's data
    references (see `TrainingManifest.review`)."""
    parsed = parse_checked(content)
    return parsed.manifest, parsed.text, parsed.references


class Parsed(NamedTuple):
    """A manifest that passed gate 2, with what the gate learnt on the way."""

    manifest: TrainingManifest
    text: str  # what the bytes decoded to
    references: list[dict[str, Any]]  # the validated document's data references
    # every key and string shows as itself, tab and newline aside: True is certain; None: not looked at
    shown_as_is: bool | None  # (manifest_characters.look_at_bytes)


def parse_checked(content: bytes, ahead: LookAhead | None = None) -> Parsed:
    """`parse_manifest`, with what the gate learnt on the way (`Parsed`). `ahead`: the looks at
    `content` another thread takes meanwhile (`look_ahead.py`), each asked for when it is needed.

    The refusals come in that order. The character rule and the schema are consulted first, silently
    (the schema only when the rule finds nothing, since its problems would never be shown): a
    document either refuses is refused whatever the scan finds, so the scan may bound its work there
    (see `secret_scan.scan`); a document both accept is scanned in full. The nesting limit of strict
    JSON is checked before any refusal is raised; a document the schema accepts nests five levels at
    most.
    """
    try:
        text = strict_json.decode(content)
        document = strict_json.loads_text(text, max_depth=None)
    except strict_json.StrictJSONError as exc:
        raise _invalid_json(exc) from None
    look = ahead.look(content) if ahead is not None else None
    if look is None:
        look = look_at_bytes(content, characters=len(text))  # C0 and DEL are in the rule's classes
    forbidden_possible = look.forbidden_possible
    strings = secret_scan.DocumentStrings(document)
    refused_for_characters = forbidden_possible and (  # settled by the bytes without escapes
        b"\\" not in content or holds_forbidden(document, *strings.get()))
    validated = None if refused_for_characters else _validate(document, controls_possible=forbidden_possible,
                                                              all_shown=look.shown_as_is is True)

    def refuse(refusal: ManifestRefusal) -> ManifestRefusal:
        depth = strings.depth()  # counted by the walk of every string, when the scan or the rule made it
        if strict_json.depth_exceeds(document, source=content) if depth is None else depth > strict_json.MAX_DEPTH:
            return _invalid_json(strict_json.too_deep())
        return refusal if _claims_to_be_a_manifest(document) else _keys_withheld(refusal)

    # The scanner's invisible characters are all forbidden (a test keeps it so): bytes that can hold no
    # forbidden character spare the scanner its own search for them.
    findings = secret_scan.scan(document, source=text, strings=strings,
                                bounded=isinstance(validated, _SchemaRefusal) or refused_for_characters,
                                source_invisible_free=not forbidden_possible, encoded=content, facts=look.facts,
                                first_places=None if ahead is None else functools.partial(ahead.first_places, content))
    if findings:
        raise refuse(ManifestRefusal(
            ErrorCode.MANIFEST_SECRET,
            f"The manifest contains {len(findings)} value(s) that look like credentials; "
            "see details.findings for where. The values are not shown.",
            check="secret_scan",
            details={"findings": [f.as_dict() for f in findings]},
        ))
    if refused_for_characters:
        characters = character_problems(document)
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
    assert validated is not None  # no character problem: validated above
    if isinstance(validated, _SchemaRefusal):
        raise refuse(ManifestRefusal(
            ErrorCode.MANIFEST_SCHEMA,
            f"The manifest does not match {SCHEMA_VERSION} ({'at least ' if validated.at_least else ''}"
            f"{validated.count} problem(s); see details.problems).",
            check="schema",
            details={"problems": validated.problems},
        ))
    return Parsed(validated, text, document["data"], look.shown_as_is)


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
    import json
    import sys

    sys.stdout.write(json.dumps(manifest_json_schema(), indent=2, sort_keys=True) + "\n")
