"""Session fixtures for the install paths: one wheel per test session, a pip venv, and uvx offline.

- `built_dist`: the sdist built from the checkout and the wheel built from that sdist (`python -m
  build`), once per session, into a directory outside the checkout.
- `pip_installed`: the wheel in a fresh venv outside the checkout. Its dependencies are borrowed,
  read-only, from this (locked) environment through a .pth line, which keeps it fast and offline;
  `pip check` confirms the wheel's declared requirements are met.
- `uv_env`: the environment under which `uvx` resolves the wheel's dependencies for real, offline:
  only from the local wheelhouse `make wheelhouse` fills with the locked versions (`.wheelhouse/`),
  constrained to the lock, with a cache of its own and this interpreter (no Python download).

The wheelhouse is filled once per lock by `make wheelhouse` (a dependency of `make test`), the way
the Inspector is: its absence is a failure, not a skip, unless ITO_SKIP_UVX=1 is set explicitly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
WHEELHOUSE = REPO / ".wheelhouse"
BIN = Path(sys.executable).parent
UVX = BIN / "uvx"
# Read at import: the autouse clean_env fixture removes every ITO_* variable before a test body runs.
SKIP_UVX = os.environ.get("ITO_SKIP_UVX") == "1"


def run(*argv: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 300) -> str:
    """Run a command that must succeed; its output on failure, never a hang."""
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    assert proc.returncode == 0, (argv, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


def clean_env() -> dict[str, str]:
    """This process's environment without ITO_*, PYTHON*, UV_* settings or an active venv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ITO_", "PYTHON", "UV_"))}
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.fixture(scope="session")
def built_dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(sdist, wheel), built from the checkout into a directory outside it, once per session."""
    dist = tmp_path_factory.mktemp("dist")
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, REPO, cwd=dist)
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    return sdist, wheel


@pytest.fixture(scope="session")
def pip_installed(built_dist: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv (outside the checkout) with the wheel installed by pip; returns its bin/ directory."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet", "--no-deps",
        "--disable-pip-version-check", "--no-index", built_dist[1])
    site = Path(run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
                .strip())
    # Dependencies: this environment's site-packages, appended after the venv's own (so the wheel wins).
    (site / "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "check", "--disable-pip-version-check")
    yield venv / "bin"


def _require_wheelhouse() -> None:
    if SKIP_UVX:
        pytest.skip("ITO_SKIP_UVX=1: the uvx install paths are not tried")
    assert UVX.exists(), "uvx missing from the dev environment: run `make install` (uv is a dev dependency)"
    if not (WHEELHOUSE / ".stamp").exists():
        pytest.fail("the local wheelhouse is missing: run `make wheelhouse` (make test does it) or set ITO_SKIP_UVX=1")


@pytest.fixture(scope="session")
def uv_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for `uvx`: no index, no network, the wheelhouse only, the lock as constraints."""
    _require_wheelhouse()
    home = tmp_path_factory.mktemp("uv")
    config = home / "uv.toml"
    config.write_text(
        "# Written by tests/dist_fixtures.py: resolve from the local wheelhouse only, never the network.\n"
        "no-index = true\n"
        "offline = true\n"
        f"find-links = [{str(WHEELHOUSE)!r}]\n"
        'python-downloads = "never"\n'
    )
    (home / "home").mkdir()
    return {
        **clean_env(),
        "UV_CONFIG_FILE": str(config),
        "UV_CACHE_DIR": str(home / "cache"),
        "UV_CONSTRAINT": str(REPO / "constraints.txt"),
        "UV_PYTHON": sys.executable,
        "HOME": str(home / "home"),
    }
