"""The scanner's corpus: fake credentials of every covered format, and legitimate text that must pass.

No credential appears literally in this file: each is assembled at import from a prefix and a
pseudo-random body (fixed seeds), so repository secret scanners and push protection see only
fragments. The values are well formed but belong to no account.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass

_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGIT = string.ascii_uppercase + string.digits
_HEX = "0123456789abcdef"
_URLSAFE = _ALNUM + "_-"
_B64 = _ALNUM + "+/"


def _body(alphabet: str, n: int, seed: int | str) -> str:
    """n characters of `alphabet`, deterministic, with at least one digit when the alphabet has digits."""
    rng = random.Random(f"{seed}:{n}:{alphabet}")
    out = [rng.choice(alphabet) for _ in range(n)]
    digits = [c for c in alphabet if c.isdigit()]
    if digits and n > 2 and not any(c.isdigit() for c in out):
        out[n // 2] = digits[0]
    return "".join(out)


def _j(*parts: str) -> str:
    return "".join(parts)


@dataclass(frozen=True)
class Example:
    kind: str
    text: str
    name: str


def _examples() -> list[Example]:
    b = _body
    pem_body = b(_B64, 64, "pem")
    basic = base64.b64encode(_j("zqx", "user:", b(_ALNUM, 12, "basic")).encode()).decode()
    private_b64 = base64.b64encode(_j("-----BEGIN RSA ", "PRIVATE", " KEY-----\n", pem_body).encode()).decode()
    age_alphabet = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
    jwt = _j("ey", "JhbGciOiJIUzI1NiJ9", ".", "ey", "JzdWIiOiJ6cXgifQ", ".", b(_URLSAFE, 43, "jwt"))
    uuid = _j(b(_HEX, 8, "u1"), "-", b(_HEX, 4, "u2"), "-", b(_HEX, 4, "u3"), "-", b(_HEX, 4, "u4"), "-",
              b(_HEX, 12, "u5"))
    rows: list[tuple[str, str, str]] = [
        ("private_key", "pem-rsa", _j("-----BEGIN RSA ", "PRIVATE KEY-----\n", pem_body, "\n-----END RSA PRIVATE KEY-----")),
        ("private_key", "pem-pkcs8-in-gcp-json",
         _j('{"type": "service_account", "private_key": "-----BEGIN ', 'PRIVATE KEY-----\\n', pem_body, '"}')),
        ("private_key", "pem-openssh", _j("-----BEGIN OPENSSH ", "PRIVATE KEY-----")),
        ("private_key", "pgp", _j("-----BEGIN PGP ", "PRIVATE KEY BLOCK-----")),
        ("private_key", "putty", _j("PuTTY-User-", "Key-File-3: ssh-ed25519")),
        ("private_key", "kubeconfig-client-key-data", _j("client-key-data: ", private_b64)),
        ("age_secret_key", "age", _j("AGE-SECRET-", "KEY-1", b(age_alphabet, 58, "age"))),
        ("aws_access_key_id", "aws-akia", _j("AK", "IA", b(_UPPER_DIGIT, 16, "akia"))),
        ("aws_access_key_id", "aws-asia", _j("AS", "IA", b(_UPPER_DIGIT, 16, "asia"))),
        ("aws_access_key_id", "aws-aroa", _j("AR", "OA", b(_UPPER_DIGIT, 16, "aroa"))),
        ("aws_access_key_id", "aws-a3t", _j("A3", "TX", b(_UPPER_DIGIT, 16, "a3t"))),
        ("aws_secret_access_key", "aws-secret-assignment",
         _j("aws_secret_", "access_key = ", b(_B64, 40, "awssecret"))),
        ("aws_bedrock_api_key", "bedrock", _j("AB", "SK", b(_B64, 120, "absk"))),
        ("google_api_key", "google-api-key", _j("AI", "za", b(_URLSAFE, 35, "aiza"))),
        ("google_oauth_token", "google-ya29", _j("ya", "29.", b(_URLSAFE, 60, "ya29"))),
        ("google_oauth_client_secret", "google-gocspx", _j("GOC", "SPX-", b(_URLSAFE, 28, "gocspx"))),
        ("azure_account_key", "azure-connection-string",
         _j("DefaultEndpointsProtocol=https;AccountName=zqx;Account", "Key=", b(_B64, 86, "azure"), "==")),
        ("azure_client_secret", "azure-ad-secret", _j(b(_ALNUM, 3, "azc"), "8Q", "~", b(_URLSAFE, 31, "azq"))),
        ("alibaba_access_key_id", "alibaba", _j("LT", "AI", b(_ALNUM, 20, "ltai"))),
        ("digitalocean_token", "digitalocean", _j("do", "p_v1_", b(_HEX, 64, "dop"))),
        ("heroku_api_key", "heroku-v2", _j("HRKU", "-AA", b(_URLSAFE, 58, "hrku"))),
        ("heroku_api_key", "heroku-uuid", _j("HEROKU_API_", "KEY=", uuid)),
        ("databricks_token", "databricks", _j("da", "pi", b(_HEX, 32, "dapi"))),
        ("cloudflare_origin_ca_key", "cloudflare-origin-ca",
         _j("v1", ".0-", b(_HEX, 24, "cf1"), "-", b(_HEX, 146, "cf2"))),
        ("flyio_token", "flyio", _j("fo", "1_", b(_URLSAFE, 43, "fly"))),
        ("vault_token", "vault", _j("hv", "s.", b(_URLSAFE, 90, "hvs"))),
        ("terraform_cloud_token", "terraform-cloud",
         _j(b(_ALNUM, 14, "tfc"), ".atlas", "v1.", b(_URLSAFE, 67, "tfc2"))),
        ("pulumi_token", "pulumi", _j("pu", "l-", b(_HEX, 40, "pul"))),
        ("doppler_token", "doppler", _j("dp", ".pt.", b(_ALNUM, 43, "dp"))),
        ("onepassword_token", "1password-service-account", _j("ops", "_eyJ", b(_B64, 250, "ops"))),
        ("onepassword_secret_key", "1password-secret-key",
         _j("A3", "-", b(_UPPER_DIGIT, 6, "a31"), "-", b(_UPPER_DIGIT, 11, "a32"), "-", b(_UPPER_DIGIT, 5, "a33"),
            "-", b(_UPPER_DIGIT, 5, "a34"), "-", b(_UPPER_DIGIT, 5, "a35"))),
        ("github_token", "github-classic", _j("gh", "p_", b(_ALNUM, 36, "ghp"))),
        ("github_token", "github-oauth", _j("gh", "o_", b(_ALNUM, 36, "gho"))),
        ("github_token", "github-app", _j("gh", "s_", b(_ALNUM, 36, "ghs"))),
        ("github_token", "github-fine-grained", _j("github", "_pat_", b(_ALNUM, 22, "gpat"), "_", b(_ALNUM, 59, "gp2"))),
        ("gitlab_token", "gitlab-pat", _j("gl", "pat-", b(_URLSAFE, 20, "glpat"))),
        ("gitlab_token", "gitlab-deploy", _j("gl", "dt-", b(_URLSAFE, 20, "gldt"))),
        ("gitlab_token", "gitlab-runner", _j("gl", "rt-", b(_URLSAFE, 20, "glrt"))),
        ("gitlab_token", "gitlab-trigger", _j("gl", "ptt-", b(_HEX, 40, "glptt"))),
        ("gitlab_token", "gitlab-registration", _j("GR13", "48941", b(_URLSAFE, 20, "gr"))),
        ("gitlab_token", "gitlab-session", _j("_gitlab_", "session=", b(_HEX, 32, "gls"))),
        ("npm_token", "npm", _j("np", "m_", b(_ALNUM, 36, "npm"))),
        ("pypi_token", "pypi", _j("py", "pi-", "AgEIcHlwaS5vcmc", b(_URLSAFE, 70, "pypi"))),
        ("docker_hub_token", "docker-hub", _j("dckr", "_pat_", b(_URLSAFE, 27, "dckr"))),
        ("rubygems_token", "rubygems", _j("ruby", "gems_", b(_HEX, 48, "gem"))),
        ("artifactory_token", "artifactory", _j("AK", "Cp", b(_ALNUM, 69, "akcp"))),
        ("openai_style_key", "openai-project", _j("sk", "-proj-", b(_URLSAFE, 74, "oai"))),
        ("openai_style_key", "openai-legacy", _j("sk", "-", b(_ALNUM, 48, "oai2"))),
        ("anthropic_api_key", "anthropic", _j("sk", "-ant-", "api03-", b(_URLSAFE, 93, "ant"), "AA")),
        ("huggingface_token", "huggingface", _j("h", "f_", b(string.ascii_letters, 34, "hf"))),
        ("huggingface_token", "huggingface-org", _j("api", "_org_", b(string.ascii_letters, 34, "hforg"))),
        ("groq_api_key", "groq", _j("gs", "k_", b(_ALNUM, 52, "gsk"))),
        ("xai_api_key", "xai", _j("xa", "i-", b(_ALNUM, 80, "xai"))),
        ("replicate_token", "replicate", _j("r", "8_", b(_ALNUM, 37, "r8"))),
        ("perplexity_api_key", "perplexity", _j("pp", "lx-", b(_ALNUM, 48, "pplx"))),
        ("langsmith_api_key", "langsmith", _j("lsv", "2_pt_", b(_HEX, 32, "ls1"), "_", b(_HEX, 10, "ls2"))),
        ("pinecone_api_key", "pinecone", _j("pc", "sk_", b(_ALNUM, 60, "pcsk"))),
        ("slack_token", "slack-bot", _j("xo", "xb-", b(string.digits, 12, "sb1"), "-", b(string.digits, 13, "sb2"), "-",
                                        b(_ALNUM, 24, "sb3"))),
        ("slack_token", "slack-user", _j("xo", "xp-", b(string.digits, 12, "su1"), "-", b(_ALNUM, 32, "su2"))),
        ("slack_token", "slack-app", _j("xa", "pp-1-", b(_UPPER_DIGIT, 11, "sa1"), "-", b(string.digits, 13, "sa2"), "-",
                                        b(_HEX, 64, "sa3"))),
        ("slack_webhook", "slack-webhook",
         _j("https://hooks.", "slack.com/services/T", b(_UPPER_DIGIT, 8, "sw1"), "/B", b(_UPPER_DIGIT, 8, "sw2"), "/",
            b(_ALNUM, 24, "sw3"))),
        ("discord_bot_token", "discord-bot",
         _j("DISCORD_TOKEN=", "M", b(_URLSAFE, 23, "dc1"), ".", b(_URLSAFE, 6, "dc2"), ".", b(_URLSAFE, 38, "dc3"))),
        ("discord_webhook", "discord-webhook",
         _j("https://discord.com/api/", "webhooks/", b(string.digits, 18, "dw1"), "/", b(_URLSAFE, 68, "dw2"))),
        ("telegram_bot_token", "telegram", _j(b(string.digits, 10, "tg1"), ":A", "A", b(_URLSAFE, 33, "tg2"))),
        ("teams_webhook", "teams-webhook",
         _j("https://acme.webhook.", "office.com/webhookb2/", b(_HEX, 8, "tw1"), "-", b(_HEX, 4, "tw2"), "-",
            b(_HEX, 4, "tw3"), "-", b(_HEX, 4, "tw4"), "-", b(_HEX, 12, "tw5"), "@", b(_HEX, 36, "tw6"))),
        ("stripe_key", "stripe-live", _j("sk", "_live_", b(_ALNUM, 24, "stripe"))),
        ("stripe_key", "stripe-restricted", _j("rk", "_test_", b(_ALNUM, 24, "rstripe"))),
        ("stripe_key", "stripe-webhook", _j("wh", "sec_", b(_ALNUM, 32, "whsec"))),
        ("square_token", "square-access", _j("EA", "AA", b(_URLSAFE, 60, "sq"))),
        ("square_token", "square-oauth-secret", _j("sq0", "csp-", b(_URLSAFE, 43, "sqcsp"))),
        ("braintree_token", "braintree",
         _j("access_", "token$production$", b(string.ascii_lowercase + string.digits, 16, "bt1"), "$",
            b(_HEX, 32, "bt2"))),
        ("shopify_token", "shopify", _j("sh", "pat_", b(_HEX, 32, "shp"))),
        ("twilio_api_key", "twilio", _j("S", "K", b(_HEX, 32, "tw"))),
        ("sendgrid_api_key", "sendgrid", _j("S", "G.", b(_URLSAFE, 22, "sg1"), ".", b(_URLSAFE, 43, "sg2"))),
        ("sendinblue_api_key", "brevo", _j("xkey", "sib-", b(_HEX, 64, "xk1"), "-", b(_ALNUM, 16, "xk2"))),
        ("mailgun_api_key", "mailgun", _j("MAILGUN_API_KEY=", "key-", b(_HEX, 32, "mg"))),
        ("mailchimp_api_key", "mailchimp", _j("mailchimp api key: ", b(_HEX, 32, "mc"), "-us", "12")),
        ("datadog_api_key", "datadog", _j("DD_API_", "KEY=", b(_HEX, 32, "dd"))),
        ("new_relic_key", "new-relic", _j("NR", "AK-", b(_UPPER_DIGIT, 27, "nrak"))),
        ("sentry_token", "sentry", _j("sntry", "u_", b(_HEX, 64, "sntry"))),
        ("grafana_token", "grafana-service-account", _j("gl", "sa_", b(_ALNUM, 32, "glsa"), "_", b(_HEX, 8, "glsa2"))),
        ("grafana_token", "grafana-cloud", _j("gl", "c_", b(_B64, 60, "glc"))),
        ("dynatrace_token", "dynatrace", _j("dt0", "c01.", b(_UPPER_DIGIT, 24, "dt1"), ".", b(_ALNUM, 64, "dt2"))),
        ("linear_api_key", "linear", _j("lin", "_api_", b(_ALNUM, 40, "lin"))),
        ("atlassian_api_token", "atlassian", _j("ATA", "TT3", b(_URLSAFE, 180, "atl"))),
        ("notion_token", "notion", _j("nt", "n_", b(string.digits, 11, "ntn1"), b(_ALNUM, 35, "ntn2"))),
        ("dropbox_token", "dropbox", _j("s", "l.", b(_URLSAFE, 135, "dbx"))),
        ("postman_api_key", "postman", _j("PM", "AK-", b(_HEX, 24, "pm1"), "-", b(_HEX, 34, "pm2"))),
        ("planetscale_token", "planetscale", _j("pscale", "_tkn_", b(_URLSAFE, 43, "ps"))),
        ("prefect_api_key", "prefect", _j("pn", "u_", b(_ALNUM, 36, "pnu"))),
        ("easypost_api_key", "easypost", _j("EZ", "AK", b(_ALNUM, 54, "ez"))),
        ("shippo_token", "shippo", _j("shippo", "_live_", b(_HEX, 40, "shippo"))),
        ("jwt", "jwt", jwt),
        ("bearer_token", "bearer", _j("Authorization: ", "Bearer ", b(_URLSAFE, 40, "bearer"))),
        ("bearer_token", "bearer-in-text", _j("curl -H 'bearer ", b(_ALNUM, 24, "bearer2"), "'")),
        ("authorization_header", "authorization-token", _j("Authorization: ", "Token ", b(_HEX, 40, "tok"))),
        ("authorization_header", "authorization-json", _j('{"authorization": "', b(_ALNUM, 20, "aj"), '"}')),
        ("basic_auth", "basic", _j("Authorization: ", "Basic ", basic)),
        ("cookie_header", "cookie", _j("Cookie: ", "session=", b(_ALNUM, 32, "cookie"))),
        ("url_userinfo", "url-userinfo", _j("https://zqx:", b(_ALNUM, 12, "url"), "@db.example.com/x")),
        ("url_userinfo", "postgres-dsn", _j("postgres://admin:", b(_ALNUM, 14, "pg"), "@10.0.0.5:5432/train")),
        ("userinfo_without_scheme", "userinfo-no-scheme", _j("admin:", b(_ALNUM, 12, "uns"), "@db.internal.example")),
        ("userinfo_without_scheme", "userinfo-localhost", _j("root:", b(_ALNUM, 10, "unl"), "@localhost")),
        ("signed_url", "s3-presigned",
         _j("https://zqx.s3.amazonaws.com/o.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-", "Signature=",
            b(_HEX, 64, "amz"))),
        ("signed_url", "azure-sas", _j("https://zqx.blob.core.windows.net/c/b?sv=2022-11-02&", "sig=",
                                       b(_B64, 43, "sas"), "%3D")),
        ("signed_url", "token-query", _j("https://data.example.com/set?", "token=", b(_ALNUM, 20, "tq"))),
        ("credential_assignment", "password-assignment", _j("pass", "word=", b(_ALNUM, 14, "pw"))),
        ("credential_assignment", "pwd-assignment", _j("Server=db;Uid=sa;", "Pwd=", b(_ALNUM, 12, "pwd"), ";")),
        ("credential_assignment", "token-colon", _j("tok", "en: ", b(_ALNUM, 24, "tokc"))),
        ("credential_assignment", "api-key-spaced", _j("api ", "key: ", b(_ALNUM, 20, "apik"))),
        ("credential_assignment", "client-secret", _j("client_", "secret = ", b(_ALNUM, 20, "cs"))),
        ("credential_assignment", "secret", _j("webhook_sec", "ret: ", b(_ALNUM, 20, "sec"))),
        ("credential_assignment", "access-token", _j("ACCESS_", "TOKEN=", b(_ALNUM, 20, "at"))),
        ("credential_assignment", "private-key", _j("private_", "key => '", b(_ALNUM, 20, "pk"), "'")),
        ("credential_assignment", "auth-token", _j("auth", "Token := ", b(_ALNUM, 20, "autht"))),
        ("credential_assignment", "refresh-token", _j("refresh_", "token=", b(_ALNUM, 20, "rt"))),
        ("credential_assignment", "credentials", _j("credent", "ials: ", b(_ALNUM, 20, "cr"))),
        ("credential_assignment", "portuguese-palavra-passe", _j("palavra-", "passe: ", b(_ALNUM, 12, "pp"))),
        ("credential_assignment", "german", _j("Pass", "wort: ", b(_ALNUM, 12, "de"))),
        ("credential_assignment", "german-kennwort", _j("Kenn", "wort=", b(_ALNUM, 12, "de2"))),
        ("credential_assignment", "french", _j("mot de ", "passe : ", b(_ALNUM, 12, "fr"))),
        ("credential_assignment", "spanish", _j("contra", "seña=", b(_ALNUM, 12, "es"))),
        ("credential_assignment", "portuguese", _j("sen", "ha: ", b(_ALNUM, 12, "pt"))),
        ("credential_assignment", "russian", _j("паро", "ль: ", b(_ALNUM, 12, "ru"))),
        ("credential_assignment", "chinese", _j("密", "码：", b(_ALNUM, 12, "zh"))),
        ("credential_assignment", "japanese", _j("パスワ", "ード=", b(_ALNUM, 12, "ja"))),
    ]
    return [Example(kind, text, name) for kind, name, text in rows]


SECRETS: list[Example] = _examples()

# Evasions: the same credentials, written so that a naive matcher would not see them.
ZWJ_GITHUB = _j("gh", "\u200d", "p_", _body(_ALNUM, 36, "zwj"))
EVASIONS: list[Example] = [
    Example("github_token", ZWJ_GITHUB, "zero-width-joiner-in-prefix"),
    Example("github_token", _j("g\u200bh", "p_", _body(_ALNUM, 36, "zwsp")), "zero-width-space"),
    Example("github_token", _j("g\u00adh", "p_", _body(_ALNUM, 36, "shy")), "soft-hyphen"),
    Example("github_token", _j("\ufeffgh", "p_", _body(_ALNUM, 36, "bom")), "byte-order-mark"),
    Example("github_token", _j("gh\u2060p", "_", _body(_ALNUM, 36, "wj")), "word-joiner"),
    Example("github_token", _j("ｇｈ", "ｐ＿", _body(_ALNUM, 36, "fw")), "full-width-prefix"),
    Example("aws_access_key_id", _j("Ａ", "ＫＩＡ", _body(_UPPER_DIGIT, 16, "fwa")), "full-width-aws"),
    Example("credential_assignment", _j("pass\u200c", "word=", _body(_ALNUM, 12, "zwnj")), "zwnj-in-keyword"),
    Example("credential_assignment", _j("PASS", "WORD = ", _body(_ALNUM, 12, "upper")), "upper-case-keyword"),
]

# Legitimate manifest text: none of it may be reported, as a value or (where it could be one) as a key.
BENIGN_VALUES: list[str] = [
    "sha256:" + "0123456789abcdef" * 4,
    "9b2e4f6a8c0d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a3b5c7d9e1f",
    "4e1c9a2f7b3d5e8c0a6f1d2b9e7c4a3f5d8b0e6c",
    "s3://acme-ml-data/support/conversations-2026q3/",
    "gs://acme-ml-reports/decontam/shard-001/report.html",
    "hf://datasets/acme/preference-pairs-v4",
    "ito://reports/acme/decontam-prefs-v4",
    "https://example.com/data/set",
    "https://huggingface.co/datasets/acme/support-v2/resolve/main/train.parquet",
    "az://acmestorage/container/path/to/data",
    "s3://bucket/a@b",
    "git@github.com:acme/training-recipes.git",
    "ml-team@acme.example",
    "Contact: ml-team@acme.example for access.",
    "owner:ml-team@acme.example",
    "mailto:ml-team@acme.example",
    "nvcr.io/nvidia/pytorch:24.01-py3@sha256:9b2e4f6a8c0d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a3b5c7d9e1f",
    "Train with max_tokens 4096 and a token budget of 2T tokens.",
    "token_budget: 2000000000000",
    "max_tokens: 409600000",
    "tokenizer: bpe-32k-v2-sentencepiece",
    "tokens: 2T",
    "keys-and-values attention cache, passwordless SSH to the nodes",
    "passwordless: enabled",
    "secretary: Johanna Schmidt",
    "The secretary general approved the budget.",
    "basic tokenization",
    "Basic tokenization with a BPE tokenizer and max_tokens 4096.",
    "bearer of news",
    "The bearer of news arrives.",
    "Bearer tokens are never stored in manifests.",
    "password policy reviewed",
    "Authorization is handled by the platform.",
    "risk-assessment-2026-quarterly-review-v2",
    "task-1234567890-finetune-sft-dpo",
    "disk-cache-0123456789abcdef",
    "sk-1",
    "hf_short",
    "ghp_short",
    "AKIA-is-a-prefix-only",
    "dGhpcyBpcyBhIGJhc2U2NCBkYXRhc2V0IG5hbWU=",
    "c3VwcG9ydC1jb252ZXJzYXRpb25zLTIwMjZxMw",
    "support-conversations-2026q3",
    "preference-pairs-v4",
    "13-gram overlap, exact and near-duplicate (MinHash 0.8)",
    "acme/evals/suite-007/split-0042/heldout-v3",
    "mmlu, gsm8k, humaneval, acme-support-heldout",
    "Instruction-tune the 8B base on the support corpus, then align with DPO.",
    "2026-11-20",
    "4800.00",
    "Run at 10:30 on 2026-11-20; see https://wiki.example.com/runs?id=42 for notes.",
    "The API key rotation runbook lives in the wiki.",
    "Feinabstimmung des Modells mit deutschen Daten; das Passwort-Handbuch liegt im Wiki.",
    "Entraînement du modèle sur le corpus de support.",
    "Ajuste fino del modelo con datos en español.",
    "Ajuste fino do modelo com dados em português.",
    "Дообучение модели на корпусе поддержки.",
    "在支持语料上微调模型",
    "サポートコーパスでモデルを微調整する",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f flag of Scotland",
]

BENIGN_KEYS: list[str] = [
    "max_tokens", "tokenizer", "tokenizer_name", "num_tokens", "token_budget", "TOKEN_LIMIT", "tokenBudget",
    "tokens", "author", "authority", "secretary", "keyword", "keys", "passage", "monkey", "bookkeeper",
    "passwordless", "keys-and-values", "key_value_heads", "compass", "bypass_cache", "description", "revision",
    "eval_suites", "checked_at", "ceiling_usd", "max_incremental_cost_usd", "interval_steps", "retain_last",
    "storage", "uri", "url", "header_rows",
]
