"""The secret scanner's speed, as ratios to a baseline measured in the same run.

    .venv/bin/python bench/scanner_bench.py          # prints one JSON row per line
    .venv/bin/python bench/scanner_bench.py --quick  # fewer repetitions

Each row: `scan_document` on an already parsed document, against `hashlib.sha256` + `json.loads` of the
same bytes (medians of interleaved repetitions). Lines: the example manifest and manifests of 64 KiB
or less in eight languages <= 3x; hostile inputs of 1 MiB or less <= 100x, and linear (twice the size
costs about twice the time: the `doubling` column); a new process's import and first scan <= 50 ms
above a warm scan, for an ASCII and a Chinese manifest; a fresh `ito-training digest` of the example
manifest written in any of the eight languages <= 1.3x the same command on its English (ASCII) text.
`rows()` returns the rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ito_training_mcp.scanner import scan_document  # noqa: E402
from ito_training_mcp.scanner.rules import RULES  # noqa: E402

KIB = 1024
MIB = 1024 * KIB
EXAMPLE = REPO / "examples" / "manifest.json"

SENTENCES = {
    "en": "Instruction-tune the 8B base on the support corpus, then align with DPO; decontaminated against MMLU.",
    "de": "Feinabstimmung des 8B-Basismodells auf dem Support-Korpus, danach Ausrichtung mit DPO; geprüft gegen MMLU.",
    "fr": "Affinage du modèle de base 8B sur le corpus d’assistance, puis alignement par DPO ; vérifié contre MMLU.",
    "es": "Ajuste fino del modelo base de 8B con el corpus de soporte y alineación con DPO; verificado contra MMLU.",
    "pt": "Ajuste fino do modelo base de 8B no corpus de suporte (1º lote), depois alinhamento com DPO; nº 42.",
    "ru": "Дообучение базовой модели 8B на корпусе поддержки, затем выравнивание с помощью DPO; проверено на MMLU.",
    "zh": "在支持语料上对8B基础模型进行指令微调，然后用DPO对齐；已针对MMLU、GSM8K进行去污染检查（13-gram）。",
    "ja": "サポートコーパスで8Bベースモデルを指示調整し、DPOで整合させる。MMLUとGSM8Kに対して"
          "汚染除去を確認済み（13-gram）。",
}


def _manifest(language: str, size: int) -> dict[str, Any]:
    """A valid-looking manifest of about `size` bytes whose free text is in `language`."""
    doc = json.loads(EXAMPLE.read_text())
    doc["description"] = SENTENCES[language]
    template = doc["data"][0]
    data = []
    while len(json.dumps(doc, ensure_ascii=False).encode()) + 600 * len(data) < size:
        entry = json.loads(json.dumps(template))
        n = len(data)
        entry["name"] = f"support-conversations-2026q3-shard-{n:04d}"
        entry["uri"] = f"s3://acme-ml-data/support/conversations-2026q3/shard-{n:04d}/"
        entry["decontamination"]["method"] = SENTENCES[language]
        entry["notes"] = SENTENCES[language][: 40 + n % 40]
        data.append(entry)
    doc["data"] = data
    return doc


def _bytes(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def _fill(unit: str, size: int) -> str:
    """`unit` repeated to about `size` bytes of UTF-8."""
    return unit * max(1, size // len(unit.encode()))


def hostile(size: int) -> dict[str, Any]:
    """Documents built to make the scanner work, each about `size` bytes as JSON. "distinct near misses"
    differ from each other, so no verdict is reused; "checked near misses" are also built to pass every
    test a pattern can make and fail only the check in Python (words and a number under a key's name),
    which costs each of them a few tens of microseconds: the known worst input."""
    triggers = " ".join(t for rule in RULES for t in rule.triggers)
    near = ("ghp_" + "aB3dE5" * 5 + "x1 AKIA" + "Q" * 15 + " eyJhbGciOi.eyJzdWIiOi. sk-learn-estimator-wrapper "
            "password=${DB_PASSWORD} api_key: changeme https://u@ token: xxxxxxxx ")
    return {
        "combining marks": {"d": "a" + _fill("\u0301\u0316", size)},
        "runs of 31 marks": {"d": _fill("a" + "\u0301\u0316" * 15 + "\u0301", size)},
        "every trigger": {"d": _fill(triggers + " ", size)},
        "every trigger, many strings": {"d": [triggers] * max(1, size // len(triggers.encode()))},
        "near misses": {"d": _fill(near, size)},
        "near misses, many strings": {"d": [near] * max(1, size // len(near.encode()))},
        "distinct near misses": {"d": " ".join(f"token: abcdef{n:07d} api_key=Vector{n}_Model"
                                               for n in range(size // 42))},
        "checked near misses": {"d": " ".join(f"api_key=VectorModel{n}" for n in range(size // 22))},
        "triggers glued together": {"d": _fill(triggers.replace(" ", ""), size)},
        "invisible between letters": {"d": _fill("p\u200ba\u200bs\u200bs\u200b", size)},
        "full-width text": {"d": _fill("ｐａｓｓｗｏｒｄ＝ｓｅｃｒｅｔ　ｔｏｋｅｎ：ｘ　", size)},
        "decomposed accents": {"d": _fill("cafe\u0301 ", size)},
        "keys naming credentials": {f"token_{i}": i for i in range(size // 16)},
        "many short strings": {"d": [f"s{i}" for i in range(size // 8)]},
        "chinese text": {"d": _fill(SENTENCES["zh"], size)},
    }


def _time(fn: Callable[[], object], reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _pair(doc: Any, reps: int) -> tuple[float, float]:
    """(scan, baseline) medians in seconds, measured alternately."""
    data = _bytes(doc)
    parsed = json.loads(data)

    def baseline() -> None:
        hashlib.sha256(data).digest()
        json.loads(data)

    scans, bases = [], []
    for _ in range(3):
        scans.append(_time(lambda: scan_document(parsed), reps))
        bases.append(_time(baseline, reps))
    return min(scans), min(bases)


def _reps(size: int, quick: bool) -> int:
    base = 200 if size < 8 * KIB else 20 if size < 256 * KIB else 3
    return max(1, base // 4) if quick else base


def _row(name: str, doc: Any, line: float, quick: bool) -> dict[str, Any]:
    size = len(_bytes(doc))
    scan, base = _pair(doc, _reps(size, quick))
    return {"row": name, "bytes": size, "scan_ms": round(scan * 1e3, 3), "baseline_ms": round(base * 1e3, 3),
            "ratio": round(scan / base, 2), "line": f"<= {line:g}x", "passed": scan / base <= line}


_FRESH = """
import json, sys, time
start = time.perf_counter()
from ito_training_mcp.scanner import scan_document
doc = json.loads(sys.stdin.read())
scan_document(doc)
first = time.perf_counter() - start
warm = []
for _ in range(20):
    t = time.perf_counter(); scan_document(doc); warm.append(time.perf_counter() - t)
warm.sort()
print(json.dumps([first, warm[len(warm) // 2]]))
"""


def _fresh(doc: Any, runs: int) -> float:
    """Median over new processes of (import + first scan) minus a warm scan, in seconds. Bytecode is
    cached (in a directory of its own), as it is for an installed package; one unmeasured run fills it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "scanner-bench-pycache")
    extra = []
    for n in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", _FRESH], input=json.dumps(doc, ensure_ascii=False), cwd=REPO,
                             capture_output=True, text=True, check=True, env=env).stdout
        if n == 0:
            continue
        first, warm = json.loads(out)
        extra.append(first - warm)
    return statistics.median(extra)


def _cli_digests(runs: int) -> dict[str, float]:
    """Median wall time of a fresh `ito-training digest --manifest PATH --json`, per language, in seconds:
    the example manifest with its free text in that language (English is the ASCII one). Runs interleave
    the languages, so a change in the machine's load falls on all of them alike."""
    cli = Path(sys.executable).with_name("ito-training")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITO_")}
    times: dict[str, list[float]] = {language: [] for language in SENTENCES}
    with tempfile.TemporaryDirectory(prefix="ito-bench-") as tmp:  # 0700, as the manifest reader asks
        paths = {}
        for language in SENTENCES:
            doc = json.loads(EXAMPLE.read_text())
            doc["description"] = SENTENCES[language]
            doc["data"][0]["decontamination"]["method"] = SENTENCES[language]
            path = Path(tmp) / f"{language}.json"
            path.write_bytes(_bytes(doc))
            path.chmod(0o600)
            paths[language] = path
        for n in range(runs + 1):
            for language, path in paths.items():
                start = time.perf_counter()
                subprocess.run([str(cli), "digest", "--manifest", str(path), "--json"], capture_output=True,
                               check=True, env=env)
                if n:  # the first round fills the bytecode cache
                    times[language].append(time.perf_counter() - start)
    return {language: statistics.median(t) for language, t in times.items()}


def rows(quick: bool = False) -> list[dict[str, Any]]:
    out = [_row("example manifest", json.loads(EXAMPLE.read_text()), 3, quick)]
    for language in SENTENCES:
        out.append(_row(f"64 KiB manifest, {language}", _manifest(language, 64 * KIB), 3, quick))
    worst: dict[str, Any] | None = None
    halves = hostile(MIB // 2)
    for name, doc in hostile(MIB).items():
        row = _row(f"hostile: {name}", doc, 100, quick)
        half, _ = _pair(halves[name], _reps(MIB // 2, quick))
        row["doubling"] = round(row["scan_ms"] / (half * 1e3), 2)
        out.append(row)
        worst = row if worst is None or row["ratio"] > worst["ratio"] else worst
    if worst is not None:
        out.append({**worst, "row": f"worst hostile input: {worst['row'][len('hostile: '):]}"})
    for name, doc in (("ASCII", json.loads(EXAMPLE.read_text())), ("Chinese", _manifest("zh", 8 * KIB))):
        extra = _fresh(doc, 3 if quick else 7)
        out.append({"row": f"fresh process, {name} manifest: import + first scan minus a warm scan",
                    "extra_ms": round(extra * 1e3, 1), "line": "<= 50 ms", "passed": extra <= 0.05})
    cli = _cli_digests(3 if quick else 9)
    language = max((language for language in cli if language != "en"), key=cli.__getitem__)
    ratio = cli[language] / cli["en"]
    out.append({"row": f"fresh `ito-training digest`, worst language ({language}) vs ASCII", "bytes": 0,
                "scan_ms": round(cli[language] * 1e3, 1), "baseline_ms": round(cli["en"] * 1e3, 1),
                "ratio": round(ratio, 2), "line": "<= 1.3x", "passed": ratio <= 1.3})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    for row in rows(args.quick):
        print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main()
