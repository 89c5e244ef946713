"""The MCP server as a client meets it: `python -m ito_training_mcp` over stdio, driven by the SDK's `Client`.

No ITO_* variable reaches the server (the SDK passes only its safe defaults), so no backend is configured:
`check_training_availability` refuses at once (the trivial call) and `digest_manifest` works locally.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from common import Row, percentile, summary_ms
from mcp import Client, StdioServerParameters

from ito_training_mcp.gates.manifest.schema import parse_manifest

REPO = Path(__file__).resolve().parent.parent
ITO = ["-m", "ito_training_mcp"]
ECHO = [str(REPO / "bench" / "echo_server.py")]
KIB = 1024
MIB = 1024 * KIB
CALL_TIMEOUT_S = 120.0
T = TypeVar("T")


@asynccontextmanager
async def session(args: list[str]) -> AsyncIterator[tuple[Client, int]]:
    """A client connected to a new server process over stdio, and that process's id."""
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO))
    before = _children()
    async with Client(params, mode="legacy", read_timeout_seconds=CALL_TIMEOUT_S) as client:
        (pid,) = _children() - before
        yield client, pid


def _children() -> set[int]:
    """The ids of this process's children, from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.add(int(entry.name))
    return found


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set size so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc")


async def timed(call: Awaitable[T]) -> tuple[float, T]:
    started = time.perf_counter()
    result = await call
    return time.perf_counter() - started, result


def code(result: Any) -> str:
    """"ok", or the refusal's error code."""
    return str(result.structured_content["error"]["code"]) if result.is_error else "ok"


def expect(result: Any, wanted: str) -> Any:
    if code(result) != wanted:
        raise RuntimeError(f"expected {wanted}, got {code(result)}")
    return result


def parse_baseline(content: bytes) -> float:
    """sha256 + json.loads of the bytes, in seconds: the least any digest must do."""
    started = time.perf_counter()
    hashlib.sha256(content).digest()
    json.loads(content)
    return time.perf_counter() - started


# ---------------------------------------------------------------------- start-up and a trivial call


async def startup_rows(pairs: int, calls: int) -> list[Row]:
    """Cold start and a trivial call's latency, against the bare echo server on the same SDK."""
    async def cold(args: list[str]) -> float:
        started = time.perf_counter()
        async with session(args) as (client, _):
            await client.list_tools()
            return time.perf_counter() - started  # the shutdown is not counted

    await cold(ITO)  # warms the page cache for both
    ito: list[float] = []
    echo: list[float] = []
    for i in range(pairs):
        for label in (("ito", "echo") if i % 2 == 0 else ("echo", "ito")):
            (ito if label == "ito" else echo).append(await cold(ITO if label == "ito" else ECHO))
    cold_ratio = statistics.median(ito) / statistics.median(echo)

    ito_calls: list[float] = []
    echo_calls: list[float] = []
    async with session(ITO) as (ito_client, _), session(ECHO) as (echo_client, _):
        expect(await ito_client.call_tool("check_training_availability", {}), "TRAINING_UNAVAILABLE")
        for i in range(calls + calls // 10):  # the first tenth warms up
            for label in (("ito", "echo") if i % 2 == 0 else ("echo", "ito")):
                if label == "ito":
                    elapsed, _ = await timed(ito_client.call_tool("check_training_availability", {}))
                    ito_calls.append(elapsed)
                else:
                    elapsed, _ = await timed(echo_client.call_tool("echo", {"text": "ping"}))
                    echo_calls.append(elapsed)
    ito_calls, echo_calls = ito_calls[calls // 10:], echo_calls[calls // 10:]
    rows = [Row("start-up", "cold start (spawn, initialize, tools/list) vs the echo server", cold_ratio, "x",
                detail=f"{statistics.median(ito) * 1000:.0f} ms vs {statistics.median(echo) * 1000:.0f} ms",
                raw={"ito_ms": [round(s * 1000, 1) for s in ito], "echo_ms": [round(s * 1000, 1) for s in echo]},
                summary="cold start vs a bare echo server")]
    for q in (50, 99):
        a, b = percentile(ito_calls, q) * 1000, percentile(echo_calls, q) * 1000
        rows.append(Row("start-up", f"trivial call p{q} vs echo", a / b, "x", "<= 1.10x", a / b <= 1.10,
                        f"{a:.2f} ms vs {b:.2f} ms", summary="trivial call p50 and p99 vs the echo server"))
    rows[-1].raw = {"ito": summary_ms(ito_calls), "echo": summary_ms(echo_calls)}
    return rows


# ---------------------------------------------------------------------- tools/list and one big digest


async def tools_list_rows() -> list[Row]:
    async with session(ITO) as (client, _):
        tools = await client.list_tools()
    size = len(tools.model_dump_json(by_alias=True, exclude_none=True).encode())
    return [Row("tools/list", "tools/list result, bytes", size, "bytes", "<= 48 KiB", size <= 48 * KIB,
                f"{len(tools.tools)} tools", summary="tools/list result")]


async def digest_rows(path: str, content: bytes, reps: int) -> list[Row]:
    """digest_manifest of a 1 MiB manifest, minus a refusal's round trip, vs sha256 + json.loads; and gate 2
    alone in this process (read apart), to show how much of the call is the gate itself."""
    whole, relative = {"manifest_path": path}, {"manifest_path": Path(path).name}
    digests: list[float] = []
    refusals: list[float] = []
    baselines: list[float] = []
    gates: list[float] = []
    async with session(ITO) as (client, _):
        for _ in range(3):  # the first digest imports what digesting needs
            result = expect(await client.call_tool("digest_manifest", whole), "ok")
            expect(await client.call_tool("digest_manifest", relative), "MANIFEST_PATH_INVALID")
            parse_manifest(content)
        for _ in range(reps):
            elapsed, result = await timed(client.call_tool("digest_manifest", whole))
            digests.append(elapsed)
            elapsed, _ = await timed(client.call_tool("digest_manifest", relative))
            refusals.append(elapsed)
            baselines += [parse_baseline(content) for _ in range(3)]
            started = time.perf_counter()
            parse_manifest(content)
            gates.append(time.perf_counter() - started)
    digest_s, refusal_s, baseline_s, gate_s = (statistics.median(x) for x in (digests, refusals, baselines, gates))
    value = (digest_s - refusal_s) / baseline_s
    structured = len(json.dumps(result.structured_content, ensure_ascii=False).encode())
    text = max(len(block.text.encode()) for block in result.content)
    size = max(structured, text)
    return [
        Row("digest over MCP", "1 MiB digest minus a refusal vs sha256 + json.loads", value, "x", "<= 5x",
            value <= 5, f"{digest_s * 1000:.1f} - {refusal_s * 1000:.1f} ms vs {baseline_s * 1000:.2f} ms",
            raw={"bytes": len(content), "digest": summary_ms(digests), "refusal": summary_ms(refusals),
                 "baseline": summary_ms(baselines)}, summary="1 MiB digest over MCP, minus a refusal"),
        Row("digest over MCP", "gate 2 in process (parse, scan, validate) vs sha256 + json.loads", gate_s / baseline_s,
            "x", detail=f"{gate_s * 1000:.1f} ms vs {baseline_s * 1000:.2f} ms", raw={"gate": summary_ms(gates)}),
        Row("digest over MCP", "1 MiB digest result, bytes (larger of structured, text)", size, "bytes", "<= 16 KiB",
            size <= 16 * KIB, f"structured {structured}, text {text}", summary="1 MiB digest result"),
    ]


# ---------------------------------------------------------------------- load


async def load_rows(path: str, concurrent: int, idle_calls: int) -> list[Row]:
    """`concurrent` digests of a 1 MiB manifest at once over one session, while a trivial call runs in a loop."""
    def trivial() -> Awaitable[Any]:
        return client.call_tool("check_training_availability", {})

    async with session(ITO) as (client, pid):
        expect(await client.call_tool("digest_manifest", {"manifest_path": path}), "ok")
        for _ in range(idle_calls // 10):
            await trivial()
        idle = [(await timed(trivial()))[0] for _ in range(idle_calls)]
        idle_rss = peak_rss_mib(pid)

        outcomes: Counter[str] = Counter()
        busy: list[float] = []
        finished = anyio.Event()

        async def digest() -> None:
            outcomes[code(await client.call_tool("digest_manifest", {"manifest_path": path}))] += 1
            if outcomes.total() == concurrent:
                finished.set()

        async def loop() -> None:
            while not finished.is_set():
                busy.append((await timed(trivial()))[0])

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrent):
                tg.start_soon(digest)
            tg.start_soon(loop)
        wall = time.perf_counter() - started
        peak = peak_rss_mib(pid)
    idle_p99, busy_p99 = percentile(idle, 99) * 1000, percentile(busy, 99) * 1000
    raw = {"concurrent": concurrent, "outcomes": dict(outcomes), "wall_s": round(wall, 2),
           "idle": summary_ms(idle), "busy": summary_ms(busy), "idle_peak_rss_mib": round(idle_rss, 1)}
    return [
        Row("load", f"server peak RSS, {concurrent} concurrent 1 MiB digests, MiB", peak, "MiB", "<= 250 MiB",
            peak <= 250, f"{idle_rss:.0f} MiB idle; {outcomes['RATE_LIMITED']} refused RATE_LIMITED; {wall:.0f} s",
            raw=raw, summary=f"server peak RSS, {concurrent} concurrent 1 MiB digests"),
        Row("load", "trivial call p99 during the load, ms", busy_p99, "ms", "<= 100 ms", busy_p99 <= 100,
            f"{busy_p99 / idle_p99:.1f}x idle p99 of {idle_p99:.1f} ms; {len(busy)} calls",
            summary="trivial call p99 during that load"),
        Row("load", "trivial call p99 during the load vs idle", busy_p99 / idle_p99, "x",
            detail=f"{busy_p99:.1f} ms vs {idle_p99:.1f} ms"),
        Row("load", "digests refused RATE_LIMITED", outcomes["RATE_LIMITED"], "count",
            detail=", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()))),
    ]
