"""`ito-training desk ...` against a real reference backend on loopback, and the usage-error
hygiene of `ito-training desk` and `ito-training backend` (nothing typed is ever echoed)."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import pytest

from ito_training_mcp.doors.cli.main import run as main_run
from ito_training_reference import ReferenceBackend
from ito_training_reference.cli import main as backend_main
from ito_training_reference.desk_cli import run
from ito_training_reference.store import Store

from .test_reference_backend import MANIFEST, sha, variant

CANARY = "ghp_" + "Qw3rTy7uIo9pAs1dFg5hJk2lZx8cVb4nM6e0"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def rb() -> Iterator[ReferenceBackend]:
    with ReferenceBackend() as backend:
        yield backend


@pytest.fixture
def token_file(rb: ReferenceBackend, tmp_path: Path) -> str:
    path = tmp_path / "operator-token"
    path.write_text(rb.operator_token + "\n")
    path.chmod(0o600)
    return str(path)


class Desk:
    def __init__(self, rb: ReferenceBackend, token_file: str) -> None:
        self.rb, self.token_file = rb, token_file

    def __call__(self, *argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        stdout, stderr = StringIO(), StringIO()
        full = [*argv] if "--operator-token-file" in argv else [*argv, "--operator-token-file", self.token_file]
        code = run(full, stdout=stdout, stderr=stderr, env={"ITO_DESK_URL": self.rb.url} if env is None else env)
        return code, stdout.getvalue(), stderr.getvalue()

    def json(self, *argv: str) -> Any:
        code, out, err = self(*argv, "--json")
        assert code == 0, out + err
        document = json.loads(out)
        assert document["ok"] is True
        return document["data"]


@pytest.fixture
def desk(rb: ReferenceBackend, token_file: str) -> Desk:
    return Desk(rb, token_file)


def test_accounts_tokens_and_bookings(rb: ReferenceBackend, desk: Desk, tmp_path: Path) -> None:
    code, out, _ = desk("accounts", "create", "--account", "acme-cli", "--budget-limit", "5000.00",
                        "--data-scheme", "s3", "--data-scheme", "hf")
    assert code == 0 and "acme-cli" in out
    listed = {a["account_id"]: a for a in desk.json("accounts", "list")}
    assert listed["acme-cli"]["budget_limit_usd"] == "5000.00"
    assert listed["acme-cli"]["allowed_data_schemes"] == ["s3", "hf"]
    code, out, _ = desk("accounts", "create", "--account", "acme-cli")
    assert code == 1

    # Minted once, printed once (stdout holds only the token), with a warning on stderr.
    code, out, err = desk("tokens", "mint", "--account", "acme-cli")
    token = out.strip()
    assert code == 0 and token.startswith("itorb_") and "\n" not in token
    assert "shown this once" in err and token not in err
    with httpx.Client(base_url=rb.url, trust_env=False) as http:
        assert http.get("/v1/me", headers={"Authorization": f"Bearer {token}"}).json() == {"account_id": "acme-cli"}

    # --out: a new 0600 file; an existing path is refused before anything is minted.
    target = tmp_path / "api-token"
    code, out, err = desk("tokens", "mint", "--account", "acme-cli", "--out", str(target), "--read-only")
    assert code == 0 and "itorb_" not in out + err
    assert target.stat().st_mode & 0o777 == 0o600 and target.read_text().startswith("itorb_")
    before = len(desk.json("tokens", "list", "--account", "acme-cli"))
    code, out, err = desk("tokens", "mint", "--account", "acme-cli", "--out", str(target))
    assert code == 2 and "--out" in err and str(target) not in err
    assert len(desk.json("tokens", "list", "--account", "acme-cli")) == before == 2
    code, out, err = desk("tokens", "mint", "--account", "nobody", "--out", str(tmp_path / "never"))
    assert code == 1 and not (tmp_path / "never").exists()  # a refused mint leaves no file behind

    tokens = desk.json("tokens", "list", "--account", "acme-cli")
    assert token not in json.dumps(tokens)
    assert sorted(t["scopes"] for t in tokens) == [["training:read"], ["training:read", "training:write"]]
    code, out, _ = desk("tokens", "list")
    assert "active" in out and "itorb_" not in out
    revoked = next(t["token_id"] for t in tokens if len(t["scopes"]) == 2)
    assert desk("tokens", "revoke", revoked)[0] == 0
    with httpx.Client(base_url=rb.url, trust_env=False) as http:
        assert http.get("/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401

    booking = desk.json("bookings", "create", "--account", "acme-cli", "--booking", "bk-cli-1", "--nodes", "2",
                        "--gpus-per-node", "4", "--fabric", "roce", "--term-days", "2")
    assert (booking["booking_id"], booking["nodes"], booking["fabric"]) == ("bk-cli-1", 2, "roce")
    code, out, _ = desk("bookings", "list", "--account", "acme-cli")
    assert code == 0 and "bk-cli-1" in out and "2x4 H100-80GB" in out
    assert desk.json("bookings", "show", "bk-cli-1")["state"] == "completed"
    assert desk("bookings", "show", "bk-missing")[0] == 1


def test_requests_decisions_and_run_controls(rb: ReferenceBackend, desk: Desk) -> None:
    account = rb.op.account()
    _, token = rb.op.token(account)
    booking = rb.op.booking(account, nodes=2)["booking_id"]
    with httpx.Client(base_url=rb.url, headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
        def plan(manifest: bytes = MANIFEST) -> str:
            body = {"booking_id": booking, "manifest_sha256": sha(manifest),
                    "manifest_b64": base64.b64encode(manifest).decode()}
            return str(http.post("/v1/training-plans", json=body).json()["confirmation_request"]["request_id"])

        first, second = plan(), plan(variant(description="a second manifest"))
        code, out, _ = desk("requests", "--account", account, "--status", "pending")
        assert code == 0 and first in out and second in out and "training.create" in out and "1200.00" in out
        code, out, _ = desk("confirm", first, "--by", "carol")
        ref = http.get(f"/v1/confirmation-requests/{first}").json()["confirmation_ref"]
        assert code == 0 and ref and f"confirmed (confirmation ref {ref}); the agent picks it up" in out
        assert desk.json("requests", "--account", account, "--status", "confirmed")[0]["decided_by"] == "carol"
        code, out, _ = desk("decline", second)
        assert code == 0 and "declined" in out
        code, out, err = desk("confirm", second)
        assert code == 1 and "request_decided" in err
        code, out, _ = desk("--json", "confirm", second)
        assert code == 1 and json.loads(out)["error"] == {
            "code": "request_decided", "status": 409, "message": json.loads(out)["error"]["message"]}

        run_body = {"booking_id": booking, "confirmation_ref": ref, "manifest_sha256": sha(MANIFEST),
                    "manifest_b64": base64.b64encode(MANIFEST).decode()}
        run_id = http.post("/v1/training-runs", json=run_body, headers={"Idempotency-Key": "desk-cli-run-0001"}
                           ).json()["run_id"]
    code, out, _ = desk("advance", "--run", run_id)
    assert code == 0 and f"{run_id}: running (data_prep running, ladder pending, sft pending, dpo pending)" in out
    code, out, _ = desk("fail-gate", "--run", run_id, "--stage", "dpo")
    assert code == 0 and "gate_failed (data_prep passed, ladder passed, sft passed, dpo failed)" in out
    code, _, err = desk("finish", run_id)  # the bare RUN of earlier versions still works
    assert code == 1 and "run_terminal" in err
    code, out, _ = desk("runs")
    assert run_id in out
    assert desk("fail-gate", run_id, "--stage", "nope")[0] == 1


def test_interrupt_and_spike(rb: ReferenceBackend, desk: Desk) -> None:
    account = rb.op.account()
    _, token = rb.op.token(account)
    booking = rb.op.booking(account, nodes=2)["booking_id"]
    ref = rb.op.confirmation(account, "training.create", booking, "1200.00", manifest_sha256=sha(MANIFEST))["ref"]
    with httpx.Client(base_url=rb.url, headers={"Authorization": f"Bearer {token}"}, trust_env=False) as http:
        run_id = http.post("/v1/training-runs", headers={"Idempotency-Key": "desk-cli-incidents-01"}, json={
            "booking_id": booking, "confirmation_ref": ref, "manifest_sha256": sha(MANIFEST),
            "manifest_b64": base64.b64encode(MANIFEST).decode()}).json()["run_id"]
    code, _, err = desk("interrupt", "--run", run_id)
    assert code == 1 and "run_not_running" in err  # queued: nothing runs yet
    for _ in range(3):
        rb.op.advance(run_id)  # sft running
    code, out, _ = desk("interrupt", "--run", run_id, "--detect-s", "700")
    assert code == 0 and "interrupted at step 250: detected after 700.0 s, resumed from step 0" in out
    code, out, _ = desk("spike", "--run", run_id)
    assert code == 0 and "loss spike at step 750; stage sft paused. Proposed: restart from step 500" in out
    assert "training.restart" in out
    code, _, err = desk("advance", "--run", run_id)
    assert code == 1 and "run_paused" in err and "person's decision" in err
    code, _, err = desk("spike", "--run", run_id)
    assert code == 1 and "run_paused" in err


def test_login_link(rb: ReferenceBackend, desk: Desk) -> None:
    account = rb.op.account()
    code, out, err = desk("login-link", "--account", account)
    url = out.strip()
    assert code == 0 and url.startswith(f"{rb.url}/desk/sign-in/") and "single-use" in err and url not in err
    assert desk("login-link", "--account", "acct-missing")[0] == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_problems_exit_1_and_usage_problems_exit_2(rb: ReferenceBackend, desk: Desk,
                                                              tmp_path: Path) -> None:
    code, out, err = desk("accounts", "list", env={"ITO_DESK_URL": f"http://127.0.0.1:{_free_port()}"})
    assert code == 1 and "cannot reach the backend" in err
    wrong = tmp_path / "wrong-token"
    wrong.write_text("x" * 40)
    wrong.chmod(0o600)
    code, out, err = desk("accounts", "list", "--operator-token-file", str(wrong))
    assert code == 1 and "wrong operator token" in err
    code, out, _ = desk("--json", "accounts", "list", "--url", "http://192.0.2.1:8765")
    assert code == 2 and json.loads(out)["error"]["code"] == "usage" and "--url" in json.loads(out)["error"]["message"]
    for url in ("ftp://127.0.0.1", "http://user:pw@127.0.0.1:1", "http://127.0.0.1:1/?q=1", "http://[::1"):
        assert desk("accounts", "list", env={"ITO_DESK_URL": url})[0] == 2, url
    code, out, err = desk("accounts", "list", env={"ITO_DESK_URL": rb.url.replace("127.0.0.1", "localhost")})
    assert code == 0


def test_token_file_checks(rb: ReferenceBackend, desk: Desk, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret_dir = tmp_path / CANARY
    secret_dir.mkdir()
    loose = secret_dir / "token"
    loose.write_text(rb.operator_token)
    loose.chmod(0o644)
    link = secret_dir / "link"
    link.symlink_to(loose)
    for path, words in ((loose, "mode 0600"), (link, "cannot open"), (secret_dir / "absent", "cannot open"),
                        (secret_dir, "not a regular file")):
        code, out, err = desk("accounts", "list", "--operator-token-file", str(path))
        assert code == 2 and words in err and "--operator-token-file" in err, path
        assert CANARY not in out + err and rb.operator_token not in out + err
    # Without flags: the file `ito-training backend` writes next to its default database, in the cwd.
    monkeypatch.chdir(tmp_path)
    stderr = StringIO()
    assert run(["accounts", "list"], stdout=StringIO(), stderr=stderr, env={"ITO_DESK_URL": rb.url}) == 2
    said = stderr.getvalue()  # run elsewhere than the backend: where it looked, and the two ways out
    assert "no operator token file at ./ito-reference-backend.sqlite3.operator-token" in said
    assert "--db PATH" in said and "--operator-token-file PATH" in said
    default = tmp_path / "ito-reference-backend.sqlite3.operator-token"
    default.write_text(rb.operator_token)
    default.chmod(0o600)
    assert run(["accounts", "list"], stdout=StringIO(), stderr=StringIO(), env={"ITO_DESK_URL": rb.url}) == 0
    stderr = StringIO()  # --db given, but not the backend's database: which file was expected, and why
    assert run(["--db", str(tmp_path / f"{CANARY}.db"), "accounts", "list"], stdout=StringIO(), stderr=stderr,
               env={"ITO_DESK_URL": rb.url}) == 2
    said = stderr.getvalue()
    assert "no operator token file beside the --db database (expected <--db>.operator-token)" in said
    assert "the backend writes PATH.operator-token next to it" in said and CANARY not in said
    other_db = tmp_path / "other.db.operator-token"
    other_db.write_text(rb.operator_token)
    other_db.chmod(0o600)
    assert run(["--db", str(tmp_path / "other.db"), "accounts", "list"], stdout=StringIO(), stderr=StringIO(),
               env={"ITO_DESK_URL": rb.url}) == 0


@pytest.mark.parametrize("argv", [
    ["requests", "--status", CANARY],
    ["bookings", "create", "--account", "a", "--nodes", CANARY],
    ["tokens", "mint", "--account", "a", "--expires-in", CANARY],
    ["accounts", "list", f"--{CANARY}"],
    ["accounts", "list", CANARY],
    [CANARY],
    ["accounts", CANARY],
    ["tokens", "mint", "--account"],
    ["tokens", "mint", CANARY],
    ["confirm"],
    ["--url", f"http://{CANARY}.example:1", "accounts", "list"],
    ["--url", f"http://127.0.0.1:1/{CANARY}?{CANARY}", "accounts", "list"],
    [],
])
def test_usage_errors_never_echo_what_was_typed(desk: Desk, argv: list[str]) -> None:
    for extra in ([], ["--json"]):
        code, out, err = desk(*argv, *extra)
        assert code == 2, (argv, out, err)
        assert CANARY not in out + err
        assert "Traceback" not in out + err
        if extra:
            assert json.loads(out)["error"]["code"] == "usage"


def test_named_flags_in_usage_errors(desk: Desk) -> None:
    assert "--nodes" in desk("bookings", "create", "--account", "a", "--nodes", "many")[2]
    assert "--account" in desk("tokens", "mint")[2]
    assert "REQUEST" in desk("confirm")[2]
    # An unknown option is named (never a value), with the likely flag of that sub-command.
    code, _, err = desk("requests", "--stauts", "pending")
    assert code == 2 and "ito-training desk requests: unknown option --stauts (did you mean --status?)" in err
    code, _, err = desk("accounts", "create", f"--acount={CANARY}")
    assert code == 2 and "unknown option --acount (did you mean --account?)" in err and CANARY not in err
    code, _, err = desk("runs", CANARY)
    assert code == 2 and "unexpected argument (not shown)" in err and CANARY not in err
    assert "unrecognized arguments" not in err


def test_run_controls_take_run_like_every_other_command(desk: Desk) -> None:
    for verb in ("advance", "finish", "fail-gate"):
        code, _, err = desk(verb)
        assert code == 2 and f"ito-training desk {verb}: --run is required" in err
        code, _, err = desk(verb, "--run", "run_a", "run_b")
        assert code == 2 and "given twice" in err
        code, _, err = desk(verb, "--run", "run_missing")
        assert code == 1 and "404" in err  # parsed, then refused by the backend
    assert "--run RUN" in desk("advance", "--help")[1]


def test_backend_usage_errors_name_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert backend_main(["--prot", "1", "--db", str(tmp_path / "db")]) == 2
    assert "unknown option --prot (did you mean --port?)" in capsys.readouterr().err


def test_sigterm_stops_the_backend_cleanly_without_wal_files(tmp_path: Path) -> None:
    db = tmp_path / "backend.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    proc = subprocess.Popen([str(BIN / "ito-training"), "backend", "--port", "0", "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline().decode()  # printed once the socket is bound
        assert "listening on http://127.0.0.1:" in first, first
        url = first.rsplit(" ", 1)[1].strip()
        token_file = f"{db}.operator-token"
        stdout = StringIO()
        assert run(["accounts", "create", "--account", "wal-check", "--operator-token-file", token_file],
                   stdout=stdout, stderr=StringIO(), env={"ITO_DESK_URL": url}) == 0  # something written
        assert Path(f"{db}-wal").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        rest = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert "stopped" in rest and "Traceback" not in rest
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    store = Store(str(db))
    try:
        assert store.account("wal-check") is not None  # the write is in the database file itself
    finally:
        store.close()


@pytest.mark.parametrize("argv", [
    ["--port", CANARY],
    ["--host", "0.0.0.0", "--bogus", CANARY],
    [f"--{CANARY}"],
    ["--auto-advance-s", CANARY],
    ["--operator-token-file", f"/nonexistent/{CANARY}/token"],
    ["--public-url", f"http://{CANARY}.example/path"],
])
def test_backend_usage_errors_never_echo_what_was_typed(argv: list[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert backend_main([*argv, "--db", str(tmp_path / "db")]) == 2
    captured = capsys.readouterr()
    assert CANARY not in captured.out + captured.err
    assert captured.err.strip()


def test_the_main_cli_routes_desk(rb: ReferenceBackend, token_file: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ITO_DESK_URL", rb.url)
    stdout, stderr = StringIO(), StringIO()
    assert main_run(["desk", "--json", "accounts", "list", "--operator-token-file", token_file],
                    stdout=stdout, stderr=stderr) == 0
    assert json.loads(stdout.getvalue())["ok"] is True
    stdout = StringIO()
    assert main_run(["--json", "desk"], stdout=stdout, stderr=StringIO()) == 2
    assert json.loads(stdout.getvalue())["error"]["code"] == "INVALID_INPUT"


def test_a_closed_pipe_ends_quietly(rb: ReferenceBackend, token_file: str) -> None:
    store = Store(rb.db_path)  # a second connection to the same database: quicker than 400 HTTP calls
    try:
        for i in range(400):  # well over a pipe buffer of JSON
            store.create_account(f"pipe-{i:04d}", budget_limit_usd="1.00", data_schemes=["s3"],
                                 checkpoint_prefixes=["s3://"])
    finally:
        store.close()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ITO_")}, "ITO_DESK_URL": rb.url}
    proc = subprocess.Popen([str(BIN / "ito-training"), "desk", "--json", "accounts", "list",
                             "--operator-token-file", token_file], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(1) == b"{"
    proc.stdout.close()  # like `| head -c 1`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipe" not in err


def test_help_exits_0(desk: Desk) -> None:
    for argv in (["--help"], ["tokens", "mint", "--help"]):
        code, out, _ = desk(*argv)
        assert code == 0 and "usage: ito-training desk" in out
