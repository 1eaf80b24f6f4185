"""proxy.error_mapping: every litellm exception has an explicit rule; transports map by kind."""

from __future__ import annotations

import inspect
import json

import aiohttp
import pytest

from config.errors import (
    CtxProxyError,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTimeoutError,
    http_status,
)
from proxy.error_mapping import (
    LITELLM_RULES,
    internal_error,
    litellm_rule,
    to_ctxproxy_error,
    upstream_failure,
)


def litellm_exception_classes() -> list[type[BaseException]]:
    from compaction.llm import get_litellm

    module = get_litellm().exceptions
    return [c for c in vars(module).values()
            if inspect.isclass(c) and issubclass(c, BaseException)
            and c.__module__.startswith("litellm")]


def test_every_litellm_exception_has_an_explicit_rule() -> None:
    classes = litellm_exception_classes()
    assert len(classes) > 20
    missing = sorted(c.__name__ for c in classes if c.__name__ not in LITELLM_RULES)
    assert missing == []
    for cls in classes:
        rule = litellm_rule(cls)
        assert rule is not None and rule.status != 500 or cls.__name__ in (
            "InternalServerError", "APIError", "OpenAIError", "MockException")


def test_litellm_instances_keep_status_and_class() -> None:
    exc = get_exc("RateLimitError", "slow down", llm_provider="anthropic", model="claude")
    mapped = to_ctxproxy_error(exc)
    assert isinstance(mapped, UpstreamHTTPError) and http_status(mapped) == 429
    assert mapped.to_body()["error"]["type"] == "rate_limit_error"
    window = to_ctxproxy_error(get_exc("ContextWindowExceededError", "too long", model="m",
                                       llm_provider="openai"))
    assert isinstance(window, UpstreamHTTPError) and http_status(window) == 400
    assert window.to_body()["error"]["code"] == "context_length_exceeded"
    timeout = to_ctxproxy_error(get_exc("Timeout", "late", model="m", llm_provider="openai"))
    assert isinstance(timeout, UpstreamTimeoutError) and http_status(timeout) == 504
    conn = to_ctxproxy_error(get_exc("APIConnectionError", "down", llm_provider="openai", model="m"))
    assert type(conn) is UpstreamError and http_status(conn) == 502


def get_exc(name: str, message: str, **kwargs: object) -> BaseException:
    from compaction.llm import get_litellm

    cls = getattr(get_litellm().exceptions, name)
    exc: BaseException = cls(message=message, **kwargs)
    return exc


@pytest.mark.parametrize(("exc", "cls", "status"), [
    (aiohttp.ServerTimeoutError("read"), UpstreamTimeoutError, 504),
    (aiohttp.SocketTimeoutError("read"), UpstreamTimeoutError, 504),
    (aiohttp.ConnectionTimeoutError("connect"), UpstreamError, 502),  # documented: connect timeout -> 502
    (aiohttp.ServerDisconnectedError(), UpstreamError, 502),
    (aiohttp.ClientPayloadError("cut"), UpstreamError, 502),
])
def test_transport_exceptions(exc: BaseException, cls: type[CtxProxyError], status: int) -> None:
    for mapped in (to_ctxproxy_error(exc), upstream_failure(exc)):
        assert type(mapped) is cls and mapped is not None and http_status(mapped) == status


def test_stray_timeouts_and_json_errors_are_internal_but_upstream_timeouts_are_504() -> None:
    # Outside the provider call a TimeoutError or JSONDecodeError is a bug (500), not the
    # provider's timeout nor the client's body (handlers raise their own 400 for bad JSON).
    assert to_ctxproxy_error(TimeoutError()) is None
    assert to_ctxproxy_error(json.JSONDecodeError("bad", "x", 0)) is None
    timeout = upstream_failure(TimeoutError())
    assert type(timeout) is UpstreamTimeoutError and http_status(timeout) == 504
    assert type(upstream_failure(ConnectionResetError())) is UpstreamError  # a socket error: 502
    assert upstream_failure(KeyError("a bug, ours or an SDK's")) is None  # a bug: 500, never a 502


def test_unknown_exceptions_are_not_mapped_and_internal_error_leaks_nothing() -> None:
    assert to_ctxproxy_error(KeyError("secret internals")) is None
    body = internal_error().to_body()["error"]
    assert body["code"] == "internal_error" and "secret" not in body["message"]


def test_a_request_body_aiohttp_cannot_read_is_the_clients_400() -> None:
    from aiohttp.http_exceptions import ContentEncodingError, ContentLengthError
    from aiohttp.web_protocol import RequestPayloadError

    causes = ((ContentEncodingError("Can not decode content-encoding: gzip"), "invalid_content_encoding"),
              (ContentLengthError("Not enough data to satisfy content length header."), "invalid_body"))
    for cause, code in causes:
        exc = RequestPayloadError("cut")
        exc.__cause__ = cause
        mapped = to_ctxproxy_error(exc)
        assert mapped is not None and http_status(mapped) == 400 and mapped.code == code
