"""The decision block of a review page: always last, after every fact about the request.

Pending: the warnings again, then Confirm (only when the review allows it and the session signed
in recently) and Decline. A session whose sign-in is older than the recent-sign-in window gets,
instead of Confirm, the way to sign in again; declining needs no fresh sign-in. Decided: what
the decision allows and that the agent picks it up by itself; the confirmation reference is shown
for the record, not as something the person must relay.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..store import Store, rfc3339
from .facts import money
from .render import Markup, form, h, join
from .session import Session

OPERATOR_LINK_COMMAND = "ito-training desk login-link --account {}"


def minutes(seconds: float) -> str:
    whole = int(seconds // 60)
    return f"{whole} minute{'s' if whole != 1 else ''}" if seconds >= 60 else f"{int(seconds)} seconds"


def sign_in_again(current: Session, window_s: float, *, what: str = "confirm") -> Markup:
    """How to get a recent sign-in: a fresh link from the operator, opened in this browser."""
    return h('<div class="notice" id="sign-in-again"><p><strong>To {}, sign in again.</strong> You signed in at {}; '
             'confirming needs a sign-in from the last {}, so that a session taken from this browser cannot '
             'confirm for you later.</p><p>Ask your operator for a fresh sign-in link and open it in this browser: '
             'after signing in you come back to this page.</p><p class="hint">For the operator: <code>{}</code> '
             'mints the link.</p></div>', what, rfc3339(current.signed_in_at), minutes(window_s),
             OPERATOR_LINK_COMMAND.format(current.account_id))


def _allows(row: sqlite3.Row, estimate_usd: str | None) -> Markup:
    if row["action"] == "training.create":
        estimated = Markup("") if estimate_usd is None else h(" (estimated {})", money(estimate_usd))
        return h("Confirming allows one run of exactly the manifest above on booking <code>{}</code>, spending at "
                 "most {}{}.", row["booking_id"], money(row["max_cost_usd"]), estimated)
    if row["action"] == "training.restart":
        return h("Confirming allows the agent to restart run <code>{}</code> from the proposed checkpoint, spending "
                 "at most {} on the steps run again, when it sends that request; until then the stage stays paused.",
                 row["run_id"], money(row["max_cost_usd"]))
    verb = "cancel" if row["action"] == "training.cancel" else "clean up"
    return h("Confirming allows the agent to {} run <code>{}</code> when it sends that request; nothing happens to "
             "the run before then.", verb, row["run_id"])


def pending(row: sqlite3.Row, *, token: str, confirmable: bool, recent: bool, current: Session, window_s: float,
            warnings: Sequence[Markup], estimate_usd: str | None) -> Markup:
    base = f"/desk/requests/{row['request_id']}"
    parts: list[Markup] = []
    if warnings:
        parts.append(h('<div class="notice"><strong>Before you confirm:</strong> {}</div>',
                       join(h("<p>{}</p>", w) for w in warnings)))
    decline = form(f"{base}/decline", token, "Decline", css="decline")
    if confirmable and recent:
        parts.append(h("<p>{} This request expires {} unless you decide.</p>", _allows(row, estimate_usd),
                       rfc3339(row["expires_at"])))
        parts.append(h('<div class="actions">{}{}</div>', form(f"{base}/confirm", token, "Confirm", css="confirm"),
                       decline))
    elif confirmable:
        parts.append(sign_in_again(current, window_s))
        parts.append(h('<p>This request expires {}. You can decline it now.</p><div class="actions">{}</div>',
                       rfc3339(row["expires_at"]), decline))
    else:
        parts.append(h('<p>This request cannot be confirmed (see above). You can decline it; it expires {} '
                       'otherwise.</p><div class="actions">{}</div>', rfc3339(row["expires_at"]), decline))
    return h('<h2 id="decision">Your decision</h2><section class="decision">{}</section>', join(parts))


def _expiry(store: Store, row: sqlite3.Row) -> str:
    conf = store.confirmation(row["confirmation_ref"]) if row["confirmation_ref"] else None
    return "—" if conf is None else rfc3339(conf["expires_at"])


def decided(store: Store, row: sqlite3.Row, status: str) -> Markup:
    if status == "confirmed":
        after = {"training.create": "starts the run with it",
                 "training.cancel": "sends the cancel with it; the run stops only then",
                 "training.cleanup": "sends the cleanup with it",
                 "training.restart": "sends the restart with it; the run resumes from the checkpoint only then"
                 }.get(row["action"], "acts on it")
        follow = (h(' Follow the run on <a href="/desk/runs/{}">its page</a>.', row["run_id"]) if row["run_id"]
                  else Markup(""))
        body = h('<div class="ref-box"><p>You confirmed this on {}. There is nothing to pass on: the agent picks your '
                 'decision up by itself (it checks the request with confirmation_status; from a terminal, '
                 '<code>ito-training confirmation --request {}</code>) and then {}.{}</p>'
                 '<p>For your records, the confirmation reference: <code id="confirmation-ref">{}</code>. It works '
                 'once, for exactly this request, until {}.</p></div>',
                 rfc3339(row["decided_at"]), row["request_id"], after, follow, row["confirmation_ref"],
                 _expiry(store, row))
    elif status == "declined" and row["action"] == "training.restart":
        body = h('<div class="notice">You declined this on {}. Nothing was confirmed: the paused stage continues '
                 'from where it paused, nothing is run again. Follow the run on <a href="/desk/runs/{}">its page</a>; '
                 'it can still be cancelled on its own request.</div>', rfc3339(row["decided_at"]), row["run_id"])
    elif status == "declined":
        body = h('<div class="notice">You declined this on {}. Nothing was confirmed.</div>',
                 rfc3339(row["decided_at"]))
    else:
        body = Markup('<div class="notice">This request expired undecided. The agent must ask again.</div>')
    return h('<h2 id="decision">Decision</h2>{}', body)
