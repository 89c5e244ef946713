"""Names that say a value is a credential: object keys ("password", "apiKey", "HF_TOKEN") and the words
before a value in text ("api key is ...", "--token ...", "Passwort: ...").

A name is split into lower-case words (snake, kebab, dotted, camel and spaced forms; a change of
script also splits), trailing numbers dropped. It is STRONG when a word names a credential on its
own, WEAK when it may (`key`, `auth`, `pw`, a provider's name: the value must then look like a
secret), and NONE otherwise. A word followed by a word that makes it a description (`secret_name`, `password_file`,
`token_url`) or preceded by one that makes it something else (`public_key`, `pad_token`,
`primary_key`) names no credential.
"""

from __future__ import annotations

import functools

from . import engine

NONE, WEAK, STRONG = 0, 1, 2

# Words that name a credential wherever they stand (plural forms listed).
ALWAYS: frozenset[str] = frozenset({
    "password", "passwords", "passwd", "passphrase", "passphrases", "pwd", "secret", "secrets", "credential",
    "credentials", "creds", "authorization", "cookie", "cookies", "apikey", "apikeys", "privatekey", "secretkey",
    "accesskey", "accesstoken", "authtoken", "apitoken", "refreshtoken", "sessiontoken", "bearertoken",
    "clientsecret", "passwort", "passwörter", "passworter", "kennwort", "kennwörter", "kennworter", "motdepasse",
    "contraseña", "contraseñas",
    "contrasena", "contrasenas", "senha", "senhas", "пароль", "пароли", "пароля", "секрет", "секреты",
})
# A word ending with one of these names a credential too ("dbpassword", "webhooksecret").
SUFFIXES: tuple[str, ...] = ("password", "passwd", "passphrase", "secret", "apikey", "privatekey", "secretkey",
                             "accesskey", "accesstoken", "authtoken", "apitoken", "passwort", "kennwort")
# Written without spaces: a name containing one of these names a credential.
UNSPACED: tuple[str, ...] = ("密码", "密碼", "口令", "密钥", "密鑰", "令牌", "パスワード", "暗証番号", "トークン",
                             "秘密鍵", "비밀번호", "토큰", "motdepasse", "palavrapasse")
# Words that name a credential as the last word of a name: "hf_token", "accessToken", not "token_budget".
LAST: frozenset[str] = frozenset({"token", "токен"})
# Words for "key": a credential after a qualifier ("api_key", "clave API"), maybe one alone ("key").
KEY_WORDS: frozenset[str] = frozenset({"key", "keys", "schlüssel", "schlussel", "clave", "chave", "ключ", "clé",
                                       "cle", "キー", "鍵"})
KEY_QUALIFIERS: frozenset[str] = frozenset({
    "api", "private", "secret", "access", "account", "signing", "sign", "encryption", "decryption", "master",
    "session", "license", "licence", "client", "auth", "app", "application", "service", "storage", "subscription",
    "shared", "sas", "deploy", "ssh", "gpg", "pgp", "rsa", "ecdsa", "ed25519", "hmac", "jwt", "webhook", "admin",
    "root", "consumer", "wallet", "secreta", "secreto", "secrète", "secrete", "privada", "privado", "privée",
    "privee", "geheim",
    "geheimer", "privater", "секретный", "приватный",
})
# Words that may name a credential as the last word: the value decides.
WEAK_LAST: frozenset[str] = frozenset({"pw", "pass", "auth", *KEY_WORDS})
# Providers' names: a name holding one may name a credential (`wandb_key`, `discord_client_id`).
PROVIDERS: tuple[str, ...] = (
    "adafruit", "algolia", "airtable", "alibaba", "asana", "atlassian", "jira", "confluence", "beamer", "bitbucket",
    "bittrex", "cloudflare", "codecov", "cohere", "coinbase", "confluent", "contentful", "datadog", "discord",
    "droneci", "dropbox", "etsy", "facebook", "fastly", "finicity", "finnhub", "flickr", "freshbooks", "gitter",
    "gocardless", "heroku", "hubspot", "intercom", "jfrog", "artifactory", "bintray", "kraken", "kucoin",
    "launchdarkly", "linkedin", "looker", "mailchimp", "mailgun", "mapbox", "mattermost", "meraki", "messagebird",
    "netlify", "newrelic", "nytimes", "okta", "plaid", "rapidapi", "sendbird", "sentry", "snyk", "sonar",
    "sourcegraph", "squarespace", "sumo", "telegram", "travis", "twitch", "twitter", "typeform", "yandex", "zendesk",
    "wandb", "kaggle", "openai", "anthropic", "huggingface", "replicate", "comet", "neptune", "clearml", "mlflow",
    "pinecone", "weaviate", "stripe", "twilio", "sendgrid", "slack", "github", "gitlab", "docker", "pypi", "npm",
)
# A credential word followed by one of these describes something else ("secret_name", "token_url").
DESCRIBING: frozenset[str] = frozenset({
    "name", "names", "id", "ids", "identifier", "length", "len", "size", "type", "types", "kind", "file", "files",
    "filename", "path", "paths", "dir", "url", "urls", "uri", "uris", "endpoint", "endpoints", "host", "ref", "refs",
    "reference", "version", "arn", "env", "var", "variable", "variables", "manager", "store", "policy", "policies",
    "rotation", "rotate", "expiry", "expires", "expiration", "ttl", "format", "field", "fields", "prefix", "suffix",
    "location", "provider", "source", "scope", "scopes", "limit", "limits", "budget", "count", "mode", "enabled",
    "required", "min", "max", "hint", "label", "description", "help", "regex", "pattern", "schema", "template",
    "lifetime", "algorithm", "alg", "reset", "strength", "rule", "rules", "prompt", "column", "usage", "rate",
    "index", "offset", "position", "mask", "embedding", "embeddings", "level", "vault", "less", "ring", "word",
    "board", "stroke", "frame", "pair", "down", "up", "press", "pressed", "code", "hash", "chain", "stone", "note",
    "notes", "holder", "keeper", "value", "values", "dim", "heads", "head",
})
# A credential word preceded by one of these is something else ("public_key", "pad_token", "cache_key").
NOT_AFTER: frozenset[str] = frozenset({
    "public", "pub", "publishable", "primary", "foreign", "sort", "partition", "cache", "csrf", "xsrf", "page",
    "next", "continuation", "cursor", "idempotency", "dedup", "lookup", "map", "dict", "object", "bucket", "row",
    "column", "index", "composite", "natural", "surrogate", "unique", "group", "shard", "routing", "message",
    "translation", "i18n", "locale", "sequence", "schema", "hot", "join", "range", "hash", "metric", "label",
    "split", "config", "field", "value", "record", "entry", "item", "feature", "text", "input", "output",
    "target", "image", "audio", "video", "vision", "query", "pad", "eos", "bos", "unk", "sep", "cls", "mask",
    "special", "start", "end", "stop", "eot", "sot", "additional", "extra", "chat", "system", "assistant", "tool",
    "think", "thinking", "begin", "decoder", "encoder", "fim", "middle", "placeholder", "default", "ignore",
    "ignored", "max", "min", "num", "per", "total", "first", "last", "second", "single", "multi", "forward",
    "backward", "boarding", "sub", "word", "subword", "by", "no", "without", "meta", "metadata", "kv", "rotary",
})

_PROVIDERS = frozenset(PROVIDERS)
_AFTER_KEY = frozenset({"api", "secreta", "secrète", "secrete"})  # "clave API", "clé secrète"
_SPLIT = r"[\W_]+"
_CJK = "\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CAMEL = (f"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z0-9])(?=[{_CJK}])"
          f"|(?<=[{_CJK}])(?=[A-Za-z0-9])")


def words(name: str) -> list[str]:
    """The lower-case words of a name, trailing numbers dropped ("api_token_2" -> ["api", "token"])."""
    split, camel = engine.python(_SPLIT).split, engine.python(_CAMEL).split
    out = [w.lower() for part in split(name) if part for w in camel(part) if w]
    while out and out[-1].isdigit():
        out.pop()
    return out


@functools.lru_cache(maxsize=4096)
def strength(name: str) -> int:
    """How surely `name` names a credential: STRONG, WEAK or NONE."""
    found = words(name)
    compact = "".join(found)
    best = STRONG if any(word in compact for word in UNSPACED) else NONE
    last = len(found) - 1
    for i, word in enumerate(found):
        after = found[i + 1] if i < last else ""
        before = found[i - 1] if i else ""
        if after in DESCRIBING or before in NOT_AFTER:
            continue
        if word in ALWAYS or word.endswith(SUFFIXES) or (i == last and word in LAST):
            return STRONG
        if word in KEY_WORDS and (i == last or after in _AFTER_KEY):
            if before in KEY_QUALIFIERS or after in _AFTER_KEY:
                return STRONG
            best = max(best, WEAK)
        elif (i == last and word in WEAK_LAST) or word in _PROVIDERS:
            best = max(best, WEAK)
    return best


@functools.lru_cache(maxsize=4096)
def is_password_name(name: str) -> bool:
    """Is it a password (a secret a person chose) rather than a token or key?"""
    found = words(name)
    compact = "".join(found)
    return any(w in ("pw", "pwd", "pass") or w.endswith(("pwd", "pass")) for w in found) or any(
        stem in compact for stem in _PASSWORD_STEMS)


_PASSWORD_STEMS = ("password", "passwd", "passwort", "passphrase", "kennwort", "contrase", "senha", "парол", "密码",
                   "密碼", "口令", "パスワード", "暗証番号", "비밀번호", "motdepasse", "palavrapasse")
