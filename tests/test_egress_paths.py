"""Every way out of the server, against a backend that puts hostile text in every string it can.

The reference backend (real HTTP) is patched to answer with the configured token, a PEM key, a
database URL with its password, a Bearer header, terminal escape sequences, C1 controls and bidi
overrides in stage names and states, eval keys and values, log lines, checkpoint URIs, eligibility
text and capability names. Then everything the server lets out is captured and grepped:

- envelopes (structured content and the text block) and progress notifications, through a real MCP
  client in both protocol eras, with a progress callback;
- the stderr log lines of a real stdio server process at DEBUG, and its audit file;
- the stdout and stderr of real CLI processes, human and `--json`.

The property test at the bottom draws arbitrary backend strings into every string field of every
endpoint (through an in-process fake backend) and checks envelopes and progress messages.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from ito_training_mcp.backend.models import CONFIRMATION_OPERATIONS, REQUIRED_OPERATIONS
from ito_training_mcp.service import TrainingService

from .conftest import CANARY_AWS, CANARY_GITHUB, ClientFactory, World

PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
DATABASE_URL = "postgres://trainer:Winter2026db@db.internal:5432/runs"
LEAK_MARKERS = ("PRIVATE KEY", "Winter2026db", CANARY_GITHUB, CANARY_AWS)
TS = "2026-11-29T20:00:00Z"


def hostile(world: World) -> dict[str, str]:
    """Hostile strings, each within the size limits of the field it goes into."""
    return {
        "token": world.token,
        "stage": f"sft\x1b]0;{world.token}\x07",          # an OSC title sequence around the configured token
        "state": "running\u202e\u2066",
        "bearer": f"Bearer {world.token}",
        "csi": "ok\x1b[1A\x1b[2K\rSHA-256: 0000\x9b2J",
        "pem": PEM,
        "db": DATABASE_URL,
        "github": f"push {CANARY_GITHUB}",
    }


def install_faults(world: World, h: dict[str, str]) -> None:
    """json_patch faults that rewrite every successful answer the tools below read, many times over."""
    times = 200
    stages = [
        {"name": h["stage"], "state": "running",
         "gate": {"status": "passed", "evals": {h["pem"]: h["db"], "acc\u202e": h["csi"], "note": h["bearer"]}}},
        {"name": "dpo", "state": h["state"], "gate": {"status": "pending", "evals": {h["github"]: 1}}},
    ]
    world.op.fault("GET /v1/training-runs/{run_id}", "json_patch", times=times,
                   patch={"state": "succeeded", "stages": stages})
    world.op.fault("GET /v1/training-runs/{run_id}/logs", "json_patch", times=times, patch={"lines": [
        {"ts": TS, "stage": h["stage"], "message": h["csi"]},
        {"ts": TS, "stage": None, "message": f"connecting to {h['db']}"},
        {"ts": TS, "stage": "sft", "message": h["pem"]},
        {"ts": TS, "stage": "sft", "message": f"auth header: {h['bearer']}"},
    ], "next_cursor": None})
    world.op.fault("GET /v1/training-runs/{run_id}/checkpoints", "json_patch", times=times, patch={"checkpoints": [
        {"checkpoint_id": "ck-1", "step": 1, "created_at": TS, "size_bytes": 1,
         "uri": "s3://trainer:Winter2026db@bucket/ck-1\u202e"},
        {"checkpoint_id": "ck-2", "step": 2, "created_at": TS, "size_bytes": 1, "uri": h["csi"]},
    ]})
    world.op.fault("GET /v1/bookings/{id}/training-eligibility", "json_patch", times=times,
                   patch={"region": h["pem"], "fabric": h["csi"], "gpu_topology": {"gpu": h["db"]}})
    world.op.fault("GET /v1/capabilities", "json_patch", times=times, patch={"training": {
        "available": True, "operations": [*REQUIRED_OPERATIONS, *CONFIRMATION_OPERATIONS, "pl\u202ean", h["github"],
                                          h["token"]]}})
    world.op.fault("POST /v1/training-plans", "json_patch", times=times, patch={
        "checks": [{"name": f"manifest{h['state'][7:]}", "status": "passed", "reason": None, "message": h["csi"]},
                   {"name": "budget", "status": "passed", "reason": None, "message": h["pem"]}],
        "estimate": {"basis": f"{h['db']} {h['bearer']} {h['stage']}"}})


def strings_of(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_of(item)


def assert_clean(text: str, world: World, *, allow_newlines: bool = False, where: str = "") -> None:
    """No secret, no raw control or bidi character: only printable text (and line breaks between lines)."""
    for marker in (world.token, *LEAK_MARKERS):
        assert marker not in text, f"{where}: {marker[:12]}... leaked"
    bad = [f"U+{ord(ch):04X}" for ch in text if not ch.isprintable() and not (allow_newlines and ch == "\n")]
    assert bad == [], f"{where}: raw {bad[:5]}"


async def create_run(world: World, manifest_path: str, service: TrainingService) -> str:
    sha = hashlib.sha256(Path(manifest_path).read_bytes()).hexdigest()
    env = await service.submit_training(world.booking, manifest_path, world.confirm(sha), f"egress-{os.urandom(6).hex()}")
    assert env.ok and env.data is not None, env.to_json()
    return str(env.data["run_id"])


def calls(world: World, run_id: str, manifest_path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("check_training_availability", {"booking_id": world.booking}),
        ("plan_training", {"booking_id": world.booking, "manifest_path": manifest_path}),
        ("training_status", {"run_id": run_id, "wait_seconds": 5}),
        ("training_logs", {"run_id": run_id}),
        ("list_checkpoints", {"run_id": run_id}),
    ]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_hostile_backend_text_never_leaves_through_mcp(
    connect: ClientFactory, world: World, manifest_path: str, tmp_path: Path
) -> None:
    trail = tmp_path / "audit.jsonl"
    service = world.service(ITO_TRAINING_AUDIT_LOG=str(trail))
    run_id = await create_run(world, manifest_path, service)
    h = hostile(world)
    install_faults(world, h)
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    seen: list[str] = []
    multiline: set[str] = set()  # the local review (plan_training) keeps its line breaks, nothing else does
    async with connect(service=service) as client:
        for tool, arguments in calls(world, run_id, manifest_path):
            result = await client.call_tool(tool, arguments, progress_callback=on_progress)
            envelope = result.structured_content
            assert envelope is not None and envelope["ok"] is True, envelope
            seen.append(result.content[0].text)
            seen.extend(strings_of(envelope))
            multiline.update([envelope["data"].get("review_text"), (envelope["data"].get("review") or {}).get(
                "description")])
    assert progress, "the wait reported no progress"
    for text in seen:
        assert_clean(text, world, where="envelope", allow_newlines=text in multiline)
    for message in progress:
        assert_clean(message, world, where="progress")
    assert any("⟨U+001B⟩" in text for text in seen)  # shown, not interpreted
    assert_clean(trail.read_text(), world, allow_newlines=True, where="audit")
    status = json.loads(next(t for t in seen if '"failed_gates"' in t))  # a run's status, not a plan's estimate
    stage = status["data"]["stages"][0]
    assert stage["name"] == "sft⟨U+001B⟩]0;<redacted>⟨U+0007⟩"
    assert any(v.startswith("<redacted: looked like a credential") for v in stage["gate"]["evals"].values())
    plan = json.loads(next(t for t in seen if '"plan_id"' in t))
    assert plan["data"]["checks"][0]["name"] == "manifest⟨U+202E⟩⟨U+2066⟩"
    assert plan["data"]["checks"][1]["message"].startswith("<redacted: looked like a credential")
    assert plan["data"]["review_text"].count("\n") > 3  # the local review keeps its lines


def test_hostile_backend_text_never_leaves_through_stdio_logs_audit_and_cli(
    world: World, manifest_path: str, tmp_path: Path
) -> None:
    trail = tmp_path / "audit.jsonl"
    env = {"ITO_API_URL": world.backend.url, "ITO_API_KEY": world.token, "ITO_TRAINING_AUDIT_LOG": str(trail),
           "ITO_TRAINING_POLL_INTERVAL_S": "0.05", "ITO_TRAINING_TIMEOUT_S": "5"}
    run_id = anyio.run(create_run, world, manifest_path, TrainingService(env))
    h = hostile(world)
    install_faults(world, h)
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def over_stdio(errlog: Any) -> list[str]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "ito_training_mcp", "--log-level", "DEBUG"],
                                       env=env)
        texts: list[str] = []
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            for tool, arguments in calls(world, run_id, manifest_path):
                result = await client.call_tool(tool, arguments, progress_callback=on_progress)
                assert result.structured_content is not None and result.structured_content["ok"], result
                texts.append(result.content[0].text)
                data = result.structured_content["data"]
                multiline.update([data.get("review_text"), (data.get("review") or {}).get("description")])
                texts.extend(strings_of(result.structured_content))
        return texts

    multiline: set[str] = set()  # the local review (plan_training) keeps its line breaks, nothing else does
    with tempfile.TemporaryFile("w+") as errlog:
        texts = anyio.run(over_stdio, errlog)
        errlog.seek(0)
        stderr = errlog.read()
    assert "GET /v1/training-runs" in stderr  # DEBUG logging happened
    assert_clean(stderr, world, allow_newlines=True, where="stdio stderr")
    for text in texts + progress:
        assert_clean(text, world, where="stdio envelope/progress", allow_newlines=text in multiline)
    assert_clean(trail.read_text(), world, allow_newlines=True, where="audit")

    cli_env = {**{k: v for k, v in os.environ.items() if not k.startswith("ITO_")}, **env}
    for argv in (["status", "--run", run_id], ["status", "--run", run_id, "--json"], ["logs", "--run", run_id],
                 ["logs", "--run", run_id, "--json"], ["checkpoints", "--run", run_id],
                 ["check", "--booking", world.booking], ["check", "--booking", world.booking, "--json"]):
        done = subprocess.run([sys.executable, "-c", "from ito_training_mcp.doors.cli.main import main; raise SystemExit(main())",
                               *argv], capture_output=True, text=True, env=cli_env, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert_clean(done.stdout, world, allow_newlines=True, where=f"cli {argv} stdout")
        assert_clean(done.stderr, world, allow_newlines=True, where=f"cli {argv} stderr")


# ---------------------------------------------------------------------- property: any backend string


@pytest.fixture(scope="module")
def fuzz_manifest() -> Iterator[str]:
    from .test_fuzz_backend_responses import MANIFEST_BYTES

    d = tempfile.mkdtemp(prefix="ito-egress-")
    os.chmod(d, 0o700)
    path = Path(d) / "manifest.json"
    path.write_bytes(MANIFEST_BYTES)
    os.chmod(path, 0o600)
    yield str(path)


# What a backend may put in a string: anything, plus the secrets and controls above.
_ANY = st.text(st.characters(codec="utf-8"), max_size=24)
_CANARIES = st.sampled_from([PEM, DATABASE_URL, CANARY_GITHUB, CANARY_AWS, "Bearer {token}", "{token}",
                             "\x1b[2J", "\u202e", "\x9b", "\r", "\u2028", "\x00", "\u200b{token}"])
backend_strings = st.one_of(_ANY, _CANARIES, st.tuples(_ANY, _CANARIES, _ANY).map("".join))


def _replace_strings(doc: Any, draw: Any, token: str, protected: frozenset[str]) -> Any:
    """Every string value (and every free-form key) of a valid body replaced by a drawn one; ids,
    timestamps, enums and digests are kept so the answer still validates and reaches the envelope."""
    if isinstance(doc, dict):
        out: dict[str, Any] = {}
        for key, value in doc.items():
            if key == "evals":
                value = {draw(backend_strings).replace("{token}", token): draw(backend_strings).replace("{token}", token)
                         for _ in range(3)}
                out[key] = value
            elif key in protected:
                out[key] = value
            else:
                out[key] = _replace_strings(value, draw, token, protected)
        return out
    if isinstance(doc, list):
        return [_replace_strings(item, draw, token, protected) for item in doc]
    if isinstance(doc, str):
        return draw(backend_strings).replace("{token}", token)[:128]
    return doc


_PROTECTED = frozenset({"run_id", "booking_id", "account_id", "manifest_sha256", "idempotency_key", "created_at",
                        "updated_at", "ts", "term_ends_at", "checked_at", "expires_at", "checkpoint_id", "contract_version",
                        "status", "next_cursor", "cost_usd_to_date", "max_cost_usd", "ref", "action", "reason",
                        "operations", "state", "review_url", "request_id", "plan_id", "confirmation_ref", "usd",
                        "decided_at", "valid"})
# (endpoint, tool): every endpoint whose answer a tool relays, through that tool.
RELAYING = [("capabilities", "check"), ("eligibility", "check"), ("run", "status"), ("logs", "logs"),
            ("checkpoints", "checkpoints"), ("cleanup", "cleanup"), ("cancel", "cancel"), ("create", "submit"),
            ("plan", "plan"), ("request", "confirmation_status"), ("request_create", "request_confirmation")]


@pytest.mark.parametrize(("target", "tool"), RELAYING, ids=[f"{t}-via-{u}" for t, u in RELAYING])
def test_property_any_backend_string_leaves_clean(target: str, tool: str, fuzz_manifest: str) -> None:
    from . import test_fuzz_backend_responses as fz

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        fz.client_refusals._revoked_fingerprints.clear()
        status, body = fz.VALID[target](fz.REF_OF_TOOL.get(tool, ""))
        if target == "capabilities":
            body = {**body, "training": {"available": True, "operations": [
                *REQUIRED_OPERATIONS, *(data.draw(backend_strings).replace("{token}", fz.CANARY_TOKEN) for _ in range(3))]}}
        if target == "run" or target == "cancel" or target == "create":
            body = {**body, "state": "succeeded" if target == "run" else body["state"]}
            body["stages"] = [{**s, "state": "running"} for s in body["stages"]]
        mutated = _replace_strings(body, data.draw, fz.CANARY_TOKEN, _PROTECTED)
        fake = fz.FakeBackend(target, fz._json_reply(mutated, status))
        progress: list[str] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message or "")

        async def go() -> Any:
            service = fz.make_service(fake)
            if tool == "status":
                return await service.training_status(run_id=fz.RUN_ID, wait_seconds=1, progress=on_progress)
            return await fz.TOOLS[tool](service, fuzz_manifest)

        envelope = anyio.run(go)
        wire = envelope.to_json()
        data = envelope.data or {}
        multiline = {data.get("review_text"), (data.get("review") or {}).get("description")}  # the local review
        for text in [wire, *strings_of(envelope.to_dict()), *progress]:
            assert fz.CANARY_TOKEN not in text
            for marker in LEAK_MARKERS:
                assert marker not in text
            kept = "\n" if text in multiline else ""
            assert all(ch.isprintable() or ch in kept for ch in text), [
                f"U+{ord(c):04X}" for c in text if not c.isprintable()]

    check()


# ---------------------------------------------------------------------- every relayed field, by name

RELAYED_FIELDS: list[tuple[str, str, str]] = [  # (endpoint, tool, dotted path in the backend's answer)
    ("capabilities", "check", "training.operations.7"),
    ("eligibility", "check", "gpu_topology.gpu"),
    ("eligibility", "check", "region"),
    ("eligibility", "check", "fabric"),
    ("run", "status", "stages.0.name"),
    ("run", "status", "stages.0.state"),
    ("run", "status", "stages.0.gate.evals.note"),
    ("run", "status", "stages.0.gate.evals.<key>"),
    ("create", "submit", "stages.0.name"),
    ("cancel", "cancel", "stages.1.gate.evals.note"),
    ("logs", "logs", "lines.0.message"),
    ("logs", "logs", "lines.0.stage"),
    ("checkpoints", "checkpoints", "checkpoints.0.uri"),
    ("cleanup", "cleanup", "cleaned.1"),
    ("plan", "plan", "checks.0.message"),
    ("plan", "plan", "checks.5.name"),
    ("plan", "plan", "estimate.basis"),
]


def _put(doc: Any, dotted: str, value: str) -> None:
    *parents, last = dotted.split(".")
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if last == "<key>":
        node[value] = "0.9"
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


@pytest.mark.parametrize("secret", [PEM[:120], DATABASE_URL, "aws_secret_access_key=" + "wJalrXUtnFEMI" * 3],
                         ids=["pem", "database-url", "credential-assignment"])
@pytest.mark.parametrize(("target", "tool", "dotted"), RELAYED_FIELDS, ids=[f"{t}:{d}" for t, _, d in RELAYED_FIELDS])
async def test_every_relayed_field_passes_the_full_scanner(
    target: str, tool: str, dotted: str, secret: str, fuzz_manifest: str
) -> None:
    """Not only token shapes: whatever the manifest scanner would refuse is not relayed either."""
    import copy

    from . import test_fuzz_backend_responses as fz

    status, body = fz.VALID[target](fz.REF_OF_TOOL.get(tool, ""))
    body = copy.deepcopy(body)
    if target == "capabilities":
        body["training"]["operations"] = [*body["training"]["operations"], "extra"]
    if target in ("run", "create", "cancel"):
        body["stages"][0]["gate"]["evals"]["note"] = "fine"
        body["stages"][1]["gate"]["evals"]["note"] = "fine"
    _put(body, dotted, secret if "name" not in dotted and "stage" not in dotted else secret[:120])
    envelope = await fz.TOOLS[tool](fz.make_service(fz.FakeBackend(target, fz._json_reply(body, status))), fuzz_manifest)
    assert envelope.ok, envelope.to_json()
    wire = envelope.to_json()
    assert "PRIVATE KEY" not in wire and "Winter2026db" not in wire and "wJalrXUtnFEMI" not in wire
    if target not in ("create", "cancel") or not dotted.startswith("stages"):  # a mutation's answer omits stages
        assert "<redacted: looked like a credential" in wire


async def test_a_cached_capabilities_answer_still_passes_the_egress(fuzz_manifest: str) -> None:
    """The second call is answered from the cache (nothing contacted), and is cleaned all the same."""
    from . import test_fuzz_backend_responses as fz

    status, body = fz.VALID["capabilities"]("")
    body = {**body, "training": {"available": True,
                                 "operations": [*REQUIRED_OPERATIONS, "pl\u202ean", DATABASE_URL, "x\x1b[2J"]}}
    fake = fz.FakeBackend("capabilities", fz._json_reply(body, status))
    service = TrainingService({**fz.ENV, "ITO_TRAINING_CAPABILITIES_TTL_S": "60"},
                              transport=fz.TracingMockTransport(fake), clock=lambda: fz.NOW)
    first = await service.check_training_availability()
    second = await service.check_training_availability()
    assert first.live_api_contacted is True and second.live_api_contacted is False
    assert fake.seen == ["capabilities"]
    for envelope in (first, second):
        assert envelope.ok and envelope.data is not None
        wire = envelope.to_json()
        assert "\u202e" not in wire and "\x1b" not in wire and "Winter2026db" not in wire
        assert "pl⟨U+202E⟩an" in envelope.data["operations"]
