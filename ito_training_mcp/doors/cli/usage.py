"""Usage errors of `ito-training`: name the flag at fault, never a value that was typed.

argparse's own messages quote what was typed ("invalid int value: 'x'", "unrecognized arguments:
--token ghp_..."), and a mistyped flag may be followed by a secret. So the parsers here never let
argparse word an error: they raise `argparse.ArgumentError` (`exit_on_error=False`), whose
`argument_name` comes from our own definitions, and `usage_error` words it from that name alone.
Unknown options are read from what `parse_known_args` left over: an unknown option's name is shown
only when it looks like an option name (`--lower-case-words`, at most 32 characters, at most three
digits) and holds no credential shape; a value -- anything after `=`, any token that is not an
option -- is never shown.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
from collections.abc import Sequence
from typing import NoReturn

from ito_training_mcp.backend.credentials import api_key_in_memory
from ito_training_mcp.scanner import text_kinds

_OPTION_NAME = re.compile(r"--[a-z][a-z0-9]*(?:-[a-z0-9]+)*|-[A-Za-z]")
_MAX_SHOWN = 32
_MAX_DIGITS = 3
_REQUIRED_PREFIX = "the following arguments are required: "
_INTEGER_FLAGS = {
    "--wait": "must be a whole number of seconds",
    "--limit": "must be a whole number of lines",
}


class UsageError(Exception):
    """`message` names the flag or command at fault, never a value; `argument` is that flag."""

    def __init__(self, message: str, *, argument: str = "argv", reason: str = "malformed") -> None:
        super().__init__(message)
        self.message = message
        self.argument = argument
        self.reason = reason


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of exiting, with nothing typed in its errors.

    `error` is still called by argparse for a missing required option; its message is built from
    our own option names, and only names we defined are picked out of it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("exit_on_error", False)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        if message.startswith(_REQUIRED_PREFIX):
            wanted = [s.strip() for s in message[len(_REQUIRED_PREFIX):].split(",")]
            known = set(self._option_string_actions)
            missing = [name for name in wanted if name in known]
            typo = _typo_of(getattr(self, "_argv", ()), missing)
            if typo is not None:  # `--bookin X`: the unknown option is the missing one, mistyped
                raise UsageError(f"{self.prog}: unknown option {typo[0]} (did you mean {typo[1]}?); see "
                                 f"'{self.prog} --help'.", argument=typo[0], reason="unknown")
            if missing:
                raise missing_flags(self.prog, missing)
        raise UsageError(f"{self.prog}: missing or malformed arguments; see '{self.prog} --help'.")

    def known_flags(self) -> list[str]:
        return sorted(s for s in self._option_string_actions if s.startswith("--"))

    def commands(self) -> list[str]:
        return [name for action in self._actions if isinstance(action, argparse._SubParsersAction)
                for name in action.choices]

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """As argparse's, but an ArgumentError becomes a UsageError worded here, by the parser that
        owns the argument (so a sub-command's error names that sub-command)."""
        self._argv = list(args or ())
        try:
            return super().parse_known_args(args, namespace)
        except argparse.ArgumentError as exc:
            action = self._option_string_actions.get((exc.argument_name or "").split("/")[-1])
            choices = [str(c) for c in action.choices] if action is not None and action.choices else None
            typed = next((a for a in self._argv if not a.startswith("-")), "")
            raise from_argument_error(self.prog, exc, self.commands(), choices, typed) from None

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, leftovers = self.parse_known_args(args, namespace)
        if leftovers:
            raise from_leftovers(self.prog, leftovers, self.known_flags())
        return parsed


def _typo_of(argv: Sequence[str], missing: Sequence[str]) -> tuple[str, str] | None:
    """(an unknown option that may be shown, the missing flag it is closest to), if one is a typo of one."""
    for token in argv:
        name = shown_option_name(token) if token.startswith("--") else None
        if name is not None and name not in missing:
            close = difflib.get_close_matches(name, list(missing), n=1, cutoff=0.75)
            if close:
                return name, close[0]
    return None


def missing_flags(prog: str, missing: Sequence[str]) -> UsageError:
    if len(missing) == 1:
        said = f"{missing[0]} is required"
    else:
        said = f"{', '.join(missing[:-1])} and {missing[-1]} are required"
    return UsageError(f"{prog}: {said}; see '{prog} --help'.", argument=missing[0], reason="missing")


def from_argument_error(
    prog: str, error: argparse.ArgumentError, commands: Sequence[str], choices: Sequence[str] | None = None,
    typed: str = "",
) -> UsageError:
    """Word an argparse ArgumentError from the argument's own name; its message (which may quote
    the value) is only classified, never shown. `typed`: the command word given, used only to suggest one
    of ours."""
    name = (error.argument_name or "").split("/")[-1]
    said = error.message
    hint = f"see '{prog} --help'"
    if name == "COMMAND" or not name.startswith("-"):
        close = difflib.get_close_matches(typed.lower(), list(commands), n=1, cutoff=0.6) if typed else []
        maybe = f"did you mean '{prog} {close[0]}'? " if close else ""
        return UsageError(f"{prog}: unknown command (not shown); {maybe}the commands are: {', '.join(commands)}.",
                          argument="command", reason="unknown")
    if said.startswith("expected one argument"):
        return UsageError(f"{prog}: {name} needs a value ({name} VALUE; a value that starts with '-' is given as "
                          f"{name}=VALUE).", argument=name, reason="missing_value")
    if said.startswith("ignored explicit argument"):
        return UsageError(f"{prog}: {name} takes no value; {hint}.", argument=name, reason="unexpected_value")
    if said.startswith("invalid choice"):
        allowed = " or ".join(choices) if choices else "one of the documented choices"
        return UsageError(f"{prog}: {name} must be {allowed}.", argument=name)
    if name in _INTEGER_FLAGS:
        return UsageError(f"{prog}: {name} {_INTEGER_FLAGS[name]}.", argument=name)
    return UsageError(f"{prog}: {name} has a malformed value; {hint}.", argument=name)


def shown_option_name(token: str) -> str | None:
    """The name of an unknown option as it may be shown, or None when it must not be shown."""
    name = token.split("=", 1)[0]
    if len(name) > _MAX_SHOWN or not _OPTION_NAME.fullmatch(name):
        return None
    if sum(c.isdigit() for c in name) > _MAX_DIGITS:
        return None

    configured = api_key_in_memory(os.environ)
    if text_kinds(name) or text_kinds(name.lstrip("-")) or (configured is not None and configured in name):
        return None
    return name


def from_leftovers(prog: str, leftovers: Sequence[str], known: Sequence[str]) -> UsageError:
    """What `parse_known_args` could not place: an unknown option (named when it may be), else a
    stray value (never shown)."""
    options = [t for t in leftovers if t.startswith("-") and t not in ("-", "--")]
    if options:
        name = shown_option_name(options[0])
        if name is None:
            return UsageError(f"{prog}: unknown option (not shown); see '{prog} --help'.",
                              argument="option", reason="unknown")
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        maybe = f" (did you mean {close[0]}?)" if close else ""
        return UsageError(f"{prog}: unknown option {name}{maybe}; see '{prog} --help'.", argument=name,
                          reason="unknown")
    return UsageError(f"{prog}: unexpected argument (not shown): each value follows its flag (--flag VALUE); "
                      f"see '{prog} --help'.", argument="argv", reason="unexpected")
