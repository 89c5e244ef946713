"""ICU's NFKC (and NFKD), where it gives exactly this Python's answer: an optional speed-up of
`nfkc.py` (and of the scanner's look at text in neither form, which searches its NFKD).

CPython's NFKC of a text that changes in many places, or in many ways, costs 60-210 ns a character
(`nfkc.py` says why); ICU's costs a few. ICU is not a dependency: the `icu` extra installs the
`icukit-pyicu` wheel (Linux x86_64 with glibc 2.35 or later, Linux aarch64 with glibc 2.38 or later,
macOS arm64), and any build of PyICU serves. Without it, or where it cannot promise this Python's
answer, `unicodedata` normalises.

Why the answers are the same:
- ICU's Unicode is usually newer than this Python's (`unicodedata.unidata_version`). Its normaliser
  is filtered to the code points assigned by this Python's version (`[:age=M.m:]`); the others are
  left as they are and end a span, as this Python treats them (unassigned: class 0, no
  decomposition, composing with nothing). Unicode's stability policy keeps the decompositions,
  classes and compositions of assigned characters unchanged from version to version. A test compares
  every code point, alone and after a letter, and generated texts, with `unicodedata`.
- ICU works in UTF-16, where two surrogate code points in a row are one character; a Python string
  holding a surrogate is left to `unicodedata` (a strict encode tells, ~0.4 ms a mebibyte).
- An ICU whose Unicode is older than this Python's, or one that fails, is not used.
"""

from __future__ import annotations

import contextlib
import threading
import unicodedata
from collections.abc import Iterator
from functools import cache
from typing import Any, Protocol


class Normalizer(Protocol):
    """ICU's NFKC or NFKD, filtered to this Python's Unicode (see the module's docstring)."""

    def normalize(self, text: str) -> str: ...


_switch = threading.Lock()
_off = 0  # `switched_off` blocks in force (tests, and the benchmark's comparison)


def nfkc(text: str, data: bytes | None = None) -> str | None:
    """`unicodedata.normalize("NFKC", text)` by ICU; None when ICU is not there (or switched off),
    or cannot promise the same answer for this text (it holds a surrogate). `data`: the text's
    UTF-8 (surrogates passed), if the caller has it: without a byte 0xED (which begins every
    surrogate, and Hangul syllables from U+D000) it holds none, a search that spares encoding it."""
    return _normalized(_normalizer(), text, data)


def nfkd(text: str, data: bytes | None = None) -> str | None:
    """`unicodedata.normalize("NFKD", text)` by ICU, as `nfkc` gives NFKC."""
    return _normalized(_nfkd_normalizer(), text, data)


def _normalized(normalizer: Normalizer | None, text: str, data: bytes | None) -> str | None:
    if normalizer is None or _off or not ((data is not None and b"\xed" not in data) or _encodes(text)):
        return None
    try:
        return normalizer.normalize(text)
    except Exception:  # pragma: no cover - ICU refused the text: the caller's `unicodedata` answers
        return None


def available() -> bool:
    """Is ICU here, with this Python's Unicode or newer, and not switched off?"""
    return _normalizer() is not None and not _off


@contextlib.contextmanager
def switched_off() -> Iterator[None]:
    """`unicodedata` alone normalises within this block, in every thread (tests compare the two)."""
    global _off
    with _switch:
        _off += 1
    try:
        yield
    finally:
        with _switch:
            _off -= 1


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a surrogate: two in a row would be one character to ICU
        return False
    return True


@cache
def _normalizer() -> Normalizer | None:
    return _built("NFKC")


@cache
def _nfkd_normalizer() -> Normalizer | None:
    return _built("NFKD")


def _built(form: str) -> Normalizer | None:
    try:
        import icu  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except Exception:  # not installed, or broken (a missing shared library, say): `unicodedata` normalises
        return None
    return filtered(icu, unicodedata.unidata_version, form)


# What each form makes of a check (a full-width g, a precomposed e with an acute, two jamo), and how
# ICU names its instance.
_CHECKS = {"NFKC": ("getNFKCInstance", "g\u00e9\uac00"), "NFKD": ("getNFKDInstance", "ge\u0301\u1100\u1161")}


def filtered(icu: Any, version: str, form: str = "NFKC") -> Normalizer | None:
    """ICU's NFKC (or NFKD) filtered to the code points Unicode `version` assigned; None when ICU's
    Unicode is older than that, or the pieces are not there."""
    try:
        if _version(str(icu.UNICODE_VERSION)) < _version(version):
            return None
        major_minor = ".".join(version.split(".")[:2])
        assigned = icu.UnicodeSet(f"[:age={major_minor}:]")
        assigned.freeze()
        instance, answer = _CHECKS[form]
        normalizer: Normalizer = icu.FilteredNormalizer2(getattr(icu.Normalizer2, instance)(), assigned)
        if normalizer.normalize("\uff47\u00e9\u1100\u1161") != answer:  # a check that it works
            return None
    except Exception:  # an ICU without these: `unicodedata` normalises
        return None
    return normalizer


def _version(text: str) -> tuple[int, int, int]:
    """A Unicode version, ICU's ("14.0") and Python's ("14.0.0") alike: (14, 0, 0)."""
    major, minor, micro, *_ = [int(part) for part in text.split(".") if part.isdigit()] + [0, 0, 0]
    return major, minor, micro
