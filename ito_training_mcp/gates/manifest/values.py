"""The manifest's value types, and three value rules checked once for the whole manifest, not per value.

The rules: a URI's (scheme, printable ASCII, no space, query, fragment or `@`), a check date's (a
real calendar date, YYYY-MM-DD), and the label rule inside a list of eval suites (words separated by
single spaces). Run by pydantic as one Python call per value, they cost about a microsecond each,
and a manifest holds up to 256 data references with two URIs, a date and up to 100 labels each. Here
each rule looks at all of its values at once (`problems_of_valid`). Only when that look finds
something is each value checked on its own, to say where.

The verdicts are pydantic's own: the same error type, message and location that a per-value
validator gives, and only where that validator would have run: a URI or label that already fails
its type or length gets no second error. `merged` puts these errors among pydantic's in document
order. `manifest.TrainingManifest` runs all of this in one wrap validator, so the rules hold for
every manifest that is validated, however it is validated. (A `DataRef` validated on its own does
not check them; nothing does that.)
"""

from __future__ import annotations

import functools
import heapq
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Set
from datetime import date
from decimal import Decimal, InvalidOperation
from itertools import chain, compress, islice, repeat
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainSerializer, SkipValidation, ValidationError, WithJsonSchema
from pydantic_core import InitErrorDetails, PydanticCustomError

Loc = tuple[str | int, ...]

URI_SCHEMES = ("s3", "gs", "az", "hf", "https", "ito")
# Printable ASCII after the scheme, but for space, `?`, `#` and `@`: a URI the person reads is the URI
# used, with no look-alike letter from another script and nothing invisible (internationalised host
# names in their xn-- form, other non-ASCII percent-encoded).
URI_PATTERN = r"^(s3|gs|az|hf|https|ito)://[\x21\x22\x24-\x3e\x41-\x7e]+$"
URI_MIN, URI_MAX = 6, 2048
URI_NOT_ASCII = "uri_not_ascii"
_URI_PREFIXES = tuple(f"{scheme}://" for scheme in URI_SCHEMES)
_URI_PREFIX_SET = frozenset(_URI_PREFIXES)  # a URI that is a scheme prefix and nothing more is refused
_LONGEST_PREFIX = max(map(len, _URI_PREFIXES))  # only a URI this short can be one (hashing long ones costs)

DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DATE_RE = re.compile(DATE_PATTERN)

# A label (a model, dataset, method or eval-suite name) is words separated by single spaces: no space
# at either end, no run of spaces, no other kind of space (no-break, ideographic ...). Padding is how a
# label could push its text to where the review's own lines are (problem class `whitespace`).
_SPACES = "\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000"  # Unicode's space separators (Zs)
LABEL_PATTERN = f"^[^{_SPACES}]+(?: [^{_SPACES}]+)*$"
LABEL_MIN, LABEL_MAX = 1, 200
SUITES_MIN, SUITES_MAX = 1, 100
DATA_MAX = 256  # data references: beyond it pydantic reports the length alone and validates no item
_LABEL_RE = re.compile(LABEL_PATTERN)
# The same, one by one: a search for each is faster than a class (a text that cannot hold one,
# Latin-1 for all but the first, is settled at once).
_OTHER_SPACE_CHARS = tuple(chr(c) for c in (0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000))


# ---------------------------------------------------------------------------- the types

MONEY_MAX = Decimal("100000000.00")
_MONEY_PATTERN = r"^(0|[1-9][0-9]{0,8})(\.[0-9]{1,2})?$"
_MONEY_RE = re.compile(_MONEY_PATTERN)


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


# The URI, check-date and eval-suite label rules are checked for the whole manifest at once (below,
# from `TrainingManifest`'s wrap validator); these types carry the rest.
IsoDate = Annotated[str, SkipValidation, WithJsonSchema({"type": "string", "format": "date"})]
Uri = Annotated[
    str,
    Field(min_length=URI_MIN, max_length=URI_MAX, json_schema_extra={"pattern": URI_PATTERN},
          description=f"A stable location: scheme one of {', '.join(URI_SCHEMES)}; printable ASCII only "
                      "(internationalised host names in their xn-- form); no credentials, query string or "
                      "fragment."),
]
WHITESPACE = "whitespace"  # the problem class of a label that misses LABEL_PATTERN
Label = Annotated[str, Field(min_length=LABEL_MIN, max_length=LABEL_MAX, pattern=LABEL_PATTERN)]
# A list of eval suites: each label's type and longest length checked here; that it is not empty and
# the pattern, with the whole manifest (a mebibyte holds 100,000 empty labels, one error each).
_ListedLabel = Annotated[str, Field(max_length=LABEL_MAX, json_schema_extra={"minLength": LABEL_MIN,
                                                                              "pattern": LABEL_PATTERN})]
Labels = list[_ListedLabel]



# ---------------------------------------------------------------------------- one value

def uri_error(value: str) -> PydanticCustomError | None:
    """The URI rule for one string of an allowed length: the verdict, type and message that pydantic's
    `pattern` would give for ASCII text; a URI with any other character is `uri_not_ascii`."""
    if not value.isascii():
        return PydanticCustomError(URI_NOT_ASCII, "A URI must be ASCII: an internationalised host name in its xn-- "
                                                  "form, any other character percent-encoded")
    end = value.find("://")
    if not (end > 0 and value[:end] in URI_SCHEMES and len(value) > end + 3 and value.isprintable()
            and not _has_any(value)):
        return PydanticCustomError("string_pattern_mismatch", "String should match pattern '{pattern}'",
                                   {"pattern": URI_PATTERN})
    return None


def _has_any(text: str, *, controls: bool = True) -> bool:  # a byte search per forbidden character
    return ((controls and ("\t" in text or "\n" in text or "\x0b" in text or "\x0c" in text or "\r" in text))
            or " " in text or "?" in text or "#" in text or "@" in text)


def date_problem(value: object) -> str | None:
    """What is wrong with a check date (any JSON value), as the gate has always said it."""
    if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
        return "must be a date in YYYY-MM-DD form"
    if not _calendar_date(value):
        return "must be a real calendar date"
    return None


@functools.lru_cache(maxsize=1024)  # a manifest's references mostly share one check date
def _calendar_date(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


_LABEL_ERROR = PydanticCustomError("string_pattern_mismatch", "String should match pattern '{pattern}'",
                                   {"pattern": LABEL_PATTERN})
_EMPTY_LABEL = PydanticCustomError("string_too_short", "String should have at least {min_length} character",
                                   {"min_length": LABEL_MIN})
_DATE_ERRORS = {problem: PydanticCustomError("value_error", "Value error, {error}", {"error": problem})
                for problem in ("must be a date in YYYY-MM-DD form", "must be a real calendar date")}


# ---------------------------------------------------------------------------- all values at once

def uris_pass(uris: list[str], *, controls_possible: bool = True) -> bool:
    """Do all of these URIs (each of an allowed length) pass? One byte search per forbidden character
    over all of them joined, instead of nine per URI. `controls_possible=False`: the caller knows
    from the bytes that no string holds a control character, so the printability pass is skipped."""
    joined = "".join(uris)
    return (joined.isascii() and (not controls_possible or joined.isprintable())
            and all(map(str.startswith, uris, repeat(_URI_PREFIXES)))
            and not _has_any(joined, controls=controls_possible)
            and _URI_PREFIX_SET.isdisjoint([uri for uri in uris if len(uri) <= _LONGEST_PREFIX]))


def labels_pass(labels: Iterable[str], joined: str | None = None, *, lists: list[list[str]] | None = None,
                other_spaces_possible: bool = True) -> bool:
    """Is every one of these labels (strings) not empty, and does it match the label pattern? False
    says "look at each", not "one misses". `joined`: the same labels joined by a line break, if the
    caller has it; `lists`: the lists they come from, if the caller has them.
    `other_spaces_possible=False`: the caller knows from the bytes that every string shows as itself
    (a space separator other than the plain space never does), so that look is skipped.

    Labels with no space separator but the plain one, joined by single spaces, with a space before
    and after, hold no two spaces in a row exactly when none of them is empty, starts or ends with a
    space or holds two in a row, the only ways such a label can miss. Without any space at all,
    only an empty label can (a look at each label's length, cheaper than copying the text)."""
    if lists is None:
        lists = [labels if isinstance(labels, list) else list(labels)]
    if joined is None:
        joined = "\n".join(chain.from_iterable(lists))
    if other_spaces_possible and _holds_other_space(joined, chain.from_iterable(lists)):
        return False
    if " " not in joined:
        return all(map(all, lists))  # no empty one
    return "  " not in f" {joined.replace(chr(10), ' ')} "


# Where a rule's value is: its location, which rule (URI, DATE or SUITES), and the value.
Place = tuple[Loc, str, Any]
URI, DATE, SUITES = "uri", "date", "suites"


class ManyErrors(Exception):
    """pydantic's errors, carried out of the model's validator as they are: raised back through
    pydantic, tens of thousands of them cost as much again to convert. Only when a `Tally` asks for it
    (`merge_many=False`: the gate, which looks again with less)."""

    def __init__(self, exc: ValidationError) -> None:
        super().__init__("many errors")
        self.exc = exc


class Tally:
    """How many problems of these rules to make into errors (`limit`; the gate shows the first 20),
    and how many more were found (`left_out`): a manifest of 256 references with 100 bad labels each
    would otherwise cost tens of thousands of error objects, to show twenty."""

    def __init__(self, limit: int | None = None, *, merge_many: bool = True, cap: int | None = None) -> None:
        self.limit = limit
        self.left_out = 0
        self.merge_many = merge_many  # False: among many of pydantic's errors, count these, do not merge them
        self.unmerged = False  # they were counted and not merged: the caller must look again
        # Past `cap` problems the rules stop looking (`capped`): the count is then a lower bound. The
        # first `limit` are the same either way: the rules look in document order.
        self.cap = cap
        self.capped = False


def problems_of_valid(uris: list[str], dates: list[Any], suites: list[list[str]],
                      places: Callable[[], Iterable[Place]], *, controls_possible: bool = True,
                      tally: Tally | None = None, labels_text: str | None = None,
                      other_spaces_possible: bool = True) -> list[InitErrorDetails]:
    """The problems of a manifest whose every other constraint passed (so every URI and label is a
    string of an allowed length, every list of suites of an allowed length): nothing, after one look
    at each rule's values, unless that look finds something; then `problems_at(places())` for the
    rules whose look did, which must name the very values looked at. `labels_text`: the labels of
    `suites` joined by a line break, if the caller has them so."""
    looking = set()
    if not uris_pass(uris, controls_possible=controls_possible):
        looking.add(URI)
    if not (all(type(d) is str for d in dates) and all(date_problem(d) is None for d in set(dates))):
        looking.add(DATE)
    if not labels_pass(chain.from_iterable(suites), labels_text, lists=suites,
                       other_spaces_possible=other_spaces_possible):
        looking.add(SUITES)
    return problems_at(places(), tally, looking, look_first=False) if looking else []


RULES = frozenset({URI, DATE, SUITES})


def problems_at(places: Iterable[Place], tally: Tally | None = None, rules: Set[str] = RULES, *,
                look_first: bool = True) -> list[InitErrorDetails]:
    """Each value's own verdict for these `rules`, in the order of `places` (document order), where its
    per-value validator would have run: a URI or label only when it is a string of an allowed length
    (a label in a list of an allowed length, whatever the other labels are); a date always. With a
    `tally`, only its `limit` are made into errors and the rest are counted in it, up to its `cap`.
    `look_first`: one look at each rule's values first, and each value's own only for a rule whose
    look finds something (False: the caller has looked)."""
    places = places if isinstance(places, list) else list(places)
    if look_first:
        rules = _rules_to_locate(places, rules)
    limit, cap = (None, None) if tally is None else (tally.limit, tally.cap)
    found: list[InitErrorDetails] = []
    left_out = 0

    def add(loc: Loc, error: PydanticCustomError, value: Any) -> bool:
        """Keep or count one problem; False once past the cap (look no further)."""
        nonlocal left_out
        if limit is None or len(found) < limit:
            found.append(InitErrorDetails(type=error, loc=loc, input=value))
        else:
            left_out += 1
        return cap is None or len(found) + left_out <= cap

    capped = False
    for loc, rule, value in places:
        if rule not in rules:
            continue
        if rule == URI:
            if _string(value, URI_MIN, URI_MAX) and (error := uri_error(value)) is not None:
                capped = not add(loc, error, value)
        elif rule == DATE:
            if (problem := date_problem(value)) is not None:
                capped = not add(loc, _DATE_ERRORS[problem], value)
        elif isinstance(value, list) and SUITES_MIN <= len(value) <= SUITES_MAX:
            capped = not all(add((*loc, i), error, value[i]) for i, error in label_problems(value))
        if capped:
            break
    if tally is not None:
        tally.left_out += left_out
        tally.capped = tally.capped or capped
    return found


def _rules_to_locate(places: list[Place], rules: Set[str]) -> set[str]:
    """Of these rules, those whose one look at all of their values (as in `problems_of_valid`, and
    only at what the rule judges) finds something."""
    failing = set()
    if URI in rules:
        uris = [value for _, rule, value in places if rule == URI and isinstance(value, str)
                and URI_MIN <= len(value) <= URI_MAX]
        if not uris_pass(uris):
            failing.add(URI)
    if DATE in rules:
        dates = [value for _, rule, value in places if rule == DATE]
        if not (all(isinstance(d, str) for d in dates) and all(date_problem(d) is None for d in set(dates))):
            failing.add(DATE)
    if SUITES in rules:
        lists = [value for _, rule, value in places if rule == SUITES and isinstance(value, list)
                 and SUITES_MIN <= len(value) <= SUITES_MAX]
        try:
            labels = list(chain.from_iterable(lists))
            # (a str subclass may answer for its truth or length otherwise than its text: each is
            # looked at on its own)
            passed = set(map(type, labels)) <= {str} and labels_pass(labels, "\n".join(labels))
        except TypeError:  # not all strings
            passed = False
        if not passed:
            failing.add(SUITES)
    return failing


def label_problems(value: list[Any]) -> Iterator[tuple[int, PydanticCustomError]]:
    """Where a list of eval suites of an allowed length holds labels that are empty or miss the label
    pattern, and which, in order, lazily: among the labels pydantic takes as strings (of at most
    LABEL_MAX characters, text), whatever the other labels are."""
    if not set(map(type, value)) <= _NOT_STR_SUBCLASSES:  # read a str subclass as the text pydantic reads
        value = [str.__str__(label) if isinstance(label, str) else label for label in value]
    try:
        text = "\n".join(value)  # all strings?
    except TypeError:
        kept = [i for i, label in enumerate(value) if _string(label, 0, LABEL_MAX)]
        labels = [value[i] for i in kept]
        return iter(()) if labels_pass(labels) else ((kept[i], _label_error(labels[i])) for i in _misses(labels))
    if labels_pass(value, text):  # none is empty or misses: then none of those taken as labels either
        return iter(())
    return ((i, _label_error(value[i])) for i in _misses(value) if _string(value[i], 0, LABEL_MAX))


_NOT_STR_SUBCLASSES = frozenset({str, int, float, Decimal, bool, type(None), dict, list})


def _label_error(label: str) -> PydanticCustomError:
    return _LABEL_ERROR if label else _EMPTY_LABEL


def _misses(labels: list[str]) -> list[int]:
    """Which of these labels (strings) are empty or would miss the label pattern: those that start or
    end with a space, hold two in a row, or hold a space separator other than the plain space (only
    a label that is not ASCII can). Three searches per label, instead of the pattern over every
    character."""
    misses = [i for i, label in enumerate(labels) if not label or label[0] == " " or label[-1] == " " or "  " in label]
    if other := _other_spaced(labels):
        misses = sorted(set(misses).union(other))
    return misses


def _other_spaced(labels: list[str]) -> list[int]:
    """Which of these labels hold a space separator other than the plain space: one look at them all
    together first."""
    if not _holds_other_space("".join(labels), labels):
        return []
    return [i for i, label in enumerate(labels) if not label.isascii() and _holds_other_space(label)]


def _holds_other_space(text: str, labels: Iterable[str] | None = None) -> bool:
    """Does `text` (these `labels` joined, if given) hold a space separator other than the plain
    space? A text of Latin-1 alone can hold only U+00A0 (the others are settled at once); one that
    is printable (line breaks aside) holds none; otherwise there is a search for each, of only the
    labels that are not ASCII."""
    if text.isascii():
        return False
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        pass
    else:
        return "\xa0" in text
    if (text.replace("\n", " ") if "\n" in text else text).isprintable():
        return False  # each of them is a space separator, which Python does not call printable (one pass)
    if labels is not None:
        odd = list(labels)
        text = "".join(compress(odd, map(operator.not_, map(str.isascii, odd))))
    return any(space in text for space in _OTHER_SPACE_CHARS)


def _string(value: Any, shortest: int, longest: int) -> bool:
    """Does pydantic take `value` as a string of this length (a str, and text: no lone surrogate)?"""
    return isinstance(value, str) and shortest <= len(value) <= longest and _is_text(value)


def _labels(value: Any) -> bool:
    """Does pydantic take `value` as a list of eval suites: a list of allowed length, of strings
    (text, no lone surrogate) of at most LABEL_MAX characters? In C, a pass each."""
    if not isinstance(value, list) or not SUITES_MIN <= len(value) <= SUITES_MAX:
        return False
    if not all(map(isinstance, value, repeat(str))):
        return False
    return max(map(len, value)) <= LABEL_MAX and _is_text("".join(value))


def places_in(document: Any) -> list[Place]:
    """Every URI, check date and list of eval suites of a manifest document, located, in document
    order; whatever is not where it should be is left out (pydantic reports it there)."""
    places: list[Place] = []
    if not isinstance(document, dict):
        return places
    data = document.get("data")
    for index, ref in enumerate(data if isinstance(data, list) and len(data) <= DATA_MAX else ()):
        if not isinstance(ref, dict):
            continue
        if "uri" in ref:
            places.append((("data", index, "uri"), URI, ref["uri"]))
        d = ref.get("decontamination")
        if isinstance(d, dict):
            at = ("data", index, "decontamination")
            places += [((*at, key), rule, d[key]) for key, rule in _DECONTAMINATION if key in d]
    checkpoints = document.get("checkpoints")
    if isinstance(checkpoints, dict) and "storage" in checkpoints:
        places.append((("checkpoints", "storage"), URI, checkpoints["storage"]))
    return places


_DECONTAMINATION = (("eval_suites", SUITES), ("report", URI), ("checked_at", DATE))  # in the model's order


def trim_refused_labels(document: Any, *, keep: int, stop_after: int | None = None) -> tuple[Any, int, bool]:
    """`document` (a parsed JSON document) with the eval-suite labels that pydantic refuses as such
    (not a string, text or of an allowed length: one error each) left out past the first `keep` of
    them in document order, how many were left out, and whether it stopped looking. Every label left
    out would have been reported after those `keep` (and so would every problem after it, wherever
    it now stands), so the first `keep` problems and, with this count, the total stay what
    validating the whole document gives; 25,600 numbers in place of labels no longer cost 25,600
    error objects. A list left with no label at all holds `PLACEHOLDER` (a label with no problem),
    so that it is not refused as empty. Past `stop_after` refused labels (at least `keep`), every
    later list of eval suites is replaced by that placeholder unseen: the count is then a lower
    bound, and the first `keep` problems are still those of the whole. Nothing is copied unless
    something is left out."""
    if type(document) is not dict or type(data := document.get("data")) is not list or len(data) > DATA_MAX:
        return document, 0, False
    seen = left_out = 0
    stopped = False
    copied: list[Any] | None = None
    for index, ref in enumerate(data):
        if type(ref) is not dict or type(d := ref.get("decontamination")) is not dict:
            continue
        suites = d.get("eval_suites")
        if type(suites) is not list or not SUITES_MIN <= len(suites) <= SUITES_MAX:
            continue
        room = max(0, keep - seen)
        if stopped:
            kept: list[Any] = []
        elif str not in set(map(type, suites)):  # no label at all (numbers, say): every one refused, in C
            kept, refused = suites[:room], len(suites)
        elif _labels(suites):
            continue
        elif room:  # among the first `keep`: which ones, to keep them where they are
            at = _refused(suites)
            dropped = set(at[room:])
            kept, refused = [label for i, label in enumerate(suites) if i not in dropped], len(at)
        else:  # past them: all go
            kept = _accepted(suites)
            refused = len(suites) - len(kept)
        if not stopped:
            seen += refused
            if refused <= room:
                continue
            left_out += refused - room
            stopped = stop_after is not None and seen > stop_after
        if copied is None:
            copied = list(data)
        copied[index] = {**ref, "decontamination": {**d, "eval_suites": kept or [PLACEHOLDER]}}
    return (document, 0, stopped) if copied is None else ({**document, "data": copied}, left_out, stopped)


PLACEHOLDER = "x"  # a label the schema takes as it is


def _refused(labels: list[Any]) -> list[int]:
    """Where in this list are the labels pydantic refuses as such."""
    return [i for i, label in enumerate(labels) if not _string(label, 0, LABEL_MAX)]


def _accepted(labels: list[Any]) -> list[str]:
    """The labels of this list that pydantic takes as such, in order: in C when those refused are
    not strings (the many that a hostile list holds), else one by one."""
    strings = list(compress(labels, map(isinstance, labels, repeat(str))))
    if not strings or (max(map(len, strings)) <= LABEL_MAX and _is_text("".join(strings))):
        return strings
    return [label for label in strings if _string(label, 0, LABEL_MAX)]


def _is_text(value: str) -> bool:
    """Is this string text (no lone surrogate), as pydantic takes a string?"""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# ---------------------------------------------------------------------------- among pydantic's errors

def merged(title: str, exc: ValidationError, ours: list[InitErrorDetails],
           order: Callable[[Loc], tuple[int, ...]], tally: Tally | None = None) -> ValidationError:
    """pydantic's errors and these (in document order, as `problems_at` makes them) in one, in
    document order (`order` of each location; pydantic's own keep their order). With a `tally`, the
    first `limit` of them, the rest counted in it."""
    theirs: list[InitErrorDetails] = []
    for error in exc.errors(include_url=False):
        again = InitErrorDetails(type=error["type"], loc=error["loc"], input=error["input"])
        if "ctx" in error:
            again["ctx"] = error["ctx"]
        theirs.append(again)
    both = heapq.merge(((order(e["loc"]), 0, i, e) for i, e in enumerate(theirs)),
                       ((order(e["loc"]), 1, i, e) for i, e in enumerate(ours)))
    kept = [e for *_, e in islice(both, None if tally is None else tally.limit)]  # keys made as the merge goes
    if tally is not None:
        tally.left_out += len(theirs) + len(ours) - len(kept)
    return ValidationError.from_exception_data(title, kept)
