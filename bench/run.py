"""The benchmark: every row a ratio to a baseline measured in the same run, or an absolute bound, with its goal.

    .venv/bin/python bench/run.py            # full (make bench): writes bench/results.json and bench/README_TABLE.md
    .venv/bin/python bench/run.py --quick    # smoke run, fewer repetitions; writes only where --out says
    .venv/bin/python bench/run.py --table    # bench/README_TABLE.md again from bench/results.json, no measuring

A missed goal is reported, never turned into a failing exit code. bench/README.md says what each row means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import desk_render_bench
import mcp_bench
import scanner_bench
from common import Row
from manifests import realistic_manifest, write_private

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results.json"
TABLE = BENCH / "README_TABLE.md"
TABLE_MAX_LINES = 15


@dataclass(frozen=True)
class Plan:
    """How much each benchmark does."""

    cold_pairs: int
    trivial_calls: int
    digest_reps: int
    concurrent_digests: int
    idle_calls: int


FULL = Plan(cold_pairs=11, trivial_calls=400, digest_reps=25, concurrent_digests=512, idle_calls=300)
QUICK = Plan(cold_pairs=3, trivial_calls=100, digest_reps=5, concurrent_digests=64, idle_calls=100)


def scanner_rows(quick: bool) -> list[Row]:
    """scanner_bench's rows, as they are, in the common shape."""
    rows = []
    for r in scanner_bench.rows(quick):
        name = r["row"]
        if "ratio" not in r:  # a fresh process's first scan, in ms above a warm one
            rows.append(Row("scanner", name, r["extra_ms"], "ms", r["line"], r["passed"], raw=r,
                            summary="scanner: fresh process, first scan minus warm"))
            continue
        if name.startswith("fresh `ito-training digest`"):
            rows.append(Row("scanner", name, r["ratio"], "x", r["line"], r["passed"],
                            f"{r['scan_ms']:g} ms vs {r['baseline_ms']:g} ms", raw=r,
                            summary="fresh `ito-training digest`, 8 languages vs ASCII"))
            continue
        detail = f"{r['scan_ms']:g} ms vs {r['baseline_ms']:g} ms, {r['bytes']:,} bytes"
        if "doubling" in r:
            detail += f"; half the size costs 1/{r['doubling']:g}"
        summary = ("scanner: hostile inputs <= 1 MiB" if name.startswith("hostile")
                   else "" if name.startswith("worst") else "scanner: example and 64 KiB manifests, 8 languages")
        rows.append(Row("scanner", name, r["ratio"], "x", r["line"], r["passed"], detail, raw=r, summary=summary))
    return rows


async def mcp_rows(plan: Plan, progress: Any) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="ito-bench-") as tmp:  # mode 0700: a safe home for a manifest
        content = realistic_manifest()
        path = write_private(Path(tmp), "manifest.json", content)
        progress("start-up and a trivial call, against the echo server")
        rows += await mcp_bench.startup_rows(plan.cold_pairs, plan.trivial_calls)
        progress("tools/list")
        rows += await mcp_bench.tools_list_rows()
        progress("a 1 MiB digest over MCP")
        rows += await mcp_bench.digest_rows(path, content, plan.digest_reps)
        progress(f"{plan.concurrent_digests} concurrent 1 MiB digests and a trivial call in a loop")
        rows += await mcp_bench.load_rows(path, plan.concurrent_digests, plan.idle_calls)
    return rows


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0)),
        "mcp": metadata.version("mcp"),
        "ito_training_mcp": metadata.version("ito-training-mcp"),
    }


# ---------------------------------------------------------------------- the printed table and README_TABLE.md


def shown(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "share":
        return f"{value:.2f}"
    if unit == "bytes":
        return f"{value / 1024:.1f} KiB"
    if unit == "count":
        return f"{value:g}"
    return f"{value:.1f} {unit}"


def verdict(passed: bool | None) -> str:
    return "-" if passed is None else "pass" if passed else "FAIL"


def markdown(header: list[str], lines: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(cells) + " |" for cells in (header, ["---"] * len(header), *lines)]


def full_table(rows: list[dict[str, Any]]) -> str:
    return "\n".join(markdown(["group", "row", "value", "goal", "result", "detail"], [
        [r["group"], r["name"], shown(r["value"], r["unit"]), r["goal"] or "reported", verdict(r["passed"]),
         r["detail"]] for r in rows]))


def readme_table(document: dict[str, Any]) -> str:
    """One line per summary label: its worst row (every value is lower-is-better), pass only if all pass."""
    lines = []
    labels = dict.fromkeys(r["summary"] for r in document["rows"] if r["summary"])
    for label in labels:
        group = [r for r in document["rows"] if r["summary"] == label]
        worst = max(group, key=lambda r: r["value"])
        verdicts = [r["passed"] for r in group if r["passed"] is not None]
        measured = shown(worst["value"], worst["unit"])
        if len(group) > 1:
            measured += f" (worst: {worst['name']})"
        elif worst["detail"]:
            measured += f" ({worst['detail']})"
        lines.append([label, measured, worst["goal"] or "reported",
                      verdict(all(verdicts) if verdicts else None)])
    m = document["machine"]
    caption = (f"`make bench`, {document['mode']} run of {document['generated_at'][:10]}: Python {m['python']}, "
               f"{m['cpus_available']} CPUs, load average {m['load_before']:.1f} before and {m['load_after']:.1f} "
               "after. Ratios are to a baseline measured in the same run; bench/README.md explains each line.")
    table = markdown(["measured", "value", "goal", "result"], lines)
    if len(table) > TABLE_MAX_LINES:
        raise RuntimeError(f"the README table has {len(table)} lines, more than {TABLE_MAX_LINES}")
    return "\n".join([caption, "", *table]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: fewer repetitions, 64 concurrent digests")
    parser.add_argument("--out", help="where to write results.json (default: bench/results.json for a full run, "
                                      "nowhere for --quick)")
    parser.add_argument("--table", action="store_true", help="write bench/README_TABLE.md from bench/results.json "
                                                             "(or --out) and print it; measure nothing")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else None if args.quick and not args.table else RESULTS
    if args.table:
        assert out is not None
        TABLE.write_text(readme_table(json.loads(out.read_text(encoding="utf-8"))), encoding="utf-8")
        print(TABLE.read_text(encoding="utf-8"), end="")
        return 0

    plan = QUICK if args.quick else FULL
    started = time.perf_counter()

    def progress(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)

    load_before = os.getloadavg()[0]
    rows = anyio.run(mcp_rows, plan, progress)
    progress("the desk renders a 1 MiB review while another request comes in")
    rows += desk_render_bench.rows(args.quick)
    progress("the secret scanner (scanner_bench.rows)")
    rows += scanner_rows(args.quick)
    document: dict[str, Any] = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "duration_s": round(time.perf_counter() - started, 1),
        "plan": asdict(plan),
        "machine": {**machine(), "load_before": load_before, "load_after": os.getloadavg()[0]},
        "rows": [asdict(r) for r in rows],
    }
    print(full_table(document["rows"]))
    failed = [r["name"] for r in document["rows"] if r["passed"] is False]
    print(f"\n{document['mode']} run, {document['duration_s']} s; goals missed (reported, not failed): "
          f"{len(failed)}" + "".join(f"\n  - {name}" for name in failed))
    if out is not None:
        out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"results written to {out}")
        if out == RESULTS:
            TABLE.write_text(readme_table(document), encoding="utf-8")
            print(f"README table written to {TABLE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
