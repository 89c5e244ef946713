"""digest_manifest benchmarks: two realistic ~1 MiB shapes, hostile inputs, and where the time goes.

Every figure is a ratio against `hashlib.sha256(b)` + `json.loads(b)` of the same bytes, measured
interleaved in the same process: the median of the ratios of back-to-back pairs (the ratio of the two
medians is reported beside it). Fake credentials are assembled at run time from parts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import statistics
import string
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import Result, Row, ratio

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_MANIFEST = REPO / "examples" / "manifest.json"
MIB = 1024 * 1024
MS = 1000.0


def write_private(directory: Path, name: str, content: bytes) -> str:
    path = directory / name
    path.write_bytes(content)
    os.chmod(path, 0o600)
    return str(path)


# ---------------------------------------------------------------------- the two valid shapes


def _base_manifest() -> dict[str, Any]:
    base: dict[str, Any] = json.loads(EXAMPLE_MANIFEST.read_bytes())
    base["description"] = ("Benchmark manifest: the example run with 256 long but valid data references. " * 30)[:2000]
    return base


def long_references_manifest(target_bytes: int = MIB) -> bytes:
    """The example with 256 data references whose URIs and reports are long paths (up to 2048 chars).

    Within the schema's limits: data <= 256 items, description <= 2000 characters, URIs <= 2048
    characters (no whitespace, query, fragment or '@'), labels <= 200 characters.
    """
    base = _base_manifest()
    template = base["data"][0]

    def entry(i: int, uri_len: int, report_len: int) -> dict[str, Any]:
        def padded(prefix: str, length: int) -> str:
            filler = "".join(f"/part-{i:03d}-{j:04d}" for j in range(length // 14 + 2))
            return (prefix + filler)[:length]

        return {
            "name": f"support-corpus-shard-{i:03d}",
            "uri": padded(f"s3://acme-ml-data/support/shard-{i:03d}", uri_len),
            "revision": "sha256:" + hashlib.sha256(f"shard-{i}".encode()).hexdigest(),
            "decontamination": {
                **template["decontamination"],
                "eval_suites": ["mmlu", "gsm8k", "humaneval", "acme-support-heldout", f"acme-shard-{i:03d}-heldout"],
                "report": padded(f"s3://acme-ml-data/reports/decontam-shard-{i:03d}", report_len),
            },
        }

    def render(uri_len: int, report_len: int) -> bytes:
        doc = {**base, "data": [entry(i, uri_len, report_len) for i in range(256)]}
        return json.dumps(doc, indent=2).encode()

    small = render(100, 100)
    per_entry = (target_bytes - len(small)) // 256
    uri_extra = min(per_entry // 2, 2048 - 100)
    report_extra = min(per_entry - uri_extra, 2048 - 100)
    return render(100 + uri_extra, 100 + report_extra)


def path_strings_manifest(target_bytes: int = MIB) -> bytes:
    """256 data references, each checked against up to 100 eval suites named by path-like labels:
    16,384 short labels (64 per reference at 1 MiB) instead of 512 long strings."""
    base = _base_manifest()
    template = base["data"][0]

    def entry(i: int, suites: int) -> dict[str, Any]:
        return {
            "name": f"acme/corpora/support/shard-{i:03d}",
            "uri": f"s3://acme-ml-data/support/conversations-2026q3/shard-{i:03d}/",
            "revision": hashlib.sha256(f"shard-{i}".encode()).hexdigest(),
            "decontamination": {
                **template["decontamination"],
                "eval_suites": [f"acme/evals/suite-{j:03d}/split-{i:04d}/heldout-v3" for j in range(suites)],
                "report": f"gs://acme-ml-reports/decontam/shard-{i:03d}/report.html",
            },
        }

    def render(suites: int) -> bytes:
        return json.dumps({**base, "data": [entry(i, suites) for i in range(256)]}, indent=2).encode()

    suites = 100
    while suites > 1 and len(render(suites)) > target_bytes:
        suites -= 1
    return render(suites)


# ---------------------------------------------------------------------- measuring


def baseline(content: bytes) -> None:
    hashlib.sha256(content).hexdigest()
    json.loads(content)


async def paired(service: Any, path: str, content: bytes, reps: int) -> tuple[list[float], list[float], Any]:
    """digest_manifest and the baseline, alternating which goes first; seconds."""
    envelope = await service.digest_manifest(path)  # warm-up (first use compiles the scanner's patterns)
    tool: list[float] = []
    base: list[float] = []
    for i in range(reps):
        for label in (("tool", "base") if i % 2 == 0 else ("base", "tool")):
            started = time.perf_counter()
            if label == "tool":
                await service.digest_manifest(path)
            else:
                baseline(content)
            (tool if label == "tool" else base).append(time.perf_counter() - started)
    return tool, base, envelope


def paired_ratio(tool: list[float], base: list[float]) -> float:
    """The median of the ratios of each pair (the two were timed back to back, so a change in the
    machine's speed between pairs cancels out, where the ratio of two medians picks each median
    from whichever phase it falls in)."""
    return statistics.median(t / b for t, b in zip(tool, base, strict=True))


def _median_ms(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * MS


def _scan_with_source(secret_scan: Any, document: Any, content: bytes) -> Any:
    try:
        return secret_scan.scan(document, source=content)
    except TypeError:  # a scanner from before `source` (to measure "before")
        return secret_scan.scan(document)


def _strict(strict_json: Any, content: bytes) -> Any:
    try:
        return strict_json.loads(content, max_depth=None)  # the gate checks nesting only on refusal
    except TypeError:  # from before the deferred nesting check (to measure "before")
        return strict_json.loads(content)


def stage_breakdown(path: str, reps: int) -> dict[str, float]:
    """Where the time goes, stage by stage (median ms), in the order of the gate, with plain
    `json.loads` beside strict JSON. Stages that an older tree lacks are measured its way."""
    from ito_training_mcp import secret_scan
    from ito_training_mcp.egress.clean import clean_envelope
    from ito_training_mcp.envelope import success
    from ito_training_mcp.files import read_regular_file
    from ito_training_mcp.gates.manifest import schema as manifest
    from ito_training_mcp.gates.manifest import strict_json

    file = read_regular_file(path, max_bytes=2 * MIB, roots=None)
    content = file.content
    document = _strict(strict_json, content)
    validate = getattr(manifest, "_validate", None) or (
        lambda doc: manifest.TrainingManifest.model_validate(doc, strict=True))
    try:
        from ito_training_mcp.gates.manifest.characters import may_hold_forbidden
    except ImportError:  # before: the pre-check ran on the decoded text
        def may_hold_forbidden(data: bytes) -> bool:
            text = data.decode("utf-8", "replace")
            return bool(manifest._FORBIDDEN_RAW.search(text) or manifest._FORBIDDEN_ESCAPE.search(text))
    look_at_bytes = getattr(sys.modules.get("ito_training_mcp.gates.manifest.characters"), "look_at_bytes", None)
    if "controls_possible" in (getattr(validate, "__kwdefaults__", None) or {}):  # the gate's own look at the bytes
        plain_validate, controls = validate, may_hold_forbidden(content)
        shown = {"all_shown": look_at_bytes(content).shown_as_is is True} if look_at_bytes is not None else {}
        validate = lambda doc: plain_validate(doc, controls_possible=controls, **shown)  # noqa: E731
    try:  # the gate after the read, as the service runs it
        from ito_training_mcp.gates.manifest.digest import digest_bytes
    except ImportError:  # an older tree (to measure "before")
        digest_bytes = getattr(manifest, "digest_bytes", None)
    digested = digest_bytes(file) if digest_bytes is not None else \
        manifest.DigestedManifest(file=file, manifest=manifest.parse_manifest(content))
    envelope = success(digested.summary(), notice="digested", live_api_contacted=False)
    characters = len(content.decode())
    return {
        "secure_read_and_sha256": _median_ms(lambda: read_regular_file(path, max_bytes=2 * MIB, roots=None), reps),
        "json_loads_plain": _median_ms(lambda: json.loads(content), reps),
        "strict_json (duplicate keys, NaN, surrogates)": _median_ms(lambda: _strict(strict_json, content), reps),
        "schema (pydantic, unknown keys trimmed, URIs checked together)": _median_ms(lambda: validate(document), reps),
        "secret_scan (with the JSON text)": _median_ms(lambda: _scan_with_source(secret_scan, document, content), reps),
        "secret_scan (document walk only)": _median_ms(lambda: secret_scan.scan(document), reps),
        "character rule (look at the bytes; in other scripts byte_facts' one pass)": _median_ms(
            (lambda: look_at_bytes(content, characters=characters))
            if look_at_bytes is not None else lambda: may_hold_forbidden(content), reps),
        "review summary (review, review_text)": _median_ms(getattr(digested, "_summarize", digested.summary), reps),
        "the gate on the caller's thread (no read, no thread hop)": _median_ms(
            lambda: digest_bytes(file, summarize=True) if digest_bytes is not None else None, reps),
        "egress of the envelope": _median_ms(lambda: clean_envelope(envelope), reps),
    }


async def bench_digest(reps: int, breakdown_reps: int, workdir: Path) -> Result:
    from ito_training_mcp.service import TrainingService

    service = TrainingService({"ITO_TRAINING_MANIFEST_MAX_BYTES": str(2 * MIB)})
    rows: list[Row] = []
    raw: dict[str, Any] = {"reps": reps}
    for name, content in (("long data references", long_references_manifest()),
                          ("many path-like strings", path_strings_manifest())):
        path = write_private(workdir, f"{name.replace(' ', '-')}.json", content)
        tool, base, envelope = await paired(service, path, content, reps)
        if not envelope.ok or envelope.data["sha256"] != hashlib.sha256(content).hexdigest():
            raise RuntimeError(f"the {name} manifest was not accepted: {envelope.to_dict().get('error')}")
        tool_ms, base_ms = statistics.median(tool) * MS, statistics.median(base) * MS
        r = paired_ratio(tool, base)
        rows.append(Row(f"median (ms), {name}, {len(content) / MIB:.2f} MiB; ratio: median of {reps} pairs", tool_ms,
                        base_ms, "ms", r, "<= 3x", r <= 3.0))
        rows.append(Row(f"ratio of the two medians, {name}", tool_ms, base_ms, "ms", ratio(tool_ms, base_ms),
                        "report", None))
        rows.append(Row(f"min (ms), {name}, least disturbed run", min(tool) * MS, min(base) * MS, "ms",
                        ratio(min(tool), min(base)), "report", None))
        raw[name] = {"bytes": len(content), "tool_ms": [x * MS for x in tool], "baseline_ms": [x * MS for x in base]}
        if breakdown_reps:
            raw[name]["stage_median_ms"] = stage_breakdown(path, breakdown_reps)

    small = EXAMPLE_MANIFEST.read_bytes()
    small_path = write_private(workdir, "example-manifest.json", small)
    tool, base, _ = await paired(service, small_path, small, max(reps, 9))
    tool_ms, base_ms = statistics.median(tool) * MS, statistics.median(base) * MS
    rows.append(Row(f"median (ms), example ({len(small)} B)", tool_ms, base_ms, "ms", ratio(tool_ms, base_ms),
                    "report", None))
    return Result("digest_manifest", "digest_manifest of valid ~1 MiB manifests vs sha256 + json.loads (in-process)",
                  rows, raw=raw)


# ---------------------------------------------------------------------- hostile inputs


def _fake(*parts: str) -> str:
    return "".join(parts)


def _fill(unit: str, budget: int) -> str:
    return unit * max(1, budget // len(unit.encode()))


def hostile_inputs() -> dict[str, bytes]:
    """JSON documents of at most 1 MiB built to make a scanner slow: runs of trigger prefixes, many
    separators, many strings or keys that almost match, invisible characters, escapes."""
    budget = MIB - 64
    rng = random.Random(7)
    docs: dict[str, Any] = {}
    units = ["ghp_", "AKIA", "sk-", "sk-a", "eyJ", "eyJa.", "password=", "password", "Bearer ", "basic ", "Basic QUFB",
             "://", "://a@", "=", ":", "a:b@", "@", "?sig=", "-----BEGIN ", "token: ", "mailto:a@b.co ", "xoxb-",
             "hf_", "SK", "dapi", "authorization: ", "LS0tLS1CRUdJTi", "0Q~", ":AA", "x"]
    for unit in units:
        docs[f"one string: {unit!r} repeated"] = {"description": _fill(unit, budget)}
    try:
        from ito_training_mcp.secret_rules import KEY_NAME_STEMS, RULES

        anchors = sorted({a for rule in RULES for a in rule.anchors} | set(KEY_NAME_STEMS))
    except ImportError:  # an older scanner (to measure "before"): its trigger words
        anchors = ["PRIVATE KEY", "AKIA", "ASIA", "gh", "github_pat_", "hf_", "sk-", "xox", "hooks.slack.com",
                   "_live_", "_test_", "AIza", "eyJ", "bearer", "://", "accountkey", "password", "secret", "apikey",
                   "api_key", "access_token", "auth_token", "basic"]
    docs["one string: every anchor, mixed"] = {"description": _fill(" ".join(anchors) + " ", budget - 4096)}
    # Ninth round: every anchor but its last letter in full-width forms (NFKC makes ASCII of them), so
    # that a search of the text as it stands finds a place its NFKC could hold one at every word.
    full_width = str.maketrans({c: chr(ord(c) + 0xFEE0) for c in map(chr, range(0x21, 0x7F))})
    spelt = " ".join(a[:-1].translate(full_width) for a in anchors if len(a) >= 4) + " "
    docs["one string: every anchor but its last letter, full-width"] = {"description": _fill(spelt, budget - 4096)}
    docs["600 strings of the same"] = {"notes": [spelt[:budget // 600 // 3 - 8]] * 600}
    alphabet = string.ascii_letters + string.digits + "-_"
    docs["one string: random base64url"] = {"description": "".join(rng.choice(alphabet) for _ in range(budget))}
    wide = string.ascii_letters + string.digits + "+/=-_.:@?&%~ "
    docs["one string: random printable"] = {"description": "".join(rng.choice(wide) for _ in range(budget))}
    docs["60k short path strings"] = {"paths": [f"acme/p-{i:06d}" for i in range(budget // 18)]}
    docs["40k near misses (task-...)"] = {"names": [f"task-{i:06d}abcdefghij" for i in range(budget // 26)]}
    docs["50k strings 'tokenizer'"] = {"names": ["tokenizer"] * (budget // 12)}
    docs["30k distinct keys with stems"] = {f"tokenizer_{i:06d}": 1 for i in range(budget // 23)}
    docs["30k distinct plain keys"] = {f"k{i:06d}": 1 for i in range(budget // 12)}
    nested: Any = "leaf"
    for _ in range(30):
        nested = {"description": "x", "data": nested}
    docs["deeply repeated keys"] = {"items": [nested] * (budget // 600)}
    token = _fake("gh", "p_", "Zq9" * 12)
    docs["20k credentials"] = {"leaks": [token] * (budget // 44)}
    docs["credential at the very end"] = {"paths": [f"acme/p-{i:06d}" for i in range(budget // 18 - 4)] + [token]}
    docs["CJK text"] = {"description": _fill("密码パスワードпароль données 模型训练 ", budget)}
    docs["zero-width joiners"] = {"description": _fill("a\u200d", budget)}
    cf = "".join(chr(c) for c in (0xAD, 0x600, 0x61C, 0x180E, *range(0x200B, 0x2010), *range(0x202A, 0x202F),
                                  *range(0x2060, 0x2065), 0xFEFF, *range(0xE0020, 0xE0080)))
    docs["every format character"] = {"description": _fill("a" + cf, budget)}
    # Refused by the schema with tens of thousands of value problems (an attacker review's find): 256
    # references, each with 100 eval-suite labels that the label rule or the types refuse, and a bad
    # URI, report and check date.
    example = json.loads(EXAMPLE_MANIFEST.read_bytes())
    for label, labels in (("padded labels", ["\u00e9 "] * 100), ("numbers for labels", list(range(100))),
                          ("empty labels", [""] * 100)):
        ref = {**example["data"][0], "uri": "s3://\u00e9", "decontamination": {
            **example["data"][0]["decontamination"], "eval_suites": labels, "report": "s3://a b",
            "checked_at": "2024-02-30"}}
        docs[f"26k value problems ({label})"] = {**example, "data": [ref] * 256}
    # The labels that make the value rules look at each label, one problem per list or none.
    word = "mmlu pro humaneval plus gsm8k arc challenge"

    def suites(*labels: Any) -> dict[str, Any]:
        ref = example["data"][0]
        return {**example, "data": [{**ref, "decontamination": {**ref["decontamination"], "eval_suites": list(labels)}}]
                * 256}

    docs["a number among clean labels, each list"] = suites(7, *[word] * 70)
    docs["one padded label among long ones, each list"] = suites(*[word] * 70, word + " ")
    docs["one ideographic space among long labels, each list"] = suites(*[word] * 70, "a\u3000b")
    docs["clean labels, one bad URI"] = {**suites(*[word] * 70), "checkpoints": {
        **example["checkpoints"], "storage": "s3://a b"}}
    docs["labels one character too long"] = suites(*["x" * 201] * 18)
    # From the second attacker review of this round: thousands of short strings full of invisible
    # characters (each used to be cleaned one search per character), and containers by the thousand.
    docs["5,000 strings of 64 zero-width spaces"] = {**example, "notes": ["\u200b" * 64 + str(i) for i in range(5000)]}
    docs["5,000 such strings, 21 kinds"] = {**example, "notes": [chr(0x200B + i % 5) * 64 + chr(0xFE00 + i % 16)
                                                                for i in range(5000)]}
    docs["empty objects for labels, 25,600"] = suites(*[{}] * 100)
    docs["empty objects, 250,000"] = {**example, "notes": [{}] * 250_000}
    # Sixth round: the same in the labels of a manifest the schema accepts (the character rule refuses
    # it; its scan used to be unbounded, 57x), and format characters of 16 kinds that the rule let
    # through, so that a valid manifest asked for each label to be cleaned on its own (50x-120x).
    docs["labels of 21 kinds of invisible character, schema-valid"] = suites(
        *[chr(0x200B + i % 5) * 3 + "ab" + chr(0xFE00 + i % 16) + str(i) for i in range(64)])
    docs["labels with Egyptian format controls, 16 kinds"] = suites(
        *[f"a{chr(0x13430 + i % 16)}b{chr(0x13430 + (i + 1) % 16)}{i}" for i in range(64)])
    out = {name: json.dumps(doc, ensure_ascii=False).encode() for name, doc in docs.items()}
    # Seventh round: manifests the schema and the character rule accept, their labels in other scripts
    # (~1 MiB each). The scanner normalises (NFKC) what is not normal already: the full-width forms and
    # the accents written as combining marks; the rest costs passes of searches over UTF-8.
    for name, unit in (("labels in Vietnamese, precomposed (valid)", "Tiếng Việt "),
                       ("labels in Vietnamese, combining accents (valid)", "Tie\u0302\u0301ng Vie\u0323\u0302t "),
                       ("labels in Korean (valid)", "한국어 평가 "), ("labels in Hindi (valid)", "नमस्ते दुनिया "),
                       ("labels in full-width forms (valid)", "ＧＰＴ－４ ｅｖａｌ "),
                       ("labels in Vietnamese, composed and not in one (valid)", "Tiếng Vie\u0323\u0302t "),
                       # Tenth round: CJK with full-width punctuation, which NFKC changes (CPython normalises
                       # kana and ideographs at 140-210 ns a character); then a place in every label
                       # (a credential name, "tokenizer"), where the look leaves all of it to the walk.
                       ("labels in Japanese, full-width punctuation (valid)",
                        "日本語の評価データセット，第一版（改訂） "),
                       ("labels in Japanese, a credential name in each (valid)", "パスワードではない，評価 "),
                       ("labels in Chinese, full-width comma and 'tokenizer' in each (valid)",
                        "模型，tokenizer 评估 "),
                       # Eleventh round: Devanagari with its nukta written apart (NFKC leaves क and
                       # the nukta apart, but the nukta may compose: CPython's check normalised all)
                       ("labels in Hindi, the nukta written apart (valid)", "क\u093cम ख\u093cबर ग\u093cज़ल ")):
        out[name] = _filled_labels(lambda n, unit=unit: suites(*[(unit * (160 // len(unit))).strip() + str(i)
                                                                for i in range(n)]))
    # Eighth round: manifests mostly ASCII but for a character that NFKC changes (a no-break space in
    # the description, as a copy from a web page leaves; a full-width letter in a label of each list):
    # the text is in neither normal form, and the look at it used to leave it to the walk.
    ascii_shape = json.loads(long_references_manifest(MIB - 256))
    out["ASCII manifest, a no-break space in its description (valid)"] = json.dumps(
        {**ascii_shape, "description": "Instruction-tune\u00a0the 8B base"}, ensure_ascii=False).encode()
    out["ASCII labels, a full-width letter in one label of each list (valid)"] = _filled_labels(
        lambda n: suites(*[("ｅ" if i == 0 else "e") + "val suite " * 15 + str(i) for i in range(n)]))
    # Tenth round, from an attacker review: characters NFKC makes many of (U+FDFA becomes 18, U+3300
    # four kana), each string of a refused list a hundred of them, after strings of anchors or alone;
    # labels in Japanese with a credential name and a composing mark in each (valid: CPython's NFKC of
    # kana, all of it); ASCII labels where 17 kinds of full-width letter each first appear far apart
    # (valid); strings each holding NUL and 1,000 kinds of character NFKC changes.
    anchor_strings = ["x " + anchor + " \u00e9" for anchor in anchors[:70]] + [" ".join(anchors) + " \u00e9"]
    for label, first, unit in (("U+FDFA x100 in each string after 71 strings of anchors", anchor_strings, "\ufdfa"),
                               ("U+FDFA x100 in each string", [], "\ufdfa"),
                               ("U+3300 x100 in each string after 71 strings of anchors", anchor_strings, "\u3300"),
                               # a second review's: a combining mark after each, so that each slice
                               # is decomposed whole (NFKD) before most of it is left out
                               ("U+FDFA x100 and a combining acute in each string after 71 strings of anchors",
                                anchor_strings, "\ufdfa" * 25 + "\u0301")):
        out[label] = _filled_list(first, unit * 100 if len(unit) == 1 else unit * 4)
    out["labels in Japanese, a credential name and a composing mark in each (valid)"] = _filled_labels(
        lambda n: suites(*[("パスワードではないハ\u309a評価 " * 10).strip() + str(i) for i in range(n)]))
    out["ASCII labels, 17 kinds of full-width letter each first seen far apart (valid)"] = _filled_labels(
        lambda n: {**example, "data": [{**example["data"][0], "decontamination": {
            **example["data"][0]["decontamination"], "eval_suites": [
                "tokenizer eval suite " * 7 + (chr(0xFF21 + (r * n + i) // 30) if (r * n + i) // 30 < 17 else "\u00e9")
                + str(i) for i in range(n)]}} for r in range(256)]})
    changed = [c for c in map(chr, range(0xA0, 0x30000)) if unicodedata.decomposition(c)
               and unicodedata.normalize("NFKC", c) != c and unicodedata.normalize("NFKC", c).isprintable()
               and not any(unicodedata.combining(x) for x in unicodedata.normalize("NFKC", c))][:1000]
    out["NUL and 1,000 kinds of character NFKC changes in each string"] = _filled_list(
        [], None, lambda i: "\x00" + "".join(random.Random(i).sample(changed, len(changed)))[:1023])
    # Thirteenth round, after the attacker reviews' own inputs: valid manifests where every label holds
    # a place ("tokenizer") every 40 characters and changes under NFKC in its own way, so that all of
    # every label must be read normalised and no replacement serves two of them: between the places,
    # Cyrillic letters each followed by two marks of different classes out of canonical order (NFKC
    # reorders them), or by one of 31 compatibility characters (NFKC spells each out, some as a space
    # and a mark); no two labels alike.
    out.update(_own_way_labels(example))
    # The same round: a full scan walks each distinct string once, which settles a manifest whose
    # references repeat one list (as most of the inputs above do); the costliest of those with no two
    # labels alike, as an attacker would write them.
    for name, unit in (("labels in Japanese, a credential name and a composing mark in each, no two alike (valid)",
                        "パスワードではないハ\u309a評価 "),
                       ("labels in Chinese, full-width comma and 'tokenizer' in each, no two alike (valid)",
                        "模型，tokenizer 评估 "),
                       ("labels in Chinese, full-width comma and 'token' in each, no two alike (valid)",
                        "模型，token 评估 ")):
        out[name] = _filled_labels(lambda n, unit=unit: _own_labels_each(
            example, n, lambda r, i, unit=unit: (unit * (150 // len(unit))).strip() + f" {r}-{i}"))
    unit = "ghp_abc/"
    escaped = json.dumps({"description": _fill(unit, (budget - 64) // 6)})
    out["every character \\u-escaped"] = escaped.replace(unit, "".join(f"\\u{ord(c):04x}" for c in unit)).encode()
    return {name: content for name, content in out.items() if len(content) <= MIB}


def _own_way_labels(example: dict[str, Any]) -> dict[str, bytes]:
    """The thirteenth round's two inputs (see `hostile_inputs`): every label of every reference made
    from its own seed, so that no two strings are the same (normalising each distinct string once
    would settle a document whose references repeat one list: an attacker review's find)."""
    letters = [chr(c) for c in range(0x430, 0x450)]
    marks = sorted((chr(c) for c in (*range(0x5B0, 0x5BE), 0x5BF, 0x5C1, 0x5C2, *range(0x64B, 0x660), 0x670, 0x711,
                                     *range(0x730, 0x74B), *range(0x483, 0x488)) if unicodedata.combining(chr(c))),
                   key=lambda c: (unicodedata.combining(c), c))
    compat = [c for c in map(chr, range(0xA0, 0x2000)) if unicodedata.decomposition(c).startswith("<")
              and unicodedata.normalize("NFKC", c) != c and not unicodedata.category(c).startswith(("Z", "C"))][:31]

    def reordered(rng: random.Random) -> str:
        first, second = rng.sample([m for m in marks if unicodedata.combining(m) != 230], 1) + rng.sample(
            [m for m in marks if unicodedata.combining(m) == 230], 1)
        return rng.choice(letters) + second + first  # class 230 before a lower class: NFKC swaps them

    def spelt(rng: random.Random) -> str:
        return rng.choice(letters) + rng.choice(compat)

    def label(unit: Callable[[random.Random], str], seed: int, word: str = "tokenizer") -> str:
        rng = random.Random(seed)
        made = ""
        while len(made) < 195:  # a place every ~40 characters: no window around places leaves any out
            made += word if len(made) % 40 < 3 else unit(rng)
        return made[:195] + str(seed % 10)

    def labelled(unit: Callable[[random.Random], str], word: str) -> bytes:
        return _filled_labels(lambda n: _own_labels_each(example, n, lambda r, i: label(unit, r * 1000 + i, word)))

    between = {reordered: "marks out of order between", spelt: "31 kinds of compatibility character between"}
    out = {f"labels with '{word}' every 40 characters, {between[unit]}, no two alike (valid)": labelled(unit, word)
           for word, unit in (
               # (since the fifteenth round "token" has stops: "tokenizer" is no place, "token " is)
               ("tokenizer", reordered), ("tokenizer", spelt), ("token ", reordered), ("token ", spelt),
               # (since the sixteenth round a letter after "token " in a value is no place; an assignment
               # cut short is, and a rule must read each string normalised to tell)
               ("token: ab,", reordered),
               # (since the seventeenth round an occurrence its rules' reach rules out is no place, and
               # "@" only after ":/" or after ":" and three characters in its string: the first four
               # are settled so; "x:yyy@z,", userinfo cut short, is a place, and whether a rule
               # matches there depends on what NFKC makes of the host)
               ("ghp_ab,", reordered), ("@", reordered), ("x:y@z", reordered), ("x:yyy@z,", reordered),
               # (since the eighteenth round the host after such an "@" is followed too: "x:yyy@z," is
               # settled. A rule missed by one character past what the searches follow, a value one
               # short, is a place in every label: the floor, `_without_scan_ms` and `_nfkc_alone_ms`)
               ("password: abcde,", reordered))}
    # an attacker's soup: token prefixes one after another, each cut short by a few letters of the
    # next and a comma (9.9x before the seventeenth round, where the walk read it all)
    out["labels of token prefixes cut short one after another, marks between, no two alike (valid)"] = \
        _filled_labels(lambda n: _own_labels_each(example, n, lambda r, i: _soup(r * 1000 + i)))
    return out


_SOUP_PREFIXES = ("ghp_", "gho_", "glpat-", "glrt-", "npm_", "hf_", "AKIA", "ASIA", "xai-", "pplx-", "gsk_", "r8_",
                  "dckr_", "shpat_", "SG.", "AIza", "LTAI", "NRAK-", "pnu_", "whsec_", "sntrys_", "dp.", "hvs.")


def _soup(seed: int) -> str:
    """A label of token prefixes, each followed by one to four letters of another and a comma."""
    rng = random.Random(seed)
    made = "\u0483\u05b0"
    while len(made) < 180:
        made += rng.choice(_SOUP_PREFIXES) + rng.choice(_SOUP_PREFIXES)[:rng.randint(1, 4)] + ","
    return made + str(seed % 10)


def _own_labels_each(example: dict[str, Any], n: int, label: Callable[[int, int], str]) -> dict[str, Any]:
    """The example with 256 references, the r-th holding the n labels `label(r, i)`: no list repeated."""
    ref = example["data"][0]
    return {**example, "data": [{**ref, "decontamination": {**ref["decontamination"], "eval_suites": [
        label(r, i) for i in range(n)]}} for r in range(256)]}


def _filled_list(first: list[str], unit: str | None, make: Callable[[int], str] | None = None) -> bytes:
    """The largest `{"notes": first + [unit] * n}` (or `make(i)` for i < n) that fits in a mebibyte."""
    def encoded(n: int) -> bytes:
        rest = [unit] * n if make is None else [make(i) for i in range(n)]
        return json.dumps({"notes": first + rest}, ensure_ascii=False).encode()

    low, high = 0, 1
    while len(encoded(high)) <= MIB:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if len(encoded(middle)) <= MIB else (low, middle)
    return encoded(low)


def _filled_labels(make: Callable[[int], dict[str, Any]]) -> bytes:
    """The largest `make(n)` (n labels in each of 256 references) that fits in a mebibyte."""
    low, high = 1, 2
    while len(json.dumps(make(high), ensure_ascii=False).encode()) <= MIB:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        fits = len(json.dumps(make(middle), ensure_ascii=False).encode()) <= MIB
        low, high = (middle, high) if fits else (low, middle)
    return json.dumps(make(low), ensure_ascii=False).encode()


def _nfkc_alone_ms(content: bytes, reps: int = 3) -> float:
    """What normalising the document's keys and strings that are not ASCII (an ASCII one is its own
    NFKC) costs on its own, joined by NUL as the scanner joins them, with the faster of CPython's
    `unicodedata` and the scanner's `nfkc` (which replaces what it can and leaves the rest to
    `unicodedata`): the least of `reps` runs, in ms. A scanner that reads those strings normalised
    pays at least this with these normalisers."""
    import ito_training_mcp.nfkc as nfkc_module

    strings: list[str] = []
    stack: list[Any] = [json.loads(content)]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            strings.append(node)
        elif isinstance(node, dict):
            strings += node
            stack += node.values()
        elif isinstance(node, list):
            stack += node
    joined = "\x00".join(text for text in strings if not text.isascii())
    nfkc_module.nfkc(joined)  # first use builds its tables
    best = float("inf")
    for normalise in (functools.partial(unicodedata.normalize, "NFKC"), nfkc_module.nfkc):
        for _ in range(reps):
            started = time.perf_counter()
            normalise(joined)
            best = min(best, time.perf_counter() - started)
    return best * MS


def _without_scan_ms(content: bytes, reps: int = 3) -> float:
    """What the manifest gate's other checks of the document cost (strict JSON, the character rule, the
    schema, the values checked together), its secret scan left out: the least of `reps` runs, in ms.
    With `_nfkc_alone_ms`, what an input whose every string the scan must read normalised costs at
    least, however the scan decides."""
    from unittest import mock

    from ito_training_mcp.gates.manifest import schema as manifest

    best = float("inf")
    with mock.patch.object(manifest.secret_scan, "scan", return_value=[]):
        for _ in range(reps):
            started = time.perf_counter()
            manifest.parse_checked(content)
            best = min(best, time.perf_counter() - started)
    return best * MS


async def bench_digest_hostile(reps: int, workdir: Path) -> Result:
    from ito_training_mcp.service import TrainingService

    service = TrainingService({"ITO_TRAINING_MANIFEST_MAX_BYTES": str(2 * MIB)})
    per_input: dict[str, dict[str, Any]] = {}
    for i, (name, content) in enumerate(hostile_inputs().items()):
        path = write_private(workdir, f"hostile-{i:02d}.json", content)
        tool, base, envelope = await paired(service, path, content, max(reps, 1))
        tool_ms, base_ms = statistics.median(tool) * MS, statistics.median(base) * MS
        per_input[name] = {"bytes": len(content), "tool_ms": tool_ms, "baseline_ms": base_ms,
                           "ratio": paired_ratio(tool, base), "ratio_of_medians": ratio(tool_ms, base_ms),
                           "min_ratio": ratio(min(tool), min(base)),
                           "outcome": "accepted" if envelope.ok else envelope.error.code.value,
                           "kinds": sorted({f["kind"] for f in (envelope.error.details or {}).get("findings", [])})
                           if not envelope.ok else []}
        if envelope.ok and per_input[name]["ratio"] > 5.0:  # what NFKC alone costs there (`_nfkc_alone_ms`)
            per_input[name]["nfkc_alone_ms"] = _nfkc_alone_ms(content)
            per_input[name]["nfkc_alone_ratio"] = ratio(per_input[name]["nfkc_alone_ms"], base_ms)
            per_input[name]["without_scan_ms"] = _without_scan_ms(content)
            per_input[name]["floor_ratio"] = ratio(per_input[name]["nfkc_alone_ms"]
                                                   + per_input[name]["without_scan_ms"], base_ms)
    worst_name = max(per_input, key=lambda n: per_input[n]["ratio"])
    worst = per_input[worst_name]
    rows = [Row(f"worst: {worst_name}", worst["tool_ms"], worst["baseline_ms"], "ms", worst["ratio"], "<= 5x",
                worst["ratio"] <= 5.0)]
    floors = [n for n in per_input if "nfkc_alone_ratio" in per_input[n]]
    if floors:  # (the worst input's, where it is one: a floor only where every string is read normalised)
        floor_name = worst_name if worst_name in floors else max(floors, key=lambda n: per_input[n]["nfkc_alone_ratio"])
        floor = per_input[floor_name]
        rows.append(Row(f"NFKC alone of the strings of an accepted input above 5x, the faster of two: {floor_name}",
                        floor["nfkc_alone_ms"], floor["baseline_ms"], "ms", floor["nfkc_alone_ratio"], "report", None))
        worst_floor = worst_name if worst_name in floors else max(floors, key=lambda n: per_input[n]["floor_ratio"])
        floor = per_input[worst_floor]
        rows.append(Row(f"NFKC alone and the gate's other checks (no scan), an accepted input above 5x: {worst_floor}",
                        floor["nfkc_alone_ms"] + floor["without_scan_ms"], floor["baseline_ms"], "ms",
                        floor["floor_ratio"], "report", None))
    calm_name = max(per_input, key=lambda n: per_input[n]["min_ratio"])
    rows.append(Row(f"worst least-disturbed run: {calm_name}", per_input[calm_name]["min_ratio"], 1.0, "x",
                    per_input[calm_name]["min_ratio"], "report", None))
    median_ratio = statistics.median(v["ratio"] for v in per_input.values())
    rows.append(Row(f"median ratio over {len(per_input)} inputs", median_ratio, 1.0, "x", median_ratio, "report", None))
    title = "digest_manifest of hostile inputs <= 1 MiB vs sha256 + json.loads of the same bytes"
    return Result("digest_hostile", title, rows, raw={"reps": reps, "inputs": per_input})
