"""SQLite state of the reference backend: schema and transactional operations.

One connection (stdlib sqlite3, WAL), used from the server's event loop only. Handlers do all
their database work synchronously with no await inside a transaction, so every transaction is
atomic with respect to every other request. `tx()` is BEGIN IMMEDIATE ... COMMIT, rolled back
on any exception, which is how a refused create leaves no trace.

Tokens are stored as SHA-256 digests, never in clear.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ito_training_mcp.backend import origin_proof

from . import lifecycle
from .lifecycle import Checkpoint, Plan, RunRecord

SCHEMA = """
CREATE TABLE IF NOT EXISTS accounts (
    account_id TEXT PRIMARY KEY,
    budget_limit_usd TEXT NOT NULL,
    data_schemes TEXT NOT NULL,
    checkpoint_prefixes TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL UNIQUE,
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    scopes TEXT NOT NULL,
    expires_at REAL,
    revoked_at REAL,
    created_at REAL NOT NULL,
    proof_handle TEXT
);
CREATE TABLE IF NOT EXISTS bookings (
    booking_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    state TEXT NOT NULL CHECK (state IN ('completed', 'expired', 'revoked', 'released', 'incomplete')),
    gpu TEXT NOT NULL,
    nodes INTEGER NOT NULL,
    gpus_per_node INTEGER NOT NULL,
    region TEXT NOT NULL,
    fabric TEXT NOT NULL,
    term_ends_at REAL NOT NULL,
    checked_at_offset_s REAL NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS confirmations (
    ref TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    action TEXT NOT NULL
        CHECK (action IN ('training.create', 'training.cancel', 'training.cleanup', 'training.restart')),
    booking_id TEXT NOT NULL,
    run_id TEXT,
    manifest_sha256 TEXT,
    max_cost_usd TEXT NOT NULL,
    expires_at REAL NOT NULL,
    consumed_at REAL,
    consumed_by TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    booking_id TEXT NOT NULL,
    manifest_sha256 TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    state TEXT NOT NULL,
    stages TEXT NOT NULL,
    plan TEXT NOT NULL,
    step INTEGER NOT NULL,
    loss REAL,
    cost_usd_to_date TEXT NOT NULL,
    goodput REAL NOT NULL,
    interruption_rate REAL NOT NULL,
    checkpoint_bandwidth_gbps REAL NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    advanced_at REAL NOT NULL,
    UNIQUE (account_id, idempotency_key)
);
CREATE TABLE IF NOT EXISTS idempotency (
    account_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    action TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    run_id TEXT NOT NULL,
    response TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (account_id, idempotency_key)
);
CREATE TABLE IF NOT EXISTS run_logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    ts REAL NOT NULL,
    stage TEXT,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS run_logs_by_run ON run_logs (run_id, id);
CREATE TABLE IF NOT EXISTS checkpoints (
    checkpoint_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    created_at REAL NOT NULL,
    size_bytes INTEGER NOT NULL,
    uri TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS checkpoints_by_run ON checkpoints (run_id, step);
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS plans (
    plan_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    booking_id TEXT NOT NULL,
    manifest_sha256 TEXT NOT NULL,
    manifest BLOB NOT NULL,
    valid INTEGER NOT NULL,
    checks TEXT NOT NULL,
    estimate TEXT,
    request_id TEXT,
    created_at REAL NOT NULL,
    settled_at REAL,
    manifest_purged_at REAL
);
CREATE TABLE IF NOT EXISTS confirmation_requests (
    request_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    action TEXT NOT NULL
        CHECK (action IN ('training.create', 'training.cancel', 'training.cleanup', 'training.restart')),
    status TEXT NOT NULL CHECK (status IN ('pending', 'confirmed', 'declined')),
    booking_id TEXT NOT NULL,
    run_id TEXT,
    plan_id TEXT,
    manifest_sha256 TEXT,
    max_cost_usd TEXT NOT NULL,
    expires_at REAL NOT NULL,
    created_at REAL NOT NULL,
    decided_at REAL,
    decided_via TEXT CHECK (decided_via IN ('desk', 'operator')),
    decided_by TEXT,
    confirmation_ref TEXT
);
CREATE INDEX IF NOT EXISTS confirmation_requests_by_account ON confirmation_requests (account_id, created_at);
CREATE TABLE IF NOT EXISTS desk_login_links (
    link_sha256 TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    expires_at REAL NOT NULL,
    used_at REAL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS desk_sessions (
    session_sha256 TEXT PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    expires_at REAL NOT NULL,
    revoked_at REAL,
    created_at REAL NOT NULL,
    last_seen_at REAL,
    origin TEXT
);
CREATE TABLE IF NOT EXISTS desk_form_tokens (
    token_sha256 TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    actions TEXT NOT NULL,
    expires_at REAL NOT NULL,
    used_at REAL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS desk_form_tokens_by_session ON desk_form_tokens (session_id);
CREATE INDEX IF NOT EXISTS desk_form_tokens_by_expiry ON desk_form_tokens (expires_at);
CREATE TABLE IF NOT EXISTS metric_history (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    loss REAL,
    goodput REAL NOT NULL,
    ts REAL NOT NULL,
    PRIMARY KEY (run_id, step)
);
"""
# Columns added after the first release: (table, column, declaration). A database created by an
# older version gets them on open; `_backfill` then fills what can be derived.
ADDED_COLUMNS = (
    ("plans", "settled_at", "REAL"),
    ("plans", "manifest_purged_at", "REAL"),
    ("desk_sessions", "last_seen_at", "REAL"),
    ("runs", "events", "TEXT"),
    ("plans", "parallelism", "TEXT"),
    ("confirmation_requests", "proposal_id", "TEXT"),
    ("confirmations", "proposal_id", "TEXT"),
    ("tokens", "proof_handle", "TEXT"),
    ("desk_sessions", "origin", "TEXT"),
)
# Tables whose action CHECK an older version wrote without training.restart: rebuilt on open.
ACTION_TABLES = ("confirmations", "confirmation_requests")
# Indexes over added columns are created after the migration (an old table lacks the column before).
LATE_SCHEMA = (
    "CREATE INDEX IF NOT EXISTS plans_by_settled ON plans (settled_at) WHERE settled_at IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS confirmation_requests_by_manifest ON confirmation_requests "
    "(account_id, booking_id, manifest_sha256)",
    "CREATE INDEX IF NOT EXISTS runs_by_booking ON runs (account_id, booking_id)",
    "CREATE UNIQUE INDEX IF NOT EXISTS tokens_by_proof_handle ON tokens (proof_handle)",
)

MAX_LISTED_RUNS = 1000
MAX_AUTO_ADVANCES = 64
MAX_METRIC_POINTS = 2000


def rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def proof_handle(digest_hex: str) -> str:
    """The handle under which a client asks for the origin proof of the token with this digest."""
    return origin_proof.token_handle(bytes.fromhex(digest_hex))


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


class Store:
    """All persistent state. Methods taking `conn` run inside a caller's `tx()`."""

    def __init__(self, path: str, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self._lock = threading.RLock()
        if path != ":memory:" and not os.path.exists(path):
            # Owner-only from the start; SQLite gives the -wal/-shm files the same mode.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        with self.tx() as conn:
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            self._migrate(conn)
            for statement in LATE_SCHEMA:
                conn.execute(statement)

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        Store._add_columns(conn)
        for table in ACTION_TABLES:  # SQLite cannot alter a CHECK: copy into a table with the new one
            sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                               (table,)).fetchone()[0]
            if "'training.restart'" not in sql:
                conn.execute(sql.replace(f"CREATE TABLE {table}", f"CREATE TABLE {table}_restart", 1).replace(
                    "'training.cleanup')", "'training.cleanup', 'training.restart')"))
                conn.execute(f"INSERT INTO {table}_restart SELECT * FROM {table}")  # noqa: S608 - constant names
                conn.execute(f"DROP TABLE {table}")
                conn.execute(f"ALTER TABLE {table}_restart RENAME TO {table}")
        for statement in SCHEMA.split(";"):  # indexes dropped with a rebuilt table come back
            if statement.strip():
                conn.execute(statement)

    @staticmethod
    def _add_columns(conn: sqlite3.Connection) -> None:
        for table, column, declaration in ADDED_COLUMNS:
            present = {row["name"] for row in conn.execute(f"PRAGMA table_info({table})")}  # constant names
            if column not in present:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                if (table, column) == ("plans", "settled_at"):
                    # Plans recorded before retention existed: settled when their request was decided or expired.
                    conn.execute(
                        "UPDATE plans SET settled_at = (SELECT COALESCE(r.decided_at, r.expires_at) "
                        "FROM confirmation_requests r WHERE r.request_id = plans.request_id) "
                        "WHERE request_id IS NOT NULL")
                if (table, column) == ("tokens", "proof_handle"):  # derived from the stored digest
                    conn.executemany("UPDATE tokens SET proof_handle = ? WHERE token_id = ?", [
                        (proof_handle(row["token_sha256"]), row["token_id"])
                        for row in conn.execute("SELECT token_id, token_sha256 FROM tokens")])

    def close(self) -> None:
        """Checkpoint the write-ahead log into the database file and close: the -wal and -shm
        files are removed when this is the last connection."""
        with self._lock:
            with contextlib.suppress(sqlite3.Error):  # e.g. another process holds a read lock: close anyway
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._conn.close()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._conn.execute(sql, params).fetchall())

    def row(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Row | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    # -- settings ---------------------------------------------------------------------------
    def setting(self, key: str) -> Any:
        row = self.row("SELECT value FROM settings WHERE key = ?", (key,))
        return None if row is None else json.loads(row["value"])

    def put_setting(self, key: str, value: Any) -> None:
        with self.tx() as conn:
            conn.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, json.dumps(value)))

    # -- accounts and tokens ----------------------------------------------------------------
    def create_account(
        self, account_id: str, *, budget_limit_usd: str, data_schemes: list[str], checkpoint_prefixes: list[str]
    ) -> bool:
        with self.tx() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO accounts VALUES (?, ?, ?, ?, ?)",
                (account_id, budget_limit_usd, json.dumps(data_schemes), json.dumps(checkpoint_prefixes),
                 self.clock()),
            )
            return cur.rowcount == 1

    def account(self, account_id: str) -> sqlite3.Row | None:
        return self.row("SELECT * FROM accounts WHERE account_id = ?", (account_id,))

    def create_token(self, account_id: str, scopes: list[str], expires_in_s: float | None) -> tuple[str, str]:
        token_id, token = new_id("tok"), "itorb_" + secrets.token_urlsafe(32)
        now = self.clock()
        expires_at = None if expires_in_s is None else now + expires_in_s
        with self.tx() as conn:
            digest = token_digest(token)
            conn.execute(
                "INSERT INTO tokens (token_id, token_sha256, account_id, scopes, expires_at, revoked_at, created_at, "
                "proof_handle) VALUES (?, ?, ?, ?, ?, NULL, ?, ?)",
                (token_id, digest, account_id, " ".join(scopes), expires_at, now, proof_handle(digest)),
            )
        return token_id, token

    def revoke_token(self, token_id: str) -> bool:
        with self.tx() as conn:
            cur = conn.execute(
                "UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE token_id = ?", (self.clock(), token_id)
            )
            return cur.rowcount == 1

    def token(self, token: str) -> sqlite3.Row | None:
        return self.row("SELECT * FROM tokens WHERE token_sha256 = ?", (token_digest(token),))

    def token_by_handle(self, handle: str) -> sqlite3.Row | None:
        return self.row("SELECT * FROM tokens WHERE proof_handle = ?", (handle,))

    # -- bookings and confirmations ---------------------------------------------------------
    def _insert_new(self, table: str, row: dict[str, Any]) -> bool:
        """Insert `row` unless its primary key exists; True iff inserted. `table` is a constant here."""
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self.tx() as conn:
            cur = conn.execute(f"INSERT OR IGNORE INTO {table} ({columns}) VALUES ({marks})",  # noqa: S608
                               tuple(row.values()))
            return cur.rowcount == 1

    def insert_booking(self, values: dict[str, Any]) -> bool:
        now = self.clock()
        return self._insert_new("bookings", {**values, "created_at": now, "updated_at": now})

    def booking(self, booking_id: str) -> sqlite3.Row | None:
        return self.row("SELECT * FROM bookings WHERE booking_id = ?", (booking_id,))

    def insert_confirmation(self, values: dict[str, Any]) -> bool:
        return self._insert_new(
            "confirmations", {**values, "consumed_at": None, "consumed_by": None, "created_at": self.clock()}
        )

    def confirmation(self, ref: str) -> sqlite3.Row | None:
        return self.row("SELECT * FROM confirmations WHERE ref = ?", (ref,))

    @staticmethod
    def consume_confirmation(conn: sqlite3.Connection, ref: str, run_id: str, now: float) -> bool:
        """Re-checked inside the transaction: only an unconsumed confirmation is consumed."""
        cur = conn.execute(
            "UPDATE confirmations SET consumed_at = ?, consumed_by = ? WHERE ref = ? AND consumed_at IS NULL",
            (now, run_id, ref),
        )
        return cur.rowcount == 1

    # -- idempotency ------------------------------------------------------------------------
    def key_record(self, account_id: str, key: str) -> sqlite3.Row | None:
        return self.row("SELECT * FROM idempotency WHERE account_id = ? AND idempotency_key = ?", (account_id, key))

    @staticmethod
    def insert_key(
        conn: sqlite3.Connection, account_id: str, key: str, *, action: str, fingerprint: str, run_id: str,
        response: dict[str, Any] | None, now: float,
    ) -> None:
        conn.execute(
            "INSERT INTO idempotency VALUES (?, ?, ?, ?, ?, ?, ?)",
            (account_id, key, action, fingerprint, run_id, None if response is None else json.dumps(response), now),
        )

    # -- runs -------------------------------------------------------------------------------
    @staticmethod
    def _record(row: sqlite3.Row) -> RunRecord:
        return RunRecord(
            run_id=row["run_id"], account_id=row["account_id"], booking_id=row["booking_id"],
            manifest_sha256=row["manifest_sha256"], idempotency_key=row["idempotency_key"], state=row["state"],
            stages=json.loads(row["stages"]), plan=Plan.from_json(json.loads(row["plan"])), step=row["step"],
            loss=row["loss"], cost_usd_to_date=row["cost_usd_to_date"], goodput=row["goodput"],
            interruption_rate=row["interruption_rate"], checkpoint_bandwidth_gbps=row["checkpoint_bandwidth_gbps"],
            created_at=row["created_at"], updated_at=row["updated_at"], advanced_at=row["advanced_at"],
            events=json.loads(row["events"]) if row["events"] else {},
        )

    record = _record  # for modules that change a run inside their own transaction

    def run(self, run_id: str) -> RunRecord | None:
        row = self.row("SELECT * FROM runs WHERE run_id = ?", (run_id,))
        return None if row is None else self._record(row)

    def run_for_key(self, account_id: str, key: str) -> RunRecord | None:
        row = self.row("SELECT * FROM runs WHERE account_id = ? AND idempotency_key = ?", (account_id, key))
        return None if row is None else self._record(row)

    def all_runs(self) -> list[RunRecord]:
        rows = self.rows("SELECT * FROM runs ORDER BY created_at DESC, run_id LIMIT ?", (MAX_LISTED_RUNS,))
        return [self._record(r) for r in rows]

    @staticmethod
    def insert_run(conn: sqlite3.Connection, rec: RunRecord) -> None:
        conn.execute(
            "INSERT INTO runs (run_id, account_id, booking_id, manifest_sha256, idempotency_key, state, stages, plan, "
            "step, loss, cost_usd_to_date, goodput, interruption_rate, checkpoint_bandwidth_gbps, created_at, "
            "updated_at, advanced_at, events) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (rec.run_id, rec.account_id, rec.booking_id, rec.manifest_sha256, rec.idempotency_key, rec.state,
             json.dumps(rec.stages), json.dumps(rec.plan.as_json()), rec.step, rec.loss, rec.cost_usd_to_date,
             rec.goodput, rec.interruption_rate, rec.checkpoint_bandwidth_gbps, rec.created_at, rec.updated_at,
             rec.advanced_at, json.dumps(rec.events)),
        )
        Store._flush(conn, rec, rec.created_at)

    @staticmethod
    def save_run(conn: sqlite3.Connection, rec: RunRecord, now: float) -> None:
        rec.updated_at = now
        conn.execute(
            "UPDATE runs SET state = ?, stages = ?, step = ?, loss = ?, cost_usd_to_date = ?, goodput = ?, "
            "interruption_rate = ?, checkpoint_bandwidth_gbps = ?, updated_at = ?, advanced_at = ?, events = ? "
            "WHERE run_id = ?",
            (rec.state, json.dumps(rec.stages), rec.step, rec.loss, rec.cost_usd_to_date, rec.goodput,
             rec.interruption_rate, rec.checkpoint_bandwidth_gbps, rec.updated_at, rec.advanced_at,
             json.dumps(rec.events), rec.run_id),
        )
        Store._flush(conn, rec, now)

    @staticmethod
    def _flush(conn: sqlite3.Connection, rec: RunRecord, now: float) -> None:
        """Write the record's pending log lines and checkpoints; apply checkpoint retention; drop the chart's
        points past a rewind (a resume or a restart from a checkpoint)."""
        conn.executemany(
            "INSERT INTO run_logs (run_id, ts, stage, message) VALUES (?, ?, ?, ?)",
            [(rec.run_id, now, stage, message) for stage, message in rec.new_logs],
        )
        if rec.rewound_to is not None:
            conn.execute("DELETE FROM metric_history WHERE run_id = ? AND step > ?", (rec.run_id, rec.rewound_to))
            rec.rewound_to = None
        conn.executemany(
            "INSERT OR REPLACE INTO metric_history (run_id, step, loss, goodput, ts) VALUES (?, ?, ?, ?, ?)",
            [(rec.run_id, step, loss, goodput, now) for step, loss, goodput in rec.new_metrics],
        )
        conn.executemany(
            "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?, ?)",
            [(c.checkpoint_id, rec.run_id, c.step, c.created_at, c.size_bytes, c.uri) for c in rec.new_checkpoints],
        )
        if rec.new_checkpoints:
            conn.execute(
                "DELETE FROM checkpoints WHERE run_id = ? AND checkpoint_id NOT IN "
                "(SELECT checkpoint_id FROM checkpoints WHERE run_id = ? ORDER BY step DESC LIMIT ?)",
                (rec.run_id, rec.run_id, rec.plan.retain_last),
            )
        rec.new_logs.clear()
        rec.new_checkpoints.clear()
        rec.new_metrics.clear()

    def log_page(self, run_id: str, after_id: int, limit: int) -> list[sqlite3.Row]:
        return self.rows(
            "SELECT id, ts, stage, message FROM run_logs WHERE run_id = ? AND id > ? ORDER BY id LIMIT ?",
            (run_id, after_id, limit),
        )

    def metric_history(self, run_id: str) -> list[sqlite3.Row]:
        return self.rows("SELECT step, loss, goodput FROM metric_history WHERE run_id = ? ORDER BY step LIMIT ?",
                         (run_id, MAX_METRIC_POINTS))

    def runs_of(self, account_id: str) -> list[RunRecord]:
        rows = self.rows("SELECT * FROM runs WHERE account_id = ? ORDER BY created_at DESC, run_id LIMIT ?",
                         (account_id, MAX_LISTED_RUNS))
        return [self._record(r) for r in rows]

    def checkpoints(self, run_id: str) -> list[Checkpoint]:
        rows = self.rows("SELECT * FROM checkpoints WHERE run_id = ? ORDER BY step", (run_id,))
        return [Checkpoint(r["checkpoint_id"], r["step"], r["created_at"], r["size_bytes"], r["uri"]) for r in rows]

    def transition(self, run_id: str, change: Callable[[RunRecord], None]) -> RunRecord | None:
        """Load, change and save one run in one transaction (operator lifecycle actions)."""
        with self.tx() as conn:
            row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            rec = self._record(row)
            change(rec)
            now = self.clock()
            rec.advanced_at = now
            self.save_run(conn, rec, now)
            return rec

    def auto_advance(self, interval_s: float, every_steps: int | None = None) -> int:
        """The run clock: one advance per `interval_s` elapsed since a run last moved, as of `clock()`.
        Deterministic in the clock's value, however often it is called; a run paused on a restart
        proposal does not move. `every_steps`: the interruption rate. Returns how many runs moved."""
        now = self.clock()
        moved = 0
        due = self.rows(
            "SELECT run_id FROM runs WHERE state IN ('queued', 'validating', 'running') AND advanced_at <= ?",
            (now - interval_s,),
        )
        for row in due:
            with self.tx() as conn:
                current = conn.execute("SELECT * FROM runs WHERE run_id = ?", (row["run_id"],)).fetchone()
                if current is None:
                    continue
                rec = self._record(current)
                if rec.paused:
                    continue
                for _ in range(MAX_AUTO_ADVANCES):
                    if rec.terminal or rec.paused or now - rec.advanced_at < interval_s:
                        break
                    lifecycle.advance(rec, now, every_steps)
                    rec.advanced_at += interval_s
                self.save_run(conn, rec, now)
                moved += 1
        return moved
