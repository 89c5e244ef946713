"""A walkthrough with real processes: `ito-training backend` (the reference backend) in one process,
`ito-training-mcp` in another, `ito-training desk ...` and `ito-training ...` as the commands a person
types, and this script as the MCP client and as the person's browser at the desk.

    .venv/bin/python examples/walkthrough.py

Unlike `make demo` (which starts the reference backend in-process), everything here goes over real
sockets and pipes, exactly as a harness would run it. Part 1 is the agent's path over MCP; part 2 is
the same path from a terminal, where each step runs the "Next command" the previous one printed --
twice with the same manifest: two plans, two confirmations, two runs.

Every command is printed as it runs (`$ ito-training ...`), the operator's `ito-training desk ...`
commands included. The reference backend's runs move only when the operator says so (`desk advance`,
`desk finish`) or on a timer (`ito-training backend --auto-advance-s SECONDS`); this script advances
them itself, so what it shows does not depend on timing.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ITO = str(BIN / "ito-training")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_backend(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    db = workdir / "backend.sqlite3"
    process = subprocess.Popen([ITO, "backend", "--port", str(port), "--db", str(db)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # bounded readiness poll
        try:
            if httpx.get(f"{url}/v1/capabilities", timeout=1).status_code == 200 and \
                    Path(f"{db}.operator-token").exists():
                return process, url
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("the reference backend did not start")


class Terminal:
    """`ito-training ...` as a person types it, in its own process, with --json for this script to read."""

    def __init__(self, url: str, workdir: Path, env: dict[str, str]) -> None:
        self.desk_flags = ["--url", url, "--db", str(workdir / "backend.sqlite3")]
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("ITO_")}, **env}

    def desk(self, *argv: str, why: str = "") -> dict[str, Any]:
        command = ["desk", "--json", *argv, *self.desk_flags]
        print(f"$ ito-training {shlex.join(command)}    # operator{': ' + why if why else ''}")
        proc = subprocess.run([ITO, *command], capture_output=True, text=True, timeout=60, env=self.env)
        result: dict[str, Any] = json.loads(proc.stdout)
        if proc.returncode != 0 or not result["ok"]:
            raise RuntimeError(f"ito-training desk {argv[0]} failed: {proc.stdout} {proc.stderr}")
        data: dict[str, Any] = result["data"]
        return data

    def run(self, argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
        print(f"$ ito-training {shlex.join([*argv, '--json'])}")
        proc = subprocess.run([ITO, *argv, "--json"], capture_output=True, text=True, timeout=120,
                              env={**self.env, **(env or {})})
        envelope: dict[str, Any] = json.loads(proc.stdout)
        print(f"    -> {'ok' if envelope['ok'] else 'refused ' + envelope['error']['code']}")
        return envelope


def next_command(envelope: dict[str, Any]) -> list[str]:
    """The command the CLI says to run next (the end of its notice), as argv."""
    line = str(envelope["notice"]).rsplit("Next command: ", 1)[1]
    argv = shlex.split(line)
    assert argv[0] == "ito-training", line
    return argv[1:]


def step(name: str, envelope: dict[str, Any], *fields: str) -> dict[str, Any]:
    status = "ok" if envelope["ok"] else f"refused {envelope['error']['code']}"
    shown = {f: envelope["data"].get(f) for f in fields} if envelope["ok"] else {}
    print(f"{name:<44} {status:<28} {json.dumps(shown)}")
    return envelope


class Browser:
    """The person's browser at the desk: a sign-in link from the operator, then their own session."""

    def __init__(self, terminal: Terminal, account: str) -> None:
        from ito_training_reference.desk.person import Person

        link = terminal.desk("login-link", "--account", account, why="a single-use sign-in link for the person")
        print(f"{'':<44} {'':<28} expires {link['expires_at']}")
        self.person = Person(str(link["url"])).sign_in()
        print("[person] opens the link and signs in at the desk")

    def confirm(self, request_id: str) -> str:
        ref = self.person.confirm(request_id)
        print(f"{'[person] reviews and confirms ' + request_id:<44} {'':<28} {ref}")
        return ref


async def agent(terminal: Terminal, env: dict[str, str], browser: Browser, booking: str, manifest: Path) -> bool:
    params = StdioServerParameters(command=str(BIN / "ito-training-mcp"), env=env)
    async with Client(stdio_client(params)) as mcp:
        async def call(tool: str, **arguments: Any) -> dict[str, Any]:
            result = await mcp.call_tool(tool, arguments)
            assert result.structured_content is not None
            return result.structured_content

        step("check_training_availability", await call("check_training_availability", booking_id=booking),
             "available")
        step("digest_manifest", await call("digest_manifest", manifest_path=str(manifest)), "sha256")
        submit = {"booking_id": booking, "manifest_path": str(manifest)}
        step("submit_training (not yet confirmed)", await call("submit_training", confirmation_ref="",
                                                               idempotency_key="train-not-yet-confirmed", **submit))
        plan = step("plan_training", await call("plan_training", booking_id=booking, manifest_path=str(manifest)),
                    "valid", "failed_checks", "max_cost_usd")
        print(f"{'':<44} {'':<28} estimate ${plan['data']['estimate']['usd']}; review URL "
              f"{plan['data']['confirmation_request']['review_url']}")
        request_id = plan["data"]["confirmation_request"]["request_id"]
        submit["idempotency_key"] = f"train-{request_id}"  # one key per confirmed request, as the CLI suggests
        step("confirmation_status", await call("confirmation_status", request_id=request_id), "status")
        browser.confirm(request_id)
        confirmed = step("confirmation_status", await call("confirmation_status", request_id=request_id),
                         "status", "confirmation_ref")
        ref = confirmed["data"]["confirmation_ref"]
        created = step("submit_training", await call("submit_training", confirmation_ref=ref, **submit),
                       "run_id", "created")
        run_id = created["data"]["run_id"]
        step("submit_training (again)", await call("submit_training", confirmation_ref=ref, **submit), "created")
        terminal.desk("advance", run_id, why="the reference run moves one step")
        terminal.desk("advance", run_id, why="and one more")
        step("training_status", await call("training_status", run_id=run_id), "state")
        step("training_logs", await call("training_logs", run_id=run_id, limit=3), "next_cursor")
        step("training_metrics", await call("training_metrics", run_id=run_id), "step", "cost_usd_to_date")
        step("list_checkpoints", await call("list_checkpoints", run_id=run_id))
        done = {}
        for action in ("cancel", "cleanup"):
            opened = step("request_confirmation", await call("request_confirmation", action=f"training.{action}",
                                                             run_id=run_id), "action", "status")
            browser.confirm(opened["data"]["request_id"])
            learned = step("confirmation_status", await call("confirmation_status",
                                                             request_id=opened["data"]["request_id"]),
                           "status", "confirmation_ref")
            done[action] = step(f"{action}_training", await call(
                f"{action}_training", run_id=run_id, confirmation_ref=learned["data"]["confirmation_ref"],
                idempotency_key=f"{action}-{opened['data']['request_id']}"),
                *(("state",) if action == "cancel" else ("cleaned", "booking_untouched")))
    return bool(created["data"]["created"] and done["cancel"]["ok"] and done["cleanup"]["ok"]
                and done["cleanup"]["data"]["booking_untouched"])


def person_at_a_terminal(terminal: Terminal, browser: Browser, booking: str, manifest: Path) -> bool:
    """The same path typed by a person: each step runs the command the previous one printed. Then the
    same manifest again, planned and confirmed on purpose: a second run, under a key of its own."""
    print()
    runs = []
    for attempt in ("first", "second"):
        print(f"\n  The {attempt} run of this manifest:")
        planned = terminal.run(["plan", "--booking", booking, "--manifest", str(manifest)])
        request_id = planned["data"]["confirmation_request"]["request_id"]
        print(f"    review URL: {planned['data']['confirmation_request']['review_url']}")
        browser.confirm(request_id)
        confirmed = terminal.run(next_command(planned))  # confirmation --request ... --wait 55 --manifest ...
        train = next_command(confirmed)  # the exact train command: the path, the ref, the key of this request
        created = terminal.run(train)
        again = terminal.run(train)  # typed twice: still one run
        print(f"    run {created['data']['run_id']}: created={created['data']['created']}, "
              f"again: created={again['data']['created']}, key {created['data']['idempotency_key']}")
        runs.append((created, again))
    (first, _), (second, _) = runs
    run_id = second["data"]["run_id"]
    terminal.desk("finish", run_id, why="the reference run passes every remaining stage")
    followed = terminal.run(next_command(second))  # ito-training status --run ... --wait 55
    print(f"    run {run_id}: {followed['data']['state']}")
    return bool(
        all(c["ok"] and c["data"]["created"] is True and a["data"]["created"] is False
            and a["data"]["run_id"] == c["data"]["run_id"] for c, a in runs)
        and first["data"]["run_id"] != second["data"]["run_id"]
        and first["data"]["idempotency_key"] != second["data"]["idempotency_key"]
        and followed["data"]["state"] == "succeeded"
    )


def walk(url: str, workdir: Path) -> bool:
    terminal = Terminal(url, workdir, {})
    account = terminal.desk("accounts", "create", why="an account")["account_id"]
    token_file = workdir / "ito-token"
    terminal.desk("tokens", "mint", "--account", account, "--out", str(token_file),
                  why="its API token, into a new 0600 file; never shown")
    booking = terminal.desk("bookings", "create", "--account", account, "--nodes", "2", "--gpus-per-node", "8",
                            "--fabric", "infiniband", why="a completed booking")["booking_id"]
    manifest = workdir / "manifest.json"
    shutil.copyfile(REPO / "examples" / "manifest.json", manifest)
    manifest.chmod(0o600)
    env = {"ITO_API_URL": url, "ITO_TOKEN_FILE": str(token_file), "ITO_TRAINING_POLL_INTERVAL_S": "0.1"}
    browser = Browser(terminal, account)
    try:
        print("\nPart 1 -- an agent over MCP (ito-training-mcp over stdio)\n")
        by_agent = anyio.run(agent, terminal, env, browser, booking, manifest)
        print("\nPart 2 -- a person at a terminal (ito-training ..., each step the command the last one printed)")
        terminal.env.update(env)
        second = terminal.desk("bookings", "create", "--account", account, "--nodes", "2", "--gpus-per-node", "8",
                               "--fabric", "infiniband", why="another completed booking")["booking_id"]
        by_person = person_at_a_terminal(terminal, browser, second, manifest)
    finally:
        browser.person.close()
    return by_agent and by_person


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="ito-walkthrough-"))
    os.chmod(workdir, 0o700)
    process, url = start_backend(workdir)
    try:
        print(f"reference backend (pid {process.pid}) at {url}\n")
        ok = walk(url, workdir)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    print("\nwalkthrough " + ("completed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
