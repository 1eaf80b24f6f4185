"""The aiohttp application: routes, middlewares and resources owned by cleanup contexts.

Nothing is created at import time; each `create_app` builds its own store handle, client session,
engine, metrics registry and logger, and closes them on shutdown (engine first, store last).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from aiohttp import web
from structlog.typing import FilteringBoundLogger

from config import cache_budget
from config.settings import Settings
from proxy import appkeys, upkeep
from proxy.engine_host import HostedEngine as EngineAPI
from proxy.engine_pool import EnginePool
from proxy.heap import heap_trim_ctx
from proxy.inspector.web import setup_ui
from proxy.observability.logging import make_logger
from proxy.observability.loop_lag import loop_lag_ctx
from proxy.observability.metrics import Metrics
from proxy.routes import chat, messages, meta, passthrough, responses
from proxy.routes.context import setup_context_routes
from proxy.routes.lifecycle import setup_lifecycle_routes
from proxy.server.auth import client_key_middleware
from proxy.server.middleware import error_middleware, observe_middleware
from proxy.server.resent_body import ResentBodies
from proxy.server.store_health import StoreHealth
from proxy.server.warmup import warmup_ctx
from proxy.upstream.litellm_routed import LiteLLMUpstream
from proxy.upstream.openai import OpenAIUpstream, UpstreamRouter
from proxy.windows import WindowResolver
from proxy.wire.anthropic import Translations
from proxy.wire.responses import Translations as ResponsesTranslations
from store.factory import open_store
from store.interface import StoreBackend

# (store, settings, metrics, logger) -> the engine the handlers call; tests pass their own.
EngineFactory = Callable[[StoreBackend, Settings, Metrics, FilteringBoundLogger], EngineAPI]
CONNECTOR_LIMIT = 512  # concurrent upstream connections (streams hold one each)
KEEPALIVE_S = 60.0


def default_engine(store: StoreBackend, settings: Settings, metrics: Metrics,
                   logger: FilteringBoundLogger) -> EngineAPI:
    """compaction.engine.Engine with the configured summarizer choice, observed (logs + metrics)."""
    from compaction import Engine
    from proxy.observability.observer import ProxyObserver
    from proxy.summarizers import SummarizerChooser

    chooser = SummarizerChooser(settings)
    return Engine(store, settings, chooser, observer=ProxyObserver(metrics, logger), on_close=chooser.aclose)


def create_app(settings: Settings, *, engine_factory: EngineFactory | None = None,
               log_stream: Any = None) -> web.Application:
    """A ready-to-run application for `settings` (resources start with the app)."""
    app = web.Application(client_max_size=settings.server.max_body_bytes,
                          middlewares=[observe_middleware, error_middleware,
                                       client_key_middleware])
    app[appkeys.SETTINGS] = settings
    app.cleanup_ctx.append(_observability(settings, log_stream))
    app.cleanup_ctx.append(_store)
    app.cleanup_ctx.append(_session)
    app.cleanup_ctx.append(_engine(engine_factory or default_engine))
    app.cleanup_ctx.append(warmup_ctx)
    app.cleanup_ctx.append(loop_lag_ctx)
    app.cleanup_ctx.append(heap_trim_ctx)
    _add_routes(app)
    return app


def _add_routes(app: web.Application) -> None:
    for prefix in ("/v1", ""):
        app.router.add_post(f"{prefix}/chat/completions", chat.chat_completions)
        app.router.add_post(f"{prefix}/responses", responses.responses)
    app.router.add_post("/v1/messages", messages.messages)
    app.router.add_post("/v1/messages/count_tokens", messages.count_tokens)
    app.router.add_get("/v1/models", meta.list_models)
    app.router.add_get("/models", meta.list_models)
    app.router.add_get("/v1/models/{model_id:.+}", meta.retrieve_model)
    app.router.add_delete("/v1/models/{model_id:.+}", meta.delete_model)  # fine-tuned models
    app.router.add_get("/healthz", meta.healthz)
    app.router.add_get("/readyz", meta.readyz)
    app.router.add_get("/metrics", meta.metrics)
    setup_context_routes(app)
    setup_lifecycle_routes(app)
    setup_ui(app)
    app.router.add_route("*", "/v1/{tail:.*}", passthrough.forward)  # last: every other /v1/ path


def _observability(settings: Settings, stream: Any) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        app[appkeys.LOGGER] = make_logger(settings.server.log_level, settings.server.log_format, stream)
        cache_budget.apply(settings.server.cache_mib)
        app[appkeys.METRICS] = Metrics(store_size=lambda: float(_store_size(app)), caches=cache_budget.fill)
        app[appkeys.WINDOWS] = WindowResolver(settings)
        app[appkeys.RESENT_BODIES] = ResentBodies(name="resent_bodies")
        app[appkeys.RESENT_INPUTS] = ResentBodies(array="input", name="resent_inputs")
        app[appkeys.TRANSLATIONS] = Translations(name="anthropic_translations")
        app[appkeys.RESPONSES_TRANSLATIONS] = ResponsesTranslations(name="responses_translations")
        app[appkeys.STORE_HEALTH] = StoreHealth()
        yield

    return ctx


def _store_size(app: web.Application) -> int:
    store = app.get(appkeys.STORE)
    return store.size_bytes() if store is not None else 0


async def _store(app: web.Application) -> AsyncIterator[None]:
    """The store and the engine threads it is used on (proxy/engine_pool.py), with its upkeep tasks."""
    settings = app[appkeys.SETTINGS].store
    host = EnginePool(app[appkeys.SETTINGS].server.engine_threads)
    host.start()
    try:
        store = await host.run(lambda: open_store(settings, autocheckpoint=False))
    except BaseException:
        await host.stop()
        raise
    app[appkeys.HOST], app[appkeys.STORE] = host, store
    logger = app[appkeys.LOGGER]
    tasks = [asyncio.create_task(upkeep.checkpoint_periodically(store, settings, logger)),
             asyncio.create_task(upkeep.index_periodically(host.hosts, store, logger))]
    if settings.retention_days is not None:
        await upkeep.sweep_retention(host, store, settings.retention_days, logger)
        tasks.append(asyncio.create_task(upkeep.retain_periodically(host, store, settings.retention_days,
                                                                    logger)))
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await asyncio.to_thread(store.checkpoint, "TRUNCATE")
        await host.run(store.close)
        await host.stop()


def client_session(settings: Settings) -> aiohttp.ClientSession:
    """The one upstream session: pooled keep-alive connections, no total timeout (streams)."""
    server = settings.server
    timeout = aiohttp.ClientTimeout(total=None, connect=server.upstream_connect_timeout_s,
                                    sock_connect=server.upstream_connect_timeout_s,
                                    sock_read=server.upstream_timeout_s)
    connector = aiohttp.TCPConnector(limit=CONNECTOR_LIMIT, limit_per_host=0,
                                     keepalive_timeout=KEEPALIVE_S, ttl_dns_cache=300)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False,
                                 auto_decompress=True)


async def _session(app: web.Application) -> AsyncIterator[None]:
    session = client_session(app[appkeys.SETTINGS])
    app[appkeys.SESSION] = session
    app[appkeys.UPSTREAMS] = UpstreamRouter(OpenAIUpstream(session), LiteLLMUpstream())
    try:
        yield
    finally:
        await session.close()


def _engine(factory: EngineFactory) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        host = app[appkeys.HOST]
        app[appkeys.ENGINE] = await host.start_engine(lambda: factory(
            app[appkeys.STORE], app[appkeys.SETTINGS], app[appkeys.METRICS], app[appkeys.LOGGER]))
        try:
            yield
        finally:
            await host.stop_engine()

    return ctx
