"""Errors on the Anthropic routes in Anthropic's shape: `{"type": "error", "error": {type, message}}`.

The anthropic SDK picks its exception class from the status and reads `error.type`/`error.message`;
an error a native Anthropic upstream answered is relayed as it came.
"""

from __future__ import annotations

from typing import Any

from config.errors import CtxProxyError, UpstreamHTTPError

ROUTE_PREFIX = "/v1/messages"  # /v1/messages and /v1/messages/count_tokens
TYPES_BY_STATUS = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                   403: "permission_error", 404: "not_found_error", 405: "invalid_request_error",
                   413: "request_too_large", 429: "rate_limit_error", 504: "timeout_error",
                   529: "overloaded_error"}


def is_anthropic_route(path: str) -> bool:
    return path == ROUTE_PREFIX or path.startswith(ROUTE_PREFIX + "/")


def error_type(status: int) -> str:
    """Anthropic's error type for an HTTP status."""
    return TYPES_BY_STATUS.get(status, "api_error" if status >= 500 else "invalid_request_error")


def anthropic_error_body(error: CtxProxyError, status: int) -> dict[str, Any]:
    """The error as Anthropic's JSON (an Anthropic-shaped upstream body unchanged)."""
    if isinstance(error, UpstreamHTTPError) and error.body.get("type") == "error":
        return error.body
    return {"type": "error", "error": {"type": error_type(status), "message": error.message}}
