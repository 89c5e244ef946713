"""The runnable examples keep working: the walkthrough (real backend process + real server process)."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import REPO


def test_walkthrough_runs_end_to_end() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "walkthrough.py")], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "walkthrough completed" in proc.stdout
    assert "refused CONFIRMATION_REQUIRED" in proc.stdout
    assert '"booking_untouched": true' in proc.stdout
