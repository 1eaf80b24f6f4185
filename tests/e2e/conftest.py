"""The e2e rig: real proxy + engine, fake model upstream, fake summarizer upstream, openai SDK client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import openai
import pytest
from structlog.typing import FilteringBoundLogger

from config.settings import Settings
from proxy.app import default_engine
from proxy.observability.metrics import Metrics
from store.interface import StoreBackend
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.e2e.harness import RecordingEngine, settings_for, summarizer_responder
from tests.fakes.upstream import FakeUpstream


@dataclass
class Rig:
    client: openai.AsyncOpenAI
    model: FakeUpstream  # records every forwarded request
    summarizer: FakeUpstream  # records every summarizer call
    engine: RecordingEngine


RigFactory = Callable[..., Awaitable[Rig]]


@pytest.fixture
async def summarizer_upstream() -> AsyncIterator[FakeUpstream]:
    fake = await FakeUpstream().start()
    try:
        yield fake
    finally:
        await fake.close()


@pytest.fixture
async def rig(make_proxy: ProxyFactory, fake_upstream: FakeUpstream, summarizer_upstream: FakeUpstream,
              tmp_path: Path) -> AsyncIterator[RigFactory]:
    """`await rig(behaviour, delay_s=0.0, window=12_000, deadline_s=None)`: a started proxy and its
    SDK client."""
    clients: list[openai.AsyncOpenAI] = []

    async def start(behaviour: str = "faithful", *, delay_s: float = 0.0, window: int = 12_000,
                    deadline_s: float | None = None) -> Rig:
        summarizer_upstream.responder = summarizer_responder(behaviour, delay_s)
        holder: list[RecordingEngine] = []

        def engine_factory(store: StoreBackend, settings: Settings, metrics: Metrics,
                           logger: FilteringBoundLogger) -> RecordingEngine:
            holder.append(RecordingEngine(default_engine(store, settings, metrics, logger)))
            return holder[0]

        settings = settings_for(fake_upstream.url, summarizer_upstream.url, tmp_path / "e2e.db", window)
        if deadline_s is not None:  # compaction.sync_deadline_s, globally and for the model entry
            compaction = replace(settings.compaction, sync_deadline_s=deadline_s)
            settings = replace(settings, compaction=compaction, model_list=tuple(
                replace(m, compaction=compaction) for m in settings.model_list))
        server = await make_proxy(settings, engine_factory=engine_factory)
        client = openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY,
                                    max_retries=0, timeout=120.0)
        clients.append(client)
        return Rig(client, fake_upstream, summarizer_upstream, holder[0])

    yield start
    for client in clients:
        await client.close()
