"""`BackendClient`: one per tool call, one exchange at a time, each bounded and checked on the wire.

Its exchanges: a connect timeout and an overall deadline (anyio), identity coding only, the head judged
before the body is read, the body capped as it comes off the wire, connect failures retried (nothing was
sent), anything that may have reached the server reported as ambiguous. Over plain http the listener
proves it is the token's backend before the token goes out (`origin_proof.py`). The call's time budget
(`limit_to`, `within`) bounds every exchange of a wait.
"""

from __future__ import annotations

import functools
import logging
import secrets
import ssl
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import anyio
import httpx

from ito_training_mcp import __version__
from ito_training_mcp.backend import origin_proof
from ito_training_mcp.backend import wire as backend_wire
from ito_training_mcp.backend.client.answers import M, refusal_for, validate
from ito_training_mcp.backend.client.refusals import (
    BackendRefusal,
    BudgetSpent,
    fingerprint,
    invalid,
    is_known_revoked,
    origin_unproven,
    redirect,
)
from ito_training_mcp.backend.credentials import Credential
from ito_training_mcp.backend.models import OriginProof
from ito_training_mcp.envelope import ErrorCode, Gate
from ito_training_mcp.gates.config import BackendSettings

log = logging.getLogger("ito_training_mcp.backend")

USER_AGENT = f"ito-training-mcp/{__version__}"
CONNECT_RETRIES = 2
_RETRY_BACKOFF_S = (0.05, 0.2)


@dataclass
class Exchange:
    """Per-call record shared with the service: was anything sent, and how many requests."""

    contacted: bool = False
    requests_sent: int = 0


def segment(value: str) -> str:
    """A validated id as one URL path segment."""
    return quote(value, safe="")


def run_path(run_id: str, suffix: str = "") -> str:
    return f"/v1/training-runs/{segment(run_id)}{suffix}"


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context per process: building one costs tens of milliseconds."""
    return ssl.create_default_context()


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
        return fingerprint(self._credential)

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
            return status, validate(model, body, content_type, gate=gate, mutation=mutation)
        raise refusal_for(status, body, content_type, www_authenticate, retry_after, gate=gate, mutation=mutation,
                          credential=self._credential)

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
            raise origin_unproven(gate) from None
        if not origin_proof.matches(answer.proof, key, nonce, origin_proof.authority(endpoint.dial_host,
                                                                                     endpoint.port)):
            raise origin_unproven(gate)
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
            raise redirect(status, gate, mutation)
        problem = backend_wire.head_problem(status, response.headers.raw, cap)
        if problem is not None:
            raise invalid(problem, gate, mutation)
        body = bytearray()
        async for chunk in _raw_chunks(response):
            if len(body) + len(chunk) > cap:
                raise invalid(backend_wire.TOO_LARGE, gate, mutation)
            body += chunk
        return (
            status,
            bytes(body),
            response.headers.get("content-type", ""),
            response.headers.get("www-authenticate", ""),
            response.headers.get("retry-after"),
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
