"""Shared fixtures: a clean environment, real manifest files, canaries, and MCP clients."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from ito_training_mcp.mcp_server import build_server
from ito_training_mcp.service import TrainingService

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_MANIFEST = REPO / "examples" / "manifest.json"

# Canaries: if one of these ever appears in any captured output, a secret leaked.
CANARY_TOKEN = "itocanary_TOKEN_7f3b9c1e5a2d4f6b8e0c"
CANARY_GITHUB = "ghp_" + "C4n4ryC4n4ryC4n4ryC4n4ryC4n4ryC4n4ry"
CANARY_AWS = "AKIA" + "CANARY7EXAMPLE77"


def _strip_ito_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("ITO_"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test inherits a backend URL or a credential from the machine it runs on."""
    _strip_ito_env(monkeypatch)
    yield


@pytest.fixture
def example_bytes() -> bytes:
    return EXAMPLE_MANIFEST.read_bytes()


@pytest.fixture
def example_document(example_bytes: bytes) -> dict[str, Any]:
    return json.loads(example_bytes)


@pytest.fixture
def safe_dir(tmp_path: Path) -> Path:
    """A directory only the current user can write, under pytest's private tmp tree."""
    d = tmp_path / "manifests"
    d.mkdir(mode=0o700)
    return d


WriteFile = Callable[..., str]


@pytest.fixture
def write_file(safe_dir: Path) -> WriteFile:
    """Write bytes (or a JSON document) to a 0600 file and return its absolute path."""
    counter = iter(range(10_000))

    def write(content: bytes | dict[str, Any] | list[Any] | str, name: str | None = None, mode: int = 0o600) -> str:
        if isinstance(content, dict | list):
            content = json.dumps(content, indent=2).encode()
        elif isinstance(content, str):
            content = content.encode()
        path = safe_dir / (name or f"manifest-{next(counter)}.json")
        path.write_bytes(content)
        os.chmod(path, mode)
        return str(path)

    return write


@pytest.fixture
def manifest_path(write_file: WriteFile, example_bytes: bytes) -> str:
    return write_file(example_bytes)


@pytest.fixture
def service() -> TrainingService:
    return TrainingService({})


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    """Both protocol eras: 2026-07-28 ('auto' in-process) and the 2025-11-25 handshake."""
    return str(request.param)


ClientFactory = Callable[..., Client]


@pytest.fixture
def connect(mode: str) -> ClientFactory:
    """`async with connect() as client:` -- an in-process client in this test's protocol era.

    A factory rather than an async-yield fixture: the client's task group must be entered and
    left in the test's own task.
    """

    def factory(env: dict[str, str] | None = None, service: TrainingService | None = None) -> Client:
        return Client(build_server(service or TrainingService(env or {})), mode=mode)

    return factory


def server_command() -> list[str]:
    return [sys.executable, "-m", "ito_training_mcp"]
