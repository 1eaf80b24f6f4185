"""The one place foreign exceptions (aiohttp, asyncio, json, litellm, the store's sqlite3, psycopg
and OS errors) become CtxProxyErrors.

litellm is matched by class *name* along the MRO, and psycopg by its SQLSTATE, so this module never
imports either (only compaction/llm.py may import litellm). Every class litellm.exceptions exports
has an explicit row in LITELLM_RULES; tests/proxy/test_error_mapping.py keeps the table complete.
"""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError, HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from config.errors import (
    CtxProxyError,
    InvalidRequestError,
    PayloadTooLargeError,
    StoreError,
    StoreUnwritableError,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
)
from config.settings import LiteLLMParams

INTERNAL_MESSAGE = "internal error in ctxproxy; see the proxy log for details"
CREDENTIALS_REJECTED = "the upstream rejected the proxy's configured credentials"
STORE_FULL = ("the store's disk is full: ctxproxy cannot record this conversation; free space on "
              "the store's volume (requests succeed again at once)")
STORE_READ_ONLY = ("the store is read-only: ctxproxy cannot record this conversation; make the store "
                   "writable (requests succeed again at once)")
SQLITE_FULL, SQLITE_READONLY = 13, 8  # primary result codes (the low byte of extended ones)
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
PG_FULL_SQLSTATES = frozenset({"53100"})  # disk_full
PG_READ_ONLY_SQLSTATES = frozenset({"25006"})  # read_only_sql_transaction


@dataclass(frozen=True)
class LiteLLMRule:
    """How one litellm exception class is answered: status, OpenAI error type and code."""

    status: int
    error_type: str
    code: str


_BAD_REQUEST = LiteLLMRule(400, "invalid_request_error", "invalid_request")
LITELLM_RULES: dict[str, LiteLLMRule] = {
    "AuthenticationError": LiteLLMRule(401, "authentication_error", "invalid_api_key"),
    "CallerCredentialAuthenticationError": LiteLLMRule(401, "authentication_error", "invalid_api_key"),
    "PermissionDeniedError": LiteLLMRule(403, "permission_error", "permission_denied"),
    "NotFoundError": LiteLLMRule(404, "invalid_request_error", "model_not_found"),
    "BadRequestError": _BAD_REQUEST,
    "InvalidRequestError": _BAD_REQUEST,
    "ImageFetchError": LiteLLMRule(400, "invalid_request_error", "image_fetch_failed"),
    "MalformedRequestFieldError": _BAD_REQUEST,
    "UnsupportedParamsError": LiteLLMRule(400, "invalid_request_error", "unsupported_parameter"),
    "UnsupportedEndpointError": LiteLLMRule(400, "invalid_request_error", "unsupported_endpoint"),
    "EndpointNotSupportedByModelError": LiteLLMRule(400, "invalid_request_error", "unsupported_endpoint"),
    "ModelNotMappedError": LiteLLMRule(400, "invalid_request_error", "model_not_mapped"),
    "LiteLLMUnknownProvider": LiteLLMRule(400, "invalid_request_error", "unknown_provider"),
    "ContextWindowExceededError": LiteLLMRule(400, "invalid_request_error", "context_length_exceeded"),
    "ContentPolicyViolationError": LiteLLMRule(400, "invalid_request_error", "content_policy_violation"),
    "RejectedRequestError": LiteLLMRule(400, "invalid_request_error", "request_rejected"),
    "GuardrailRaisedException": LiteLLMRule(400, "invalid_request_error", "guardrail_rejected"),
    "BlockedPiiEntityError": LiteLLMRule(400, "invalid_request_error", "guardrail_rejected"),
    "SensitiveDataRouteException": LiteLLMRule(400, "invalid_request_error", "guardrail_rejected"),
    "ModifyResponseException": LiteLLMRule(400, "invalid_request_error", "guardrail_rejected"),
    "VectorStoreSearchError": _BAD_REQUEST,
    "PaymentRequiredError": LiteLLMRule(402, "insufficient_quota", "payment_required"),
    "UnprocessableEntityError": LiteLLMRule(422, "invalid_request_error", "unprocessable_entity"),
    "RateLimitError": LiteLLMRule(429, "rate_limit_error", "rate_limit_exceeded"),
    "CallerCredentialRateLimitError": LiteLLMRule(429, "rate_limit_error", "rate_limit_exceeded"),
    "BudgetExceededError": LiteLLMRule(429, "insufficient_quota", "budget_exceeded"),
    "InternalServerError": LiteLLMRule(500, "server_error", "upstream_error"),
    "APIError": LiteLLMRule(500, "server_error", "upstream_error"),
    "OpenAIError": LiteLLMRule(500, "server_error", "upstream_error"),
    "MockException": LiteLLMRule(500, "server_error", "upstream_error"),
    "BadGatewayError": LiteLLMRule(502, "upstream_error", "bad_gateway"),
    "APIConnectionError": LiteLLMRule(502, "upstream_error", "bad_gateway"),
    "APIResponseValidationError": LiteLLMRule(502, "upstream_error", "invalid_upstream_response"),
    "JSONSchemaValidationError": LiteLLMRule(502, "upstream_error", "invalid_upstream_response"),
    "MidStreamFallbackError": LiteLLMRule(502, "upstream_error", "bad_gateway"),
    "ServiceUnavailableError": LiteLLMRule(503, "server_error", "service_unavailable"),
    "Timeout": LiteLLMRule(504, "upstream_error", "upstream_timeout"),
    "APITimeoutError": LiteLLMRule(504, "upstream_error", "upstream_timeout"),
}


def to_ctxproxy_error(exc: BaseException) -> CtxProxyError | None:
    """The CtxProxyError for `exc`, or None when it is unexpected (an internal bug: 500)."""
    storage = storage_failure(exc)
    if storage is not None:
        return storage
    if isinstance(exc, CtxProxyError):
        return exc
    rule = litellm_rule(type(exc))
    if rule is not None:
        return _from_litellm(exc, rule)
    return _from_transport(exc)


def storage_failure(exc: BaseException) -> StoreUnwritableError | None:
    """A 507 when `exc` (or what a StoreError wraps) is a full disk or a read-only store: SQLite's
    SQLITE_FULL or SQLITE_READONLY, ENOSPC/EDQUOT/EROFS, psycopg's DiskFull or read-only
    transaction; None for anything else."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, StoreUnwritableError):
            return seen
        kind = _storage_kind(seen)
        if kind is not None:
            return StoreUnwritableError(STORE_FULL if kind == "full" else STORE_READ_ONLY,
                                        code=f"store_{kind}")
        seen = seen.__cause__ if isinstance(seen, StoreError) else None
    return None


def _storage_kind(exc: BaseException) -> str | None:
    """"full", "read_only" or None for one exception (psycopg matched by sqlstate, not imported)."""
    if isinstance(exc, sqlite3.Error):
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        text = str(exc)
        if code == SQLITE_FULL or "database or disk is full" in text:
            return "full"
        if code == SQLITE_READONLY or "readonly database" in text:
            return "read_only"
        return None
    if isinstance(exc, OSError):
        return "full" if exc.errno in FULL_ERRNOS else "read_only" if exc.errno == errno.EROFS else None
    sqlstate = getattr(exc, "sqlstate", None) if type(exc).__module__.startswith("psycopg") else None
    if sqlstate in PG_FULL_SQLSTATES:
        return "full"
    return "read_only" if sqlstate in PG_READ_ONLY_SQLSTATES else None


def internal_error() -> CtxProxyError:
    """The generic 500 that never leaks internals."""
    return CtxProxyError(INTERNAL_MESSAGE)


def http_failure(status: int, exc: BaseException | None) -> CtxProxyError:
    """What aiohttp answers itself (its parser rejected the request, or a failure got past every
    middleware), as a CtxProxyError: the parser's reason without the bytes it quotes."""
    if 400 <= status < 500:
        text = exc.message if isinstance(exc, HttpProcessingError) else ""
        reason = (text or "").split(":", 1)[0].strip() or "unparseable request"
        return InvalidRequestError(f"malformed HTTP request: {reason}", code="malformed_request")
    if status == 504:
        return CtxProxyError("ctxproxy timed out handling the request", code="timeout")
    return internal_error()


def litellm_rule(cls: type[BaseException]) -> LiteLLMRule | None:
    """The rule of the nearest class in `cls`'s MRO defined by litellm/openai, if any."""
    for klass in cls.__mro__:
        module = klass.__module__ or ""
        if module.split(".")[0] in ("litellm", "openai") and klass.__name__ in LITELLM_RULES:
            return LITELLM_RULES[klass.__name__]
    return None


def _from_litellm(exc: BaseException, rule: LiteLLMRule) -> CtxProxyError:
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or not 400 <= status <= 599:
        status = rule.status
    message = str(getattr(exc, "message", None) or exc) or f"upstream answered {status}"
    if rule.status == 504:
        return UpstreamTimeoutError(message)
    if rule.code == "bad_gateway":
        return UpstreamError(message)
    body: dict[str, Any] = {"error": {"message": message, "type": rule.error_type,
                                      "param": getattr(exc, "param", None), "code": rule.code}}
    return UpstreamHTTPError(status, body)


def upstream_failure(exc: BaseException) -> CtxProxyError | None:
    """An exception raised while talking to the provider: as to_ctxproxy_error, plus any timeout
    or socket error there is the provider's (504/502). None for anything else: a ctxproxy bug,
    which must surface as a 500 with its traceback, never as a 502 blaming the provider."""
    mapped = to_ctxproxy_error(exc)
    if mapped is not None:
        return mapped
    if isinstance(exc, TimeoutError):
        return UpstreamTimeoutError("the upstream provider did not answer in time")
    if isinstance(exc, OSError | asyncio.IncompleteReadError):
        return UpstreamError(f"upstream request failed: {type(exc).__name__}")
    return None


@contextmanager
def provider_call(params: LiteLLMParams | None = None) -> Iterator[None]:
    """Around every call to a provider: its failures become CtxProxyErrors (a refused operator
    key a 502, see `for_keyed_entry`); anything else propagates unchanged as the bug it is."""
    try:
        yield
    except Exception as exc:
        mapped = upstream_failure(exc)
        if mapped is None or mapped is exc:
            raise
        raise for_keyed_entry(params, mapped) from exc


def for_keyed_entry(params: LiteLLMParams | None, error: CtxProxyError) -> CtxProxyError:
    """`error`, except that the provider refusing the operator's configured key becomes a 502."""
    if (params is not None and params.api_key and isinstance(error, UpstreamHTTPError)
            and error.upstream_status in (401, 403)):
        return UpstreamError(CREDENTIALS_REJECTED, code="upstream_credentials_rejected")
    return error


def _from_transport(exc: BaseException) -> CtxProxyError | None:
    # Order matters: a connect timeout is a ServerTimeoutError, which is a ClientError and a
    # TimeoutError. Bare TimeoutError / JSONDecodeError are not mapped here: outside the upstream
    # call (upstream_failure) they are bugs, and handlers raise their own errors for bad bodies.
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return UpstreamError("could not connect to the upstream provider in time")
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return UpstreamTimeoutError("the upstream provider did not answer in time")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return UpstreamError(f"cannot reach the upstream provider at {exc.host}:{exc.port}")
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return UpstreamError("the upstream provider closed the connection mid-response")
    if isinstance(exc, aiohttp.ClientError):
        return UpstreamError(f"upstream request failed: {type(exc).__name__}")
    if isinstance(exc, RequestPayloadError):
        return _bad_payload(exc)
    if isinstance(exc, web.HTTPRequestEntityTooLarge):
        return PayloadTooLargeError("request body is larger than server.max_body_bytes")
    return None


def _bad_payload(exc: RequestPayloadError) -> CtxProxyError:
    """A request body aiohttp could not read: not in its Content-Encoding, or cut short (400)."""
    cause = exc.__cause__
    if isinstance(cause, ContentEncodingError):
        return InvalidRequestError("the request body is not valid for its Content-Encoding header "
                                   f"({cause.message.split(':')[-1].strip()})",
                                   param="Content-Encoding", code="invalid_content_encoding")
    reason = cause.message if isinstance(cause, HttpProcessingError) else type(cause).__name__
    return InvalidRequestError(f"the request body could not be read: {reason}", code="invalid_body")
