"""The fast path's headers and credential errors, through the openai SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam

from tests.conftest import TEST_API_KEY
from tests.fakes.upstream import ErrorReply, FakeUpstream, Reply

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "x"}]
OPERATOR_KEY_ERROR = {"error": {"message": "Incorrect API key provided: sk-upstr*****6789.",
                                "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}


@pytest.fixture
async def account_client(proxy_url: str) -> AsyncIterator[AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key=TEST_API_KEY, max_retries=0,
                                  organization="org-client", project="proj_client",
                                  default_headers={"OpenAI-Beta": "assistants=v2"}) as client:
        yield client


def account_headers(fake: FakeUpstream) -> dict[str, str]:
    sent = {k.lower(): v for k, v in fake.requests[-1].headers.items()}
    return {k: sent[k] for k in ("openai-organization", "openai-project", "openai-beta") if k in sent}


async def test_account_headers_go_along_with_the_clients_own_key(account_client: AsyncOpenAI,
                                                                 fake_upstream: FakeUpstream) -> None:
    await account_client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert account_headers(fake_upstream) == {"openai-organization": "org-client",
                                              "openai-project": "proj_client",
                                              "openai-beta": "assistants=v2"}


async def test_account_headers_never_go_with_the_operators_key(account_client: AsyncOpenAI,
                                                               fake_upstream: FakeUpstream) -> None:
    await account_client.chat.completions.create(model="keyed-model", messages=USER)
    assert fake_upstream.requests[-1].headers["Authorization"] == "Bearer sk-upstream-configured-0123456789"
    assert account_headers(fake_upstream) == {}


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_rejecting_the_operators_key_is_a_502(openai_client: AsyncOpenAI,
                                                             fake_upstream: FakeUpstream,
                                                            status: int, stream: bool) -> None:
    fake_upstream.queue(ErrorReply(status, OPERATOR_KEY_ERROR))
    with pytest.raises(openai.APIStatusError) as caught:
        await openai_client.chat.completions.create(model="keyed-model", messages=USER, stream=stream)
    assert caught.value.status_code == 502
    assert "sk-upstr" not in str(caught.value.body) and "configured credentials" in caught.value.message


async def test_upstream_rejecting_the_clients_own_key_passes_through(openai_client: AsyncOpenAI,
                                                                     fake_upstream: FakeUpstream) -> None:
    fake_upstream.queue(ErrorReply(401, OPERATOR_KEY_ERROR), Reply())
    with pytest.raises(openai.AuthenticationError) as caught:
        await openai_client.chat.completions.create(model="gpt-4o-mini", messages=USER)
    assert caught.value.code == "invalid_api_key"
