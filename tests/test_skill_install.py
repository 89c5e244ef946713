"""`ito-training skill install`: the shipped skill, written safely, never over a different file by surprise."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ito_training_mcp.doors.cli import main as cli

from .conftest import CANARY_GITHUB, CANARY_TOKEN, REPO

SKILL = REPO / "skill"
FILES = ["SKILL.md", *sorted(f"references/{p.name}" for p in (SKILL / "references").glob("*.md"))]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def install_json(*argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run("skill", "install", "--json", *argv)
    return code, json.loads(out)


@pytest.fixture
def strict_umask() -> Iterator[None]:
    previous = os.umask(0o077)
    yield
    os.umask(previous)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_installs_the_shipped_skill_with_fixed_modes(tmp_path: Path, strict_umask: None) -> None:
    target = tmp_path / "a" / "b" / "ito-training"
    code, envelope = install_json("--dir", str(target))
    assert code == 0, envelope
    assert envelope["ok"] is True and envelope["live_api_contacted"] is False
    data = envelope["data"]
    assert data["dir"] == str(target) and data["source"] == "checkout"
    assert [f["path"] for f in data["files"]] == FILES and data["written"] == len(FILES)
    assert tree(target) == {name: (SKILL / name).read_bytes() for name in FILES}
    for directory in (tmp_path / "a", tmp_path / "a" / "b", target, target / "references"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o755, directory
    for name in FILES:
        assert stat.S_IMODE((target / name).stat().st_mode) == 0o644, name


def test_identical_files_are_fine_and_a_different_one_needs_force(tmp_path: Path) -> None:
    target = tmp_path / "ito-training"
    assert install_json("--dir", str(target))[0] == 0
    code, again = install_json("--dir", str(target))
    assert code == 0 and again["data"]["unchanged"] == len(FILES) and again["data"]["written"] == 0

    edited = target / "references" / Path(FILES[1]).name
    edited.write_text("my local notes\n")
    (target / "SKILL.md").unlink()
    code, refused = install_json("--dir", str(target))
    assert code == 1
    assert refused["error"]["code"] == "INVALID_INPUT"
    assert refused["error"]["details"] == {"argument": "--dir", "problem": "exists_different", "files": [FILES[1]]}
    assert "--force" in refused["notice"]
    assert edited.read_text() == "my local notes\n"
    assert not (target / "SKILL.md").exists()  # nothing at all was written

    code, forced = install_json("--dir", str(target), "--force")
    assert code == 0
    statuses = {f["path"]: f["status"] for f in forced["data"]["files"]}
    assert statuses["SKILL.md"] == "written" and statuses[FILES[1]] == "replaced"
    assert tree(target) == {name: (SKILL / name).read_bytes() for name in FILES}
    assert not [p for p in target.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("where", ["file", "skill_dir", "references"])
def test_symlinks_are_never_followed_even_with_force(tmp_path: Path, where: str) -> None:
    target = tmp_path / "ito-training"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "SKILL.md").write_text("not yours\n")
    if where == "skill_dir":
        target.symlink_to(elsewhere, target_is_directory=True)
    else:
        target.mkdir()
        if where == "file":
            (target / "SKILL.md").symlink_to(elsewhere / "SKILL.md")
        else:
            (target / "references").symlink_to(elsewhere, target_is_directory=True)
    code, refused = install_json("--dir", str(target), "--force")
    assert code == 1
    assert refused["error"]["details"]["problem"] == "unsafe_target"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["SKILL.md"]
    assert (elsewhere / "SKILL.md").read_text() == "not yours\n"


def test_a_file_where_a_directory_belongs_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "ito-training"
    target.mkdir()
    (target / "references").write_text("a file\n")
    code, refused = install_json("--dir", str(target))
    assert code == 1 and refused["error"]["details"]["problem"] == "unsafe_target"


def test_the_default_is_claude_codes_personal_skills(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, _ = run("skill", "install")
    assert code == 0
    target = tmp_path / ".claude" / "skills" / "ito-training"
    assert f"in {target}:" in out and f"{len(FILES)} written" in out
    assert (target / "SKILL.md").read_bytes() == (SKILL / "SKILL.md").read_bytes()


@pytest.mark.parametrize("argv", [
    ["skill"], ["skill", "nope"], ["skill", "install", "--dir"], ["skill", "install", f"--token={CANARY_TOKEN}"],
    ["skill", "install", CANARY_TOKEN], ["skill", "--json", "install", "--bogus", CANARY_TOKEN],
])
def test_usage_errors_never_echo_what_was_typed(argv: list[str]) -> None:
    code, out, err = run(*argv)
    assert code == 2
    assert CANARY_TOKEN not in out + err
    if "--json" in argv:
        assert json.loads(out)["error"]["details"]["problem"] == "usage"
    else:
        assert out == "" and "ito-training skill" in err


def test_skill_after_another_option_is_a_usage_error() -> None:
    code, out, _ = run("--json", "--json", "skill", "install")
    assert code == 2 and json.loads(out)["error"]["code"] == "INVALID_INPUT"


def test_the_installed_command(tmp_path: Path) -> None:
    ito = Path(sys.executable).parent / "ito-training"
    target = tmp_path / "via-command" / "ito-training"
    proc = subprocess.run([str(ito), "--json", "skill", "install", "--dir", str(target)], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["data"]["written"] == len(FILES)
    assert tree(target) == {name: (SKILL / name).read_bytes() for name in FILES}


@pytest.mark.parametrize("name", ["skills", "ito-training-old", "ITO-TRAINING", ".", ".."])
def test_a_dir_not_named_after_the_skill_is_a_usage_error(tmp_path: Path, name: str) -> None:
    """A skills root given as --dir would put SKILL.md beside the other skills (and a harness checks that a
    skill's directory is named after it): refused, with the way to say it, and nothing written."""
    root = tmp_path / "skills"
    root.mkdir()
    target = root / name
    code, out, err = run("skill", "install", "--dir", str(target))
    assert code == 2 and out == ""
    assert "--dir must name the skill's own directory" in err and "--dir DIR/ito-training" in err
    assert str(target) not in err  # a usage error never repeats what was typed
    code, envelope = install_json("--dir", str(target))
    assert code == 2 and envelope["error"]["details"] == {"argument": "--dir", "problem": "usage", "reason": "name"}
    assert list(root.iterdir()) == [] and not (tmp_path / "SKILL.md").exists()
    code, envelope = install_json("--dir", str(root / "ito-training"))  # the suggestion works
    assert code == 0 and (root / "ito-training" / "SKILL.md").is_file()
    assert "ito-training/" in (REPO / "README.md").read_text()


def test_a_trailing_slash_is_the_same_directory(tmp_path: Path) -> None:
    code, envelope = install_json("--dir", f"{tmp_path}/ito-training/")
    assert code == 0 and envelope["data"]["dir"] == str(tmp_path / "ito-training")


HOSTILE = "bad\x1b[2J\r\u202eevil"


@pytest.mark.parametrize("json_output", [False, True], ids=["human", "json"])
def test_what_is_printed_passes_the_egress(tmp_path: Path, json_output: bool) -> None:
    """A directory name holding ESC, CR and U+202E is shown with them visibly escaped; one holding a token
    is shown redacted -- in the human form and in the JSON. The files go where asked either way."""
    flag = ["--json"] if json_output else []
    target = tmp_path / HOSTILE / "ito-training"
    code, out, err = run("skill", "install", "--dir", str(target), *flag)
    assert code == 0, out + err
    assert (target / "SKILL.md").is_file()
    for raw in ("\x1b", "\r", "\u202e"):
        assert raw not in out + err
    assert "⟨U+001B⟩" in out and "⟨U+000D⟩" in out and "⟨U+202E⟩" in out

    target = tmp_path / CANARY_GITHUB / "ito-training"
    code, out, err = run("skill", "install", "--dir", str(target), *flag)
    assert code == 0 and (target / "SKILL.md").is_file()
    assert CANARY_GITHUB not in out + err and "<redacted" in out
    if json_output:
        assert json.loads(out)["ok"] is True


def test_a_refusal_is_worded_for_the_person_and_cleaned(tmp_path: Path) -> None:
    target = tmp_path / HOSTILE / "ito-training"
    assert install_json("--dir", str(target))[0] == 0
    (target / "SKILL.md").write_text("mine\n")
    code, out, _ = run("skill", "install", "--dir", str(target))
    assert code == 1 and "\x1b" not in out
    assert "Pass --force to replace them" in out and "the user" not in out and "error.details" not in out
    code, refused = install_json("--dir", str(target))
    assert "the user" not in refused["notice"] and "--force" in refused["notice"]
