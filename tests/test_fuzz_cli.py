"""Property tests of the CLI door: whatever argv holds, `ito-training ... --json` prints exactly one
envelope, exits 0/1/2 consistently with it, and never prints a token it was handed.

No backend is configured (every ITO_* variable is removed), so nothing can leave the process:
commands that pass gate 0 stop at TRAINING_UNAVAILABLE, and `digest` reads only local files.
`-h`/`--help` and a leading `backend` are excluded: they intentionally exit or start a server.

Runs are derandomised. The tests at the bottom pin the bugs this fuzzing found (all fixed).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ito_training_mcp.doors.cli.main import run
from ito_training_mcp.envelope import CONTRACT_CODES

from .conftest import EXAMPLE_MANIFEST

# A GitHub-token-shaped canary: "ghp_" + 36 alphanumerics.
CANARY = "ghp_" + "Fz9qK2mT7vL4xR8nB3cW6yH1jD5gS0pA2eUo"
assert len(CANARY) == 40 and CANARY[4:].isalnum()

SUBCOMMANDS = ["check", "digest", "plan", "request-confirmation", "confirmation", "train", "status", "logs", "metrics",
               "checkpoints", "cancel", "cleanup"]
VALUE_FLAGS = ["--booking", "--manifest", "--run", "--cursor", "--limit", "--wait", "--confirmation-ref",
               "--idempotency-key", "--request", "--action"]
FLAGS = ["--json", *VALUE_FLAGS]
ENVELOPE_KEYS = {"ok", "live_api_contacted", "notice"}
ERROR_KEYS = {"code", "message", "retryable", "gate", "details"}
_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much]


@pytest.fixture(autouse=True)
def no_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ITO_* setting at all: no backend, no credential, no manifest roots."""
    for name in list(os.environ):
        if name.startswith("ITO_"):
            monkeypatch.delenv(name, raising=False)
    yield


# ---------------------------------------------------------------------------- strategies

# NUL-free text (argv cannot hold NUL); `surrogate_escaped` adds what Linux hands Python for argv
# bytes that are not UTF-8 (os.fsdecode's surrogateescape range).
_TEXT = st.characters(codec="utf-8", exclude_characters="\x00")
surrogate_escaped = st.lists(st.integers(0xDC80, 0xDCFF).map(chr), min_size=1, max_size=3).map("".join)
canary_values = st.one_of(
    st.just(CANARY),
    st.tuples(st.text(_TEXT, max_size=8), st.text(_TEXT, max_size=8)).map(lambda p: p[0] + CANARY + p[1]),
    st.sampled_from([f"Bearer {CANARY}", f"token={CANARY}", f"/tmp/{CANARY}", f"https://x:{CANARY}@h/"]),
)
values = st.one_of(
    st.text(_TEXT, max_size=24),
    st.text(_TEXT, min_size=200, max_size=3000),
    st.text(_TEXT, max_size=12).map(lambda s: "-" + s),
    st.text(_TEXT, max_size=12).map(lambda s: "--" + s),
    st.tuples(st.text(_TEXT, max_size=8), surrogate_escaped).map("".join),
    st.sampled_from([
        "", " ", "-", "--", "=", "-1", "0", "5", "600", "601", "1000", "1001", "\u0663", "1" * 5000, "1e3", " 7 ",
        "bk-1", "run-1", "conf-1", "k" * 16, "k" * 15, "k" * 256, "...", "a/b", "/", "/tmp", "/tmp/m.json",
        "/proc/self/environ", "/dev/null", "/etc/hostname", "relative/path.json", "/tmp/../etc", "c-2=",
    ]),
    canary_values,
)


@st.composite
def tokens(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["subcommand", "flag", "joined", "value", "value"]))
    if kind == "subcommand":
        return draw(st.sampled_from(SUBCOMMANDS))
    if kind == "flag":
        return draw(st.sampled_from(FLAGS))
    if kind == "joined":
        return f"{draw(st.sampled_from(FLAGS))}={draw(values)}"
    return str(draw(values))


@st.composite
def structured_argvs(draw: st.DrawFn) -> list[str]:
    """A subcommand and flag/value pairs: close to real use, so the gates behind parsing are reached."""
    argv = [draw(st.sampled_from(SUBCOMMANDS))]
    for _ in range(draw(st.integers(0, 5))):
        flag, value = draw(st.sampled_from(VALUE_FLAGS)), draw(values)
        argv += [f"{flag}={value}"] if draw(st.booleans()) else [flag, value]
    return argv


# Where a strategy draws this, the test puts the path of a real, valid manifest (0600 in a 0700 dir).
REAL_MANIFEST = "<real manifest>"
REQUIRED: dict[str, list[str]] = {
    "check": [], "digest": ["--manifest"], "plan": ["--booking", "--manifest"],
    "request-confirmation": ["--action", "--run"], "confirmation": ["--request"],
    "train": ["--booking", "--manifest", "--confirmation-ref", "--idempotency-key"],
    "status": [], "logs": ["--run"], "metrics": ["--run"], "checkpoints": ["--run"],
    "cancel": ["--run", "--confirmation-ref", "--idempotency-key"],
    "cleanup": ["--run", "--confirmation-ref", "--idempotency-key"],
}
OPTIONAL: dict[str, list[str]] = {
    "check": ["--booking"], "status": ["--run", "--idempotency-key", "--wait"], "logs": ["--cursor", "--limit"],
    "confirmation": ["--wait"],
}
PLAUSIBLE: dict[str, list[str]] = {
    "--booking": ["bk-1", "bk_2026.11:a"], "--manifest": [REAL_MANIFEST, REAL_MANIFEST, "/tmp/none.json", "/"],
    "--run": ["run-1"], "--cursor": ["c-2", ""], "--limit": ["50", "0"], "--wait": ["0", "5", "601"],
    "--confirmation-ref": ["conf-1", ""], "--idempotency-key": ["k" * 16, "short"],
    "--request": ["creq-1", ""], "--action": ["cancel", "cleanup", "training.cancel"],
}


@st.composite
def commands(draw: st.DrawFn) -> list[str]:
    """One subcommand with (mostly) its own flags, each plausible or fuzzed: the gates behind parsing."""
    name = draw(st.sampled_from(SUBCOMMANDS))
    flags = [f for f in REQUIRED[name] if draw(st.sampled_from([True] * 9 + [False]))]
    flags += [f for f in OPTIONAL.get(name, []) if draw(st.booleans())]
    argv = [name]
    for flag in draw(st.permutations(flags)):
        value = draw(st.sampled_from(PLAUSIBLE[flag])) if draw(st.sampled_from([True, True, False])) else draw(values)
        argv += [f"{flag}={value}"] if draw(st.booleans()) else [flag, value]
    return argv


path_components = st.one_of(
    st.sampled_from(["tmp", "etc", "proc", "dev", "root", "usr", "..", ".", "", "manifest.json", "hostname", REAL_MANIFEST]),
    st.text(_TEXT.filter(lambda c: c != "/"), min_size=1, max_size=12),
    canary_values.filter(lambda v: "/" not in v),
    surrogate_escaped,
)
absolute_paths = st.lists(path_components, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))
digest_commands = st.tuples(st.one_of(absolute_paths, values), st.booleans()).map(
    lambda p: ["digest", f"--manifest={p[0]}"] if p[1] else ["digest", "--manifest", p[0]]
)

free_argvs = st.lists(tokens(), max_size=8)
argvs = st.one_of(
    *(commands() for _ in range(4)),  # distinct copies: four shares of the examples
    digest_commands,
    structured_argvs(),
    free_argvs,
    st.tuples(st.sampled_from(SUBCOMMANDS), free_argvs).map(lambda p: [p[0], *p[1]]),
    st.tuples(st.just("--json"), structured_argvs()).map(lambda p: [p[0], *p[1]]),
)


def _triggers_help_or_server(argv: list[str]) -> bool:
    """`-h`/`--help` print help and exit; a leading `backend` starts the reference backend."""
    if argv[:1] == ["backend"]:
        return True
    for token in argv:
        if token == "--":
            return False  # everything after it is positional
        if token.startswith("-h") or token == "--help" or token.startswith("--help="):
            return True
    return False


@pytest.fixture(scope="module")
def real_manifest() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="ito-cli-fuzz-")
    os.chmod(d, 0o700)
    path = Path(d) / "manifest.json"
    path.write_bytes(EXAMPLE_MANIFEST.read_bytes())
    os.chmod(path, 0o600)
    try:
        yield str(path)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _place(argv: list[str], manifest: str) -> list[str]:
    return [token.replace(REAL_MANIFEST, manifest) for token in argv]


# ---------------------------------------------------------------------------- the properties


def invoke(argv: list[str]) -> tuple[int, str, str]:
    stdout, stderr = StringIO(), StringIO()
    try:
        code = run(argv, stdout=stdout, stderr=stderr)
    except BaseException as exc:  # SystemExit included: the CLI must answer, not exit or raise
        pytest.fail(f"run() raised {type(exc).__name__} for argv of {len(argv)} tokens")
    return code, stdout.getvalue(), stderr.getvalue()


def assert_one_envelope(code: int, stdout: str) -> dict[str, Any]:
    assert code in (0, 1, 2)
    envelope = json.loads(stdout)  # exactly one JSON document, nothing before or after
    assert isinstance(envelope, dict)
    assert ENVELOPE_KEYS <= set(envelope)
    assert set(envelope) - ENVELOPE_KEYS in ({"data"}, {"error"})
    assert isinstance(envelope["notice"], str) and envelope["notice"]
    assert envelope["live_api_contacted"] is False  # no backend is configured
    assert (code == 0) is (envelope["ok"] is True)
    if envelope["ok"]:
        assert isinstance(envelope["data"], dict)
    else:
        error = envelope["error"]
        assert set(error) == ERROR_KEYS
        assert error["code"] in {c.value for c in CONTRACT_CODES}, error["code"]
        assert isinstance(error["retryable"], bool)
        usage = error["code"] == "INVALID_INPUT" and (error["details"] or {}).get("problem") == "usage"
        assert (code == 2) is usage
    return envelope


@settings(max_examples=400, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(argv=argvs)
def test_any_argv_with_json_prints_one_envelope(
    argv: list[str], caplog: pytest.LogCaptureFixture, real_manifest: str
) -> None:
    argv = [*_place(argv, real_manifest), "--json"]
    assume(not _triggers_help_or_server(argv))
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        code, stdout, stderr = invoke(argv)
    envelope = assert_one_envelope(code, stdout)
    stdout.encode("utf-8")  # valid UTF-8 JSON: nothing unencodable (a surrogate-escaped argv byte) was echoed
    assert stderr == ""
    assert CANARY not in stdout
    assert CANARY not in json.dumps(envelope)  # nor hidden behind JSON escapes
    assert CANARY not in stderr
    assert CANARY not in caplog.text


@settings(max_examples=120, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(argv=argvs)
def test_any_argv_without_json_exits_cleanly_and_echoes_no_token(argv: list[str], real_manifest: str) -> None:
    argv = [t for t in _place(argv, real_manifest) if t != "--json"]
    assume(not _triggers_help_or_server(argv))
    code, stdout, stderr = invoke(argv)
    assert code in (0, 1, 2)
    if code == 2:
        assert stdout == ""
        assert stderr.startswith("ito-training")
    assert CANARY not in stdout
    assert CANARY not in stderr


# ---------------------------------------------------------------------------- explicit examples


@pytest.mark.parametrize(
    ("argv", "code", "problem"),
    [
        (["frobnicate", CANARY, "--json"], 2, "usage"),
        ([CANARY, "--json"], 2, "usage"),
        ([f"--{CANARY}", "--json"], 2, "usage"),
        (["check", f"--token={CANARY}", "--json"], 2, "usage"),
        (["check", "--booking", "bk-1", "--api-key", CANARY, "--json"], 2, "usage"),
        (["logs", "--run", "run-1", f"--limit={CANARY}", "--json"], 2, "usage"),
        (["status", "--run", "run-1", "--wait", CANARY, "--json"], 2, "usage"),
        (["check", f"--booking={CANARY}", "--json"], 1, "looks_like_credential"),
        (["status", "--run", CANARY, "--json"], 1, "looks_like_credential"),
        (["status", f"--idempotency-key={CANARY}", "--json"], 1, "looks_like_credential"),
        (["cancel", "--run", "run-1", "--confirmation-ref", CANARY, "--idempotency-key", "k" * 16, "--json"],
         1, "looks_like_credential"),
        (["train", "--booking", "bk-1", "--manifest", "/tmp/m.json", f"--confirmation-ref={CANARY}",
          "--idempotency-key", "k" * 16, "--json"], 1, "looks_like_credential"),
        (["digest", "--manifest", CANARY, "--json"], 1, None),
        (["digest", f"--manifest=/tmp/{CANARY}", "--json"], 1, None),
    ],
)
def test_token_shaped_values_are_never_echoed(argv: list[str], code: int, problem: str | None) -> None:
    exit_code, stdout, stderr = invoke(argv)
    envelope = assert_one_envelope(exit_code, stdout)
    assert exit_code == code, stdout
    if problem is not None:
        assert envelope["error"]["details"]["problem"] == problem
    assert CANARY not in stdout + stderr


def test_cursor_with_a_token_is_refused_without_echo() -> None:
    """`ghp_` + 36 alnum is a well-formed cursor, so it is refused later (no backend), still unechoed."""
    code, stdout, stderr = invoke(["logs", "--run", "run-1", "--cursor", CANARY, "--json"])
    envelope = assert_one_envelope(code, stdout)
    assert envelope["error"]["code"] == "TRAINING_UNAVAILABLE"
    assert CANARY not in stdout + stderr


# ---------------------------------------------------------------------------- bugs the fuzzing found (fixed)


@pytest.mark.parametrize("path", [f"/{CANARY}/manifest.json", f"/tmp/{CANARY}/manifest.json"])
def test_bug_manifest_path_component_is_echoed(path: str) -> None:
    code, stdout, stderr = invoke(["digest", "--manifest", path, "--json"])
    assert_one_envelope(code, stdout)
    assert CANARY not in stdout + stderr


def test_bug_manifest_path_echo_makes_stdout_invalid_utf8() -> None:
    code, stdout, _ = invoke(["digest", "--manifest", "/\udcff\udcfe/manifest.json", "--json"])
    assert_one_envelope(code, stdout)
    stdout.encode("utf-8")


def test_bug_backend_after_a_global_flag_raises() -> None:
    code, stdout, _ = invoke(["--json", "backend"])
    assert_one_envelope(code, stdout)


# ---------------------------------------------------------------------------- usage errors never show a value

# Every value below carries MARK, which no message of ours contains. An unknown option's name may be
# shown, but only when it is lower-case words (cli_usage.shown_option_name), and MARK has a capital:
# so whatever the parser makes of a token, MARK must never be printed by a usage error.
MARK = "Vq9"
assert MARK.lower() != MARK
_SHORT = st.text(_TEXT, max_size=8)
marked_values = st.one_of(
    _SHORT.map(lambda s: s + MARK),
    st.tuples(_SHORT, _SHORT).map(lambda p: p[0] + MARK + p[1]),
    _SHORT.map(lambda s: "-" + MARK + s),
    _SHORT.map(lambda s: "--" + s + MARK),
    st.sampled_from([MARK, f"{MARK}=1", f"1{MARK}", f"-{MARK}", f"--{MARK}", f"--wait{MARK}", f"{MARK} 5",
                     f"/tmp/{MARK}", f"--booking={MARK}"]),
)


@st.composite
def marked_argvs(draw: st.DrawFn) -> list[str]:
    argv: list[str] = []
    if draw(st.booleans()):
        argv.append(draw(st.sampled_from(SUBCOMMANDS)))
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["pair", "joined", "flag", "value", "unknown"]))
        flag, value = draw(st.sampled_from(FLAGS)), draw(marked_values)
        if kind == "pair":
            argv += [flag, value]
        elif kind == "joined":
            argv.append(f"{flag}={value}")
        elif kind == "flag":
            argv.append(flag)
        elif kind == "value":
            argv.append(value)
        else:
            argv += [f"--{draw(st.sampled_from(['forse', 'token', 'api-key', 'wiat']))}", value]
    return argv


@settings(max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH)
@given(argv=marked_argvs(), as_json=st.booleans())
def test_a_usage_error_names_the_flag_and_never_a_value(argv: list[str], as_json: bool) -> None:
    argv = [*argv, "--json"] if as_json else argv
    assume(not _triggers_help_or_server(argv))
    code, stdout, stderr = invoke(argv)
    if code != 2:
        return
    assert MARK not in stdout + stderr
    if "--json" in argv:
        envelope = assert_one_envelope(code, stdout)
        argument = envelope["error"]["details"]["argument"]
        assert argument in {"argv", "command", "option"} or argument.startswith("-"), argument
    else:
        assert stdout == "" and stderr.startswith("ito-training")
