"""The package's layers hold (`.importlinter`, run by `make lint`), and the check really catches a breach:
an upward import or an import circle added to a copy of the package makes `lint-imports` fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{REPO / 'reference'}"}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(REPO / ".importlinter"), "--no-cache"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_layers_hold() -> None:
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize(("module", "line"), [
    ("envelope.py", "from ito_training_mcp.doors.cli import main as _upward\n"),  # the bottom imports a door
    ("egress/redact.py", "from ito_training_mcp.egress import clean as _circle\n"),  # clean imports redact
])
def test_a_breach_is_caught(tmp_path: Path, module: str, line: str) -> None:
    shutil.copytree(REPO / "ito_training_mcp", tmp_path / "ito_training_mcp",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "ito_training_mcp" / module
    target.write_text(target.read_text() + line)
    result = _lint(tmp_path)
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout[-3000:]
