"""A focused scanner for credentials in a parsed JSON document (contract §6).

Why our own and not detect-secrets: a `# pragma: allowlist secret` inside a JSON string
silences detect-secrets, it misses `Bearer ...`, `sk-proj-...`, `hf_...` and credential-named
keys with low-entropy values, and it flags every sha256 we legitimately carry. This scanner
looks at every key and every string value of the parsed document (so JSON escapes cannot hide
a token), knows no allow-list of any kind, and reports only where and what kind -- never the
value. docs/threat-model.md lists what it cannot see.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

MAX_FINDINGS = 20
_POINTER_MAX = 200

@dataclass(frozen=True)
class _Check:
    """One kind of credential: cheap literal triggers first, then a bounded pattern.

    Every quantifier is bounded and matches only as much as it must to prove the shape (the kind
    is reported, never the value), so each check is linear in the length of the text whatever it
    holds. The triggers are plain substring tests; a string without any trigger costs nothing more.
    """

    kind: str
    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    folded: bool = False  # triggers are tested against the lower-cased text

    def triggered(self, text: str, lower: str) -> bool:
        haystack = lower if self.folded else text
        return any(trigger in haystack for trigger in self.triggers)


_AWS_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "AROA", "APKA", "ASCA")
_CREDENTIAL_KEYWORDS = ("password", "passwd", "secret", "apikey", "api_key", "api-key", "access_token",
                        "access-token", "accesstoken", "auth_token", "auth-token", "authtoken")

_CHECKS: tuple[_Check, ...] = (
    _Check("private_key", ("PRIVATE KEY",), re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY")),
    _Check("aws_access_key_id", _AWS_PREFIXES,
           re.compile(r"(?<![A-Z0-9])(?:" + "|".join(_AWS_PREFIXES) + r")[A-Z0-9]{16}(?![A-Z0-9])")),
    _Check("github_token", ("gh", "github_pat_"),
           re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30}|github_pat_[A-Za-z0-9_]{20})")),
    _Check("huggingface_token", ("hf_",), re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30}")),
    _Check("openai_style_key", ("sk-",),
           re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-|ant-[a-z0-9]{2,8}-)?"
                      r"(?=[A-Za-z0-9_-]{0,63}[0-9])[A-Za-z0-9_-]{32}")),
    _Check("slack_token", ("xox",), re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10}")),
    _Check("slack_webhook", ("hooks.slack.com",),
           re.compile(r"hooks\.slack\.com/services/T[A-Za-z0-9_]{1,64}/B[A-Za-z0-9_]{1,64}/[A-Za-z0-9_]")),
    _Check("stripe_key", ("_live_", "_test_"),
           re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10}")),
    _Check("google_api_key", ("AIza",), re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}")),
    _Check("jwt", ("eyJ",),
           re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8}")),
    _Check("bearer_token", ("bearer",),
           re.compile(r"(?i:\bbearer)\s{1,8}(?=[A-Za-z0-9._~+/=-]{0,63}[0-9])[A-Za-z0-9._~+/=-]{8}"), folded=True),
    _Check("url_userinfo", ("://",), re.compile(r"://[^/\s?#@]{1,256}@")),
    _Check("azure_account_key", ("accountkey", "sharedaccesskey"),
           re.compile(r"(?i:accountkey|sharedaccesskey)\s{0,8}=\s{0,8}[A-Za-z0-9+/=]{16}"), folded=True),
    _Check("credential_assignment", _CREDENTIAL_KEYWORDS,
           re.compile(r"(?i:password|passwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
                      r"[A-Za-z0-9_.-]{0,40}\s{0,8}[:=]\s{0,8}[^\s,;]{6}"), folded=True),
)
# Any trigger of any check, as two literal alternations (case-sensitive ones on the text, folded
# ones on its lower-cased form): a string that matches neither holds no credential shape, and
# costs two C-level searches. A case-insensitive alternation would be several times slower.
_SENSITIVE_TRIGGERS = re.compile("|".join(re.escape(t) for c in _CHECKS if not c.folded for t in c.triggers))
_FOLDED_TRIGGERS = re.compile("|".join(re.escape(t) for c in _CHECKS if c.folded for t in c.triggers) + "|basic")
_BASIC_AUTH = re.compile(r"(?i:\bbasic)\s{1,8}([A-Za-z0-9+/]{8,1024}={0,2})(?![A-Za-z0-9+/=])")
_URL = re.compile(r"://[^\s\"'<>]{1,8192}")  # anchored on the literal: the scheme does not matter here

_SIGNED_QUERY_KEYS = frozenset(
    {
        "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature",
        "x-goog-credential", "signature", "sig", "se", "sp", "sv", "skoid", "token", "access_token",
        "id_token", "api_key", "apikey", "key", "password", "secret", "auth", "authorization",
        "policy", "key-pair-id", "googleaccessid", "expires",
    }
)

# Key names, split into lowercase words (snake, kebab, camel, dotted).
_CREDENTIAL_WORDS = frozenset(
    {
        "password", "passwords", "passwd", "passphrase", "passphrases", "pwd", "secret", "secrets", "token",
        "credential", "credentials", "authorization", "cookie", "cookies", "apikey", "apikeys", "privatekey",
        "privatekeys",
    }
)
_CREDENTIAL_PAIRS = frozenset(
    {
        ("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"), ("session", "key"),
        ("client", "secret"), ("auth", "header"), ("signing", "key"), ("account", "key"), ("sas", "url"),
    }
)
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_WORD_SPLIT = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


@dataclass(frozen=True)
class Finding:
    """Where (a JSON pointer; any key that is not a plain identifier shows as `*`) and what kind.
    Never the value."""

    pointer: str
    kind: str
    in_key: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"pointer": self.pointer, "kind": self.kind, "in_key": self.in_key}


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def credential_key_name(key: str) -> bool:
    """password, apiKey, PRIVATE_KEY, client-secrets... but not max_tokens or tokenizer."""
    words = [w.lower() for w in _WORD_SPLIT.findall(key)]
    if any(w in _CREDENTIAL_WORDS for w in words):
        return True
    # A plural second word still names credentials ("api_keys", "client_secrets").
    pairs = ((a, b[:-1] if b in ("keys", "secrets", "headers") else b) for a, b in itertools.pairwise(words))
    return any(pair in _CREDENTIAL_PAIRS for pair in pairs)


def _basic_auth(text: str) -> bool:
    for match in _BASIC_AUTH.finditer(text):
        token = match.group(1)
        try:
            decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
        except (binascii.Error, ValueError):
            continue
        if b":" in decoded:
            return True
    return False


def _signed_url(text: str) -> bool:
    for match in _URL.finditer(text):
        try:
            query = urlsplit("x" + match.group(0)).query
        except ValueError:
            continue
        if query and any(k.lower() in _SIGNED_QUERY_KEYS for k, _ in parse_qsl(query, keep_blank_values=True)):
            return True
    return False


def value_kinds(text: str) -> list[str]:
    """The kinds of credential found in one string (empty when none)."""
    lower = text.lower()
    if not (_SENSITIVE_TRIGGERS.search(text) or _FOLDED_TRIGGERS.search(lower)):
        return []
    kinds = [c.kind for c in _CHECKS if c.triggered(text, lower) and c.pattern.search(text)]
    if "basic" in lower and _basic_auth(text):
        kinds.append("basic_auth")
    if "://" in text and "?" in text and _signed_url(text):
        kinds.append("signed_url")
    return sorted(set(kinds))


def _walk(document: Any, key_kinds: dict[str, list[str]]) -> Iterator[tuple[str, str | None, Any]]:
    """Yield (pointer, key, value) for every member and element, iteratively."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                # A key that merely names a credential ("password") is shown; one that holds a token
                # shape, or is not a plain identifier, is masked.
                shaped = any(kind != "credential_key_name" for kind in _kinds_of_key(key, key_kinds))
                masked = _escape(key) if _PLAIN_KEY.fullmatch(key) and not shaped else "*"
                child_pointer = f"{pointer}/{masked}"
                yield child_pointer, key, child
                stack.append((child_pointer, child))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                child_pointer = f"{pointer}/{index}"
                yield child_pointer, None, child
                stack.append((child_pointer, child))


def _kinds_of_key(key: str, cache: dict[str, list[str]]) -> list[str]:
    """Keys repeat across a document; each distinct one is checked once per scan."""
    kinds = cache.get(key)
    if kinds is None:
        kinds = value_kinds(key)
        if not kinds and credential_key_name(key):
            kinds = ["credential_key_name"]
        cache[key] = kinds
    return kinds


def scan(document: Any) -> list[Finding]:
    """Every credential-looking key or string in the document, in document order, bounded."""
    key_kinds: dict[str, list[str]] = {}
    findings: list[Finding] = []
    if isinstance(document, str):
        findings.extend(Finding("", kind) for kind in value_kinds(document))
    for pointer, key, value in _walk(document, key_kinds):
        if key is not None:
            findings.extend(Finding(pointer, kind, in_key=True) for kind in _kinds_of_key(key, key_kinds))
        if isinstance(value, str):
            findings.extend(Finding(pointer, kind) for kind in value_kinds(value))
        if len(findings) >= MAX_FINDINGS:
            break
    findings.sort(key=lambda f: f.pointer)
    return [Finding(f.pointer[:_POINTER_MAX], f.kind, f.in_key) for f in findings[:MAX_FINDINGS]]
