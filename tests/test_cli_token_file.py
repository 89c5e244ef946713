"""A token file that cannot be used says what is wrong with it and the one fix -- not "set ITO_API_KEY".

The path may be shown (it is configuration); the file's content never is, whatever its mode.
"""

from __future__ import annotations

import json
import os
from io import StringIO
from pathlib import Path

import pytest

from ito_training_mcp.doors.cli.main import run

from .conftest import World


def check(world: World, token_file: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[int, str]:
    for name, value in world.env.items():
        if name != "ITO_API_KEY":
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("ITO_TOKEN_FILE", str(token_file))
    out = StringIO()
    code = run(["check", "--booking", world.booking, *extra], stdout=out, stderr=StringIO())
    return code, out.getvalue() if "--json" in extra else " ".join(out.getvalue().split())  # notices are wrapped


@pytest.fixture
def token_file(world: World, tmp_path: Path) -> Path:
    home = tmp_path / "private"
    home.mkdir(mode=0o700)
    path = home / "ito token"  # a space: the printed chmod command quotes it
    path.write_text(world.token + "\n")
    return path


@pytest.mark.parametrize(("mode", "said"), [
    (0o644, "readable by group/other (mode 0644)"),
    (0o640, "readable by group/other (mode 0640)"),
    (0o604, "readable by group/other (mode 0604)"),
    (0o660, "writable by group/other (mode 0660)"),
])
def test_a_loose_mode_names_the_mode_and_the_chmod(world: World, token_file: Path, monkeypatch: pytest.MonkeyPatch,
                                                   mode: int, said: str) -> None:
    token_file.chmod(mode)
    code, human = check(world, token_file, monkeypatch)
    _, as_json = check(world, token_file, monkeypatch, "--json")
    assert code == 1
    fix = f"chmod 600 '{token_file}'"
    assert f"ITO_TOKEN_FILE is {said}; run {fix}" in human
    envelope = json.loads(as_json)
    assert envelope["error"]["code"] == "AUTH_MISSING"
    problem = "file_permissions" if mode & 0o022 else "file_mode_0600"
    assert envelope["error"]["details"] == {"setting": "ITO_TOKEN_FILE", "problem": problem}
    assert fix in envelope["notice"] and "set ITO_API_KEY" not in envelope["notice"]
    assert world.token not in human + as_json


def test_after_the_chmod_it_works(world: World, token_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token_file.chmod(0o644)
    assert check(world, token_file, monkeypatch)[0] == 1
    token_file.chmod(0o600)
    code, out = check(world, token_file, monkeypatch)
    assert code == 0, out
    assert world.token not in out


def test_a_symlink_and_a_missing_file_say_so(world: World, token_file: Path, monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    token_file.chmod(0o600)
    link = tmp_path / "link"
    link.symlink_to(token_file)
    code, out = check(world, link, monkeypatch)
    assert code == 1 and "is, or passes through, a symlink" in out and world.token not in out
    code, out = check(world, tmp_path / "absent", monkeypatch)
    assert code == 1 and f"ITO_TOKEN_FILE names no readable file ({tmp_path / 'absent'})" in out
    assert os.path.exists(token_file)


def test_the_core_refusal_itself(tmp_path: Path) -> None:
    """What every door gets from credentials.py: the mode, the fix and the path; never the content."""
    from ito_training_mcp.backend.credentials import resolve_credential
    from ito_training_mcp.errors import Refusal

    home = tmp_path / "private"
    home.mkdir(mode=0o700)
    path = home / "token"
    path.write_text("itocanary_secret_content_0001\n")
    path.chmod(0o644)
    with pytest.raises(Refusal) as refused:
        resolve_credential({"ITO_TOKEN_FILE": str(path)})
    envelope = refused.value.envelope(live_api_contacted=False).to_json()
    assert refused.value.message == f"ITO_TOKEN_FILE is readable by group/other (mode 0644); run chmod 600 {path}"
    assert refused.value.next_step is not None and f"chmod 600 {path}" in refused.value.next_step
    assert "itocanary_secret_content_0001" not in refused.value.message + refused.value.next_step + envelope
