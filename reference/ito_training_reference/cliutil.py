"""Shared by `ito-training backend` and `ito-training desk`: a parser that never echoes argv,
the operator token file (read with owner and mode checks), and text made safe for a terminal.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import unicodedata
from collections.abc import Sequence
from typing import NoReturn

from ito_training_mcp.doors.cli.usage import UsageError, from_leftovers
from ito_training_mcp.scanner import INVISIBLE

MIN_TOKEN_CHARS = 16
MAX_TOKEN_FILE_BYTES = 4096
_ARGUMENT_RE = re.compile(r"^argument ([A-Za-z0-9_/ -]{1,80}): ")
_REQUIRED_PREFIX = "the following arguments are required: "


class QuietParser(argparse.ArgumentParser):
    """argparse quotes offending values in its errors ("invalid int value: 'x'", "unrecognized
    arguments: ..."); a mistyped flag may be followed by a secret. This keeps the argument's name
    (from our own definitions) and drops the rest."""

    def error(self, message: str) -> NoReturn:
        help_hint = f"see '{self.prog} --help'"
        match = _ARGUMENT_RE.match(message)
        if match:
            name = match.group(1).split("/")[-1]
            if name.isupper():  # a sub-command choice such as COMMAND: the value typed is not shown
                raise UsageError(f"{self.prog}: unknown or missing {name.lower()}; {help_hint}.", argument=name.lower())
            raise UsageError(f"{self.prog}: {name}: missing or malformed value; {help_hint}.", argument=name)
        if message.startswith(_REQUIRED_PREFIX):
            names = message[len(_REQUIRED_PREFIX):]
            if re.fullmatch(r"[A-Za-z0-9_/, -]{1,200}", names):
                first = names.split(",")[0].split("/")[-1].strip()
                raise UsageError(f"{self.prog}: missing {names}; {help_hint}.", argument=first)
        if message.startswith("unrecognized arguments"):  # only when parse_args below was bypassed
            raise UsageError(f"{self.prog}: unrecognized arguments (not shown); {help_hint}.")
        raise UsageError(f"{self.prog}: missing, unknown or malformed arguments; {help_hint}.")

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """As argparse's, but what could not be placed is worded by the main CLI's rules
        (`cli_usage.from_leftovers`): an unknown option is named when it looks like an option name
        and holds no credential shape (with a "did you mean" among the flags of the sub-command that
        was given); a stray value is never shown."""
        parsed, leftovers = self.parse_known_args(args, namespace)
        if leftovers:
            owner = self._owner(parsed)
            flags = sorted(s for s in owner._option_string_actions if s.startswith("--"))
            found = from_leftovers(owner.prog, leftovers, flags)
            raise UsageError(found.message, argument=found.argument)
        return parsed

    def _owner(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The deepest sub-command parser `parsed` went through."""
        parser: argparse.ArgumentParser = self
        while True:
            chosen = None
            for action in parser._actions:
                if isinstance(action, argparse._SubParsersAction):
                    name = getattr(parsed, str(action.dest), None)
                    chosen = action.choices.get(name) if isinstance(name, str) else None
            if chosen is None:
                return parser
            parser = chosen


class TokenFileError(Exception):
    pass


def read_operator_token(path: str) -> str:
    """Read the token file: a regular file (not a symlink), owned by you, mode 0600 or stricter."""
    flags = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | flags)
    except OSError as exc:
        raise TokenFileError(f"cannot open the operator token file ({exc.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # checked on the descriptor before anything reads it
        os.close(fd)
        raise TokenFileError("the operator token file is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise TokenFileError("the operator token file must be owned by you and mode 0600")
        content = handle.read(MAX_TOKEN_FILE_BYTES + 1)
    token = content.decode("utf-8", "replace").strip()
    if len(content) > MAX_TOKEN_FILE_BYTES or len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise TokenFileError(f"the operator token file must hold one token of at least {MIN_TOKEN_CHARS} characters")
    return token


def invisible(char: str) -> bool:
    """Characters a reader cannot see or that reorder/erase text: controls, format characters
    (bidi overrides and isolates, zero-width ones), separators other than a plain space,
    surrogates, private-use and unassigned code points, and every character that draws as nothing
    (the product's `invisible` class: Hangul fillers, variation selectors, braille blank ...)."""
    if char == " ":
        return False
    return unicodedata.category(char) in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"} or ord(char) in INVISIBLE


def terminal_safe(text: str, limit: int = 2000) -> str:
    """Printable as is on a terminal: every invisible character as a `\\u....` escape."""
    out = []
    for char in text[:limit]:
        out.append(f"\\u{ord(char):04x}" if invisible(char) else char)
    return "".join(out) + ("..." if len(text) > limit else "")
