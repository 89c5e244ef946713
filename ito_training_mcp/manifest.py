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
import re
from datetime import date
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from itertools import repeat
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from . import secret_scan, strict_json
from .config import ManifestSettings
from .egress import LocalText, LocalTree
from .envelope import ErrorCode
from .errors import ManifestRefusal
from .manifest_characters import CHARACTER_CLASSES as CHARACTER_CLASSES
from .manifest_characters import character_class as character_class
from .manifest_characters import character_problems, may_hold_forbidden
from .pointers import pointer as safe_pointer
from .review_layout import review_strings
from .review_layout import review_text as review_text
from .safe_read import FileBytes, ReadHooks, read_regular_file
from .schema_trim import trim_unknown_keys

SCHEMA_VERSION = "ito.training.manifest.v1"
SCHEMA_ID = "https://ito.example/schemas/ito.training.manifest.v1.schema.json"
MONEY_MAX = Decimal("100000000.00")
_MONEY_PATTERN = r"^(0|[1-9][0-9]{0,8})(\.[0-9]{1,2})?$"
_MONEY_RE = re.compile(_MONEY_PATTERN)
_IMMUTABLE_REVISION = r"^([0-9a-f]{40}|[0-9a-f]{64}|sha256:[0-9a-f]{64})$"
_DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DATE_RE = re.compile(_DATE_PATTERN)
_URI_SCHEMES = ("s3", "gs", "az", "hf", "https", "ito")
# Printable ASCII after the scheme, but for space, `?`, `#` and `@`: a URI the person reads is the URI
# used, with no look-alike letter from another script and nothing invisible (internationalised host
# names in their xn-- form, other non-ASCII percent-encoded).
_URI_PATTERN = r"^(s3|gs|az|hf|https|ito)://[\x21\x22\x24-\x3e\x41-\x7e]+$"
MAX_SCHEMA_PROBLEMS = 20


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
    if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
        raise ValueError("must be a date in YYYY-MM-DD form")
    if not _calendar_date(value):
        raise ValueError("must be a real calendar date")
    return value


@functools.lru_cache(maxsize=1024)  # a manifest's references mostly share one check date
def _calendar_date(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


IsoDate = Annotated[str, BeforeValidator(_iso_date), WithJsonSchema({"type": "string", "format": "date"})]
# _URI_PATTERN, checked without a regex scan of every character (data references are long paths, and
# the pattern constraint was most of the schema's cost): the same verdict, error type and message for
# ASCII text; a URI with any other character gets its own problem, `uri_not_ascii`.
_URI_FORBIDDEN_ASCII = "\t\n\x0b\x0c\r ?#@"  # what `_has_any` looks for, one byte search each
URI_NOT_ASCII = "uri_not_ascii"


def _uri(value: str, info: ValidationInfo) -> str:
    checked = info.context.get(CHECKED_URIS) if isinstance(info.context, dict) else None
    if checked is not None and id(value) in checked:
        return value  # this very string passed `checked_uris`
    if not value.isascii():
        raise PydanticCustomError(URI_NOT_ASCII, "A URI must be ASCII: an internationalised host name in its xn-- "
                                                 "form, any other character percent-encoded")
    end = value.find("://")
    if not (end > 0 and value[:end] in _URI_SCHEMES and len(value) > end + 3 and value.isprintable()
            and not _has_any(value)):
        raise PydanticCustomError("string_pattern_mismatch", "String should match pattern '{pattern}'",
                                  {"pattern": _URI_PATTERN})
    return value


def _has_any(text: str) -> bool:  # a byte search per character of _URI_FORBIDDEN_ASCII, no generator
    return ("\t" in text or "\n" in text or "\x0b" in text or "\x0c" in text or "\r" in text or " " in text
            or "?" in text or "#" in text or "@" in text)


CHECKED_URIS = "ito.checked_uris"  # the validation context's key for `checked_uris`
_URI_PREFIXES = tuple(f"{scheme}://" for scheme in _URI_SCHEMES)


def checked_uris(document: Any, *, controls_possible: bool = True) -> frozenset[int]:
    """The ids of the strings at a manifest's URI fields (data[].uri, data[].decontamination.report,
    checkpoints.storage) that `_uri` accepts, checked all at once: one byte search per forbidden
    character over all of them joined, instead of nine per URI. Empty unless every one of them is
    ASCII and passes; then `_uri` checks each as usual. `controls_possible=False`: the caller knows
    from the bytes that no string holds a control character (the character rule's look at them), so
    the printability pass over the joined URIs is skipped."""
    if type(document) is not dict:
        return frozenset()
    data = document.get("data")
    refs = [ref for ref in data if type(ref) is dict] if type(data) is list else []
    found = [ref.get("uri") for ref in refs]
    found += [d.get("report") for d in [ref.get("decontamination") for ref in refs] if type(d) is dict]
    checkpoints = document.get("checkpoints")
    if type(checkpoints) is dict:
        found.append(checkpoints.get("storage"))
    uris = [uri for uri in found if type(uri) is str]
    joined = "".join(uris)
    if (not uris or not joined.isascii() or (controls_possible and not joined.isprintable())
            or not all(map(str.startswith, uris, repeat(_URI_PREFIXES))) or _has_any(joined)
            or not _URI_PREFIX_SET.isdisjoint([uri for uri in uris if len(uri) <= _LONGEST_PREFIX])):
        return frozenset()
    return frozenset(map(id, uris))


_URI_PREFIX_SET = frozenset(_URI_PREFIXES)  # a URI that is a scheme prefix and nothing more is refused
_LONGEST_PREFIX = max(map(len, _URI_PREFIXES))  # only a URI this short can be one (hashing long ones costs)


Uri = Annotated[
    str,
    Field(min_length=6, max_length=2048, json_schema_extra={"pattern": _URI_PATTERN},
          description=f"A stable location: scheme one of {', '.join(_URI_SCHEMES)}; printable ASCII only "
                      "(internationalised host names in their xn-- form); no credentials, query string or "
                      "fragment."),
    AfterValidator(_uri),
]
# A label (a model, dataset, method or eval-suite name) is words separated by single spaces: no space
# at either end, no run of spaces, no other kind of space (no-break, ideographic ...). Padding is how a
# label could push its text to where the review's own lines are (problem class `whitespace`).
_SPACES = "\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000"  # Unicode's space separators (Zs)
_LABEL_PATTERN = f"^[^{_SPACES}]+(?: [^{_SPACES}]+)*$"
WHITESPACE = "whitespace"
Label = Annotated[str, Field(min_length=1, max_length=200, pattern=_LABEL_PATTERN)]
_LABEL_RE = re.compile(_LABEL_PATTERN)


def _unpadded(labels: list[str]) -> list[str]:
    """The label rule for a whole list of labels (the eval suites, a manifest's most numerous strings:
    pydantic's pattern check costs ~0.1 us a label). One look at them all: ASCII labels joined by
    single spaces, with a space before and after, hold no two spaces in a row exactly when none of
    them starts or ends with a space or holds two in a row -- the only ways an ASCII label misses the
    pattern (`min_length` refuses an empty one). Anything else is checked label by label, with
    pydantic's own error for each label that misses."""
    joined = "\n".join(labels)
    if joined.isascii() and (" " not in joined or "  " not in f" {joined.replace(chr(10), ' ')} "):
        return labels  # (a label holding a newline only makes the look stricter)
    missed = [InitErrorDetails(type=PydanticCustomError("string_pattern_mismatch", "String should match pattern "
                                                        "'{pattern}'", {"pattern": _LABEL_PATTERN}),
                               loc=(index,), input=label)
              for index, label in enumerate(labels) if not _LABEL_RE.fullmatch(label)]
    if missed:
        raise ValidationError.from_exception_data("Labels", missed)
    return labels


# A list of labels: each bounded on its own, the pattern checked for the list at once (`_unpadded`).
_ListedLabel = Annotated[str, Field(min_length=1, max_length=200, json_schema_extra={"pattern": _LABEL_PATTERN})]
Labels = Annotated[list[_ListedLabel], AfterValidator(_unpadded)]


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
    eval_suites: Labels = Field(min_length=1, max_length=100,
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


# Every key of a review, for `review_sources` (a test keeps this complete).
REVIEW_KEYS = ("model name parameter_count size revision target data uri decontamination method eval_suites report "
               "checked_at post_training budget ceiling_usd max_incremental_cost_usd checkpoints interval_steps "
               "retain_last storage description")


def review_sources(review: dict[str, Any], strings: str) -> tuple[str, ...]:
    """Strings in which every key and string of `review` occurs, for the egress (`LocalTree`):
    `strings` (`review_strings`) holds all of them but the description and the data revisions."""
    revisions = "\n".join(ref["revision"] or "" for ref in review["data"])
    return strings, review["description"] or "", revisions, REVIEW_KEYS


def verbatim_sources(content: bytes, review: dict[str, Any]) -> str | None:
    """For a manifest that passed gate 2 and holds no backslash: its text, then the review's derived
    strings (the size and the two amounts as the review writes them). JSON without a backslash has no
    escape, so every string of the manifest stands in its text as it is, and every string of the
    review is in this one text: the egress checks it instead of a joined copy of the review's strings
    (`review_strings`). None when the manifest holds a backslash."""
    if b"\\" in content:  # one byte search
        return None
    budget = review["budget"]
    return "\n".join((content.decode("utf-8"), review["model"]["size"], budget["ceiling_usd"],
                      budget["max_incremental_cost_usd"]))


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
    as in `checked_uris`."""
    trimmed, left_out = trim_unknown_keys(document, TrainingManifest, {}, keep=MAX_SCHEMA_PROBLEMS)
    try:
        return TrainingManifest.model_validate(trimmed, strict=True, context={
            CHECKED_URIS: checked_uris(trimmed, controls_possible=controls_possible)})
    except ValidationError as exc:
        count = exc.error_count() + left_out
        if exc.error_count() > _MANY_PROBLEMS:
            deeper, _ = trim_unknown_keys(trimmed, TrainingManifest, _NESTED_MODELS, keep=MAX_SCHEMA_PROBLEMS)
            try:
                TrainingManifest.model_validate(deeper, strict=True)
            except ValidationError as fewer:
                exc = fewer
        return _SchemaRefusal(count, _schema_problems(exc))


_MANY_PROBLEMS = 256


def _invalid_json(exc: strict_json.StrictJSONError) -> ManifestRefusal:
    return ManifestRefusal(
        ErrorCode.MANIFEST_INVALID_JSON, f"The manifest is not strict JSON: {exc.reason}.", check="json"
    )


def parse_manifest(content: bytes) -> TrainingManifest:
    """Strict JSON -> secret scan -> character rule -> schema, or raise `ManifestRefusal`.

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
    return validated


class DigestedManifest(BaseModel):
    """A manifest that passed gate 2: the bytes, their digest, and the parsed content."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    file: FileBytes
    manifest: TrainingManifest

    _summary: dict[str, Any] | None = PrivateAttr(default=None)

    @property
    def sha256(self) -> str:
        return self.file.sha256

    def summary(self) -> dict[str, Any]:
        """What the digest shows: the path, the digest, the review and its text. Made once, by the
        first caller (`digest_manifest_file(summarize=True)`: in the thread that digested the bytes,
        which has the document's objects in its cache and keeps the event loop free)."""
        if self._summary is None:
            self._summary = self._summarize()
        return self._summary

    def _summarize(self) -> dict[str, Any]:
        review = self.manifest.review()
        content = self.file.content
        printable = _ascii_printable(content)
        text = verbatim_sources(content, review)
        strings = review_strings(review) if text is None else text
        sources = review_sources(review, strings) if text is None else (text, REVIEW_KEYS)
        return {
            "path": self.file.path,
            "sha256": self.file.sha256,
            "size_bytes": self.file.size_bytes,
            "schema_version": SCHEMA_VERSION,
            "review": LocalTree(review, sources=sources, ascii_printable=printable),
            "review_text": LocalText(review_text(review, self.file.sha256, ascii_printable=printable), strings=strings,
                                     ascii_printable=printable),
        }


def _ascii_printable(content: bytes) -> bool:
    """For a manifest that passed gate 2: ASCII bytes without a `\\u` escape decode to ASCII strings,
    in which the character rule left no control character but tab and newline (in the description)."""
    return content.isascii() and (b"\\" not in content or b"\\u" not in content)  # one byte first: memchr


def digest_manifest_file(
    path: object, settings: ManifestSettings, *, hooks: ReadHooks | None = None, summarize: bool = False
) -> DigestedManifest:
    """Gate 2: read once, securely; parse strictly; scan; validate. The file is never read twice.
    `summarize`: make the summary now, too."""
    file = read_regular_file(path, max_bytes=settings.max_bytes, roots=settings.roots, hooks=hooks)
    digested = DigestedManifest(file=file, manifest=parse_manifest(file.content))
    if summarize:
        digested.summary()
    return digested


if __name__ == "__main__":  # python -m ito_training_mcp.manifest > schemas/ito.training.manifest.v1.schema.json
    import json
    import sys

    sys.stdout.write(json.dumps(manifest_json_schema(), indent=2, sort_keys=True) + "\n")
