"""The secret scanner's look at a JSON text without escapes as it stands (`text_is_clean`).

A clean document never needs the walk of every key and string: one search of the text finds each
place where a string could hold an anchor (every `"` delimits a string), and only the strings around
those places are checked (`text_kinds`). Which search depends on the text: ASCII (Hyperscan's, when
installed), NFKC as written, NFKD (decomposed anchors), or any form, invisible characters included
(`decomposed_anchors.any_form_pattern`). False means "let the walk decide", not "found".
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Any

from ito_training_mcp import decomposed_anchors
from ito_training_mcp.byte_facts import ByteFacts
from ito_training_mcp.nfkc import is_nfkc, nfkc, whole_nfkd
from ito_training_mcp.scan_strings import Budget, separator
from ito_training_mcp.secret_engine import Engine, default_engine
from ito_training_mcp.text_kinds import MAX_SEGMENTS, Memo, kinds
from ito_training_mcp.text_normal import few_invisible_kinds, long_combining_run, normalize

_LOOK_NORMALISES = 1 << 16
# The characters whose NFKD holds `"` or `\\` (a test checks them against unicodedata): a JSON text
# holding one is not searched in its NFKD, whose strings would not be its own.
QUOTE_OR_ESCAPE_MAKERS = "\ufe68\uff02\uff3c"
_HANGUL_SYLLABLE_LEADS = (b"\xea", b"\xeb", b"\xec", b"\xed")  # U+AC00..U+D7A3 begin so in UTF-8 (and little else)
# Strings the look at a text in neither form may normalise and check (~5 us each) before leaving the
# text to the walk: one per list of labels of a mebibyte manifest with a ligature in each.
_MAX_ANY_FORM_SEGMENTS = 64


def text_is_clean(engine: Engine, text: str, memo: Memo, budget: Budget, runs_checked: bool = False,
                       data: Any = None, invisible_checked: bool = False, facts: ByteFacts | None = None,
                       first_places: Callable[[], tuple[int | None, int | None]] | None = None) -> bool:
    """True when the JSON text (no escapes) holds no credential in any key or string.

    Each anchor occurrence is checked within the string around it (in JSON text without escapes
    every `"` delimits a string). False means "let the walk decide", not "found". Text that is not
    ASCII is searched as it stands only when it holds no invisible character and is NFKC already:
    then so is each of its strings (`"` is a starter that composes with nothing), and each is
    its own `normalize`. Text in NFKD is searched for decomposed anchors (decomposed_anchors.py),
    and each string where one is found is normalised before it is checked. `invisible_checked`: the
    caller knows the text holds no invisible character. `facts`: `byte_facts.facts(data)`, which
    answer whether the text may compose, whether an anchor occurs in it as written, and (when they
    can) whether it is in NFKC or NFKD. `first_places`: gives what `first_ascii_anchor(data)` and
    `first_any_form_place(data)` returned, when the caller searched ahead; asked only when this look
    takes one of those searches first.
    """
    ascii_only = text.isascii()
    several = facts is None or facts.several  # a character of several starters may stand in it
    if not ascii_only and not runs_checked and long_combining_run(text):
        return False
    data = engine.prepare(text) if data is None else data
    decomposed = False  # text in NFKD: searched for the places its NFKC could hold an anchor
    any_form = None  # text in neither form or holding invisible characters: decomposed_anchors.any_form_search
    kinds_fit: Callable[[], bool] | None = None  # text holding invisible characters: `_kinds_fit`
    segment_runs_checked = True
    if not ascii_only and not invisible_checked and engine.invisible(data, 0) is not None:
        # Invisible characters (a document the character rule refuses): the cleaning removes them, so
        # the text is searched as it stands with them allowed between the characters that could
        # make an anchor (`decomposed_anchors.any_form_pattern`); clean once no string can hold more
        # kinds of them than the cleaning takes either (the walk reports such a string, HIDDEN):
        # settled first when a few steps can tell, else asked last (`_kinds_fit`).
        kinds_fit = _kinds_fit(data)
        any_form = decomposed_anchors.any_form_value_search(several) if kinds_fit is not None else None
        if any_form is None:
            return False
        decomposed, segment_runs_checked = True, False
    elif not ascii_only:
        # The facts, when given, settle either form at once where Unicode's quick check would.
        # Otherwise: NFKD's look is cheap whatever the text. A text in NFKD is in NFKC too unless it
        # holds a character that may compose (a look at its bytes, then at most one search). NFKC's
        # look is `nfkc.is_nfkc`: CPython's own would normalise all of a text that may compose.
        in_nfkd = (facts is not None and not facts.nfkd_unsure) or unicodedata.is_normalized("NFKD", text)
        decomposed = in_nfkd and (decomposed_anchors.may_compose(data) if facts is None else facts.composing)
        utf8 = data if isinstance(data, bytes) else None
        neither = not in_nfkd and not ((facts is not None and not facts.nfkc_unsure) or (
            not decomposed_anchors.holds_latin_marks(data) and is_nfkc(text, utf8)))
        if neither:
            # Neither form (a no-break space in an ASCII manifest, full-width forms, letters composed
            # and not): searched as it stands for the places where the NFKC of a string could hold an
            # anchor, and for the characters that search cannot follow (`any_form_pattern`, which
            # shows why it misses none). Each string found is normalised before its check, as the
            # walk would; its marks are counted again, since decomposition can lengthen a run of them.
            any_form = decomposed_anchors.any_form_value_search(several) if isinstance(data, bytes) else None
            if any_form is None:
                return False
            decomposed, segment_runs_checked = True, False
    if facts is not None and not decomposed and not facts.anchor:
        return True  # searched as it stands (NFKC, or NFKD that composes nothing), and no anchor in it
    next_anchor = (engine.next_ascii_anchor if ascii_only else any_form if any_form is not None else
                   engine.next_decomposed_anchor if decomposed else engine.next_anchor)
    ahead = None if first_places is None or not (ascii_only or any_form is not None) else \
        first_places()[0 if ascii_only else 1]
    if ahead is not None:  # the first search, taken ahead
        search_on = next_anchor
        next_anchor = lambda data, pos: ahead if pos == 0 else search_on(data, pos)  # noqa: E731
    # A bounded scan (of a document refused anyway) takes the search in any form only to settle a text
    # where it finds nothing: the walk, with a budget of its own, checks the strings it would find.
    limit = MAX_SEGMENTS if any_form is None else 0 if budget.left is not None else _MAX_ANY_FORM_SEGMENTS
    unsure = decomposed_anchors.unsure_characters() if any_form is not None else None
    clean = _found_strings_clean(engine, data, next_anchor, decomposed, segment_runs_checked, limit, memo, budget,
                                 unsure)
    if clean is None:  # a character the search in any form cannot follow (a ligature, say)
        return kinds_fit is None and _decomposed_whole_is_clean(engine, text, data, memo, budget)
    return clean and (kinds_fit is None or kinds_fit())


def _decomposed_whole_is_clean(engine: Engine, text: str, data: Any, memo: Memo, budget: Budget) -> bool:
    """The look at a text in neither form that holds a character the search in any form cannot follow
    (two starters or more in its NFKD: a ligature, a fraction): its NFKD is searched for decomposed
    anchors, when that leaves every quote where it was (U+FF02 decomposes into one) and makes no
    backslash, and holds no Hangul syllable (two or three jamo each, composed again for each string
    found). False: let the walk decide."""
    if not isinstance(data, bytes) or any(lead in data for lead in _HANGUL_SYLLABLE_LEADS) \
            or any(char in text for char in QUOTE_OR_ESCAPE_MAKERS):
        return False
    spelt = whole_nfkd(text, data)
    if spelt.count('"') != text.count('"') or "\\" in spelt:
        return False
    prepared = engine.prepare(spelt)
    search = decomposed_anchors.decomposed_value_search() if isinstance(prepared, bytes) else None
    clean = _found_strings_clean(engine, prepared, search or engine.next_decomposed_anchor, True, False,
                                 MAX_SEGMENTS, memo, budget)
    return clean is True


def _found_strings_clean(engine: Engine, data: Any, next_anchor: Callable[[Any, int], int], decomposed: bool,
                         segment_runs_checked: bool, limit: int, memo: Memo, budget: Budget,
                         unsure: frozenset[int] | None = None) -> bool | None:
    """`_raw_text_is_clean`'s check of each string its search finds (at most `limit`), in JSON text
    without escapes (every `"` delimits a string). `decomposed`: each is normalised before its check
    (its runs of marks counted again unless `segment_runs_checked`). None when the search finds one of
    the `unsure` characters (UTF-8 `data`)."""
    normalising = _LOOK_NORMALISES  # characters of found strings this look may normalise before the walk does
    quote = separator(data, '"')
    colon = separator(data, ":")
    pos = 0
    as_written = 0  # strings checked as they are (not changed by NFKC): at most MAX_SEGMENTS of them

    def unsure_at(at: int) -> bool:
        return unsure is not None and ord(data[at:at + 4].decode("utf-8", "ignore")[:1] or "\0") in unsure

    # The places first, one per string, up to one past `limit`: past it, and with no character the
    # search cannot follow among them, the look ends "let the walk decide" whatever the strings hold,
    # and normalising and checking `limit` of them first would be spent for nothing.
    places: list[int] = []
    while len(places) <= limit:
        at = next_anchor(data, pos)
        places.append(at)
        if at < 0 or unsure_at(at):
            break
        end = data.find(quote, at)
        pos = len(data) if end < 0 else end + 1
    if len(places) > limit and places[-1] >= 0 and not unsure_at(places[-1]) and budget.left is None:
        return False
    for at in places[:limit]:
        if at < 0:
            return True
        if unsure_at(at):
            return None
        start = data.rfind(quote, 0, at) + 1
        end = data.find(quote, at)
        end = len(data) if end < 0 else end
        segment = data[start:end]
        if decomposed:  # the string as a reader sees it (its runs of marks are checked)
            if len(segment) > 4 * normalising:  # more characters than that whatever they are: not decoded
                return False
            raw = segment.decode("utf-8", "surrogatepass") if isinstance(segment, bytes) else segment
            normalising -= len(raw)
            if normalising < 0:  # so many: the walk would do it all again (an attacker review: 2.4x)
                return False
            # A text in NFKD without invisible characters has none in its NFKC either: NFKC alone,
            # which gives the text itself at the cost of a look when it is normal already.
            encoded = segment if isinstance(segment, bytes) else None
            shown = (nfkc(raw, encoded) if segment_runs_checked
                     else normalize(raw, runs_checked=False, data=encoded))
            if shown is None:
                return False
            if shown is not raw and shown != raw:
                segment = engine.prepare(shown)
            else:
                as_written += 1
                if as_written > MAX_SEGMENTS:
                    return False
        if kinds(engine, segment, memo, budget):
            return False
        after = data[end + 1:end + 65]
        is_key = after.lstrip()[:1] == colon or (len(after) == 64 and not after.strip())  # long whitespace: assume
        if is_key and (not budget.affords(len(segment)) or engine.key_name_match(segment) is not None):
            return False
        budget.spend(len(segment) if is_key else 0)
    at = places[limit] if len(places) > limit else -1
    return None if at >= 0 and unsure_at(at) else at < 0


def _kinds_fit(data: Any) -> Callable[[], bool] | None:
    """Can no string of UTF-8 JSON text `data` (without escapes) hold more kinds of invisible
    character than `normalize` cleans? Certain when none holds more of them than that, or the whole
    text holds no more kinds than that. None when it can (or there is no RE2); else the question's
    answer, to ask when it is needed: the steps from one run to the next have told already, or
    the pass that tells is taken then."""
    crowded = decomposed_anchors.crowded_string_search()
    if crowded is None or not isinstance(data, bytes):
        return None
    if crowded(data, 0) < 0:
        return lambda: True
    told = few_invisible_kinds(data, ahead_only=True)
    if told is None:
        return lambda: few_invisible_kinds(data) is True
    return (lambda: True) if told else None


def first_ascii_anchor(encoded: bytes) -> int | None:
    """Where the look at an ASCII JSON text (`encoded`) finds its first anchor (-1: nowhere), searched
    ahead of the scan: by a worker thread while the caller's thread parses the text (the search lets
    go of the GIL). None when the text is not ASCII or the engine does not search bytes."""
    engine = default_engine()
    if not encoded.isascii() or not engine.searches_bytes:
        return None
    return engine.next_ascii_anchor(encoded, 0)


def first_any_form_place(encoded: bytes, several: bool = True) -> int | None:
    """Where the look at a JSON text in neither normal form (`encoded`, UTF-8) finds its first place
    (`decomposed_anchors.any_form_value_search`; -1: nowhere), searched ahead of the scan as
    `first_ascii_anchor` is. None without RE2 or when the engine does not search bytes. `several`:
    False when `byte_facts` found no character of several starters in it."""
    search = decomposed_anchors.any_form_value_search(several)
    if search is None or not default_engine().searches_bytes:
        return None
    return search(encoded, 0)
