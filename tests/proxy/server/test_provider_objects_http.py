"""Through an operator-keyed entry, a tenant's files, responses and batches are invisible to another."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer

from config.settings import LiteLLMParams, ModelEntry, Settings, StoreSettings
from tests.conftest import ProxyFactory
from tests.fakes.provider_objects import ProviderObjects

OPERATOR_KEY = "sk-operator-0123456789abcdef"
KEY_A, KEY_B = "sk-tenant-a-0123456789abcdef", "sk-tenant-b-0123456789abcdef"


@pytest.fixture
async def provider() -> AsyncIterator[ProviderObjects]:
    fake = await ProviderObjects().start()
    try:
        yield fake
    finally:
        await fake.close()


@pytest.fixture
async def proxy(make_proxy: ProxyFactory, provider: ProviderObjects, tmp_path: Path) -> TestServer:
    settings = Settings(model_list=(
        ModelEntry("keyed", LiteLLMParams("openai/gpt-4o", provider.url, OPERATOR_KEY), 128_000),
        ModelEntry("own", LiteLLMParams("openai/gpt-4o", provider.url), 128_000)),
        store=StoreSettings(path=str(tmp_path / "store.db")))
    return await make_proxy(settings)


@pytest.fixture
async def clients(proxy: TestServer) -> AsyncIterator[tuple[openai.AsyncOpenAI, openai.AsyncOpenAI]]:
    base = str(proxy.make_url("/v1"))
    a = openai.AsyncOpenAI(base_url=base, api_key=KEY_A, max_retries=0)
    b = openai.AsyncOpenAI(base_url=base, api_key=KEY_B, max_retries=0)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


def unknown(kind: str, object_id: str, param: str | None = None) -> dict[str, Any]:
    """The provider's answer to an id it does not know (the openai SDK's `body`)."""
    return {"message": f"No {kind} found with id '{object_id}'.", "type": "invalid_request_error",
            "param": param, "code": None}


async def _upload(client: openai.AsyncOpenAI) -> str:
    return (await client.files.create(file=("a.jsonl", io.BytesIO(b"{}\n")), purpose="batch")).id


async def test_another_tenants_file_is_unknown_and_unlisted(
        clients: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI], provider: ProviderObjects) -> None:
    a, b = clients
    mine, theirs = await _upload(a), await _upload(b)
    for call in (b.files.retrieve, b.files.delete):
        with pytest.raises(openai.NotFoundError) as caught:
            await call(mine)
        assert caught.value.body == unknown("file", mine)
    assert [f.id for f in (await b.files.list()).data] == [theirs]
    assert [f.id for f in (await a.files.list()).data] == [mine]
    assert (await a.files.retrieve(mine)).id == mine
    assert (await a.files.delete(mine)).deleted is True
    assert mine not in provider.objects and theirs in provider.objects


async def test_another_tenants_response_cannot_be_read_or_continued(
        clients: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI], provider: ProviderObjects) -> None:
    a, b = clients
    first = await a.responses.create(model="keyed", input="remember 42")
    with pytest.raises(openai.NotFoundError) as caught:
        await b.responses.retrieve(first.id)
    assert caught.value.body == unknown("response", first.id)
    for stream in (False, True):
        with pytest.raises(openai.NotFoundError) as caught:
            await b.responses.create(model="keyed", input="what number?", previous_response_id=first.id,
                                     stream=stream)
        assert caught.value.body == unknown("response", first.id, "previous_response_id")
    chained = await a.responses.create(model="keyed", input="what number?", previous_response_id=first.id)
    assert (await a.responses.retrieve(chained.id)).id == chained.id  # the chained one is A's too
    assert sum(p.endswith("/responses") for p in provider.paths) == 2  # B's never went out
    own = await a.responses.create(model="own", input="hi")  # the client's own key: the provider decides
    assert (await b.responses.create(model="own", input="again", previous_response_id=own.id)).id != own.id


async def test_batches_need_the_tenants_own_input_file(
        clients: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI]) -> None:
    a, b = clients
    file_id = await _upload(a)
    batch = await a.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                   completion_window="24h")
    with pytest.raises(openai.NotFoundError) as caught:
        await b.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                               completion_window="24h")
    assert caught.value.body == unknown("file", file_id, "input_file_id")
    with pytest.raises(openai.NotFoundError):
        await b.batches.retrieve(batch.id)
    assert (await a.batches.retrieve(batch.id)).id == batch.id


async def test_chat_and_messages_referring_to_another_tenants_file_are_refused(
        clients: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI], provider: ProviderObjects,
        proxy: TestServer) -> None:
    a, b = clients
    file_id = await _upload(a)
    before = len(provider.paths)
    with pytest.raises(openai.NotFoundError) as caught:
        await b.chat.completions.create(model="keyed", messages=[{"role": "user", "content": [
            {"type": "file", "file": {"file_id": file_id}}]}])
    assert caught.value.body == unknown("file", file_id, "file_id")
    async with aiohttp.ClientSession() as http, http.post(proxy.make_url("/v1/messages"), json={
            "model": "keyed", "max_tokens": 5, "messages": [{"role": "user", "content": [
                {"type": "document", "source": {"type": "file", "file_id": file_id}}]}]},
            headers={"x-api-key": KEY_B}) as resp:
        assert resp.status == 404
        assert await resp.json() == {"type": "error", "error": {
            "type": "not_found_error", "message": f"No file found with id '{file_id}'."}}
    assert len(provider.paths) == before


@pytest.mark.parametrize("chained", [False, True])
async def test_a_streamed_response_is_the_tenants_own(
        clients: tuple[openai.AsyncOpenAI, openai.AsyncOpenAI], chained: bool) -> None:
    a, b = clients
    previous = (await a.responses.create(model="keyed", input="hi")).id if chained else None
    events = [e async for e in await a.responses.create(model="keyed", input="more", stream=True,
                                                        previous_response_id=previous)]
    completed = events[-1]
    assert completed.type == "response.completed"
    streamed = completed.response.id
    with pytest.raises(openai.NotFoundError):
        await b.responses.retrieve(streamed)
    assert (await a.responses.retrieve(streamed)).id == streamed
