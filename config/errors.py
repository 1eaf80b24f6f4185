"""The one error hierarchy of ctxproxy.

Every failure a client can see is a `CtxProxyError` carrying OpenAI's status, type and code, so a
single middleware (proxy/server/middleware.py) can render it as `{"error": {...}}`. This module sits in
`config/` because it is the bottom layer: store/, compaction/ and proxy/ all raise these, and none of
them may depend on the HTTP layer.
"""

from __future__ import annotations

from typing import Any, ClassVar


class CtxProxyError(Exception):
    """Base class: an error with an OpenAI-shaped body and an HTTP status."""

    status: ClassVar[int] = 500
    error_type: ClassVar[str] = "server_error"
    default_code: ClassVar[str | None] = "internal_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is not None else self.default_code
        # Response headers the client must get with the error (a provider's Retry-After, `Allow`).
        self.headers: dict[str, str] = {}

    def to_body(self) -> dict[str, Any]:
        """OpenAI's error JSON shape."""
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.code,
            }
        }


class ConfigError(CtxProxyError):
    """A configuration file or override is invalid; the message names the key."""

    error_type = "invalid_config"
    default_code = "invalid_config"


class InvalidRequestError(CtxProxyError):
    """Malformed JSON, invalid messages or parameters (400); `param` names the path."""

    status = 400
    error_type = "invalid_request_error"
    default_code = "invalid_request"


class AuthenticationError(CtxProxyError):
    """Missing or wrong credentials for an operator endpoint (401)."""

    status = 401
    error_type = "authentication_error"
    default_code = "invalid_api_key"


class TooManyAttemptsError(CtxProxyError):
    """Too many failed admin-key attempts from one source: refused unchecked for a while (429)."""

    status = 429
    error_type = "rate_limit_error"
    default_code = "too_many_attempts"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class NotFoundError(CtxProxyError):
    """Unknown model, conversation, message or summary, or another tenant's id (404)."""

    status = 404
    error_type = "invalid_request_error"
    default_code = "not_found"


class ProviderObjectNotFoundError(NotFoundError):
    """A provider object (file, response, batch, ...) the caller's tenant did not create, answered as
    the provider answers an unknown id (404, `code` null), so another tenant's ids are not revealed."""

    def __init__(self, kind: str, object_id: str, *, param: str | None = None) -> None:
        super().__init__(f"No {kind} found with id '{object_id}'.", param=param)
        self.code = None


class MethodNotAllowedError(CtxProxyError):
    """A known path asked with a method it does not serve (405); `headers` carries `Allow`."""

    status = 405
    error_type = "invalid_request_error"
    default_code = "method_not_allowed"

    def __init__(self, message: str, allowed: list[str]) -> None:
        super().__init__(message)
        self.headers = {"Allow": ", ".join(allowed)}


class ModelNotFoundError(NotFoundError):
    """The requested model is not in the model list (404, like OpenAI)."""

    default_code = "model_not_found"


class PayloadTooLargeError(CtxProxyError):
    """Request body above the configured limit (413)."""

    status = 413
    error_type = "invalid_request_error"
    default_code = "request_too_large"


class UpstreamError(CtxProxyError):
    """The provider could not be reached or answered garbage (502)."""

    status = 502
    error_type = "upstream_error"
    default_code = "bad_gateway"


class UpstreamTimeoutError(UpstreamError):
    """The provider did not answer in time (504)."""

    status = 504
    default_code = "upstream_timeout"


class UpstreamHTTPError(UpstreamError):
    """A well-formed error answered by the provider, passed through with its own status and body."""

    error_type = "upstream_error"
    default_code = "upstream_error"

    def __init__(self, status: int, body: dict[str, Any],
                 headers: dict[str, str] | None = None) -> None:
        err = body.get("error")
        message = err.get("message") if isinstance(err, dict) else None
        super().__init__(str(message or f"upstream answered {status}"))
        self.upstream_status = status
        self.body = body
        self.headers = dict(headers or {})  # the provider's rate-limit and request-id headers

    def to_body(self) -> dict[str, Any]:
        return self.body


class SummarizerError(CtxProxyError):
    """A summarizer call failed or returned unusable output. Never reaches a client."""

    error_type = "summarizer_error"
    default_code = "summarizer_failed"


class StoreError(CtxProxyError):
    """The store is unusable (corrupt, locked for too long, migration failed)."""

    status = 503
    error_type = "server_error"
    default_code = "store_unavailable"


class StoreUnwritableError(StoreError):
    """The store cannot take writes: its disk is full or it is read-only (507); reads still work."""

    status = 507
    default_code = "store_full"


class RequestTimeoutError(InvalidRequestError):
    """The client sent its request head or body too slowly (408); the connection is closed."""

    status = 408
    default_code = "request_timeout"


class NotReadyError(CtxProxyError):
    """The proxy is still warming up (heavy imports, tokenizers) and not ready to serve (503)."""

    status = 503
    error_type = "server_error"
    default_code = "warming_up"


def http_status(error: CtxProxyError) -> int:
    """The status to answer with: an upstream error keeps its own."""
    if isinstance(error, UpstreamHTTPError):
        return error.upstream_status
    return error.status
