"""The server under test, in its own process, against the hostile backend; reports its peak RSS.

    python -m tests.hostile_driver <port> <manifest_path> <tool scenarios> <client scenarios>

Scenarios are comma-separated. For each tool scenario it calls every tool that reaches each
endpoint (through `TrainingService.invoke`, as both doors do); for each client scenario it calls
`BackendClient.request` directly on every path of the API, including the plan and
confirmation-request paths. Each call is one JSON line; the last line is the peak
resident set size of this process (`ru_maxrss`, KiB on Linux).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any

import anyio

from ito_training_mcp.backend.client import BackendClient, BackendRefusal, Exchange
from ito_training_mcp.backend.client import refusals as client_refusals
from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.backend.models import Me
from ito_training_mcp.envelope import Gate
from ito_training_mcp.gates.config import BackendSettings
from ito_training_mcp.service import TrainingService

from .hostile_backend import (
    BOOKING,
    CANCEL_KEY,
    CANCEL_REF,
    CLEANUP_KEY,
    CLEANUP_REF,
    CREATE_REF,
    ENDPOINTS,
    MUTATIONS,
    REQUEST_ID,
    RUN_ID,
    SUBMIT_KEY,
    TOKEN,
    TOOL_TARGETS,
)


def env_for(url: str) -> dict[str, str]:
    return {
        "ITO_API_URL": url,
        "ITO_API_KEY": TOKEN,
        "ITO_TRAINING_TIMEOUT_S": "10",
        "ITO_TRAINING_CAPABILITIES_TTL_S": "0",
        "ITO_TRAINING_RECOVERY_ATTEMPTS": "1",
    }


def arguments(tool: str, manifest: str) -> dict[str, Any]:
    return {
        "check_training_availability": {"booking_id": BOOKING},
        "submit_training": {"booking_id": BOOKING, "manifest_path": manifest, "confirmation_ref": CREATE_REF,
                            "idempotency_key": SUBMIT_KEY},
        "training_status": {"run_id": RUN_ID},
        "training_logs": {"run_id": RUN_ID, "cursor": "c-1", "limit": 50},
        "training_metrics": {"run_id": RUN_ID},
        "list_checkpoints": {"run_id": RUN_ID},
        "cancel_training": {"run_id": RUN_ID, "confirmation_ref": CANCEL_REF, "idempotency_key": CANCEL_KEY},
        "cleanup_training": {"run_id": RUN_ID, "confirmation_ref": CLEANUP_REF, "idempotency_key": CLEANUP_KEY},
        "plan_training": {"booking_id": BOOKING, "manifest_path": manifest},
        "request_confirmation": {"action": "training.cancel", "run_id": RUN_ID},
        "confirmation_status": {"request_id": REQUEST_ID},
    }[tool]


def peak_kib() -> int:
    """This process's own peak RSS: Linux's VmHWM, which starts again at exec. (`ru_maxrss` does not:
    it keeps the high-water mark of the process that forked this one, here the pytest worker, whose
    size depends on the tests it ran before.)"""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:  # not Linux: the rusage figure, an upper bound
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


async def tools(base: str, scenario: str, manifest: str) -> None:
    for target, tool in TOOL_TARGETS:
        args = arguments(tool, manifest)
        if tool == "training_status" and target == "runs_by_key":
            args = {"idempotency_key": SUBMIT_KEY}
        envelope = await TrainingService(env_for(f"{base}/h/{scenario}/{target}")).invoke(tool, args)
        wire = envelope.to_dict()
        error = wire.get("error") or {}
        emit({"kind": "tool", "scenario": scenario, "target": target, "tool": tool,
              "code": error.get("code"), "last_code": (error.get("details") or {}).get("last_code"),
              "contacted": wire["live_api_contacted"], "peak_kib": peak_kib()})


async def direct(base: str, scenario: str, manifest: str) -> None:
    del manifest
    for endpoint, method, path in ENDPOINTS:
        client_refusals._revoked_fingerprints.clear()
        settings = BackendSettings.from_env(env_for(f"{base}/h/{scenario}/{endpoint}"))
        assert settings is not None
        exchange = Exchange()
        path_only, _, query = path.partition("?")
        params = dict(part.split("=", 1) for part in query.split("&")) if query else None
        record: dict[str, Any] = {"kind": "client", "scenario": scenario, "target": endpoint}
        async with BackendClient(settings, exchange) as api:
            if endpoint != "capabilities":
                api.authenticate(Credential(TOKEN, "ITO_API_KEY"))
                await api.prove_origin(Gate.CREATE)  # plain http: the proof first; what follows is the request tested
                exchange.contacted, exchange.requests_sent = False, 0
            try:
                await api.request(method, path_only, Me, gate=Gate.CREATE, auth=endpoint != "capabilities",
                                  params=params, json_body={"x": "y"} if method == "POST" else None,
                                  idempotency_key="hostile-direct-key-01" if endpoint in MUTATIONS else None,
                                  mutation=endpoint in MUTATIONS)
                record["code"] = None
            except BackendRefusal as refusal:
                record.update(code=refusal.code.value, ambiguous=refusal.ambiguous, redirected=refusal.redirected)
        emit({**record, "contacted": exchange.contacted, "sent": exchange.requests_sent, "peak_kib": peak_kib()})


async def main(port: str, manifest: str, tool_scenarios: str, client_scenarios: str) -> None:
    base = f"http://127.0.0.1:{int(port)}"
    emit({"kind": "start", "peak_kib": peak_kib()})
    for run, scenarios in ((tools, tool_scenarios), (direct, client_scenarios)):
        for scenario in filter(None, scenarios.split(",")):
            started = time.monotonic()
            await run(base, scenario, manifest)
            emit({"kind": "scenario", "scenario": scenario, "ms": round((time.monotonic() - started) * 1000)})
    emit({"kind": "end", "peak_kib": peak_kib()})


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
