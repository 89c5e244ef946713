"""Benchmarks of ito-training-mcp, each reported as a ratio against a baseline measured in the same run.

    .venv/bin/python bench/run.py            # full (make bench), ~1-2 minutes on 2 cores
    .venv/bin/python bench/run.py --quick    # smoke mode, fewer repetitions, well under 30 s
    .venv/bin/python bench/run.py --out /tmp/results.json

Everything runs in this process tree: MCP servers are children over stdio (closed by the SDK's
stdio client, which shuts them down and reaps them), the reference backend is a thread of this
process. A missed goal is reported, never turned into a failing exit code. See bench/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import ssl
import statistics
import sys
import tempfile
import time
import unicodedata
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
from common import Result, Row, percentile, ratio, summary
from digest_bench import bench_digest, bench_digest_hostile, write_private

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
ECHO_SERVER = BENCH / "echo_server.py"
EXAMPLE_MANIFEST = REPO / "examples" / "manifest.json"
MIB = 1024 * 1024
CLIENT_MODE = "legacy"  # the 2025-11-25 handshake most desktop clients use today; the same for both servers


@dataclass(frozen=True)
class Plan:
    """How many repetitions each benchmark gets."""

    cold_pairs: int
    latency_calls: int
    latency_warmup: int
    digest_reps: int
    digest_breakdown_reps: int
    warm_submits: int
    hostile_reps: int
    concurrent_submits: int = 64
    concurrent_keys: int = 16


FULL = Plan(cold_pairs=11, latency_calls=400, latency_warmup=30, digest_reps=25, digest_breakdown_reps=5,
            warm_submits=20, hostile_reps=9)
QUICK = Plan(cold_pairs=3, latency_calls=100, latency_warmup=10, digest_reps=3, digest_breakdown_reps=0,
             warm_submits=5, hostile_reps=1)


# ---------------------------------------------------------------------- MCP servers over stdio


def _stdio_params(args: list[str]) -> Any:
    from mcp import StdioServerParameters

    # env=None: the SDK passes only its safe default variables (PATH, HOME, ...), so no ITO_*
    # setting of the calling shell reaches either server. Training is therefore unavailable.
    return StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO))


ITO_ARGS = ["-m", "ito_training_mcp"]
ECHO_ARGS = [str(ECHO_SERVER)]


async def cold_start_once(args: list[str]) -> tuple[float, int]:
    """Spawn -> initialize -> tools/list, in seconds; the shutdown that follows is not counted."""
    from mcp import Client

    started = time.perf_counter()
    async with Client(_stdio_params(args), mode=CLIENT_MODE) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - started
    return elapsed, len(tools.tools)


LAZY_MODULES = (
    "ito_training_mcp.backend.client", "ito_training_mcp.backend.models", "ito_training_reference",
    "ito_training_mcp.secret_scan", "ito_training_mcp.doors.cli.main", "httpx",
)
_PROBE = (
    "import json, sys\n"
    "from ito_training_mcp.doors.mcp.server import build_server\n"
    "build_server()\n"
    "print(json.dumps(sorted(sys.modules)))\n"
)


async def startup_imports() -> dict[str, Any]:
    """What the server process imports before it serves (python -X importtime), and which of the
    modules that should load lazily (on first use) are already there."""
    proc = await anyio.run_process([sys.executable, "-X", "importtime", "-c", _PROBE], cwd=str(REPO), check=True)
    modules = set(json.loads(proc.stdout))
    own: dict[str, int] = {}
    cumulative: dict[str, int] = {}
    for line in proc.stderr.decode().splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        self_us, cum_us, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        cumulative[name] = int(cum_us)
        if name.startswith("ito_training_mcp"):
            own[name] = int(self_us)
    top = sorted(own.items(), key=lambda kv: kv[1], reverse=True)[:8]
    return {
        "ito_training_mcp_self_ms": sum(own.values()) / 1000.0,
        "ito_training_mcp_top_self_ms": {k: v / 1000.0 for k, v in top},
        "mcp_cumulative_ms": cumulative.get("mcp", 0) / 1000.0,
        "mcp_server_module_cumulative_ms": cumulative.get("ito_training_mcp.doors.mcp.server", 0) / 1000.0,
        "lazy_modules_loaded_at_start": [m for m in LAZY_MODULES if m in modules],
        "modules_at_start": len(modules),
    }


async def bench_cold_start(plan: Plan) -> Result:
    ito: list[float] = []
    echo: list[float] = []
    tool_counts: dict[str, int] = {}
    # One unmeasured start warms the page cache for both: the echo server reads a subset of the same files.
    await cold_start_once(ITO_ARGS)
    for i in range(plan.cold_pairs):
        order = [("ito", ITO_ARGS), ("echo", ECHO_ARGS)]
        if i % 2:
            order.reverse()
        for label, args in order:
            elapsed, n_tools = await cold_start_once(args)
            (ito if label == "ito" else echo).append(elapsed)
            tool_counts[label] = n_tools
    imports = await startup_imports()
    paired = [a / b for a, b in zip(ito, echo, strict=True)]
    r = ratio(statistics.median(ito), statistics.median(echo))
    return Result(
        "cold_start",
        "cold start: spawn -> initialize -> tools/list",
        [
            Row("median (s)", statistics.median(ito), statistics.median(echo), "s", r, "<= 1.15x", r <= 1.15),
            Row("min (s), least disturbed run", min(ito), min(echo), "s", ratio(min(ito), min(echo)), "report", None),
        ],
        raw={"ito_s": ito, "echo_s": echo, "paired_ratios": paired, "median_paired_ratio": statistics.median(paired),
             "tools_listed": tool_counts, "client_mode": CLIENT_MODE, "pairs": plan.cold_pairs,
             "order": "alternating (ito first on even pairs, echo first on odd pairs)",
             "startup_imports": imports},
    )


async def bench_latency(plan: Plan) -> Result:
    """A refused check_training_availability vs the echo tool, interleaved over two warm sessions."""
    from mcp import Client

    async def timed(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[float, Any]:
        started = time.perf_counter()
        result = await client.call_tool(tool, arguments)
        return time.perf_counter() - started, result

    ito: list[float] = []
    echo: list[float] = []
    async with AsyncExitStack() as stack:
        ito_client = await stack.enter_async_context(Client(_stdio_params(ITO_ARGS), mode=CLIENT_MODE))
        echo_client = await stack.enter_async_context(Client(_stdio_params(ECHO_ARGS), mode=CLIENT_MODE))
        calls: dict[str, Callable[[], Awaitable[tuple[float, Any]]]] = {
            "ito": lambda: timed(ito_client, "check_training_availability", {}),
            "echo": lambda: timed(echo_client, "echo", {"text": "ping"}),
        }
        _, first = await calls["ito"]()
        envelope = first.structured_content or {}
        if not (first.is_error and envelope.get("error", {}).get("code") == "TRAINING_UNAVAILABLE"):
            raise RuntimeError("check_training_availability was expected to refuse with TRAINING_UNAVAILABLE")
        for _ in range(plan.latency_warmup):
            await calls["ito"]()
            await calls["echo"]()
        for i in range(plan.latency_calls):
            order = ("ito", "echo") if i % 2 == 0 else ("echo", "ito")
            for label in order:
                elapsed, _ = await calls[label]()
                (ito if label == "ito" else echo).append(elapsed)
    ms = 1000.0
    p50 = (percentile(ito, 50) * ms, percentile(echo, 50) * ms)
    p99 = (percentile(ito, 99) * ms, percentile(echo, 99) * ms)
    r50, r99 = ratio(*p50), ratio(*p99)
    return Result(
        "stdio_latency",
        "stdio latency: refused check_training_availability vs echo (one warm session each)",
        [
            Row("p50 (ms)", p50[0], p50[1], "ms", r50, "<= 1.10x", r50 <= 1.10),
            Row("p99 (ms)", p99[0], p99[1], "ms", r99, "<= 1.10x", r99 <= 1.10),
        ],
        raw={"ito": summary([x * ms for x in ito]), "echo": summary([x * ms for x in echo]),
             "ito_ms": [round(x * ms, 4) for x in ito], "echo_ms": [round(x * ms, 4) for x in echo],
             "calls_each": plan.latency_calls, "warmup_each": plan.latency_warmup, "client_mode": CLIENT_MODE},
    )


# ---------------------------------------------------------------------- the reference backend


@dataclass
class Tenant:
    """One account on the reference backend, its token, a completed booking and a manifest."""

    backend: Any
    account: str
    token: str
    booking: str
    manifest_path: str
    sha256: str

    @property
    def env(self) -> dict[str, str]:
        # Default timeouts and the default ITO_TRAINING_CAPABILITIES_TTL_S (capabilities and identity cached).
        return {"ITO_API_URL": self.backend.url, "ITO_API_KEY": self.token}

    def confirm(self) -> str:
        c = self.backend.op.confirmation(self.account, "training.create", self.booking, "1500.00",
                                         manifest_sha256=self.sha256)
        return str(c["ref"])

    def v1_requests(self) -> list[dict[str, Any]]:
        """The API requests; the origin proof plain http asks once per call is counted apart (`proofs`)."""
        return [r for r in self.backend.op.requests() if str(r["path"]).startswith("/v1/")
                and r["path"] != "/v1/origin-proof"]

    def proofs(self) -> int:
        return sum(r["path"] == "/v1/origin-proof" for r in self.backend.op.requests())


def new_tenant(backend: Any, workdir: Path) -> Tenant:
    op = backend.op
    account = op.account()
    _, token = op.token(account)
    booking = op.booking(account, nodes=2, gpus_per_node=8, fabric="infiniband")["booking_id"]
    content = EXAMPLE_MANIFEST.read_bytes()
    path = write_private(workdir, "submit-manifest.json", content)
    return Tenant(backend, account, token, booking, path, hashlib.sha256(content).hexdigest())


def new_key(label: str) -> str:
    return f"bench-{label}-{uuid.uuid4().hex}"


async def submit(service: Any, tenant: Tenant, key: str, ref: str) -> Any:
    return await service.submit_training(tenant.booking, tenant.manifest_path, ref, key)


async def timed_submit(service: Any, tenant: Tenant, label: str) -> tuple[float, list[dict[str, Any]], Any]:
    """One submit with its own key and confirmation; its latency and the /v1 requests it caused."""
    key, ref = new_key(label), tenant.confirm()
    tenant.backend.op.clear_requests()
    started = time.perf_counter()
    envelope = await submit(service, tenant, key, ref)
    elapsed = time.perf_counter() - started
    if not (envelope.ok and envelope.data and envelope.data["created"] is True):
        raise RuntimeError(f"a benchmark submit failed: {envelope.to_dict().get('error')}")
    return elapsed, tenant.v1_requests(), envelope


async def one_round_trip(url: str, tls: Any) -> float:
    """Baseline: one GET /v1/capabilities on a fresh connection (each tool call opens its own client),
    with an SSL context made once in advance, so that only the round trip is timed."""
    import httpx

    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, trust_env=False, verify=tls) as client:
        response = await client.get("/v1/capabilities")
        response.raise_for_status()
    return time.perf_counter() - started


async def bench_submit(plan: Plan, tenant: Tenant) -> Result:
    from ito_training_mcp.service import TrainingService

    service = TrainingService(tenant.env)
    cold_s, cold_requests, _ = await timed_submit(service, tenant, "cold")
    warm: list[float] = []
    warm_counts: list[int] = []
    warm_paths: list[str] = []
    warm_proofs = 0
    for i in range(plan.warm_submits):
        elapsed, requests, _ = await timed_submit(service, tenant, "warm")
        warm.append(elapsed)
        warm_counts.append(len(requests))
        warm_proofs = tenant.proofs()
        if i == 0:
            warm_paths = [f"{r['method']} {r['path']}" for r in requests]
    tls = ssl.create_default_context()
    round_trips = [await one_round_trip(tenant.backend.url, tls) for _ in range(max(10, plan.warm_submits))]
    ssl_context_s: list[float] = []
    for _ in range(5):  # what BackendClient.__aenter__ pays on every tool call, even for http://127.0.0.1
        started = time.perf_counter()
        ssl.create_default_context()
        ssl_context_s.append(time.perf_counter() - started)

    ms = 1000.0
    worst = max(warm_counts)
    warm_ms, rt_ms = statistics.median(warm) * ms, statistics.median(round_trips) * ms
    return Result(
        "warm_submit",
        "submit_training against the reference backend (default capabilities TTL)",
        [
            Row("backend API requests, warm (cold); the plain-http origin proof apart", worst, len(cold_requests),
                "req", None, "warm <= 4", worst <= 4),
            Row("warm latency median (ms) vs 1 GET", warm_ms, rt_ms, "ms", ratio(warm_ms, rt_ms), "report", None),
        ],
        raw={"cold_requests": [f"{r['method']} {r['path']}" for r in cold_requests],
             "cold_latency_ms": cold_s * ms, "warm_requests": warm_paths, "warm_request_counts": warm_counts,
             "warm_origin_proofs_per_submit": warm_proofs,
             "warm_latency_ms": summary([x * ms for x in warm]),
             "baseline_get_capabilities_ms": summary([x * ms for x in round_trips]),
             "ssl_create_default_context_ms": statistics.median(ssl_context_s) * ms,
             "warm_submits": plan.warm_submits},
    )


async def bench_concurrent(plan: Plan, tenant: Tenant, warm_median_ms: float) -> Result:
    """64 concurrent submits over 16 keys through one (fresh) service: exactly 16 runs."""
    from ito_training_mcp.service import TrainingService

    backend = tenant.backend
    keys = [(new_key("concurrent"), tenant.confirm()) for _ in range(plan.concurrent_keys)]
    per_key = plan.concurrent_submits // plan.concurrent_keys
    service = TrainingService(tenant.env)
    runs_before = backend.run_count()
    backend.op.clear_requests()
    envelopes: list[Any] = []

    async def one(key: str, ref: str) -> None:
        envelopes.append(await submit(service, tenant, key, ref))

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(per_key):
            for key, ref in keys:
                tg.start_soon(one, key, ref)
    wall = time.perf_counter() - started
    new_runs = backend.run_count() - runs_before
    per_key_runs = [backend.runs_for_key(tenant.account, key) for key, _ in keys]
    outcomes = Counter(
        ("created" if e.data["created"] else "existing") if e.ok else e.error.code.value for e in envelopes
    )
    requests = Counter(f"{r['method']} {r['path'].split('/')[2]}" for r in tenant.v1_requests())
    sequential_ms = warm_median_ms * len(envelopes)
    wall_ms = wall * 1000.0
    return Result(
        "concurrent_submits",
        f"{len(envelopes)} concurrent submits over {len(keys)} keys (one fresh service)",
        [
            Row("runs created (want 16)", new_runs, plan.concurrent_keys, "runs", None, "== 16",
                new_runs == plan.concurrent_keys and max(per_key_runs) == 1),
            Row("wall (ms) vs 64 x warm median", wall_ms, sequential_ms, "ms", ratio(wall_ms, sequential_ms),
                "report", None),
            # Cold caches: one capabilities and one identity request in flight, shared by every call.
            Row("cold GET /v1/capabilities (want 1)", requests["GET capabilities"], len(envelopes), "req", None,
                "== 1", requests["GET capabilities"] == 1),
            Row("cold GET /v1/me (want 1)", requests["GET me"], len(envelopes), "req", None, "== 1",
                requests["GET me"] == 1),
        ],
        raw={"wall_ms": wall_ms, "runs_created": new_runs, "runs_per_key": per_key_runs,
             "outcomes": dict(outcomes), "all_ok": all(e.ok for e in envelopes),
             "v1_requests_by_route": dict(requests), "v1_requests_total": sum(requests.values())},
    )


# ---------------------------------------------------------------------- report


def machine() -> dict[str, Any]:
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpus_available": len(affinity) if affinity is not None else None,
        "mcp": version("mcp"),
        "ito_training_mcp": version("ito-training-mcp"),
        "httpx": version("httpx"),
        # The secret scanner's NFKC for text that changes in many ways: ICU where the `icu` extra is
        # installed (the hostile inputs' figures depend on it), else `unicodedata` alone.
        "icu": _icu_in_use(),
        "unicode": unicodedata.unidata_version,
    }


def _icu_in_use() -> str | None:
    """ICU's version and Unicode's, where the scanner uses it; None where it does not."""
    try:
        from ito_training_mcp import icu_normal
    except ImportError:  # an older tree (to measure "before")
        return None
    if not icu_normal.available():
        return None
    import icu  # type: ignore[import-not-found, import-untyped, unused-ignore]

    return f"ICU {icu.ICU_VERSION} (Unicode {icu.UNICODE_VERSION}, filtered to {unicodedata.unidata_version})"


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("req", "runs"):
        return f"{value:g}"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "s":
        return f"{value:.3f} s"
    return f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms"


def table(results: list[Result]) -> str:
    header = ["benchmark", "measure", "ito-training-mcp", "baseline", "ratio", "goal", "result"]
    lines = [header, ["---"] * len(header)]
    for res in results:
        for row in res.rows:
            verdict = "-" if row.passed is None else ("PASS" if row.passed else "MISS")
            lines.append([res.name, row.measure, fmt(row.subject, row.unit), fmt(row.baseline, row.unit),
                          "-" if row.ratio is None else f"{row.ratio:.2f}x", row.goal, verdict])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |"
                     for line in lines)


def to_json(res: Result) -> dict[str, Any]:
    return {
        "title": res.title,
        "passed": res.passed,
        "rows": [{"measure": r.measure, "subject": r.subject, "baseline": r.baseline, "unit": r.unit,
                  "ratio": r.ratio, "goal": r.goal,
                  "passed": r.passed} for r in res.rows],
        "raw": res.raw,
    }


async def run_all(plan: Plan, progress: Callable[[str], None], only: str | None = None) -> list[Result]:
    from ito_training_reference import ReferenceBackend

    results: list[Result] = []
    workdir = Path(tempfile.mkdtemp(prefix="ito-bench-"))  # mode 0700, owned by us: a safe manifest home
    try:
        if only in (None, "startup"):
            progress("cold start (spawn -> initialize -> tools/list)")
            results.append(await bench_cold_start(plan))
            progress("stdio latency (refused check vs echo)")
            results.append(await bench_latency(plan))
        if only in (None, "digest"):
            progress("digest_manifest on two ~1 MiB shapes")
            results.append(await bench_digest(plan.digest_reps, plan.digest_breakdown_reps, workdir))
            progress("digest_manifest on hostile inputs")
            results.append(await bench_digest_hostile(plan.hostile_reps, workdir))
        if only not in (None, "submit"):
            return results
        progress("submit_training against the reference backend")
        with ReferenceBackend() as backend:
            tenant = new_tenant(backend, workdir)
            submit_result = await bench_submit(plan, tenant)
            results.append(submit_result)
            progress("64 concurrent submits over 16 keys")
            warm_ms = float(submit_result.raw["warm_latency_ms"]["median"])
            results.append(await bench_concurrent(plan, tenant, warm_ms))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke mode: fewer repetitions (well under 30 s)")
    parser.add_argument("--out", default=str(BENCH / "results.json"), help="where to write the JSON results")
    parser.add_argument("--only", choices=("startup", "digest", "submit"),
                        help="run one group of benchmarks (results go to --out as usual)")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    results = anyio.run(run_all, plan, progress, args.only)
    duration = time.perf_counter() - started
    print(table(results))
    print(f"\nmode: {'quick' if args.quick else 'full'}; {duration:.1f} s; "
          f"python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPUs; "
          f"the scanner's NFKC: {_icu_in_use() or 'unicodedata (no icu extra)'}")
    missed = [r.name for r in results if r.passed is False]
    if missed:
        print("goals missed (reported, not failed): " + ", ".join(missed))
    document = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]) if argv is None else None,
        "mode": "quick" if args.quick else "full",
        "plan": asdict(plan),
        "duration_s": duration,
        "machine": machine(),
        "benchmarks": {r.name: to_json(r) for r in results},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
