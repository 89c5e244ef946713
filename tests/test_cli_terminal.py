"""The CLI as a real process at a real terminal: `| head`, Ctrl-C and the progress bar.

- A reader that goes away (`ito-training ... | head -c 0`) never gets a traceback on stderr, for
  every verb, including `status --wait`, `desk ...`, `skill ...` and `backend --help`.
- Ctrl-C ends every verb that talks to a backend with one envelope and exit 1 (the backend here is a
  socket that accepts and never answers, so each process is provably inside its request).
- On a terminal (a pty), `status --wait` draws one line that shows what the core reports (the run's
  state and stages), never wider than the terminal, and no control character but CR/LF reaches it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from ito_training_mcp.doors.cli.render import ProgressBar, display_width

from .conftest import World

ENTRY = [sys.executable, "-c", "from ito_training_mcp.doors.cli.main import main; raise SystemExit(main())"]
KEY = "terminal-test-key-0001"


def clean_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("ITO_")}, **extra}


def sha_of(path: str) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def operator_token_file(world: World, tmp_path: Path) -> str:
    path = tmp_path / "operator-token"
    path.write_text(world.backend.operator_token + "\n")
    path.chmod(0o600)
    return str(path)


@pytest.fixture
def finished_run(world: World, manifest_path: str) -> str:
    """A run on the reference backend that has finished (so `status --wait` answers at once)."""
    import anyio

    ref = world.confirm(sha_of(manifest_path))
    envelope = anyio.run(lambda: world.service().submit_training(world.booking, manifest_path, ref, KEY))
    assert envelope.ok, envelope
    run_id = str((envelope.data or {})["run_id"])
    world.op.finish(run_id)
    return run_id


# ---------------------------------------------------------------------------- | head


def _every_verb(world: World, manifest: str, run_id: str, token_file: str) -> list[list[str]]:
    return [
        ["check"], ["check", "--booking", world.booking, "--json"], ["digest", "--manifest", manifest],
        ["train", "--booking", world.booking, "--manifest", manifest, "--confirmation-ref", "cf-x",
         "--idempotency-key", KEY],
        ["status", "--run", run_id], ["status", "--run", run_id, "--wait", "30"],
        ["logs", "--run", run_id], ["metrics", "--run", run_id], ["checkpoints", "--run", run_id],
        ["cancel", "--run", run_id, "--confirmation-ref", "cf-x", "--idempotency-key", "cancel-" + KEY],
        ["cleanup", "--run", run_id, "--confirmation-ref", "cf-x", "--idempotency-key", "cleanup-" + KEY],
        ["plan", "--booking", world.booking, "--manifest", manifest],
        ["request-confirmation", "--action", "cleanup", "--run", run_id],
        ["confirmation", "--request", "creq-none", "--wait", "5"],
        ["train", "--json"], ["--help"],
        ["desk", "--json", "requests", "--operator-token-file", token_file], ["desk", "--help"],
        ["skill", "install", "--help"], ["backend", "--help"],
    ]


def test_a_reader_that_went_away_never_gets_a_traceback(world: World, manifest_path: str, finished_run: str,
                                                          operator_token_file: str) -> None:
    env = clean_env(**world.env, ITO_DESK_URL=world.backend.url)
    processes = []
    for argv in _every_verb(world, manifest_path, finished_run, operator_token_file):
        read_end, write_end = os.pipe()
        os.close(read_end)  # `| head -c 0`: gone before anything is written
        process = subprocess.Popen([*ENTRY, *argv], stdout=write_end, stderr=subprocess.PIPE, env=env)
        os.close(write_end)
        processes.append((argv, process))
    for argv, process in processes:
        _, stderr = process.communicate(timeout=120)
        text = stderr.decode()
        assert "Traceback" not in text and "BrokenPipe" not in text and "Exception ignored" not in text, (argv, text)
        assert process.returncode in (0, 1, 2), (argv, process.returncode)


# ---------------------------------------------------------------------------- Ctrl-C


@pytest.fixture
def silent_backend() -> Iterator[socket.socket]:
    """A loopback listener that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(60)
    try:
        yield listener
    finally:
        listener.close()


BACKEND_VERBS = [
    ["check"], ["check", "--booking", "bk-1"],
    ["train", "--booking", "bk-1", "--manifest", "MANIFEST", "--confirmation-ref", "cf-1", "--idempotency-key", KEY],
    ["status", "--run", "run-1"], ["status", "--idempotency-key", KEY, "--wait", "30"], ["logs", "--run", "run-1"],
    ["metrics", "--run", "run-1"], ["checkpoints", "--run", "run-1"],
    ["cancel", "--run", "run-1", "--confirmation-ref", "cf-1", "--idempotency-key", "cancel-" + KEY],
    ["cleanup", "--run", "run-1", "--confirmation-ref", "cf-1", "--idempotency-key", "cleanup-" + KEY],
    ["plan", "--booking", "bk-1", "--manifest", "MANIFEST"], ["request-confirmation", "--action", "cancel", "--run",
                                                              "run-1"],
    ["confirmation", "--request", "creq-1", "--wait", "30"],
]


# Every verb with --json; the human rendering of an interrupt is one path, tried with a read and a mutation.
@pytest.mark.parametrize(("as_json", "verbs"), [(True, BACKEND_VERBS), (False, [BACKEND_VERBS[3], BACKEND_VERBS[2]])],
                         ids=["json", "human"])
def test_ctrl_c_ends_every_backend_verb_with_an_envelope(silent_backend: socket.socket, manifest_path: str,
                                                         as_json: bool, verbs: list[list[str]]) -> None:
    port = silent_backend.getsockname()[1]
    env = clean_env(ITO_API_URL=f"http://127.0.0.1:{port}", ITO_API_KEY="itotest_" + "k" * 24,
                    ITO_TRAINING_TIMEOUT_S="120", ITO_TRAINING_CONNECT_TIMEOUT_S="60")
    started = []
    held = []
    try:
        for argv in verbs:
            argv = [manifest_path if a == "MANIFEST" else a for a in argv] + (["--json"] if as_json else [])
            process = subprocess.Popen([*ENTRY, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       env=env)
            started.append((argv, process))
        for _ in started:  # one connection each (none can open a second: the first never ends): all are inside
            held.append(silent_backend.accept()[0])  # their first request
        for _, process in started:
            process.send_signal(signal.SIGINT)
        for argv, process in started:
            stdout, stderr = process.communicate(timeout=60)
            assert process.returncode == 1, (argv, stdout, stderr)
            assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, (argv, stderr)
            if as_json:
                envelope = json.loads(stdout)
                assert envelope["ok"] is False and envelope["error"]["details"]["interrupted"] is True, argv
                assert envelope["error"]["code"] in ("BACKEND_TIMEOUT", "SUBMISSION_OUTCOME_UNKNOWN")
            else:
                assert stdout.startswith("REFUSED ") and "interrupted" in stdout, (argv, stdout)
    finally:
        for connection in held:
            connection.close()
        for _, process in started:
            if process.poll() is None:
                process.kill()


def test_ctrl_c_ends_a_desk_command_cleanly(silent_backend: socket.socket, operator_token_file: str) -> None:
    port = silent_backend.getsockname()[1]
    process = subprocess.Popen([*ENTRY, "desk", "--json", "requests", "--url", f"http://127.0.0.1:{port}",
                                "--operator-token-file", operator_token_file], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=clean_env())
    connection = silent_backend.accept()[0]
    try:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        connection.close()
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    document = json.loads(stdout)
    assert document["ok"] is False and document["error"]["code"] == "interrupted"
    assert "may have taken effect" in document["error"]["message"]


# ---------------------------------------------------------------------------- the progress bar on a pty

CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def _read_until(fd: int, seen: bytearray, needle: bytes, timeout_s: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while needle not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"never saw {needle!r} in {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the slave side closed
                return
            if not chunk:
                return
            seen += chunk


def _drain(fd: int, seen: bytearray) -> None:
    while True:
        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            return
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        seen += chunk


@pytest.mark.parametrize("columns", [40, 120])
def test_status_wait_on_a_terminal_draws_the_cores_progress_within_the_width(
    world: World, manifest_path: str, columns: int
) -> None:
    import anyio

    ref = world.confirm(sha_of(manifest_path))
    submitted = anyio.run(lambda: world.service().submit_training(world.booking, manifest_path, ref, KEY))
    run_id = str((submitted.data or {})["run_id"])
    world.op.advance(run_id)  # running, in its first stage

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = clean_env(**{**world.env, "ITO_TRAINING_TIMEOUT_S": "10"})
    process = subprocess.Popen([*ENTRY, "status", "--run", run_id, "--wait", "60"], stdout=subprocess.PIPE,
                               stderr=slave, env=env)
    os.close(slave)
    seen = bytearray()
    try:
        _read_until(master, seen, b"\r")  # the first line drawn
        world.op.finish(run_id)
        stdout, _ = process.communicate(timeout=60)
        _drain(master, seen)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    assert process.returncode == 0, stdout
    text = seen.decode("utf-8")
    assert CONTROL.search(text.replace("\r", "").replace("\n", "")) is None, repr(text)
    drawn = [part for line in text.split("\n") for part in line.split("\r") if part.strip()]
    assert drawn, repr(text)
    for part in drawn:
        assert display_width(part) <= columns - 1, (columns, part)
    if columns >= 80:
        assert any(part.startswith("[") and "running" in part for part in drawn), drawn
    else:  # no room for a bar nor for the subject (the run the person named): where it is, cut to the width
        assert any(part.startswith("running") for part in drawn), drawn
    assert not any(re.search(r"\]\s+\d+s\b", part) for part in drawn), drawn  # position, not seconds
    assert b"Run " + run_id.encode() + b": succeeded" in stdout


class FakeTerminal(StringIO):
    def __init__(self, columns: int) -> None:
        super().__init__()
        self.width = columns

    def isatty(self) -> bool:
        return True


class Bar(ProgressBar):
    def columns(self) -> int:
        return int(getattr(self.terminal, "width", 80))


@pytest.mark.parametrize("message", [
    "run r1: running, stage \x1b[2J\x1b]0;pwned\x07sft (1/3 gates passed)",
    "run r1: \u202eevil\u202c, stage 訓練訓練訓練訓練訓練訓練訓練訓練訓練訓練訓練訓練訓練訓練訓練 (2/3)",
    "x" * 500,
    "request creq_1: pending\r\nFAKE: confirmed",
])
@pytest.mark.parametrize("columns", [10, 33, 80])
async def test_the_bar_escapes_and_fits_whatever_the_message(message: str, columns: int) -> None:
    terminal = FakeTerminal(columns)
    bar = Bar(terminal)
    values: list[tuple[float, float | None]] = [(0.0, 3.0), (1.5, 3.0), (3.0, 3.0), (0.0, None)]
    for value, total in values:
        await bar(value, total, message)
    bar.finish()
    out = terminal.getvalue()
    assert out.endswith("\n") and out.count("\n") == 1
    assert CONTROL.search(out.replace("\r", "").replace("\n", "")) is None, repr(out)
    for part in out.rstrip("\n").split("\r")[1:]:
        assert display_width(part) <= columns - 1, (columns, part)
    assert "\x1b" not in out and "\u202e" not in out


async def test_the_bar_shows_the_position_it_is_given() -> None:
    terminal = FakeTerminal(80)
    bar = Bar(terminal)
    await bar(1.5, 3.0, "run r1: running, stage sft (1/3 gates passed)")
    first: Any = terminal.getvalue()
    assert first.startswith("\r[##########..........] run r1: running, stage sft (1/3 gates passed)")
    await bar(3.0, 3.0, "done")
    done = "[####################] done"
    assert terminal.getvalue().endswith("\r" + done + " " * (len(first) - 1 - len(done)))  # the longer line erased
