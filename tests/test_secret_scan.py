"""The manifest secret scan (contract §6): every key and string value, before the schema.

A secret anywhere is MANIFEST_SECRET with only a JSON pointer and a kind; the value itself never
appears anywhere in the envelope. Token-shaped values are built by concatenation so that this
file is not itself flagged by repository secret scanners.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from ito_training_mcp import scanner as secret_scan
from ito_training_mcp.envelope import Envelope
from ito_training_mcp.service import TrainingService

from .conftest import CANARY_AWS, CANARY_GITHUB

WriteFile = Callable[..., str]
Doc = dict[str, Any]


@dataclass(frozen=True)
class Secret:
    name: str
    text: str
    kind: str
    hidden: tuple[str, ...] = field(default=())  # distinctive parts that must never be echoed
    url: bool = False

    @property
    def must_not_appear(self) -> tuple[str, ...]:
        return (self.text, json.dumps(self.text)[1:-1], *self.hidden)


_BASIC = base64.b64encode(b"zqxuser:ZQXyk0FfwQCAJqle").decode()

SECRETS: list[Secret] = [
    Secret("pem-rsa", "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEpAIBAAKCAQEAzqxPemRsaBody0123456789\n"
           "-----END RSA " + "PRIVATE KEY-----", "private_key", ("MIIEpAIBAAKCAQEAzqxPemRsaBody0123456789",)),
    Secret("pem-openssh", "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEzqxOpensshBody\n"
           "-----END OPENSSH " + "PRIVATE KEY-----", "private_key", ("b3BlbnNzaC1rZXktdjEzqxOpensshBody",)),
    Secret("pem-pkcs8", "-----BEGIN " + "PRIVATE KEY-----\nMIIEvQIBADzqxPkcs8Body\n-----END PRIVATE KEY-----",
           "private_key", ("MIIEvQIBADzqxPkcs8Body",)),
    Secret("aws-access-key-id", CANARY_AWS, "aws_access_key_id"),
    Secret("github-classic", CANARY_GITHUB, "github_token"),
    Secret("github-fine-grained", "github" + "_pat_" + "11AZQX0000Ik2zwEQHfwce_9382DFFX1Kvzq2TQmNmClrKboZzu3g8Xi7cgR5C3BXd7U6Yb54hKjLPOBLU",
           "github_token"),
    Secret("huggingface", "hf" + "_" + "ZQXcjxdcglMLzgeonyLGcTJFizsoCmZcpv", "huggingface_token"),
    Secret("openai-project", "sk" + "-proj-" + "ZQXoa0a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7", "openai_style_key"),
    Secret("slack-bot", "xox" + "b-929081003390-7579383470174-PTGuZeJFEBZj6SzwDOhiXRxL", "slack_token"),
    Secret("stripe-live", "sk" + "_live_" + "ZQXst0a1b2c3d4e5f6g7h8i9", "stripe_key"),
    Secret("google-api-key", "AI" + "za" + "SyZQXgoog0a1b2c3d4e5f6g7h8i9j0k1l2m", "google_api_key"),
    Secret("jwt", "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" + ".eyJ" + "zdWIiOiJaUVhqd3QiLCJpYXQiOjE3MDB9"
           + ".ZQXjwtSig_0a1b2c3d4e5f6g7h8i9", "jwt", ("ZQXjwtSig_0a1b2c3d4e5f6g7h8i9",)),
    Secret("bearer", "Authorization: Bearer " + "ZQXbearer.0a1b2c3d4e5f6g7h8", "bearer_token",
           ("ZQXbearer.0a1b2c3d4e5f6g7h8",)),
    Secret("url-userinfo", "https://zqxuser:" + "ZQXnQvWys81vp7hB@data.example.com/x", "url_userinfo",
           ("ZQXnQvWys81vp7hB",), url=True),
    Secret("basic-auth-header", "Authorization: Basic " + _BASIC, "basic_auth", (_BASIC,)),
    Secret("aws-signed-url", "https://zqx-bucket.s3.amazonaws.com/obj.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256"
           "&X-Amz-Signature=" + "ZQXa4c123b1612dd272d1371c17149d439536b3216fdaeeb975729fae923d5a4", "signed_url", ("ZQXa4c123b1612dd272d1371c17149d439536b3216fdaeeb975729fae923d5a4",), url=True),
    Secret("gcs-signed-url", "https://storage.googleapis.com/zqx/obj?X-Goog-Algorithm=GOOG4-RSA-SHA256"
           "&X-Goog-Signature=" + "ZQX7bc4612476c0efecf6c2f708dfc3832cc31a72f6421f64ee9bd453abf694b", "signed_url", ("ZQX7bc4612476c0efecf6c2f708dfc3832cc31a72f6421f64ee9bd453abf694b",), url=True),
    Secret("azure-sas-url", "https://zqxacct.blob.core.windows.net/c/blob?sv=2022-11-02&sr=b&sig="
           + "ZQXdnXRIL3rAVgd5mFVj7nsCuYKt8c8ub%2Babc%3D", "signed_url", ("ZQXdnXRIL3rAVgd5mFVj7nsCuYKt8c8ub",), url=True),
    Secret("slack-webhook", "https://hooks.slack.com/services/" + "T0ZQX0001/B0ZQX0002/ZQXkCbekANd0f0RpzKChfUEP",
           "slack_webhook", ("ZQXkCbekANd0f0RpzKChfUEP",), url=True),
]

assert len(SECRETS) >= 14


# ---------------------------------------------------------------------------- placements


def _place(path: tuple[str | int, ...]) -> Callable[[Doc, str], str]:
    def place(doc: Doc, value: str) -> str:
        node: Any = doc
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(part, str) and part not in node else node[part]
        node[path[-1]] = value
        return "".join(f"/{p}" for p in path)

    return place


def _nested_unknown(doc: Doc, value: str) -> str:
    doc["checkpoints"]["zqx_extra"] = [{"note": "fine"}, {"deeper": [value]}]
    return "/checkpoints/zqx_extra/1/deeper/0"


PLACEMENTS: dict[str, Callable[[Doc, str], str]] = {
    "description": _place(("description",)),
    "data-name": _place(("data", 0, "name")),
    "eval-suite": _place(("data", 0, "decontamination", "eval_suites", 2)),
    "unknown-top-key": _place(("notes",)),
    "unknown-nested-key": _place(("model", "zqx_extra")),
    "deep-unknown": _nested_unknown,
}


def _uri_form(secret: Secret) -> str | None:
    if secret.url:
        return secret.text
    if any(ch.isspace() for ch in secret.text):
        return None
    return "s3://zqx-bucket/" + secret.text


def _uri_cases() -> list[Any]:
    cases = []
    for secret in SECRETS:
        value = _uri_form(secret)
        if value is None:
            continue
        cases.append(pytest.param(secret, value, ("data", 0, "uri"), id=f"{secret.name}-data-uri"))
        cases.append(pytest.param(secret, value, ("checkpoints", "storage"), id=f"{secret.name}-storage"))
        cases.append(pytest.param(secret, value, ("data", 1, "decontamination", "report"),
                                  id=f"{secret.name}-report"))
    return cases


# ---------------------------------------------------------------------------- assertions


def findings_of(env: Envelope) -> list[dict[str, Any]]:
    assert env.ok is False, env.to_json()
    assert env.error is not None
    assert env.error.code.value == "MANIFEST_SECRET", env.to_json()
    assert env.error.gate is not None
    assert env.error.gate.value == "manifest"
    assert env.live_api_contacted is False
    assert env.error.details is not None
    findings = env.error.details["findings"]
    assert findings
    for f in findings:
        assert set(f) == {"pointer", "kind", "in_key"}
        assert isinstance(f["pointer"], str)
        assert f["pointer"] == "" or f["pointer"].startswith("/")
    return list(findings)


def assert_not_leaked(env: Envelope, *texts: str) -> None:
    wire = env.to_json()
    wire_ascii = json.dumps(env.to_dict())
    assert env.error is not None
    for text in texts:
        assert text not in wire
        assert text not in wire_ascii
        assert text not in env.error.message
        assert text not in env.notice


async def digest_doc(service: TrainingService, write_file: WriteFile, doc: Doc | list[Any] | str) -> Envelope:
    return await service.digest_manifest(write_file(json.dumps(doc, indent=2)))


# ---------------------------------------------------------------------------- every shape, every place


def test_every_secret_shape_is_recognised_by_the_scanner() -> None:
    for secret in SECRETS:
        assert secret.kind in secret_scan.text_kinds(secret.text), secret.name


@pytest.mark.parametrize("placement", list(PLACEMENTS), ids=list(PLACEMENTS))
@pytest.mark.parametrize("secret", SECRETS, ids=[s.name for s in SECRETS])
async def test_secret_in_value(service: TrainingService, write_file: WriteFile, example_document: Doc,
                               secret: Secret, placement: str) -> None:
    doc = copy.deepcopy(example_document)
    pointer = PLACEMENTS[placement](doc, secret.text)
    env = await digest_doc(service, write_file, doc)
    findings = findings_of(env)
    assert {"pointer": pointer, "kind": secret.kind, "in_key": False} in findings, env.to_json()
    assert_not_leaked(env, *secret.must_not_appear)


@pytest.mark.parametrize(("secret", "value", "path"), _uri_cases())
async def test_secret_in_uri_field(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                   secret: Secret, value: str, path: tuple[str | int, ...]) -> None:
    doc = copy.deepcopy(example_document)
    pointer = _place(path)(doc, value)
    env = await digest_doc(service, write_file, doc)
    assert {"pointer": pointer, "kind": secret.kind, "in_key": False} in findings_of(env), env.to_json()
    assert_not_leaked(env, value, *secret.must_not_appear)


@pytest.mark.parametrize(
    "uri",
    ["s3://zqx:ZQXJLqCe30PExMNr@bucket/data", "gs://ZQXuserinfo0001@bucket/data",
     "https://zqx-data.example.com/set?token=ZQXKasaoSe1Nyez9gLgh", "https://zqx-data.example.com/set?X-Amz-Credential=ZQXPyAAX7lbEJywO6OsC",
     "https://zqx-data.example.com/set?api_key=ZQXbvx4ancC9VifsHp88", "https://zqx-data.example.com/set?access_token=ZQXXBJv0FHz7BdKjuVZf"],
    ids=["s3-userinfo", "gs-user-only", "token-param", "amz-credential", "api-key-param", "access-token-param"],
)
async def test_data_reference_with_credential_is_secret(service: TrainingService, write_file: WriteFile,
                                                        example_document: Doc, uri: str) -> None:
    """Contract §6: a reference with userinfo, a signed query string or a credential is MANIFEST_SECRET."""
    doc = copy.deepcopy(example_document)
    doc["data"][1]["uri"] = uri
    env = await digest_doc(service, write_file, doc)
    assert any(f["pointer"] == "/data/1/uri" for f in findings_of(env)), env.to_json()
    assert_not_leaked(env, uri, uri.split("@")[0].split("=")[-1])


async def test_secret_inside_longer_text(service: TrainingService, write_file: WriteFile,
                                         example_document: Doc) -> None:
    doc = copy.deepcopy(example_document)
    doc["description"] = f"Use token {CANARY_GITHUB} for the mirror, and key {CANARY_AWS} for s3."
    env = await digest_doc(service, write_file, doc)
    kinds = {f["kind"] for f in findings_of(env) if f["pointer"] == "/description"}
    assert kinds >= {"github_token", "aws_access_key_id"}
    assert_not_leaked(env, CANARY_GITHUB, CANARY_AWS)


# ---------------------------------------------------------------------------- credential-named keys


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("password",), "x"),
        (("model", "apiKey"), "y"),
        (("data", 0, "hf_token"), 1),
        (("Authorization",), None),
        (("checkpoints", "private_key"), True),
        (("data", 1, "decontamination", "cookie"), []),
        (("budget", "client_secret"), {}),
        (("credentials",), {"user": "a"}),
        (("API_KEY",), ""),
        (("model", "x-api-key"), "k"),
        (("secretAccessKey",), 0),
        (("passphrase",), "p"),
        (("access_token",), "t"),
        (("Set-Cookie",), "c"),
    ],
    ids=lambda v: "/".join(map(str, v)) if isinstance(v, tuple) else repr(v),
)
async def test_credential_named_key(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                    path: tuple[str | int, ...], value: Any) -> None:
    doc = copy.deepcopy(example_document)
    pointer = _place(path)(doc, value)
    env = await digest_doc(service, write_file, doc)
    findings = findings_of(env)
    assert {"pointer": pointer, "kind": "credential_key_name", "in_key": True} in findings, env.to_json()


async def test_credential_named_key_value_not_echoed(service: TrainingService, write_file: WriteFile,
                                                     example_document: Doc) -> None:
    doc = copy.deepcopy(example_document)
    doc["password"] = "ZQXlowEntropyPw"
    env = await digest_doc(service, write_file, doc)
    assert {"pointer": "/password", "kind": "credential_key_name", "in_key": True} in findings_of(env)
    assert_not_leaked(env, "ZQXlowEntropyPw")


@pytest.mark.parametrize(
    ("text", "value"),
    [("password=ZQXhunter2hunter2", "ZQXhunter2hunter2"), ("api_key: ZQXz5qw8w5luEHje", "ZQXz5qw8w5luEHje"),
     ("client_secret = ZQXs3cr3tvalue", "ZQXs3cr3tvalue"),
     ("AccountKey=ZQXj0YMV7J4iaSX9cgYUfYRB1FKttfAfEjmvhOkmUjn+/==", "ZQXj0YMV7J4iaSX9cgYUfYRB1FKttfAfEjmvhOkmUjn")],
)
async def test_credential_assignment_in_text(service: TrainingService, write_file: WriteFile,
                                             example_document: Doc, text: str, value: str) -> None:
    doc = copy.deepcopy(example_document)
    doc["description"] = f"connect with {text} please"
    env = await digest_doc(service, write_file, doc)
    assert any(f["pointer"] == "/description" for f in findings_of(env))
    assert_not_leaked(env, value)


# ---------------------------------------------------------------------------- nothing switches the scan off


@pytest.mark.parametrize(
    "suffix",
    ["  # pragma: allowlist secret", " // gitleaks:allow", " # nosec", " noqa: S105", " # trufflehog:ignore"],
)
async def test_allowlist_pragmas_do_not_switch_the_scan_off(service: TrainingService, write_file: WriteFile,
                                                            example_document: Doc, suffix: str) -> None:
    doc = copy.deepcopy(example_document)
    doc["description"] = CANARY_GITHUB + suffix
    env = await digest_doc(service, write_file, doc)
    assert {"pointer": "/description", "kind": "github_token", "in_key": False} in findings_of(env)
    assert_not_leaked(env, CANARY_GITHUB)


async def test_allowlist_as_a_key_does_not_switch_the_scan_off(service: TrainingService, write_file: WriteFile,
                                                               example_document: Doc) -> None:
    doc = copy.deepcopy(example_document)
    doc["pragma: allowlist secret"] = True
    doc["description"] = CANARY_AWS
    env = await digest_doc(service, write_file, doc)
    assert {"pointer": "/description", "kind": "aws_access_key_id", "in_key": False} in findings_of(env)


def _escape_all(text: str) -> str:
    return "".join(f"\\u{ord(ch):04x}" for ch in text)


@pytest.mark.parametrize("style", ["first-char", "every-char", "upper-hex"])
async def test_unicode_escaped_secret_is_found(service: TrainingService, write_file: WriteFile,
                                               example_document: Doc, style: str) -> None:
    doc = copy.deepcopy(example_document)
    doc["description"] = "PLACEHOLDER"
    if style == "first-char":
        escaped = "\\u0067" + CANARY_GITHUB[1:]
    elif style == "every-char":
        escaped = _escape_all(CANARY_GITHUB)
    else:
        escaped = _escape_all(CANARY_GITHUB).upper().replace("\\U", "\\u")
    raw = json.dumps(doc).replace("PLACEHOLDER", escaped)
    assert CANARY_GITHUB not in raw
    assert json.loads(raw)["description"] == CANARY_GITHUB
    env = await service.digest_manifest(write_file(raw))
    assert {"pointer": "/description", "kind": "github_token", "in_key": False} in findings_of(env)
    assert_not_leaked(env, CANARY_GITHUB, escaped, CANARY_GITHUB[4:])


async def test_unicode_escaped_credential_key_name_is_found(service: TrainingService, write_file: WriteFile,
                                                            example_document: Doc) -> None:
    raw = json.dumps(example_document)[:-1] + ', "p\\u0061ssword": "x"}'
    env = await service.digest_manifest(write_file(raw))
    assert {"pointer": "/password", "kind": "credential_key_name", "in_key": True} in findings_of(env)


# ---------------------------------------------------------------------------- secrets in key names


@pytest.mark.parametrize(
    ("key", "kind"),
    [(CANARY_GITHUB, "github_token"), (CANARY_AWS, "aws_access_key_id"),
     ("password=ZQXhunter2hunter2", "credential_assignment"), ("Bearer ZQXbearerInKey0123", "bearer_token")],
    ids=["github", "aws", "assignment", "bearer"],
)
async def test_token_shaped_key_is_masked(service: TrainingService, write_file: WriteFile, example_document: Doc,
                                          key: str, kind: str) -> None:
    doc = copy.deepcopy(example_document)
    doc[key] = "harmless"
    doc["model"][key] = {"password": "x"}
    env = await digest_doc(service, write_file, doc)
    findings = findings_of(env)
    assert {"pointer": "/*", "kind": kind, "in_key": True} in findings, env.to_json()
    assert {"pointer": "/model/*", "kind": kind, "in_key": True} in findings, env.to_json()
    assert {"pointer": "/model/*/password", "kind": "credential_key_name", "in_key": True} in findings
    assert_not_leaked(env, key, key.split()[-1].split("=")[-1])


async def test_overlong_key_is_masked(service: TrainingService, write_file: WriteFile,
                                      example_document: Doc) -> None:
    key = "zqx-long-key-" + "k" * 80
    doc = copy.deepcopy(example_document)
    doc[key] = CANARY_AWS
    env = await digest_doc(service, write_file, doc)
    assert {"pointer": "/*", "kind": "aws_access_key_id", "in_key": False} in findings_of(env)
    assert_not_leaked(env, key, CANARY_AWS)


async def test_findings_are_bounded_and_leak_nothing(service: TrainingService, write_file: WriteFile,
                                                     example_document: Doc) -> None:
    doc = copy.deepcopy(example_document)
    rng = random.Random(7)
    tokens = ["ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
              for _ in range(40)]
    doc["zqx_many"] = tokens
    env = await digest_doc(service, write_file, doc)
    assert 1 <= len(findings_of(env)) <= 20
    assert_not_leaked(env, *tokens)


# ---------------------------------------------------------------------------- the scan runs before the schema


@pytest.mark.parametrize(
    "build",
    [
        lambda d: {**{k: v for k, v in d.items() if k not in ("model", "budget")}, "zqx": 1, "x": CANARY_GITHUB},
        lambda d: {"schema_version": "v999", "description": CANARY_GITHUB},
        lambda d: {**d, "model": CANARY_GITHUB},
        lambda d: {**d, "budget": {"ceiling_usd": 1.5, "max_incremental_cost_usd": CANARY_GITHUB}},
        lambda d: [d, CANARY_GITHUB],
        lambda d: CANARY_GITHUB,
        lambda d: {"password": None},
    ],
    ids=["unknown-and-missing", "wrong-version", "wrong-type", "float-money", "top-level-array", "top-level-string",
         "only-credential-key"],
)
async def test_secret_wins_over_every_schema_problem(service: TrainingService, write_file: WriteFile,
                                                     example_document: Doc, build: Callable[[Doc], Any]) -> None:
    env = await digest_doc(service, write_file, build(copy.deepcopy(example_document)))
    findings_of(env)
    assert "problems" not in (env.error.details if env.error and env.error.details else {})
    assert_not_leaked(env, CANARY_GITHUB)


async def test_secret_with_invalid_json_is_still_invalid_json(service: TrainingService, write_file: WriteFile,
                                                              example_document: Doc) -> None:
    """Strict JSON comes first: an unparsable file cannot be scanned, and its content is not echoed."""
    doc = copy.deepcopy(example_document)
    doc["description"] = CANARY_GITHUB
    env = await service.digest_manifest(write_file(json.dumps(doc) + " trailing"))
    assert env.error is not None
    assert env.error.code.value == "MANIFEST_INVALID_JSON"
    assert_not_leaked(env, CANARY_GITHUB)


# ---------------------------------------------------------------------------- no false positives


def test_example_manifest_has_no_findings(example_document: Doc) -> None:
    assert secret_scan.scan_document(example_document) == []


async def test_example_manifest_passes_the_service(service: TrainingService, manifest_path: str) -> None:
    env = await service.digest_manifest(manifest_path)
    assert env.ok is True, env.to_json()


@pytest.mark.parametrize(
    "revision",
    ["9b2e4f6a8c0d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a3b5c7d9e1f",
     "sha256:" + "0123456789abcdef" * 4, "4e1c9a2f7b3d5e8c0a6f1d2b9e7c4a3f5d8b0e6c"],
)
def test_hex_revisions_are_not_secrets(example_document: Doc, revision: str) -> None:
    doc = copy.deepcopy(example_document)
    doc["model"]["revision"] = revision
    doc["data"][0]["revision"] = revision
    assert secret_scan.scan_document(doc) == []


@pytest.mark.parametrize("key", ["max_tokens", "tokenizer", "tokenizer_name", "num_tokens", "author", "secretary",
                                 "keyword", "passage", "monkey", "bookkeeper"])
def test_innocent_key_names(example_document: Doc, key: str) -> None:
    doc = copy.deepcopy(example_document)
    doc["model"][key] = 4096
    assert secret_scan.scan_document(doc) == []


@pytest.mark.parametrize(
    "text",
    ["basic tokenization", "bearer of news", "Basic tokenization with a BPE tokenizer and max_tokens 4096.",
     "The bearer of news arrives.", "sk-1", "hf_short", "token budget of 2T tokens", "password policy reviewed",
     "https://example.com/data/set", "s3://acme-ml-data/support/conversations-2026q3/"],
)
def test_innocent_text(example_document: Doc, text: str) -> None:
    doc = copy.deepcopy(example_document)
    doc["description"] = text
    doc["data"][0]["name"] = text[:200]
    assert secret_scan.scan_document(doc) == [], secret_scan.scan_document(doc)


async def test_innocent_text_passes_the_whole_gate(service: TrainingService, write_file: WriteFile,
                                                   example_document: Doc) -> None:
    doc = copy.deepcopy(example_document)
    doc["description"] = "bearer of news; basic tokenization; max_tokens 4096; tokenizer v2"
    env = await digest_doc(service, write_file, doc)
    assert env.ok is True, env.to_json()


# ---------------------------------------------------------------------------- credentials under their names


_AWS_SECRET = "h3Kq9vLw/Tz2RbN8xYc4+Pd7MfJs1GaUe6WoXi0E"  # random, 40 characters as AWS issues them


@pytest.mark.parametrize("text", [f"aws_secret_access_key = {_AWS_SECRET}", f"AWS_SECRET_ACCESS_KEY={_AWS_SECRET}",
                                  f"SecretAccessKey: {_AWS_SECRET}"])
def test_aws_secret_access_key_assignment_is_found(text: str) -> None:
    assert secret_scan.text_kinds(text) != []


@pytest.mark.parametrize("key", ["passwords", "api_keys", "apiKeys", "private_keys"])
def test_plural_credential_key_names_are_found(example_document: Doc, key: str) -> None:
    doc = copy.deepcopy(example_document)
    doc[key] = ["hunter2"]
    assert secret_scan.scan_document(doc) != []


def test_a_key_that_is_not_a_plain_identifier_is_masked_in_the_pointer() -> None:
    findings = secret_scan.scan_document({"description": "x", "password: abc123": 1, "nested": {"token=Hx7Kq2Lp9Vw4 x": "v"}})
    pointers = {f.pointer for f in findings}
    assert pointers == {"/*", "/nested/*"}


ADVERSARIAL = ["a", "sk-", "sk-a1", "github_pat_", "ghp_", "secret", "password=", "bearer ", "Bearer x1",
               "eyJa.", "eyJaaaaaaaaa.eyJ", "a://", "a://b", "basic ", "AccountKey=", "hf_", "xoxb-", "AKIA",
               "-----BEGIN ", "sk_live_", "https://x/?sig=", "aws_secret_access_key", "a:b@", "mailto:a@b.c ",
               "://a@", "Authorization: ", "token: ", "pwd=", "Passwort=", "LS0tLS1CRUdJTi", "0Q~", ":AA", "SK",
               "EAAA", "discord ", "mailgun key-", "x\u200d", "\u200d", "ｇｈｐ＿", "a\U000e0041", "tokenizer_"]


@pytest.mark.parametrize("unit", ADVERSARIAL)
def test_the_scanner_is_linear_on_hostile_strings(unit: str) -> None:
    """A hang detector, not a benchmark: 1 MiB of a repeated fragment must scan promptly.

    The bound is two orders of magnitude above the measured time; a quadratic pattern takes hours.
    """
    import time

    text = unit * ((1024 * 1024) // len(unit))
    started = time.monotonic()
    secret_scan.scan_document({"description": text, text[:4096]: text})
    assert time.monotonic() - started < 20.0
