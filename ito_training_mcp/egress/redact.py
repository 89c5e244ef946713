"""Known secret values, and how a string is masked.

Every credential this process resolves registers its value here (`backend.credentials`); a string that
leaves the server has every registered value, and every credential shape the secret scanner finds in it
as written (`scanner.spans`), replaced by `<redacted>`. The egress (`clean.py`) applies this to every
string; nothing else should call it.
"""

from __future__ import annotations

import threading

from ito_training_mcp.scanner import spans

MASK = "<redacted>"
_lock = threading.Lock()
_secrets: set[str] = set()


def register_secret(value: str) -> None:
    if len(value) >= 8:
        with _lock:
            _secrets.add(value)


def known_secrets() -> tuple[str, ...]:
    """Every credential value this process has resolved so far (for comparisons, never for output)."""
    with _lock:
        return tuple(sorted(_secrets, key=len, reverse=True))


def holds_known(text: str, secrets: tuple[str, ...] | None = None) -> bool:
    return any(secret in text for secret in (known_secrets() if secrets is None else secrets))


def redact(text: str, *, shapes: bool = True) -> str:
    """Registered secrets and (unless `shapes` is false) credential shapes become `<redacted>`."""
    for secret in known_secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    if shapes:
        for start, end in reversed(spans(text)):
            text = text[:start] + MASK + text[end:]
    return text
