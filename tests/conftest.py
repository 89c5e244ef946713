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

from ito_training_mcp.doors.mcp.server import build_server
from ito_training_mcp.service import TrainingService

# every envelope a test produces matches its tool's outputSchema; one built wheel per session
pytest_plugins = ["tests.envelope_schema_guard", "tests.dist_fixtures"]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_MANIFEST = REPO / "examples" / "manifest.json"

# Canaries: if one of these ever appears in any captured output, a secret leaked.
CANARY_TOKEN = "itocanary_TOKEN_7f3b9c1e5a2d4f6b8e0c"
CANARY_GITHUB = "ghp_" + "C4n4ry7f3b9c1e5a2d4fQ6b8e0cW9xk2L5mZ"
CANARY_AWS = "AKIA" + "C4N4RY7F3B9C1E5Q"


def assert_manifest_refused(env: Any, code: str, *absent: str) -> None:
    """A gate-2 refusal: the code, nothing contacted, a valid UTF-8 envelope, none of `absent` echoed."""
    assert env.ok is False, env.to_json()
    assert env.data is None
    assert env.error is not None
    assert env.error.code.value == code, env.to_json()
    assert env.error.gate is not None
    assert env.error.gate.value == "manifest"
    assert env.live_api_contacted is False
    wire = env.to_json()
    assert json.loads(wire)["error"]["code"] == code
    wire.encode("utf-8")
    for text in absent:
        assert text not in env.error.message
        assert text not in wire


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


# ---------------------------------------------------------------------- the reference backend


@pytest.fixture
def backend() -> Iterator[Any]:
    """A fresh reference backend on loopback (real HTTP, real SQLite), stopped after the test."""
    from ito_training_reference import ReferenceBackend

    with ReferenceBackend() as running:
        yield running


class World:
    """One tenant on the reference backend: account, token, a completed booking, and an env for the server."""

    def __init__(self, backend: Any, *, timeout_s: float = 2.0) -> None:
        self.backend = backend
        self.op = backend.op
        self.account = self.op.account()
        self.token_id, self.token = self.op.token(self.account)
        self.booking = self.op.booking(self.account, nodes=2, gpus_per_node=8, fabric="infiniband")["booking_id"]
        self.env = {
            "ITO_API_URL": backend.url,
            "ITO_API_KEY": self.token,
            "ITO_TRAINING_TIMEOUT_S": str(timeout_s),
            "ITO_TRAINING_CONNECT_TIMEOUT_S": "1",
            "ITO_TRAINING_POLL_INTERVAL_S": "0.05",
            "ITO_TRAINING_CAPABILITIES_TTL_S": "0",
        }

    def service(self, **env: str) -> TrainingService:
        return TrainingService({**self.env, **env})

    def confirm(self, sha256: str, *, action: str = "training.create", max_cost: str = "1500.00",
                booking: str | None = None, run_id: str | None = None, account: str | None = None,
                expires_in_s: float = 600) -> str:
        c = self.op.confirmation(account or self.account, action, booking or self.booking, max_cost,
                                 manifest_sha256=sha256, run_id=run_id, expires_in_s=expires_in_s)
        return str(c["ref"])

    def backend_requests(self) -> list[dict[str, Any]]:
        """The API requests the backend received, without the origin proofs (plain http asks one per call
        before the token is sent; tests/test_origin_proof.py follows them)."""
        return [r for r in self.op.requests() if r["path"].startswith("/v1/") and r["path"] != "/v1/origin-proof"]


@pytest.fixture
def world(backend: Any) -> World:
    return World(backend)
