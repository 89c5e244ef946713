"""The agent skill as this package ships it: SKILL.md and references/*.md, from one source.

The source is the top-level `skill/` directory of the repository. The build maps it into the
package (`ito_training_mcp/skill/` in the wheel, see pyproject.toml), so an installed server reads
it with `importlib.resources`, wherever it runs from. A development checkout installed in editable
mode has no copy inside the package; there, and only there, the checkout's `skill/` is read.

A missing skill is an error, never an empty prompt list: `load_skill()` raises `SkillMissing`.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path

PACKAGE = "ito_training_mcp"
SKILL_NAME = "ito-training"
SKILL_FILE = "SKILL.md"
REFERENCES = "references"


class SkillMissing(RuntimeError):
    """The skill is not where this installation must have it."""


@dataclass(frozen=True)
class Skill:
    """The skill's files, by path relative to the skill directory (`SKILL.md`, `references/x.md`)."""

    root: Traversable
    origin: str  # "package" (installed with the wheel) or "checkout" (a development tree)

    def names(self) -> list[str]:
        references = self.root / REFERENCES
        listed = sorted(entry.name for entry in references.iterdir()
                        if entry.name.endswith(".md") and entry.is_file()) if references.is_dir() else []
        return [SKILL_FILE, *(f"{REFERENCES}/{name}" for name in listed)]

    def read(self, relative: str) -> str:
        return self.read_bytes(relative).decode("utf-8")

    def read_bytes(self, relative: str) -> bytes:
        if relative not in self.names():
            raise KeyError(relative)
        node = self.root
        for part in relative.split("/"):
            node = node / part
        return node.read_bytes()


def _packaged() -> Traversable | None:
    root = importlib.resources.files(PACKAGE) / "skill"
    return root if (root / SKILL_FILE).is_file() else None


def _checkout() -> Path | None:
    """The repository's skill/, only when this module runs from a source tree of this project."""
    package_dir = Path(__file__).resolve().parent
    tree = package_dir.parent
    pyproject = tree / "pyproject.toml"
    try:
        ours = 'name = "ito-training-mcp"' in pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    root = tree / "skill"
    return root if ours and (root / SKILL_FILE).is_file() else None


def load_skill() -> Skill:
    packaged = _packaged()
    if packaged is not None:
        return Skill(packaged, "package")
    checkout = _checkout()
    if checkout is not None:
        return Skill(checkout, "checkout")
    raise SkillMissing(
        "The ito-training skill (SKILL.md and references/) is not installed with this package. Reinstall "
        "ito-training-mcp from a complete wheel or source distribution."
    )


def skill_file(relative: str = SKILL_FILE) -> str:
    """One file of the skill, e.g. `SKILL.md` or `references/recovery-playbook.md`."""
    return load_skill().read(relative)


def skill_body(text: str) -> str:
    """SKILL.md without its YAML frontmatter: what an agent should read as instructions."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            return text[end + 5:].lstrip("\n")
    return text
