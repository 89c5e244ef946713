"""Reading the repository's Markdown the way a reader does: files, headings, links, code blocks,
and the shell commands in them with what the text says they do.

A shell *unit* is one command as a reader would type it: physical lines joined across backslash
continuations, quotes left open, and compound statements (`case ... esac`, `if ... fi`, loops).
What the docs promise about a unit is read from its comments:

- `# exit N` (or a following `echo "exit $?"  # N`): the exit status; 0 when nothing is said;
- an upper-case error code in that comment (`# exit 5: MANIFEST_SYMLINK`): the envelope's code;
- a following comment line `# prints: TEXT`: TEXT appears on standard output.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHELL_LANGUAGES = {"sh", "bash", "shell", "console"}
_OPENERS = {"case", "if", "for", "while", "until"}
_CLOSERS = {"esac", "fi", "done"}
_EXIT = re.compile(r"\bexit (\d+)\b")
_FIRST_INT = re.compile(r"\b(\d+)\b")
_CODE_WORD = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b[A-Z]{4,}\b")


def markdown_files() -> list[Path]:
    """Every Markdown file of the repository: tracked, or new and not ignored."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked sdist)
        skip = {".venv", "node_modules", ".inspector", ".conformance", ".wheelhouse", "build", "dist", ".git"}
        return sorted(p for p in REPO.rglob("*.md") if not skip & set(p.relative_to(REPO).parts))
    return sorted({REPO / name for name in listed if (REPO / name).is_file()})


@dataclass(frozen=True)
class Fence:
    language: str
    start: int  # 1-based line number of the first content line
    lines: tuple[str, ...]
    after: str  # the prose between this block and the next one


def fences(text: str) -> list[Fence]:
    """Fenced code blocks (```), with their language and the prose that follows each."""
    found: list[tuple[str, int, list[str], int]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opening = re.match(r"^(\s*)```([\w+-]*)", lines[i])
        if not opening:
            i += 1
            continue
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            body.append(lines[j][len(opening.group(1)):])
            j += 1
        found.append((opening.group(2).lower(), i + 2, body, j))
        i = j + 1
    result = []
    for n, (language, start, body, end) in enumerate(found):
        next_start = found[n + 1][1] - 2 if n + 1 < len(found) else len(lines)
        result.append(Fence(language, start, tuple(body), "\n".join(lines[end + 1:next_start])))
    return result


def prose(text: str) -> str:
    """The text outside fenced blocks and inline code spans (where links are links)."""
    return re.sub(r"`[^`\n]*`", "", prose_with_code(text))


def inline_code(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", prose_with_code(text))


def prose_with_code(text: str) -> str:
    """The text outside fenced blocks (each fence line and each line inside one left empty)."""
    out, inside = [], False
    for line in text.split("\n"):
        if re.match(r"^\s*```", line):
            inside = not inside
            out.append("")
            continue
        out.append("" if inside else line)
    return "\n".join(out)


# ---------------------------------------------------------------------- headings and anchors


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lower case, punctuation removed, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links keep their text
    text = text.replace("`", "").strip().lower()
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch in " -_" or category[0] in "LN" or category == "Mn":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for line in prose_with_code(text).split("\n"):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = _slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    result.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', text))
    return result


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every inline Markdown link and image outside code."""
    found = []
    for number, line in enumerate(prose(text).split("\n"), start=1):
        for match in re.finditer(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", line):
            found.append((number, match.group(1)))
    return found


# ---------------------------------------------------------------------- shell units


@dataclass
class Unit:
    file: Path
    line: int
    text: str
    comments: list[str] = field(default_factory=list)
    expected_exit: int | None = None
    prints: list[str] = field(default_factory=list)

    @property
    def words(self) -> list[str]:
        text = self.text.replace("\\\n", " ")  # line continuations
        try:
            return shlex.split(text, comments=True)
        except ValueError:
            return text.split()

    @property
    def exit_code(self) -> int:
        return 0 if self.expected_exit is None else self.expected_exit

    def codes(self, known: set[str]) -> list[str]:
        return [w for c in self.comments for w in _CODE_WORD.findall(c) if w in known]

    def assignment(self) -> tuple[str, str] | None:
        """(name, value) when the unit is a plain `NAME=value` or `export NAME=value`."""
        words = self.words
        if len(words) == 2 and words[0] == "export":
            words = words[1:]
        if len(words) == 1 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.DOTALL):
            name, _, value = words[0].partition("=")
            return name, value
        return None


def comments_of(text: str) -> list[str]:
    """Shell comments in `text`: a '#' outside quotes at the start of a word, to the end of its line."""
    found, quote, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif quote == '"':
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = ""
        elif ch == "\\":
            i += 1
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t\n"):
            end = text.find("\n", i)
            end = len(text) if end == -1 else end
            found.append(text[i + 1:end].strip())
            i = end
            continue
        i += 1
    return found


def _complete(text: str) -> bool:
    if text.endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    depth = 0
    for line in text.split("\n"):
        words = line.split()
        if words and words[0] in _OPENERS:
            depth += 1
        if words and words[0].rstrip(";") in _CLOSERS:
            depth -= 1
    return depth <= 0


def shell_units(path: Path, fence: Fence) -> list[Unit]:
    units: list[Unit] = []
    buffer: list[str] = []
    start = fence.start
    for offset, line in enumerate(fence.lines):
        stripped = line.strip()
        if not buffer:
            if not stripped:
                continue
            if stripped.startswith("#"):
                note = stripped[1:].strip()
                if units and note.startswith("prints:"):
                    units[-1].prints.append(note.removeprefix("prints:").strip())
                continue
            start = fence.start + offset
        buffer.append(line)
        text = "\n".join(buffer)
        if not _complete(text):
            continue
        buffer = []
        unit = Unit(path, start, text, comments_of(text))
        if units and re.match(r'^echo\s+"exit \$\?"', text.strip()):  # annotates the command before it
            number = _FIRST_INT.search(" ".join(unit.comments))
            if number:
                units[-1].expected_exit = int(number.group(1))
                units[-1].comments.extend(unit.comments)
            continue
        exit_said = _EXIT.search(" ".join(unit.comments))
        if exit_said:
            unit.expected_exit = int(exit_said.group(1))
        units.append(unit)
    assert not buffer, f"{path}:{start}: an unfinished shell command"
    return units


def ellipsis_match(documented: object, actual: object, where: str = "") -> list[str]:
    """Differences between a documented JSON value and the real one. A documented string holding '…'
    matches when its pieces appear in order; a documented object lists a subset of the keys."""
    problems: list[str] = []
    if isinstance(documented, dict):
        if not isinstance(actual, dict):
            return [f"{where}: documented an object, got {type(actual).__name__}"]
        for key, value in documented.items():
            if key not in actual:
                problems.append(f"{where}/{key}: documented but absent")
            else:
                problems.extend(ellipsis_match(value, actual[key], f"{where}/{key}"))
    elif isinstance(documented, str) and "…" in documented:
        if not isinstance(actual, str):
            return [f"{where}: documented a string, got {actual!r}"]
        position = 0
        for piece in (p.strip() for p in documented.split("…")):
            found = actual.find(piece, position)
            if found < 0:
                problems.append(f"{where}: {piece!r} not found in order in {actual!r}")
                break
            position = found + len(piece)
    elif documented != actual:
        problems.append(f"{where}: documented {documented!r}, got {actual!r}")
    return problems
