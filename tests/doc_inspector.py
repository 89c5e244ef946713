"""Run the MCP Inspector commands a Markdown file shows, and check them against what it says.

Every shell block that calls the Inspector (`$INSPECT ...` or `npx -y @modelcontextprotocol/inspector@V
--cli ...`) is run, in order, by one bash process, with the reader's placeholders made real:

- `npx -y @modelcontextprotocol/inspector@V` is the locally installed Inspector (.inspector/), the
  server command is this environment's `ito-training-mcp`, `/abs/path/ito-training-mcp` is the
  checkout, and HOME is a fresh temporary directory;
- where a backend is needed (`ITO_API_URL`), a reference backend runs on loopback with an account,
  a token file, and the bookings the text names; the variables a reader fills in from earlier
  answers (`RUN`, `REF`, `REQUEST`, `CANCEL_REF`, `CLEANUP_REF`, `B`) get real values, produced
  the way the text describes (a plan the person confirms at the desk, a submit with the text's
  own idempotency key, confirmations for cancel and cleanup);
- a command calling a tool this build does not have yet is skipped only when the tool is one the
  contract lists (docs/contract.md §2); any other unknown tool name fails;
- where the text names the server through a variable (`$SERVER`, `$B $SERVER`), that variable
  points at the server's streamable HTTP endpoint (`/mcp`): one server process without a backend
  and one configured for the reference backend, started once for the file. Starting a server per
  call costs two seconds of CPU each (the MCP SDK's import), which dozens of calls cannot afford.
  The stdio launch the text describes is run for real by the commands that spell the server out
  (the README's, docs/canonical-backend.md's with its `-e` settings) and by
  tests/test_inspector_and_skill_over_mcp.py.

Consecutive Inspector calls that cannot affect each other run concurrently (each starts a Node
process and a server process): calls without a backend, and read-only calls with one. Everything
else (files changed, variables set, calls that change the backend) runs in the order written. Then, per command: the exit code the text
gives (0 when it says none), the error code it names, `# prints:` lines, the documented JSON
after a block, and invariants of each method's output (tools/list names every tool, ...).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from ito_training_mcp.doors.mcp.server import MANIFEST_SCHEMA_URI, SKILL_URI, skill_body, skill_file
from ito_training_mcp.envelope import ErrorCode
from ito_training_mcp.tools.specs import ALL_TOOLS, TOOLS_BY_NAME

from .doc_shell import REPO, Fence, Unit, ellipsis_match, fences, markdown_files, shell_units

INSPECTOR = REPO / ".inspector" / "node_modules" / ".bin" / "mcp-inspector"
BIN = Path(sys.executable).parent
SERVER = BIN / "ito-training-mcp"
EXAMPLE_MANIFEST = REPO / "examples" / "manifest.json"
CHECKOUT_PLACEHOLDER = "/abs/path/ito-training-mcp"
TOOL_NAMES = [spec.name for spec in ALL_TOOLS]
CODES = {code.value for code in ErrorCode}
READ_ONLY_METHODS = {"tools/list", "prompts/list", "prompts/get", "resources/list", "resources/read"}
PARALLEL = max(2, min(4, 2 * (os.cpu_count() or 1)))
SCRIPT_TIMEOUT_S = 600
READY_TIMEOUT_S = 30.0
# Read at import: the autouse clean_env fixture removes every ITO_* variable before a test body runs.
SKIP_INSPECTOR = os.environ.get("ITO_SKIP_INSPECTOR") == "1"

_CALL = re.compile(r"\$INSPECT\b|\$\{INSPECT\}|\bnpx -y @modelcontextprotocol/inspector@[^\s\"']+")
_NPX = re.compile(r"\bnpx -y @modelcontextprotocol/inspector@[^\s\"']+")
_VENV_BIN = re.compile(r"(?<![\w/.~-])\.venv/bin/")
_BOOKING = re.compile(r"\bbk_[0-9a-f]{8,}\b")
_CAPTURED = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*=\$\(")
_BACKEND = re.compile(r"\$B\b|\$\{B\}|ITO_API_URL")


@dataclass
class Step:
    unit: Unit
    kind: str  # "call" (an Inspector call), "setup", "assign", "skip"
    script: str
    parallel: bool = False
    documented: Any = None  # the JSON the text shows for this call's structuredContent

    def option(self, name: str) -> str | None:
        words = self.unit.words
        return words[words.index(name) + 1] if name in words[:-1] else None


def _inspector_fences(path: Path) -> list[tuple[Fence, list[Unit]]]:
    found = []
    for fence in fences(path.read_text()):
        if fence.language in {"sh", "bash", "shell"} and _CALL.search("\n".join(fence.lines)):
            found.append((fence, shell_units(path, fence)))
    return found


INSPECTOR_FILES = [p for p in markdown_files() if any(
    _CALL.search(u.text) and u.assignment() is None for _, units in _inspector_fences(p) for u in units)]


def _contract_tools() -> set[str]:
    text = (REPO / "docs" / "contract.md").read_text()
    section = re.search(r"^## 2\. .*?(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert section
    return set(re.findall(r"^\| `([a-z_]+)` \|", section.group(0), re.MULTILINE))


def _steps(path: Path, overridden: set[str]) -> list[Step]:
    steps: list[Step] = []
    text = path.read_text()
    all_fences = fences(text)
    contract_tools = _contract_tools()
    for fence, units in _inspector_fences(path):
        calls: list[Step] = []
        for unit in units:
            script = unit.text.replace(CHECKOUT_PLACEHOLDER, str(REPO))
            script = _NPX.sub(str(INSPECTOR), script)
            script = _VENV_BIN.sub(f"{BIN}/", script)
            assigned = unit.assignment()
            if assigned is not None:
                kind = "skip" if assigned[0] in overridden else "assign"
                steps.append(Step(unit, kind, ":" if kind == "skip" else script))
                continue
            if not _CALL.search(unit.text):
                steps.append(Step(unit, "setup", script))
                continue
            step = Step(unit, "call", script)
            tool = step.option("--tool-name")
            if tool is not None and tool not in TOOL_NAMES:
                assert tool in contract_tools, f"{path}:{unit.line}: the text calls {tool}, which no contract lists"
                step.kind, step.script = "skip", ":"
            method = step.option("--method")
            read_only = method in READ_ONLY_METHODS or (
                method == "tools/call" and tool in TOOLS_BY_NAME and TOOLS_BY_NAME[tool].hints.read_only)
            # Without a backend nothing a call does can affect another; with one, only reads may overlap.
            harmless = read_only or not _BACKEND.search(unit.text)
            step.parallel = step.kind == "call" and harmless and not _CAPTURED.match(unit.text)
            steps.append(step)
            calls.append(step)
        # A JSON block right after this one, introduced as the structuredContent, documents its last call.
        index = all_fences.index(fence)
        if calls and index + 1 < len(all_fences) and all_fences[index + 1].language == "json" \
                and "structuredContent" in fence.after:
            calls[-1].documented = json.loads("\n".join(all_fences[index + 1].lines))
    return steps


def _script(steps: list[Step], out: Path) -> str:
    """One bash script: each step's output to files, `$?` kept for the next step. Calls that may
    overlap run in the background, at most PARALLEL at a time; a step that changes files or the
    backend waits for all of them first. Assignments run in place (later calls need them, earlier
    ones do not); steps the test replaced are left out."""
    lines = ["set +e", "__rc=0"]
    running: list[int] = []

    def wrapped(i: int, step: Step) -> str:
        return f"{{ ( exit $__rc ); {step.script}\n}} >{out}/{i}.out 2>{out}/{i}.err"

    def wait_all() -> None:
        lines.extend(f"wait $__pid_{j}; echo $? >{out}/{j}.rc" for j in running)
        running.clear()

    for i, step in enumerate(steps):
        if step.kind == "skip":
            continue
        if step.parallel:
            if len(running) == PARALLEL:
                wait_all()
            lines.append(f"{wrapped(i, step)} & __pid_{i}=$!")
            running.append(i)
            continue
        if step.kind != "assign":
            wait_all()
        lines.append(f"{wrapped(i, step)}; __rc=$?; echo $__rc >{out}/{i}.rc")
    wait_all()
    return "\n".join(lines) + "\n"


def _serve_http(stack: ExitStack, env: dict[str, str], log: Path) -> str:
    """This build's server on streamable HTTP, loopback, a free port; its /mcp URL once it listens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with log.open("wb") as stderr:
        proc = subprocess.Popen([str(SERVER), "--transport", "streamable-http", "--host", "127.0.0.1", "--port",
                                 str(port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                env=env)
    stack.callback(_stop, proc)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:  # bounded readiness poll: the port accepts, the process dies, or time runs out
        assert proc.poll() is None, log.read_text(errors="replace")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return f"http://127.0.0.1:{port}/mcp"
        except OSError:
            assert time.monotonic() < deadline, f"the server did not listen within {READY_TIMEOUT_S} s"
            time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _safe_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def _bookings(steps: list[Step]) -> set[str]:
    return {b for s in steps for b in _BOOKING.findall(s.unit.text)}


def _world(stack: ExitStack, steps: list[Step], home: Path, tmp: Path) -> tuple[dict[str, str], set[str]]:
    """A reference backend with what the text assumes; returns the overrides and the secrets to look for."""
    from ito_training_mcp.service import TrainingService
    from ito_training_reference import ReferenceBackend

    backend = stack.enter_context(ReferenceBackend())
    op = backend.op
    account = op.account()
    _, token = op.token(account)
    token_file = _safe_dir(home / ".config" / "ito") / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    bookings = _bookings(steps)
    for booking in sorted(bookings):
        op.booking(account, booking_id=booking, nodes=2, gpus_per_node=8, fabric="infiniband")
    overrides = {
        "B": f"-e ITO_API_URL={backend.url} -e ITO_TOKEN_FILE={token_file}",
        "ITO_API_URL": backend.url, "ITO_TOKEN_FILE": str(token_file),
    }
    assigned = dict(a for s in steps if (a := s.unit.assignment()) is not None)
    key, chosen = assigned.get("KEY"), assigned.get("BOOKING")
    if key and chosen:
        booking = chosen
        manifest = _safe_dir(tmp / "setup") / "manifest.json"
        manifest.write_bytes(EXAMPLE_MANIFEST.read_bytes())
        manifest.chmod(0o600)
        service = TrainingService({"ITO_API_URL": backend.url, "ITO_API_KEY": token})

        def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            envelope = anyio.run(service.invoke, tool, arguments)
            assert envelope.ok, envelope.to_json()
            return dict(envelope.data or {})

        if "plan_training" in TOOL_NAMES:  # the person's step as the text tells it: plan, then the desk
            plan = call("plan_training", {"booking_id": booking, "manifest_path": str(manifest)})
            request = str(plan["confirmation_request"]["request_id"])
            person = backend.person(account)
            person.sign_in()
            ref = str(person.confirm(request))
        else:
            digest = hashlib.sha256(EXAMPLE_MANIFEST.read_bytes()).hexdigest()
            request = "creq_not_in_this_build"
            ref = str(op.confirmation(account, "training.create", booking, "1500.00", manifest_sha256=digest)["ref"])
        run = str(call("submit_training", {"booking_id": booking, "manifest_path": str(manifest),
                                           "confirmation_ref": ref, "idempotency_key": key})["run_id"])
        overrides |= {
            "REQUEST": request, "REF": ref, "RUN": run,
            "CANCEL_REF": str(op.confirmation(account, "training.cancel", booking, "0.00", run_id=run)["ref"]),
            "CLEANUP_REF": str(op.confirmation(account, "training.cleanup", booking, "0.00", run_id=run)["ref"]),
        }
    return overrides, {token, base64.b64encode(token.encode()).decode()}


def _check(step: Step, rc: int, out: str, err: str) -> list[str]:
    unit, where = step.unit, f"{step.unit.file.relative_to(REPO)}:{step.unit.line}"
    problems = []
    captured = _CAPTURED.match(unit.text)
    if rc != unit.exit_code and not (captured and unit.expected_exit is None):
        problems.append(f"{where}: exit {rc}, the text says {unit.exit_code}\n{out[-1500:]}\n{err[-1500:]}")
    problems.extend(f"{where}: output lacks {text!r}" for text in unit.prints if text not in out)
    if step.kind != "call" or captured or problems:
        return problems
    try:
        result = json.loads(out)
    except json.JSONDecodeError:
        return [f"{where}: the Inspector did not print JSON: {out[-500:]!r}"]
    method = step.option("--method")
    if method == "tools/list":
        if [t["name"] for t in result["tools"]] != TOOL_NAMES:
            problems.append(f"{where}: tools/list does not list every tool in order")
        if any(t["outputSchema"]["required"] != ["ok", "live_api_contacted", "notice"] for t in result["tools"]):
            problems.append(f"{where}: an outputSchema is not the envelope")
    elif method == "prompts/list":
        if [p["name"] for p in result["prompts"]] != ["ito-training"]:
            problems.append(f"{where}: prompts/list is not the one ito-training prompt")
    elif method == "prompts/get":
        if result["messages"][0]["content"]["text"] != skill_body(skill_file()):
            problems.append(f"{where}: the prompt is not the skill")
    elif method == "resources/list":
        if not {SKILL_URI, MANIFEST_SCHEMA_URI} <= {r["uri"] for r in result["resources"]}:
            problems.append(f"{where}: resources/list lacks the skill or the schema")
    elif method == "resources/read":
        problems.extend(_check_resource(where, step.option("--uri") or "", result["contents"][0]["text"]))
    elif method == "tools/call":
        problems.extend(_check_envelope(where, step, rc, result))
    return problems


def _check_resource(where: str, uri: str, text: str) -> list[str]:
    if uri == MANIFEST_SCHEMA_URI:
        schema = json.loads((REPO / "schemas" / "ito.training.manifest.v1.schema.json").read_text())
        return [] if json.loads(text) == schema else [f"{where}: the schema resource differs from schemas/"]
    if uri.startswith("ito-training://skill/"):
        relative = uri.removeprefix("ito-training://skill/")
        return [] if text == (REPO / "skill" / relative).read_text() else [f"{where}: {uri} differs from skill/"]
    return [f"{where}: a resource this test does not know: {uri}"]


def _check_envelope(where: str, step: Step, rc: int, result: dict[str, Any]) -> list[str]:
    envelope = result.get("structuredContent")
    if not isinstance(envelope, dict):
        return [f"{where}: no structuredContent"]
    problems = []
    if json.loads(result["content"][0]["text"]) != envelope or result["isError"] is envelope["ok"]:
        problems.append(f"{where}: the text block or isError disagrees with structuredContent")
    if envelope["ok"] is not (rc == 0):
        problems.append(f"{where}: ok is {envelope['ok']} with exit {rc}")
    codes = step.unit.codes(CODES)
    if codes and (envelope.get("error") or {}).get("code") != codes[0]:
        problems.append(f"{where}: the text names {codes[0]}, the envelope says {envelope.get('error')}")
    if step.documented is not None:
        problems.extend(f"{where}: {p}" for p in ellipsis_match(step.documented, envelope))
    return problems


def run_inspector_doc(path: Path, tmp_path: Path) -> dict[str, Any]:
    """Run every Inspector block of `path`; fail with every difference from what the text says."""
    if not INSPECTOR.exists():
        if SKIP_INSPECTOR:
            pytest.skip("ITO_SKIP_INSPECTOR=1: MCP Inspector not installed")
        pytest.fail("MCP Inspector missing: run `make inspector` (make test does it) or set ITO_SKIP_INSPECTOR=1")
    home = _safe_dir(tmp_path / "home")
    out = _safe_dir(tmp_path / "out")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ITO_", "VIRTUAL_ENV"))}
    overrides = {"HOME": str(home), "INSPECT": f"{INSPECTOR} --cli", "SERVER": str(SERVER)}
    secrets: set[str] = set()
    with ExitStack() as stack:
        plain = _steps(path, set())
        if any("ITO_API_URL" in s.unit.text for s in plain):
            backend_overrides, secrets = _world(stack, plain, home, tmp_path)
            overrides |= backend_overrides
        if any((s.unit.assignment() or ("",))[0] == "SERVER" for s in plain):
            # Over streamable HTTP the server reads manifests only under its roots (over stdio, as the text
            # launches it, anywhere): the reader's manifests are under HOME.
            env = {**env, "ITO_TRAINING_MANIFEST_ROOTS": str(home)}
            overrides["SERVER"] = _serve_http(stack, env, tmp_path / "server.log")
            if "ITO_API_URL" in overrides:
                configured = {"ITO_API_URL": overrides["ITO_API_URL"], "ITO_TOKEN_FILE": overrides["ITO_TOKEN_FILE"]}
                overrides["SERVER_B"] = _serve_http(stack, {**env, **configured}, tmp_path / "server-b.log")
        steps = _steps(path, set(overrides))
        if "SERVER_B" in overrides:
            for step in steps:
                step.script = re.sub(r"\$B\s+\$SERVER\b", "$SERVER_B", step.script)
        script = _script(steps, out)
        proc = subprocess.run(["bash", "-c", script], env={**env, **overrides}, cwd=tmp_path,
                              capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    problems, ran, skipped = [], 0, []
    for i, step in enumerate(steps):
        if step.kind == "skip":
            if step.unit.assignment() is None:
                skipped.append(step.option("--tool-name"))
            continue
        if "| jq " in step.unit.text and not shutil.which("jq"):
            continue  # an example that needs jq, on a machine without it
        rc = int((out / f"{i}.rc").read_text())
        stdout = (out / f"{i}.out").read_text(errors="replace")
        stderr = (out / f"{i}.err").read_text(errors="replace")
        problems.extend(_check(step, rc, stdout, stderr))
        problems.extend(f"{path.name}:{step.unit.line}: a credential in the output" for s in secrets
                        if s in stdout or s in stderr)
        ran += step.kind == "call"
    assert not problems, "\n\n".join(problems)
    return {"ran": ran, "skipped": skipped}
