"""Plans and confirmation requests in the store: what a person reviews, and their decision.

A plan keeps the exact manifest bytes it was given, so the desk renders the backend's own parse
of them. A confirmation request is `pending` until a person decides it at the desk (or an
operator does, headless); it reads as `expired` once its deadline has passed undecided.
Confirming creates the `confirmations` row that create / cancel / cleanup / restart consume, in the
same transaction that marks the request decided, so a request is decided at most once. A restart
request is bound to the backend's proposal (`proposal_id`); declining it lets the paused stage
continue where it paused, in that same transaction.

Retention: a plan records when its request settled (was decided, or expired undecided). Each new
plan deletes the stored manifest bytes of at most `PURGE_BATCH` plans settled more than
`Settings.plan_retention_s` ago, so stored bytes stop growing without any unbounded sweep.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from . import lifecycle
from .store import Store, new_id, rfc3339

REQUEST_TTL_S = 60 * 60
CONFIRMATION_TTL_S = 30 * 60
PLAN_RETENTION_S = 24 * 60 * 60
PURGE_BATCH = 4  # plans whose bytes are deleted per plan request, at most: bounded work, faster than growth
MAX_PENDING_PER_ACCOUNT = 100
MAX_LISTED_REQUESTS = 500
KEEP_PLANS_WITHOUT_REQUEST = 200  # per account: older invalid plans (and their bytes) are dropped
STATUSES = ("pending", "confirmed", "declined", "expired")


class DecisionError(Exception):
    """A decision that cannot be made: `kind` is not_found, decided or expired."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True)
class Settings:
    request_ttl_s: float = REQUEST_TTL_S
    confirmation_ttl_s: float = CONFIRMATION_TTL_S
    plan_retention_s: float = PLAN_RETENTION_S


def status_of(row: sqlite3.Row | dict[str, Any], now: float) -> str:
    if row["status"] == "pending" and row["expires_at"] <= now:
        return "expired"
    return str(row["status"])


def request_view(row: sqlite3.Row, now: float, base_url: str, *, moot: bool = False) -> dict[str, Any]:
    """`moot`: a pending cancel request whose run can no longer be cancelled (it finished first) reads as
    `expired`: nobody can carry it out any more, and a client waiting on it learns so."""
    status = status_of(row, now)
    return {
        "request_id": row["request_id"], "account_id": row["account_id"], "action": row["action"],
        "status": "expired" if moot and status == "pending" else status,
        "booking_id": row["booking_id"], "run_id": row["run_id"],
        "plan_id": row["plan_id"], "manifest_sha256": row["manifest_sha256"], "max_cost_usd": row["max_cost_usd"],
        "review_url": f"{base_url}/desk/requests/{row['request_id']}",
        "expires_at": rfc3339(row["expires_at"]), "created_at": rfc3339(row["created_at"]),
        "decided_at": None if row["decided_at"] is None else rfc3339(row["decided_at"]),
        "confirmation_ref": row["confirmation_ref"],
    }


def operator_request_view(row: sqlite3.Row, now: float, base_url: str) -> dict[str, Any]:
    """The operator also sees how and by whom the request was decided."""
    return {**request_view(row, now, base_url), "decided_via": row["decided_via"], "decided_by": row["decided_by"]}


def plan_view(row: sqlite3.Row, request: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "plan_id": row["plan_id"], "account_id": row["account_id"], "booking_id": row["booking_id"],
        "manifest_sha256": row["manifest_sha256"], "valid": bool(row["valid"]), "checks": json.loads(row["checks"]),
        "estimate": None if row["estimate"] is None else json.loads(row["estimate"]),
        "parallelism": None if row["parallelism"] is None else json.loads(row["parallelism"]),
        "confirmation_request": request, "created_at": rfc3339(row["created_at"]),
    }


def still_possible(row: sqlite3.Row, rec: lifecycle.RunRecord) -> bool:
    """Can the run still undergo what this cancel / cleanup / restart request asks for?"""
    if row["action"] == "training.cancel":
        return rec.state in lifecycle.CANCELLABLE_STATES
    if row["action"] == "training.cleanup":
        return rec.terminal
    if row["action"] == "training.restart":
        proposal = rec.proposal
        return proposal is not None and proposal["proposal_id"] == row["proposal_id"]
    return True


def pending_plans(store: Store, account_id: str, now: float) -> int:
    """How many `training.create` requests (opened by plans) of this account are pending. Only these count
    against `MAX_PENDING_PER_ACCOUNT`: a cancel or cleanup request never competes with plans, so an agent
    that opened many plans can never stand between a person and stopping a run's spend."""
    row = store.row("SELECT COUNT(*) AS n FROM confirmation_requests WHERE account_id = ? AND status = 'pending' "
                    "AND action = 'training.create' AND expires_at > ?", (account_id, now))
    return 0 if row is None else int(row["n"])


def pending_for_run(store: Store, account_id: str, run_id: str, action: str, now: float) -> sqlite3.Row | None:
    """The pending, unexpired request to `action` (cancel or cleanup) this run, if any: asking again answers
    it, so a run has at most one of each pending, and these requests stay bounded without a quota."""
    return store.row(
        "SELECT * FROM confirmation_requests WHERE account_id = ? AND run_id = ? AND action = ? "
        "AND status = 'pending' AND expires_at > ? ORDER BY created_at DESC, request_id LIMIT 1",
        (account_id, run_id, action, now))


def decline_pending_plans(store: Store, account_id: str, *, via: str, by: str) -> int:
    """Decline, in one transaction, every pending `training.create` request of this account (the desk's
    "decline all plans"); cancel and cleanup requests are left as they are. How many were declined."""
    now = store.clock()
    with store.tx() as conn:
        due = [row["request_id"] for row in conn.execute(
            "SELECT request_id FROM confirmation_requests WHERE account_id = ? AND status = 'pending' "
            "AND action = 'training.create' AND expires_at > ?", (account_id, now))]
        conn.executemany(
            "UPDATE confirmation_requests SET status = 'declined', decided_at = ?, decided_via = ?, decided_by = ? "
            "WHERE request_id = ? AND status = 'pending'", [(now, via, by[:128], request_id) for request_id in due])
        conn.executemany(
            "UPDATE plans SET settled_at = ? WHERE request_id = ? AND manifest_purged_at IS NULL",
            [(now, request_id) for request_id in due])
    return len(due)


def pending_create(store: Store, account_id: str, booking_id: str, manifest_sha256: str, now: float
                   ) -> sqlite3.Row | None:
    """The pending, unexpired `training.create` request for exactly this account, booking and digest."""
    return store.row(
        "SELECT * FROM confirmation_requests WHERE account_id = ? AND booking_id = ? AND manifest_sha256 = ? "
        "AND action = 'training.create' AND status = 'pending' AND expires_at > ? "
        "ORDER BY created_at DESC, request_id LIMIT 1", (account_id, booking_id, manifest_sha256, now))


def purge_settled(conn: sqlite3.Connection, now: float, retention_s: float, limit: int = PURGE_BATCH) -> int:
    """Delete the stored manifest bytes of at most `limit` plans whose request was decided or expired
    more than `retention_s` ago (oldest first, through an index: bounded work). The plan row, its
    digest, checks and estimate stay; the desk then says the bytes are gone."""
    due = [row[0] for row in conn.execute(
        "SELECT plan_id FROM plans WHERE settled_at IS NOT NULL AND settled_at <= ? ORDER BY settled_at LIMIT ?",
        (now - retention_s, limit))]
    conn.executemany("UPDATE plans SET manifest = X'', settled_at = NULL, manifest_purged_at = ? WHERE plan_id = ?",
                     [(now, plan_id) for plan_id in due])
    return len(due)


def _insert_request(conn: sqlite3.Connection, values: dict[str, Any], now: float, ttl_s: float) -> str:
    request_id = new_id("creq")
    conn.execute(
        "INSERT INTO confirmation_requests (request_id, account_id, action, status, booking_id, run_id, plan_id, "
        "manifest_sha256, max_cost_usd, expires_at, created_at, proposal_id) "
        "VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?)",
        (request_id, values["account_id"], values["action"], values["booking_id"], values.get("run_id"),
         values.get("plan_id"), values.get("manifest_sha256"), values["max_cost_usd"], now + ttl_s, now,
         values.get("proposal_id")),
    )
    return request_id


def create_plan(
    store: Store, *, account_id: str, booking_id: str, manifest_sha256: str, manifest: bytes, checks: list[Any],
    estimate: dict[str, Any] | None, max_cost_usd: str | None, settings: Settings = Settings(),
    parallelism: dict[str, Any] | None = None,
) -> tuple[sqlite3.Row, sqlite3.Row | None]:
    """Store a plan; when `max_cost_usd` is given (a valid plan) also open its create request."""
    now = store.clock()
    plan_id = new_id("plan")
    with store.tx() as conn:
        purge_settled(conn, now, settings.plan_retention_s)
        request_id = None
        if max_cost_usd is not None:
            request_id = _insert_request(conn, {
                "account_id": account_id, "action": "training.create", "booking_id": booking_id,
                "plan_id": plan_id, "manifest_sha256": manifest_sha256, "max_cost_usd": max_cost_usd,
            }, now, settings.request_ttl_s)
        conn.execute(
            "INSERT INTO plans (plan_id, account_id, booking_id, manifest_sha256, manifest, valid, checks, estimate, "
            "request_id, created_at, settled_at, manifest_purged_at, parallelism) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
            (plan_id, account_id, booking_id, manifest_sha256, manifest, int(max_cost_usd is not None),
             json.dumps(checks), None if estimate is None else json.dumps(estimate), request_id, now,
             # a plan's request settles when it expires, unless decided sooner (decide() moves it)
             None if request_id is None else now + settings.request_ttl_s,
             None if parallelism is None else json.dumps(parallelism)),
        )
        if request_id is None:  # nobody will review an invalid plan: keep only the newest few
            conn.execute(
                "DELETE FROM plans WHERE account_id = ? AND request_id IS NULL AND plan_id NOT IN (SELECT plan_id "
                "FROM plans WHERE account_id = ? AND request_id IS NULL ORDER BY created_at DESC, rowid DESC LIMIT ?)",
                (account_id, account_id, KEEP_PLANS_WITHOUT_REQUEST))
    plan = store.row("SELECT * FROM plans WHERE plan_id = ?", (plan_id,))
    assert plan is not None
    return plan, None if request_id is None else request(store, request_id)


def create_run_request(
    store: Store, *, account_id: str, action: str, run_id: str, booking_id: str, manifest_sha256: str,
    settings: Settings = Settings(), proposal_id: str | None = None, max_cost_usd: str = "0.00",
) -> sqlite3.Row:
    """A cancel, cleanup or restart request for a run; a restart request is bound to `proposal_id` and asks
    the person to confirm the repeated steps' cost (`max_cost_usd`)."""
    now = store.clock()
    with store.tx() as conn:
        request_id = _insert_request(conn, {
            "account_id": account_id, "action": action, "booking_id": booking_id, "run_id": run_id,
            "manifest_sha256": manifest_sha256, "max_cost_usd": max_cost_usd, "proposal_id": proposal_id,
        }, now, settings.request_ttl_s)
    row = request(store, request_id)
    assert row is not None
    return row


def request(store: Store, request_id: str) -> sqlite3.Row | None:
    return store.row("SELECT * FROM confirmation_requests WHERE request_id = ?", (request_id,))


def plan(store: Store, plan_id: str) -> sqlite3.Row | None:
    return store.row("SELECT * FROM plans WHERE plan_id = ?", (plan_id,))


def list_requests(store: Store, *, account_id: str | None = None, status: str | None = None) -> list[sqlite3.Row]:
    """Newest first, at most `MAX_LISTED_REQUESTS`; `status` may be any of `STATUSES`."""
    now = store.clock()
    where: list[str] = ["1 = 1"]
    params: list[object] = []
    if account_id is not None:
        where.append("account_id = ?")
        params.append(account_id)
    if status == "pending":
        where.append("status = 'pending' AND expires_at > ?")
        params.append(now)
    elif status == "expired":
        where.append("status = 'pending' AND expires_at <= ?")
        params.append(now)
    elif status is not None:
        where.append("status = ?")
        params.append(status)
    sql = ("SELECT * FROM confirmation_requests WHERE " + " AND ".join(where)  # noqa: S608 - fixed fragments
           + " ORDER BY created_at DESC, request_id LIMIT ?")
    return store.rows(sql, (*params, MAX_LISTED_REQUESTS))


def _declined_restart(store: Store, conn: sqlite3.Connection, run_id: str, proposal_id: str | None,
                      now: float) -> None:
    """A declined restart lets the paused stage continue (when the proposal is still the pending one)."""
    found = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if found is None or proposal_id is None:
        return
    rec = store.record(found)
    lifecycle.decline(rec, proposal_id, now)
    store.save_run(conn, rec, now)


def decide(
    store: Store, request_id: str, *, confirm: bool, via: str, by: str, account_id: str | None = None,
    settings: Settings = Settings(),
) -> sqlite3.Row:
    """Confirm or decline a pending request, once. `account_id` (the desk) must own it."""
    now = store.clock()
    with store.tx() as conn:
        row = conn.execute("SELECT * FROM confirmation_requests WHERE request_id = ?", (request_id,)).fetchone()
        if row is None or (account_id is not None and row["account_id"] != account_id):
            raise DecisionError("not_found")
        if row["status"] != "pending":
            raise DecisionError("decided")
        if row["expires_at"] <= now:
            raise DecisionError("expired")
        ref = None
        if confirm:
            ref = new_id("cnf")
            conn.execute(
                "INSERT INTO confirmations (ref, account_id, action, booking_id, run_id, manifest_sha256, "
                "max_cost_usd, expires_at, consumed_at, consumed_by, created_at, proposal_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, ?)",
                (ref, row["account_id"], row["action"], row["booking_id"], row["run_id"], row["manifest_sha256"],
                 row["max_cost_usd"], now + settings.confirmation_ttl_s, now, row["proposal_id"]),
            )
        elif row["action"] == "training.restart" and row["run_id"] is not None:
            _declined_restart(store, conn, row["run_id"], row["proposal_id"], now)
        cur = conn.execute(
            "UPDATE confirmation_requests SET status = ?, decided_at = ?, decided_via = ?, decided_by = ?, "
            "confirmation_ref = ? WHERE request_id = ? AND status = 'pending'",
            ("confirmed" if confirm else "declined", now, via, by[:128], ref, request_id),
        )
        if cur.rowcount != 1:  # pragma: no cover - the transaction already holds the write lock
            raise DecisionError("decided")
        if row["plan_id"] is not None:
            conn.execute("UPDATE plans SET settled_at = ? WHERE plan_id = ? AND manifest_purged_at IS NULL",
                         (now, row["plan_id"]))
    decided = request(store, request_id)
    assert decided is not None
    return decided
