"""The client of the canonical `ito.training.v1` API (contract §7), defensive by construction.

- Every exchange has a connect timeout and an overall deadline enforced with anyio (httpx's
  timeouts are per phase: a server dripping a byte a second would defeat them).
- The wire is checked before the body is read (see `backend_wire`): only identity content
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
- Every body is validated against `backend_models`; anything else is `BACKEND_INVALID_RESPONSE`.
- Whether a request left the process is recorded precisely (httpcore's trace: headers started).
- Over plain http (loopback only) the token is sent only to a listener that proved, for this call,
  that it is the backend the token belongs to (`origin_proof.py`); any other listener gets nothing
  but a handle of the token, and the call is refused (`BACKEND_INVALID_RESPONSE`, reason
  `origin_unproven`). Over https, TLS authenticates the server and no proof is asked.
- A call that waits (a long poll) bounds the client by its time budget (`limit_to`, `within`):
  each exchange then gets the smaller of its own deadline and what is left of the budget, and one
  that would start with nothing left is not sent. Running out of the budget is `BudgetSpent`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import secrets
import ssl
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import httpx
from pydantic import BaseModel, ValidationError

from ito_training_mcp import __version__
from ito_training_mcp.backend import origin_proof
from ito_training_mcp.backend import wire as backend_wire
from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.backend.models import ErrorBody, OriginProof
from ito_training_mcp.envelope import ErrorCode, Gate
from ito_training_mcp.errors import Refusal
from ito_training_mcp.gates.config import BackendSettings
from ito_training_mcp.gates.manifest import strict_json

log = logging.getLogger("ito_training_mcp.backend")

USER_AGENT = f"ito-training-mcp/{__version__}"
CONNECT_RETRIES = 2
_RETRY_BACKOFF_S = (0.05, 0.2)
_SAFE_CODE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_ASCII_COUNT = backend_wire.ASCII_COUNT
_INVALID_TOKEN = re.compile(r'error\s*=\s*"?invalid_token"?', re.IGNORECASE)
_INSUFFICIENT_SCOPE = re.compile(r'error\s*=\s*"?insufficient_scope"?', re.IGNORECASE)

M = TypeVar("M", bound=BaseModel)

# Backend error codes -> our codes. The status must agree, or the response is not trusted.
_ERROR_CODES: dict[str, tuple[frozenset[int], ErrorCode]] = {
    "booking_not_found": (frozenset({404}), ErrorCode.BOOKING_NOT_FOUND),
    "booking_not_eligible": (frozenset({403, 409, 422}), ErrorCode.BOOKING_NOT_ELIGIBLE),
    "confirmation_not_found": (frozenset({404}), ErrorCode.CONFIRMATION_NOT_FOUND),
    "confirmation_expired": (frozenset({410}), ErrorCode.CONFIRMATION_EXPIRED),
    "confirmation_consumed": (frozenset({409}), ErrorCode.CONFIRMATION_CONSUMED),
    "confirmation_mismatch": (frozenset({422}), ErrorCode.CONFIRMATION_MISMATCH),
    "digest_mismatch": (frozenset({422}), ErrorCode.DIGEST_MISMATCH),
    "idempotency_conflict": (frozenset({422}), ErrorCode.IDEMPOTENCY_CONFLICT),
    "idempotency_in_flight": (frozenset({409}), ErrorCode.IDEMPOTENCY_IN_FLIGHT),
    "validation_rejected": (frozenset({422}), ErrorCode.VALIDATION_REJECTED),
    "budget_exceeded": (frozenset({402}), ErrorCode.BUDGET_EXCEEDED),
    "run_not_found": (frozenset({404}), ErrorCode.RUN_NOT_FOUND),
    "run_not_cancellable": (frozenset({409}), ErrorCode.RUN_NOT_CANCELLABLE),
}
_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.BOOKING_NOT_FOUND: "The backend knows no such booking for this account.",
    ErrorCode.BOOKING_NOT_ELIGIBLE: "The backend says this booking is not eligible for training.",
    ErrorCode.CONFIRMATION_NOT_FOUND: "The backend knows no such confirmation for this account.",
    ErrorCode.CONFIRMATION_EXPIRED: "The confirmation has expired.",
    ErrorCode.CONFIRMATION_CONSUMED: "The confirmation was already used.",
    ErrorCode.CONFIRMATION_MISMATCH: "The confirmation does not match this action, account, booking or run.",
    ErrorCode.DIGEST_MISMATCH: "The manifest digest differs from the one the user confirmed.",
    ErrorCode.IDEMPOTENCY_CONFLICT: "This idempotency key is already bound to a different request.",
    ErrorCode.IDEMPOTENCY_IN_FLIGHT: "A request with this idempotency key is still being processed.",
    ErrorCode.VALIDATION_REJECTED: "The backend's validation rejected the request.",
    ErrorCode.BUDGET_EXCEEDED: "The request exceeds the budget the backend allows.",
    ErrorCode.RUN_NOT_FOUND: "This account has no run with that id.",
    ErrorCode.RUN_NOT_CANCELLABLE: "The run can no longer be cancelled.",
}

_revoked_fingerprints: set[str] = set()


def _fingerprint(credential: Credential) -> str:
    return hashlib.sha256(credential.authorization().encode()).hexdigest()


def is_known_revoked(credential: Credential) -> bool:
    return _fingerprint(credential) in _revoked_fingerprints


@dataclass
class Exchange:
    """Per-call record shared with the service: was anything sent, and how many requests."""

    contacted: bool = False
    requests_sent: int = 0


class BackendRefusal(Refusal):
    """A refusal that came from (or on the way to) the backend.

    `ambiguous` is True when the request may have been processed although no trustworthy
    answer arrived: the caller must look the outcome up by idempotency key, never resend blindly.

    `redirected` is True when the backend answered with a 3xx. That is an answer, not a lost
    response: it is never ambiguous, never followed and never resent. After a redirected mutation
    the caller may look the outcome up once, so the agent learns whether it took effect.
    """

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        gate: Gate | None,
        ambiguous: bool = False,
        redirected: bool = False,
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
        next_step: str | None = None,
    ) -> None:
        super().__init__(code, message, gate=gate, details=details, retryable=retryable, next_step=next_step)
        self.ambiguous = ambiguous
        self.redirected = redirected


def segment(value: str) -> str:
    """A validated id as one URL path segment."""
    return quote(value, safe="")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context per process: building one costs tens of milliseconds."""
    return ssl.create_default_context()


class BudgetSpent(BackendRefusal):
    """An exchange stopped (or was not started) because the call's time budget ran out, not because
    the backend exceeded its own deadline. A wait treats it as the end of the wait."""

    def __init__(self, method: str, path: str, *, gate: Gate | None, mutation: bool, sent: bool,
                 deadline_s: float) -> None:
        super().__init__(
            ErrorCode.BACKEND_TIMEOUT,
            f"This call's time budget (ITO_TRAINING_MAX_WAIT_S) ran out before the backend answered {method} "
            f"{path}. The backend was slow; nothing was changed by this read.",
            gate=gate, ambiguous=sent and mutation, retryable=True,
            details={"deadline_s": round(deadline_s, 3), "budget_spent": True},
            next_step="Make the same call again (with a smaller wait_seconds if this repeats).",
        )


class BackendClient:
    """One client per tool call. Use as an async context manager."""

    def __init__(
        self,
        settings: BackendSettings,
        exchange: Exchange,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._settings = settings
        self._exchange = exchange
        self._transport = transport
        self._credential: Credential | None = None
        self._client: httpx.AsyncClient | None = None
        self._extensions: dict[str, Any] = {"trace": self._trace}
        self._budget_ends: float | None = None  # anyio.current_time() at which the call's budget runs out
        # Plain http: the listener has not yet proved that it is the token's backend (see origin_proof.py).
        self._origin_unproven = settings.endpoint.scheme == "http"

    # ------------------------------------------------------------------ the call's time budget

    def limit_to(self, seconds: float) -> None:
        """From now on, no exchange of this client runs past `seconds` from now (it only ever tightens)."""
        ends = anyio.current_time() + max(seconds, 0.0)
        self._budget_ends = ends if self._budget_ends is None else min(self._budget_ends, ends)

    @contextmanager
    def within(self, seconds: float | None) -> Iterator[None]:
        """Within the block, exchanges also end within `seconds` from now (None: no further limit)."""
        outer = self._budget_ends
        if seconds is not None:
            self.limit_to(seconds)
        try:
            yield
        finally:
            self._budget_ends = outer

    def remaining_s(self) -> float | None:
        """What is left of the budget (None when the client has none)."""
        if self._budget_ends is None:
            return None
        return max(self._budget_ends - anyio.current_time(), 0.0)

    async def __aenter__(self) -> BackendClient:
        s = self._settings
        timeout = httpx.Timeout(connect=s.connect_timeout_s, read=s.timeout_s, write=s.timeout_s, pool=s.timeout_s)
        # Plain http is only ever loopback (config refuses anything else); https always verifies.
        verify: ssl.SSLContext | bool = _ssl_context() if s.endpoint.scheme == "https" else False
        transport = self._transport or httpx.AsyncHTTPTransport(
            retries=0, verify=verify, trust_env=False, http1=True, http2=False
        )
        # Identity only: a compressed answer could not be bounded by its size on the wire.
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json", "Accept-Encoding": "identity"}
        if s.endpoint.dial_host != s.endpoint.host:
            # `localhost` is dialled as a literal; the Host header (and TLS name) still say localhost.
            headers["Host"] = s.endpoint.host_header
            self._extensions["sni_hostname"] = s.endpoint.host
        self._client = httpx.AsyncClient(
            base_url=s.endpoint.dial_base_url,
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,
            transport=transport,
            headers=headers,
            limits=httpx.Limits(max_connections=4, max_keepalive_connections=4),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def authenticate(self, credential: Credential) -> None:
        """Attach the credential. A token this process already saw revoked is refused locally."""
        if is_known_revoked(credential):
            raise BackendRefusal(
                ErrorCode.CREDENTIAL_REVOKED,
                "The configured credential was revoked or expired earlier; it is not sent again.",
                gate=Gate.CAPABILITIES,
                details={"setting": credential.source},
            )
        self._credential = credential

    def credential_fingerprint(self) -> str:
        """A one-way fingerprint of the attached credential, for in-memory caches keyed by identity."""
        if self._credential is None:
            return ""
        return _fingerprint(self._credential)

    # ------------------------------------------------------------------ one exchange

    async def request(
        self,
        method: str,
        path: str,
        model: type[M],
        *,
        gate: Gate | None,
        auth: bool = True,
        params: Mapping[str, str | int] | None = None,
        json_body: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        mutation: bool = False,
    ) -> tuple[int, M]:
        """Send one request and return (status, validated body), or raise `BackendRefusal`."""
        assert self._client is not None, "use BackendClient as an async context manager"
        headers: dict[str, str] = {}
        if auth:
            if self._credential is None:
                raise BackendRefusal(ErrorCode.AUTH_MISSING, "No credential is configured.", gate=gate)
            await self.prove_origin(gate)
            headers["Authorization"] = self._credential.authorization()
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        request = self._client.build_request(
            method, path, params=params, json=json_body, headers=headers,
            extensions=self._extensions,
        )
        if not self._same_origin(request.url):  # pragma: no cover - paths are fixed; guards future edits
            raise BackendRefusal(ErrorCode.CONFIG_INVALID, "Refusing to send outside the configured origin.", gate=gate)

        started = time.monotonic()
        status, body, content_type, www_authenticate, retry_after = await self._exchange_with_deadline(
            request, method, path, gate=gate, mutation=mutation
        )
        log.debug("%s %s -> %s in %.0f ms", method, path, status, (time.monotonic() - started) * 1000)
        if 200 <= status < 300:
            return status, self._validate(model, body, content_type, gate=gate, mutation=mutation)
        raise self._refusal_for(status, body, content_type, www_authenticate, retry_after, gate=gate,
                                mutation=mutation)

    async def prove_origin(self, gate: Gate | None) -> None:
        """Plain http: before the token goes anywhere, the listener proves that it is the backend the token
        belongs to, for the address this client dials (`origin_proof.py`); once per client. Sends no
        credential. Nothing to do over https, or once proven. `request` calls it before the token's first use."""
        credential = self._credential
        if not self._origin_unproven or credential is None:
            return
        endpoint = self._settings.endpoint
        key, nonce = credential.origin_key(), secrets.token_hex(origin_proof.NONCE_HEX // 2)
        params = {"nonce": nonce, "token_handle": origin_proof.token_handle(key)}
        try:
            _, answer = await self.request("GET", origin_proof.PROOF_PATH, OriginProof, gate=gate, auth=False,
                                           params=params)
        except BudgetSpent:
            raise
        except BackendRefusal as refused:
            if refused.code in (ErrorCode.BACKEND_UNREACHABLE, ErrorCode.BACKEND_TIMEOUT):
                raise
            details = refused.details or {}
            if (details.get("status"), details.get("backend_code")) == (404, "token_unknown"):
                raise BackendRefusal(
                    ErrorCode.AUTH_REJECTED, "The backend does not know the configured API token; it was not sent.",
                    gate=gate, details={"setting": credential.source, "reason": "token_unknown"},
                ) from None
            raise _origin_unproven(gate) from None
        if not origin_proof.matches(answer.proof, key, nonce, origin_proof.authority(endpoint.dial_host,
                                                                                     endpoint.port)):
            raise _origin_unproven(gate)
        self._origin_unproven = False

    def _same_origin(self, url: httpx.URL) -> bool:
        endpoint = self._settings.endpoint
        default_port = 443 if url.scheme == "https" else 80
        # raw_host: the ASCII form as sent (url.host would show an xn-- name decoded).
        return (url.scheme, url.raw_host.decode("ascii").lower(), url.port or default_port) == (
            endpoint.scheme, endpoint.dial_host.lower(), endpoint.port
        )

    async def _trace(self, event: str, info: Mapping[str, Any]) -> None:
        del info
        if event.endswith(".send_request_headers.started"):
            self._exchange.contacted = True
            self._exchange.requests_sent += 1

    async def _exchange_with_deadline(
        self, request: httpx.Request, method: str, path: str, *, gate: Gate | None, mutation: bool
    ) -> tuple[int, bytes, str, str, str | None]:
        assert self._client is not None
        deadline = self._settings.timeout_s
        left = self.remaining_s()
        by_budget = left is not None and left < deadline
        if left is not None and by_budget:
            deadline = left
            if left <= 0:  # nothing left: not sent at all
                raise BudgetSpent(method, path, gate=gate, mutation=mutation, sent=False, deadline_s=0.0)
        cap = self._settings.response_max_bytes
        attempt = 0
        headers_sent = False
        try:
            with anyio.fail_after(deadline):
                while True:
                    sent_before = self._exchange.requests_sent
                    try:
                        response = await self._client.send(request, stream=True)
                    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                        if self._exchange.requests_sent != sent_before or attempt >= CONNECT_RETRIES:
                            raise
                        log.info("%s %s: connect failed (%s); retrying", method, path, type(exc).__name__)
                        await anyio.sleep(_RETRY_BACKOFF_S[min(attempt, len(_RETRY_BACKOFF_S) - 1)])
                        attempt += 1
                        continue
                    headers_sent = True
                    try:
                        return await self._read_capped(response, cap, gate=gate, mutation=mutation)
                    finally:
                        await response.aclose()
        except TimeoutError:
            sent = headers_sent or self._exchange.contacted
            if by_budget:
                raise BudgetSpent(method, path, gate=gate, mutation=mutation, sent=sent, deadline_s=deadline) from None
            raise BackendRefusal(
                ErrorCode.BACKEND_TIMEOUT,
                f"The backend did not answer {method} {path} within the {deadline:g} s deadline.",
                gate=gate, ambiguous=sent and mutation, details={"deadline_s": deadline},
            ) from None
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            if self._exchange.contacted:  # pragma: no cover - connect errors come before sending
                raise self._transport_error(method, path, gate, mutation) from None
            raise BackendRefusal(
                ErrorCode.BACKEND_UNREACHABLE,
                f"The backend at {self._settings.endpoint.base_url} (ITO_API_URL) could not be reached "
                f"({type(exc).__name__}); nothing was sent.",
                gate=gate, details={"backend": self._settings.endpoint.base_url},
            ) from None
        except httpx.TimeoutException:
            raise BackendRefusal(
                ErrorCode.BACKEND_TIMEOUT, f"The backend timed out answering {method} {path}.",
                gate=gate, ambiguous=mutation,
            ) from None
        except httpx.HTTPError:
            raise self._transport_error(method, path, gate, mutation) from None

    def _transport_error(self, method: str, path: str, gate: Gate | None, mutation: bool) -> BackendRefusal:
        where = {"backend": self._settings.endpoint.base_url, "request": f"{method} {path}"}
        if not self._exchange.contacted:
            return BackendRefusal(
                ErrorCode.BACKEND_UNREACHABLE, f"The connection to the backend at {where['backend']} failed before "
                "anything was sent.", gate=gate, details=where)
        if not mutation:  # a read changes nothing: its answer was lost, nothing else
            return BackendRefusal(
                ErrorCode.BACKEND_ERROR, f"The connection broke while reading {method} {path}; a read changes "
                "nothing, so the same call can be made again.", gate=gate, retryable=True, details=where)
        return BackendRefusal(
            ErrorCode.BACKEND_ERROR,
            f"The connection broke while {method} {path} was in progress; whether it took effect is unknown.",
            gate=gate, ambiguous=mutation, retryable=True, details=where,
        )

    async def _read_capped(
        self, response: httpx.Response, cap: int, *, gate: Gate | None, mutation: bool
    ) -> tuple[int, bytes, str, str, str | None]:
        """Judge the status line and headers, then read at most `cap` bytes as they came off the wire."""
        status = response.status_code
        if 300 <= status < 400:
            raise self._redirect(status, gate, mutation)
        problem = backend_wire.head_problem(status, response.headers.raw, cap)
        if problem is not None:
            raise self._invalid(problem, gate, mutation)
        body = bytearray()
        async for chunk in _raw_chunks(response):
            if len(body) + len(chunk) > cap:
                raise self._invalid(backend_wire.TOO_LARGE, gate, mutation)
            body += chunk
        return (
            status,
            bytes(body),
            response.headers.get("content-type", ""),
            response.headers.get("www-authenticate", ""),
            response.headers.get("retry-after"),
        )

    # ------------------------------------------------------------------ interpreting answers

    @staticmethod
    def _invalid(message: str, gate: Gate | None, mutation: bool) -> BackendRefusal:
        return BackendRefusal(ErrorCode.BACKEND_INVALID_RESPONSE, message, gate=gate, ambiguous=mutation)

    @staticmethod
    def _redirect(status: int, gate: Gate | None, mutation: bool) -> BackendRefusal:
        """A 3xx is the backend's answer: refused, never followed, never resent, never ambiguous."""
        then = (" For a submit, cancel or cleanup, call training_status (same idempotency_key or run_id) once the "
                "setting is fixed, to learn whether it took effect, before trying again.") if mutation else ""
        return BackendRefusal(
            ErrorCode.BACKEND_INVALID_RESPONSE,
            f"The backend answered with a redirect (status {status}), which this client never follows; nothing "
            "was re-sent. Check that ITO_API_URL points at the API origin itself.",
            gate=gate, ambiguous=False, redirected=True,
            details={"status": status, "setting": "ITO_API_URL"},
            next_step=("Tell the user the backend answered with a redirect: ITO_API_URL must point at the API "
                       "origin itself, not at an address that redirects. Do not retry until the setting is fixed."
                       + then),
        )

    def _parse_json(self, body: bytes, content_type: str) -> Any:
        media = content_type.split(";", 1)[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise ValueError("not JSON")
        return strict_json.loads(body, decimal_fractions=False)

    def _validate(self, model: type[M], body: bytes, content_type: str, *, gate: Gate | None, mutation: bool) -> M:
        try:
            return model.model_validate(self._parse_json(body, content_type))
        except (ValueError, ValidationError):
            raise self._invalid(
                f"The backend's response does not match the {model.__name__} schema of ito.training.v1.",
                gate, mutation,
            ) from None

    def _error_body(self, body: bytes, content_type: str) -> ErrorBody | None:
        try:
            return ErrorBody.model_validate(self._parse_json(body, content_type))
        except (ValueError, ValidationError):
            return None

    def _refusal_for(
        self,
        status: int,
        body: bytes,
        content_type: str,
        www_authenticate: str,
        retry_after: str | None,
        *,
        gate: Gate | None,
        mutation: bool,
    ) -> BackendRefusal:
        error = self._error_body(body, content_type)
        code = error.error.code if error else None
        details: dict[str, Any] = {"status": status}
        if code and _SAFE_CODE.fullmatch(code):
            details["backend_code"] = code
        if error and error.error.reason and _SAFE_CODE.fullmatch(error.error.reason):
            details["reason"] = error.error.reason

        if status == 401:
            if _INVALID_TOKEN.search(www_authenticate) or code == "credential_revoked":
                if self._credential is not None:
                    _revoked_fingerprints.add(_fingerprint(self._credential))
                return BackendRefusal(
                    ErrorCode.CREDENTIAL_REVOKED,
                    "The backend says the credential is revoked or expired. Nothing further was sent.",
                    gate=gate, details=details,
                )
            return BackendRefusal(ErrorCode.AUTH_REJECTED, "The backend rejected the credential.", gate=gate,
                                  details=details)
        if status == 403 and (code in (None, "forbidden", "insufficient_scope")
                              or _INSUFFICIENT_SCOPE.search(www_authenticate)):
            return BackendRefusal(ErrorCode.AUTH_FORBIDDEN, "The credential is not allowed to do this.",
                                  gate=gate, details=details)
        if code in _ERROR_CODES and status in _ERROR_CODES[code][0]:
            ours = _ERROR_CODES[code][1]
            return BackendRefusal(ours, _MESSAGES[ours], gate=gate, details=details,
                                  ambiguous=ours is ErrorCode.IDEMPOTENCY_IN_FLIGHT)
        if status == 429:
            if retry_after and _ASCII_COUNT.fullmatch(retry_after):
                details["retry_after_s"] = min(int(retry_after), 86_400)
            return BackendRefusal(ErrorCode.RATE_LIMITED, "The backend is rate limiting this account.", gate=gate,
                                  details=details)
        if status >= 500:
            return BackendRefusal(ErrorCode.BACKEND_ERROR, f"The backend failed with status {status}.", gate=gate,
                                  details=details, ambiguous=mutation, retryable=True)
        return BackendRefusal(ErrorCode.BACKEND_ERROR, f"The backend refused the request with status {status}.",
                              gate=gate, details=details, retryable=False)


def _origin_unproven(gate: Gate | None) -> BackendRefusal:
    return BackendRefusal(
        ErrorCode.BACKEND_INVALID_RESPONSE,
        "The listener at ITO_API_URL (plain http) did not prove that it is the backend the API token belongs to, "
        "so the token was not sent.",
        gate=gate, retryable=False, details={"reason": "origin_unproven", "setting": "ITO_API_URL"},
        next_step=("Tell the user the program listening at ITO_API_URL did not prove that it is the Itô backend: "
                   "another program may hold that port, or the backend does not offer the origin proof that plain "
                   "http needs. The API token was not sent. They should check what listens there, or use an https "
                   "ITO_API_URL. Do not retry until they have."),
    )


async def _raw_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body as transferred (after de-chunking), never through a content decoder.

    A response a test transport built in memory was read whole when it was constructed; it is
    already in memory, and only identity-coded ones get this far, so its content is the raw body.
    """
    if response.is_stream_consumed:
        yield response.content
        return
    async for chunk in response.aiter_raw():
        yield chunk


def run_path(run_id: str, suffix: str = "") -> str:
    return f"/v1/training-runs/{segment(run_id)}{suffix}"
