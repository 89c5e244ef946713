"""`ReferenceBackend`: the reference backend on an ephemeral loopback port, for tests and demos.

    with ReferenceBackend() as rb:
        account = rb.op.account()
        token_id, token = rb.op.token(account)
        ...  # talk to rb.url with httpx, or point ITO_API_URL at it
        assert rb.runs_for_key(account, key) <= 1

uvicorn runs in a background thread; start() returns once the socket is bound (synchronised on
uvicorn's startup, not on a sleep). The database is a file, so `run_count` and `runs_for_key`
can read it through their own read-only sqlite3 connection, independently of the server.
"""

from __future__ import annotations

import secrets
import shutil
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import uvicorn

from .app import create_app

STARTUP_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


class OperatorError(Exception):
    """An operator call was refused; carries the status and the error code only."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"operator call failed: {status} {code}")
        self.status = status
        self.code = code


class OperatorClient:
    """A small synchronous client for `/operator` (loopback + operator token)."""

    def __init__(self, base_url: str, operator_token: str) -> None:
        self._http = httpx.Client(
            base_url=base_url + "/operator",
            headers={"Authorization": f"Bearer {operator_token}"},
            timeout=httpx.Timeout(10.0),
            follow_redirects=False,
            trust_env=False,
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self._http.request(method, path, json=body)
        if response.status_code >= 400:
            try:
                code = str(response.json()["error"]["code"])
            except (ValueError, KeyError, TypeError):
                code = "unknown"
            raise OperatorError(response.status_code, code)
        return response.json()

    def account(self, account_id: str | None = None, **settings: Any) -> str:
        """settings: budget_limit_usd, allowed_data_schemes, allowed_checkpoint_prefixes."""
        body = {**settings, **({} if account_id is None else {"account_id": account_id})}
        return str(self._call("POST", "/accounts", body)["account_id"])

    def token(
        self, account_id: str, scopes: list[str] | None = None, expires_in_s: float | None = None
    ) -> tuple[str, str]:
        body: dict[str, Any] = {"account_id": account_id}
        if scopes is not None:
            body["scopes"] = scopes
        if expires_in_s is not None:
            body["expires_in_s"] = expires_in_s
        result = self._call("POST", "/tokens", body)
        return str(result["token_id"]), str(result["token"])

    def revoke(self, token_id: str) -> None:
        self._call("POST", f"/tokens/{token_id}/revoke")

    def booking(self, account_id: str, state: str = "completed", **kw: Any) -> dict[str, Any]:
        """kw: booking_id, gpu, nodes, gpus_per_node, region, fabric, term_ends_in_s, checked_at_offset_s."""
        result: dict[str, Any] = self._call("POST", "/bookings", {"account_id": account_id, "state": state, **kw})
        return result

    def get_booking(self, booking_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/bookings/{booking_id}")
        return result

    def confirmation(
        self,
        account_id: str,
        action: str,
        booking_id: str,
        max_cost_usd: str,
        manifest_sha256: str | None = None,
        run_id: str | None = None,
        expires_in_s: float = 600,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"account_id": account_id, "action": action, "booking_id": booking_id,
                                "max_cost_usd": max_cost_usd, "expires_in_s": expires_in_s}
        if manifest_sha256 is not None:
            body["manifest_sha256"] = manifest_sha256
        if run_id is not None:
            body["run_id"] = run_id
        result: dict[str, Any] = self._call("POST", "/confirmations", body)
        return result

    def capabilities(self, available: bool, operations: list[str]) -> None:
        self._call("PUT", "/capabilities", {"available": available, "operations": operations})

    def fault(self, route: str, kind: str, times: int = 1, **params: Any) -> str:
        return str(self._call("POST", "/faults", {"route": route, "kind": kind, "times": times, **params})["fault_id"])

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def requests(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/requests")["requests"])

    def clear_requests(self) -> None:
        self._call("DELETE", "/requests")

    def in_flight(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/in-flight")["in_flight"])

    def wait_in_flight(self, idempotency_key: str, timeout_s: float = 5.0, *, present: bool = True) -> None:
        """Block until a request holding this key is being processed (present=True) or none is.

        Lines up a concurrent request with the same key, or waits for a slow one to finish,
        by observing the server rather than guessing with sleeps.
        """
        deadline = time.monotonic() + timeout_s
        while any(s["idempotency_key"] == idempotency_key for s in self.in_flight()) != present:
            if time.monotonic() > deadline:
                raise TimeoutError("the key did not reach the expected in-flight state in time")
            time.sleep(0.005)

    def advance(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/runs/{run_id}/advance")
        return result

    def fail_gate(self, run_id: str, evals: dict[str, float] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/runs/{run_id}/fail-gate", {} if evals is None else
                                            {"evals": evals})
        return result

    def finish(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/runs/{run_id}/finish")
        return result

    def runs(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/runs")["runs"])


class _Server(uvicorn.Server):
    """Signals `ready` once startup has finished, whether it bound the socket or failed."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: Any = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self._ready.set()


class ReferenceBackend:
    """Context manager: the reference backend on 127.0.0.1:<ephemeral port> in a thread."""

    def __init__(
        self,
        *,
        db_path: str | None = None,
        operator_token: str | None = None,
        auto_advance_s: float | None = None,
    ) -> None:
        self._tmpdir = None if db_path is not None else tempfile.mkdtemp(prefix="ito-reference-backend-")
        self.db_path = db_path if db_path is not None else str(Path(self._tmpdir or ".") / "backend.sqlite3")
        self.operator_token = operator_token or secrets.token_urlsafe(32)
        self.auto_advance_s = auto_advance_s
        self.url = ""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._op: OperatorClient | None = None
        self._app: Any = None

    def __repr__(self) -> str:  # never shows the operator token
        return f"ReferenceBackend(url={self.url!r}, db_path={self.db_path!r})"

    @property
    def op(self) -> OperatorClient:
        if self._op is None:
            raise RuntimeError("the reference backend is not running")
        return self._op

    def start(self) -> ReferenceBackend:
        self._app = create_app(self.db_path, operator_token=self.operator_token, auto_advance_s=self.auto_advance_s)
        config = uvicorn.Config(self._app, host="127.0.0.1", port=0, log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=1)
        ready = threading.Event()
        server = _Server(config, ready)
        thread = threading.Thread(target=self._serve, args=(server, ready), name="ito-reference-backend",
                                  daemon=True)
        self._server, self._thread = server, thread
        thread.start()
        if not ready.wait(STARTUP_TIMEOUT_S) or not server.started:
            self.stop()
            raise RuntimeError("the reference backend did not start")
        port = server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._op = OperatorClient(self.url, self.operator_token)
        return self

    @staticmethod
    def _serve(server: _Server, ready: threading.Event) -> None:
        try:
            server.run()
        except BaseException:  # noqa: S110 - a failed start is reported by start() via server.started
            pass
        finally:
            ready.set()

    def stop(self) -> None:
        if self._op is not None:
            self._op.close()
            self._op = None
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(STOP_TIMEOUT_S)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(STOP_TIMEOUT_S)
        self._server = self._thread = None
        if self._app is not None:
            self._app.state.backend.store.close()
            self._app = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self) -> ReferenceBackend:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- direct database reads (a separate, read-only connection) ---------------------------------
    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        uri = Path(self.db_path).resolve().as_uri() + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=5.0)
        try:
            conn.row_factory = sqlite3.Row
            return [dict(row) for row in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    def run_count(self) -> int:
        return int(self.query("SELECT COUNT(*) AS n FROM runs")[0]["n"])

    def runs_for_key(self, account_id: str, key: str) -> int:
        rows = self.query("SELECT COUNT(*) AS n FROM runs WHERE account_id = ? AND idempotency_key = ?",
                          (account_id, key))
        return int(rows[0]["n"])
