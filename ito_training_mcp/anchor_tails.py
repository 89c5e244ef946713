"""What must follow an anchor of the secret scanner for an occurrence of it to be a place, in the
searches of decomposed_anchors.py: the stops of `secret_rules.ANCHOR_STOPS` (`stop_tail`), and in a
JSON value those of `secret_rules.VALUE_STOPS` (`value_tail`)."""

from __future__ import annotations

import unicodedata
from functools import cache, reduce

from ito_training_mcp import secret_rules
from ito_training_mcp.anchor_reach import Reach
from ito_training_mcp.egress.invisible import re2_class, runs


def stop_tail(anchor: str) -> str:
    """What must follow `anchor` for it to be a place, in RE2's syntax and Python's alike: anything
    but one of its stop characters (`secret_rules.ANCHOR_STOPS`) that an ASCII character other than
    NUL, or the end, follows; "" for an anchor without stops. Why such an occurrence is none: the
    anchor's last letter is its own NFKD, one starter alone (the callers see that no marks may follow
    it) and the stop is ASCII, and so is what follows it, so NFKC leaves the stop as it is, right
    after that letter (an ASCII character is never the second of a pair that composes, and one
    followed by another ASCII character composes with nothing); and the cleaning removes nothing
    between them, nor right after the stop (NUL is invisible: removed, it would let a mark after it
    compose with the stop, as an attacker review found). A text in which the stop is followed by
    anything else (a mark, an invisible character, NUL, any character that is not ASCII) is a place,
    as before: the search finds a little more than it must."""
    stops = secret_rules.ANCHOR_STOPS.get(anchor)
    if stops is None or unicodedata.normalize("NFKD", anchor[-1]) != anchor[-1]:
        return ""
    return f"(?-i:[^{stops}]|[{stops}][^\\x01-\\x7f]|$)"  # (its case as written, inside a search without)


# The letters and digits after which (or after blanks and one of them) an anchor of VALUE_STOPS in a
# value is no place. Why such a letter stands in the cleaning of the string too, right after the anchor
# or its blanks: it is a starter that NFKC leaves as it is and that composes with nothing before it (it
# is none of COMPOSING), so NFKC gives it, or it composed with marks after it, which is a letter or
# digit too (a test checks every such composition); the cleaning removes neither. Code points of the
# Basic Multilingual Plane only: a letter beyond it is a place, as before.
_VALUE_LETTER_BLOCKS = ((0x30, 0x7F), (0xC0, 0x24F), (0x370, 0x52F), (0x5D0, 0x5EA), (0x620, 0x64A), (0x3041, 0x30FF),
                        (0x4E00, 0x9FFF), (0xAC00, 0xD7A3))


@cache
def value_letters() -> tuple[tuple[int, int], ...]:
    """The letters and digits of `value_tail`, as (low, high) runs (~20 ms, once)."""
    from ito_training_mcp.composing import COMPOSING

    invisible = {code for low, high in secret_rules.INVISIBLE_RANGES for code in range(low, high + 1)}
    composing = {code for low, high in COMPOSING for code in range(low, high + 1)}
    return tuple(runs(code for low, high in _VALUE_LETTER_BLOCKS for code in range(low, high + 1)
                      if chr(code).isalnum() and not 0xD800 <= code < 0xE000 and not unicodedata.combining(chr(code))
                      and code not in invisible and code not in composing
                      and unicodedata.is_normalized("NFKC", chr(code))))


@cache
def _letters_but(chars: str) -> list[tuple[int, int]]:
    """`value_letters` but `chars`, as runs."""
    left = frozenset(map(ord, chars))
    return runs(code for low, high in value_letters() for code in range(low, high + 1) if code not in left)


# The rest of a string that is a key, in JSON text without escapes: one pattern after every occurrence
# that only a key makes a place (`value_tail`), so that RE2's DFA follows one such rest at a time
# however many occurrences a string holds (one for each anchor crowded it out of memory: an attacker
# review's labels of a dozen credential words took 1.5 s a mebibyte).
KEY_REST = '[^"]*"[ \\t\\r\\n]*:'


@cache
def _composing_firsts() -> frozenset[int]:
    """The ASCII characters that begin a canonical pair that composes (letters, `<`, `=`, `>`)."""
    found = set()
    for code in range(0x80, 0x110000):
        parts = unicodedata.decomposition(chr(code)).split()
        if len(parts) == 2 and not parts[0].startswith("<") and int(parts[0], 16) < 0x80:
            found.add(int(parts[0], 16))
    return frozenset(found)


# The reach the searches follow past an anchor (`cut_tail`), a little less than `anchor_reach`'s: at most
# MOST_REACH characters, and characters of the first of _REACH_GROUPS that holds the anchor's own. Why
# less: each distinct pattern after an anchor is a counter RE2's DFA keeps for each occurrence it
# is in, and the states it makes multiply with them (a mebibyte of anchors cut short by a few
# characters, one after another, took 70 ms to search with each anchor's own reach, 25 ms so).
MOST_REACH = 12
# (every ASCII character but NUL, which the cleaning removes, and `"` and `\\`, which a string of JSON
# text without escapes cannot hold: DEL stands raw in JSON text, and an attacker review found it taken
# for a stop where a rule's value may hold it)
_PRINTABLE = frozenset(range(0x01, 0x80)) - {ord('"'), ord("\\")}
_ALNUM = frozenset(map(ord, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"))
_REACH_GROUPS = (_ALNUM, _ALNUM | frozenset(map(ord, "_-.+/=~$@")), _PRINTABLE - {ord(","), ord(";")}, _PRINTABLE)
# The characters that may stand right after an anchor are followed on their own where they are few (a
# word's: `s`, a separator, a quote, a blank, `:` or `=`), so that "passage" and "author" are no places.
_MOST_FIRST = 16


def searched_reach(anchor: str) -> Reach | None:
    """The reach `cut_tail` follows past `anchor` (None: it names no rule)."""
    from ito_training_mcp.anchor_reach import reaches

    reach = reaches().get(anchor)
    if reach is None or reach.length == 0:
        return reach
    own = reach.chars & _PRINTABLE
    group = next(group for group in _REACH_GROUPS if own <= group)
    first = reach.first & _PRINTABLE if len(reach.first & _PRINTABLE) <= _MOST_FIRST else group
    return Reach(group, min(reach.length, MOST_REACH), first)


@cache
def host_reach() -> Reach:
    """The reach `after_colon` follows past an `@` that stands after `:` and a run but after no `:/`:
    that of the rules anchored by `@` whose matches need no `:/` before it (`user:password@host`, whose
    host stands after it: "localhost", or a name and then `.` or `:`, three characters at least). The
    others (a URL's userinfo) begin with `://`. Its own characters, not a group's: it is a tail of its
    own, after a rare head."""
    from ito_training_mcp.anchor_reach import least, reach_of

    reach = reduce(least, [reach_of(rule) for rule in secret_rules.RULES
                          if "@" in rule.anchors and not rule.pattern.startswith("://")])
    return Reach(reach.chars & _PRINTABLE, min(reach.length, MOST_REACH), reach.first & _PRINTABLE)


def cut_tail(anchor: str) -> str | None:
    """RE2's pattern of what must follow `anchor` (in JSON text without escapes, right after its last
    letter) for an occurrence to be a place by its reach (`searched_reach`; see `reach_tail`). None:
    the anchor names no rule (a key-name stem alone); "" for a reach of nothing (every occurrence is
    a place)."""
    reach = searched_reach(anchor)
    return None if reach is None else reach_tail(reach)


@cache
def reach_tail(reach: Reach) -> str:
    """RE2's pattern of what must follow an anchor's occurrence (in JSON text without escapes, right
    after its last letter) for it to be a place by `reach`: within its first `length` characters,
    every ASCII one before the first that is not ASCII is one of the reach's characters (the first of
    them one of those that may stand first). An occurrence followed by up to `length - 1` of them and
    then another ASCII character (a stop: `"` ends the string) is in no match of a rule it anchors.
    Why the text a reader sees holds the same characters there: they are ASCII, each followed by
    another ASCII one, so NFKC leaves them as they are and composes none of them with what follows (an
    ASCII character is never the second of a pair that composes), and the cleaning removes none (NUL
    is not in JSON text). A stop that may begin a pair that composes (a letter, `<`, `=`, `>`) counts
    only when an ASCII character other than NUL follows it. "" for a reach of nothing."""
    if reach.length == 0:
        return ""

    def ends(chars: frozenset[int]) -> str:
        """Where a run of `chars` may end and leave a place: not ASCII (NUL, invisible, is no stop: the
        cleaning removes it), the end, or a stop that may compose with what follows it."""
        firsts = sorted(c for c in _composing_firsts() if c not in chars)
        made = ["[^\\x01-\\x7f]", "$"]
        if firsts:
            made.append(re2_class(runs(firsts)) + "(?:[^\\x01-\\x7f]|$)")
        return "(?:" + "|".join(made) + ")"

    allowed = re2_class(runs(reach.chars))
    rest = "" if reach.length == 1 else (
        f"(?:{allowed}{{0,{reach.length - 2}}}{ends(reach.chars)}|{allowed}{{{reach.length - 1}}})")
    first = reach.first & reach.chars
    return f"(?-i:{ends(first)}|{re2_class(runs(first))}{rest})" if first else f"(?-i:{ends(first)})"


def value_tail(anchor: str, marked: bool, between: list[tuple[int, int]]) -> tuple[str | None, str | None]:
    """RE2's patterns of what must follow `anchor` (in text as it stands, in a JSON text without
    escapes) for an occurrence to be a place: in any string (the first; None: in none), and in a
    string that is a key, where the first does not make it one (the second, which KEY_REST must
    follow; None: nothing more). `marked`: marks may follow the anchor's last letter (the pattern
    before this takes them, and invisible characters: `between`).

    Rules: an anchor's reach (`cut_tail`) holds in any string; the stops of
    `secret_rules.VALUE_STOPS` hold in a value (`_stopped`); where both apply, a place passes both
    (`_stopped_and_cut`). Key names: a credential key-name stem is a place in a key whatever follows
    it, but one of its `ANCHOR_STOPS` that an ASCII character other than NUL follows (a key name is
    looked for in a key alone, and every one holds a stem)."""
    cut = cut_tail(anchor)
    stops = secret_rules.ANCHOR_STOPS.get(anchor) if not marked and stop_tail(anchor) else None
    in_key = None if anchor.lower() not in _stems() else f'(?-i:[^{stops}"]|[{stops}][^\\x01-\\x7f])' if stops else ""
    if cut is None:
        return None, in_key
    if anchor in secret_rules.VALUE_STOPS:
        value = _stopped_and_cut(anchor) if cut and not marked else _stopped(anchor, marked, tuple(between))
    elif not cut:
        return "", None
    else:  # (marks or invisible characters right after the last letter: a place)
        value = f"(?:{re2_class(between)}|{cut})" if marked else cut
    # (a key that ends with it: KEY_REST, after `in_key`, reads no further than a character past it)
    return (f'(?:{value}|"[ \\t\\r\\n]*:)' if stops and in_key is not None else value), in_key


@cache
def _stems() -> frozenset[str]:
    return frozenset(stem.lower() for stem in secret_rules.KEY_NAME_STEMS)


@cache
def _stopped(anchor: str, marked: bool, between: tuple[tuple[int, int], ...]) -> str:
    """The value stops alone (`secret_rules.VALUE_STOPS`): anything but a letter of `value_letters`
    other than `s` and but ASCII blanks, or blanks and then anything but such a letter. (`marked`:
    marks and invisible characters after the last letter are no place of their own.)"""
    without_s = _letters_but("s")  # `s` goes on to "tokens" and "id_tokens="
    blanks = [(0x9, 0x9), (0x20, 0x20)]
    other = "[^" + re2_class(sorted([*without_s, *blanks, *(between if marked else [])]))[1:]
    after_blanks = "[^" + re2_class([*value_letters(), *blanks])[1:]
    return f"(?-i:{other}|$|[ \\t]+(?:{after_blanks}|$))"


@cache
def _stopped_and_cut(anchor: str) -> str:
    """A place by the value stops (`_stopped`) and by the reach (`cut_tail`) at once, after an anchor
    that no mark may follow: RE2 has no intersection, so the pattern follows both, a character at a
    time, through the reach's `length` characters (then the stops alone decide). States: 0, nothing
    yet; 1, blanks only; 2, the stops passed (a character that is neither a letter nor a blank)."""
    reach = searched_reach(anchor)
    assert reach is not None
    letters = frozenset(c for low, high in value_letters() for c in range(low, high + 1))
    ascii_letters = frozenset(c for c in letters if c < 0x80)
    chars = reach.chars
    blanks = frozenset((0x9, 0x20))
    s = ord("s")

    def klass(codes: frozenset[int]) -> str:
        return re2_class(runs(codes))

    after_blanks = "(?:[^" + re2_class(runs(sorted(letters | blanks)))[1:] + "|$)"
    non_letter = "[^\\x01-\\x7f" + re2_class(runs(sorted(c for c in letters if c >= 0x80)))[1:]

    @cache
    def place(at: int, state: int) -> str:
        if at == reach.length:
            return ("" if state == 2 else f"[ \\t]*{after_blanks}" if state == 1 else
                    f"(?:[^{re2_class(runs(sorted((letters - {s}) | blanks)))[1:]}|$|[ \\t]+{after_blanks})")
        options = ["$"]
        # not ASCII: past the reach; a place unless a letter the stops pass over (states 0 and 1)
        options.append("[^\\x01-\\x7f]" if state == 2 else non_letter)
        # (right after the anchor, only the characters that may stand first: `Reach.first`)
        here = chars & reach.first if at == 0 else chars
        # a stop that may compose, with no ASCII character after it: past the reach too
        composing = frozenset(c for c in _composing_firsts() if c not in here)
        stops = (composing if state == 2 else composing - ascii_letters if state == 1
                 else composing - (ascii_letters - {s}))
        if stops:
            options.append(klass(stops) + "(?:[^\\x01-\\x7f]|$)")
        others = here - letters - blanks  # (neither letters nor blanks: past the stops)
        steps = {2: here} if state == 2 else {1: here & blanks, 2: others if state == 1 else others | ({s} & here)}
        for to, codes in steps.items():
            if codes:
                options.append(klass(codes) + place(at + 1, to))
        return "(?:" + "|".join(options) + ")"

    return "(?-i:" + place(0, 0) + ")"


def in_keys(keyed: list[str]) -> list[str]:
    """The one pattern of the occurrences that only a key makes places (`KEY_REST` after them all)."""
    return ["(?:" + "|".join(keyed) + ")" + KEY_REST] if keyed else []


@cache
def _holding(char: str, last: bool | None = None) -> str:
    """The characters whose NFKD holds `char` (for ":", the full-width one, U+2A74 for "::=" ...), as a
    class ("" for none); `last`: only those whose NFKD ends with it (True) or goes on after it (False)."""
    codes = [code for code in range(0x110000) if not 0xD800 <= code < 0xE000
             and char in unicodedata.normalize("NFKD", chr(code))
             and (last is None or unicodedata.normalize("NFKD", chr(code)).endswith(char) is last)]
    return re2_class(runs(codes)) if codes else ""


def after_colon(anchors: dict[str, str], gap: str) -> list[str]:
    """The patterns of the anchors of `secret_rules.AFTER_COLON` (`anchors`: each one's), as the rules
    they anchor want them: after `:` and `/` (the `://` of a URL, with its userinfo `@` or its
    query's `?`, `&` and `;`), then anything but a quote (the rest of the string, in JSON text without
    escapes); and `@` also after `:` and a run of at least three characters none of which is a blank,
    `/`, `@`, `:` or a quote (`user:password@host`), or of any length holding one that is not ASCII,
    and then the host's reach (`host_reach`, as `reach_tail` follows it): "x:yyy@z," is no place.

    Why a text in any form holds these where a reader's view does: NFKC makes `:` and `/` of no other
    characters (it composes no ASCII character) and the cleaning removes none, so the view's `:`
    comes from a character whose NFKD holds one, and so does its `/`, with only invisible characters
    between them (any other would stand between them in the view; no character's NFKD holds both).
    A run of ASCII characters stands in the view as it is (none composes with the next), so one of
    fewer than three, or holding one of those characters, stands there so too; where the `:` comes
    from a character whose NFKD goes on after it (U+2A74, "::="), the run may be of any length."""
    if not anchors:
        return []
    colon, slash = _holding(":"), _holding("/")
    made = [f'{colon}{gap}{slash}[^"]*(?:{"|".join(anchors.values())})']
    if "@" in anchors:
        run = "[^\"\\x00\\t\\n\\r /@:']"  # (not ASCII: any; NUL, invisible, counts as not ASCII)
        # (a character whose NFKD goes on after its `:`, U+2A74, begins the run itself: any length then)
        further = _holding(":", last=False)
        made.append(f"(?:{_holding(':', last=True)}(?:{run}{{3,}}|{run}*[^\\x01-\\x7f]{run}*)"
                    + (f"|{further}{run}*" if further else "") + f"){anchors['@']}{reach_tail(host_reach())}")
    return made
