"""`ito-training skill install`: write the agent skill where harnesses load SKILL.md from disk.

    ito-training skill install [--dir DIR] [--force] [--json]

The default directory is ~/.claude/skills/ito-training/ (Claude Code's personal skills). `--dir`
names the skill's own directory, and its last component must be `ito-training`, the skill's name:
harnesses load a skill from a directory named after it, and pointing --dir at a skills root would
drop SKILL.md beside the other skills. Any other name is a usage error that suggests
`DIR/ito-training` (nothing is appended silently). The files come from the skill this package
ships (SKILL.md and references/*.md). An existing file with the same bytes is left alone; a
different one is replaced only with --force. Nothing is written unless every file can be: the
whole plan is checked first.

Everything printed, human or --json, passes the egress (`egress/clean.py`): the directory shown has its
control and bidi characters made visible and anything shaped like a credential redacted.

Written safely: the skill directory, references/ and every file are opened relative to their
parent without following symlinks (a symlink there is refused, --force or not), new directories
are 0755 and files 0644 whatever the umask, and each file is written to a fresh temporary name
in the same directory and renamed into place, so a reader never sees half a file.

Exit codes as for the other commands: 0 done, 1 refused, 2 usage error. Usage errors never
echo what was typed.
"""

from __future__ import annotations

import argparse
import errno
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ito_training_mcp.doors.cli.render import render_json
from ito_training_mcp.doors.cli.usage import Parser, UsageError
from ito_training_mcp.egress.clean import clean_line
from ito_training_mcp.envelope import Envelope, ErrorCode, ErrorInfo, Gate, success
from ito_training_mcp.skill_data import SKILL_NAME, Skill, load_skill

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2
DIR_MODE = 0o755
FILE_MODE = 0o644
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def default_dir() -> Path:
    return Path.home() / ".claude" / "skills" / SKILL_NAME


class Refused(Exception):
    def __init__(self, problem: str, message: str, files: list[str] | None = None) -> None:
        super().__init__(message)
        self.problem = problem
        self.message = message
        self.files = files or []


@dataclass(frozen=True)
class Planned:
    relative: str  # "SKILL.md" or "references/x.md"
    content: bytes
    status: str  # "written" (new), "unchanged", "replaced"


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ito-training skill", description="Install the ito-training agent skill.",
                     allow_abbrev=False)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=Parser)
    install = sub.add_parser("install", allow_abbrev=False,
                             help="Write SKILL.md and references/ for harnesses that load skills from disk.",
                             description="Write SKILL.md and references/ for harnesses that load skills from disk.")
    install.add_argument("--dir", metavar="DIR",
                         help=f"the skill's own directory, named {SKILL_NAME} (default ~/.claude/skills/{SKILL_NAME}); "
                              f"for a skills root R give R/{SKILL_NAME}")
    install.add_argument("--force", action="store_true", help="replace files that differ from this version")
    install.add_argument("--json", action="store_true", help="print the result envelope as JSON")
    return parser


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _same_content(name: str, dir_fd: int, content: bytes) -> bool:
    """Whether the regular file `name` holds exactly `content`; reads at most one byte more than that."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        chunks: list[bytes] = []
        remaining = len(content) + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks) == content
    finally:
        os.close(fd)


def _open_dir(name: str, dir_fd: int, *, create: bool, relative: str) -> int | None:
    """Open a directory below `dir_fd` without following a symlink; None if it does not exist yet."""
    info = _lstat(name, dir_fd)
    if info is None:
        if not create:
            return None
        os.mkdir(name, DIR_MODE, dir_fd=dir_fd)
        fd = os.open(name, _OPEN_DIR, dir_fd=dir_fd)
        os.fchmod(fd, DIR_MODE)
        return fd
    if not stat.S_ISDIR(info.st_mode):
        raise Refused("unsafe_target", "The skill directory or references/ exists but is not a plain directory "
                                       "(a symlink, a file or something else); nothing was written.", [relative])
    return os.open(name, _OPEN_DIR, dir_fd=dir_fd)


def _plan(skill: Skill, skill_fd: int | None, refs_fd: int | None, force: bool) -> list[Planned]:
    planned: list[Planned] = []
    different: list[str] = []
    for relative in skill.names():
        content = skill.read_bytes(relative)
        in_refs = relative.startswith("references/")
        parent_fd = refs_fd if in_refs else skill_fd
        name = relative.rsplit("/", 1)[-1]
        info = None if parent_fd is None else _lstat(name, parent_fd)
        if info is None:
            planned.append(Planned(relative, content, "written"))
            continue
        if not stat.S_ISREG(info.st_mode):
            raise Refused("unsafe_target", "A file of the skill exists as a symlink or as something other than a "
                                           "regular file; nothing was written.", [relative])
        assert parent_fd is not None
        if _same_content(name, parent_fd, content):
            planned.append(Planned(relative, content, "unchanged"))
        else:
            different.append(relative)
            planned.append(Planned(relative, content, "replaced"))
    if different and not force:
        raise Refused("exists_different", "Files of the skill already exist with different content; nothing was "
                                          "written. Pass --force to replace them with this version.", different)
    return planned


def _write(name: str, content: bytes, dir_fd: int) -> None:
    temporary = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE,
                 dir_fd=dir_fd)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temporary, dir_fd=dir_fd)
        raise
    os.close(fd)
    os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def install(target: Path, *, force: bool) -> tuple[Skill, list[Planned]]:
    """Install the skill into `target`; raises `Refused` (nothing written) or `OSError`."""
    skill = load_skill()
    target = Path(os.path.abspath(target))
    parent = target.parent
    if not parent.exists():
        for missing in reversed([parent, *parent.parents]):
            if not missing.exists():
                os.mkdir(missing, DIR_MODE)
                fd = os.open(missing, _OPEN_DIR)
                os.fchmod(fd, DIR_MODE)
                os.close(fd)
    parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fds: list[int] = [parent_fd]
    try:
        skill_fd = _open_dir(target.name, parent_fd, create=False, relative=".")
        refs_fd = None if skill_fd is None else _open_dir("references", skill_fd, create=False,
                                                            relative="references")
        fds += [fd for fd in (skill_fd, refs_fd) if fd is not None]
        planned = _plan(skill, skill_fd, refs_fd, force)
        if skill_fd is None:
            skill_fd = _open_dir(target.name, parent_fd, create=True, relative=".")
            assert skill_fd is not None
            fds.append(skill_fd)
        if refs_fd is None and any(p.relative.startswith("references/") for p in planned):
            refs_fd = _open_dir("references", skill_fd, create=True, relative="references")
            assert refs_fd is not None
            fds.append(refs_fd)
        for item in planned:
            if item.status == "unchanged":
                continue
            in_refs = item.relative.startswith("references/")
            dir_fd = refs_fd if in_refs else skill_fd
            assert dir_fd is not None
            _write(item.relative.rsplit("/", 1)[-1], item.content, dir_fd)
        return skill, planned
    finally:
        for fd in fds:
            os.close(fd)


def _refused_envelope(problem: str, message: str, files: list[str], notice: str) -> Envelope:
    details: dict[str, object] = {"argument": "--dir", "problem": problem}
    if files:
        details["files"] = files
    return Envelope(ok=False, live_api_contacted=False, notice=notice,
                    error=ErrorInfo(code=ErrorCode.INVALID_INPUT, message=message, retryable=False, gate=Gate.INPUT,
                                    details=details))


def _target(directory: str | None) -> Path:
    """The skill directory: the default, or --dir, whose last component must be the skill's name."""
    if directory is None:
        return default_dir()
    target = Path(directory).expanduser()
    if target.name != SKILL_NAME:
        raise UsageError(
            f"ito-training skill install: --dir must name the skill's own directory, whose last component is "
            f"'{SKILL_NAME}' (harnesses load a skill from a directory named after it); for a skills directory "
            f"DIR, give --dir DIR/{SKILL_NAME}.", argument="--dir", reason="name")
    return target


def run(argv: Sequence[str], *, stdout: TextIO, stderr: TextIO) -> int:
    def say(line: str, to: TextIO = stdout) -> None:
        print(clean_line(line), file=to)

    want_json = "--json" in argv
    try:
        args = _parser().parse_args([a for a in argv if a != "--json"] + (["--json"] if want_json else []))
        if args.action is None:
            raise UsageError("ito-training skill: an action is required; see 'ito-training skill --help'.",
                             argument="action")
        target = _target(args.dir)
    except UsageError as exc:
        if want_json:
            envelope = Envelope(
                ok=False, live_api_contacted=False,
                notice="The command line is malformed, so nothing was written. Correct the flag named in the "
                       "message; 'ito-training skill install --help' lists the flags.",
                error=ErrorInfo(code=ErrorCode.INVALID_INPUT, message=exc.message, retryable=False, gate=Gate.INPUT,
                                details={"argument": exc.argument, "problem": "usage", "reason": exc.reason}))
            print(render_json(envelope), file=stdout)
        else:
            say(exc.message, stderr)
        return EXIT_USAGE

    try:
        skill, planned = install(target, force=args.force)
    except Refused as exc:
        envelope = _refused_envelope(exc.problem, exc.message, exc.files, (
            "The files listed differ from this version of the skill; nothing was written. Pass --force to replace "
            "them with this version, or choose another --dir." if exc.problem == "exists_different" else
            "The skill directory, references/ or one of the files is a symlink or not a plain directory or regular "
            "file; nothing was written. Choose another --dir."
        ))
    except OSError as exc:
        reason = errno.errorcode.get(exc.errno or 0, "OSError")
        envelope = _refused_envelope("os_error", f"The skill could not be written ({reason}).", [],
                                     "Fix the directory's permissions, or choose another --dir.")
    else:
        counts = {status: sum(1 for p in planned if p.status == status) for status in ("written", "replaced",
                                                                                        "unchanged")}
        envelope = success(
            {"dir": str(Path(os.path.abspath(target))), "source": skill.origin,
             "files": [{"path": p.relative, "status": p.status} for p in planned], **counts},
            notice="The ito-training skill is installed; harnesses that load skills from this directory pick it "
                   "up in their next session. It needs the ito-training MCP server connected to be useful.",
            live_api_contacted=False,
        )
    if args.json:
        print(render_json(envelope), file=stdout)
    elif envelope.error is not None:
        say(f"REFUSED {envelope.error.code.value}: {envelope.error.message}")
        for name in (envelope.error.details or {}).get("files", []):
            say(f"  {name}")
        say(f"Next: {envelope.notice}")
    else:
        data = envelope.data or {}
        say(f"Installed the ito-training skill in {data['dir']}: {data['written']} written, "
            f"{data['replaced']} replaced, {data['unchanged']} unchanged.")
    return EXIT_OK if envelope.ok else EXIT_REFUSED
