"""Typed keys for what the application and each request carry (aiohttp AppKey/RequestKey).

The store and engine are typed by the small Protocols the proxy needs, so proxy/ depends on the
contract in docs/architecture.md rather than on implementation modules at import time.
"""

from __future__ import annotations

from typing import Any, Protocol

import aiohttp
from aiohttp import web
from structlog.typing import FilteringBoundLogger

from compaction.types import ChatTurn, PreparedRequest
from config.settings import Settings
from proxy.observability.logging import RequestRecord
from proxy.observability.metrics import Metrics
from proxy.server.windows import WindowResolver
from proxy.upstream.openai import UpstreamRouter


class StoreLike(Protocol):
    """What the proxy uses of store.store.Store."""

    def tenant_id_for_key(self, api_key: str | None) -> str: ...

    def for_tenant(self, tenant_id: str) -> Any: ...

    def close(self) -> None: ...


class EngineLike(Protocol):
    """What the proxy uses of compaction.engine.Engine (hooks may be sync or async)."""

    async def prepare(self, turn: ChatTurn) -> PreparedRequest: ...

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: dict[str, Any]) -> Any: ...

    def after_turn(self, prepared: PreparedRequest, turn: ChatTurn) -> Any: ...

    async def aclose(self) -> None: ...


SETTINGS = web.AppKey("settings", Settings)
SESSION = web.AppKey("client_session", aiohttp.ClientSession)
METRICS = web.AppKey("metrics", Metrics)
LOGGER = web.AppKey("logger", FilteringBoundLogger)
STORE = web.AppKey("store", StoreLike)
ENGINE = web.AppKey("engine", EngineLike)
UPSTREAMS = web.AppKey("upstreams", UpstreamRouter)
WINDOWS = web.AppKey("context_windows", WindowResolver)

RECORD = web.RequestKey("request_record", RequestRecord)
