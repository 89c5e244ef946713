"""Desk sign-in: single-use login links, sessions, single-use form tokens, and the return path.

- A login link carries 32 random bytes; the store keeps only their SHA-256. It is good for one
  sign-in within `LINK_TTL_S`; opening it (GET) does not use it, only the sign-in form's POST does,
  so link previews and prefetchers cannot burn it.
- A session cookie carries another 32 random bytes, stored hashed. A session ends `session_ttl_s`
  after sign-in (absolute) or `session_idle_s` after its last request (idle), whichever is first.
  It has a public id (`dsk_...`) that decisions record as who decided, and remembers when it
  signed in: Confirm needs a sign-in within `recent_sign_in_s` ("recent sign-in").
- Every page that has forms gets its own form token: 32 random bytes, stored hashed with the
  session it was issued to and the form actions it may post to. A token works once and only for
  its session (so a stolen copy of an old page cannot be replayed), and expires with the session.
  Compared by digest lookup; the random part is never stored.
- A session belongs to the origin it was signed in on (the desk's public URL, or the address the
  connection arrived on: never a request header) and is refused on any other.
- `safe_next` admits only the desk's own page paths, so a return path can never leave the desk; the
  return-path cookie is signed (`sign_return`), so one set by another site is ignored.
- Cookies do not keep ports apart: a page on another port of the same host can set cookies the desk
  receives. `duplicated` finds a desk cookie name sent twice (one of them set by someone else) and
  `foreign_paths` where such a cookie can sit, so the desk refuses the request and removes it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from ..state import SESSION_IDLE_S, SESSION_TTL_S
from ..store import Store, new_id

LINK_TTL_S = 10 * 60
KEEP_EXPIRED_S = 24 * 60 * 60
MAX_FORM_TOKENS_PER_SESSION = 64
PRUNE_BATCH = 32
COOKIE_NAME = "ito_desk_session"
HTTPS_COOKIE_NAME = "__Host-ito_desk_session"
RETURN_COOKIE = "ito_desk_return"
HTTPS_RETURN_COOKIE = "__Host-ito_desk_return"
MAX_SECRET_CHARS = 128
_ID = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
_DESK_PAGE = re.compile(rf"/desk/(?:requests/{_ID}|runs(?:/{_ID})?)?")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def _well_formed(secret: str) -> bool:
    return 0 < len(secret) <= MAX_SECRET_CHARS and all(c.isascii() and (c.isalnum() or c in "-_") for c in secret)


def safe_next(value: str | None) -> str | None:
    """`value` when it is one of the desk's own page paths (`/desk/`, `/desk/requests/ID`,
    `/desk/runs`, `/desk/runs/ID`), else None: never another origin, scheme, query or traversal."""
    if value is None or not _DESK_PAGE.fullmatch(value):
        return None
    return value


def sign_return(key: bytes, origin: str, path: str) -> str:
    """The return-path cookie's value: the path and an HMAC of it and the origin under the backend's key."""
    return f"{path}.{hmac.new(key, f'{origin}|{path}'.encode(), hashlib.sha256).hexdigest()[:32]}"


def signed_return(key: bytes, origin: str, value: str | None) -> str | None:
    """The desk page path a return-path cookie names, when this backend signed it for this origin."""
    path = (value or "").rpartition(".")[0]
    if not path or not hmac.compare_digest(sign_return(key, origin, path), value or ""):
        return None
    return safe_next(path)


def duplicated(cookie_headers: Sequence[str], names: Sequence[str]) -> list[str]:
    """Which of `names` the request's Cookie header(s) carry more than once."""
    seen = [part.split("=", 1)[0].strip() for header in cookie_headers for part in header.split(";")]
    return [name for name in names if seen.count(name) > 1]


def foreign_paths(request_path: str, own_path: str) -> list[str]:
    """Every cookie path a browser would send with a request for `request_path`, but `own_path` (where the
    desk sets its cookies): where a cookie the desk did not set can sit beside its own."""
    paths = ["/"]
    for index, char in enumerate(request_path):
        if char == "/" and index > 0:
            paths += [request_path[:index], request_path[:index + 1]]
    paths.append(request_path)
    return [p for p in dict.fromkeys(paths) if p != own_path]


@dataclass(frozen=True)
class Session:
    session_id: str
    account_id: str
    secret: str
    expires_at: float
    signed_in_at: float

    def recent(self, now: float, window_s: float) -> bool:
        """Signed in within the last `window_s` seconds (what Confirm requires)."""
        return now - self.signed_in_at <= window_s


def cookie_names(https: bool) -> tuple[str, str]:
    """(session cookie, return-path cookie). Over https the `__Host-` names: a browser accepts them
    only with Secure, Path=/ and no Domain, so nothing served over plain http can set them."""
    return (HTTPS_COOKIE_NAME, HTTPS_RETURN_COOKIE) if https else (COOKIE_NAME, RETURN_COOKIE)


def _prune(conn: sqlite3.Connection, now: float) -> None:
    """Bounded: at most `PRUNE_BATCH` rows of each kind per call, through their indexes."""
    conn.execute("DELETE FROM desk_login_links WHERE rowid IN (SELECT rowid FROM desk_login_links "
                 "WHERE expires_at < ? LIMIT ?)", (now - KEEP_EXPIRED_S, PRUNE_BATCH))
    conn.execute("DELETE FROM desk_sessions WHERE rowid IN (SELECT rowid FROM desk_sessions "
                 "WHERE expires_at < ? LIMIT ?)", (now - KEEP_EXPIRED_S, PRUNE_BATCH))
    conn.execute("DELETE FROM desk_form_tokens WHERE rowid IN (SELECT rowid FROM desk_form_tokens "
                 "WHERE expires_at < ? LIMIT ?)", (now, PRUNE_BATCH))


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


def sign_in(store: Store, secret: str, ttl_s: float = SESSION_TTL_S, *, origin: str) -> Session | str:
    """Use the link (once) and open a session on `origin`; or the link's state when it cannot be used."""
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
        session = Session(new_id("dsk"), str(row["account_id"]), secrets.token_urlsafe(32), now + ttl_s, now)
        conn.execute("INSERT INTO desk_sessions (session_sha256, session_id, account_id, expires_at, revoked_at, "
                     "created_at, last_seen_at, origin) VALUES (?, ?, ?, ?, NULL, ?, ?, ?)",
                     (_digest(session.secret), session.session_id, session.account_id, session.expires_at, now, now,
                      origin))
    return session


def session_for(store: Store, secret: str | None, idle_s: float = SESSION_IDLE_S, *, origin: str,
                touch: bool = True) -> Session | None:
    """The live session behind a cookie value on `origin`, or None (unknown, signed in on another
    origin, revoked, past its absolute end, or idle for `idle_s`). With `touch` the request counts as
    activity."""
    if secret is None or not _well_formed(secret):
        return None
    digest, now = _digest(secret), store.clock()
    row = store.row("SELECT * FROM desk_sessions WHERE session_sha256 = ?", (digest,))
    if row is None or row["revoked_at"] is not None or row["expires_at"] <= now or row["origin"] != origin:
        return None
    last_seen = row["last_seen_at"] if row["last_seen_at"] is not None else row["created_at"]
    if now - last_seen >= idle_s:
        return None
    if touch:
        with store.tx() as conn:
            conn.execute("UPDATE desk_sessions SET last_seen_at = ? WHERE session_sha256 = ? AND last_seen_at < ?",
                         (now, digest, now))
    return Session(row["session_id"], row["account_id"], secret, row["expires_at"], row["created_at"])


def sign_out(store: Store, session: Session) -> None:
    with store.tx() as conn:
        conn.execute("UPDATE desk_sessions SET revoked_at = ? WHERE session_sha256 = ? AND revoked_at IS NULL",
                     (store.clock(), _digest(session.secret)))
        conn.execute("DELETE FROM desk_form_tokens WHERE session_id = ?", (session.session_id,))


# -- form tokens --------------------------------------------------------------------------------------
def mint_form_token(store: Store, session: Session, actions: Sequence[str]) -> str:
    """A fresh single-use token for one page's forms: valid for this session and these actions only.
    A session keeps at most `MAX_FORM_TOKENS_PER_SESSION` (the oldest go first)."""
    token, now = secrets.token_urlsafe(32), store.clock()
    with store.tx() as conn:
        _prune(conn, now)
        conn.execute("INSERT INTO desk_form_tokens VALUES (?, ?, ?, ?, NULL, ?)",
                     (_digest(token), session.session_id, json.dumps(sorted(set(actions))), session.expires_at, now))
        conn.execute("DELETE FROM desk_form_tokens WHERE session_id = ? AND rowid NOT IN (SELECT rowid FROM "
                     "desk_form_tokens WHERE session_id = ? ORDER BY rowid DESC LIMIT ?)",
                     (session.session_id, session.session_id, MAX_FORM_TOKENS_PER_SESSION))
    return token


def use_form_token(store: Store, session: Session, token: str | None, action: str) -> bool:
    """Use `token` for `action`: True once, iff it was issued to this session for this action and is
    unused and unexpired. Using it burns it for every form of its page."""
    if token is None or not _well_formed(token):
        return False
    now = store.clock()
    with store.tx() as conn:
        row = conn.execute("SELECT * FROM desk_form_tokens WHERE token_sha256 = ?", (_digest(token),)).fetchone()
        if (row is None or row["session_id"] != session.session_id or row["used_at"] is not None
                or row["expires_at"] <= now or action not in json.loads(row["actions"])):
            return False
        cur = conn.execute("UPDATE desk_form_tokens SET used_at = ? WHERE token_sha256 = ? AND used_at IS NULL",
                           (now, _digest(token)))
        return cur.rowcount == 1
