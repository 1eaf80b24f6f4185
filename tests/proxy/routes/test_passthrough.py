"""Every other /v1/ API reaches the upstream unchanged (openai SDK), and routing errors are precise."""

from __future__ import annotations

import io
import json

import aiohttp
import openai
import pytest
from openai import AsyncOpenAI

from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import ErrorReply, FakeUpstream

RATE_LIMITED = {"error": {"message": "Rate limit reached", "type": "requests", "param": None,
                          "code": "rate_limit_exceeded"}}
LIMIT_HEADERS = {"Retry-After": "7", "x-ratelimit-remaining-requests": "0", "x-request-id": "req_429"}


async def test_embeddings_reach_the_upstream_unchanged(openai_client: AsyncOpenAI,
                                                       fake_upstream: FakeUpstream) -> None:
    result = await openai_client.embeddings.create(model="fake-embed", input=["alpha", "beta"],
                                                   encoding_format="float")
    assert [d.embedding for d in result.data] == [[0.5, -0.25, 0.0], [0.5, -0.25, 1.0]]
    sent = fake_upstream.requests[-1]
    assert (sent.path, sent.method) == ("/v1/embeddings", "POST")
    assert sent.body == {"model": "fake-embed", "input": ["alpha", "beta"], "encoding_format": "float"}
    assert sent.headers["Authorization"] == f"Bearer {TEST_API_KEY}"


async def test_an_alias_is_renamed_and_keyed_with_the_entrys_key(openai_client: AsyncOpenAI,
                                                                 fake_upstream: FakeUpstream) -> None:
    await openai_client.embeddings.create(model="keyed-model", input="x")
    sent = fake_upstream.requests[-1]
    assert sent.body["model"] == "gpt-4o"
    assert sent.headers["Authorization"] == "Bearer sk-upstream-configured-0123456789"


async def test_completions_and_moderations(openai_client: AsyncOpenAI, fake_upstream: FakeUpstream) -> None:
    completion = await openai_client.completions.create(model="gpt-4o-mini", prompt="def f(", max_tokens=5)
    assert completion.choices[0].text == "<def f(>"
    assert fake_upstream.requests[-1].body == {"model": "gpt-4o-mini", "prompt": "def f(", "max_tokens": 5}
    moderation = await openai_client.moderations.create(model="fake-moderation", input="hello")
    assert moderation.results[0].flagged is False
    assert fake_upstream.requests[-1].path == "/v1/moderations"


async def test_raw_bytes_and_headers_pass_both_ways(proxy_url: str, fake_upstream: FakeUpstream) -> None:
    raw = b'{"model":"fake-x",  "input":"spaces kept",\n "extra":[1,2]}'
    async with aiohttp.ClientSession() as http, http.post(
            proxy_url + "/v1/embeddings?api-version=2", data=raw,
            headers={"Content-Type": "application/json", "User-Agent": "my-agent/1.2",
                     "OpenAI-Beta": "assistants=v2", "anthropic-beta": "tools-2024",
                     "Authorization": f"Bearer {TEST_API_KEY}", "X-Conversation-Id": "c1"}) as resp:
        assert resp.status == 200
        assert resp.headers["x-request-id"] == "req_fake_other"
        assert resp.headers["x-ratelimit-remaining-requests"] == "99"
    sent = fake_upstream.requests[-1]
    assert sent.raw == raw
    headers = {k.lower(): v for k, v in sent.headers.items()}
    assert (headers["user-agent"], headers["openai-beta"], headers["anthropic-beta"]) == (
        "my-agent/1.2", "assistants=v2", "tools-2024")
    assert "x-conversation-id" not in headers


async def test_a_streamed_upload_arrives_whole(openai_client: AsyncOpenAI,
                                               fake_upstream: FakeUpstream) -> None:
    content = bytes(range(256)) * 4096  # 1 MiB, not JSON: streamed, never parsed
    await openai_client.files.create(file=("data.jsonl", io.BytesIO(content)), purpose="batch")
    sent = fake_upstream.requests[-1]
    assert sent.path == "/v1/files" and content in sent.raw
    assert sent.headers["Content-Type"].startswith("multipart/form-data")


async def test_models_retrieve_and_list(openai_client: AsyncOpenAI, fake_upstream: FakeUpstream) -> None:
    fake_upstream.models = ["fake-large", "other-model", "gpt-4o-mini"]
    assert (await openai_client.models.retrieve("gpt-4o-mini")).id == "gpt-4o-mini"  # configured: local
    before = len(fake_upstream.requests)
    assert (await openai_client.models.retrieve("fake-large")).owned_by == "fake"  # wildcard: upstream
    assert fake_upstream.requests[before].path == "/v1/models/fake-large"
    listed = [m.id for m in (await openai_client.models.list()).data]
    assert listed == ["gpt-4o-mini", "keyed-model", "fake-large"]  # the wildcard matches fake-*
    with pytest.raises(openai.NotFoundError) as caught:
        await openai_client.models.retrieve("nope")
    assert caught.value.code == "model_not_found"


@pytest.mark.parametrize("stream", [False, True])
async def test_rate_limit_headers_reach_the_client_on_errors(openai_client: AsyncOpenAI,
                                                             fake_upstream: FakeUpstream,
                                                             stream: bool) -> None:
    fake_upstream.queue(ErrorReply(429, RATE_LIMITED, headers=LIMIT_HEADERS))
    with pytest.raises(openai.RateLimitError) as caught:
        await openai_client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}], stream=stream)
    headers = caught.value.response.headers
    assert (headers["retry-after"], headers["x-ratelimit-remaining-requests"]) == ("7", "0")
    assert caught.value.request_id == "req_429"


async def test_passthrough_errors_keep_status_body_and_headers(openai_client: AsyncOpenAI,
                                                                fake_upstream: FakeUpstream) -> None:
    fake_upstream.queue(ErrorReply(429, RATE_LIMITED, headers=LIMIT_HEADERS))
    with pytest.raises(openai.RateLimitError) as caught:
        await openai_client.embeddings.create(model="fake-embed", input="x")
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body == RATE_LIMITED["error"]


async def test_chat_forwards_the_clients_user_agent(openai_client: AsyncOpenAI,
                                                   fake_upstream: FakeUpstream) -> None:
    await openai_client.chat.completions.create(
        model="keyed-model", messages=[{"role": "user", "content": "x"}],
        extra_headers={"User-Agent": "codex/0.9"})
    assert fake_upstream.requests[-1].headers["User-Agent"] == "codex/0.9"


async def test_unroutable_paths_and_wrong_methods(proxy_url: str) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(proxy_url + "/v2/anything") as resp:
            body = await resp.json()
            assert resp.status == 404 and "/v2/anything" in body["error"]["message"]
            assert "/v1/responses" in body["error"]["message"]
        async with http.get(proxy_url + "/v1/chat/completions") as resp:
            assert resp.status == 405 and resp.headers["Allow"] == "POST"
            assert (await resp.json())["error"]["code"] == "method_not_allowed"
        async with http.post(proxy_url + "/healthz") as resp:
            assert resp.status == 405
        async with http.post(proxy_url + "/v1/embeddings", json={"model": "unknown", "input": "x"}) as resp:
            assert resp.status == 404 and (await resp.json())["error"]["code"] == "model_not_found"


async def test_a_request_line_is_logged_for_forwarded_paths(make_proxy: ProxyFactory,
                                                            fake_upstream: FakeUpstream) -> None:
    logs = io.StringIO()
    server = await make_proxy(log_stream=logs)
    async with aiohttp.ClientSession() as http, http.post(
            server.make_url("/v1/embeddings"), json={"model": "fake-e", "input": "x"},
            headers={"Authorization": f"Bearer {TEST_API_KEY}"}) as resp:
        assert resp.status == 200
    (line,) = [json.loads(x) for x in logs.getvalue().splitlines() if '"event": "request"' in x]
    assert (line["path"], line["model"], line["upstream_status"]) == ("/v1/embeddings", "fake-e", 200)
    assert TEST_API_KEY not in logs.getvalue()


async def test_deleting_a_fine_tuned_model_is_forwarded(openai_client: AsyncOpenAI,
                                                        fake_upstream: FakeUpstream) -> None:
    await openai_client.models.delete("fake-ft-123")
    sent = fake_upstream.requests[-1]
    assert (sent.method, sent.path) == ("DELETE", "/v1/models/fake-ft-123")
