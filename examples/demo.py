"""`make demo`: the product's main job, end to end, through a real MCP client over stdio.

1. With no backend configured (today's production answer), availability is refused and
   nothing is contacted.
2. The example manifest is digested locally: the sha256 and the review summary a person
   confirms.
3. A submit is refused before anything leaves the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parent.parent
IDEMPOTENCY_KEY = "demo-2026-11-29-atlas-8b-support-sft-dpo"


def show(step: str, envelope: dict[str, Any]) -> None:
    print(f"\n=== {step}")
    print(json.dumps(envelope, indent=2, ensure_ascii=False))


def server(env: dict[str, str]) -> Client:
    params = StdioServerParameters(command=sys.executable, args=["-m", "ito_training_mcp"], env=env)
    return Client(stdio_client(params))


async def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="ito-demo-"))
    try:
        manifest = workdir / "manifest.json"
        shutil.copyfile(REPO / "examples" / "manifest.json", manifest)
        os.chmod(manifest, 0o600)

        print("ito-training-mcp demo: a real MCP client talking to the server over stdio.")
        async with server({}) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            print(f"tools: {', '.join(tools)}")
            check = await client.call_tool("check_training_availability", {"booking_id": "bk_demo_001"})
            show("1. check_training_availability (no backend configured: refused, nothing contacted)",
                 check.structured_content or {})
            digest = await client.call_tool("digest_manifest", {"manifest_path": str(manifest)})
            data = (digest.structured_content or {}).get("data", {})
            show("2. digest_manifest (local only)", {k: v for k, v in (digest.structured_content or {}).items()
                                                     if k != "data"} | {"data": {k: data.get(k) for k in
                                                                                   ("path", "sha256", "size_bytes")}})
            print("\nReview summary the user confirms out of band:\n" + str(data.get("review_text", "")))
            submit = await client.call_tool("submit_training", {
                "booking_id": "bk_demo_001", "manifest_path": str(manifest),
                "confirmation_ref": "cf_demo_unconfirmed", "idempotency_key": IDEMPOTENCY_KEY,
            })
            show("3. submit_training (refused before any credential or network)", submit.structured_content or {})

        ok = (check.is_error and not digest.is_error and submit.is_error
              and not (check.structured_content or {}).get("live_api_contacted")
              and not (submit.structured_content or {}).get("live_api_contacted"))
        print("\nDemo " + ("completed: every step behaved as the contract says." if ok else "FAILED."))
        return 0 if ok else 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(anyio.run(main))
