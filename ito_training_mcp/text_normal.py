"""What a reader would see of a text: NFKC, without invisible characters, for the secret scanner.

Kept apart from the scanner's searches: the cleaning of one text, of many texts joined by NUL, and
the one thing that makes CPython's normalisation slow, a long run of combining marks.
"""

from __future__ import annotations

import functools
import operator
import re
import unicodedata
from collections.abc import Callable, Iterator
from itertools import compress, count
from typing import Any

from ito_training_mcp import decomposed_anchors
from ito_training_mcp import nfkc as nfkc_module
from ito_training_mcp.nfkc import nfkc
from ito_training_mcp.secret_engine import Engine, default_engine
from ito_training_mcp.secret_rules import invisible_class

# A string with more distinct invisible characters than this is reported rather than cleaned: no
# legitimate text needs so many (a few flags of subdivisions use about ten), and each costs a pass.
MAX_INVISIBLE_KINDS = 12


def normalize(text: str, *, runs_checked: bool = False, data: bytes | None = None,
              made: list[int] | None = None) -> str | None:
    """NFKC, then without format characters (Cf) and other invisible ones: what a reader would see.

    None when the text holds more kinds of invisible character than any legitimate text needs.
    `data`: the UTF-8 of `text`, if the caller has it. `made`, if given, gets what normalising cost,
    in bytes of search (`nfkc.nfkc`'s measure): a bounded caller pays for it.
    """
    if text.isascii():
        return text.replace("\x00", "") if "\x00" in text else text
    if not runs_checked and long_combining_run(text):
        return None  # NFKC would take time quadratic in the run, and no reader can tell what it shows
    text = nfkc(text, data, made)
    if len(text) <= _SHORT_TEXT:
        return without_invisible(text, made)
    return without_invisible_by_search(text, made=made)


_SHORT_TEXT = 4096

# Unicode's stream-safe text format allows no more than 30 non-starters (characters of a non-zero
# combining class, counted in the decomposition) in a row; CPython's normalisation sorts a run of
# them in time quadratic in its length (a 160 KB manifest of one such run took 7 s). A text with a
# longer run is not normalised: `normalize` reports it as hidden, and the searches over many texts at
# once pass over it.
COMBINING_RUN_MAX = 30
_LAST_PLANE_WITH_NON_STARTERS = 0x1FFFF  # a test checks that no plane above holds one


def last_plane_with_non_starters() -> int:
    """The last code point of the last plane holding a non-starter (a test keeps it so)."""
    return _LAST_PLANE_WITH_NON_STARTERS

# Starters whose decomposition begins with a non-starter: in a row they make a run of non-starters as
# long when decomposed (an attacker review: 30,000 U+0F73 took NFKC 4 s, 120,000 took 66 s). They
# count as non-starters here; a test checks that no other character decomposes so.
DECOMPOSING_TO_NON_STARTERS = (0x0F73, 0x0F75, 0x0F81, 0xFF9E, 0xFF9F)


@functools.cache
def _non_starter_ranges() -> tuple[tuple[int, int], ...]:
    ranges: list[tuple[int, int]] = []
    extra = frozenset(DECOMPOSING_TO_NON_STARTERS)
    for code in range(0x300, _LAST_PLANE_WITH_NON_STARTERS + 1):
        if unicodedata.combining(chr(code)) or code in extra:
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return tuple(ranges)


def combining_run_pattern() -> str:
    """A run too long, in RE2's syntax (UTF-8): COMBINING_RUN_MAX + 1 non-starters."""
    return ("[" + "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in _non_starter_ranges()) + "]"
            + f"{{{COMBINING_RUN_MAX + 1}}}")


@functools.cache
def _combining_run() -> Callable[[bytes, int], int]:
    """The search for a run too long in UTF-8 `data` from byte `pos`: where one starts, or -1. RE2
    (linear, ~2-3 ns a byte), after a look for the run of bytes such a run needs (one translation
    and one byte search, ~0.5 ns a byte), else Python's `re`."""
    repeat = f"{{{COMBINING_RUN_MAX + 1}}}"
    try:
        import re2  # type: ignore[import-untyped]  # no type information shipped
    except ImportError:  # pragma: no cover - exercised where no wheel exists
        pattern = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in _non_starter_ranges()) + "]" + repeat)

        def search(data: bytes, pos: int) -> int:
            text = data[pos:].decode("utf-8", "surrogatepass")
            match = pattern.search(text)
            return -1 if match is None else pos + len(text[:match.start()].encode("utf-8", "surrogatepass"))
        return search
    options = re2.Options()
    options.never_capture = True
    options.max_mem = 64 << 20
    compiled = re2.compile(combining_run_pattern(), options)
    # Each byte of a non-starter in UTF-8 is a continuation byte or one of the few lead bytes that
    # begin one (not those of CJK ideographs, Latin-1, Greek or Cyrillic): such a run needs
    # 2 * (COMBINING_RUN_MAX + 1) of them in a row.
    leads = {chr(code).encode("utf-8")[0] for low, high in _non_starter_ranges() for code in range(low, high + 1)}
    wide = bytes(1 if 0x80 <= b < 0xC0 or b in leads else 0 for b in range(256))
    needed = b"\x01" * (2 * (COMBINING_RUN_MAX + 1))

    def search_re2(data: bytes, pos: int) -> int:
        if pos == 0 and needed not in data.translate(wide):
            return -1
        match = compiled.search(data, pos)
        return -1 if match is None else int(match.start())
    return search_re2


def long_combining_run(text: str, data: bytes | None = None) -> bool:
    """Does `text` hold more than COMBINING_RUN_MAX non-starters in a row? Text of Latin-1 alone holds
    none (they all lie above U+02FF): settled by one copy. Otherwise one search of its UTF-8 form
    (`data`, if the caller has it)."""
    if text.isascii():
        return False
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return _combining_run()(text.encode("utf-8", "surrogatepass") if data is None else data, 0) >= 0
    return False


def long_run_texts(joined: str, limit: int) -> list[int]:
    """Which of the texts joined by NUL in `joined` (none holding NUL) hold too long a run of
    combining marks: the first `limit` of them, one search each."""
    data = joined.encode("utf-8", "surrogatepass")
    search = _combining_run()
    held: list[int] = []
    pos = counted = index = 0
    while len(held) < limit:
        at = search(data, pos)
        if at < 0:
            break
        index += data.count(b"\x00", counted, at)
        held.append(index)
        end = data.find(b"\x00", at)
        if end < 0:
            break
        pos = counted = end + 1
        index += 1
    return held


_INVISIBLE = re.compile(invisible_class(False))


def without_invisible(text: str, made: list[int] | None = None) -> str | None:
    """`normalize`'s cleaning of a short NFKC text: one search and one removal per kind of invisible
    character it holds (a string of sixty-four zero-width spaces costs two searches, not sixty-four),
    None past MAX_INVISIBLE_KINDS kinds."""
    found = _INVISIBLE.search(text)
    if found is None:
        return text
    joins = _invisible_before_notable(text)
    kinds = 0
    while found is not None:
        kinds += 1
        if kinds > MAX_INVISIBLE_KINDS:
            return None
        text = text.replace(found.group(), "")
        found = _INVISIBLE.search(text, found.start())  # nothing before it was invisible
    return _renormalized(text, made, joins)


def without_invisible_by_search(text: str, *, nul: bool = True, data: Any = None,
                                made: list[int] | None = None) -> str | None:
    """The same for a long text: which kinds it holds, then each removed (a text of a mebibyte is not
    taken apart character by character, nor copied once per kind when it holds too many). Where the
    first one found makes up most of the text, it is removed first and the rest looked for in what
    is left. The kinds are found from one run of them to the next for a few steps (text stuffed
    with many kinds is settled there), else in one pass of the engine. `nul=False`: NUL stays, for
    texts joined by it; `data`: the engine's prepared form of `text`, if the caller has it."""
    engine = default_engine()
    data = engine.prepare(text) if data is None else data
    first = engine.invisible(data, 0, nul=nul)
    if first is None:
        return text
    joins = _invisible_before_notable(text, data)
    removed: list[str] = []
    char = _decoded(data[first[0]:first[1]])
    if 2 * text.count(char) > len(text):
        removed.append(char)
        text = _removed(text, char)
        data = engine.prepare(text)
        first = engine.invisible(data, 0, nul=nul)
    kinds = [] if first is None else _kinds_ahead(engine, data, first, nul, MAX_INVISIBLE_KINDS - len(removed))
    if kinds is _NOT_ALL:
        kinds = engine.invisible_kinds(data, MAX_INVISIBLE_KINDS - len(removed), nul=nul)
    if kinds is None:
        return None
    for char in kinds:
        text = _removed(text, char)
    return _renormalized(text, made, joins)


def few_invisible_kinds(data: Any, limit: int = MAX_INVISIBLE_KINDS, *, ahead_only: bool = False) -> bool | None:
    """Does `data` (UTF-8, as an engine prepared it) hold at most `limit` kinds of invisible character
    (NUL aside)? From one run of them to the next for a few steps, else one pass of the engine; with
    `ahead_only`, None when those steps cannot tell."""
    engine = default_engine()
    first = engine.invisible(data, 0, nul=False)
    if first is None:
        return True
    kinds = _kinds_ahead(engine, data, first, False, limit)
    if kinds is _NOT_ALL:
        if ahead_only:
            return None
        kinds = engine.invisible_kinds(data, limit, nul=False)
    return kinds is not None


_AHEAD = 64  # runs of invisible characters looked at one by one before one pass finds the kinds
_NOT_ALL: list[str] = []  # `_kinds_ahead` ran out of steps (a distinct object: compared by identity)


def _kinds_ahead(engine: Engine, data: Any, found: tuple[int, int], nul: bool, limit: int) -> list[str] | None:
    """The kinds of invisible character in `data` from `found` (the first) on, if the first _AHEAD runs
    of them show them all (the search after the last run finds none) or more than `limit`; else
    _NOT_ALL."""
    kinds: list[str] = []
    at: tuple[int, int] | None = found
    for _ in range(_AHEAD):
        if at is None:
            return kinds
        char = data[at[0]:at[1]]
        if _decoded(char) not in kinds:
            kinds.append(_decoded(char))
            if len(kinds) > limit:
                return None
        run = _run_of(char).match(data, at[0])
        at = engine.invisible(data, run.end() if run else at[1], nul=nul)
    return kinds if at is None else _NOT_ALL


def _decoded(char: Any) -> str:
    return char.decode("utf-8", "surrogatepass") if isinstance(char, bytes) else str(char)


_JOINS_ASKED = 256  # characters: a shorter text is normalised again (at most ~50 us) rather than asked


def _invisible_before_notable(text: str, data: Any = None) -> bool | None:
    """Does an invisible character in `text` (NFKC) stand just before a character that is notable
    to NFKC (`nfkc.py`: a non-starter, one that may compose with the one before, or one NFKC
    changes)? Only then can removing the invisible ones change the text's NFKC, or bring two runs of
    combining marks together: no invisible character is notable itself (a test checks), so
    otherwise the text splits into the same stretches with and without them, each in NFKC already.
    None (not asked) for a text shorter than _JOINS_ASKED, whose NFKC costs less than the asking;
    when the bytes show no character that may compose (Unicode's quick check then settles the text
    after removal at once); and without RE2. `data`: the engine's prepared `text`."""
    search = _invisible_then_notable()
    if search is None or len(text) < _JOINS_ASKED:
        return None
    data = data if isinstance(data, bytes) else text.encode("utf-8", "surrogatepass")
    if not decomposed_anchors.composing_begun(data):
        return None
    return search(data, 0) >= 0


@functools.cache
def _invisible_then_notable() -> Callable[[bytes, int], int] | None:
    return decomposed_anchors.re2_search(invisible_class(True) + nfkc_module.notable_class())


def _renormalized(text: str, made: list[int] | None = None, joins: bool | None = None) -> str | None:
    """NFKC again once invisible characters are out: removing one can bring two composable characters
    together, and two runs of combining marks too. A run too long then is reported (None), as before
    removal (an attacker review: runs of twenty marks between zero-width spaces, 84,000 characters,
    took NFKC 7 s); so is one NFKC made longer (U+0344 is two marks). The text was in NFKC before the
    removal, and stays so unless `joins` (`_invisible_before_notable`; None: not asked). Unicode's
    quick check settles most texts at once, but CPython's answers "maybe" for a character that may
    compose, and then normalises the whole text (a thousand characters NFKC changes, each string of
    a list after a NUL, cost a hundred microseconds each): that is what `joins` spares, and what
    `made` is charged for."""
    if long_combining_run(text):
        return None
    if joins is False:  # no invisible character stood before a notable one (`_invisible_before_notable`)
        return text
    if made is not None:
        made.append(nfkc_module.SLOW * len(text))
        return unicodedata.normalize("NFKC", text)
    return nfkc_module.whole_nfkc(text)


def _removed(text: str, char: str) -> str:
    """`text` without `char`. Removing each occurrence costs a copy of what lies between; a regular
    expression removes a run at once, but each match costs about as much as six occurrences: where
    most occurrences stand in runs (counted by blocks of eight), the runs go (a mebibyte of zero-width
    spaces in runs of 64 takes 1.7 ms so, 4.3 ms one by one)."""
    occurrences = text.count(char)  # of the whole text: a sample would let the rest choose badly
    if occurrences >= 1024 and 6 * (occurrences - 7 * text.count(char * 8)) < occurrences:
        runs_out: str = _run_of(char).sub("", text)
        return runs_out
    return text.replace(char, "")


@functools.lru_cache(maxsize=128)
def _run_of(char: Any) -> Any:
    """A run of `char` (text or UTF-8 bytes)."""
    if isinstance(char, bytes):  # the bytes of one character, repeated as a whole
        return re.compile(b"(?:" + re.escape(char) + b")+")
    return re.compile(re.escape(char) + "+")


def nfkc_joined(texts: list[str], joined: str, made: list[int] | None = None, whole: bool = False,
                encoded: list[bytes] | None = None) -> str:
    """NFKC of `joined` (the texts joined by NUL, which holds none of them), as far as a search can
    tell: only the texts that are not ASCII are normalised, together, once (Python normalises the
    whole of a text that is not normal already, so one character to change in a mebibyte would cost
    a pass over all of it). When they are all in NFKD (text written with combining marks, whose NFKC
    costs ten times reading it), only those that could hold an anchor once normalised are: the
    others can hold no finding and are left out (empty). `made`, if given, gets what each text this
    makes on the way cost (an NFKD, an NFKC; see `nfkc.nfkc`), which can be many times the texts'
    length (U+FDFA's NFKD is eighteen characters): the work a bounded caller pays for.

    `whole`: the caller pays for no work (an unbounded scan), and `joined` may be normalised as it
    is, ASCII texts and all, when the texts that are not ASCII make most of it: the ASCII ones cost
    a search of their bytes there, and the texts need not be taken apart and joined again. So is it
    when no text is ASCII, whatever the caller pays. Then `encoded`, if given, gets the UTF-8 of the
    answer when the work made it (see `nfkc.nfkc`)."""
    odd = list(compress(count(), map(operator.not_, map(str.isascii, texts))))
    together = "\x00".join([texts[i] for i in odd])
    whole = (whole and 2 * len(together) > len(joined)) or len(odd) == len(texts)  # (then `together` is `joined`)
    left_out = False
    data: Any = None
    if odd and unicodedata.is_normalized("NFKD", together):  # a fraction of NFKC's cost, whatever the text
        data = default_engine().prepare(together)
        if not decomposed_anchors.may_compose(data):
            return joined  # in NFKC too: nothing to change
        kept, together = _could_hold_an_anchor(odd, together, data)
        left_out, odd, whole = len(kept) < len(odd), kept, False
    elif odd and decomposed_anchors.holds_latin_marks(data := default_engine().prepare(joined if whole else together)):
        # Letters composed and not: NFKC's look would normalise all of it to tell; the search runs
        # over its NFKD (NUL stays where it was), and the texts it finds are normalised as written.
        if made is not None:  # a bounded caller pays for it, at `unicodedata`'s price, so it keeps `unicodedata`
            spelt = unicodedata.normalize("NFKD", together)
            made.append(nfkc_module.SLOW * len(spelt))
        else:
            spelt = nfkc_module.whole_nfkd(together)
        kept, _ = _could_hold_an_anchor(odd, spelt, default_engine().prepare(spelt))
        if len(kept) < len(odd):
            position = {index: at for at, index in enumerate(odd)}
            parts = together.split("\x00")
            left_out, odd, together = True, kept, "\x00".join(parts[position[i]] for i in kept)
        data, whole = None if whole else data, False
    if whole:  # `data`, when taken, is the UTF-8 of `joined`
        return nfkc(joined, data if isinstance(data, bytes) else None, made, encoded)
    # `data`, when taken, is the UTF-8 of `together` unless the texts were narrowed since
    normal = nfkc(together, data if odd and not left_out and isinstance(data, bytes) else None, made)
    if not left_out and normal == together:
        return joined
    normalized = [text if text.isascii() else "" for text in texts] if left_out else list(texts)
    if odd:
        for index, part in zip(odd, normal.split("\x00"), strict=True):
            normalized[index] = part
    return "\x00".join(normalized)


_MAX_KEPT = 64  # texts kept one search at a time; past them, all are (each search costs a few microseconds)


def _could_hold_an_anchor(odd: list[int], together: str, data: Any) -> tuple[list[int], str]:
    """Of the texts `odd` (their indices), joined by NUL in `together` (NFKD), those where the engine's
    search of decomposed anchors finds a place (decomposed_anchors.py), and those joined; all of them
    when more than _MAX_KEPT are (thousands of strings full of invisible characters would otherwise
    cost a search each: the cleaning after takes them all at once)."""
    kept: list[int] = []
    for index in texts_found(default_engine().next_decomposed_anchor, data):
        if len(kept) == _MAX_KEPT:
            return odd, together
        kept.append(index)
    if len(kept) == len(odd):
        return odd, together
    parts = together.split("\x00")
    return [odd[i] for i in kept], "\x00".join(parts[i] for i in kept)


def texts_found(search: Callable[[Any, int], int], data: Any) -> Iterator[int]:
    """The indices of the texts joined by NUL in `data` (as an engine prepared them) where `search`
    (from a position: where a match starts, or -1) finds something, in order: one search each."""
    sep = b"\x00" if isinstance(data, bytes) else "\x00"
    pos = counted = index = 0
    while (at := search(data, pos)) >= 0:
        index += data.count(sep, counted, at)
        yield index
        end = data.find(sep, at)
        if end < 0:
            return
        pos = counted = end + 1
        index += 1
