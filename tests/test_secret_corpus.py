"""The scanner against its corpus: every covered format found with its kind, in every place and
disguise; legitimate manifest text never reported; the rule table, both engines and the docs agree.

No test here measures time; bench/ does (as ratios).
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from ito_training_mcp import secret_engine, secret_rules, secret_scan
from ito_training_mcp.secret_rules import RULES

from .secret_corpus import BENIGN_KEYS, BENIGN_VALUES, EVASIONS, SECRETS, Example

REPO = Path(__file__).resolve().parent.parent
ENGINES = [secret_engine.default_engine(), secret_engine.python_engine()]
ANCHOR_PASSES = [secret_engine.default_engine(), secret_engine.re2_only_engine(), secret_engine.python_engine()]


def _ids(examples: list[Example]) -> list[str]:
    return [e.name for e in examples]


def _kinds_with(engine: secret_engine.Engine, text: str) -> set[str]:
    clean = secret_scan.normalize(text)
    assert clean is not None
    return secret_scan._kinds(engine, engine.prepare(clean))


# ---------------------------------------------------------------------------- found, with the right kind


@pytest.mark.parametrize("example", SECRETS + EVASIONS, ids=_ids(SECRETS + EVASIONS))
def test_every_format_is_found_with_its_kind(example: Example) -> None:
    assert example.kind in secret_scan.value_kinds(example.text)


@pytest.mark.parametrize("example", SECRETS, ids=_ids(SECRETS))
@pytest.mark.parametrize("where", ["start", "middle", "end", "quoted", "assigned", "line"])
def test_found_inside_longer_text(example: Example, where: str) -> None:
    text = {
        "start": f"{example.text} was pasted here by mistake",
        "middle": f"see ({example.text}) for the mirror",
        "end": f"the value is {example.text}",
        "quoted": f"'{example.text}'",
        "assigned": f"export VALUE={example.text}",
        "line": f"first line\n{example.text}\nlast line",
    }[where]
    assert example.kind in secret_scan.value_kinds(text)


@pytest.mark.parametrize("example", SECRETS, ids=_ids(SECRETS))
def test_found_in_a_document_with_its_pointer_and_never_echoed(example: Example) -> None:
    doc = {"description": "fine", "data": [{"name": "a"}, {"name": "b", "notes": ["ok", example.text]}]}
    findings = secret_scan.scan(doc, source=json.dumps(doc))
    assert secret_scan.Finding("/data/1/notes/1", example.kind) in findings
    assert all(example.text not in json.dumps(f.as_dict()) for f in findings)


@pytest.mark.parametrize("example", SECRETS[::7], ids=_ids(SECRETS[::7]))
def test_found_in_a_key_which_is_then_masked(example: Example) -> None:
    doc = {"model": {example.text: 1, "name": "x"}}
    assert secret_scan.Finding("/model/*", example.kind, in_key=True) in secret_scan.scan(doc)


def test_every_rule_has_an_example_that_it_finds() -> None:
    """Each of the rules is exercised: some corpus credential matches it and no other rule of its kind."""
    engine = secret_engine.default_engine()
    covered = set()
    for example in SECRETS:
        clean = secret_scan.normalize(example.text)
        assert clean is not None
        data = engine.prepare(clean)
        covered |= {i for i in range(len(RULES)) if RULES[i].kind == example.kind and engine.rule_match(i, data)}
    assert sorted(set(range(len(RULES))) - covered) == []


def test_at_least_forty_provider_formats() -> None:
    generic = {"jwt", "bearer_token", "authorization_header", "basic_auth", "cookie_header", "url_userinfo",
               "userinfo_without_scheme", "signed_url", "credential_assignment", "private_key"}
    assert len({rule.kind for rule in RULES} - generic) >= 40


@pytest.mark.parametrize("example", SECRETS, ids=_ids(SECRETS))
def test_every_match_contains_an_anchor_of_its_rule(example: Example) -> None:
    """The first tier only looks for anchors: a format whose match lacked one would never be found."""
    engine = secret_engine.python_engine()
    clean = secret_scan.normalize(example.text)
    assert clean is not None
    for index, rule in enumerate(RULES):
        match = engine.rule_match(index, clean)
        if match is None:
            continue
        matched = clean[match[0]:match[1]]
        folded = matched.lower() if rule.fold else matched
        assert any((a.lower() if rule.fold else a) in folded for a in rule.anchors), (rule.kind, example.name)


# ---------------------------------------------------------------------------- never reported


@pytest.mark.parametrize("text", BENIGN_VALUES)
def test_legitimate_text_is_not_reported(text: str) -> None:
    assert secret_scan.value_kinds(text) == []
    doc = {"description": text, "data": [{"name": text, "uri": text}]}
    assert secret_scan.scan(doc, source=json.dumps(doc)) == []
    assert secret_scan.scan(doc) == []


@pytest.mark.parametrize("key", BENIGN_KEYS)
def test_legitimate_key_names_are_not_reported(key: str) -> None:
    assert not secret_scan.credential_key_name(key)
    doc = {"model": {key: 1}}
    assert secret_scan.scan(doc, source=json.dumps(doc)) == []


def _example_manifests() -> list[Path]:
    return sorted([*REPO.glob("examples/*.json"), *REPO.glob("examples/**/*.json")])


@pytest.mark.parametrize("path", _example_manifests(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_file_passes(path: Path) -> None:
    content = path.read_bytes()
    assert secret_scan.scan(json.loads(content), source=content) == []
    assert secret_scan.scan(json.loads(content)) == []


# ---------------------------------------------------------------------------- key names


@pytest.mark.parametrize(
    "key",
    ["password", "db_password", "DB_PASSWORD", "dbPassword", "apiKey", "APIKey", "api-keys", "hf_token", "HF_TOKEN",
     "accessToken", "client_secret", "clientSecrets", "private_key", "Set-Cookie", "Authorization", "credentials",
     "passphrase", "Passwort", "kennwort", "mot_de_passe", "contraseña", "senha", "пароль", "数据库密码",
     "パスワード", "secret", "secretAccessKey", "x-api-key", "clave_api", "chave-api", "api_schlüssel"],
)
def test_credential_key_names_in_many_forms_and_languages(key: str) -> None:
    assert secret_scan.credential_key_name(key)
    assert secret_scan.Finding(f"/{key}" if re.fullmatch(r"[A-Za-z0-9_.-]+", key) else "/*", "credential_key_name",
                               in_key=True) in secret_scan.scan({key: "x"})


def test_every_credential_word_and_pair_contains_a_key_stem() -> None:
    """Keys are only looked at where a stem occurs; a credential name without one would never be seen."""
    names = [*secret_rules.CREDENTIAL_WORDS, *(f"{a}_{b}" for a, b in secret_rules.CREDENTIAL_PAIRS),
             *secret_rules.UNSPACED_CREDENTIAL_WORDS]
    for name in names:
        assert any(stem.lower() in name.lower() for stem in secret_rules.KEY_NAME_STEMS), name
        assert secret_scan.credential_key_name(name), name


def test_a_key_followed_by_much_whitespace_is_still_a_key() -> None:
    text = '{"password"' + " " * 100 + ': "x"}'
    assert secret_scan.scan(json.loads(text), source=text) == [
        secret_scan.Finding("/password", "credential_key_name", in_key=True)]


# ---------------------------------------------------------------------------- the two engines, the table, the docs


@pytest.mark.parametrize("example", SECRETS + EVASIONS, ids=_ids(SECRETS + EVASIONS))
def test_both_engines_agree_on_credentials(example: Example) -> None:
    kinds = [_kinds_with(engine, example.text) for engine in ENGINES]
    assert kinds[0] == kinds[1]


def test_both_engines_agree_on_legitimate_text() -> None:
    for text in BENIGN_VALUES + BENIGN_KEYS:
        assert [_kinds_with(engine, text) for engine in ENGINES] == [set(), set()], text
        clean = secret_scan.normalize(text)
        assert clean is not None
        assert [engine.key_name_match(engine.prepare(clean)) is None for engine in ENGINES].count(True) in (0, 2)


@pytest.mark.parametrize("example", SECRETS, ids=_ids(SECRETS))
def test_every_anchor_pass_finds_the_string_holding_a_credential(example: Example) -> None:
    """Hyperscan (when installed), RE2 and Python find the first anchor in the same string."""
    text = json.dumps({"a": ["plain text", "more plain text"], "b": example.text})
    if "\\" in text:  # escapes: the scan walks the document instead
        return
    positions = []
    for engine in ANCHOR_PASSES:
        data = engine.prepare(text)
        at = engine.next_ascii_anchor(data, 0)
        assert at >= 0
        positions.append(text.rfind('"', 0, at))
    assert len(set(positions)) == 1


def test_patterns_use_only_syntax_both_engines_read_alike() -> None:
    forbidden = re.compile(r"\(\?[=!<]|\\[1-9]|\\[sSwWdDbB]")
    for rule in RULES:
        assert not forbidden.search(rule.pattern), rule.kind
        re.compile(secret_rules.for_python(rule.pattern))
    assert not forbidden.search(secret_rules.KEY_NAME)


def test_invisible_characters_cover_every_format_character() -> None:
    covered = {c for low, high in secret_rules.INVISIBLE_RANGES for c in range(low, high + 1)}
    format_chars = {c for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"}
    assert format_chars <= covered


def test_the_covered_formats_table_in_the_threat_model_matches_the_rules() -> None:
    text = (REPO / "docs" / "threat-model.md").read_text(encoding="utf-8")
    section = text.split("## Covered formats", 1)[1].split("\n## ", 1)[0]
    kinds_in_doc = set(re.findall(r"^\| `([a-z0-9_]+)` \|", section, re.MULTILINE))
    assert kinds_in_doc == {rule.kind for rule in RULES} | {"credential_key_name", secret_scan.HIDDEN,
                                                            secret_scan.UNEXAMINED}


# ---------------------------------------------------------------------------- normalisation


def test_too_many_kinds_of_invisible_character_is_reported_not_cleaned() -> None:
    text = "a".join(chr(c) for c in range(0xE0041, 0xE0041 + 20))
    assert secret_scan.value_kinds(text) == [secret_scan.HIDDEN]
    assert secret_scan.scan({"description": text}) == [secret_scan.Finding("/description", secret_scan.HIDDEN)]


def test_nul_inside_a_string_neither_hides_a_token_nor_joins_two_strings() -> None:
    token = SECRETS[[e.name for e in SECRETS].index("github-classic")].text
    assert "github_token" in secret_scan.value_kinds(token[:3] + "\x00" + token[3:])
    doc: dict[str, Any] = {"a": ["x" + token[:4], token[4:] + "\x00"]}
    assert secret_scan.scan(doc) == []
