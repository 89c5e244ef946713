"""The one error shape of the reference backend: `{"error": {"code", "message", "reason"?}}`.

Messages are fixed text plus ids the server itself validated, never request bodies or tokens,
so an error is safe to return and to log.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Raised by any handler; the endpoint wrapper turns it into the JSON error reply."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        reason: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}")
        self.status = status
        self.code = code
        self.message = message
        self.reason = reason
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.reason is not None:
            error["reason"] = self.reason
        return {"error": error}


def invalid_request(message: str) -> ApiError:
    return ApiError(400, "invalid_request", message)


def not_found() -> ApiError:
    """Unknown paths and refused operator calls look exactly alike."""
    return ApiError(404, "not_found", "No such resource.")
