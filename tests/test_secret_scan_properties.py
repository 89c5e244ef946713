"""Properties of the secret scanner on generated input: it never raises, it finds known credentials
in any surrounding text, and its whole-document shortcuts (strings joined with NUL, the raw JSON
text) report exactly what checking every key and string on its own would report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ito_training_mcp import secret_scan, text_kinds, text_normal
from ito_training_mcp.gates.manifest.characters import may_hold_forbidden
from ito_training_mcp.secret_scan import HIDDEN, Finding

from .secret_corpus import BENIGN_KEYS, BENIGN_VALUES, SECRETS

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Any text, including lone surrogates (which a JSON escape can produce) and invisible characters.
any_text = st.text(st.one_of(st.characters(), st.sampled_from(["\ud800", "\udfff", "\u200d", "\x00", "\ufeff"])),
                   max_size=80)
trigger_text = st.lists(st.sampled_from(["ghp_", "sk-", "AKIA", "eyJ", "://", "@", ":", "=", "?", "&", "Bearer ", "basic ",
                                        "password", "token", "a", "Z", "0", "9", "-", "_", ".", "/", " ", "\n", "\u200d"]),
                       max_size=40).map("".join)
secrets = st.sampled_from(SECRETS)
separators = st.sampled_from([" ", "\n", "\t", ", ", "; ", " (", ") ", " [", "] ", " <", "> ", " | "])
plain = st.text(st.characters(blacklist_categories=("Cf", "Cs", "Cc", "Mn", "Me")), max_size=60)


@SETTINGS
@given(st.one_of(any_text, trigger_text))
def test_value_kinds_and_key_names_never_raise(text: str) -> None:
    kinds = secret_scan.value_kinds(text)
    assert kinds == sorted(set(kinds))
    assert isinstance(secret_scan.credential_key_name(text), bool)


@SETTINGS
@given(secrets, plain, plain, separators, separators)
def test_a_known_credential_is_found_in_any_surrounding_text(example: Any, before: str, after: str, left: str,
                                                             right: str) -> None:
    kinds = secret_scan.value_kinds(before + left + example.text + right + after)
    assert example.kind in kinds or kinds == [HIDDEN]


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(BENIGN_VALUES),
                         secrets.map(lambda e: e.text), plain, trigger_text)
json_keys = st.one_of(st.sampled_from(BENIGN_KEYS), st.sampled_from(["password", "apiKey", "hf_token", "Passwort"]),
                      secrets.map(lambda e: e.text), plain, trigger_text)
documents = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                               st.dictionaries(json_keys, inner, max_size=5)),
                         max_leaves=25)


def _reference(document: Any) -> set[Finding]:
    """Every key and every string checked on its own, pointers built for every member."""
    found: set[Finding] = set()
    if isinstance(document, str):
        found |= {Finding("", kind) for kind in secret_scan.value_kinds(document)}

    def key_kinds(key: str) -> list[str]:
        kinds = secret_scan.value_kinds(key)
        return kinds or (["credential_key_name"] if secret_scan.credential_key_name(key) else [])

    def token(key: str) -> str:
        shaped = any(k != "credential_key_name" for k in key_kinds(key))
        plain_key = secret_scan._PLAIN_KEY.fullmatch(key) is not None
        return secret_scan.escape_pointer_token(key) if plain_key and not shaped else "*"

    def walk(node: Any, pointer: str) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for name, child in items:
            child_pointer = f"{pointer}/{token(name) if isinstance(name, str) else name}"
            if isinstance(name, str):
                found.update(Finding(child_pointer, kind, in_key=True) for kind in key_kinds(name))
            if isinstance(child, str):
                found.update(Finding(child_pointer, kind) for kind in secret_scan.value_kinds(child))
            walk(child, child_pointer)

    walk(document, "")
    return found


@SETTINGS
@given(documents, st.sampled_from([None, 2]), st.booleans())
def test_document_scan_equals_checking_every_string_alone(document: Any, indent: int | None, ascii_only: bool) -> None:
    reference = _reference(document)
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only)
    with_source = secret_scan.scan(document, source=text)
    walked = secret_scan.scan(document)
    assert with_source == walked
    encoded = text.encode("utf-8", "surrogatepass")  # the anchor search taken ahead, as gate 2's worker does
    ahead = secret_scan.scan(document, source=text, encoded=encoded,
                             first_places=lambda: (secret_scan.first_ascii_anchor(encoded), None))
    assert ahead == walked
    if not may_hold_forbidden(encoded):  # as gate 2 tells the scanner: no invisible character to look for
        assert secret_scan.scan(document, source=text, source_invisible_free=True) == walked
    expected = {Finding(f.pointer[:200], f.kind, f.in_key) for f in reference}
    # Short of the cap, every finding; at the cap (reached by findings that two masked keys make
    # alike, too: hypothesis found 19 distinct and 21 in all), only real ones.
    if len(walked) < secret_scan.MAX_FINDINGS:
        assert set(walked) == expected
    else:
        assert set(walked) <= expected


@SETTINGS
@given(secrets, st.integers(min_value=1, max_value=200))
def test_a_credential_split_across_two_strings_is_not_glued_together(example: Any, cut: int) -> None:
    cut = min(cut, len(example.text) - 1)
    halves = [example.text[:cut], example.text[cut:]]
    document = {"parts": halves}
    expected = {Finding(f"/parts/{i}", kind) for i, half in enumerate(halves) for kind in secret_scan.value_kinds(half)}
    assert set(secret_scan.scan(document, source=json.dumps(document))) == expected


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


disguised = secrets.map(lambda e: e.text).flatmap(lambda text: st.sampled_from([
    _fullwidth(text), text[:3] + "\u200d" + text[3:], "d\u00e9j\u00e0 " + text, text + " \u3000\u00e9", "\ufb01" + text]))
non_ascii_documents = st.recursive(
    st.one_of(disguised, plain, st.sampled_from(["\u00e9", "\u3000", "\u1680", "\ufb01", "\uff21", "e\u0301", "\u00e9 "])),
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(st.one_of(json_keys, disguised, plain), inner, max_size=5)),
    max_leaves=25)


@SETTINGS
@given(non_ascii_documents, st.booleans())
def test_non_ascii_text_searched_as_it_stands_finds_what_the_walk_finds(document: Any, bounded: bool) -> None:
    """A JSON text that is not ASCII is searched as it stands when it is NFKC with no invisible
    character (each string then is its own normal form); otherwise the walk decides. Either way the
    findings are the walk's, for credentials in full-width letters, with a joiner inside, or beside
    characters that NFKC changes."""
    text = json.dumps(document, ensure_ascii=False)
    assert secret_scan.scan(document, source=text, bounded=bounded) == secret_scan.scan(document, bounded=bounded)


invisible_heavy = st.lists(st.one_of(st.sampled_from(["a", "\u00e9", "e\u0301", "\uff41", "\ufb01", " ", "\x00",
                                                      "\u200b", "\u200d", "\u00ad", "\u2060", "\ufeff", "\ufe0f",
                                                      "\u3164", "\uffa0", "\U000e0041", "\u034f", "\u180e", "\u1160",
                                                      "\u2800"]), st.characters()), max_size=60).map("".join)


@SETTINGS
@given(invisible_heavy)
def test_a_short_text_is_cleaned_as_a_long_one_is(text: str) -> None:
    """`normalize` cleans a short text in two passes over its characters and a long one by searching
    from one invisible character to the next: the same text, or None for the same texts."""
    normal = __import__("unicodedata").normalize("NFKC", text)
    assert text_normal.without_invisible(normal) == text_normal.without_invisible_by_search(normal)


def test_too_many_kinds_of_invisible_character_short_or_long() -> None:
    kinds = [chr(c) for c in (0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD, 0x034F, 0x180E, 0x2061, 0x2062, 0x2063,
                              0x2064, 0xFE0F)]
    for count in (12, 13):
        text = "\u00e9" + "x".join(kinds[:count])
        short, long = text_normal.without_invisible(text), text_normal.without_invisible_by_search(text)
        assert short == long
        assert (short is None) == (count > text_normal.MAX_INVISIBLE_KINDS)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 80), st.sampled_from(["", "a", "\u00e9\u200b", "\u200c"])), min_size=1,
                max_size=60), st.integers(1, 40))
def test_a_kind_removed_by_runs_or_one_by_one_is_removed_alike(pieces: list[tuple[int, str]], repeat: int) -> None:
    """A mebibyte-long text loses one kind of invisible character by runs where most stand in runs,
    one by one otherwise: the text left is the same either way."""
    text = "".join("\u200b" * run + filler for run, filler in pieces) * repeat
    assert text_normal._removed(text, "\u200b") == text.replace("\u200b", "")
    assert text_normal._removed(text, "\u200c") == text.replace("\u200c", "")


_POOL = [chr(c) for c in (0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD, 0x034F, 0x180E, 0x2061, 0x2062, 0x2063,
                          0x2064, 0xFE0F, 0xFE00, 0xE0041, 0x13430, 0x0600, 0x1160, 0x00)]


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, len(_POOL) - 1), st.integers(1, 90), st.sampled_from(["", "a", "\u00e9", "e"])),
                min_size=1, max_size=150), st.sampled_from([1, 3, 19]), st.booleans())
def test_kinds_found_run_by_run_or_in_one_pass_clean_alike(runs: list[tuple[int, int, str]], spread: int,
                                                              nul: bool) -> None:
    """A long text's kinds are found run by run for a few steps, else in one pass; one kind that makes
    up most of the text goes first. Whichever way, the text is cleaned as character by character,
    or refused for the same number of kinds."""
    # NFKC, as the cleaning's texts are (a filler "e" and the acute after it make one character)
    text = __import__("unicodedata").normalize("NFKC", "\u0301".join(
        _POOL[kind * spread % len(_POOL)] * length + filler for kind, length, filler in runs))
    kinds = {c for c in text if c in _POOL and (nul or c != "\x00")}
    expected = None if len(kinds) > text_normal.MAX_INVISIBLE_KINDS else __import__("unicodedata").normalize(
        "NFKC", "".join(c for c in text if c not in kinds))
    if not kinds:
        expected = text
    assert text_normal.without_invisible_by_search(text, nul=nul) == expected


def test_no_invisible_character_is_notable_to_nfkc() -> None:
    """The cleaning's premise for not normalising again (`text_normal._invisible_before_notable`):
    an invisible character is a starter NFKC leaves alone and that composes with nothing before it,
    so removing it from a text in NFKC changes nothing unless a notable character stood after it."""
    from ito_training_mcp import nfkc
    from ito_training_mcp.secret_rules import INVISIBLE_RANGES

    notable = nfkc.notable()
    assert not [hex(c) for low, high in INVISIBLE_RANGES for c in range(low, high + 1) if chr(c) in notable]


_AROUND = [*"ae ", "\u00e9", "\u0301", "\u0327", "\u1100", "\u1161", "\u11a8", "\u30cf", "\u309a", "\u093c",
           "\u0915", "\u0344", "\uff41", "\u00a0"]


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(_POOL[:-1] + _AROUND), min_size=1, max_size=40), st.booleans())
def test_removing_invisible_characters_normalises_again_only_where_it_must(chars: list[str], long: bool) -> None:
    """Each text in NFKC, cleaned short and long, is what removing them and normalising again gives."""
    import unicodedata

    text = unicodedata.normalize("NFKC", "".join(chars))
    removed = "".join(c for c in text if c not in _POOL)
    kinds = {c for c in text if c in _POOL}
    expected = None if len(kinds) > text_normal.MAX_INVISIBLE_KINDS or text_normal.long_combining_run(removed) \
        else unicodedata.normalize("NFKC", removed)
    if long:
        assert text_normal.without_invisible_by_search(text) == (text if not kinds else expected)
    else:
        assert text_normal.without_invisible(text) == (text if not kinds else expected)


def test_the_look_ahead_takes_a_run_at_once() -> None:
    """Each step of the run-by-run look passes over a whole run of one invisible character (in UTF-8
    for RE2 as in text): sixty runs of a hundred are sixty steps, within the look's 64."""
    from ito_training_mcp import secret_engine

    text = ("\u200b" * 100 + "a" + "\U000e0041" * 100 + "b") * 30
    for engine in (secret_engine.default_engine(), secret_engine.python_engine()):
        data = engine.prepare(text)
        first = engine.invisible(data, 0)
        assert first is not None
        assert text_normal._kinds_ahead(engine, data, first, True, 12) == ["\u200b", "\U000e0041"]


_ANCHORED_BENIGN = ["password policy", "tokenizer", "max_tokens", "Passwort vergessen", "api-key rotation", "mmlu"]
past_the_segments = st.lists(st.one_of(secrets.map(lambda e: e.text), st.sampled_from(BENIGN_VALUES),
                                       st.sampled_from(_ANCHORED_BENIGN), trigger_text, plain), min_size=1, max_size=12)


@SETTINGS
@given(st.sampled_from(_ANCHORED_BENIGN[:5]), past_the_segments, st.booleans())
def test_past_the_strings_checked_one_by_one_one_search_tells_what_the_rule_passes_tell(
        first: str, rest: list[str], ascii_only: bool) -> None:
    """Past the strings holding an anchor that the walk checks one by one, a valid manifest's walk
    first asks one search whether any rule matches in the rest (`_nothing_more`), where the rule
    passes would pass over it once for each rule anchored there. The findings are the rule passes'
    either way: credentials at the rest's first string (the character before it read as a boundary),
    anchors of rules the checked strings never named, near misses."""
    document = {"labels": [f"{first} {i}" for i in range(text_kinds.MAX_SEGMENTS)] + rest}
    source = json.dumps(document, ensure_ascii=ascii_only)
    for text in (source, None):
        found = secret_scan.scan(document, source=text)
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setattr(secret_scan, "_nothing_more", lambda *args: False)
            assert secret_scan.scan(document, source=text) == found
    expected = {Finding(f"/labels/{i}", kind) for i, value in enumerate(document["labels"])
                for kind in secret_scan.value_kinds(value)}
    assert set(found) == expected or len(found) == secret_scan.MAX_FINDINGS


def test_one_search_past_the_checked_strings_finds_a_credential_at_the_first_string_left() -> None:
    """The rest's first string begins with a credential whose rule reads the character before it (a
    boundary): the separator before it is read, and the credential is found."""
    token = "AIza" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r"
    document = {"labels": [f"password policy {i}" for i in range(text_kinds.MAX_SEGMENTS)] + [token, "mmlu"]}
    assert [(f.pointer, f.kind) for f in secret_scan.scan(document)] == \
        [(f"/labels/{text_kinds.MAX_SEGMENTS}", "google_api_key")]


_REPEATED = st.one_of(secrets.map(lambda e: e.text), st.sampled_from(BENIGN_VALUES), st.sampled_from(_ANCHORED_BENIGN),
                      trigger_text, plain, any_text, st.sampled_from(["パスワードではないハ\u309a評価", "ｇｈｐ＿" + "Ａ" * 36,
                                                                     "tokenizerж\u0483\u05b0", "a\u0301" * 3]))


@SETTINGS
@given(st.lists(_REPEATED, min_size=1, max_size=6), st.lists(st.integers(0, 5), min_size=1, max_size=90), st.booleans())
def test_a_full_scan_walks_each_distinct_string_once_and_reports_what_walking_all_would(
        kinds_of_string: list[str], picks: list[int], ascii_only: bool) -> None:
    """A full scan walks each distinct string value once (`_locate_distinct`) and gives each finding to
    every string equal to the one found: the same findings as the walk of every string, or, past
    MAX_FINDINGS strings with findings, MAX_FINDINGS of them, each one the walk of every string
    reports, the first ones in document order."""
    labels = [kinds_of_string[pick % len(kinds_of_string)] for pick in picks]
    document = {"labels": labels, "more": list(reversed(labels))}
    source = json.dumps(document, ensure_ascii=ascii_only)
    for text in (source, None):
        found = secret_scan.scan(document, source=text)
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setattr(secret_scan, "_locate_distinct",
                                lambda engine, values, memo, budget, runs, free=False: secret_scan._locate(
                                    engine, values, False, memo, budget, None, runs, invisible_free=free))
            every = secret_scan.scan(document, source=text)
        if len({f.pointer for f in every}) < secret_scan.MAX_FINDINGS:
            assert found == every
        else:
            expected = {Finding(f"/{key}/{i}", kind) for key in document for i, value in enumerate(document[key])
                        for kind in secret_scan.value_kinds(value)}
            assert len({f.pointer for f in found}) == secret_scan.MAX_FINDINGS
            assert set(found) <= expected


def test_a_credential_in_a_list_every_reference_repeats_is_found_at_its_first_places() -> None:
    """Every reference repeats one list of labels in another script, one of which holds a credential:
    the distinct labels are walked once (their NFKC made once), and the credential is reported at the
    first MAX_FINDINGS places it stands, as the walk of every label reports it."""
    from ito_training_mcp.errors import ManifestRefusal
    from ito_training_mcp.gates.manifest import schema as manifest

    from .conftest import CANARY_GITHUB, EXAMPLE_MANIFEST

    document = json.loads(EXAMPLE_MANIFEST.read_bytes())
    labels = [f"パスワードではないハ\u309a評価 {i}" for i in range(12)]
    labels[7] = "ｔｏｋｅｎ " + "".join(chr(ord(c) + 0xFEE0) for c in CANARY_GITHUB)  # only NFKC spells it
    document["data"] = [{**document["data"][0], "name": f"shard-{r}", "decontamination": {
        **document["data"][0]["decontamination"], "eval_suites": labels}} for r in range(40)]
    content = json.dumps(document, ensure_ascii=False).encode()
    walked: list[int] = []
    real = secret_scan._locate

    def locate(engine: Any, texts: list[str], keys: bool, *args: Any, **kwargs: Any) -> Any:
        walked.append(len(texts))
        return real(engine, texts, keys, *args, **kwargs)

    def refusal() -> Any:
        with pytest.raises(ManifestRefusal) as refused:
            manifest.parse_manifest(content)
        assert refused.value.code == "MANIFEST_SECRET"
        assert CANARY_GITHUB not in json.dumps(refused.value.details)
        return refused.value.details["findings"]

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(secret_scan, "_locate", locate)
        findings = refusal()
    assert max(walked) < 12 * 40 // 2  # the distinct values, not every one
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(secret_scan, "_locate_distinct", lambda engine, values, memo, budget, runs, free=False:
                            real(engine, values, False, memo, budget, None, runs, invisible_free=free))
        assert refusal() == findings  # as the walk of every label reports it
    assert len(findings) == secret_scan.MAX_FINDINGS
    assert {f["pointer"].split("/", 3)[3] for f in findings} == {"decontamination/eval_suites/7"}


def test_a_walk_is_spared_the_search_for_invisible_characters_only_where_the_bytes_rule_them_out(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gate 2's look at the bytes finds no character the character rule forbids (every invisible one is,
    and every one whose NFKC holds one): the full walk of a valid manifest in another script, whose
    every label holds a place, does not search its normalised strings for invisible characters. An
    escape in the text could make one: then it searches."""
    from pathlib import Path

    from ito_training_mcp.gates.config import ManifestSettings
    from ito_training_mcp.gates.manifest.digest import digest_manifest_file

    told: list[bool] = []
    real = secret_scan._joined_prepared
    monkeypatch.setattr(secret_scan, "_joined_prepared", lambda *args, **kwargs: told.append(
        args[8] if len(args) > 8 else kwargs.get("invisible_free", False)) or real(*args, **kwargs))
    example = json.loads(Path("examples/manifest.json").read_text())
    labels = [f"tokens {i} " + "\u0436\ufb01\u0301\u0323" * 30 for i in range(100)]
    example["data"][0]["decontamination"]["eval_suites"] = labels
    settings = ManifestSettings(max_bytes=1 << 20, roots=(str(tmp_path),))
    digests = []
    for escaped in (False, True):
        text = json.dumps(example, ensure_ascii=False)
        if escaped:
            text = text.replace("tokens 7 \u0436", "tokens 7 \\u0436", 1)
        path = tmp_path / f"manifest-{escaped}.json"
        path.write_text(text)
        path.chmod(0o600)
        told.clear()
        digests.append(digest_manifest_file(str(path), settings).manifest)
        assert told and all(flag is not escaped for flag in told), (escaped, told)
    assert digests[0] == digests[1]
