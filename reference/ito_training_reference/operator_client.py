"""`OperatorClient`: a small synchronous client for the operator API (`/operator`).

Loopback only; each request is signed with the operator token, which is never sent
(operator_auth.py). Used by `ReferenceBackend.op`, the `ito-training desk`
CLI and the examples. A refused call raises `OperatorError` with the status and error code only
(never the body), so nothing the server echoed can end up in a traceback.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import socket
import ssl
import time
from typing import Any
from urllib.parse import quote

import httpx

from .operator_auth import RESPONSE_HEADER, SCHEME, authority, parse, response_signature, sign

MAX_RESPONSE_BYTES = 8 * 1024 * 1024


class OperatorError(Exception):
    """An operator call was refused; carries the status and the error code only."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(f"operator call failed: {status} {code}")
        self.status = status
        self.code = code


class OperatorClient:
    """A small synchronous client for `/operator` (loopback + operator token)."""

    def __init__(self, base_url: str, operator_token: str, *, timeout_s: float = 10.0,
                 tls_ca: str | None = None) -> None:
        """`tls_ca`: a PEM file of certificates to trust for an https backend (its own self-signed
        certificate, say) instead of the system's."""
        self._token = operator_token
        url = _literal(httpx.URL(base_url.rstrip("/")))
        self._where = authority(url.host, url.port if url.port is not None else (443 if url.scheme == "https" else 80))
        self._http = httpx.Client(
            base_url=str(url) + "/operator",
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,
            trust_env=False,
            # Plain http never uses TLS: skip building a verifying context (~0.1 s per client).
            verify=False if url.scheme == "http" else ssl.create_default_context(cafile=tls_ca),
        )

    def _signed(self, request: httpx.Request) -> httpx.Request:
        """The request with a signature over it and a nonce fresh from the backend (operator_auth.py);
        the token itself is never sent."""
        response = self._http.get("/nonce")
        try:
            nonce = response.json()["nonce"] if response.status_code == 200 else None
        except (ValueError, KeyError, TypeError):
            nonce = None
        if not isinstance(nonce, str) or parse(f"{SCHEME} nonce={nonce}, sig={'0' * 64}") is None:
            raise OperatorError(response.status_code, "invalid_response")
        request.headers["Authorization"] = sign(self._token, request.method, request.url.raw_path.decode("ascii"),
                                                self._where, nonce, request.read())
        request.extensions = {**request.extensions, "ito_nonce": nonce}
        return request

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OperatorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              params: dict[str, str] | None = None) -> Any:
        request = self._signed(self._http.build_request(method, path, json=body, params=params))
        with contextlib.closing(self._http.send(request, stream=True)) as response:
            content = b""
            for chunk in response.iter_bytes():
                content += chunk
                if len(content) > MAX_RESPONSE_BYTES:
                    raise OperatorError(response.status_code, "response_too_large")
        mac = response.headers.get(RESPONSE_HEADER, "")
        expected = response_signature(self._token, request.extensions["ito_nonce"], response.status_code, content)
        if not hmac.compare_digest(mac.encode(), expected.encode()):  # not from the backend that holds the token
            # The backend answers a request it cannot verify (a wrong token) with a bare 404.
            raise OperatorError(response.status_code, "not_found" if response.status_code == 404
                                else "unsigned_response")
        try:
            document = json.loads(content)
        except ValueError:
            raise OperatorError(response.status_code, "invalid_response") from None
        if response.status_code >= 400:
            code = "unknown"
            if isinstance(document, dict) and isinstance(document.get("error"), dict):
                code = str(document["error"].get("code", "unknown"))[:64]
            raise OperatorError(response.status_code, code)
        return document

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
        self._call("POST", f"/tokens/{_seg(token_id)}/revoke")

    def accounts(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/accounts")["accounts"])

    def tokens(self, account_id: str | None = None) -> list[dict[str, Any]]:
        return list(self._call("GET", "/tokens", params=_only(account_id=account_id))["tokens"])

    def bookings(self, account_id: str | None = None) -> list[dict[str, Any]]:
        return list(self._call("GET", "/bookings", params=_only(account_id=account_id))["bookings"])

    def confirmation_requests(self, account_id: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """Newest first; status: pending, confirmed, declined or expired."""
        params = _only(account_id=account_id, status=status)
        return list(self._call("GET", "/confirmation-requests", params=params)["requests"])

    def confirm_request(self, request_id: str, decided_by: str = "operator") -> dict[str, Any]:
        """Confirm as if the person did (headless); records `decided_via: operator` and `decided_by`."""
        result: dict[str, Any] = self._call("POST", f"/confirmation-requests/{_seg(request_id)}/confirm",
                                            {"decided_by": decided_by})
        return result

    def decline_request(self, request_id: str, decided_by: str = "operator") -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/confirmation-requests/{_seg(request_id)}/decline",
                                            {"decided_by": decided_by})
        return result

    def login_link(self, account_id: str) -> dict[str, Any]:
        """A single-use desk sign-in link for the account: `{"account_id", "url", "expires_at"}`."""
        result: dict[str, Any] = self._call("POST", "/desk/login-links", {"account_id": account_id})
        return result

    def booking(self, account_id: str, state: str = "completed", **kw: Any) -> dict[str, Any]:
        """kw: booking_id, gpu, nodes, gpus_per_node, region, fabric, term_ends_in_s, checked_at_offset_s."""
        result: dict[str, Any] = self._call("POST", "/bookings", {"account_id": account_id, "state": state, **kw})
        return result

    def get_booking(self, booking_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/bookings/{_seg(booking_id)}")
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
        proposal_id: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"account_id": account_id, "action": action, "booking_id": booking_id,
                                "max_cost_usd": max_cost_usd, "expires_in_s": expires_in_s}
        if manifest_sha256 is not None:
            body["manifest_sha256"] = manifest_sha256
        if run_id is not None:
            body["run_id"] = run_id
        if proposal_id is not None:
            body["proposal_id"] = proposal_id
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
        result: dict[str, Any] = self._call("POST", f"/runs/{_seg(run_id)}/advance")
        return result

    def fail_gate(self, run_id: str, evals: dict[str, float] | None = None, stage: str | None = None) -> dict[str, Any]:
        """Fail the current stage's gate, or (with `stage`) pass the stages before it and fail that one."""
        body: dict[str, Any] = {}
        if evals is not None:
            body["evals"] = evals
        if stage is not None:
            body["stage"] = stage
        result: dict[str, Any] = self._call("POST", f"/runs/{_seg(run_id)}/fail-gate", body)
        return result

    def finish(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/runs/{_seg(run_id)}/finish")
        return result

    def interrupt(self, run_id: str, detect_s: float | None = None, resume_s: float | None = None) -> dict[str, Any]:
        """Inject an interruption into the run's running stage (detection and resume times in seconds)."""
        body = {k: v for k, v in (("detect_s", detect_s), ("resume_s", resume_s)) if v is not None}
        result: dict[str, Any] = self._call("POST", f"/runs/{_seg(run_id)}/interrupt", body)
        return result

    def spike(self, run_id: str, factor: float | None = None) -> dict[str, Any]:
        """Inject a loss spike into the run's running training stage: it pauses and a restart is proposed."""
        body = {} if factor is None else {"factor": factor}
        result: dict[str, Any] = self._call("POST", f"/runs/{_seg(run_id)}/spike", body)
        return result

    def tick(self) -> int:
        """Step the run clock once, as of the backend's clock; how many runs moved."""
        return int(self._call("POST", "/clock/tick")["moved"])

    def runs(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/runs")["runs"])


def _seg(value: str) -> str:
    """One path segment, percent-encoded: an id can never add a path or a query."""
    return quote(value, safe="")


def _only(**params: str | None) -> dict[str, str]:
    return {k: v for k, v in params.items() if v is not None}


def _literal(url: httpx.URL) -> httpx.URL:
    """The URL with its host resolved to one literal loopback IP address, so that the address signed is
    the address connected to: of the loopback addresses the name resolves to (`localhost` may mean
    ::1 and 127.0.0.1), the first that accepts a connection."""
    try:
        ipaddress.ip_address(url.host)
        return url
    except ValueError:
        pass
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(url.host, port, type=socket.SOCK_STREAM)
    except OSError:
        raise OperatorError(0, "unresolvable_host") from None
    candidates = []
    for *_, sockaddr in found:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if ip.is_loopback and ip not in candidates:
            candidates.append(ip)
    if not candidates:
        raise OperatorError(0, "not_loopback")
    for ip in candidates:
        try:
            socket.create_connection((str(ip), port), timeout=2).close()
        except OSError:
            continue
        return url.copy_with(host=str(ip))
    return url.copy_with(host=str(candidates[0]))  # none answers: the call fails as unreachable
