"""icu_normal.py: ICU's NFKC is used only where it gives `unicodedata`'s answer, and only for scans that
pay for no work. Checked on every code point (alone, after a letter, before a combining mark), on
generated texts, through `nfkc.nfkc` and gate 2, and where it must not be used (a surrogate, an ICU
older than this Python's Unicode, a bounded scan)."""

from __future__ import annotations

import contextlib
import json
import platform
import sys
import types
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ito_training_mcp import icu_normal, nfkc, scan_strings, text_normal
from ito_training_mcp.gates.config import ManifestSettings
from ito_training_mcp.gates.manifest.digest import digest_manifest_file

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

def _glibc_at_least(major: int, minor: int) -> bool:
    name, version = platform.libc_ver()
    parts = [int(part) for part in version.split(".")[:2] if part.isdigit()]
    return name == "glibc" and len(parts) == 2 and (parts[0], parts[1]) >= (major, minor)


# Where the `icu` extra has a wheel (`make install` installs it): there ICU must be in use.
WHEEL_HERE = sys.version_info < (3, 15) and (
    (sys.platform == "linux" and platform.machine() == "x86_64" and _glibc_at_least(2, 35))
    or (sys.platform == "linux" and platform.machine() == "aarch64" and _glibc_at_least(2, 38))
    or (sys.platform == "darwin" and platform.machine() == "arm64"))


def _need_icu() -> None:
    if not icu_normal.available():
        if WHEEL_HERE:
            pytest.fail("ICU is not in use on a platform where `make install` installs it (the `icu` extra)")
        pytest.skip("no ICU wheel for this platform")


def test_icu_is_in_use_where_the_extra_installs_it() -> None:
    _need_icu()
    assert icu_normal.nfkc("ｇｈｐ＿" * 10) == "ghp_" * 10


def _all_code_points() -> list[str]:
    return [chr(code) for code in range(sys.maxunicode + 1) if not 0xD800 <= code <= 0xDFFF]


@pytest.mark.parametrize("form", ["NFKC", "NFKD"])
@pytest.mark.parametrize(("before", "after"), [("", ""), ("a", ""), ("", "\u0301"), ("\u1100", ""), ("e", "\u0327")])
def test_every_code_point_is_normalised_as_unicodedata_does(before: str, after: str, form: str) -> None:
    """Each code point, between NULs (a starter that composes with nothing, so each piece is
    normalised on its own), alone and with a neighbour it may compose or reorder with."""
    _need_icu()
    text = "\x00".join(before + char + after for char in _all_code_points())
    normal = (icu_normal.nfkc if form == "NFKC" else icu_normal.nfkd)(text)
    expected = unicodedata.normalize(form, text)
    if normal != expected:
        pieces = zip(normal.split("\x00"), expected.split("\x00"), _all_code_points(), strict=True) \
            if normal.count("\x00") == expected.count("\x00") else []
        wrong = [hex(ord(char)) for got, want, char in pieces if got != want][:10]
        pytest.fail(f"ICU differs from unicodedata at {wrong or 'a count of pieces'}")


_PIECES = st.sampled_from([
    "a", "e", "o", "k", "g", "h", "p", "_", " ", ":", "=", "\x00", "\u0301", "\u0300", "\u0323", "\u0327", "\u0308",
    "\u05b0", "\u05c2", "\u064b", "\u0651", "\u0670", "\u0483", "\u0430", "\u0438", "\u0306", "\u0435",
    "ｇ", "ｈ", "ｐ", "＿", "＝", "，", "\u00a0", "\u00bd", "\ufb01", "\u2460", "\u3300", "\ufdfa", "\u32ff",
    "か", "\u3099", "\u309a", "ハ", "\uff8a", "\uff9e", "\u1100", "\u1161", "\u11a8", "\uac00", "密", "\u2126",
    "\u0344", "\u0f73", "\u0f75", "\U0001d400", "\U0001f600", "\u200b", "\u00ad", "\ufeff", "\U000e0001",
    "\u0915", "\u093c", "\u09c7", "\u09be", "\u0b47", "\u0b3e", "\u1025", "\u102e", "\u1b05", "\u1b35",
])


@SETTINGS
@given(st.lists(_PIECES, min_size=1, max_size=400))
def test_generated_texts_are_normalised_as_unicodedata_does(pieces: list[str]) -> None:
    _need_icu()
    text = "".join(pieces)
    expected = unicodedata.normalize("NFKC", text)
    assert icu_normal.nfkc(text) == expected
    long = (text + "\x00") * (nfkc.SHORT // len(text) + 2)  # long enough for `nfkc` to take ICU's pass
    assert nfkc.nfkc(long) == unicodedata.normalize("NFKC", long)
    assert icu_normal.nfkd(text) == unicodedata.normalize("NFKD", text)
    assert nfkc.whole_nfkd(long) == unicodedata.normalize("NFKD", long)


def test_a_text_holding_a_surrogate_is_left_to_unicodedata() -> None:
    """Two surrogates in a row are one character to ICU (UTF-16) and two to Python."""
    _need_icu()
    text = "x\ud83d\ude00y" + "ｇ\u0301" * nfkc.SHORT
    assert icu_normal.nfkc(text) is None and icu_normal.nfkd(text) is None
    assert nfkc.nfkc(text) == unicodedata.normalize("NFKC", text)
    assert nfkc.whole_nfkc(text) == unicodedata.normalize("NFKC", text)
    assert nfkc.whole_nfkd(text) == unicodedata.normalize("NFKD", text)


def test_switched_off_leaves_unicodedata_alone_and_nests() -> None:
    _need_icu()
    with icu_normal.switched_off():
        with icu_normal.switched_off():
            assert icu_normal.nfkc("ｇ") is None
        assert not icu_normal.available()
    assert icu_normal.available()


class _FakeSet:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def freeze(self) -> None:
        pass


class _FakeNormalizer:
    def __init__(self, answer: str) -> None:
        self.answer = answer

    def normalize(self, text: str) -> str:
        return self.answer


def _fake_icu(unicode_version: str, answer: str = "g\u00e9\uac00") -> Any:
    made: list[str] = []

    def filtered(normalizer: Any, assigned: _FakeSet) -> _FakeNormalizer:
        made.append(assigned.pattern)
        return _FakeNormalizer(answer)
    module = types.SimpleNamespace(UNICODE_VERSION=unicode_version, UnicodeSet=_FakeSet, FilteredNormalizer2=filtered,
                                   Normalizer2=types.SimpleNamespace(getNFKCInstance=lambda: object(),
                                                                     getNFKDInstance=lambda: object()), made=made)
    return module


def test_an_icu_older_than_this_pythons_unicode_is_not_used() -> None:
    assert icu_normal.filtered(_fake_icu("13.0"), "14.0.0") is None
    assert icu_normal.filtered(_fake_icu("14.0"), "15.1.0") is None
    assert icu_normal.filtered(_fake_icu("15.0"), "15.0.0") is not None  # the same version, written shorter
    assert icu_normal.filtered(_fake_icu("15.1"), "15.1.0") is not None


def test_a_broken_icu_leaves_unicodedata_to_normalise(monkeypatch: pytest.MonkeyPatch) -> None:
    """An `icu` module whose import fails otherwise than by not being there (a missing shared
    library): no ICU, once for all, and every normalisation still answers."""
    import builtins

    real_import = builtins.__import__
    tried: list[str] = []

    def failing(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "icu":
            tried.append(name)
            raise OSError("libicuuc.so.78: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing)
    icu_normal._normalizer.cache_clear()
    icu_normal._nfkd_normalizer.cache_clear()
    try:
        text = "\ufb01\u0301" * nfkc.SHORT
        assert icu_normal.nfkc(text) is None and not icu_normal.available()
        assert nfkc.nfkc(text) == nfkc.whole_nfkc(text) == unicodedata.normalize("NFKC", text)
        assert icu_normal.nfkd(text) is None and nfkc.whole_nfkd(text) == unicodedata.normalize("NFKD", text)
        assert tried == ["icu", "icu"]  # tried once for each form
    finally:
        monkeypatch.undo()
        icu_normal._normalizer.cache_clear()
        icu_normal._nfkd_normalizer.cache_clear()
    assert icu_normal.available() is WHEEL_HERE or icu_normal.available()


def _long_normalisations(monkeypatch: pytest.MonkeyPatch, length: int) -> list[int]:
    calls: list[int] = []
    real = unicodedata.normalize
    monkeypatch.setattr(unicodedata, "normalize", lambda form, t: (calls.append(len(t)) if len(t) >= length else None)
                        or real(form, t))
    return calls


def test_a_text_icu_must_decline_is_left_to_the_windows_not_to_unicodedata(monkeypatch: pytest.MonkeyPatch) -> None:
    """An attacker review's find: a text of many kinds holding a surrogate went from ICU's refusal
    to CPython's NFKC of all of it (6x slower than the windows, which it skipped)."""
    _need_icu()
    text = "\uff21\uff22\uff23\uff24\uff25\uff26\uff27\uff28\uff29\uff2a\uff2b\uff2c\uff2d\uff2e\uff2f\uff30\uff31\uff32" \
        "\udfff" + "\u5bc6\u7801\u6a21\u578b\u8bad\u7ec3" * 20000
    expected = unicodedata.normalize("NFKC", text)
    calls = _long_normalisations(monkeypatch, len(text) // 2)
    assert nfkc.nfkc(text) == expected
    assert calls == []


def test_a_few_kinds_with_a_mark_are_left_to_the_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """An attacker review's find: one combining mark before a mebibyte of emoji (which NFKC leaves as
    they are) sent all of it through ICU, and its conversion to UTF-16 and back, at twice the windows'
    cost. ICU's pass is taken for many kinds only."""
    _need_icu()
    taken: list[int] = []
    real = icu_normal.nfkc
    monkeypatch.setattr(icu_normal, "nfkc", lambda text, data=None: taken.append(len(text)) or real(text, data))
    text = "e\u0301" + "\U0001f600" * 50000
    assert nfkc.nfkc(text) == unicodedata.normalize("NFKC", text)
    assert taken == []
    many = "".join(chr(0xFF41 + i % 26) + "\u0430" for i in range(5000))  # 26 kinds of full-width letter
    assert nfkc.nfkc(many) == unicodedata.normalize("NFKC", many)
    assert taken == [len(many)]


def test_icu_is_filtered_to_the_code_points_this_pythons_unicode_assigned() -> None:
    fake = _fake_icu("17.0")
    assert icu_normal.filtered(fake, "15.1.0") is not None
    assert fake.made == ["[:age=15.1:]"]


def test_an_icu_that_fails_its_check_is_not_used() -> None:
    assert icu_normal.filtered(_fake_icu("17.0", answer="wrong"), "14.0.0") is None
    # each form is checked against its own answer
    assert icu_normal.filtered(_fake_icu("17.0"), "14.0.0", "NFKD") is None
    assert icu_normal.filtered(_fake_icu("17.0", answer="ge\u0301\u1100\u1161"), "14.0.0", "NFKD") is not None
    assert icu_normal.filtered(types.SimpleNamespace(UNICODE_VERSION="17.0"), "14.0.0") is None  # pieces missing


def test_a_bounded_scan_is_charged_the_same_with_icu_and_without(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bounded scan pays for what normalising costs (`made`), at `unicodedata`'s price: were ICU's
    pass cheaper to it, it would do more, and find more, on one platform than on another. So its
    charges are the same either way (ICU may still normalise a window it was charged for), and an
    unbounded scan, which is charged nothing, takes ICU's pass for all of the text."""
    _need_icu()
    kinds = "\u0430\ufb01\u00bd\u2460" + "".join(chr(0xFF41 + i) for i in range(20))  # many: ICU's whole pass
    texts = ["tokens " + "".join(kinds[i % len(kinds)] + "\u0301" for i in range(j, j + 600)) for j in range(40)]
    joined = "\x00".join(texts)
    charges: dict[bool, list[int]] = {}
    for icu in (True, False):
        with icu_normal.switched_off() if not icu else contextlib.nullcontext():
            charges[icu] = []
            normal = text_normal.nfkc_joined(texts, joined, charges[icu])
            assert normal == unicodedata.normalize("NFKC", joined)
            assert scan_strings.joined(texts, {}, True) == scan_strings.joined(texts, {}, False)
    assert charges[True] == charges[False] and sum(charges[True]) > 0
    taken: list[int] = []
    real = icu_normal.nfkc
    monkeypatch.setattr(icu_normal, "nfkc", lambda text, data=None: taken.append(len(text)) or real(text, data))
    text_normal.nfkc_joined(texts, joined)
    assert taken == [len(joined)]


def test_gate_two_gives_the_same_digest_with_icu_and_without(tmp_path: Path) -> None:
    """Labels changed by NFKC in many ways (compatibility characters, marks out of order): the digest (and its review) is the same either way, and
    ICU did the normalising."""
    _need_icu()
    example = json.loads(Path("examples/manifest.json").read_text())
    kinds = ["\ufb01", "\u00bd", "\u2460", "\u3300", "\uff47", "\u2126", "\u00b2", "\u0301\u0323", "\u0483\u05b0"]
    labels = [f"tokens {i} " + "".join("\u0430" + kinds[(i + j) % len(kinds)] for j in range(60))
              for i in range(100)]
    example["data"][0]["decontamination"]["eval_suites"] = labels
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(example, ensure_ascii=False))
    path.chmod(0o600)
    settings = ManifestSettings(max_bytes=1 << 20, roots=(str(tmp_path),))
    taken: list[int] = []
    real = icu_normal.nfkc
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(icu_normal, "nfkc", lambda text, data=None: taken.append(len(text)) or real(text, data))
        with_icu = digest_manifest_file(str(path), settings, summarize=True)
    with icu_normal.switched_off():
        without = digest_manifest_file(str(path), settings, summarize=True)
    assert taken, "ICU was not used"
    assert with_icu.sha256 == without.sha256 and with_icu.manifest == without.manifest
    assert json.dumps(with_icu.summary()["review"], default=str) == json.dumps(without.summary()["review"], default=str)
