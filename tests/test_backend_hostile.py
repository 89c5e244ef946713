"""A hostile backend on a real loopback socket: whatever it sends, the server stays small, refuses
with a stable code, and says truthfully that it contacted the backend.

The backend is tests/hostile_backend.py (raw asyncio, so nothing re-frames or compresses what it
sends). The peak-memory test runs the server under test in a subprocess (tests/hostile_driver.py)
and reads its own peak RSS (VmHWM; `ru_maxrss` would report the pytest worker it was forked
from): decompression bombs (gzip, deflate, nested, stacked headers), bodies
beyond the cap with and without a length, lying and conflicting framing, huge heads, and more,
on every path of the API, through every tool that reaches it.

The other tests run in-process: redirects of every kind on every method, slowloris on the head
and on the body, and what the client asks for on the wire.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ito_training_mcp.backend import wire as backend_wire
from ito_training_mcp.backend.client import BackendClient, BackendRefusal, Exchange
from ito_training_mcp.backend.client import refusals as client_refusals
from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.backend.models import Me
from ito_training_mcp.envelope import Gate
from ito_training_mcp.gates.config import BackendSettings
from ito_training_mcp.service import TrainingService

from . import hostile_backend as hb
from . import hostile_bombs
from .conftest import EXAMPLE_MANIFEST, REPO
from .proving import is_proof_request, proof_response

MIB = 1 << 20
RSS_LIMIT_KIB = 250 * 1024
MANIFEST_SHA = hashlib.sha256(EXAMPLE_MANIFEST.read_bytes()).hexdigest()

# Every scenario through the raw client on all 15 paths; one of each class also through every tool
# that reaches each endpoint (the others add nothing at tool level but time).
TOOL_SCENARIOS = ["gzip", "deflate", "br", "gzip-gzip", "huge-close", "length-short", "redirect-307-bomb"]
REDIRECTS = [300, 301, 302, 303, 304, 305, 306, 307, 308, 350, 399]


def _slow_head() -> hb.Answer:
    return hb.drip(b"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\nX-Slow: ", b"a", 0.02)


def _slow_body() -> hb.Answer:
    return hb.drip(b"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n",
                   b" ", 0.02)


@pytest.fixture(scope="module")
def hostile() -> Iterator[hb.HostileBackend]:
    extra = {f"r{status}": hb.redirect(status) for status in REDIRECTS}
    extra.update({"slow-head": _slow_head(), "slow-body": _slow_body()})
    with hb.HostileBackend(MANIFEST_SHA, extra=extra) as server:
        yield server


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> str:
    directory = tmp_path_factory.mktemp("hostile-manifest")
    os.chmod(directory, 0o700)
    path = directory / "manifest.json"
    path.write_bytes(EXAMPLE_MANIFEST.read_bytes())
    os.chmod(path, 0o600)
    return str(path)


@pytest.fixture(autouse=True)
def forget_revocations() -> Iterator[None]:
    client_refusals._revoked_fingerprints.clear()
    yield
    client_refusals._revoked_fingerprints.clear()


def env_for(url: str, **extra: str) -> dict[str, str]:
    return {
        "ITO_API_URL": url, "ITO_API_KEY": hb.TOKEN, "ITO_TRAINING_TIMEOUT_S": "10",
        "ITO_TRAINING_CAPABILITIES_TTL_S": "0", "ITO_TRAINING_RECOVERY_ATTEMPTS": "1", **extra,
    }


async def client_call(url: str, endpoint: str, **extra: str) -> tuple[BackendRefusal | None, Exchange]:
    """One request through `BackendClient` to the path of `endpoint`; the refusal, if any."""
    method, path = next((m, p) for e, m, p in hb.ENDPOINTS if e == endpoint)
    settings = BackendSettings.from_env(env_for(url, **extra))
    assert settings is not None
    exchange = Exchange()
    path_only, _, query = path.partition("?")
    params = dict(part.split("=", 1) for part in query.split("&")) if query else None
    async with BackendClient(settings, exchange) as api:
        api.authenticate(Credential(hb.TOKEN, "ITO_API_KEY"))
        if endpoint != "capabilities":  # plain http: the origin proof first; what follows is the request tested
            await api.prove_origin(Gate.CREATE)
            exchange.contacted, exchange.requests_sent = False, 0
        try:
            await api.request(method, path_only, Me, gate=Gate.CREATE, auth=endpoint != "capabilities",
                              params=params, json_body={"x": "y"} if method == "POST" else None,
                              idempotency_key="hostile-direct-key-01" if endpoint in hb.MUTATIONS else None,
                              mutation=endpoint in hb.MUTATIONS)
        except BackendRefusal as refusal:
            return refusal, exchange
    return None, exchange


# ---------------------------------------------------------------------------- peak memory


def test_peak_rss_stays_bounded_whatever_the_backend_sends(hostile: hb.HostileBackend, manifest: str) -> None:
    """The finding: `Content-Encoding: gzip, gzip` (2 KiB on the wire, 1 GiB decoded) drove the server to
    2.1 GB. Now every hostile answer on every path is refused with a stable code, the flag says the
    backend was contacted, a mutation is never called ambiguous after a redirect, and the server's
    peak RSS stays under 250 MiB."""
    client_scenarios = sorted(hb.SCENARIOS)
    before = len(hostile.requests())
    done = subprocess.run(
        [sys.executable, "-m", "tests.hostile_driver", str(hostile.port), manifest, ",".join(TOOL_SCENARIOS),
         ",".join(client_scenarios)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("ITO_")},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert hb.TOKEN not in done.stdout and hb.TOKEN not in done.stderr
    tools = [r for r in records if r["kind"] == "tool"]
    clients = [r for r in records if r["kind"] == "client"]
    assert len(tools) == len(TOOL_SCENARIOS) * len(hb.TOOL_TARGETS)
    assert len(clients) == len(client_scenarios) * len(hb.ENDPOINTS)

    for r in tools:
        scenario = hb.SCENARIOS[r["scenario"]]
        mutation = r["target"] in hb.MUTATIONS
        expected = scenario.mutation_code if mutation else scenario.read_code
        assert (r["code"], r["contacted"]) == (expected, True), r
        if r["code"] == "SUBMISSION_OUTCOME_UNKNOWN":
            assert r["last_code"] == scenario.client_code, r
    for r in clients:
        scenario = hb.SCENARIOS[r["scenario"]]
        assert (r["code"], r["contacted"], r["sent"]) == (scenario.client_code, True, 1), r
        assert r["redirected"] is scenario.redirected, r
        assert r["ambiguous"] is (r["target"] in hb.MUTATIONS and not scenario.redirected), r

    seen = hostile.requests()[before:]
    assert all(s.endpoint != "unexpected" for s in seen)
    assert {s.headers.get("accept-encoding") for s in seen} == {"identity"}
    peak = records[-1]["peak_kib"]
    assert records[-1]["kind"] == "end"
    assert peak < RSS_LIMIT_KIB, f"peak RSS {peak / 1024:.0f} MiB"


def test_the_bombs_are_real() -> None:
    """Checked so the memory test cannot pass on a dud: exact streams at 8 MiB (checksums included),
    and the nested 1 GiB bomb inflates a thousandfold and more from a couple of KiB."""
    for wbits in (31, 15):
        assert zlib.decompress(hostile_bombs.zeros_bomb.__wrapped__(wbits, 8 * MIB), wbits) == bytes(8 * MIB)
    nested = hb.SCENARIOS  # keep the import honest: the scenarios use these very builders
    assert "gzip-gzip" in nested
    outer = hostile_bombs.gzip_of(hostile_bombs.zeros_bomb(31))
    assert len(outer) < 4096
    inner = zlib.decompress(outer, 31)
    assert len(inner) < 2 * MIB
    head = zlib.decompressobj(31).decompress(inner, 64 * MIB)
    assert head == bytes(64 * MIB)


# ---------------------------------------------------------------------------- content codings


IDENTITY = [b"identity", b"IDENTITY", b" identity", b"Identity\t", b"\t iDeNtItY  "]
REFUSED_CODINGS = [b"gzip", b"x-gzip", b"deflate", b"br", b"zstd", b"compress", b"gzip, identity",
                   b"identity, gzip", b"identity, identity", b"identity;q=1", b"", b" ", b"x-unknown",
                   "ıdentity".encode(), "identıty".encode(), b"identit\xff", b"ident ity", b"identity,"]


@pytest.mark.parametrize("value", IDENTITY)
def test_identity_in_any_case_and_spacing_is_accepted(value: bytes) -> None:
    assert backend_wire.head_problem(200, [(b"Content-Encoding", value)], MIB) is None


@pytest.mark.parametrize("value", REFUSED_CODINGS)
def test_any_other_content_coding_is_refused(value: bytes) -> None:
    assert backend_wire.head_problem(200, [(b"content-encoding", value)], MIB) is not None


token = st.one_of(st.sampled_from([b"gzip", b"deflate", b"br", b"zstd", b"identity", b"x-bomb", b"chunked"]),
                  st.binary(max_size=12))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(values=st.lists(st.lists(token, min_size=1, max_size=3).map(b", ".join), min_size=1, max_size=3),
       status=st.sampled_from([200, 201, 401, 404, 409, 422, 429, 500, 503]))
def test_coding_headers_are_accepted_only_as_one_identity(values: list[bytes], status: int) -> None:
    """Several headers, several tokens, any bytes: only a single `identity` gets through."""
    headers = [(b"Content-Encoding", value) for value in values]
    accepted = backend_wire.head_problem(status, headers, MIB) is None
    assert accepted is (len(values) == 1 and values[0].strip(b" \t").lower() == b"identity")


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(transfer=st.lists(st.sampled_from([b"chunked", b"CHUNKED", b"gzip, chunked", b"identity", b""]), max_size=2),
       lengths=st.lists(st.sampled_from([b"0", b"12", b"1048576", b"1048577", b"12, 12", b"-1", b"\xd9\xa1"]),
                        max_size=2))
def test_framing_is_accepted_only_when_unambiguous(transfer: list[bytes], lengths: list[bytes]) -> None:
    headers = [(b"Transfer-Encoding", v) for v in transfer] + [(b"Content-Length", v) for v in lengths]
    accepted = backend_wire.head_problem(200, headers, MIB) is None
    chunked_only = len(transfer) == 1 and transfer[0].lower() == b"chunked" and not lengths
    plain_length = not transfer and len(lengths) == 1 and lengths[0].isdigit() and int(lengths[0]) <= MIB
    assert accepted is (chunked_only or plain_length or (not transfer and not lengths))


@pytest.mark.parametrize("status", [100, 101, 103, 199, 600, 999])
def test_a_status_outside_200_to_599_is_invalid(status: int) -> None:
    assert backend_wire.head_problem(status, [], MIB) is not None


async def test_the_client_asks_for_identity_and_never_decodes(hostile: hb.HostileBackend) -> None:
    """httpx would decode gzip on `aiter_bytes`; the client reads raw bytes, so an identity-declared body
    that happens to be gzip stays gzip and is refused as not JSON, not inflated."""
    before = len(hostile.requests())
    gzipped_json = hb.gzip_of(b'{"account_id": "acct-hostile-01"}' + b" " * MIB)
    hostile.extra["gz-undeclared"] = hb.fixed([hb.JSON], lambda: gzipped_json)
    refusal, exchange = await client_call(hostile.url("gz-undeclared", "me"), "me")
    assert refusal is not None and refusal.code.value == "BACKEND_INVALID_RESPONSE"
    assert "schema" in refusal.message and exchange.contacted
    (seen,) = hostile.requests()[before:]
    assert seen.headers["accept-encoding"] == "identity"


# ---------------------------------------------------------------------------- redirects


@pytest.mark.parametrize("endpoint", [e for e, _, _ in hb.ENDPOINTS])
async def test_a_redirect_on_any_path_is_an_answer_never_followed(hostile: hb.HostileBackend, endpoint: str) -> None:
    before = len(hostile.requests())
    refusal, exchange = await client_call(hostile.url("r307", endpoint), endpoint)
    assert refusal is not None
    assert (refusal.code.value, refusal.redirected, refusal.ambiguous) == ("BACKEND_INVALID_RESPONSE", True, False)
    assert "ITO_API_URL" in refusal.message and refusal.next_step and "ITO_API_URL" in refusal.next_step
    assert refusal.details == {"status": 307, "setting": "ITO_API_URL"}
    assert exchange.contacted and exchange.requests_sent == 1
    assert [s.endpoint for s in hostile.requests()[before:]] == [endpoint]


@pytest.mark.parametrize("status", REDIRECTS)
@pytest.mark.parametrize("endpoint", ["create", "cancel", "run", "plan"])
async def test_every_3xx_on_every_method_is_refused_once(hostile: hb.HostileBackend, endpoint: str, status: int) -> None:
    before = len(hostile.requests())
    refusal, exchange = await client_call(hostile.url(f"r{status}", endpoint), endpoint)
    assert refusal is not None and refusal.redirected and not refusal.ambiguous
    assert refusal.code.value == "BACKEND_INVALID_RESPONSE" and refusal.retryable is False
    assert (refusal.details or {})["status"] == status
    assert exchange.requests_sent == 1 and len(hostile.requests()) - before == 1


@pytest.mark.parametrize(("tool", "target"), [("submit_training", "create"), ("cancel_training", "cancel"),
                                              ("cleanup_training", "cleanup")])
async def test_a_redirected_mutation_is_sent_once_and_never_resent(
    hostile: hb.HostileBackend, manifest: str, tool: str, target: str
) -> None:
    """The finding: a 307 on create was taken for a lost answer, and the fourth send created the run."""
    from .hostile_driver import arguments

    before = len(hostile.requests())
    envelope = await TrainingService(env_for(hostile.url("r307", target))).invoke(tool, arguments(tool, manifest))
    wire = envelope.to_dict()
    assert wire["ok"] is False and wire["live_api_contacted"] is True
    assert wire["error"]["code"] == "BACKEND_INVALID_RESPONSE"
    assert wire["error"]["details"]["status"] == 307
    assert "ITO_API_URL" in wire["notice"] and "ITO_API_URL" in wire["error"]["message"]
    assert "elsewhere" not in json.dumps(wire)  # the Location is never relayed
    seen = [s.endpoint for s in hostile.requests()[before:]]
    assert seen.count(target) == 1
    # At most one look-up afterwards (the service may look the key up once), and nothing resent.
    after = seen[seen.index(target) + 1:]
    assert len(after) <= 1 and target not in after


@pytest.mark.parametrize("times", [1, 4])
async def test_a_redirect_on_create_at_the_reference_backend_creates_nothing(
    world: Any, manifest_path: str, times: int
) -> None:
    """The finding, replayed on the reference backend: before, the 302 was taken for a lost answer, the
    key looked up and the create re-sent until the fault ran out, and a later send created the run."""
    ref = world.confirm(hashlib.sha256(Path(manifest_path).read_bytes()).hexdigest())
    world.op.fault("POST /v1/training-runs", "redirect", times=times, location="http://127.0.0.1:9/elsewhere")
    world.op.clear_requests()
    key = f"redirected-create-key-{times:02d}"
    envelope = await world.service().submit_training(world.booking, manifest_path, ref, key)
    assert envelope.error is not None and envelope.error.code.value == "BACKEND_INVALID_RESPONSE"
    assert envelope.live_api_contacted is True and "ITO_API_URL" in envelope.notice
    posts = [r for r in world.backend_requests() if (r["method"], r["path"]) == ("POST", "/v1/training-runs")]
    assert [r["status"] for r in posts] == [302]
    assert world.backend.run_count() == 0
    # Once the origin answers properly again, the same key and confirmation create exactly one run.
    world.op.clear_faults()
    again = await world.service().submit_training(world.booking, manifest_path, ref, key)
    assert again.ok, again.to_json()
    assert world.backend.runs_for_key(world.account, key) == 1


# ---------------------------------------------------------------------------- slowloris


@pytest.mark.parametrize("scenario", ["slow-head", "slow-body"])
@pytest.mark.parametrize("endpoint", ["me", "create"])
async def test_a_dripping_backend_meets_the_overall_deadline(
    hostile: hb.HostileBackend, scenario: str, endpoint: str
) -> None:
    """A byte every 20 ms would defeat per-phase timeouts forever; the overall deadline ends it."""
    refusal, exchange = await client_call(hostile.url(scenario, endpoint), endpoint, ITO_TRAINING_TIMEOUT_S="0.3")
    assert refusal is not None and refusal.code.value == "BACKEND_TIMEOUT"
    assert exchange.contacted and exchange.requests_sent == 1
    assert refusal.ambiguous is (endpoint in hb.MUTATIONS)


async def test_non_ascii_header_values_do_not_break_the_client(hostile: hb.HostileBackend) -> None:
    hostile.extra["odd-429"] = hb.fixed(
        [hb.JSON, (b"Retry-After", "\u0661\u0662".encode()), (b"WWW-Authenticate", "Bearer é".encode())],
        lambda: b'{"error": {"code": "rate_limited", "message": "slow down"}}', status=429)
    refusal, exchange = await client_call(hostile.url("odd-429", "run"), "run")
    assert refusal is not None and refusal.code.value == "RATE_LIMITED"
    assert "retry_after_s" not in (refusal.details or {}) and exchange.contacted


async def test_the_reference_backend_still_answers_the_hardened_client(world: Any) -> None:
    """Accept-Encoding: identity and raw reads against the real reference backend (uvicorn + Starlette)."""
    envelope = await TrainingService(world.env).check_training_availability(booking_id=world.booking)
    assert envelope.ok, envelope.to_json()
    requests = world.backend_requests()
    assert requests and all(r["status"] == 200 for r in requests)


def test_mock_transports_see_identity_too() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if is_proof_request(request.url.path):
            return proof_response(request, hb.TOKEN)
        return httpx.Response(200, json={"account_id": hb.ACCOUNT})

    async def go() -> None:
        settings = BackendSettings.from_env(env_for("http://127.0.0.1:9"))
        assert settings is not None
        async with BackendClient(settings, Exchange(), transport=httpx.MockTransport(answer)) as api:
            api.authenticate(Credential(hb.TOKEN, "ITO_API_KEY"))
            await api.request("GET", "/v1/me", Me, gate=None)

    anyio.run(go)
    assert seen[0].headers["accept-encoding"] == "identity"


def test_the_driver_and_backend_agree_on_the_paths() -> None:
    assert {hb.classify(m, p) for _, m, p in hb.ENDPOINTS} == {e for e, _, _ in hb.ENDPOINTS}
    assert Path(hb.__file__).parent == REPO / "tests"
