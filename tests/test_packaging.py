"""Installed the way users install it: the built wheel, in a fresh environment outside the checkout.

The sdist is built from the checkout and the wheel from the sdist (`python -m build`), so both
carry the skill from its one source, skill/. The wheel goes into a new venv in a temporary
directory (the session fixtures of tests/dist_fixtures.py, shared with tests/test_install_paths.py).
The server then runs from yet another directory over stdio, in both protocol eras, and serves the
prompt and every skill resource byte for byte.
"""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import TextContent, TextResourceContents
from packaging.requirements import Requirement
from packaging.version import Version

from ito_training_mcp import __version__
from ito_training_mcp.skill_data import skill_body

from .conftest import REPO
from .dist_fixtures import clean_env, run

SKILL = REPO / "skill"
SKILL_FILES = ["SKILL.md", *sorted(f"references/{p.name}" for p in (SKILL / "references").glob("*.md"))]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_sdist_and_the_wheel_carry_the_skill_and_the_license(built_dist: tuple[Path, Path]) -> None:
    sdist, wheel = built_dist
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"LICENSE", "pyproject.toml", *(f"skill/{f}" for f in SKILL_FILES)} <= names
    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
        for relative in SKILL_FILES:
            assert archive.read(f"ito_training_mcp/skill/{relative}") == (SKILL / relative).read_bytes()
        metadata = archive.read(f"ito_training_mcp-{__version__}.dist-info/METADATA").decode()
    assert f"ito_training_mcp-{__version__}.dist-info/licenses/LICENSE" in members
    assert "License-Expression: Apache-2.0" in metadata
    assert not any(m.startswith(("tests/", "skill/", "examples/", "reference/", "ito_training_reference/"))
                   for m in members)  # the reference backend is a distribution of its own


def test_the_installed_package_reads_its_own_copy(pip_installed: Path, tmp_path: Path) -> None:
    code = ("import ito_training_mcp, ito_training_mcp.skill_data as s; "
            "print(ito_training_mcp.__file__); print(s.load_skill().origin)")
    where, origin = run(pip_installed / "python", "-c", code, cwd=tmp_path, env=clean_env()).split()
    assert Path(where).is_relative_to(pip_installed.parent) and origin == "package"
    target = tmp_path / "skills" / "ito-training"
    out = run(pip_installed / "ito-training", "skill", "install", "--dir", target, "--json", cwd=tmp_path,
               env=clean_env())
    assert json.loads(out)["data"]["source"] == "package"
    assert {str(p.relative_to(target)) for p in target.rglob("*.md")} == set(SKILL_FILES)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_installed_server_serves_the_skill_from_another_directory(
    pip_installed: Path, tmp_path: Path, mode: str
) -> None:
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    params = StdioServerParameters(command=str(pip_installed / "ito-training-mcp"), args=[], cwd=str(elsewhere),
                                   env=clean_env())
    async with Client(stdio_client(params), mode=mode) as client:
        assert [p.name for p in (await client.list_prompts()).prompts] == ["ito-training"]
        prompt = (await client.get_prompt("ito-training")).messages[0].content
        assert isinstance(prompt, TextContent)
        assert prompt.text == skill_body((SKILL / "SKILL.md").read_text())
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        for relative in SKILL_FILES:
            uri = f"ito-training://skill/{relative}"
            assert uri in uris
            content = (await client.read_resource(uri)).contents[0]
            assert isinstance(content, TextResourceContents)
            assert content.text == (SKILL / relative).read_text()
        assert len((await client.list_tools()).tools) >= 9


def test_a_missing_skill_stops_the_server_loudly(pip_installed: Path, tmp_path: Path) -> None:
    """Never an empty prompt list: with the packaged skill gone, the server refuses to start."""
    site = Path(run(pip_installed / "python", "-c", "import ito_training_mcp, os; "
                                               "print(os.path.dirname(ito_training_mcp.__file__))",
                     cwd=tmp_path, env=clean_env()).strip())
    assert site.is_relative_to(pip_installed.parent)
    hidden = site / "skill.hidden"
    (site / "skill").rename(hidden)
    try:
        proc = subprocess.run([str(pip_installed / "ito-training-mcp")], input="", capture_output=True, text=True,
                              timeout=60, cwd=tmp_path, env=clean_env())
    finally:
        hidden.rename(site / "skill")
    assert proc.returncode == 1
    assert "skill" in proc.stderr and "not installed" in proc.stderr
    assert proc.stdout == ""


# ---------------------------------------------------------------------- the build configuration


def test_every_package_directory_is_listed_for_the_build() -> None:
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "ito_training_mcp").rglob("__init__.py")}
    declared = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert declared == found | {"ito_training_mcp.skill", "ito_training_mcp.skill.references"}
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"ito_training_mcp.skill": "skill"}


def test_the_license_is_apache_2_and_says_so_everywhere() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert PYPROJECT["project"]["license"] == "Apache-2.0" and PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert re.search(r"^license: Apache-2.0$", (SKILL / "SKILL.md").read_text(), re.MULTILINE)


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, line
            pins[_normal(name)] = version
    return pins


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_lock_pins_every_dependency_within_the_declared_ranges() -> None:
    from importlib.metadata import version

    pins = _pins()
    extras = PYPROJECT["project"]["optional-dependencies"]
    declared = [*PYPROJECT["project"]["dependencies"], *extras["dev"]]
    for spec in map(Requirement, declared):
        if spec.marker is not None and not spec.marker.evaluate():
            continue  # not for this platform: neither locked nor installed here
        name = _normal(spec.name)
        assert name in pins, f"{name} is not pinned in constraints.txt (run make lock)"
        assert Version(pins[name]) in spec.specifier, (name, pins[name], str(spec.specifier))
        assert version(spec.name) == pins[name], f"{name}: installed {version(spec.name)}, locked {pins[name]}"
    assert not [line for line in PYPROJECT["project"]["dependencies"] if "==" in line], "metadata keeps ranges"


def test_make_install_uses_the_lock() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert "--constraint $(CONSTRAINTS) -e '.[dev]' -e ./reference" in makefile
    assert re.search(r"^\$\(STAMP\): pyproject.toml reference/pyproject.toml \$\(CONSTRAINTS\)$", makefile,
                     re.MULTILINE)
    assert re.search(r"^lock:$", makefile, re.MULTILINE)


# ---------------------------------------------------------------------- MCP Registry and Claude Code plugin

SERVER_JSON = json.loads((REPO / "server.json").read_text())
REGISTRY_NAME = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")
INPUT_FORMATS = {"string", "number", "boolean", "filepath"}
CONTRACT_SETTINGS = {"ITO_API_URL", "ITO_API_KEY", "ITO_TOKEN_FILE", "ITO_TRAINING_MANIFEST_ROOTS",
                     "ITO_TRAINING_MAX_WAIT_S", "ITO_TRAINING_CONNECT_TIMEOUT_S", "ITO_TRAINING_TIMEOUT_S"}


def _repository_owner() -> str:
    match = re.fullmatch(r"https://github\.com/([A-Za-z0-9-]+)/ito-training-mcp", PYPROJECT["project"]["urls"]["Repository"])
    assert match
    return match.group(1)


def test_server_json_has_the_registry_shape_and_this_version() -> None:
    """Facts of the registry's server.json schema (2025-12-11), checked without fetching it."""
    doc = SERVER_JSON
    assert doc["$schema"] == "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    assert set(doc) <= {"$schema", "name", "title", "description", "version", "repository", "websiteUrl", "packages",
                        "remotes", "icons", "_meta"}
    assert REGISTRY_NAME.fullmatch(doc["name"]) and 3 <= len(doc["name"]) <= 200
    assert doc["name"] == f"io.github.{_repository_owner()}/ito-training-mcp"
    assert 1 <= len(doc["description"]) <= 100 and doc["title"]
    assert doc["version"] == __version__ == PYPROJECT["project"]["version"]
    assert doc["repository"] == {"url": PYPROJECT["project"]["urls"]["Repository"], "source": "github"}
    (package,) = doc["packages"]
    assert set(package) <= {"registryType", "registryBaseUrl", "identifier", "version", "fileSha256", "runtimeHint",
                            "transport", "runtimeArguments", "packageArguments", "environmentVariables"}
    assert package["registryType"] == "pypi" and package["identifier"] == PYPROJECT["project"]["name"]
    assert package["version"] == __version__ and package["transport"] == {"type": "stdio"}
    variables = {v["name"]: v for v in package["environmentVariables"]}
    assert CONTRACT_SETTINGS <= set(variables)
    for name, variable in variables.items():
        assert set(variable) <= {"name", "description", "isRequired", "isSecret", "format", "default", "placeholder",
                                 "choices", "value", "variables"}, name
        assert isinstance(variable["description"], str) and variable["description"], name
        assert isinstance(variable["isRequired"], bool) and isinstance(variable["isSecret"], bool), name
        assert variable.get("format", "string") in INPUT_FORMATS, name
        assert isinstance(variable.get("default", ""), str), name
        assert variable["isSecret"] is (name == "ITO_API_KEY"), name
    assert not any(v["isRequired"] for v in variables.values())  # unset means: training unavailable


def test_the_readme_claims_the_registry_name() -> None:
    readme = (REPO / "README.md").read_text()
    markers = re.findall(r"mcp-name: (\S+)", readme)
    assert markers == [SERVER_JSON["name"]]
    assert readme.index("mcp-name:") < 200  # near the top


PLUGIN = json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())
MARKETPLACE = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())


def _plugin_path(relative: str) -> Path:
    assert relative.startswith("./") and ".." not in Path(relative).parts, relative
    return REPO / relative


def test_the_claude_code_plugin_manifest() -> None:
    assert PLUGIN["name"] == "ito-training" and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", PLUGIN["name"])
    assert PLUGIN["version"] == __version__
    assert PLUGIN["license"] == "Apache-2.0"
    assert isinstance(PLUGIN["description"], str) and PLUGIN["description"]
    assert isinstance(PLUGIN["author"]["name"], str)
    assert PLUGIN["repository"] == PYPROJECT["project"]["urls"]["Repository"]
    assert all(isinstance(k, str) for k in PLUGIN["keywords"])
    # the skill is the repository's own skill/, not a copy
    for path in PLUGIN["skills"]:
        skill_dir = _plugin_path(path)
        assert (skill_dir / "SKILL.md").is_file() and skill_dir.resolve() == SKILL.resolve()
    # the server is the published package at this exact version, started with uvx
    server = PLUGIN["mcpServers"]["ito-training"]
    assert server["command"] == "uvx"
    assert server["args"] == ["--from", f"{PYPROJECT['project']['name']}=={__version__}", "ito-training-mcp"]
    assert "ito-training-mcp" in PYPROJECT["project"]["scripts"]
    assert set(server) <= {"command", "args", "env", "cwd"}


def test_the_repository_is_a_marketplace_of_that_plugin() -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", MARKETPLACE["name"])
    assert isinstance(MARKETPLACE["owner"]["name"], str) and MARKETPLACE["owner"]["name"]
    (entry,) = MARKETPLACE["plugins"]
    assert entry["name"] == PLUGIN["name"] and entry["version"] == __version__
    assert entry["source"] == "./" and (_plugin_path(entry["source"]) / ".claude-plugin" / "plugin.json").is_file()
    assert isinstance(entry["description"], str) and entry["description"]


def test_version_strings_agree() -> None:
    assert __version__ == PYPROJECT["project"]["version"]
    skill_meta = re.search(r'^  version: "([^"]+)"$', (SKILL / "SKILL.md").read_text(), re.MULTILINE)
    assert skill_meta and skill_meta.group(1) == __version__
