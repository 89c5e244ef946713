"""The manifests the benchmark digests, built at run time from examples/manifest.json."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "manifest.json"
MIB = 1024 * 1024

SUITES = ("mmlu", "mmlu-pro", "gsm8k", "humaneval", "mbpp", "arc-challenge", "hellaswag", "truthfulqa-mc2",
          "winogrande", "big-bench-hard", "ifeval", "math-500", "mt-bench", "alpacaeval-2", "gpqa-diamond", "drop")


def realistic_manifest(size: int = MIB - 1024) -> bytes:
    """A valid ASCII manifest of at most `size` bytes, as a person writes one (indented): 256 data references,
    each checked against 100 eval suites, with URIs padded until the document reaches the size."""
    base: dict[str, Any] = json.loads(EXAMPLE.read_bytes())
    template = base["data"][0]

    def reference(i: int, pad: int) -> dict[str, Any]:
        folder = "".join(f"/part-{k:02d}" for k in range(pad // 8 + 1))[:pad]
        return {
            "name": f"support-conversations-2026q3-shard-{i:03d}",
            "uri": f"s3://acme-ml-data/support/conversations-2026q3/shard-{i:03d}{folder}/",
            "revision": "sha256:" + hashlib.sha256(f"shard-{i}".encode()).hexdigest(),
            "decontamination": {
                **template["decontamination"],
                "eval_suites": [f"{SUITES[j % len(SUITES)]}-split-{j:03d}" for j in range(100)],
                "report": f"s3://acme-ml-data/reports/decontam-support-2026q3-shard-{i:03d}.html",
            },
        }

    def render(pad: int) -> bytes:
        return json.dumps({**base, "data": [reference(i, pad) for i in range(256)]}, indent=2).encode()

    low, high = 0, 1900  # the URI stays within the schema's 2,048 characters
    if len(render(low)) > size:
        raise ValueError(f"no manifest of this shape fits in {size} bytes")
    while low < high:  # the largest padding that fits
        mid = (low + high + 1) // 2
        low, high = (mid, high) if len(render(mid)) <= size else (low, mid - 1)
    return render(low)


def write_private(directory: Path, name: str, content: bytes) -> str:
    """A file only its owner can read, as the manifest gate requires."""
    path = directory / name
    path.write_bytes(content)
    os.chmod(path, 0o600)
    return str(path)
