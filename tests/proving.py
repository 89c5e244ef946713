"""The origin proof as a test backend answers it (ito_training_mcp/backend/origin_proof.py): the fakes
that stand in for the backend over plain http know the token, so they can prove it, as the
reference backend does."""

from __future__ import annotations

from urllib.parse import parse_qs

import httpx

from ito_training_mcp.backend import origin_proof


def is_proof_request(path: str) -> bool:
    return path.split("?", 1)[0].endswith(origin_proof.PROOF_PATH)


def proof_body(token: str, query: str, host: str, port: int) -> dict[str, str]:
    """The answer to `GET /v1/origin-proof?<query>` that a backend holding `token`, reached on `host:port`,
    gives (`token_unknown` when the handle is not this token's)."""
    fields = parse_qs(query)
    key = origin_proof.token_key(token)
    if fields.get("token_handle") != [origin_proof.token_handle(key)]:
        return {"error": "token_unknown"}
    return {"proof": origin_proof.proof(key, fields["nonce"][0], origin_proof.authority(host, port))}


def proof_response(request: httpx.Request, token: str) -> httpx.Response:
    """For an in-memory transport: the proof for the address the request was built for."""
    body = proof_body(token, request.url.query.decode(), request.url.host, request.url.port or 80)
    if "error" in body:
        return httpx.Response(404, json={"error": {"code": "token_unknown", "message": "no such token"}})
    return httpx.Response(200, json=body)
