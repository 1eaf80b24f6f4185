"""Start-up warm-up off the loop: /readyz waits for it, chat requests wait for it, lag is measured."""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from compaction import llm, tokens
from config.settings import Settings
from proxy.server import warmup
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


async def get(server: TestServer, path: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(server.make_url(path)) as resp:
        return resp.status, await resp.json()


async def test_readyz_and_chat_wait_for_the_warmup(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    gate, threads = threading.Event(), []

    def slow_load(_settings: Settings) -> None:
        threads.append(threading.current_thread())
        gate.wait(timeout=30)

    monkeypatch.setattr(warmup, "load_heavy", slow_load)
    server = await make_proxy()
    status, body = await get(server, "/readyz")
    assert status == 503 and body["error"]["code"] == "warming_up"
    assert (await get(server, "/healthz"))[0] == 200  # liveness never waits
    async with aiohttp.ClientSession() as http:
        chat = asyncio.create_task(http.post(server.make_url("/v1/chat/completions"), json=CHAT,
                                             headers={"Authorization": f"Bearer {TEST_API_KEY}"}))
        await asyncio.sleep(0.1)
        assert not chat.done() and fake_upstream.requests == []
        gate.set()
        async with await chat as resp:
            assert resp.status == 200
    assert threads and threads[0] is not threading.main_thread()
    assert (await get(server, "/readyz"))[0] == 200


async def test_a_failed_warmup_still_becomes_ready(make_proxy: ProxyFactory,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(_settings: Settings) -> None:
        raise OSError("no tokenizer file")

    monkeypatch.setattr(warmup, "load_heavy", broken)
    server = await make_proxy()
    app_warmup = server.app[warmup.WARMUP]
    await asyncio.wait_for(app_warmup.done.wait(), timeout=30)
    assert app_warmup.error == "OSError"
    assert (await get(server, "/readyz"))[0] == 200


async def test_loop_lag_is_exported(make_proxy: ProxyFactory) -> None:
    server = await make_proxy()
    count = 0.0
    for _ in range(200):  # the watcher reports every 50 ms
        async with aiohttp.ClientSession() as http, http.get(server.make_url("/metrics")) as resp:
            lines = (await resp.text()).splitlines()
        count = next(float(line.split()[-1]) for line in lines
                     if line.startswith("ctxproxy_event_loop_lag_seconds_count"))
        if count > 0:
            break
        await asyncio.sleep(0.05)
    assert count > 0


def test_tokenizer_models_cover_names_and_upstreams() -> None:
    from tests.conftest import proxy_settings_for

    names = warmup.tokenizer_models(proxy_settings_for("http://127.0.0.1:9/v1", Path("x.db")))
    assert {"gpt-4o-mini", "openai/gpt-4o-mini", "openai/gpt-4o", "fake-*"} <= set(names)


async def test_first_litellm_use_from_the_loop_runs_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[threading.Thread] = []

    @functools.lru_cache(maxsize=1)
    def fake_get_litellm() -> str:
        seen.append(threading.current_thread())
        return "litellm"

    monkeypatch.setattr(llm, "get_litellm", fake_get_litellm)
    assert not llm.litellm_loaded()
    assert await llm.get_litellm_async() == "litellm"
    assert seen[0] is not threading.main_thread() and llm.litellm_loaded()
    assert await llm.get_litellm_async() == "litellm" and len(seen) == 1  # then straight from the cache


async def test_first_tokenizer_load_from_the_loop_runs_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[threading.Thread] = []

    def fake_encoder(name: str) -> Any:
        seen.append(threading.current_thread())
        return len

    tokens._counter_for_encoding.cache_clear()
    monkeypatch.setattr(tokens, "_loaded", set())
    monkeypatch.setattr(tokens, "_load_encoder", fake_encoder)
    try:
        counter = await tokens.TokenCounter.for_model_async("gpt-4o-mini")
        assert counter.count_text("abcd") == 4 and seen[0] is not threading.main_thread()
        await tokens.TokenCounter.for_model_async("gpt-4o-mini")
        assert len(seen) == 1
    finally:
        tokens._counter_for_encoding.cache_clear()  # later tests load the real tokenizers again


async def test_a_served_app_freezes_what_the_warmup_left_alive() -> None:
    """Start-up objects leave the cyclic collector's full passes, and only once the warm-up is done."""
    app = web.Application()
    app[warmup.WARMUP] = warmup.Warmup()
    freezing = asyncio.create_task(warmup.freeze_after_warmup(app))
    gc.unfreeze()
    try:
        await asyncio.sleep(0)
        assert not freezing.done() and gc.get_freeze_count() == 0  # still warming up: nothing frozen
        app[warmup.WARMUP].done.set()
        await freezing
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
