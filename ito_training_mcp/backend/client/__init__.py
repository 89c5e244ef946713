"""The client of the canonical `ito.training.v1` API (contract §7), defensive by construction:
`session.py` holds `BackendClient` and its exchanges, `answers.py` reads what comes back,
`refusals.py` the refusals it raises and the memory of revoked tokens.

- Every exchange has a connect timeout and an overall deadline enforced with anyio (httpx's
  timeouts are per phase: a server dripping a byte a second would defeat them).
- The wire is checked before the body is read (`backend/wire.py`): only identity content
  coding is asked for and accepted, so a compressed "bomb" is refused unread; framing and
  `Content-Length` are checked; the cap counts bytes as they arrive on the wire, never decoded.
- A redirect (any 3xx) is an answer, never followed and never retried: `BACKEND_INVALID_RESPONSE`
  with `redirected=True` and `ambiguous=False`, naming `ITO_API_URL`.
- Proxies from the environment are not used, so the credential can only go to the configured
  origin, and only requests built from that origin carry it. `localhost` is dialled as 127.0.0.1
  with `Host: localhost`: no name lookup decides where a plain-http request goes.
- Only connect failures are retried (nothing was sent). Anything that may have reached the
  server is reported as ambiguous, so the service can recover by idempotency key instead.
- A 401 with `error="invalid_token"` is `CREDENTIAL_REVOKED` at once; the token is remembered as
  revoked for the life of the process and never sent again.
- Every body is validated against `backend/models.py`; anything else is `BACKEND_INVALID_RESPONSE`.
- Whether a request left the process is recorded precisely (httpcore's trace: headers started).
- Over plain http (loopback only) the token is sent only to a listener that proved, for this call,
  that it is the backend the token belongs to (`origin_proof.py`); any other listener gets nothing
  but a handle of the token, and the call is refused (`BACKEND_INVALID_RESPONSE`, reason
  `origin_unproven`). Over https, TLS authenticates the server and no proof is asked.
- A call that waits (a long poll) bounds the client by its time budget (`limit_to`, `within`):
  each exchange then gets the smaller of its own deadline and what is left of the budget, and one
  that would start with nothing left is not sent. Running out of the budget is `BudgetSpent`.
"""

from ito_training_mcp.backend.client.refusals import BackendRefusal, BudgetSpent, is_known_revoked
from ito_training_mcp.backend.client.session import USER_AGENT, BackendClient, Exchange, run_path, segment

__all__ = ["USER_AGENT", "BackendClient", "BackendRefusal", "BudgetSpent", "Exchange", "is_known_revoked",
           "run_path", "segment"]
