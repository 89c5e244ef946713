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
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from . import serving
from .app import create_app
from .desk.person import Person
from .operator_client import OperatorClient, OperatorError

__all__ = ["OperatorClient", "OperatorError", "Person", "ReferenceBackend"]

STARTUP_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0


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
        header_timeout_s: float = serving.HEADER_TIMEOUT_S,
        body_timeout_s: float = serving.BODY_TIMEOUT_S,
        keep_alive_s: int = serving.KEEP_ALIVE_S,
        **app_options: Any,
    ) -> None:
        """`app_options` go to `create_app`: public_url, request_ttl_s, confirmation_ttl_s,
        plan_retention_s, recent_sign_in_s, clock."""
        self.header_timeout_s, self.body_timeout_s, self.keep_alive_s = header_timeout_s, body_timeout_s, keep_alive_s
        self._tmpdir = None if db_path is not None else tempfile.mkdtemp(prefix="ito-reference-backend-")
        self.db_path = db_path if db_path is not None else str(Path(self._tmpdir or ".") / "backend.sqlite3")
        self.operator_token = operator_token or secrets.token_urlsafe(32)
        self.auto_advance_s = auto_advance_s
        self.app_options = app_options
        self.url = ""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._op: OperatorClient | None = None
        self._app: Any = None
        self._people: list[Person] = []

    def __repr__(self) -> str:  # never shows the operator token
        return f"ReferenceBackend(url={self.url!r}, db_path={self.db_path!r})"

    def person(self, account_id: str) -> Person:
        """The person of `account_id` at the desk, holding a fresh single-use sign-in link (minted
        by the operator, as in real use). Call `.sign_in()`, then `.confirm(request_id)` or
        `.decline(request_id)`: plain HTTP, exactly as a browser would; never the operator API."""
        person = Person(str(self.op.login_link(account_id)["url"]))
        self._people.append(person)
        return person

    @property
    def op(self) -> OperatorClient:
        if self._op is None:
            raise RuntimeError("the reference backend is not running")
        return self._op

    def start(self) -> ReferenceBackend:
        self._app = create_app(self.db_path, operator_token=self.operator_token, auto_advance_s=self.auto_advance_s,
                               **self.app_options)
        config = serving.server_config(self._app, host="127.0.0.1", port=0, graceful_shutdown_s=1,
                                       header_timeout_s=self.header_timeout_s, body_timeout_s=self.body_timeout_s,
                                       keep_alive_s=self.keep_alive_s)
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
        for person in self._people:
            person.close()
        self._people.clear()
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
