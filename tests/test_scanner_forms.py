"""The forms credentials take in what people paste, in eight languages and in other Unicode forms; keys
and values; pointers; and `spans` on text as written.

No credential is written out here: `expand` fills each `{class count}` field with fake characters.
"""

from __future__ import annotations

import base64
import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ito_training_mcp.scanner import INVISIBLE, LIMIT, Finding, pointer, scan, scan_document, spans, text_kinds
from ito_training_mcp.scanner import is_credential_key_name as key_name
from ito_training_mcp.scanner.chars import INVISIBLE_RANGES, UNSTABLE_RANGES, WIDE_PUNCTUATION
from ito_training_mcp.scanner.rules import RULES, expand
from tests.scanner_benign_corpus import BENIGN_STRINGS

B64_PAIR = base64.b64encode(b"ml-bot:" + expand("{an20}").encode()).decode()

EVERYDAY = [
    ("netrc line", "machine api.wandb.ai login u password {hex40}", "credential_assignment"),
    ("kaggle.json", '{"username": "acme", "key": "{hex32}"}', "credential_assignment"),
    ("--password", "python train.py --password Wint3r-Sun-2026", "credential_assignment"),
    ("--api-key", "openai-cli --api-key {an32}", "credential_assignment"),
    ("--token", "huggingface-cli login --token {an40}", "credential_assignment"),
    ("docker login -p", "docker login -u ml -p {an20} registry.example.com", "credential_assignment"),
    ("curl -u", "curl -u admin:pw https://api.example.com/v1/runs", "basic_auth"),
    ("pw:", "pw: Hunter2Winter!", "credential_assignment"),
    ("token in a URL path", "https://hooks.example.com/webhooks/123456/{us48}", "url_path_token"),
    ("token as a URL segment", "https://ntfy.example.com/{an40}/publish", "url_path_token"),
    ("wandb api key", "wandb api key {hex40}", "credential_assignment"),
    ("the api key is", "the api key is {hex32}", "credential_assignment"),
    ("db password is", "db password is Hunter2Winter!", "credential_assignment"),
    ("env assignment", "export HF_TOKEN={an37}", "credential_assignment"),
    ("json pair in text", '{"x_token": "{an32}"}', "credential_assignment"),
    ("xml element", "<apiToken>{an32}</apiToken>", "credential_assignment"),
    ("setProperty", 'System.setProperty("X_TOKEN", "{an30}")', "credential_assignment"),
    ("make ?=", 'API_TOKEN ?= "{an30}"', "credential_assignment"),
    ("make ::=", 'API_TOKEN ::= "{an30}"', "credential_assignment"),
    ("camel case", 'apiToken = "{an30}"', "credential_assignment"),
]

PROSE = [
    ("en", "The database password is Hunter2Winter!"),
    ("en", "our OpenAI api key is {an32}"),
    ("de", "Das Passwort lautet Sommer2026!"),
    ("de", "Der API-Schlüssel ist {an32}"),
    ("fr", "Le mot de passe est Ete2026!x"),
    ("fr", "la clé API est {an32}"),
    ("es", "La contraseña es Verano2026!"),
    ("es", "la clave API es {an32}"),
    ("pt", "A senha é Inverno2026!"),
    ("pt", "a palavra-passe é Outono2026!"),
    ("ru", "Пароль: Zima2026!x"),
    ("ru", "пароль — Zima2026!x"),
    ("zh", "数据库密码是Hunter2Winter"),
    ("zh", "密码：Hunter2Winter！"),
    ("zh", "API密钥：{an32}"),
    ("ja", "パスワードはHunter2Winterです"),
    ("ja", "パスワード：Hunter2Winter"),
    ("ja", "APIキー：{an32}"),
]

FILES = [
    (".netrc", "machine api.wandb.ai\n  login ml\n  password {hex40}\n", "credential_assignment"),
    ("kaggle.json", '{\n  "username": "acme-ml",\n  "key": "{hex32}"\n}', "credential_assignment"),
    ("service account", '{"type": "service_account", "project_id": "acme", "private_key_id": "{hex40}", '
                        '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC{bs64}\\n'
                        '-----END PRIVATE KEY-----\\n", "client_email": "ml@acme.iam.example"}', "private_key"),
    (".pypirc", "[pypi]\nusername = __token__\npassword = pypi-AgEIcHlwaS5vcmc{us70}\n", "pypi_token"),
    (".pypirc password", "[testpypi]\nusername = ml\npassword = Wint3r-Sun-2026\n", "credential_assignment"),
    (".npmrc", "//registry.npmjs.org/:_authToken=npm_{an36}\n", "npm_token"),
    (".npmrc uuid", "//npm.example.com/:_authToken={hex8}-{hex4}-{hex4}-{hex4}-{hex12}\n", "credential_assignment"),
    ("docker auths", '{"auths": {"https://index.docker.io/v1/": {"auth": "' + B64_PAIR + '"}}}',
     "credential_assignment"),
    ("kubeconfig token", "users:\n- name: ml\n  user:\n    token: {an40}\n", "credential_assignment"),
    ("kubeconfig key", "users:\n- name: ml\n  user:\n    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo"
                       "{bs120}\n", "private_key"),
    ("PEM", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA{bs64}\n{bs64}\n-----END RSA PRIVATE KEY-----",
     "private_key"),
    ("PEM without header", "MIIEpAIBAAKCAQEA{bs64}\n{bs64}\n{bs64}", "private_key"),
    ("PKCS#8 without header", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC{bs120}", "private_key"),
    ("OpenSSH without header", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAA{bs80}", "private_key"),
    ("base64 of a PEM", "LS0tLS1CRUdJTiBPUEVOU1NIIFBSSVZBVEUgS0VZLS0tLS0K{bs120}", "private_key"),
]

URLS = [
    ("postgres", "postgres://admin:{an14}@10.0.0.5:5432/train", "url_userinfo"),
    ("mysql", "mysql://ml:{an16}@db.internal.example:3306/runs", "url_userinfo"),
    ("mongodb+srv", "mongodb+srv://svc:{an16}@cluster0.example.net/db?retryWrites=true", "url_userinfo"),
    ("redis, no user", "redis://:{an20}@cache.internal:6379/0", "url_userinfo"),
    ("amqp", "amqp://worker:{an12}@rabbit.internal:5672/%2F", "url_userinfo"),
    ("git over https", "https://oauth2:{an32}@git.example.com/acme/recipes.git", "url_userinfo"),
    ("no scheme", "root:{an12}@db.internal.example", "url_userinfo"),
    ("S3 presigned", "https://b.s3.amazonaws.com/o.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA{AU16}"
                     "%2F20261120%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature={hex64}", "signed_url"),
    ("GCS signed", "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature={hex64}",
     "signed_url"),
    ("Azure SAS", "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-12-01&sp=r&sig={bs43}%3D",
     "signed_url"),
    ("CloudFront", "https://d111.cloudfront.net/x.tar?Expires=1796000000&Signature={us64}&Key-Pair-Id=K2JCJMDEHXQW5F",
     "signed_url"),
    ("token query", "https://data.example.com/set?token={an20}", "signed_url"),
]


def _kinds(template: str) -> list[str]:
    return text_kinds(expand(template))


@pytest.mark.parametrize(("name", "template", "kind"), EVERYDAY, ids=[row[0] for row in EVERYDAY])
def test_everyday_forms(name: str, template: str, kind: str) -> None:
    assert kind in _kinds(template)
    assert kind in {f.kind for f in scan_document({"description": expand(template)})}


@pytest.mark.parametrize(("language", "template"), PROSE, ids=[f"{row[0]}-{n}" for n, row in enumerate(PROSE)])
def test_prose_in_eight_languages(language: str, template: str) -> None:
    assert "credential_assignment" in _kinds(template)


@pytest.mark.parametrize(("name", "template", "kind"), FILES, ids=[row[0] for row in FILES])
def test_credential_files_pasted_as_text(name: str, template: str, kind: str) -> None:
    assert kind in _kinds(template)


@pytest.mark.parametrize(("name", "template", "kind"), URLS, ids=[row[0] for row in URLS])
def test_connection_and_signed_urls(name: str, template: str, kind: str) -> None:
    assert kind in _kinds(template)


def test_credential_files_as_parsed_json() -> None:
    kaggle = {"kaggle": {"username": "acme-ml", "key": expand("{hex32}")}}
    assert scan_document(kaggle) == [Finding("/kaggle/key", "credential_assignment", False)]
    docker = {"auths": {"https://index.docker.io/v1/": {"auth": B64_PAIR}}}
    assert scan_document(docker) == [Finding("/auths/*/auth", "credential_assignment", False)]
    assert scan_document({"auths": {"registry.example.com": {"auth": "dXNlcjo="}}}) == []  # "user:" has no password


# ---------------------------------------------------------------------------- keys, values, pointers

def test_a_key_that_names_a_credential() -> None:
    for key in ("password", "apiKey", "HF_TOKEN", "client-secret", "Passwort", "密码", "x-api-key", "dbPassword"):
        assert key_name(key), key
        assert scan_document({"model": {key: "x"}}) == [
            Finding(pointer(["model", key]), "credential_key_name", True)]
    for key in ("max_tokens", "tokenizer", "token_budget", "secretary", "keys", "key", "pad_token", "public_key"):
        assert not key_name(key), key


def test_a_key_holding_a_token_is_masked() -> None:
    token = expand("ghp_{an36}")
    assert scan_document({"model": {f"see {token}": 1}}) == [Finding("/model/*", "github_token", True)]
    assert scan_document({token: {"a": 1}}) == [Finding("/*", "github_token", True)]


def test_keys_and_values_in_document_order() -> None:
    token = expand("ghp_{an36}")
    document = {"a": [token, {"password": "x", "b": token}], "api_key": "changeme", "z": token}
    assert scan_document(document) == [
        Finding("/a/0", "github_token", False),
        Finding("/a/1/password", "credential_key_name", True),
        Finding("/a/1/b", "github_token", False),
        Finding("/api_key", "credential_key_name", True),
        Finding("/z", "github_token", False),
    ]
    assert scan_document(token) == [Finding("", "github_token", False)]
    for scalar in (None, 3, 2.5, True):
        assert scan_document(scalar) == []
    assert scan_document([1, 2.5, None, True, {"x": [token]}]) == [Finding("/4/x/0", "github_token", False)]


def test_at_most_limit_findings_the_first_in_document_order() -> None:
    document = {"data": [expand(f"ghp_{{an36}} {n}") for n in range(LIMIT + 15)]}
    found = scan_document(document)
    assert [f.pointer for f in found] == [f"/data/{n}" for n in range(LIMIT)]
    assert len(scan_document(document, limit=3)) == 3


def test_findings_never_hold_the_value() -> None:
    token = expand("ghp_{an36}")
    for finding in scan_document({"k": token, token: token, "password": token}):
        assert token not in json.dumps(finding.as_dict())
        assert set(finding.as_dict()) == {"pointer", "kind", "in_key"}


def test_pointer() -> None:
    assert pointer(["data", 0, "name"]) == "/data/0/name"
    assert pointer(["a b", "x/y", "é", "x" * 65]) == "/*/*/*/*"
    assert pointer(["password", "apiKey"]) == "/password/apiKey"  # naming a credential is shown
    assert pointer([expand("ghp_{an36}")]) == "/*"  # holding one is not
    assert len(pointer(["abcdefgh"] * 100)) == 200


def test_deeply_nested_documents() -> None:
    document: object = expand("ghp_{an36}")
    for _ in range(40):
        document = {"k": [document]}
    assert len(scan_document(document)) == 1


# ---------------------------------------------------------------------------- normalisation

HIDDEN = [
    ("full-width prefix", "ｇｈｐ＿{an36}", "github_token"),
    ("full-width key word", "ＰＡＳＳＷＯＲＤ＝Hunter2Winter!", "credential_assignment"),
    ("math letters", "𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝=Hunter2Winter!", "credential_assignment"),
    ("ligature", "api_key = sk-proj-{an20}ﬁ{an30}", "openai_style_key"),
    ("zero-width space in a token", "gh\u200bp_{an36}", "github_token"),
    ("zero-width joiner in a keyword", "pass\u200dword=Hunter2Winter!", "credential_assignment"),
    ("soft hyphen", "AK\u00adIA{AU16}", "aws_access_key_id"),
    ("byte-order mark", "\ufeffghp_{an36}", "github_token"),
    ("tag characters", "ghp\U000e0041_{an36}", "github_token"),
    ("decomposed accent", "contrasen\u0303a: Verano2026!", "credential_assignment"),
    ("half-width katakana", "ﾊﾟｽﾜｰﾄﾞ=Hunter2Winter", "credential_assignment"),
    ("NUL inside", "gh\x00p_{an36}", "github_token"),
    ("circled letters", "ⓟⓐⓢⓢⓦⓞⓡⓓ=Hunter2Winter!", "credential_assignment"),
]


@pytest.mark.parametrize(("name", "template", "kind"), HIDDEN, ids=[row[0] for row in HIDDEN])
def test_other_unicode_forms(name: str, template: str, kind: str) -> None:
    text = expand(template)
    assert kind in text_kinds(text)
    assert kind in {f.kind for f in scan_document({"d": ["x", text]})}


@pytest.mark.parametrize("form", ["NFC", "NFD", "NFKC", "NFKD"])
def test_normal_forms_agree(form: str) -> None:
    for _, template, kind in [*HIDDEN, *EVERYDAY, *[(n, t, "credential_assignment") for n, t in PROSE]]:
        text = unicodedata.normalize(form, expand(template))
        assert kind in text_kinds(text), (form, text)


def test_a_long_run_of_combining_marks() -> None:
    marks = "\u0301\u0316\u0300\u0317" * (1 << 18)  # 1 Mi marks of alternating classes
    assert scan_document({"d": "a" + marks, "e": ["a" + marks[:100] + "x"] * 3}) == []
    assert text_kinds("ghp_" + expand("{an36}") + marks) == ["github_token"]


def test_tables_cover_the_running_unicode_database() -> None:
    """chars.py lists every character NFKC may change and every format character of this Python's Unicode
    database (regenerate the tables when a newer database adds some)."""
    def points(ranges: tuple[tuple[int, int], ...]) -> set[int]:
        return {c for low, high in ranges for c in range(low, high + 1)}

    invisible, unstable = points(INVISIBLE_RANGES), points(UNSTABLE_RANGES)
    wide = {ord(w) for w, _ in WIDE_PUNCTUATION}
    seconds = set()
    for code in range(0x110000):
        decomposition = unicodedata.decomposition(chr(code))
        if decomposition and not decomposition.startswith("<"):
            seconds.update(int(part, 16) for part in decomposition.split()[1:])
    for code in range(0x80, 0x110000):
        if 0xD800 <= code <= 0xDFFF or code in wide:
            continue
        char = chr(code)
        if unicodedata.category(char) == "Cf":
            assert code in invisible, hex(code)
        if unicodedata.combining(char) or code in seconds or unicodedata.normalize("NFKC", char) != char:
            assert code in unstable, hex(code)
    assert invisible <= unstable
    for w, narrow in WIDE_PUNCTUATION:
        assert unicodedata.normalize("NFKC", w) == narrow and not unicodedata.combining(w)
    assert INVISIBLE == invisible and 0x200B in INVISIBLE and ord("a") not in INVISIBLE


# ---------------------------------------------------------------------------- spans

def test_spans_mask_the_secret_in_text_as_written() -> None:
    token = expand("ghp_{an36}")
    text = f"push failed for token {token} (retrying)"
    ((start, end),) = spans(text)
    assert text[start:end] == token
    line = "connect with password=Hunter2Winter! and user=ml"
    ((start, end),) = spans(line)
    assert line[start:end] == "Hunter2Winter!"
    cyrillic = "ошибка: пароль: Zima2026!x, повтор"
    ((start, end),) = spans(cyrillic)
    assert cyrillic[start:end] == "Zima2026!x"
    two = f"{token} and {token}"
    assert spans(two) == [(0, len(token)), (len(token) + 5, len(two))]
    assert spans("nothing to see here, max_tokens: 4096") == []


def test_a_private_key_header_is_masked_with_what_follows_it() -> None:
    for line in ("-----BEGIN OPENSSH PRIVATE KEY-----", "-----BEGIN PGP PRIVATE KEY BLOCK-----",
                 "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx3...\n-----END RSA PRIVATE KEY-----"):
        text = f"[sft] {line}"
        assert text_kinds(text) == ["private_key"]
        assert [text[a:b] for a, b in spans(text)] == [line]


def test_what_spans_cannot_cover_text_kinds_still_finds() -> None:
    hidden = expand("gh\u200bp_{an36}")
    assert spans(hidden) == []
    assert text_kinds(hidden) == ["github_token"]  # so the egress replaces the whole string


# ---------------------------------------------------------------------------- properties

ALPHABET = st.sampled_from([
    *"abcXYZ019 _-:=/.@?\"'\n\t", "é", "ß", "д", "密", "码", "ア", "ﾊ", "ﾟ", "，", "：", "\u3000", "º", "ｇ", "ｈ", "ｐ", "＿",
    "\u0301", "\u0316", "\u200b", "\u200d", "\ufeff", "\x00", "ﬁ", "𝐩", "\U000e0041", "\u1100", "\u1161", "\u11a8", "가",
    "\ud800"])
TEXT = st.text(ALPHABET, max_size=60)
TOKENS = [expand(t) for rule in RULES if rule.check == "shape" for t in rule.tps]


@settings(max_examples=150, deadline=None)
@given(st.lists(TEXT, max_size=4), TEXT)
def test_any_text_is_scanned_and_no_value_is_reported(values: list[str], key: str) -> None:
    document = {key: values, "k": {v: v for v in values}}
    for finding in scan_document(document):
        for token in finding.pointer.split("/")[1:]:
            assert token == "*" or token.isdigit() or text_kinds(token) == []
    text_kinds(key)
    spans(key)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(BENIGN_STRINGS), st.sampled_from(TOKENS), st.integers(0, 200))
def test_a_token_inserted_into_benign_text_is_found(text: str, token: str, at: int) -> None:
    words = text.split(" ")
    at %= len(words) + 1
    mixed = " ".join([*words[:at], token, *words[at:]])
    assert text_kinds(mixed) != []
    assert scan_document({"description": mixed}) != []


GLUE = st.lists(st.sampled_from([*"aAxXzZ0159_-+=/.:@~!$ ", "é", "密", "\u200b", "todo", "xxxx", "your", "sk-",
                                  "ghp_", "AKIA", "abcdef", "123456"]), max_size=6).map("".join)
BARE_TOKENS = [token for token in TOKENS if spans(token) == [(0, len(token))]]  # samples that are a token alone


def _covered(text: str) -> set[int]:
    return {n for start, end in spans(text) for n in range(start, end)}


def test_spans_mask_a_glued_token_and_what_goes_on_like_it() -> None:
    assert len(BARE_TOKENS) >= 80
    for left, template, right in (("0", "ghp_{an36}", ""), ("", "AKIA{AU16}", "0"), ("word", "xoxb-{d12}-{d13}-{an24}",
                                  "more"), ("", "sk-{an48}", "todo"), ("x", "AIza{us35}", "0x"), ("", "{an3}8Q~{us32}", "zz"),
                                  ("mybot", "{d10}:AA{us33}", "x")):
        token = expand(template)
        text = left + token + right
        assert _covered(text) == set(range(len(left), len(text))), (text, [text[a:b] for a, b in spans(text)])
    assert text_kinds(expand("0ghp_{an36}")) == []  # a verdict keeps its boundaries


@settings(max_examples=400, deadline=None)
@given(TEXT, GLUE, st.sampled_from(BARE_TOKENS), GLUE, TEXT)
def test_spans_mask_a_token_glued_to_anything(before: str, left: str, token: str, right: str, after: str) -> None:
    """What leaves the server has every token masked, even glued to other letters or digits."""
    text = before + left + token + right + after
    at = len(before + left)
    assert set(range(at, at + len(token))) <= _covered(text), (text, [text[a:b] for a, b in spans(text)])


@settings(max_examples=100, deadline=None)
@given(TEXT, st.sampled_from(TOKENS), TEXT, st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"]))
def test_normal_forms_find_the_same_token(before: str, token: str, after: str, form: str) -> None:
    kinds = set(text_kinds(token))
    assert kinds
    assert kinds <= set(text_kinds(f"{before} {token} {after}"))
    assert kinds <= set(text_kinds(unicodedata.normalize(form, f"{before} {token} {after}")))


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=5))
def test_normalising_windows_equals_normalising_the_whole(texts: list[str]) -> None:
    joined = scan._join(texts)
    whole = joined
    for wide, narrow in WIDE_PUNCTUATION:
        whole = whole.replace(wide, narrow)
    assert scan._normal(joined) == scan._nfkc(whole).encode("utf-8", "surrogatepass")
