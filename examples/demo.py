"""`make demo`: the whole story, on loopback, through a real MCP client talking to the server over stdio.

Act 1 -- today's production answer: no backend configured, training is refused and nothing is contacted.
Act 2 -- the reference backend (a conformance server that never trains) stands in for the canonical
         Itô API: availability and eligibility, the digest a person reviews, a submit refused until the
         person confirms out of band, the confirmed submit, and the same submit again (same run).
Act 3 -- following the run (status with progress, logs, metrics, checkpoints), then cancel and cleanup,
         each with its own confirmation, and the booking shown untouched afterwards.

The operator calls printed as "[desk]" stand for what the human does at the Itô desk.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
SUBMIT_KEY = "demo-atlas-8b-support-sft-dpo-0001"
CANCEL_KEY = "demo-cancel-atlas-8b-support-0001"
CLEANUP_KEY = "demo-cleanup-atlas-8b-support-0001"


def banner(text: str) -> None:
    print(f"\n{'=' * 100}\n{text}\n{'=' * 100}")


def show(step: str, envelope: dict[str, Any], *, keep: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Print one envelope readably; `keep` trims long data to the named fields."""
    print(f"\n--- {step}")
    shown = dict(envelope)
    if keep is not None and isinstance(shown.get("data"), dict):
        shown["data"] = {k: v for k, v in shown["data"].items() if k in keep}
    notice = shown.pop("notice", "")
    print(json.dumps(shown, indent=2, ensure_ascii=False))
    print(textwrap.fill(f"notice: {notice}", width=100, subsequent_indent="        "))
    return envelope


def desk(text: str) -> None:
    print("\n" + textwrap.fill(f"[desk] {text}", width=100, subsequent_indent="       "))


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
        check = show("check_training_availability", await tool(client, "check_training_availability", {}))
        checks.expect("act 1 refused", check["error"]["code"] == "TRAINING_UNAVAILABLE")
        checks.expect("act 1 not contacted", check["live_api_contacted"] is False)
        submit = show("submit_training (refused before any credential or network)", await tool(
            client, "submit_training", {"booking_id": "bk_demo", "manifest_path": str(manifest),
                                        "confirmation_ref": "cf_demo", "idempotency_key": SUBMIT_KEY}))
        checks.expect("act 1 submit refused", submit["error"]["code"] == "TRAINING_UNAVAILABLE")


async def acts_two_and_three(workdir: Path, manifest: Path, checks: Checks) -> None:
    from ito_training_mcp.reference_backend import ReferenceBackend

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
        desk(f"account {account} has completed booking {booking_id} (2 nodes x 8 GPUs); its API token is in a "
             f"0600 file the server reads itself (ITO_TOKEN_FILE) -- it never appears below")
        env = {"ITO_API_URL": backend.url, "ITO_TOKEN_FILE": str(token_file), "ITO_TRAINING_POLL_INTERVAL_S": "0.2"}

        async with server(env) as client:
            show("check_training_availability", await tool(client, "check_training_availability", {}))
            eligible = show("check_training_availability with the booking", await tool(
                client, "check_training_availability", {"booking_id": booking_id}), keep=("available", "booking"))
            checks.expect("eligible", eligible["ok"] and eligible["data"]["booking"]["eligible"])

            digest = await tool(client, "digest_manifest", {"manifest_path": str(manifest)})
            show("digest_manifest (local: nothing sent)", digest, keep=("path", "sha256", "size_bytes"))
            sha = digest["data"]["sha256"]
            print("\nThe review summary the person reads before confirming:\n")
            print(textwrap.indent(digest["data"]["review_text"], "    "))

            submit_args = {"booking_id": booking_id, "manifest_path": str(manifest), "confirmation_ref": "",
                           "idempotency_key": SUBMIT_KEY}
            unconfirmed = show("submit_training before anyone confirmed", await tool(
                client, "submit_training", submit_args))
            checks.expect("confirmation required", unconfirmed["error"]["code"] == "CONFIRMATION_REQUIRED")

            confirmation = op.confirmation(account, "training.create", booking_id, "1500.00", manifest_sha256=sha)
            desk(f"the person reviewed digest {sha[:16]}... and confirmed it, up to $1500.00: "
                 f"confirmation {confirmation['ref']} (single use, expires {confirmation['expires_at']})")
            submit_args["confirmation_ref"] = confirmation["ref"]
            created = show("submit_training with the confirmation", await tool(
                client, "submit_training", submit_args), keep=("run_id", "state", "created", "booking_id",
                                                                "manifest_sha256", "idempotency_key"))
            checks.expect("created", created["ok"] and created["data"]["created"] is True)
            run_id = created["data"]["run_id"]
            again = show("the same submit again (a retry after a lost answer looks exactly like this)", await tool(
                client, "submit_training", submit_args), keep=("run_id", "created"))
            checks.expect("same run", again["ok"] and again["data"]["run_id"] == run_id
                          and again["data"]["created"] is False)
            checks.expect("one run", backend.run_count() == 1)
            print(f"\nruns in the backend's database: {backend.run_count()}")

            banner("Act 3 -- following the run, then cancel and cleanup")
            advanced = anyio.Event()

            async def progress(value: float, total: float | None, message: str | None) -> None:
                print(f"    progress {value:5.1f}/{total:.0f}s  {message}")
                if not advanced.is_set():
                    advanced.set()
                    desk("the backend runs data prep and its eval gate passes")
                    await anyio.to_thread.run_sync(op.advance, run_id)
                    await anyio.to_thread.run_sync(op.advance, run_id)

            status = show("training_status, waiting up to 3 s", await tool(
                client, "training_status", {"run_id": run_id, "wait_seconds": 3}, progress_callback=progress),
                keep=("run_id", "state", "stages", "wait"))
            checks.expect("status", status["ok"])
            logs = show("training_logs (first page of 5)", await tool(
                client, "training_logs", {"run_id": run_id, "limit": 5}))
            checks.expect("logs", logs["ok"] and len(logs["data"]["lines"]) > 0)
            checks.expect("metrics", show("training_metrics", await tool(
                client, "training_metrics", {"run_id": run_id}))["ok"])
            checks.expect("checkpoints", show("list_checkpoints", await tool(
                client, "list_checkpoints", {"run_id": run_id}))["ok"])

            before = op.get_booking(booking_id)
            cancel_ref = op.confirmation(account, "training.cancel", booking_id, "0.00", run_id=run_id)["ref"]
            desk(f"the person confirms cancelling {run_id}: confirmation {cancel_ref}")
            cancelled = show("cancel_training", await tool(client, "cancel_training", {
                "run_id": run_id, "confirmation_ref": cancel_ref, "idempotency_key": CANCEL_KEY}),
                keep=("run_id", "state", "action"))
            checks.expect("cancelled", cancelled["ok"] and cancelled["data"]["state"] == "cancelled")

            cleanup_ref = op.confirmation(account, "training.cleanup", booking_id, "0.00", run_id=run_id)["ref"]
            desk(f"the person confirms cleaning up {run_id}: confirmation {cleanup_ref}")
            cleaned = show("cleanup_training", await tool(client, "cleanup_training", {
                "run_id": run_id, "confirmation_ref": cleanup_ref, "idempotency_key": CLEANUP_KEY}),
                keep=("run_id", "cleaned", "booking_untouched"))
            checks.expect("cleaned", cleaned["ok"] and cleaned["data"]["booking_untouched"] is True)
            after = op.get_booking(booking_id)
            untouched = (before["state"], before["updated_at_epoch"]) == (after["state"], after["updated_at_epoch"])
            print(f"\nbooking {booking_id} after cleanup: state={after['state']}, "
                  f"{'unchanged' if untouched else 'CHANGED'} since before the cancel")
            checks.expect("booking untouched", untouched)
            eligible_after = await tool(client, "check_training_availability", {"booking_id": booking_id})
            checks.expect("still eligible", eligible_after["ok"] and eligible_after["data"]["booking"]["eligible"])
            checks.expect("token never shown", token not in json.dumps([eligible, digest, created, status, logs]))


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
