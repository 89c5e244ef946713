"""The official MCP conformance suite (`@modelcontextprotocol/conformance`) against the real server.

`make conformance-install` (a prerequisite of `make test`) installs the suite and a Node 22 of its own into
.conformance/ (npm, never globally). The server runs as a subprocess (`ito-training-mcp --transport
streamable-http`) on a free loopback port; the suite runs each of its server scenarios against it once, and
each scenario is judged here from the suite's own result files. Every scenario the suite lists must be
classified below: an APPLICABLE one must pass with no failed check and no warning; a NOT_APPLICABLE one
carries its reason (docs/conformance.md gives the same list) and, where the reason is a fact about the
server (a capability it does not declare, a fixture it does not offer), that fact is checked too. A scenario
that a newer suite adds fails the classification test until someone classifies it.

The suite's absence fails these tests, unless ITO_SKIP_CONFORMANCE=1 is set explicitly. Below the suite:
wire-level probes of what it does not cover (error codes, version negotiation, Origin validation).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import CANARY_TOKEN, REPO
from .test_streamable_http import free_port, server_env, stop, wait_until_listening

SUITE_VERSION = "0.1.16"  # the Makefile's CONFORMANCE_VERSION; a bump means re-reviewing the lists below
SUITE_MODULES = REPO / ".conformance" / "node_modules"
NODE = SUITE_MODULES / ".bin" / "node"
SUITE_CLI = SUITE_MODULES / ".bin" / "conformance"
SUITE_PACKAGE = SUITE_MODULES / "@modelcontextprotocol" / "conformance" / "package.json"
SERVER = Path(sys.executable).parent / "ito-training-mcp"
DOC = REPO / "docs" / "conformance.md"
# Read at import: the autouse clean_env fixture removes every ITO_* variable before each test body runs.
SKIP_REQUESTED = os.environ.get("ITO_SKIP_CONFORMANCE") == "1"
SUITE_TIMEOUT_S = 240.0
HTTP_TIMEOUT_S = 10.0

# Scenarios that test the protocol or the transport, not a fixture: each must pass.
APPLICABLE: dict[str, str] = {
    "server-initialize": "the initialize handshake completes",
    "ping": "ping answers an empty result",
    "tools-list": "every tool has a name, a description and an input schema",
    "resources-list": "every resource has a uri and a name",
    "prompts-list": "every prompt has a name and a description",
    "server-sse-multiple-streams": "three concurrent POSTs in one session are all answered",
    "dns-rebinding-protection": "a foreign Host/Origin is refused with a 4xx, a loopback one accepted",
}


@dataclass(frozen=True)
class NotApplicable:
    reason: str
    capability: str | None = None  # a capability the scenario needs and this server does not declare
    tools: tuple[str, ...] = ()  # fixtures of the suite's reference server that this server does not offer
    prompts: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()


FIXTURE = "a test fixture of the suite's reference ('everything') server, not part of this product"
NOT_APPLICABLE: dict[str, NotApplicable] = {
    "logging-set-level": NotApplicable(
        "the server declares no `logging` capability (it sends no log notifications; logs go to stderr), "
        "so logging/setLevel is correctly answered -32601", capability="logging"),
    "completion-complete": NotApplicable(
        f"needs the `completions` capability and the prompt test_prompt_with_arguments, {FIXTURE}",
        capability="completions", prompts=("test_prompt_with_arguments",)),
    "resources-subscribe": NotApplicable(
        "the server declares resources.subscribe = false (its resources are static files)",
        capability="resources.subscribe", resources=("test://watched-resource",)),
    "resources-unsubscribe": NotApplicable(
        "the server declares resources.subscribe = false (its resources are static files)",
        capability="resources.subscribe", resources=("test://watched-resource",)),
    "tools-call-simple-text": NotApplicable(f"calls test_simple_text, {FIXTURE}", tools=("test_simple_text",)),
    "tools-call-image": NotApplicable(f"calls test_image_content, {FIXTURE}", tools=("test_image_content",)),
    "tools-call-audio": NotApplicable(f"calls test_audio_content, {FIXTURE}", tools=("test_audio_content",)),
    "tools-call-embedded-resource": NotApplicable(
        f"calls test_embedded_resource, {FIXTURE}", tools=("test_embedded_resource",)),
    "tools-call-mixed-content": NotApplicable(
        f"calls test_multiple_content_types, {FIXTURE}", tools=("test_multiple_content_types",)),
    "tools-call-with-logging": NotApplicable(
        f"calls test_tool_with_logging, {FIXTURE}; and the server declares no `logging` capability",
        capability="logging", tools=("test_tool_with_logging",)),
    "tools-call-error": NotApplicable(f"calls test_error_handling, {FIXTURE}", tools=("test_error_handling",)),
    "tools-call-with-progress": NotApplicable(
        f"calls test_tool_with_progress, {FIXTURE} (progress of the real tools is tested with the SDK client)",
        tools=("test_tool_with_progress",)),
    "tools-call-sampling": NotApplicable(
        f"calls test_sampling, {FIXTURE}; the server never asks the client to sample", tools=("test_sampling",)),
    "tools-call-elicitation": NotApplicable(
        f"calls test_elicitation, {FIXTURE}; the server never elicits form input: it only offers a review link "
        "(URL mode), and the person confirms at the desk",
        tools=("test_elicitation",)),
    "elicitation-sep1034-defaults": NotApplicable(
        f"calls test_elicitation_sep1034_defaults, {FIXTURE}; the server never elicits form input",
        tools=("test_elicitation_sep1034_defaults",)),
    "elicitation-sep1330-enums": NotApplicable(
        f"calls test_elicitation_sep1330_enums, {FIXTURE}; the server never elicits form input",
        tools=("test_elicitation_sep1330_enums",)),
    "json-schema-2020-12": NotApplicable(
        f"lists json_schema_2020_12_tool, {FIXTURE} (pending in the suite)", tools=("json_schema_2020_12_tool",)),
    "server-sse-polling": NotApplicable(
        f"calls test_reconnection, {FIXTURE} (pending in the suite); the server keeps no event store for "
        "stream resumption: a lost submit response is recovered by its idempotency key instead",
        tools=("test_reconnection",)),
    "resources-read-text": NotApplicable(f"reads test://static-text, {FIXTURE}", resources=("test://static-text",)),
    "resources-read-binary": NotApplicable(
        f"reads test://static-binary, {FIXTURE}", resources=("test://static-binary",)),
    "resources-templates-read": NotApplicable(
        f"reads test://template/123/data, {FIXTURE}; this server's one template is a manifest's review",
        resources=("test://template/123/data",)),
    "prompts-get-simple": NotApplicable(f"gets test_simple_prompt, {FIXTURE}", prompts=("test_simple_prompt",)),
    "prompts-get-with-args": NotApplicable(
        f"gets test_prompt_with_arguments, {FIXTURE}", prompts=("test_prompt_with_arguments",)),
    "prompts-get-embedded-resource": NotApplicable(
        f"gets test_prompt_with_embedded_resource, {FIXTURE}", prompts=("test_prompt_with_embedded_resource",)),
    "prompts-get-with-image": NotApplicable(
        f"gets test_prompt_with_image, {FIXTURE}", prompts=("test_prompt_with_image",)),
}


# ---------------------------------------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`ito-training-mcp --transport streamable-http` on a free loopback port, a canary as its API key."""
    port = free_port()
    stderr_path = tmp_path_factory.mktemp("conformance-server") / "stderr.log"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            [str(SERVER), "--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
            env=server_env({"ITO_API_KEY": CANARY_TOKEN}),
        )
    try:
        wait_until_listening(proc, port, stderr_path)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)
        assert CANARY_TOKEN not in stderr_path.read_text(errors="replace")


# ---------------------------------------------------------------------------------------------- the suite


@dataclass(frozen=True)
class SuiteRun:
    listed: frozenset[str]
    checks: dict[str, list[dict[str, Any]]]  # scenario -> the checks the suite recorded for it
    output: str  # everything the suite printed, and every result file, for the canary check


def _suite(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/root"), "NO_COLOR": "1"}
    return subprocess.run([str(NODE), str(SUITE_CLI), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO, check=False)


@pytest.fixture(scope="module")
def suite_installed() -> str:
    """The installed suite's version; its absence fails (or skips, with ITO_SKIP_CONFORMANCE=1)."""
    if not (NODE.exists() and SUITE_CLI.exists() and SUITE_PACKAGE.exists()):
        if SKIP_REQUESTED:
            pytest.skip("ITO_SKIP_CONFORMANCE=1: the MCP conformance suite is not installed")
        pytest.fail("MCP conformance suite missing: run `make conformance-install` (make test does it) "
                    "or set ITO_SKIP_CONFORMANCE=1")
    version = json.loads(SUITE_PACKAGE.read_text())["version"]
    assert version == SUITE_VERSION, (f"installed conformance suite {version}, expected {SUITE_VERSION}: run "
                                      "`make conformance-install`, or review the lists here before bumping")
    return str(version)


@pytest.fixture(scope="module")
def suite_run(suite_installed: str, mcp_url: str, tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    """`conformance list --server`, then `conformance server --suite all` against the server, once."""
    listing = _suite("list", "--server", timeout=60)
    assert listing.returncode == 0, listing.stderr
    listed = frozenset(re.findall(r"^\s+- ([a-z0-9-]+)", listing.stdout, flags=re.MULTILINE))
    assert listed, listing.stdout

    results = tmp_path_factory.mktemp("conformance-results")
    run = _suite("server", "--url", mcp_url, "--suite", "all", "-o", str(results), timeout=SUITE_TIMEOUT_S)
    # 0: every scenario passed; 1: some failed (the fixture scenarios do). Anything else: the suite broke.
    assert run.returncode in (0, 1), f"the suite crashed ({run.returncode}):\n{run.stdout}\n{run.stderr}"

    checks: dict[str, list[dict[str, Any]]] = {}
    output = [run.stdout, run.stderr]
    for path in sorted(results.glob("server-*/checks.json")):
        match = re.fullmatch(r"server-([a-z0-9-]+?)-\d{4}-\d\d-\d\dT[\dT-]+Z", path.parent.name)
        assert match, path
        text = path.read_text()
        output.append(text)
        assert match[1] not in checks, f"two result directories for {match[1]}"
        checks[match[1]] = json.loads(text)
    return SuiteRun(listed, checks, "\n".join(output))


def test_every_scenario_of_the_suite_is_classified(suite_run: SuiteRun) -> None:
    assert not APPLICABLE.keys() & NOT_APPLICABLE.keys()
    classified = APPLICABLE.keys() | NOT_APPLICABLE.keys()
    unclassified = suite_run.listed - classified
    assert not unclassified, (f"the suite has scenarios nobody classified: {sorted(unclassified)}; add each to "
                              "APPLICABLE or NOT_APPLICABLE (with its reason) here and in docs/conformance.md")
    gone = classified - suite_run.listed
    assert not gone, f"the suite no longer has {sorted(gone)}: remove them here and in docs/conformance.md"


@pytest.mark.parametrize("scenario", sorted(APPLICABLE))
def test_applicable_scenario_passes(suite_run: SuiteRun, scenario: str) -> None:
    assert scenario in suite_run.checks, f"the suite wrote no result for {scenario}:\n{suite_run.output[:4000]}"
    checks = suite_run.checks[scenario]
    bad = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    assert not bad, json.dumps(bad, indent=1)[:4000]
    assert any(c["status"] == "SUCCESS" for c in checks), json.dumps(checks, indent=1)[:4000]


def test_nothing_secret_in_what_the_suite_saw(suite_run: SuiteRun) -> None:
    assert suite_run.checks
    assert CANARY_TOKEN not in suite_run.output


def test_the_doc_lists_the_same_classification() -> None:
    text = DOC.read_text(encoding="utf-8")
    applicable, _, rest = text.partition("## Applicable scenarios")[2].partition("## Scenarios that do not apply")
    not_applicable = rest.partition("\n## ")[0]

    def names(section: str) -> set[str]:
        return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE))

    assert names(applicable) == set(APPLICABLE)
    assert names(not_applicable) == set(NOT_APPLICABLE)
    assert SUITE_VERSION in text


# ------------------------------------------------------------------------ JSON-RPC by hand, for the probes


class RawSession:
    """One streamable-HTTP session spoken by hand: only what a wire-level probe needs."""

    def __init__(self, url: str, version: str, headers: dict[str, str] | None = None) -> None:
        self.url = url
        self.http = httpx.Client(timeout=HTTP_TIMEOUT_S, headers={
            "Accept": "application/json, text/event-stream", **(headers or {})})
        self.next_id = 0
        self.version = ""
        self.status, reply, response_headers = self._post({
            "jsonrpc": "2.0", "id": self._id(), "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "ito-conformance-probe", "version": "1"}}})
        self.initialize = reply
        if self.status == 200 and "result" in reply:
            self.version = str(reply["result"]["protocolVersion"])
            self.http.headers["mcp-protocol-version"] = self.version
            if "mcp-session-id" in response_headers:
                self.http.headers["mcp-session-id"] = response_headers["mcp-session-id"]
            status, _, _ = self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert status == 202, status

    def __enter__(self) -> RawSession:
        return self

    def __exit__(self, *_: object) -> None:
        self.http.close()

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _post(self, message: dict[str, Any]) -> tuple[int, dict[str, Any], httpx.Headers]:
        response = self.http.post(self.url, json=message)
        if not response.content:
            return response.status_code, {}, response.headers
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            for event in response.text.replace("\r\n", "\n").split("\n\n"):
                data = "\n".join(line[5:].lstrip() for line in event.split("\n") if line.startswith("data:"))
                if data and json.loads(data).get("id") == message.get("id"):
                    return response.status_code, json.loads(data), response.headers
            raise AssertionError(f"no reply to {message} in {response.text[:2000]}")
        try:
            return response.status_code, response.json(), response.headers
        except json.JSONDecodeError:
            return response.status_code, {"body": response.text[:2000]}, response.headers

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._id(), "method": method}
        if params is not None:
            message["params"] = params
        status, reply, _ = self._post(message)
        assert status == 200, (status, reply)
        assert reply.get("id") == message["id"], reply
        return reply

    def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.request(method, params)
        assert "result" in reply, reply
        return dict(reply["result"])


# ------------------------------------------------------------------------------------------------ probes


def test_not_applicable_scenarios_rest_on_facts_about_this_server(mcp_url: str) -> None:
    """A reason such as "no logging capability" is checked, so declaring one makes the scenario applicable."""
    with RawSession(mcp_url, "2025-11-25") as session:
        capabilities = session.initialize["result"]["capabilities"]
        tools = {t["name"] for t in session.result("tools/list")["tools"]}
        prompts = {p["name"] for p in session.result("prompts/list")["prompts"]}
        resources = {r["uri"] for r in session.result("resources/list")["resources"]}
        templates = session.result("resources/templates/list")["resourceTemplates"]
    assert tools and prompts and resources
    assert [t["uriTemplate"] for t in templates] == ["ito-training://manifests/{sha256}/review"]
    for scenario, why in NOT_APPLICABLE.items():
        if why.capability is not None:
            head, _, tail = why.capability.partition(".")
            declared = capabilities.get(head)
            if tail and isinstance(declared, dict):
                declared = declared.get(tail)
            assert not declared, f"{scenario}: the server now declares {why.capability}; it became applicable"
        assert not tools & set(why.tools), scenario
        assert not prompts & set(why.prompts), scenario
        assert not resources & set(why.resources), scenario


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_both_handshake_versions_of_the_suite_are_spoken(mcp_url: str, version: str) -> None:
    """The suite's client always offers 2025-11-25; 2025-06-18 is checked here (2026-07-28, which needs no
    handshake, is covered by test_streamable_http with the SDK client)."""
    with RawSession(mcp_url, version) as session:
        assert session.version == version
        assert session.result("ping") == {}
        assert session.result("tools/list")["tools"]


def test_an_unknown_version_is_answered_with_one_the_server_speaks(mcp_url: str) -> None:
    with RawSession(mcp_url, "1999-01-01") as session:
        offered = session.version
    with RawSession(mcp_url, offered) as session:
        assert session.version == offered


NO_CURSOR_ISSUED = "eyJwYWdlIjogOTl9"  # well-formed base64, but this server never issued a cursor
@pytest.mark.parametrize(("method", "params", "code"), [
    pytest.param("no/such_method", {}, -32601, id="unknown-method"),
    pytest.param("tools/call", {"arguments": {}}, -32602, id="tools-call-without-name"),
    pytest.param("resources/read", {}, -32602, id="resources-read-without-uri"),
    pytest.param("prompts/get", {}, -32602, id="prompts-get-without-name"),
    pytest.param("resources/read", {"uri": "ito-training://no/such/resource"}, -32602, id="unknown-resource"),
    pytest.param("prompts/get", {"name": "no-such-prompt"}, -32602, id="unknown-prompt"),
    pytest.param("tools/call", {"name": "no_such_tool", "arguments": {}}, -32602, id="unknown-tool"),
    pytest.param("tools/list", {"cursor": NO_CURSOR_ISSUED}, -32602, id="tools-list-invalid-cursor"),
    pytest.param("prompts/list", {"cursor": NO_CURSOR_ISSUED}, -32602, id="prompts-list-invalid-cursor"),
    pytest.param("resources/list", {"cursor": NO_CURSOR_ISSUED}, -32602, id="resources-list-invalid-cursor"),
])
def test_protocol_errors_carry_the_json_rpc_code(mcp_url: str, method: str, params: dict[str, Any], code: int) -> None:
    with RawSession(mcp_url, "2025-11-25") as session:
        reply = session.request(method, params)
    assert "error" in reply, reply
    assert reply["error"]["code"] == code, reply


def test_a_foreign_origin_with_a_loopback_host_is_forbidden(mcp_url: str) -> None:
    """The suite sends a foreign Host and Origin together (421 for the Host); the Origin alone must get 403."""
    session = RawSession(mcp_url, "2025-11-25", headers={"Origin": "http://evil.example.com"})
    with session:
        assert session.status == 403, session.initialize
    with RawSession(mcp_url, "2025-11-25", headers={"Origin": mcp_url.removesuffix("/mcp")}) as session:
        assert session.status == 200 and session.version == "2025-11-25"
