"""EngineHost: the engine and the store on their own thread (proxy/engine_host.py)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from config.errors import InvalidRequestError
from proxy import appkeys
from proxy.engine_host import EngineHost
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@pytest.fixture
async def host() -> AsyncIterator[EngineHost]:
    started = EngineHost()
    started.start()
    try:
        yield started
    finally:
        await started.stop()


async def test_work_runs_on_the_engine_thread_not_the_callers(host: EngineHost) -> None:
    assert await host.run(lambda: threading.current_thread().name) == "ctxproxy-engine"
    assert threading.current_thread().name != "ctxproxy-engine"


async def test_errors_reach_the_caller_unchanged(host: EngineHost) -> None:
    def refuse() -> None:
        raise InvalidRequestError("bad", param="messages")

    with pytest.raises(InvalidRequestError) as caught:
        await host.run(refuse)
    assert caught.value.param == "messages"


async def test_the_callers_context_variables_come_along(host: EngineHost) -> None:
    REQUEST_ID.set("req-7")
    assert await host.run(REQUEST_ID.get) == "req-7"


async def test_a_cancelled_caller_cancels_the_work_on_the_engine_loop(host: EngineHost) -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    caller = asyncio.create_task(host.call(slow))
    await asyncio.to_thread(started.wait, 5)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert await asyncio.to_thread(cancelled.wait, 5)


async def test_a_server_uses_the_store_only_from_its_engine_threads(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream, app_store_url: str | None) -> None:
    if app_store_url is not None:
        pytest.skip("traces the SQLite connection")
    server = await make_proxy()
    threads: set[str] = set()
    store: Any = server.app[appkeys.STORE]
    store.conn.set_trace_callback(lambda _sql: threads.add(threading.current_thread().name))
    client = openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0)
    await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    async with client.chat.completions.with_streaming_response.create(
            model="gpt-4o-mini", stream=True,
            messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                      {"role": "user", "content": "again"}]) as stream:
        await stream.read()
    found = await client.post("/context/search", body={"pattern": "again"}, cast_to=object)
    await client.close()
    assert found and threads and all(t.startswith("ctxproxy-engine-") for t in threads)
