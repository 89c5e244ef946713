"""Every install path the README's Install section shows, tried from a clean environment.

One wheel is built from the checkout per test session (tests/dist_fixtures.py) and stands in for
the package on PyPI:

- pip: the wheel in a fresh venv; `ito-training-mcp --version`, the server over stdio, and the
  README's `ito-training skill install` lines.
- uvx: the README's `uvx` lines, with the PyPI name replaced by the wheel. uv resolves the wheel's
  declared dependencies for real, offline, from the local wheelhouse of the locked versions, in an
  environment of its own (not this venv, not the checkout).
- the Claude Code plugin: `.claude-plugin/plugin.json`'s server command line, run as written with
  the pinned PyPI requirement replaced by the wheel, answers `tools/list` over stdio.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from ito_training_mcp import __version__
from ito_training_mcp.tools.specs import ALL_TOOLS

from .conftest import REPO
from .dist_fixtures import UVX, clean_env, run
from .doc_shell import comments_of

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PACKAGE = PYPROJECT["project"]["name"]
PLUGIN = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
MARKETPLACE = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
TOOL_NAMES = [spec.name for spec in ALL_TOOLS]
_EXIT = re.compile(r"\bexit (\d+)\b")


def _install_section() -> str:
    readme = (REPO / "README.md").read_text()
    match = re.search(r"^## Install\n(.*?)(?=^## )", readme, re.MULTILINE | re.DOTALL)
    assert match, "README.md has no '## Install' section"
    return match.group(1)


def _commands(section: str, first_word: str) -> list[tuple[list[str], int]]:
    """(argv, expected exit) of every line in the section's fenced blocks that starts with `first_word`."""
    found = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", section, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            if line.split(" ", 1)[0] != first_word:
                continue
            argv = shlex.split(line, comments=True)
            expected = _EXIT.search(" ".join(comments_of(line)))
            found.append((argv, int(expected.group(1)) if expected else 0))
    return found


def _repository() -> str:
    match = re.fullmatch(r"https://github\.com/([^/]+/[^/]+)", PYPROJECT["project"]["urls"]["Repository"])
    assert match
    return match.group(1)


def _run_status(*argv: str | Path, cwd: Path, code: int, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env=env or clean_env())
    assert proc.returncode == code, (argv, proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc.stdout


# ---------------------------------------------------------------------- what the README promises


def test_the_install_section_shows_every_path() -> None:
    section = _install_section()
    server = PLUGIN["mcpServers"]["ito-training"]
    expected = [
        f"uvx {PACKAGE}",
        f"uvx --from {PACKAGE} ito-training",
        f"pip install {PACKAGE}",
        f"/plugin marketplace add {_repository()}",
        f"/plugin install {PLUGIN['name']}@{MARKETPLACE['name']}",
        "ito-training skill install",
        # until the package is on PyPI: the same routes from a wheel built from the checkout
        "python3 -m pip wheel --no-deps -w dist .",
        f"pip install dist/{PACKAGE.replace('-', '_')}-*.whl",
        # the plugin's own command line, quoted as it is in plugin.json
        shlex.join([server["command"], *server["args"]]),
    ]
    for text in expected:
        assert text in section, f"the README's Install section does not show {text!r}"
    assert {p["name"] for p in MARKETPLACE["plugins"]} == {PLUGIN["name"]}
    for script in ("ito-training-mcp", "ito-training"):
        assert script in PYPROJECT["project"]["scripts"]
    assert "uv" in {re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0] for r in PYPROJECT["project"]["optional-dependencies"]["dev"]}


# ---------------------------------------------------------------------- pip


def test_pip_the_installed_commands_run(pip_installed: Path, tmp_path: Path) -> None:
    out = run(pip_installed / "ito-training-mcp", "--version", cwd=tmp_path, env=clean_env())
    assert out.strip() == f"ito-training-mcp {__version__}"
    envelope = json.loads(_run_status(pip_installed / "ito-training", "check", "--json", cwd=tmp_path, code=1))
    assert envelope["error"]["code"] == "TRAINING_UNAVAILABLE" and envelope["live_api_contacted"] is False


def test_pip_without_the_reference_backend_says_how_to_install_it(pip_installed: Path, tmp_path: Path) -> None:
    for command in ("backend", "desk"):
        proc = subprocess.run([str(pip_installed / "ito-training"), command, "--help"], capture_output=True,
                              text=True, timeout=60, cwd=tmp_path, env=clean_env())
        assert proc.returncode == 2 and proc.stdout == ""
        assert "pip install ito-training-reference" in proc.stderr and "pip install ./reference" in proc.stderr


def test_pip_the_readme_skill_install_lines(pip_installed: Path, tmp_path: Path) -> None:
    """Run as shown, with HOME and DIR pointing into a temporary directory."""
    home = tmp_path / "home"
    home.mkdir()
    other = tmp_path / "elsewhere" / "ito-training"
    commands = _commands(_install_section(), "ito-training")
    assert commands, "no `ito-training skill install` line in the Install section"
    env = {**clean_env(), "HOME": str(home), "PATH": f"{pip_installed}{os.pathsep}{os.environ['PATH']}"}
    for argv, code in commands:
        argv = [str(other) if a == "DIR/ito-training" else a for a in argv]
        _run_status(pip_installed / argv[0], *argv[1:], cwd=tmp_path, code=code, env=env)
    expected = {"SKILL.md", *(f"references/{p.name}" for p in (REPO / "skill" / "references").glob("*.md"))}
    for target in (home / ".claude" / "skills" / "ito-training", other):
        assert {str(p.relative_to(target)) for p in target.rglob("*.md")} == expected, target
        assert (target / "SKILL.md").read_bytes() == (REPO / "skill" / "SKILL.md").read_bytes()


# ---------------------------------------------------------------------- uvx


_LOCAL_WHEEL = re.compile(rf"dist/{re.escape(PACKAGE.replace('-', '_'))}-\*\.whl")


def _from_wheel(argv: list[str], wheel: Path) -> list[str]:
    """`uvx PKG ...` -> `uvx --from WHEEL PKG ...`; `uvx --from PKG CMD ...` -> `uvx --from WHEEL CMD ...`;
    `uvx --from dist/PKG-*.whl CMD ...` (the README's route until the package is published) likewise."""
    assert argv[0] == "uvx"
    if argv[1] == "--from":
        assert argv[2] == PACKAGE or argv[2].startswith(f"{PACKAGE}==") or _LOCAL_WHEEL.fullmatch(argv[2]), argv
        return [str(UVX), "--from", str(wheel), *argv[3:]]
    assert argv[1] == PACKAGE, argv
    return [str(UVX), "--from", str(wheel), *argv[1:]]


def test_uvx_the_readme_lines_run_offline_against_the_wheel(
    uv_env: dict[str, str], built_dist: tuple[Path, Path], tmp_path: Path
) -> None:
    commands = _commands(_install_section(), "uvx")
    assert len(commands) >= 4  # from PyPI, and from a wheel built from the checkout until it is published
    for argv, code in commands:
        out = _run_status(*_from_wheel(argv, built_dist[1]), cwd=tmp_path, code=code, env=uv_env)
        if "--version" in argv:
            assert out.strip() == f"ito-training-mcp {__version__}"
        if "--json" in argv:
            envelope = json.loads(out)
            assert envelope["ok"] is (code == 0) and envelope["live_api_contacted"] is False


def test_uvx_runs_the_wheel_in_an_environment_of_its_own(
    uv_env: dict[str, str], built_dist: tuple[Path, Path], tmp_path: Path
) -> None:
    code = "import ito_training_mcp, mcp, sys; print(ito_training_mcp.__file__); print(mcp.__file__); print(sys.prefix)"
    where, mcp_where, prefix = _run_status(UVX, "--from", built_dist[1], "python", "-c", code, cwd=tmp_path, code=0,
                                           env=uv_env).split()
    cache = Path(uv_env["UV_CACHE_DIR"])
    for path in (where, mcp_where, prefix):
        assert Path(path).is_relative_to(cache), path  # neither the checkout nor this venv
    target = tmp_path / "skills" / "ito-training"
    out = _run_status(UVX, "--from", built_dist[1], "ito-training", "skill", "install", "--dir", target, "--json",
                      cwd=tmp_path, code=0, env=uv_env)
    assert json.loads(out)["data"]["source"] == "package"


# ---------------------------------------------------------------------- the Claude Code plugin


def _plugin_params(wheel: Path, tmp_path: Path, uv_env: dict[str, str]) -> StdioServerParameters:
    """plugin.json's command line as written, the pinned PyPI requirement swapped for the wheel.

    `uvx` is found on PATH, as Claude Code would find it: a directory holding only a link to the
    dev environment's uvx comes first.
    """
    server = PLUGIN["mcpServers"]["ito-training"]
    pinned = f"{PACKAGE}=={__version__}"
    assert server["args"].count(pinned) == 1, server["args"]
    args = [str(wheel) if a == pinned else a for a in server["args"]]
    path_dir = tmp_path / "path"
    path_dir.mkdir()
    (path_dir / server["command"]).symlink_to(UVX)
    env = {**uv_env, **server.get("env", {}), "PATH": f"{path_dir}{os.pathsep}{os.environ['PATH']}"}
    cwd = tmp_path / "project"
    cwd.mkdir()
    return StdioServerParameters(command=server["command"], args=args, env=env, cwd=str(cwd))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_plugin_command_line_serves_every_tool(
    uv_env: dict[str, str], built_dist: tuple[Path, Path], tmp_path: Path, mode: str
) -> None:
    params = _plugin_params(built_dist[1], tmp_path, uv_env)
    async with Client(stdio_client(params), mode=mode) as client:
        assert [t.name for t in (await client.list_tools()).tools] == TOOL_NAMES
        assert [p.name for p in (await client.list_prompts()).prompts] == ["ito-training"]
        result = await client.call_tool("check_training_availability", {})
    assert result.is_error and result.structured_content is not None
    assert result.structured_content["error"]["code"] == "TRAINING_UNAVAILABLE"


def test_the_wheel_lists_every_subpackage() -> None:
    """setuptools ships only the packages pyproject names: a new subpackage left out would be missing from
    the wheel that pip, uvx and the plugin install."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(REPO).parts)
               for init in (REPO / "ito_training_mcp").rglob("__init__.py")}
    assert on_disk <= listed, sorted(on_disk - listed)
