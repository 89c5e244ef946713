"""The scanner's bounded mode and its probes of long strings.

A bounded scan is only ever asked for a document that will be refused anyway (the manifest gate
asks for one when the schema refused the document). It may report a string as `unexamined`
instead of searching it; it never reports a credential kind that the full scan would not, and it
never silently drops one: whatever the full scan finds, the bounded scan reports too, or reports
`unexamined` for that string. Small documents are never cut short. The probes of a long string
(first anchor, then any other format's anchor) give the full scan's answer when they settle it.
"""

from __future__ import annotations

import copy
import json
import random
import unicodedata
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ito_training_mcp import scan_strings, secret_engine, secret_scan, text_normal
from ito_training_mcp.envelope import ErrorCode
from ito_training_mcp.errors import ManifestRefusal
from ito_training_mcp.gates.manifest import schema as manifest
from ito_training_mcp.secret_rules import KEY_NAME_STEMS, RULES
from ito_training_mcp.secret_scan import HIDDEN, LONG_STRING, UNEXAMINED, Finding

from .conftest import EXAMPLE_MANIFEST
from .secret_corpus import BENIGN_VALUES, SECRETS
from .test_secret_scan_properties import documents

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ANCHORS = sorted({a for rule in RULES for a in rule.anchors} | set(KEY_NAME_STEMS))
EXAMPLE: dict[str, Any] = json.loads(EXAMPLE_MANIFEST.read_bytes())
ENGINES = [secret_engine.default_engine(), secret_engine.python_engine()]


def full_kinds(text: str) -> set[str]:
    """Every rule an anchor calls for, searched one by one: the reference for the probes."""
    engine = secret_engine.default_engine()
    clean = secret_scan.normalize(text)
    assert clean is not None
    data = engine.prepare(clean)
    return {RULES[i].kind for i in engine.anchored_rules(data) if engine.rule_match(i, data) is not None}


@SETTINGS
@given(documents)
def test_a_small_document_is_never_cut_short(document: Any) -> None:
    text = json.dumps(document)
    assert secret_scan.scan(document, source=text, bounded=True) == secret_scan.scan(document, source=text)


# Long texts: filler (benign words, anchors, separators) repeated past LONG_STRING, a credential in it or not.
fillers = st.lists(st.sampled_from([*BENIGN_VALUES[:20], *ANCHORS, " ", "\n", "=", ":", "/", "a", "0", "ß", "ｇｈ"]),
                   min_size=1, max_size=6).map(" ".join)


@st.composite
def long_texts(draw: st.DrawFn) -> str:
    filler = draw(fillers)
    repeat = LONG_STRING // max(1, len(filler)) + 2
    text = filler * repeat
    if draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + " " + draw(st.sampled_from(SECRETS)).text + " " + text[at:]
    return text


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(long_texts())
def test_a_long_string_is_reported_fully_or_as_unexamined(text: str) -> None:
    full = full_kinds(text)
    assert set(secret_scan.value_kinds(text)) == full  # unbounded: the probes only ever shortcut
    bounded = {f.kind for f in secret_scan.scan({"description": text}, bounded=True)}
    if UNEXAMINED in bounded:
        assert bounded - {UNEXAMINED} <= full
    else:
        assert bounded == full


def test_a_long_string_with_one_credential_is_examined_and_found() -> None:
    token = next(e for e in SECRETS if e.name == "github-classic").text
    text = "plain words without any marker " * (LONG_STRING // 16) + token
    document = {"description": text, "unknown": 1}
    assert secret_scan.scan(document, bounded=True) == [Finding("/description", "github_token")]


def test_a_long_string_holding_every_anchor_is_unexamined() -> None:
    text = " ".join(ANCHORS) * (LONG_STRING // 1000)
    assert secret_scan.scan({"description": text}, bounded=True) == [Finding("/description", UNEXAMINED)]
    assert UNEXAMINED not in secret_scan.value_kinds(text)  # outside a bounded scan, searched in full


def test_a_long_string_with_invisible_characters_is_unexamined_not_cleaned() -> None:
    token = next(e for e in SECRETS if e.name == "github-classic").text
    text = "a\u200d" * LONG_STRING + " " + token[:5] + "\u200b" + token[5:]
    assert secret_scan.scan({"description": text}, bounded=True) == [Finding("/description", UNEXAMINED)]
    assert "github_token" in secret_scan.value_kinds(text)


def test_a_long_string_that_is_not_normal_is_normalised_only_when_it_is_normal_already() -> None:
    """NFKC of a long text in neither form costs ten passes and more: in a bounded scan, full-width
    text where no anchor could stand once normalised is passed over as it stands (nothing found);
    full-width anchors are reported unexamined rather than normalised; a long text that is normal
    already (CJK) is still searched, and its credential named."""
    full_width = str.maketrans({c: chr(ord(c) + 0xFEE0) for c in map(chr, range(0x21, 0x7F))})
    plain = ("evaluation suite held out " * (LONG_STRING // 20)).translate(full_width)
    assert secret_scan.scan({"description": plain}, bounded=True) == []
    anchors = ("ghp password token secret " * (LONG_STRING // 20)).translate(full_width)
    assert secret_scan.scan({"description": anchors}, bounded=True) == [Finding("/description", UNEXAMINED)]
    token = next(e for e in SECRETS if e.name == "github-classic").text
    cjk = "模型训练数据 " * (LONG_STRING // 6) + token
    assert secret_scan.scan({"description": cjk}, bounded=True) == [Finding("/description", "github_token")]
    full_width_token = cjk[:-len(token)] + token.translate(full_width)  # NFKC spells the token
    assert secret_scan.scan({"description": full_width_token}, bounded=True) == [Finding("/description", UNEXAMINED)]
    assert "github_token" in secret_scan.value_kinds(full_width_token)  # unbounded: normalised and named


def test_the_work_bound_reports_the_strings_left_unsearched() -> None:
    """Many strings that each call for many formats (half a mebibyte): past the bound they are
    reported as unexamined; what the bounded scan does report as found, the full scan finds too."""
    rng = random.Random(3)
    strings = [" ".join(rng.sample(ANCHORS, 40)) for _ in range(2000)]
    document = {"items": strings}
    text = json.dumps(document, ensure_ascii=False)
    bounded = secret_scan.scan(document, source=text, bounded=True)
    full = secret_scan.scan(document, source=text)
    assert all(f.kind != UNEXAMINED for f in full)
    assert any(f.kind == UNEXAMINED for f in bounded) and any(f.kind != UNEXAMINED for f in bounded)
    assert {f for f in bounded if f.kind != UNEXAMINED} <= set(full)


# ---------------------------------------------------------------------------- through the gate


def test_a_valid_manifest_is_scanned_in_full_whatever_its_strings_hold() -> None:
    """Bounded scans are for refused documents only: a valid manifest full of anchors is accepted."""
    document = copy.deepcopy(EXAMPLE)
    document["description"] = " ".join(a for a in ANCHORS if a.isascii())[:2000]
    for ref in document["data"]:
        ref["decontamination"]["eval_suites"] = [" ".join(ANCHORS[i:i + 8])[:200] for i in range(0, 96, 8)]
    manifest.parse_manifest(json.dumps(document, ensure_ascii=False).encode())


def test_a_refused_manifest_with_a_mebibyte_of_every_anchor_names_the_string() -> None:
    document = {**EXAMPLE, "description": (" ".join(ANCHORS) + " ") * 700}
    with pytest.raises(ManifestRefusal) as caught:
        manifest.parse_manifest(json.dumps(document, ensure_ascii=False).encode())
    assert caught.value.code is ErrorCode.MANIFEST_SECRET
    assert caught.value.details["findings"] == [{"pointer": "/description", "kind": UNEXAMINED, "in_key": False}]


# ---------------------------------------------------------------------------- the probes, in both engines

probe_texts = st.one_of(fillers, st.sampled_from(SECRETS).map(lambda e: e.text),
                        st.tuples(fillers, st.sampled_from(SECRETS).map(lambda e: e.text), fillers).map(" ".join),
                        st.tuples(fillers, st.sampled_from(["\u200b", "\u200d", "\ufeff", "\u00ad"]), fillers).map("".join))


@SETTINGS
@given(probe_texts, st.sampled_from(range(len(RULES))))
def test_both_engines_probe_alike(text: str, rule: int) -> None:
    clean = secret_scan.normalize(text)
    assert clean is not None
    answers = []
    for engine in ENGINES:
        data = engine.prepare(clean)
        first = engine.rule_anchor(data)
        other = engine.other_rule_anchor(frozenset({rule}), data)
        combined = engine.rule_or_other(frozenset({rule}), frozenset({rule}), data, 0)
        raw = engine.prepare(text)  # before normalisation: invisible characters may still be there
        either = engine.invisible_or_rule_anchor(raw)
        # positions differ in unit (bytes or characters): compare what they name
        answers.append((None if first is None else (clean[:len(data[:first[0]])] if isinstance(data, str)
                                                    else data[:first[0]].decode(), first[1]),
                        other >= 0, None if combined is None else combined[0],
                        None if either is None else either[1]))
    assert answers[0] == answers[1]
    anchored = secret_engine.default_engine().anchored_rules(secret_engine.default_engine().prepare(clean))
    assert (answers[0][0] is None) == (not anchored)
    if answers[0][0] is not None:
        assert answers[0][0][1] <= anchored
    assert answers[0][1] == bool(anchored - {rule})


def test_an_invisible_character_that_only_normalisation_makes_is_seen_too() -> None:
    """NFKC turns the half-width Hangul filler U+FFA0 into U+1160, which is invisible."""
    text = "가나다 " * (LONG_STRING // 4) + "\uffa0"
    assert secret_scan.scan({"description": text}, bounded=True) == [Finding("/description", UNEXAMINED)]
    assert secret_scan.scan({"description": text[:-1]}, bounded=True) == []


@pytest.mark.parametrize("accent", ["\u00e9", "e"], ids=["non-ascii", "ascii"])
def test_the_look_at_the_raw_text_leaves_the_walk_its_budget(accent: str) -> None:
    """From an attacker review: a bounded scan of a non-ASCII text spent its budget on the raw text's
    anchors before the walk, so a credential in a key after sixty anchor-filled strings came out
    `unexamined` instead of named. The walk of a non-ASCII text now starts afresh, as it did before
    that look existed (an ASCII text's walk always shared it)."""
    anchors = " ".join(sorted({a for rule in RULES for a in rule.anchors})) + " "
    value = (anchors * (2000 // len(anchors) + 1))[:2000]
    assert secret_scan.value_kinds(value) == []
    token = "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    document: dict[str, Any] = json.loads(EXAMPLE_MANIFEST.read_bytes())
    document["notes"] = [value.replace("secret", "secreT") + str(i) for i in range(60)]
    document[(token + " " + accent * 2000)[:2000]] = 1
    text = json.dumps(document, ensure_ascii=False)
    bounded = secret_scan.scan(document, source=text, bounded=True)
    kinds = {f.kind for f in bounded if f.pointer == "/*"}
    if accent != "e":
        assert bounded == secret_scan.scan(document, bounded=True)
        assert kinds == {"github_token"}
    else:
        assert kinds <= {"github_token", UNEXAMINED} and kinds


def test_the_table_of_non_starters_is_unicodes() -> None:
    """The run search's characters are exactly those of a non-zero combining class and those whose
    decomposition begins with one, all of them in the planes it looks at."""
    import unicodedata

    def begins_with_non_starter(c: int) -> bool:
        decomposed = unicodedata.normalize("NFKD", chr(c)) if not 0xD800 <= c <= 0xDFFF else ""
        return bool(unicodedata.combining(chr(c))) or bool(decomposed and unicodedata.combining(decomposed[0]))

    table = {c for low, high in text_normal._non_starter_ranges() for c in range(low, high + 1)}
    assert table == {c for c in range(0x110000) if begins_with_non_starter(c)}
    assert max(table) <= text_normal._LAST_PLANE_WITH_NON_STARTERS


@pytest.mark.parametrize("starter", ["\u0f73", "\u0f75", "\u0f81", "\uff9e", "\uff9f"])
def test_starters_that_decompose_to_non_starters_make_a_run(starter: str) -> None:
    """From an attacker review: 30,000 U+0F73 (each two non-starters decomposed) took NFKC 4 s."""
    run = text_normal.COMBINING_RUN_MAX
    assert not text_normal.long_combining_run("a" + starter * run + "a")
    assert text_normal.long_combining_run("a" + starter * (run + 1) + "a")
    assert text_normal.long_combining_run("a" + (starter + "\u0301") * 16 + "a")
    assert text_normal.normalize(starter * 30_000) is None  # reported, not normalised (seconds, before)


@pytest.mark.parametrize("mark", ["\u0301", "\u0316", "\u3099", "\U0001e944", "\u05b0"])
def test_a_run_of_combining_marks_is_long_past_thirty(mark: str) -> None:
    run = text_normal.COMBINING_RUN_MAX
    for base in ("a", "\u00e9", "\u4e2d", "\U0001f600"):
        assert not text_normal.long_combining_run(base + mark * run + base)
        assert text_normal.long_combining_run(base + mark * (run + 1) + base)
    assert not text_normal.long_combining_run("d\u00e9j\u00e0 " * 1000)


@pytest.mark.parametrize("escaped", [False, True], ids=["raw", "escaped"])
def test_a_long_run_of_combining_marks_is_reported_not_normalised(escaped: bool) -> None:
    """From an attacker review: NFKC sorts a run of combining marks in time quadratic in its length
    (a 160 KB manifest of one run took 7 s, blocking the event loop). A string with a run longer
    than Unicode's stream-safe 30 is not normalised: it is reported as hidden, at its pointer."""
    document: dict[str, Any] = json.loads(EXAMPLE_MANIFEST.read_bytes())
    document["notes"] = ["plain", "a" + "\u0301\u0316" * 20_000]
    with pytest.raises(ManifestRefusal) as refused:
        manifest.parse_manifest(json.dumps(document, ensure_ascii=escaped).encode())
    assert refused.value.code is ErrorCode.MANIFEST_SECRET
    assert refused.value.details["findings"] == [{"pointer": "/notes/1", "kind": secret_scan.HIDDEN, "in_key": False}]
    assert secret_scan.value_kinds(document["notes"][1]) == [secret_scan.HIDDEN]


@pytest.mark.parametrize("padding", [0, 5000], ids=["short", "long"])
def test_runs_joined_by_removing_invisible_characters_are_runs(padding: int) -> None:
    """From an attacker review: runs of twenty combining marks between zero-width spaces became one
    run when the spaces were removed, and NFKC of 84,000 such characters took 7 s. The run is
    counted again after the removal: past thirty in a row the string is reported, not normalised."""
    pieces = "\u0301\u0316" * 5 + "\u200b"  # ten marks, then a zero-width space
    base = "x" * padding + "a"
    assert text_normal.normalize(base + pieces * 3) is not None  # thirty in a row once joined
    assert text_normal.normalize(base + pieces * 4) is None  # forty
    assert secret_scan.scan({"notes": [base + pieces * 4, "fine"]}) == [Finding("/notes/0", HIDDEN)]
    long_one = "a" + ("\u0301\u0316" * 10 + "\u200b") * 4000
    assert secret_scan.scan({"notes": long_one}) == [Finding("/notes", HIDDEN)]  # seconds, before


# ---------------------------------------------------------------------------- the bounded walk in slices

FULL_WIDTH = str.maketrans({c: chr(ord(c) + 0xFEE0) for c in map(chr, range(0x21, 0x7F))})


def _nfkc_counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The characters the scanner's NFKC is asked to normalise, call by call."""
    counted: list[int] = []
    real = text_normal.nfkc
    monkeypatch.setattr(text_normal, "nfkc", lambda text, *rest: counted.append(len(text)) or real(text, *rest))
    return counted


def test_a_bounded_walk_normalises_only_the_slices_it_reaches(monkeypatch: pytest.MonkeyPatch) -> None:
    """From this round's benchmark: 600 strings of full-width anchors (every anchor but its last
    letter), a refused manifest. The walk stops once its budget is spent and twenty strings are
    reported unexamined; the strings after those were normalised all the same (7 ms of 16). Taken a
    slice at a time, they are not, and the answer is the one the walk gave in one piece."""
    spelt = " ".join(a[:-1].translate(FULL_WIDTH) for a in ANCHORS if len(a) >= 4) + " "
    document = {"notes": [spelt[:560]] * 600}
    text = json.dumps(document, ensure_ascii=False)
    counted = _nfkc_counted(monkeypatch)
    sliced = secret_scan.scan(document, source=text, bounded=True)
    total = sum(len(s) for s in document["notes"])
    assert 0 < sum(counted) < total // 2
    assert len(sliced) == secret_scan.MAX_FINDINGS and {f.kind for f in sliced} == {UNEXAMINED}
    monkeypatch.setattr(secret_scan, "FIRST_SLICE", 1 << 30)  # in one piece
    counted.clear()
    assert secret_scan.scan(document, source=text, bounded=True) == sliced
    assert sum(counted) >= total


@pytest.mark.parametrize("tail", ["", "\u0301", "\u30cf\u3099"], ids=["alone", "acute", "voiced-kana"])
def test_a_bounded_walk_pays_for_what_normalising_makes(tail: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """From this round's attacker reviews: strings of U+FDFA (NFKC makes each eighteen characters)
    after strings of anchors cost a refusal 225x the parse of its bytes; with a combining mark after
    each, every slice was decomposed whole and then mostly left out, which the budget did not see
    (48x). Each slice is charged what it made; once the budget is spent, the strings left that could
    hold a finding are reported unexamined without being normalised, and U+FDFA could hold none."""
    anchors = ["x " + anchor + " \u00e9" for anchor in ANCHORS[:70]] + [" ".join(ANCHORS) + " \u00e9"]
    document = {"notes": [*anchors, *["\ufdfa" * 100 + tail] * 3000]}
    text = json.dumps(document, ensure_ascii=False)
    secret_scan.scan(document, source=text, bounded=True)  # the tables built before counting
    made: list[int] = []  # what normalising made, character by character: NFKD and NFKC alike
    real = unicodedata.normalize
    monkeypatch.setattr(unicodedata, "normalize", lambda form, t: made.append(len(out := real(form, t))) or out)
    findings = secret_scan.scan(document, source=text, bounded=True)
    assert findings and {f.kind for f in findings} == {UNEXAMINED}
    assert sum(made) < 18 * 100 * 3000 // 4  # the U+FDFA strings, all of them made, would be 5.4 million
    assert all(int(f.pointer.rsplit("/", 1)[1]) < len(anchors) for f in findings)  # U+FDFA is no place


def test_the_strings_left_are_not_searched_for_invisible_characters_the_source_cannot_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the budget is spent, the strings left are reported where a place or an invisible character
    stands. The manifest gate knows when the bytes hold no invisible character (its character rule
    looks first); without escapes no string does then, and the search for them (2 ns a byte where
    most characters begin as one does: U+FDFA's bytes as U+FEFF's) is spared. The answer is the same."""
    anchors = ["x " + anchor + " \u00e9" for anchor in ANCHORS[:70]] + [" ".join(ANCHORS) + " \u00e9"]
    document = {"notes": [*anchors, *["\ufdfa" * 100] * 3000]}
    text = json.dumps(document, ensure_ascii=False)
    expected = secret_scan.scan(document, source=text, bounded=True)
    assert expected and {f.kind for f in expected} == {UNEXAMINED}
    searched: list[str] = []  # the searches run over the strings left
    real = secret_scan.texts_found
    monkeypatch.setattr(secret_scan, "texts_found", lambda search, data: searched.append(search.__name__)
                        or real(search, data))
    assert secret_scan.scan(document, source=text, bounded=True, source_invisible_free=True) == expected
    assert "invisible" not in searched and searched
    searched.clear()
    assert secret_scan.scan(document, source=text, bounded=True) == expected
    assert "invisible" in searched


def test_cleaning_a_string_on_its_own_is_charged_what_normalising_it_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    """From the benchmark: strings of a refused list, each NUL and a thousand characters NFKC changes,
    are cleaned one by one (NUL is the walk's separator); each cost a hundred microseconds and was
    charged as searching nine kilobytes, so the budget paid for all of them (20x the baseline). Each
    is charged what its NFKC cost now, and the budget stops the cleaning well before the end."""
    changed = [chr(c) for c in range(0xA0, 0x30000) if unicodedata.decomposition(chr(c))
               and unicodedata.normalize("NFKC", chr(c)) != chr(c)
               and unicodedata.normalize("NFKC", chr(c)).isprintable()][:1000]
    document = {"notes": ["\x00" + "".join(random.Random(i).sample(changed, len(changed))) for i in range(300)]}
    text = json.dumps(document, ensure_ascii=False)
    secret_scan.scan(document, source=text, bounded=True)  # the tables built before counting
    cleaned: list[int] = []
    real = scan_strings.normalize
    monkeypatch.setattr(scan_strings, "normalize", lambda t, **kw: cleaned.append(len(t)) or real(t, **kw))
    findings = secret_scan.scan(document, source=text, bounded=True)
    assert findings and {f.kind for f in findings} == {UNEXAMINED}
    assert len(cleaned) < len(document["notes"]) // 4  # charged as searching only, 212 were (33 now)


slice_strings = st.one_of(
    st.sampled_from([*BENIGN_VALUES[:10], "模型训练数据，评估集", "ｅｖａｌ", "ﬁne", "Tiếng Việt", "token: ",
                     "password=", "パスワード："]),
    st.sampled_from(SECRETS).map(lambda e: e.text),
    st.sampled_from(SECRETS).map(lambda e: e.text.translate(FULL_WIDTH)),
    st.sampled_from(ANCHORS).map(lambda a: a.translate(FULL_WIDTH) + " 模型"),
)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.lists(slice_strings, min_size=1, max_size=4).map(" ".join), min_size=2, max_size=150),
       st.sampled_from([64, 512, 1 << 30]))
def test_a_bounded_walk_in_slices_finds_what_the_full_scan_finds_or_says_unexamined(
        strings: list[str], first_slice: int) -> None:
    """Slices made small so that a list of a few kilobytes is taken in many: what the bounded scan
    names, the full scan names too; while it reports fewer than MAX_FINDINGS strings, every string
    the full scan names is reported, with that kind or as unexamined."""
    document = {"notes": strings}
    text = json.dumps(document, ensure_ascii=False)
    full = secret_scan.scan(document, source=text)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(secret_scan, "FIRST_SLICE", first_slice)
        monkeypatch.setattr(secret_scan, "LAST_SLICE", max(first_slice, 2048))
        bounded = secret_scan.scan(document, source=text, bounded=True)
    assert {f for f in bounded if f.kind != UNEXAMINED} <= set(full)
    if len(bounded) < secret_scan.MAX_FINDINGS:
        reported = {f.pointer for f in bounded}
        assert {f.pointer for f in full} <= reported


def test_a_full_walk_normalises_only_the_slices_it_reaches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full scan (a manifest the schema accepts) walks its strings a slice at a time too: once it
    has MAX_FINDINGS strings to report, the slices after them are never normalised (3,000 labels in
    Cyrillic with marks out of canonical order, which NFKC reorders, a credential in each of the first
    thirty: the walk used to normalise all of them, a refusal at 9x the parse). The answer is the
    one the walk gives in one piece."""
    secret = next(e.text for e in SECRETS if e.kind == "github_token")
    notes = [f"\u043c\u0430\u0483\u05b0\u0442 {i} " * 4 + (secret if i < 30 else "eval suite") for i in range(3000)]
    document = {"notes": notes}
    text = json.dumps(document, ensure_ascii=False)
    assert not _holds_invisible(text)  # (as the manifest gate tells the scan: `source_invisible_free`)
    counted = _nfkc_counted(monkeypatch)
    sliced = secret_scan.scan(document, source=text, source_invisible_free=True)
    total = sum(map(len, notes))
    assert {f.pointer for f in sliced} == {f"/notes/{i}" for i in range(secret_scan.MAX_FINDINGS)}
    assert 0 < sum(counted) < total // 4
    monkeypatch.setattr(secret_scan, "FIRST_SLICE", 1 << 30)  # in one piece
    counted.clear()
    assert secret_scan.scan(document, source=text, source_invisible_free=True) == sliced
    assert sum(counted) >= total


def _holds_invisible(text: str) -> bool:
    from ito_training_mcp.secret_rules import INVISIBLE_RANGES

    return any(low <= ord(char) <= high for char in text for low, high in INVISIBLE_RANGES)


# Strings the walk reports before it reaches them, those of the whole list at once: more kinds of
# invisible character than it cleans, and a run of combining marks too long to normalise.
_MANY_KINDS = "".join(map(chr, [0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0xAD, 0x34F, 0x180E, 0xFE0F, 0x2061, 0x2062,
                                0x2063, 0x2064, 0x61C]))
HIDDEN_STRINGS = [f"ab{_MANY_KINDS}cd", "x" + "\u0301" * 40]


def test_a_full_walk_reports_hidden_strings_as_in_one_piece() -> None:
    """From an attacker review of this round: thirty credentials and then strings with too many kinds
    of invisible character (or too long a run of marks) that the walk reports first, those of the
    whole list. Taken a slice at a time, the credentials came first: the full scan of such a list
    goes in one piece, with or without the text, and names what it named before."""
    for hidden in HIDDEN_STRINGS:
        for count in (30, 400):
            document = {"v": [f"\u00e9 password: Hunt3r{i:04d}xq" for i in range(count)]
                        + [f"{hidden}{i}" for i in range(20)]}
            text = json.dumps(document, ensure_ascii=False)
            for source in (None, text):
                found = secret_scan.scan(document, source=source)
                assert {f.kind for f in found} == {HIDDEN}, (count, ascii(hidden))
                assert {f.pointer for f in found} == {f"/v/{count + i}" for i in range(20)}


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.lists(st.one_of(slice_strings, st.sampled_from(HIDDEN_STRINGS)), min_size=1, max_size=4)
                .map(" ".join), min_size=2, max_size=150),
       st.sampled_from([64, 512]), st.booleans())
def test_a_full_walk_in_slices_finds_what_it_finds_in_one_piece(strings: list[str], first_slice: int,
                                                                 repeated: bool) -> None:
    """Slices made small: the full scan names the same strings with the same kinds as when it takes
    its strings in one piece (each distinct string once, where most repeat), strings it reports
    before it reaches them among them; told that the text holds no invisible character where that
    is so, as the manifest gate tells it."""
    document = {"notes": strings * 3 if repeated else strings}
    text = json.dumps(document, ensure_ascii=False)
    clean = not _holds_invisible(text)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(secret_scan, "FIRST_SLICE", 1 << 30)
        whole = secret_scan.scan(document, source=text, source_invisible_free=clean)
        monkeypatch.setattr(secret_scan, "FIRST_SLICE", first_slice)
        monkeypatch.setattr(secret_scan, "LAST_SLICE", max(first_slice, 2048))
        assert secret_scan.scan(document, source=text, source_invisible_free=clean) == whole
        assert secret_scan.scan(document) == whole
