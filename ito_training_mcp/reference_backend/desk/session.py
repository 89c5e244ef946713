"""Desk sign-in: single-use login links, sessions and CSRF tokens.

- A login link carries 32 random bytes; the store keeps only their SHA-256. It is good for one
  sign-in within `LINK_TTL_S`; opening it (GET) does not use it, only the sign-in form's POST does,
  so link previews and prefetchers cannot burn it.
- A session cookie carries another 32 random bytes, stored hashed, valid for `SESSION_TTL_S`.
  The session also has a public id (`dsk_...`) that decisions record as who decided.
- The CSRF token of a session is HMAC-SHA256(key = the session's secret, message = a fixed label):
  nothing extra is stored, and only someone holding the cookie can compute it. Compared in
  constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from dataclasses import dataclass

from ..store import Store, new_id

LINK_TTL_S = 10 * 60
SESSION_TTL_S = 8 * 60 * 60
KEEP_EXPIRED_S = 24 * 60 * 60
COOKIE_NAME = "ito_desk_session"
_CSRF_LABEL = b"ito-desk-csrf-v1"
MAX_SECRET_CHARS = 128


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def _well_formed(secret: str) -> bool:
    return 0 < len(secret) <= MAX_SECRET_CHARS and all(c.isascii() and (c.isalnum() or c in "-_") for c in secret)


@dataclass(frozen=True)
class Session:
    session_id: str
    account_id: str
    secret: str
    expires_at: float

    @property
    def csrf(self) -> str:
        return csrf_token(self.secret)


def csrf_token(secret: str) -> str:
    return hmac.new(secret.encode(), _CSRF_LABEL, hashlib.sha256).hexdigest()


def csrf_ok(session: Session, submitted: str | None) -> bool:
    if submitted is None:
        return False
    return hmac.compare_digest(session.csrf.encode(), submitted.encode("utf-8", "replace"))


def _prune(conn: sqlite3.Connection, now: float) -> None:
    conn.execute("DELETE FROM desk_login_links WHERE expires_at < ?", (now - KEEP_EXPIRED_S,))
    conn.execute("DELETE FROM desk_sessions WHERE expires_at < ?", (now - KEEP_EXPIRED_S,))


def mint_link(store: Store, account_id: str, ttl_s: float = LINK_TTL_S) -> tuple[str, float]:
    """A fresh link secret for `account_id` and its expiry (epoch seconds)."""
    secret, now = secrets.token_urlsafe(32), store.clock()
    with store.tx() as conn:
        _prune(conn, now)
        conn.execute("INSERT INTO desk_login_links VALUES (?, ?, ?, NULL, ?)",
                     (_digest(secret), account_id, now + ttl_s, now))
    return secret, now + ttl_s


def link_state(store: Store, secret: str) -> tuple[str, str | None]:
    """(`usable` | `used` | `expired` | `unknown`, account_id) without using the link."""
    if not _well_formed(secret):
        return "unknown", None
    row = store.row("SELECT * FROM desk_login_links WHERE link_sha256 = ?", (_digest(secret),))
    if row is None:
        return "unknown", None
    if row["used_at"] is not None:
        return "used", row["account_id"]
    if row["expires_at"] <= store.clock():
        return "expired", row["account_id"]
    return "usable", row["account_id"]


def sign_in(store: Store, secret: str, ttl_s: float = SESSION_TTL_S) -> Session | str:
    """Use the link (once) and open a session; or the link's state when it cannot be used."""
    state, _ = link_state(store, secret)
    if state != "usable":
        return state
    now = store.clock()
    with store.tx() as conn:
        cur = conn.execute(
            "UPDATE desk_login_links SET used_at = ? WHERE link_sha256 = ? AND used_at IS NULL AND expires_at > ?",
            (now, _digest(secret), now),
        )
        if cur.rowcount != 1:
            return "used"
        row = conn.execute("SELECT account_id FROM desk_login_links WHERE link_sha256 = ?",
                           (_digest(secret),)).fetchone()
        session = Session(new_id("dsk"), str(row["account_id"]), secrets.token_urlsafe(32), now + ttl_s)
        conn.execute("INSERT INTO desk_sessions VALUES (?, ?, ?, ?, NULL, ?)",
                     (_digest(session.secret), session.session_id, session.account_id, session.expires_at, now))
    return session


def session_for(store: Store, secret: str | None) -> Session | None:
    if secret is None or not _well_formed(secret):
        return None
    row = store.row("SELECT * FROM desk_sessions WHERE session_sha256 = ?", (_digest(secret),))
    if row is None or row["revoked_at"] is not None or row["expires_at"] <= store.clock():
        return None
    return Session(row["session_id"], row["account_id"], secret, row["expires_at"])


def sign_out(store: Store, session: Session) -> None:
    with store.tx() as conn:
        conn.execute("UPDATE desk_sessions SET revoked_at = ? WHERE session_sha256 = ? AND revoked_at IS NULL",
                     (store.clock(), _digest(session.secret)))
