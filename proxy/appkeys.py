"""Typed keys for what the application and each request carry (aiohttp AppKey/RequestKey).

The store and engine are typed by Protocols (`store.interface.StoreBackend`, `EngineAPI` below), so
proxy/ depends on contracts rather than on implementation modules at import time.
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
from store.interface import StoreBackend


class EngineAPI(Protocol):
    """What the proxy uses of compaction.engine.Engine."""

    async def prepare(self, turn: ChatTurn) -> PreparedRequest: ...

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: dict[str, Any]) -> None: ...

    def after_turn(self, prepared: PreparedRequest, turn: ChatTurn) -> bool: ...

    async def aclose(self) -> None: ...


SETTINGS = web.AppKey("settings", Settings)
SESSION = web.AppKey("client_session", aiohttp.ClientSession)
METRICS = web.AppKey("metrics", Metrics)
LOGGER = web.AppKey("logger", FilteringBoundLogger)
STORE = web.AppKey("store", StoreBackend)
ENGINE = web.AppKey("engine", EngineAPI)
UPSTREAMS = web.AppKey("upstreams", UpstreamRouter)
WINDOWS = web.AppKey("context_windows", WindowResolver)

RECORD = web.RequestKey("request_record", RequestRecord)
