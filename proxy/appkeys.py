"""Typed keys for what the application and each request carry (aiohttp AppKey/RequestKey).

The store and engine are typed by Protocols (`store.interface.StoreBackend`, `EngineAPI`), so
proxy/ depends on contracts rather than on implementation modules at import time.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web
from structlog.typing import FilteringBoundLogger

from config.settings import Settings
from proxy.engine_host import HostedEngine as EngineAPI
from proxy.engine_pool import EnginePool
from proxy.observability.logging import RequestRecord
from proxy.observability.metrics import Metrics
from proxy.server.connections import ConnectionGuard
from proxy.server.resent_body import ResentBodies
from proxy.server.store_health import StoreHealth
from proxy.upstream.openai import UpstreamRouter
from proxy.windows import WindowResolver
from proxy.wire.anthropic import Translations
from proxy.wire.responses import Translations as ResponsesTranslations
from store.interface import StoreBackend

SETTINGS = web.AppKey("settings", Settings)
SESSION = web.AppKey("client_session", aiohttp.ClientSession)
METRICS = web.AppKey("metrics", Metrics)
LOGGER = web.AppKey("logger", FilteringBoundLogger)
STORE = web.AppKey("store", StoreBackend)
ENGINE = web.AppKey("engine", EngineAPI)  # lives on HOST's thread: call it through HOST
HOST = web.AppKey("engine_host", EnginePool)
UPSTREAMS = web.AppKey("upstreams", UpstreamRouter)
WINDOWS = web.AppKey("context_windows", WindowResolver)
RESENT_BODIES = web.AppKey("resent_bodies", ResentBodies)  # a resend's new part alone is parsed
RESENT_INPUTS = web.AppKey("resent_inputs", ResentBodies)  # the same for Responses bodies (`input`)
TRANSLATIONS = web.AppKey("translations", Translations)  # Messages turns seen before, as canonical dicts
RESPONSES_TRANSLATIONS = web.AppKey("responses_translations", ResponsesTranslations)  # and Responses items
CONNECTIONS = web.AppKey("connections", ConnectionGuard)  # set when served by proxy/server/protocol.py
STORE_HEALTH = web.AppKey("store_health", StoreHealth)  # a full or read-only store, for /readyz

RECORD = web.RequestKey("request_record", RequestRecord)
# The parsed JSON body, held by the request so its objects are freed with it, after the answer is
# sent: freeing a resent 100k-token history took ~0.3 ms between the handler and the answer.
PARSED_BODY = web.RequestKey("parsed_body", dict)
