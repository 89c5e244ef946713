"""Is a candidate a secret? The confirmations a rule names (`Rule.check`), each a plain function of text.

A pattern finds where a credential may be; these functions look at what it found: not a placeholder
(`xxxx`, `<your-key>`, `${VAR}`, `changeme`, a run of one character, `abcdef...`), a checksum where
the format has one (a valid checksum confirms a token whatever its letters), random-looking where
the rule is generic, a value a person could have chosen after a password's name, and `user:password`
inside HTTP Basic's base64.
"""

from __future__ import annotations

import binascii
import math
from collections import Counter
from collections.abc import Callable
from itertools import pairwise

from . import engine, names

# Placeholders, read with RE2 (one pass, however many alternatives): placeholder syntax and words, values
# that are placeholders whole, references to a secret store, and six letters or digits in a row (`abcdef`).
_PLACEHOLDER = (
    r"(?i)x{4,}|\*{3,}|#{4,}|\.\.\.|…|<[^>]*>|\$\{|\{\{|%\(|\$\(|^\$\w+$|^%\w+%$|^env[.:]|\[[a-z_ ]+\]"
    r"|your|example|placeholder|redacted|change_?me|dummy|sample|insert|replace|fake|foobar|lorem|secret123"
    r"|passw0rd|p@ssw0rd|mysecret|mytoken|notreal|not_real|todo|tbd|fixme|^(?:none|null|nil|undefined|true|false"
    r"|required|optional|empty|unset|hidden|masked|secret|token|apikey|api_key|password|pass|test|testing|user"
    r"|username|admin|guest|demo|foo|bar|baz|x+|y+|z+|abc|abcd|qwerty|letmein|hunter2|1234|12345)$"
    r"|^(?:enc\[|\$ansible_vault|!vault|vault:|sm://|ssm:|arn:aws:secretsmanager:|projects/[^/]+/secrets/|op://"
    r"|keyvault:)|"
    + "|".join(run[i:i + 6] for run in ("abcdefghijklmnopqrstuvwxyz", "0123456789") for i in range(len(run) - 5))
)
_REPEATED = r"(.)\1{5,}|(..)\2{3,}|(...)\3{3,}|(....)\4{3,}"
_WORD = r"[A-Za-z][a-z]*(?:['-][A-Za-z][a-z]*)*[.,!?:;)]*|[A-Z]+[.,!?:;]*|[a-z]+\(\)"
_HEX = r"[0-9a-f]+|[0-9A-F]+"
_REFERENCE = r"[A-Za-z_][A-Za-z_]*(?:\.[A-Za-z_][A-Za-z_]*)*"
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_ALNUM_RUN = r"[A-Za-z0-9]+"
_PARTS = r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+"
_VOWELS = frozenset("aeiouy")
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def _marked(value: str) -> bool:
    """Placeholder syntax or words in the value (see _PLACEHOLDER)."""
    return engine.found(engine.compiled(_PLACEHOLDER), value.encode("utf-8", "surrogatepass"))


def placeholder(value: str) -> bool:
    """A stand-in, not a secret: a placeholder word or syntax, a run like `abcdef` (also interleaved:
    `abc123def456`), a run of one to four characters repeated, or few distinct characters."""
    if _marked(value) or _few(value):
        return True
    low = "".join(engine.python(_ALNUM_RUN).findall(value[:64])).lower()
    steps = sum(1 for a, b in pairwise(low) if ord(b) - ord(a) in (1, -1))
    return len(low) >= 6 and steps * 5 >= (len(low) - 1) * 3


def _few(value: str) -> bool:
    """A run of one to four characters repeated, or few distinct characters."""
    distinct = len(set(value))
    few = distinct <= 3 or (distinct <= 8 and distinct * 6 <= len(value))
    return few or engine.python(_REPEATED).search(value) is not None


def _word_like(part: str) -> bool:
    """An alphabetic part that reads like a word: vowels and consonants mixed, no long consonant run."""
    low = part.lower()
    vowels = sum(c in _VOWELS for c in low[1:]) + (low[0] in "aeiou")
    if len(low) < 4 or not 0.25 <= vowels / len(low) <= 0.8:
        return False
    run = 0
    for c in low:
        run = 0 if c in _VOWELS else run + 1
        if run > 3:
            return False
    return True


def wordy(value: str) -> bool:
    """Made of words: an ordinary word, or an identifier or path whose letters are mostly words."""
    if engine.python(_WORD).fullmatch(value):
        return True
    covered = sum(len(p) for p in engine.python(_PARTS).findall(value) if _word_like(p))
    return covered * 5 >= len(value) * 3


def looks_random(value: str, min_len: int = 16) -> bool:
    """A machine-made secret: long enough, no placeholder, and its longest run of letters and digits
    (a path's or an image reference's segments are short) mixed like random text: letters and digits
    alternating often, or, where they seldom do, no words."""
    if len(value) < min_len or "://" in value:
        return False
    return _random_core(value, min_len) and not placeholder(value)  # the placeholder test costs the most


def _random_core(value: str, min_len: int) -> bool:
    if engine.python(_UUID).search(value):
        return True
    core = max(engine.python(_ALNUM_RUN).findall(value), key=len, default="")
    if len(core) < min(12, min_len) or (core != value and _few(core)):
        return False
    if core.isdigit():
        return len(core) >= 12 and entropy(core) >= 2.5
    if engine.python(_HEX).fullmatch(core):
        return len(core) >= 16 and entropy(core) >= 2.8
    digits = sum(1 for a, b in pairwise(core) if a.isdigit() != b.isdigit())
    if digits >= 3 and digits * 8 >= len(core):
        return entropy(core) >= min(3.0, math.log2(len(core)) - 0.7)
    if wordy(core) or (core != value and wordy(value)):
        return False
    if entropy(core) < min(3.0, math.log2(len(core)) - 0.7):
        return False
    if digits:
        return True
    cases = sum(1 for a, b in pairwise(core) if a.isupper() != b.isupper())
    return len(core) >= 12 and cases * 4 >= len(core)


def chosen_password(value: str, spaced: bool) -> bool:
    """A password a person chose: six characters or more, two kinds of character (lower case, an upper
    case letter after the first, digits, symbols), no placeholder, not a plain word, path or address.
    After a bare space (`password Hunter2`) a digit is needed too."""
    if _marked(value):
        return False
    value = value.rstrip(".,!?;:)")
    if len(value) < 6 or placeholder(value) or "://" in value or value.startswith(("/", "~/", "./", "-")):
        return False
    if engine.python(_WORD).fullmatch(value) or engine.python(_REFERENCE).fullmatch(value):
        return False
    digit = any(c.isdigit() for c in value)
    symbol = any(not c.isalnum() for c in value)
    kinds = digit + symbol + any(c.islower() for c in value) + any(c.isupper() for c in value[1:])
    return kinds >= 2 and (not spaced or digit)


def assigned(name: str, value: str, spaced: bool) -> bool:
    """A value given to a name in text: the name must name a credential, the value look like one."""
    power = names.strength(name)
    if power == names.NONE:
        return False
    if names.is_password_name(name) and chosen_password(value, spaced):
        return True
    if _marked(value):
        return False
    value = value.rstrip(".,!?;:)")
    if power == names.WEAK or spaced:
        return looks_random(value, 16) or basic_pair(value)
    return looks_random(value, 8) or basic_pair(value)


def basic_pair(value: str) -> bool:
    """Base64 of `user:password` (HTTP Basic, a docker `auth`), the password no placeholder."""
    try:
        text = binascii.a2b_base64(value + "=" * (-len(value) % 4), strict_mode=True).decode("ascii")
    except (binascii.Error, ValueError):
        return False
    user, sep, password = text.partition(":")
    return (bool(sep and user and password) and text.isprintable() and not placeholder(password)
            and not any(c in user for c in '{}"'))


def userinfo(value: str) -> bool:
    """`user:password` or a user alone, as a URL writes it before `@`: the password (else the user) no placeholder."""
    user, _, password = value.partition(":")
    part = password or user
    return bool(part.strip("*")) and not _marked(part) and not _marked(value)


def pair(value: str) -> bool:
    """`user:password` as a command line gives it (`curl -u`): a password that is no placeholder."""
    _, sep, password = value.strip("'\"").partition(":")
    return (bool(sep and password) and password.strip("*") != "" and not _marked(password)
            and not _marked(value))


def shape(value: str) -> bool:
    """A token of a provider's format: a valid checksum, or no placeholder (in the token or in its longest
    run of letters and digits) and, where that run seldom switches between letters and digits, no words
    and letters mixed in case like random text."""
    if github_checksum(value):
        return True
    core = max(engine.python(_ALNUM_RUN).findall(value), key=len, default="")
    if _marked(value) or placeholder(core):
        return False
    digits = sum(1 for a, b in pairwise(core) if a.isdigit() != b.isdigit())
    if digits >= 3 or not any(c.islower() for c in core):
        return True
    if wordy(core):
        return False
    cases = sum(1 for a, b in pairwise(core) if a.isupper() != b.isupper())
    return not core.isalpha() or cases * 5 >= len(core)


def github_checksum(value: str) -> bool:
    """GitHub and npm tokens end with the CRC32 of their 30 random characters in 6 base-62 digits."""
    if len(value) != 40 or value[3] != "_":
        return False
    tail = value[-6:]
    if any(c not in _BASE62 for c in tail):
        return False
    number = 0
    for c in tail:
        number = number * 62 + _BASE62.index(c)
    return number == binascii.crc32(value[4:-6].encode("ascii", "replace"))


def password_pair(value: str) -> bool:
    """`user:password` where the password is one a person chose or random-looking."""
    _, _, password = value.partition(":")
    return chosen_password(password, False) or looks_random(password, 12)


def random_text(value: str) -> bool:
    """Random-looking, and more than digits or hexadecimal (which a path carries as revisions and ids)."""
    return looks_random(value) and not value.isdigit() and engine.python(_HEX).fullmatch(value) is None


def word(value: str) -> bool:
    """Anything but a placeholder or a plain word (a query parameter's or a path segment's value)."""
    return len(value) >= 6 and not placeholder(value) and not wordy(value)


CHECKS: dict[str, Callable[[str], bool]] = {
    "shape": shape,
    "random": looks_random,
    "random_text": random_text,
    "data": lambda value: len(value) >= 8 and not _marked(value),
    "basic": basic_pair,
    "userinfo": userinfo,
    "pair": pair,
    "password_pair": password_pair,
    "password": lambda value: chosen_password(value, False),
    "value": word,
    "any": lambda value: True,
}
