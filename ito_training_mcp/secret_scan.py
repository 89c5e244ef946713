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

# Each alternative is a named group; the group name is the finding's kind.
_VALUE_PATTERNS = re.compile(
    "|".join(
        [
            r"(?P<private_key>-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)",
            r"(?P<aws_access_key_id>(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA)"
            r"[A-Z0-9]{16}(?![A-Z0-9]))",
            r"(?P<github_token>(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,}))",
            r"(?P<huggingface_token>(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,})",
            r"(?P<openai_style_key>(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-|ant-[a-z0-9]{2,8}-)?"
            r"(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{32,})",
            r"(?P<slack_token>(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,})",
            r"(?P<slack_webhook>hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+)",
            r"(?P<stripe_key>(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,})",
            r"(?P<google_api_key>(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35})",
            r"(?P<jwt>(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
            r"(?P<bearer_token>(?i:\bbearer)\s+(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,})",
            r"(?P<url_userinfo>[A-Za-z][A-Za-z0-9+.-]{0,30}://[^/\s?#@]+@)",
            r"(?P<azure_account_key>(?i:accountkey|sharedaccesskey)\s*=\s*[A-Za-z0-9+/=]{16,})",
            r"(?P<credential_assignment>(?i:[a-z0-9_.-]*(?:password|passwd|secret|api[_-]?key|access[_-]?token"
            r"|auth[_-]?token)[a-z0-9_.-]*)\s*[:=]\s*[^\s,;]{6,})",
        ]
    )
)
_BASIC_AUTH = re.compile(r"(?i:\bbasic)\s+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s\"'<>]+")

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
            query = urlsplit(match.group(0)).query
        except ValueError:
            continue
        if query and any(k.lower() in _SIGNED_QUERY_KEYS for k, _ in parse_qsl(query, keep_blank_values=True)):
            return True
    return False


def value_kinds(text: str) -> list[str]:
    """The kinds of credential found in one string (empty when none)."""
    kinds = [m.lastgroup for m in _VALUE_PATTERNS.finditer(text) if m.lastgroup]
    if _basic_auth(text):
        kinds.append("basic_auth")
    if _signed_url(text):
        kinds.append("signed_url")
    return sorted(set(kinds))


def _walk(document: Any) -> Iterator[tuple[str, str | None, Any]]:
    """Yield (pointer, key, value) for every member and element, iteratively."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                masked = _escape(key) if _PLAIN_KEY.fullmatch(key) and not value_kinds(key) else "*"
                child_pointer = f"{pointer}/{masked}"
                yield child_pointer, key, child
                stack.append((child_pointer, child))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                child_pointer = f"{pointer}/{index}"
                yield child_pointer, None, child
                stack.append((child_pointer, child))


def scan(document: Any) -> list[Finding]:
    """Every credential-looking key or string in the document, in document order, bounded."""
    findings: list[Finding] = []
    if isinstance(document, str):
        findings.extend(Finding("", kind) for kind in value_kinds(document))
    for pointer, key, value in _walk(document):
        if key is not None:
            key_kinds = value_kinds(key)
            findings.extend(Finding(pointer, kind, in_key=True) for kind in key_kinds)
            if not key_kinds and credential_key_name(key):
                findings.append(Finding(pointer, "credential_key_name", in_key=True))
        if isinstance(value, str):
            findings.extend(Finding(pointer, kind) for kind in value_kinds(value))
        if len(findings) >= MAX_FINDINGS:
            break
    findings.sort(key=lambda f: f.pointer)
    return [Finding(f.pointer[:_POINTER_MAX], f.kind, f.in_key) for f in findings[:MAX_FINDINGS]]
