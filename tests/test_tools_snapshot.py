"""tools/list is a contract: any change to a name, schema, description or hint is a visible diff.

After an intended change, regenerate with `UPDATE_SNAPSHOTS=1 make pytest` and review the diff.
"""

from __future__ import annotations

import json
import os
from typing import Any

from mcp import Client

from ito_training_mcp.doors.mcp.server import build_server
from ito_training_mcp.service import TrainingService

from .conftest import REPO

SNAPSHOT = REPO / "tests" / "snapshots" / "tools_list.json"


async def listed_tools(mode: str) -> list[dict[str, Any]]:
    async with Client(build_server(TrainingService({})), mode=mode) as client:
        tools = (await client.list_tools()).tools
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    return sorted(dumped, key=lambda t: t["name"])


async def test_tools_list_matches_snapshot() -> None:
    modern = await listed_tools("auto")
    legacy = await listed_tools("legacy")
    assert modern == legacy, "both protocol eras must list identical tools"
    rendered = json.dumps(modern, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(rendered)
    assert SNAPSHOT.exists(), "no snapshot yet: run with UPDATE_SNAPSHOTS=1"
    assert rendered == SNAPSHOT.read_text(), "tools/list changed: review it, then UPDATE_SNAPSHOTS=1"
