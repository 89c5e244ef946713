"""What the scanner looks for, as data: each rule a pattern, the literals that trigger it, the check that
confirms what it finds, and its own true-positive and false-positive samples.

Patterns are RE2 (google-re2), read over the UTF-8 bytes of NFKC text whose strings are joined by NUL:
no pattern may match NUL inside a class, so no match spans two strings. Group `v` is the secret (the
part `spans` masks and the check reads); group `n`, where present, is the name given the value. Every
match contains one of the rule's `triggers` (compared case-insensitively when `fold`): one pass finds
the triggers present, and only their rules are searched.

A leading `\b` is checked outside RE2, on the character before a match, so that the engine can jump
from one occurrence of the literal that follows to the next (a pattern opening with `\b` or a class
makes it read every byte).

Samples are templates: `{an36}` stands for 36 pseudo-random characters of class `an` (see `CLASSES`;
`expand` fills them, the same way every time), so no sample is a credential written out. The formats
are facts gathered from providers' documentation and public rule sets (prefixes, lengths, alphabets);
the patterns and samples are this project's own.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .names import PROVIDERS as PROVIDER_NAMES
from .providers import PROVIDER_FAMILIES, ProviderRule

CLASSES: dict[str, str] = {
    "an": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
    "al": "abcdefghijklmnopqrstuvwxyz0123456789",
    "AU": "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "bs": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    "us": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
    "d": "0123456789",
    "let": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "low": "abcdefghijklmnopqrstuvwxyz",
    "BECH": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
    "x": "x",
}
_FIELD = re.compile(r"\{([A-Za-z]+)([0-9]+)\}")


def expand(template: str) -> str:
    """A sample with each `{class count}` field filled with characters of that class (deterministic;
    letters of both cases and a digit wherever the class has them, as a random token would)."""
    import random  # samples only: the scanner itself never needs it

    rng = random.Random(template)  # noqa: S311  # sample text, not a secret

    def fill(match: re.Match[str]) -> str:
        alphabet, count = CLASSES[match.group(1)], int(match.group(2))
        out = [rng.choice(alphabet) for _ in range(count)]
        for i, kind in enumerate((str.isdigit, str.isupper, str.islower)):
            pool = [c for c in alphabet if kind(c)]
            if pool and count > 6 and not any(kind(c) for c in out):
                out[(i * 5 + 3) % count] = rng.choice(pool)
        return "".join(out)

    return _FIELD.sub(fill, template)


class Rule(NamedTuple):
    """One thing the scanner looks for. `check` names the confirmation (checks.CHECKS, or "assigned":
    a credential name and a value; "key_name": an object key); `keys_only`: searched in keys alone;
    `parse`: the pattern in Python's syntax, to split a match into its groups, where the RE2 spelling is
    not also Python's; `pattern_triggers`: the triggers are RE2 patterns, not literals; `family`: the
    heading docs/scanner.md lists the rule under."""

    kind: str
    pattern: str
    triggers: tuple[str, ...]
    what: str
    check: str = "shape"
    tps: tuple[str, ...] = ()
    fps: tuple[str, ...] = ()
    fold: bool = False
    keys_only: bool = False
    parse: str = ""
    pattern_triggers: bool = False
    family: str = ""


# ---------------------------------------------------------------------------- names before a value

# Stems of every word names.py reads as (maybe) naming a credential: a password's, then the others.
PASSWORD_STEMS: tuple[str, ...] = (
    "pass", "pwd", "pw", "kennw", "contrase", "senha", "парол", "密码", "密碼", "口令", "パスワード", "暗証番号",
    "비밀번호",
)
STEMS: tuple[str, ...] = (
    *PASSWORD_STEMS, "secret", "token", "key", "auth", "cred", "cookie", "clave", "chave", "schlüssel", "schlussel",
    "clé", "cle", "секрет", "токен", "ключ", "密钥", "密鑰", "令牌", "トークン", "秘密鍵", "토큰", "キー", "鍵",
)
_NAME_CHARS = r"[\p{L}\p{N}_.$@-]"  # as RE2 reads it; Python's `[\w.$@-]` reads the same


def _value_chars(but: str = "") -> str:
    """A class of the characters a value is made of (printable ASCII but "',;<>\\`), but `but`."""
    return "[" + "".join(f"\\x{c:02x}" for c in range(0x21, 0x7F) if chr(c) not in "\"',;<>\\`" + but) + "]"


_VALUE_CHARS = _value_chars()
# A value's first characters, when they are no reference (`${`, `$(`, `{{`, `%(`): a reference is a placeholder.
_VALUE_START = f"(?:{_value_chars('${%')}|\\${_value_chars('{(')}|\\{{{_value_chars('{')}|%{_value_chars('(')})"
_IS = r"(?i:is|ist|lautet|est|es|é|e|era|war|sind|are|was|это|=|:)"  # "is" in the eight languages
# A type between name and `=` (`var x string = `, `x: String = `), = : := ::= ?= .= => ->, <name>value,
# ("NAME", "value")
_EXPLICIT = (
    r"[ \t]{0,4}:?[ \t]{0,4}[A-Za-z_][A-Za-z0-9_.<>\[\]?]{0,40}[ \t]{0,4}:?=[ \t]{0,4}[\"'`]?"
    r"|[\"'`\]]?[ \t]{0,4}(?:=>|:{1,3}=|[?.+]=|->|=|:)[ \t]{0,4}[\"'`]?"
    r"|[\"']?[ \t]{0,4}>\s{0,16}|[\"'][ \t]{0,4},[ \t]{0,4}[\"']"
)
_WORDED = (  # password is ..., 密码是 ..., пароль — ..., and a bare space: --token X, .netrc, "api key X"
    r"[ \t]{1,4}" + _IS + r"[ \t]{1,4}[\"'`]?|[ \t]{0,4}(?:是|为|為|は|が)[ \t]{0,4}|[ \t]{1,4}(?:—|–|-)[ \t]{1,4}"
    r"|[ \t]{1,4}[\"'`]?"
)
# What `checks.looks_random` may accept, as far as a pattern can say it: sixteen letters or digits in a row,
# twelve digits, a UUID, letters and digits alternating three times, a lower-case letter before a capital,
# or four consonants in a row, `x` apart (a value made of words and a number, `Vector11_Model`, or a row of
# `x`, is none of these).
_RANDOMISH = ("[A-Za-z0-9]{16}|[0-9]{12}|[A-Za-z][0-9]+[A-Za-z]+[0-9]|[0-9][A-Za-z]+[0-9]+[A-Za-z]|[a-z][A-Z]"
              "|(?i:[b-df-hj-np-tv-wz]{4})|[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def _assignment(stems: tuple[str, ...], explicit: str, worded: str) -> str:
    return ("(?P<n>(?i:" + "|".join(stems) + ")" + _NAME_CHARS + "*(?:[ \t](?i:api))?)"
            "(?:(?P<o>" + _EXPLICIT + ")(?P<v>" + explicit + ")|(?P<p>" + _WORDED + ")(?P<w>" + worded + "))")


_ANY_VALUE = _VALUE_CHARS + "{6,}", _VALUE_CHARS + "*[0-9]" + _VALUE_CHARS + "*|" + _VALUE_CHARS + "{16,}"
# A password's name: after an operator the value is six characters or more; after words or a space, it holds
# a digit or is sixteen characters or more (so that "password reset link" is not even a candidate). Any other
# name: the value holds what a random-looking secret must, so that the pattern alone passes over most values
# the check would refuse (`Vector11_Model`, `abcdef0001234`).
PASSWORD_ASSIGNMENT = _assignment(PASSWORD_STEMS, _VALUE_START + _VALUE_CHARS + "{4,}", _ANY_VALUE[1])
TOKEN_ASSIGNMENT = _assignment((*STEMS[len(PASSWORD_STEMS):], *PROVIDER_NAMES),
                               *[f"(?:{_VALUE_START}{_VALUE_CHARS}*)?(?:{_RANDOMISH}){_VALUE_CHARS}*"] * 2)
ASSIGNMENT_PYTHON = _assignment((*STEMS, *PROVIDER_NAMES), *_ANY_VALUE).replace(_NAME_CHARS, r"[\w.$@-]")
KEY_NAME = "[^\\x00]*(?i:" + "|".join([*STEMS, *PROVIDER_NAMES]) + ")[^\\x00]*"

_B64 = "[A-Za-z0-9+/]"
_URL = "[^\\s\\x00\"'<>`]"

GENERIC_RULES: tuple[Rule, ...] = (
    Rule("credential_key_name", KEY_NAME, (*STEMS, *PROVIDER_NAMES),
         "an object key that names a credential (`password`, `apiKey`, `HF_TOKEN`, `client-secret`, `Passwort`, "
         "`密码`); with a weaker name (`key`, `auth`, `pw`, a provider's name) its string value is checked instead",
         check="key_name", keys_only=True, fold=True,
         tps=("password", "apiKey", "HF_TOKEN", "client-secret", "Passwort", "密码", "dbPassword", "webhookSecret",
              "x-api-key", "PRIVATE_KEY", "contraseña", "пароль", "パスワード", "access_token", "senha"),
         fps=("max_tokens", "tokenizer", "token_budget", "secretary", "keys", "keys-and-values", "passwordless",
              "key", "author", "monkey", "pad_token", "public_key", "secret_name", "password_file", "primary_key"),
         family="Credential names"),
    Rule("credential_assignment", PASSWORD_ASSIGNMENT, PASSWORD_STEMS,
         "a password's name given a value in text, in any usual form: `password=...`, `--password ...`, "
         "`.netrc`'s `password ...`, `pw: ...`, prose (`db password is ...`, `Das Passwort ist ...`, "
         "`le mot de passe est ...`, `la contraseña es ...`, `a senha é ...`, `пароль: ...`, `密码是...`, "
         "`パスワードは...`); the value must be one a person chose or look random", check="assigned", fold=True,
         parse=ASSIGNMENT_PYTHON,
         tps=("password={an14}", "db password is Hunter2Winter!", "--password Wint3r-Sun!", "pw: Hunter2Winter!",
              "machine api.wandb.ai login u password {hex40}", "Das Passwort ist Sommer2026!",
              "le mot de passe est Ete2026!x", "la contraseña es Verano2026!", "a senha é Inverno2026!",
              "пароль: Zima2026!x", "密码是Hunter2Winter", "パスワードはHunter2Winterです",
              "tokenizer password=Hunter2Winter!", "passwordless password=Hunter2Winter!"),
         fps=("passwordless: yes", "password policy: rotate every 90 days", "password: changeme",
              "The password for the cluster is stored in Vault.", "password=${DB_PASSWORD}",
              "password_file: /etc/ml/pw.txt"), family="Credential names"),
    Rule("credential_assignment", TOKEN_ASSIGNMENT, (*STEMS[len(PASSWORD_STEMS):], *PROVIDER_NAMES),
         "any other credential's name given a value in text, in any usual form: `api_key: ...`, "
         "`\"x_token\": \"...\"`, `<xToken>...</xToken>`, `setProperty(\"X_TOKEN\", \"...\")`, `X ?= ...`, "
         "`--token ...`, prose (`the api key is ...`, `der API-Schlüssel ist ...`, `la clé API est ...`); the value "
         "must look random", check="assigned", fold=True, parse=ASSIGNMENT_PYTHON,
         tps=("the api key is {hex40}", "wandb api key {hex40}", "--token {an32}", "--api-key {an32}",
              'xToken := "{an30}"', '<apiToken>\n    {an32}\n</apiToken>', 'System.setProperty("X_TOKEN", "{an30}")',
              'var xToken string = "{an30}"', 'val apiKey: String = "{an30}"', '{"username": "ml", "key": "{hex32}"}',
              "discord_client_id = {d18}", "token: Ab12Cd34Ef", "auth_token={hex8}-{hex4}-{hex4}-{hex4}-{hex12}",
              "token_budget token={an20}", 'telegram_token = "telegram_token = "{d9}:A{us40}"'),
         fps=("max_tokens: 4096", "token budget of 2T tokens", "secretary: Jo Smith",
              "Set WANDB_API_KEY=<your-key> and HF_TOKEN=${HF_TOKEN}", 'CREDENTIALS_ID = "K8S_CRED"',
              "The API key rotation runbook lives in the wiki.", "api_key: changeme", "token: xxxxxxxxxxxxxxxx",
              "keyword: Befaehigung_P2", "cache key: {hex64}", "secret_name: prod-db-credentials",
              "tokenizer: bpe-32k-v2-sentencepiece", "author: Jane Doe", "token: abcdef0001234",
              "api_key=Vector7_Model"), family="Credential names"),
    Rule("credential_assignment",
         r"(?i:docker|podman|nerdctl|buildah|skopeo|helm|oras|crane|sshpass)\b[^\x00\n]*?[ \t]"
         r"(?:-p|--password)(?:[ \t]{1,4}|=)[\"']?(?P<v>[^\s\"'\x00]{2,})",
         ("docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras", "crane", "sshpass"),
         "a password on a command line: `docker login -u x -p ...`, `sshpass -p ...`", check="password", fold=True,
         tps=("docker login -u ml -p {an20} registry.example.com", "sshpass -p Hunter2Winter ssh gpu-01"),
         fps=("docker login -u ml -p $REGISTRY_PASSWORD", "docker login --password-stdin",
              "docker run -p 8080:80 nginx"), family="Credential names"),
    Rule("basic_auth",
         r"(?i:curl)\b(?:[^\x00\n]*\n){0,4}?[^\x00\n]*?[ \t](?:-u|--user)(?:[ \t]{1,4}|=)"
         r"(?P<v>[\"']?[^\s\"'\x00:]*:[^\s\"'\x00]+)",
         ("curl",), "a user and password on a curl command line (`curl -u admin:pw ...`)", check="pair", fold=True,
         tps=("curl -u admin:pw https://api.example.com", "curl --user ml:{an16} https://x.example.com/v1"),
         fps=("curl -u $USER:$TOKEN https://x.example.com", "curl -u admin: https://x.example.com",
              "curl -u user:<password> https://x.example.com"), family="Headers and encoded credentials"),
    Rule("basic_auth", r"(?i:basic)[ \t]{1,8}(?P<v>" + _B64 + "{8,}={0,2})", ("basic",),
         "`Basic <base64>` whose decoded text is `user:password`", check="basic", fold=True,
         tps=("Authorization: Basic bWw6SHVudGVyMldpbnRlcg==",),
         fps=("Basic tokenization with a BPE tokenizer", "basic authentication is disabled"),
         family="Headers and encoded credentials"),
    Rule("bearer_token",
         "(?i:bearer)[ \t\u00a0\u202f\u3000]{1,8}(?P<v>[A-Za-z0-9._~+/=-]{12,})", ("bearer",),
         "`Bearer <token>` (the token random-looking, so 'the bearer of news' is none)", check="random", fold=True,
         tps=("Authorization: Bearer {us40}", "curl -H 'bearer {an24}'"),
         fps=("The bearer of news arrives.", "Bearer tokens are never stored in manifests.",
              "Bearer <token>", "bearer ${ACCESS_TOKEN}"), family="Headers and encoded credentials"),
    Rule("authorization_header",
         r"(?i:authorization)[\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?"
         r"(?:(?i:token|api-?token|api-?key|sso-key|otp|digest|key|negotiate|ntlm|hmac|signature)[ \t]{1,8})?"
         r"(?P<v>[A-Za-z0-9._~+/=:-]{12,})", ("authorization",),
         "an `Authorization:` header with a value in another scheme (`Token ...`, `ApiKey ...`) or none",
         check="random", fold=True,
         tps=("Authorization: Token {hex40}", '{"authorization": "{an24}"}'),
         fps=("Authorization: Bearer", "Authorization is handled by the platform."),
         family="Headers and encoded credentials"),
    Rule("cookie_header",
         r"(?i:cookie)[ \t]{0,8}:[ \t]{0,8}[A-Za-z0-9_.-]{1,64}=(?P<v>[^ \t;\"\x00]{16,})", ("cookie",),
         "`Cookie:` and `Set-Cookie:` headers with a session value", check="random", fold=True,
         tps=("Cookie: session={an32}", "Set-Cookie: sid={us40}; HttpOnly"),
         fps=("Cookie: theme=dark-mode-enabled", "cookie: consent=accepted"), family="Headers and encoded credentials"),
    Rule("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", ("eyJ",),
         "JSON Web Tokens (header, payload and signature, or none)", check="any",
         tps=("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ6cXgifQ.{us43}", "token: eyJ0eXAiOiJKV1QifQ.eyJpc3MiOiJ4In0.{us30}"),
         fps=("eyJhbGciOiJIUzI1NiJ9", "eyJ.eyJ.abc"), family="Headers and encoded credentials"),
    Rule("private_key",
         r"-----BEGIN[ A-Z0-9_-]{0,64}PRIVATE KEY(?: BLOCK)?-----(?:[\sA-Za-z0-9+/=:,.-]|\\[nr])*",
         ("-----BEGIN",), "PEM private keys of any type (RSA, EC, DSA, OpenSSH, PKCS#8, encrypted, PGP), the header "
         "line alone enough (a log prints a key line by line; a manifest never holds one), also inside a service "
         "account's JSON", check="any",
         tps=("-----BEGIN RSA PRIVATE KEY-----\nMIIE{bs60}\n-----END RSA PRIVATE KEY-----",
              '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n{bs64}"}',
              "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA{bs64}",
              "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF{bs64}",
              "-----BEGIN PRIVATE KEY-----\nanything\n-----END PRIVATE KEY-----",
              "-----BEGIN EC PRIVATE KEY-----\n...\n-----END EC PRIVATE KEY-----",
              "-----BEGIN ENCRYPTED PRIVATE KEY-----", "stage sft: -----BEGIN PGP PRIVATE KEY BLOCK-----"),
         fps=("-----BEGIN CERTIFICATE-----\nMIIC{bs64}", "-----BEGIN PUBLIC KEY-----\nMIIB{bs64}",
              "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQEN{bs64}", "a PEM private key begins with -----BEGIN"),
         family="Key and configuration files"),
    Rule("private_key", r"PuTTY-User-Key-File-[0-9]:[^\x00]*", ("PuTTY-User-Key-File-",),
         "PuTTY private key files", check="any", tps=("PuTTY-User-Key-File-3: ssh-ed25519",),
         fps=("PuTTY-User-Key-File is a format",), family="Key and configuration files"),
    Rule("private_key",
         r"LS0tLS1CRUdJTi" + _B64 + r"{0,64}(?:UFJJVkFURSBLRV|BSSVZBVEUgS0VZ|QUklWQVRFIEtFW)" + _B64 + "*={0,2}",
         ("LS0tLS1CRUdJTi",), "a PEM private key in base64 (kubeconfig `client-key-data`, Kubernetes secrets)",
         check="any", tps=("client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo{bs80}",),
         fps=("LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",), family="Key and configuration files"),
    Rule("private_key",
         r"\b(?:MI[IJ]" + _B64 + r"{2}[AQgw]IBA(?:AKC|DANBg)|MIG" + _B64 + r"AgEAMB|MHcCAQEEI|MC4CAQAwBQYDK2Vw"
         r"|b3BlbnNzaC1rZXktdjE)[A-Za-z0-9+/\s]{40,}={0,2}",
         ("IBAAKC", "IBADANBg", "AgEAMB", "MHcCAQEEI", "MC4CAQAwBQYDK2Vw", "b3BlbnNzaC1rZXktdjE"),
         "a private key without its PEM header: the base64 of an RSA, EC or Ed25519 key (PKCS#1, PKCS#8, SEC 1) "
         "or of an OpenSSH key", check="any",
         tps=("MIIEpAIBAAKCAQEA{bs120}", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC{bs120}", "MHcCAQEEI{bs60}",
              "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg{bs40}", "b3BlbnNzaC1rZXktdjEAAAAA{bs80}"),
         fps=("MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA{bs120}",), family="Key and configuration files"),
    Rule("url_userinfo",
         r"://(?P<v>[^/?#@\s\"'<>\x00]+)@[^\s\x00\"'<>@]", ("@",),
         "a URL with userinfo: `scheme://user:password@host` (databases, brokers, git over https), also a user "
         "alone", check="userinfo",
         tps=("postgres://admin:{an14}@10.0.0.5:5432/train", "https://ml:{an12}@git.example.com/acme/x.git",
              "mongodb+srv://svc:{an16}@cluster0.example.net/db", "redis://:{an20}@cache:6379/0",
              "ssh://deploy@build.example.com/srv"),
         fps=("s3://bucket/a@b", "git@github.com:acme/training-recipes.git", "mailto:ml-team@acme.example",
              "postgres://<user>:<password>@localhost/db", "https://${USER}:${PASS}@git.example.com",
              "nvcr.io/nvidia/pytorch:24.01-py3@sha256:{hex64}"), family="URLs"),
    Rule("url_userinfo",
         r"(?:^|[\s\x00\"'(])(?P<v>[A-Za-z0-9._%+-]+:[^\s\x00\"'/@:<>]{3,})@(?:localhost|[A-Za-z0-9-]+"
         r"(?:\.[A-Za-z0-9-]+)+|[A-Za-z0-9-]+:[0-9]{2,5})", ("@",),
         "`user:password@host` without a scheme (the password neither a word nor a placeholder)",
         check="password_pair",
         tps=("admin:{an12}@db.internal.example", "root:{an10}@localhost"),
         fps=("owner:ml-team@acme.example", "Contact: ml-team@acme.example for access.",
              "git@github.com:acme/training-recipes.git"), family="URLs"),
    Rule("signed_url",
         r"://[^\s\x00\"'<>]*?[?&;](?i:x-amz-signature|x-amz-credential"
         r"|x-amz-security-token|x-goog-signature|x-goog-credential|signature|sig|token|access_token|id_token"
         r"|refresh_token|private_token|api_key|apikey|key|password|passwd|pwd|secret|client_secret|auth|code)"
         r"=(?P<v>[^\s\x00\"'<>&#]{6,})", ("?",),
         "a URL whose query carries a signature or a credential: S3 and GCS pre-signed URLs, Azure SAS "
         "(`sig=`), CloudFront (`Signature=`), `?token=`, `?api_key=`, `?key=`, `?password=`", check="value",
         tps=("https://b.s3.amazonaws.com/o.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={hex64}",
              "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig={bs43}%3D",
              "https://data.example.com/set?token={an20}", "https://maps.example.com/api?key=AIza{us35}"),
         fps=("https://wiki.example.com/runs?id=42", "https://example.com/search?key=title",
              "https://example.com/x?token=${TOKEN}", "https://example.com/x?sig=<signature>"), family="URLs"),
    Rule("url_path_token",
         r"://[^\s\x00\"'<>?#]*?/(?i:tokens?|keys?|secrets?|apikey|api_key"
         r"|webhooks?|hooks|auth|credentials?|private)/(?:[0-9]{4,20}/)?(?P<v>[A-Za-z0-9_.~+=-]{16,})",
         ("/token", "/key", "/secret", "/apikey", "/api_key", "/webhook", "/hooks/", "/auth/", "/credential",
          "/private/"), "a URL whose path carries a token after a credential word (`.../token/<token>`, "
         "`.../webhooks/<id>/<token>`)", check="random", fold=True,
         tps=("https://hooks.example.com/webhooks/123456/{us48}", "https://api.example.com/v1/token/{an32}"),
         fps=("https://example.com/docs/tokens/overview-of-tokenization", "https://example.com/keys/rotation-guide"),
         family="URLs"),
    Rule("url_path_token",
         r"://[^\s\x00\"'<>?#/]+(?:/[^\s\x00\"'<>?#/]*)*?/"
         r"(?P<v>[A-Za-z0-9]{32,64})(?:[/?#\s\x00\"'<>]|$)", ("/[A-Za-z0-9]{32}",),
         "a URL with a path segment of 32 to 64 letters and digits mixed like a random token (hexadecimal "
         "revisions and ids excepted)", check="random_text", pattern_triggers=True,
         tps=("https://ntfy.example.com/{an40}", "https://api.example.com/bot/{an36}/send"),
         fps=("https://huggingface.co/acme/m/resolve/{hex40}/config.json", "s3://bucket/sha256/{hex64}",
              "https://example.com/aVeryLongPathSegmentWithWordsOnlyAndCamelCase"), family="URLs"),
)


def _provider(rule: ProviderRule, family: str) -> Rule:
    kind, pattern, triggers, what, tps, fps, check, fold = rule
    return Rule(kind, pattern, triggers, what, check, tps, fps, fold, family=family)


RULES: tuple[Rule, ...] = (
    *GENERIC_RULES[:1],
    *(_provider(rule, family) for family, rules in PROVIDER_FAMILIES for rule in rules),
    *GENERIC_RULES[1:],
)


def table() -> str:
    """The rules as docs/scanner.md lists them: each family with its kinds (a test keeps them equal)."""
    families: dict[str, dict[str, None]] = {}
    for rule in RULES:
        families.setdefault(rule.family, {})[rule.kind] = None
    rows = ["| Family | Kinds |", "|---|---|"]
    rows += [f"| {family} | {', '.join(f'`{kind}`' for kind in kinds)} |" for family, kinds in families.items()]
    return "\n".join(rows)
