"""Full-history resends through the proxy store each conversation exactly once (real engine)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from openai import AsyncOpenAI

from proxy import appkeys
from tests.conftest import TEST_API_KEY, settled
from tests.fakes.upstream import FakeUpstream, Reply

SYSTEM = {"role": "system", "content": "You are a careful assistant."}


def stored(server: TestServer) -> tuple[list[Any], Any]:
    """The caller's conversations and the first one's messages, read through the app's own store
    (SQLite or PostgreSQL, whichever the app runs on)."""
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    conversations = tenant.list_conversations(limit=50)
    messages = tenant.messages(conversations[0].id) if conversations else []
    return conversations, messages


@pytest.mark.parametrize("with_header", [False, True])
async def test_ten_turns_of_full_resends_store_once(openai_client: AsyncOpenAI, fake_upstream: FakeUpstream,
                                                    proxy_server: TestServer, with_header: bool) -> None:
    history: list[Any] = [SYSTEM]
    headers = {"X-Conversation-Id": "conv-42"} if with_header else {}
    conversation_ids = set()
    for turn in range(10):
        fake_upstream.queue(Reply(text=f"answer {turn}"))
        history.append({"role": "user", "content": f"question {turn}"})
        raw = await openai_client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=history, extra_headers=headers)
        conversation_ids.add(raw.headers["X-Ctxproxy-Conversation-Id"])
        # SDK noise: the returned message object, resent as a dict (refusal None, annotations [] ...)
        history.append(raw.parse().choices[0].message.model_dump())
    await settled(proxy_server)
    conversations, messages = stored(proxy_server)
    assert len(conversations) == 1 and conversation_ids == {conversations[0].id}
    assert len(messages) == 21
    assert [m.message.get("content") for m in messages[-2:]] == ["question 9", "answer 9"]
    assert len(fake_upstream.requests) == 10
    assert fake_upstream.requests[-1].body["messages"][-1] == {"role": "user", "content": "question 9"}
