"""NFKC, the same answer as `unicodedata.normalize("NFKC", text)`, without CPython's slow path where
it can be avoided.

CPython normalises a text that is not normal already in full: it decomposes every character and then
composes again, and its composition looks each character up in a table with a linear search, so a
character far into the code space costs most. Measured per character: 25 ns for ASCII, 60-100 ns for
Latin-1, Cyrillic or Devanagari, 140 ns for Chinese, 210 ns for kana. One full-width comma in a
mebibyte of Japanese costs 70 ms that way; `sha256` and `json.loads` of the same bytes take 3 ms.

Most such text changes in a few places only (full-width punctuation, a no-break space, a kana with
its voiced mark written apart), and its NFKC is then those places replaced, which `bytes.replace`
does at memory speed. Why that is exact:

- Call a character *notable* when NFKC changes it standing alone, when it is a non-starter
  (combining class other than 0), or when NFKC may compose it with the character before it
  (`decomposed_anchors.COMPOSING`). Every other character is unchanged by NFKC alone, and its NFKD
  begins with a starter that composes with nothing before it (a test checks every character).
- So a text falls into *stretches*, each beginning at a character that is not notable (or at the
  start) and running on over the notable characters after it. Canonical reordering stops at a
  starter and composition cannot reach back past one that composes with nothing before it, so the
  NFKC of a text is the NFKC of its stretches, one after the other. A stretch without a notable
  character is its own NFKC.
- Replacing any part of a text by that part's NFKC leaves the text's NFKC as it was: the two parts
  have the same NFKD, reordering sorts each run of non-starters the same way whether a piece of it
  was sorted before or not, and composition works on the NFKD.

So from the first notable character (a search of the UTF-8) a window of the text is read; the
stretches in it that NFKC changes are each replaced by their NFKC wherever they occur after the
window's start, and the window is read again; once NFKC changes none of its stretches, everything
up to its last whole stretch is in NFKC, and the search goes on from there. Past a few passes' worth
of work (PASSES, KINDS, STRETCHES), `unicodedata` takes what is left from the window's start, which
is exact whatever has been replaced. A short text, and without RE2 a long one, goes to `unicodedata`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from functools import cache, lru_cache
from typing import overload

from ito_training_mcp import byte_facts, decomposed_anchors, icu_normal
from ito_training_mcp.egress.invisible import re2_class, runs

WINDOW = 4096  # bytes from a notable character read together; doubled while NFKC changes nothing read
MAX_WINDOW = 1 << 16
MIN_WINDOW = 256  # a window with a few places to change makes the next a quarter as long, down to this
KIND_REPLACED = 16  # kinds of character replaced one by one in all of the text (each costs a pass)
ROUNDS = 2  # windows of kinds replaced so, each followed by a search of the rest
PATTERNS = 4  # patterns of stretches compiled (~0.2 ms each), past which `unicodedata` takes the rest
NEW_STRETCHES = 64  # stretches not seen before in a window past which it is normalised whole
FEW = 16  # stretches to change in a window, past which it is normalised whole rather than from the first
KINDS = 32  # notable characters seen in the windows, past which `unicodedata` takes the rest (a class of them)
DENSE = 4  # places to change in a window from which its stretches are replaced in all the rest of the text
PASSES = 6  # passes over the text (a copy, each stretch replaced) the replacing in all the rest may take
READ_SHARE = 8  # windows read, in all, past this share of the text (and two windows): `unicodedata` takes the rest
HEAD_SHARE = 4  # a text whose first notable character lies past this share of it is looked at from there on
CHANGED_AHEAD = 1 << 16  # bytes from the first notable character `is_nfkc` searches before it reads any stretch
SHORT = 1024  # characters: a text no longer than this goes to `unicodedata` (it costs little there)
# What `unicodedata`'s NFKC costs a character (of the longer of the text and its NFKC), in bytes of a
# search (about a nanosecond each): 12 ns for ASCII with a no-break space, 50-80 ns for characters
# NFKC changes, 150 ns for Japanese (a character of U+FDFA's eighteen: 53 ns).
SLOW = 32
READ = 16  # what reading a window costs a byte of it, in the same measure (decoding, sets, a search)


def nfkc(text: str, data: bytes | None = None, made: list[int] | None = None,
         encoded: list[bytes] | None = None) -> str:
    """`unicodedata.normalize("NFKC", text)`. `data`: the UTF-8 of `text`, if the caller has it.
    `made`, if given, gets what it cost, in bytes of search: the bytes copied and read, SLOW passes
    over what `unicodedata` normalised (a bounded caller pays for it). A text in NFKC is returned as
    it is (the same object). `encoded`, if given, gets the UTF-8 of the answer when the work made it
    on the way (the caller is spared encoding it).

    A text without a notable character is in NFKC (one search tells), and so is what comes before
    the stretch holding the first: past HEAD_SHARE of the text, only the rest is looked at. Unicode's
    quick check settles a text in NFKC at memory speed, but CPython's answers "maybe" for a text
    holding a character that may compose, and then normalises all of it to tell. So the quick check
    goes first only where the bytes show that no such character can be there; otherwise the
    stretches are looked at (`_stretched`)."""
    if text.isascii():
        return text
    search = _notable_search() if len(text) > SHORT else None
    if search is None:  # a short text costs `unicodedata` little; a long one without RE2 goes there too
        return _slow(text, made)
    data = text.encode("utf-8", "surrogatepass") if data is None else data
    at = search(data, 0)
    if at < 0:  # no notable character: each stretch is its own NFKC
        _give(encoded, data)
        return text
    # (whether the bytes may compose is asked of all of them, as the quick check's answer is: their
    # byte search is looser than the characters, and the work reported stays the whole text's)
    composing = decomposed_anchors.composing_begun(data)
    if at > 0 and at >= len(data) // HEAD_SHARE:  # what comes before the stretch holding it is in NFKC: left
        start = _char_start(data, at - 1)
        rest = _text(data[start:])
        made_rest: list[bytes] = []
        normal = _from_notable(rest, data[start:], search, made, at - start, made_rest, composing, start)
        if normal is rest:
            _give(encoded, data)
            return text
        if made_rest:
            _give(encoded, data[:start] + made_rest[0])
        return text[:len(text) - len(rest)] + normal
    return _from_notable(text, data, search, made, at, encoded, composing)


def _give(encoded: list[bytes] | None, data: bytes) -> None:
    if encoded is not None:
        encoded.append(data)


def _from_notable(text: str, data: bytes, search: Callable[[bytes, int], int], made: list[int] | None,
                  at: int, encoded: list[bytes] | None, composing: bool, skipped: int = 0) -> str:
    """`nfkc` of a text whose first notable character is at byte `at`. `composing`: whether the bytes
    of the whole text may compose (`decomposed_anchors.composing_begun`). `skipped`: the bytes before
    it that were left as they are (the work allowed, and reported in `made`, is that of the whole)."""
    if not composing and unicodedata.is_normalized("NFKC", text):
        _give(encoded, data)
        return text
    left, rounds = KIND_REPLACED, ROUNDS
    while at >= 0:
        kinds = notable().intersection(data[at:at + WINDOW].decode("utf-8", "ignore"))
        rounds -= 1
        replaced = _replaced(text, kinds) if len(kinds) <= left and rounds >= 0 else None
        if replaced is None:
            # Too many kinds to replace: ICU's one pass beats the windows, which find a new stretch
            # for most characters (a few kinds with a mark among them: the windows beat it, as they
            # do its conversion of a text to UTF-16 and back). Not for a bounded caller (`made`).
            if made is None and len(kinds) > left and (normal := _by_icu(text, data)) is not None:
                return normal
            return _stretched(text, data, search, made, at, encoded=encoded, skipped=skipped)
        left -= len(kinds)
        text = replaced
        data = text.encode("utf-8", "surrogatepass")
        if made is not None:
            made.append(skipped + len(data))
        at = search(data, at)  # nothing before `at` was notable, nor changed
    _give(encoded, data)
    return text


def is_nfkc(text: str, data: bytes | None = None) -> bool:
    """Is `text` in NFKC? Unicode's quick check, unless the bytes show a character that may compose
    (CPython's check would normalise all of the text to tell): then not if the text holds a character
    NFKC changes standing alone (NFKC never makes one) within CHANGED_AHEAD bytes of its first
    notable character, nor if the window at that character holds a stretch NFKC changes (a text that
    is not in NFKC mostly shows it there, and a prefix of a text in NFKC is in NFKC), nor if the rest
    holds such a character (one search), else the stretches are read until the first that NFKC
    changes (`_stretched`'s check)."""
    if text.isascii():
        return True
    search = _notable_search() if len(text) > SHORT else None
    data = text.encode("utf-8", "surrogatepass") if data is None and search is not None else data
    if search is None or data is None or not decomposed_anchors.composing_begun(data):
        return unicodedata.is_normalized("NFKC", text)
    changed = _changed_search()
    if changed is None:
        return unicodedata.is_normalized("NFKC", text)
    first = search(data, 0)
    end = first + WINDOW
    if first < 0 or end >= len(data):
        return first < 0 or (changed(data, first) < 0 and _stretched(text, data, search, None, 0, check=True) is text)
    end = _char_start(data, end)
    head = data[:end]
    # (a character NFKC changes alone is looked for in a stretch of text past the window too: the
    # search is cheap there, and reading the window's stretches costs as much as searching 300 KB)
    if changed(data[first:first + CHANGED_AHEAD], 0) >= 0 \
            or _stretched(_text(head), head, search, None, 0, check=True) is None or changed(data, end) >= 0:
        return False
    return _stretched(text, data, search, None, 0, check=True) is text


@overload
def _stretched(text: str, data: bytes, search: Callable[[bytes, int], int], made: list[int] | None,
               pos: int, *, encoded: list[bytes] | None = ..., skipped: int = ...) -> str: ...


@overload
def _stretched(text: str, data: bytes, search: Callable[[bytes, int], int], made: list[int] | None,
               pos: int, check: bool) -> str | None: ...


def _stretched(text: str, data: bytes, search: Callable[[bytes, int], int], made: list[int] | None,
               pos: int, check: bool = False, encoded: list[bytes] | None = None, skipped: int = 0
               ) -> str | None:
    """NFKC a window at a time, as the module's docstring shows. `done` holds what is in NFKC
    already, and `data[base:pos]` follows it, in NFKC too; a stretch begins at `pos`.

    From the next notable character, a window of whole stretches is read:
    - each of its notable characters is one NFKC changes alone into characters that are not: they
      are replaced in the window (the next is a quarter as long when they were few, else twice);
    - NFKC changes none of its stretches: it is passed (the next window is twice as long);
    - NFKC changes its stretches in DENSE places or more: they are replaced wherever they occur from
      the window on, and the window is read again (PASSES passes over the text in all: a voiced mark
      written apart throughout Japanese costs one);
    - else the stretches from the first NFKC changes to the last are normalised on their own.
    Past READ_SHARE of the text read, or a window of more than KINDS notable characters or without a
    whole stretch, `unicodedata` takes the rest. `check`: only whether the text is in NFKC is asked,
    and the first change found answers it (None), as does Unicode's check of the rest."""
    done: list[bytes] = []
    base = 0
    window, copied, read = WINDOW, 0, 0
    # (`skipped`: bytes before `data` left as they are: the work allowed is that of the whole text)
    copies, reads = PASSES * (skipped + len(data)), (skipped + len(data)) // READ_SHARE + 2 * WINDOW
    notables = notable()
    known: dict[str, str] = {}
    settled: set[str] = set()  # stretches found whole in windows NFKC changed nothing of
    seen: frozenset[str] = frozenset()  # the notable characters of the windows read (one pattern for all)
    patterns = 0
    while (at := search(data, pos)) >= 0:
        if at == 0 and done:  # what was replaced begins with a notable character, which may reach back
            return _slow(_text(b"".join(done) + data), made)
        start = at if at == 0 else _char_start(data, at - 1)  # the character before it is not notable
        end = min(len(data), at + window)
        while end < len(data) and 0x80 <= data[end] < 0xC0:
            end -= 1
        piece = _text(data[start:end])
        if end < len(data):  # a stretch that goes on past the window is left for the next
            last = len(piece) - 1
            while last > 0 and piece[last] in notables:
                last -= 1
            piece = piece[:last]
        read += end - start
        kinds = notables.intersection(piece)
        if not piece or read > reads or len(kinds) > KINDS:
            break
        size = len(_utf8(piece))
        simple = _replaced(piece, kinds)
        if check and simple is not None and simple != piece:
            return None
        if simple is not None:
            done += (data[base:start], _utf8(simple))
            base = pos = start + size
            few = not _occur(piece, kinds, DENSE)
            window = max(window // 4, MIN_WINDOW) if few else min(2 * window, MAX_WINDOW)
            continue
        if not kinds <= seen:  # a pattern of the characters seen so far serves every window they make
            seen, patterns = seen | kinds, patterns + 1
            if len(seen) > KINDS or patterns > PATTERNS:
                break
        stretches = set(_stretch_pattern(seen, at == 0).findall(piece))
        new = stretches.difference(known)
        if len(new) > NEW_STRETCHES:  # (each costs a call of `unicodedata`): the window is normalised whole
            if check:
                return text if unicodedata.is_normalized("NFKC", _text(data[start:])) else None
            normal = whole_nfkc(piece)
            if normal != piece:
                done += (data[base:start], _utf8(normal))
                base = start + size
            pos = start + size
            continue
        for stretch in new:
            known[stretch] = unicodedata.normalize("NFKC", stretch)
        changes = sorted((s for s in stretches if known[s] != s), key=len, reverse=True)
        if check and changes:
            return None
        if not changes:
            pos, window = start + size, min(2 * window, MAX_WINDOW)
            # (a run of notable characters that begins the text is no stretch another could hold: it
            # is left out, or its copies inside other stretches would be overwritten too)
            settled.update(stretch for stretch in stretches if stretch[0] not in notables)
            cost = (len(settled) + 1) * (len(data) - pos)
            if settled and copied + cost <= copies and _FILLER not in {stretch[0] for stretch in settled}:
                copied += cost
                pos = _past_settled(data, pos, settled, search, notables)
            continue
        cost = (len(changes) + 1) * (len(data) - start)  # a copy of the rest, and a pass for each
        if copied + cost <= copies and _occur(piece, changes, DENSE):
            rest = data[start:]
            for stretch in changes:
                rest = rest.replace(_utf8(stretch), _utf8(known[stretch]))
            copied += cost
            done.append(data[base:start])
            data, base, pos = rest, 0, 0
            # passes and reads over what the text became (NFKC makes a character eighteen at most, and
            # what it made is not made again): `unicodedata` would take that much longer too
            copies = max(copies, PASSES * len(data))
            reads = max(reads, len(data) // READ_SHARE + 2 * WINDOW)
            continue
        first, last = 0, len(piece)  # from the first place to change to the end of the last
        if len(changes) <= FEW:  # (a search each: for many, the window is normalised whole)
            first = min(piece.find(stretch) for stretch in changes)
            last = max(piece.rfind(stretch) + len(stretch) for stretch in changes)
            while last < len(piece) and piece[last] in notables:
                last += 1
        done += (data[base:start], _utf8(piece[:first]), _utf8(whole_nfkc(piece[first:last])),
                 _utf8(piece[last:]))
        base = pos = start + size
        window = max(window // 4, MIN_WINDOW)
    else:
        start = len(data)
    if made is not None and copied + read:
        made.append(copied + READ * read)
    if not done and start == len(data):
        if not check:
            _give(encoded, data)
        return text
    if check:  # nothing changed up to `start`, in NFKC, where a stretch begins
        return text if unicodedata.is_normalized("NFKC", _text(data[start:])) else None
    # what is in `done`, and the bytes up to `start`, are in NFKC, and a stretch begins at `start`
    done.append(data[base:start])
    made_bytes = b"".join(done)
    head = _text(made_bytes)
    if start == len(data):
        _give(encoded, made_bytes)
        return head
    left = _text(data[start:])
    normal = _slow(left, made)
    return text if len(done) == 1 and normal == left else head + normal  # (nothing changed: the text itself)


_FILLER = "\x01"  # what a stretch known to be in NFKC is overwritten with where `_past_settled` looks


def _past_settled(data: bytes, pos: int, settled: set[str], search: Callable[[bytes, int], int],
                  notables: frozenset[str]) -> int:
    """Where the first stretch from `pos` on (a stretch begins there) that is not one of `settled`
    (each in NFKC) begins, or the end of `data`: found by one search of a copy of the rest in which
    each of them is overwritten, byte for byte, with _FILLER (no stretch of them begins with it, and
    it is not notable; each begins with a character that is not notable, so each copy of one begins
    a stretch). A notable character left in the copy belongs to a stretch that is not one of
    them: either one standing apart, or the longer stretch that an occurrence of one of them began;
    so the stretch holding it begins at the last character before it, in `data`, that is not
    notable, and everything before that is characters that are not notable and whole stretches of
    `settled`. Costs a pass over the rest for each of them, and one search."""
    rest = data[pos:]
    for stretch in settled:
        encoded = _utf8(stretch)
        rest = rest.replace(encoded, _FILLER.encode() * len(encoded))
    at = search(rest, 0)
    if at < 0:
        return len(data)
    at += pos
    while at > pos:
        before = _char_start(data, at - 1)
        if _text(data[before:at]) not in notables:
            return before
        at = before
    return at


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _occur(text: str, parts: Iterable[str], times: int) -> bool:
    """Do `parts` occur in `text` `times` times or more, together? (A count each, until they do.)"""
    for part in parts:
        times -= text.count(part)
        if times <= 0:
            return True
    return False


def _char_start(data: bytes, index: int) -> int:
    """Where the UTF-8 character holding byte `index` begins."""
    while index > 0 and 0x80 <= data[index] < 0xC0:
        index -= 1
    return index


@lru_cache(maxsize=256)
def _stretch_pattern(kinds: frozenset[str], at_start: bool) -> re.Pattern[str]:
    """A stretch, in text whose notable characters are `kinds`: a run of them with the character
    before it (scanning from the left, the first character a run can follow is the one just before
    it, which is not notable), or without one at the start of the text."""
    chars = "".join(sorted(kinds))
    return re.compile(f"(?s)^[{chars}]+|.[{chars}]+" if at_start else f"(?s).[{chars}]+")


def _slow(text: str, made: list[int] | None) -> str:
    if made is None:
        return whole_nfkc(text)
    normal = unicodedata.normalize("NFKC", text)  # (a bounded caller's work stays what it was)
    if normal is not text:
        made.append(SLOW * max(len(text), len(normal)))
    return normal


def whole_nfkc(text: str, data: bytes | None = None) -> str:
    """NFKC of all of `text` in one pass: ICU's, where it is there and the text is long enough for
    it to pay (`icu_normal`), else `unicodedata`'s. `data`: the UTF-8 of `text`, if the caller has
    it. `text` itself when it is in NFKC. For callers that pay for no work: a bounded one (`made`)
    keeps `unicodedata`, so that what it may do, and finds, is the same with ICU or without."""
    normal = _by_icu(text, data)
    return unicodedata.normalize("NFKC", text) if normal is None else normal


def whole_nfkd(text: str, data: bytes | None = None) -> str:
    """NFKD of all of `text`, as `whole_nfkc` gives NFKC: ICU's for a text longer than SHORT where
    it is there, else `unicodedata`'s. For callers that pay for no work."""
    normal = icu_normal.nfkd(text, data) if len(text) > SHORT else None
    return unicodedata.normalize("NFKD", text) if normal is None else normal


def _by_icu(text: str, data: bytes | None = None) -> str | None:
    """ICU's NFKC of a text longer than SHORT (`text` itself when it is in NFKC); None when ICU is not
    there or declines the text (`icu_normal.nfkc`)."""
    normal = icu_normal.nfkc(text, data) if len(text) > SHORT else None
    return text if normal == text else normal


def _replaced(text: str, kinds: set[str] | frozenset[str]) -> str | None:
    """`text` with each of `kinds` (notable characters) replaced by its NFKC; None when one of them
    is not changed by NFKC alone (a non-starter or a composing character), or its NFKC holds one."""
    changes = _changes()
    for char in kinds:
        change = changes.get(char)
        if change is None:
            return None
        text = text.replace(char, change)
    return text


@cache
def _changes() -> dict[str, str]:
    """Each character NFKC changes standing alone, whose NFKC holds no notable character: its NFKC."""
    held = _held()
    changes = {}
    for code in byte_facts.nfkc_changed():
        change = unicodedata.normalize("NFKC", chr(code))
        if not any(ord(char) in held for char in change):
            changes[chr(code)] = change
    return changes


@cache
def _held() -> frozenset[int]:
    """The notable characters NFKC does not change standing alone: non-starters, composing ones."""
    return frozenset(code for low, high in (*decomposed_anchors.marks(), *decomposed_anchors.COMPOSING)
                     for code in range(low, high + 1))


@cache
def notable() -> frozenset[str]:
    """The notable characters (the module's docstring says which)."""
    return frozenset(map(chr, (*byte_facts.nfkc_changed(), *_held())))


@cache
def notable_class() -> str:
    """The notable characters as an RE2 character class (this module's search, and text_normal's)."""
    return re2_class(runs(map(ord, notable())))


@cache
def _notable_search() -> Callable[[bytes, int], int] | None:
    """Where, at or after byte `pos`, UTF-8 `data` next holds a notable character (-1: none); None
    without RE2. Compiled at first use (~3 ms, once)."""
    return decomposed_anchors.re2_search(notable_class())


@cache
def _changed_search() -> Callable[[bytes, int], int] | None:
    """Where UTF-8 `data` next holds a character NFKC changes standing alone; None without RE2."""
    return decomposed_anchors.re2_search(re2_class(runs(byte_facts.nfkc_changed())))
