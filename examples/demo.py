"""`make demo`: the whole story, on loopback, through a real MCP client talking to the server over stdio.

Act 1 -- today's production answer: no backend configured, training is refused and nothing is contacted.
Act 2 -- the reference backend (a conformance server that never trains) stands in for the canonical
         Itô API: availability and eligibility, the local digest, then plan_training (the backend's checks,
         the parallelism and precision it chose and why, its estimate stage by stage -- the example's
         data is custom, so a ladder of small proxy runs checks it first -- and a review URL). The
         person signs in at the desk through a single-use link and confirms there, over HTTP exactly
         as a browser would; confirmation_status hands the agent the
         reference; the submit, and the same submit again (same run).
Act 3 -- following the run (status with progress, the ladder's gate, an injected interruption with its
         detection and resume times, logs, metrics, checkpoints), then cancel and cleanup:
         each asked for with request_confirmation, confirmed by the person at the desk, learned with
         confirmation_status, then done; the booking is untouched at the end.

Lines marked "[person]" are what the human does in their browser; "[operator]" is the one thing an
operator does for them (mint the sign-in link). The agent (the MCP client) never touches the desk.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
# The agent's idempotency keys follow the CLI's convention: one per confirmation request, derived from
# its id (train-<request_id>, cancel-<request_id>, cleanup-<request_id>), so every retry of one intent
# reuses it and the next intent gets its own. Act 1 never gets as far as a request.
ACT_ONE_KEY = "train-creq_0000000000000000"
WIDTH = 100


def banner(text: str) -> None:
    print(f"\n{'=' * WIDTH}\n{text}\n{'=' * WIDTH}")


def _compact(data: dict[str, Any]) -> dict[str, Any]:
    """Lists of records on one line each: plan checks, run stages, log lines."""
    shown = dict(data)
    if isinstance(shown.get("checks"), list):
        shown["checks"] = [f"{c['name']}: {c['status']}" + (f" ({c['reason']})" if c.get("reason") else "")
                           for c in shown["checks"]]
    if isinstance(shown.get("stages"), list):
        shown["stages"] = [f"{s['name']}: {s['state']}, gate {s['gate']['status']}"
                           + (f" ({s['gate']['battery']['name']})" if s["gate"].get("battery") else "")
                           for s in shown["stages"]]
    if isinstance(shown.get("interruptions"), list):
        shown["interruptions"] = [f"{i['stage']} at step {i['step']}: detected after {i['detect_s']:g} s, resumed "
                                  f"from step {i['resumed_from_step']} after {i['resume_s']:g} s "
                                  f"({'within' if i['within_targets'] else 'OUTSIDE'} the 10/15-minute targets)"
                                  for i in shown["interruptions"]]
    if isinstance(shown.get("lines"), list):
        shown["lines"] = [f"{line['ts']} [{line['stage'] or '-'}] {line['message']}" for line in shown["lines"]]
    return shown


async def show(step: str, call: Awaitable[dict[str, Any]], *, keep: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Print the step's header, make the call (its progress lines print under the header), then print the
    envelope readably; `keep` trims long data to the named fields."""
    print(f"\n--- {step}")
    envelope = await call
    shown = dict(envelope)
    trimmed: list[str] = []
    if isinstance(shown.get("data"), dict):
        trimmed = [k for k in shown["data"] if keep is not None and k not in keep]
        shown["data"] = _compact({k: v for k, v in shown["data"].items() if keep is None or k in keep})
    notice = shown.pop("notice", "")
    print(json.dumps(shown, indent=2, ensure_ascii=False))
    if trimmed:
        print(textwrap.fill(f"(data trimmed for this page; also in it: {', '.join(trimmed)})", width=WIDTH))
    print(textwrap.fill(f"notice: {notice}", width=WIDTH, subsequent_indent="        "))
    return envelope


def person(text: str) -> None:
    print("\n" + textwrap.fill(f"[person] {text}", width=WIDTH, subsequent_indent="         "))


def operator(text: str) -> None:
    print("\n" + textwrap.fill(f"[operator] {text}", width=WIDTH, subsequent_indent="           "))


def simulated(text: str) -> None:
    print(textwrap.fill(f"    [backend] {text}", width=WIDTH, subsequent_indent="              "))


def server(env: dict[str, str]) -> Client:
    params = StdioServerParameters(command=sys.executable, args=["-m", "ito_training_mcp"], env=env)
    return Client(stdio_client(params))


async def tool(client: Client, name: str, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments, **kw)
    assert result.structured_content is not None
    return result.structured_content


class Checks:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def expect(self, label: str, condition: bool) -> None:
        if not condition:
            self.failures.append(label)


async def act_one(manifest: Path, checks: Checks) -> None:
    banner("Act 1 -- no backend configured (today's production answer)")
    async with server({}) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        print(f"tools offered: {', '.join(tools)}")
        check = await show("check_training_availability", tool(client, "check_training_availability", {}))
        checks.expect("act 1 refused", check["error"]["code"] == "TRAINING_UNAVAILABLE")
        checks.expect("act 1 not contacted", check["live_api_contacted"] is False)
        submit = await show("submit_training (refused before any credential or network)", tool(
            client, "submit_training", {"booking_id": "bk_demo", "manifest_path": str(manifest),
                                        "confirmation_ref": "cnf_5e1d9c0b7a3f2468", "idempotency_key": ACT_ONE_KEY}))
        checks.expect("act 1 submit refused", submit["error"]["code"] == "TRAINING_UNAVAILABLE")


class Desk:
    """The person at the desk, in a browser-like HTTP session of their own (never the operator API for a
    decision). The operator only mints the single-use sign-in link, as `ito-training desk login-link` does."""

    def __init__(self, backend: Any, account: str) -> None:
        from ito_training_reference.desk.person import Person

        link = backend.op.login_link(account)
        operator(f"mints a single-use sign-in link for account {account} (ito-training desk login-link --account "
                 f"{account}); valid until {link['expires_at']}, given only to that person")
        self.browser = Person(str(link["url"]))
        self.browser.sign_in()
        person("opens the link and presses 'Sign in': a session cookie of their own (HttpOnly, SameSite=Strict)")

    def confirm(self, request_id: str, review_url: str, must_show: dict[str, str]) -> str:
        """`must_show`: what the person looks for on the review page (in words), and the text that shows it."""
        from urllib.parse import urlsplit

        page = self.browser.get(urlsplit(review_url).path).text
        missing = [said for said, text in must_show.items() if text not in page]
        person("opens the review URL; the desk shows, from the bytes it holds: " + "; ".join(must_show)
               if not missing else f"MISSING on the review page: {'; '.join(missing)}")
        ref = self.browser.confirm(request_id)
        person(f"presses Confirm; the page shows the confirmation reference {ref}")
        return ref if not missing else ""

    def close(self) -> None:
        self.browser.close()


async def acts_two_and_three(workdir: Path, manifest: Path, checks: Checks) -> None:
    from ito_training_reference import ReferenceBackend

    with ReferenceBackend(db_path=str(workdir / "backend.sqlite3")) as backend:
        op = backend.op
        banner(f"Act 2 -- the reference backend at {backend.url} stands in for the canonical API")
        account = op.account()
        _, token = op.token(account)
        token_file = workdir / "ito-token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        booking = op.booking(account, nodes=2, gpus_per_node=8, fabric="infiniband", region="eu-north")
        booking_id = booking["booking_id"]
        operator(f"account {account} has completed booking {booking_id} (2 nodes x 8 GPUs); its API token is in a "
                 "0600 file the server reads itself (ITO_TOKEN_FILE) -- it never appears below")
        env = {"ITO_API_URL": backend.url, "ITO_TOKEN_FILE": str(token_file), "ITO_TRAINING_POLL_INTERVAL_S": "0.1"}
        desk = Desk(backend, account)

        async with server(env) as client:
            await show("check_training_availability", tool(client, "check_training_availability", {}),
                 keep=("available", "operations"))
            eligible = await show("check_training_availability with the booking", tool(
                client, "check_training_availability", {"booking_id": booking_id}), keep=("available", "booking"))
            checks.expect("eligible", eligible["ok"] and eligible["data"]["booking"]["eligible"])

            digest = await show("digest_manifest (local: nothing sent)", tool(
                client, "digest_manifest", {"manifest_path": str(manifest)}), keep=("path", "sha256", "size_bytes"))
            sha = digest["data"]["sha256"]
            review = str(digest["data"]["review_text"])
            print("\nThe review summary the agent shows the person (data.review_text), built from the bytes it hashed:")
            print(textwrap.indent(review, "    "))
            checks.expect("review shown", sha in review and "$1,200.00" in review)

            plan = await show("plan_training: the backend checks the plan, estimates it, opens a confirmation request",
                              tool(client, "plan_training", {"booking_id": booking_id, "manifest_path": str(manifest)}),
                              keep=("plan_id", "valid", "checks", "parallelism", "estimate", "confirmation_request",
                                    "max_cost_usd"))
            checks.expect("plan valid", plan["ok"] and plan["data"]["valid"] is True)
            layout = plan["data"]["parallelism"]
            print(f"\nThe parallelism and precision the backend chose: data {layout['data']} x tensor "
                  f"{layout['tensor']} x pipeline {layout['pipeline']} on {layout['gpus']} GPUs, sharding "
                  f"{layout['sharding']}, {layout['precision']}; because:")
            for reason in layout["reasons"]:
                print(textwrap.fill(reason, width=WIDTH, initial_indent="  - ", subsequent_indent="    "))
            lines = plan["data"]["estimate"]["stages"]
            print("The estimate, stage by stage (the data is not on the backend's list of known datasets, so the "
                  "ladder comes first):")
            for line in lines:
                print(f"  {line['name']:<10} {line['gpu_hours']:>6g} GPU-hours  ${line['usd']}")
            checks.expect("parallelism chosen", layout["precision"] in ("bf16", "fp8") and bool(layout["reasons"]))
            checks.expect("ladder line", [line["name"] for line in lines][:2] == ["data_prep", "ladder"])
            request = plan["data"]["confirmation_request"]
            print(f"\nThe review URL the agent shows the person (it carries no sign-in):\n    {request['review_url']}")
            submit_key = f"train-{request['request_id']}"
            print(f"The idempotency key the agent chooses now for the submit, and reuses for every retry: {submit_key}")

            pending = await show("confirmation_status before anyone decided", tool(
                client, "confirmation_status", {"request_id": request["request_id"]}),
                keep=("request_id", "status", "confirmation_ref", "review_url"))
            checks.expect("pending", pending["ok"] and pending["data"]["status"] == "pending")

            decided: list[str] = []
            deciding: list[bool] = []  # set before the person's step starts: a second progress
            # notification can arrive while the first is still deciding, and must not decide again
            person_done = anyio.Event()  # set when the person's step is over (see wait_for_the_person)

            async def progress(value: float, total: float | None, message: str | None) -> None:
                print(f"    progress {value:g}/{total:g}  {message}")
                if not deciding:  # the agent is waiting; now the person decides
                    deciding.append(True)
                    try:
                        decided.append(await anyio.to_thread.run_sync(
                            desk.confirm, request["request_id"], request["review_url"],
                            {"the model (atlas-8b)": "atlas-8b",
                             "how each data reference was decontaminated": "decontamination",
                             "at most $1,200.00 for this submission": "$1,200.00",
                             f"the digest {sha[:12]}…": sha}))
                    finally:
                        person_done.set()

            async def wait_for_the_person() -> dict[str, Any]:
                """The wait, shown once the person's step is over too: it can end (confirmed) before the
                person's page has shown its reference, and the story shows the page first."""
                envelope = await tool(client, "confirmation_status",
                                      {"request_id": request["request_id"], "wait_seconds": 20},
                                      progress_callback=progress)
                if deciding:
                    with anyio.move_on_after(60):
                        await person_done.wait()
                return envelope

            confirmed = await show("confirmation_status, waiting up to 20 s while the person decides",
                                   wait_for_the_person(), keep=("request_id", "action", "booking_id", "status",
                                                                "confirmation_ref", "max_cost_usd", "manifest_sha256"))
            ref = confirmed["data"]["confirmation_ref"] if confirmed["ok"] else None
            checks.expect("confirmed", ref is not None and decided == [ref])

            submit_args = {"booking_id": booking_id, "manifest_path": str(manifest), "confirmation_ref": ref,
                           "idempotency_key": submit_key}
            created = await show("submit_training with the confirmation", tool(
                client, "submit_training", submit_args), keep=("run_id", "state", "created", "booking_id",
                                                                "manifest_sha256", "idempotency_key"))
            checks.expect("created", created["ok"] and created["data"]["created"] is True)
            run_id = created["data"]["run_id"]
            again = await show("the same submit again (a retry after a lost answer looks exactly like this)", tool(
                client, "submit_training", submit_args), keep=("run_id", "created"))
            checks.expect("same run", again["ok"] and again["data"]["run_id"] == run_id
                          and again["data"]["created"] is False)
            checks.expect("one run", backend.run_count() == 1)
            print(f"\nruns in the backend's database: {backend.run_count()}")

            banner("Act 3 -- following the run, then cancel and cleanup, each confirmed by the person")
            advanced = anyio.Event()

            async def run_progress(value: float, total: float | None, message: str | None) -> None:
                print(f"    progress {value:g}/{total:g}  {message}")
                if not advanced.is_set():
                    advanced.set()
                    simulated("data prep's eval gate passes, then the ladder's (the small proxy runs find the "
                              "custom data sound), then sft's; dpo starts (the operator API advances the run)")
                    for _ in range(4):
                        await anyio.to_thread.run_sync(op.advance, run_id)

            status = await show("training_status, waiting up to 2 s (progress: the stages passed, plus one half while "
                               "the next one runs, out of all stages)", tool(
                client, "training_status", {"run_id": run_id, "wait_seconds": 2}, progress_callback=run_progress),
                keep=("run_id", "state", "stages", "wait"))
            checks.expect("status", status["ok"] and advanced.is_set())
            ladder = next((s for s in status["data"]["stages"] if s["name"] == "ladder"), None)
            checks.expect("ladder passed", ladder is not None and ladder["gate"]["status"] == "passed")

            simulated("a node fails during dpo (ito-training desk interrupt --run RUN_ID): the backend detects it, "
                      "resumes from the last checkpoint and runs the steps since again")
            await anyio.to_thread.run_sync(lambda: op.interrupt(run_id, detect_s=190, resume_s=560))
            interrupted = await show("training_status after the interruption", tool(
                client, "training_status", {"run_id": run_id}), keep=("run_id", "state", "interruptions"))
            found = interrupted["data"]["interruptions"] if interrupted["ok"] else []
            checks.expect("interruption reported", len(found) == 1 and found[0]["detect_s"] == 190
                          and found[0]["resume_s"] == 560 and found[0]["within_targets"] is True
                          and found[0]["checkpoint_id"] is not None)
            logs = await show("training_logs (the first 4 lines)", tool(
                client, "training_logs", {"run_id": run_id, "limit": 4}))
            checks.expect("logs", logs["ok"] and len(logs["data"]["lines"]) > 0)
            metrics = await show("training_metrics (goodput and the interruption rate follow from the interruption)",
                                 tool(client, "training_metrics", {"run_id": run_id}))
            checks.expect("metrics", metrics["ok"] and metrics["data"]["interruptions"]["count"] == 1
                          and metrics["data"]["goodput"] < 1)
            checks.expect("checkpoints", (await show("list_checkpoints", tool(
                client, "list_checkpoints", {"run_id": run_id})))["ok"])

            before = op.get_booking(booking_id)
            for action in ("cancel", "cleanup"):
                opened = await show(f"request_confirmation for training.{action}", tool(
                    client, "request_confirmation", {"action": f"training.{action}", "run_id": run_id}),
                    keep=("request_id", "action", "status", "review_url"))
                checks.expect(f"{action} requested", opened["ok"])
                action_ref = desk.confirm(opened["data"]["request_id"], opened["data"]["review_url"],
                                          {f"the {action} of run {run_id}": run_id,
                                           "that the booking is untouched": "untouched"})
                learned = await show("confirmation_status", tool(
                    client, "confirmation_status", {"request_id": opened["data"]["request_id"]}),
                    keep=("request_id", "action", "run_id", "status", "confirmation_ref", "next_tool"))
                checks.expect(f"{action} confirmed",
                              learned["ok"] and learned["data"]["confirmation_ref"] == action_ref)
                done = await show(f"{action}_training", tool(client, f"{action}_training", {
                    "run_id": run_id, "confirmation_ref": learned["data"]["confirmation_ref"],
                    "idempotency_key": f"{action}-{opened['data']['request_id']}"}),
                    keep=("run_id", "state", "action", "cleaned", "booking_untouched"))
                checks.expect(f"{action} done", done["ok"])
                if action == "cancel":
                    checks.expect("cancelled", done["data"]["state"] == "cancelled")
                else:
                    checks.expect("cleaned", done["data"]["booking_untouched"] is True)

            after = op.get_booking(booking_id)
            untouched = (before["state"], before["updated_at_epoch"]) == (after["state"], after["updated_at_epoch"])
            print(f"\nbooking {booking_id} after cleanup: state={after['state']}, "
                  f"{'unchanged' if untouched else 'CHANGED'} since before the cancel")
            checks.expect("booking untouched", untouched)
            eligible_after = await tool(client, "check_training_availability", {"booking_id": booking_id})
            checks.expect("still eligible", eligible_after["ok"] and eligible_after["data"]["booking"]["eligible"])
            checks.expect("token never shown", token not in json.dumps([eligible, digest, plan, confirmed, created,
                                                                        status, logs]))
        desk.close()


async def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="ito-demo-"))
    checks = Checks()
    try:
        manifest = workdir / "manifest.json"
        shutil.copyfile(REPO / "examples" / "manifest.json", manifest)
        os.chmod(manifest, 0o600)
        print("ito-training-mcp demo: a real MCP client talking to `python -m ito_training_mcp` over stdio.")
        await act_one(manifest, checks)
        await acts_two_and_three(workdir, manifest, checks)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if checks.failures:
        print(f"\nDemo FAILED: {', '.join(checks.failures)}")
        return 1
    print("\nDemo completed: every step behaved as the contract says.")
    return 0


if __name__ == "__main__":
    raise SystemExit(anyio.run(main))
