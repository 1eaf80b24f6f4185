"""One decision per request: retrieval hints are forwarded only when the recall tools are offered.

Real app and engine over a compacted conversation (tests/proxy/recall/test_end_to_end.py's setup). When the
proxy does not offer its tools (recall disabled, `n > 1`, a client tool already named
context_search), no forwarded message may tell the model to call them, nor carry the summary's
"Expand for details about:" line; when it offers them, both the tools and the hints are there.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compaction import recall
from compaction.summarize.prompts import EXPAND_LINE_PREFIX
from config.settings import RecallSettings
from proxy import appkeys
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.upstream import FakeUpstream, Reply
from tests.proxy.recall.test_end_to_end import (
    CLIENT_TOOL,
    EXPAND,
    SEARCH,
    client,
    long_history,
    settings,
    tool_names,
)

JSON = dict[str, Any]
CLIENT_SEARCH: JSON = {"type": "function", "function": {
    "name": SEARCH, "description": "The client's own search.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
HINT = "to see the original messages"  # the rendered summary's call-the-tool line

CASES: dict[str, tuple[bool, JSON, list[JSON]]] = {  # recall enabled, extra body fields, client tools
    "recall_disabled": (False, {}, [CLIENT_TOOL]),
    "n_2": (True, {"n": 2}, [CLIENT_TOOL]),
    "client_tool_named_context_search": (True, {}, [CLIENT_TOOL, CLIENT_SEARCH]),
}


async def forwarded(make_proxy: ProxyFactory, fake: FakeUpstream, tmp_path: Path, recall_enabled: bool,
                    extra: JSON, tools: list[JSON]) -> tuple[list[JSON], Any]:
    """The bodies the upstream got for one compacted turn, and the running proxy."""
    fake.responder = lambda body: Reply(text="ok")
    server = await make_proxy(settings(fake.url, tmp_path, recall_enabled))
    request: JSON = {"model": "gpt-4o-mini", "messages": long_history(), "tools": tools, **extra}
    await client(server).chat.completions.create(**request)
    return [r.body for r in fake.requests], server


def summaries_in(body: JSON) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if "<ctxproxy:summary" in str(m.get("content"))]


@pytest.mark.parametrize("case", list(CASES))
async def test_no_tools_no_hints(make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path,
                                 case: str) -> None:
    enabled, extra, tools = CASES[case]
    bodies, _ = await forwarded(make_proxy, fake_upstream, tmp_path, enabled, extra, tools)
    assert len(bodies) == 1  # no recall round
    body = bodies[0]
    assert summaries_in(body), "the conversation was meant to be compacted"
    assert tool_names(body) == [t["function"]["name"] for t in tools]  # only the client's own
    if SEARCH not in tool_names(body):
        assert SEARCH not in json.dumps(body)
    messages = json.dumps(body["messages"])
    assert EXPAND not in messages and HINT not in messages and EXPAND_LINE_PREFIX not in messages


async def test_offered_tools_come_with_hints(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                             tmp_path: Path) -> None:
    bodies, server = await forwarded(make_proxy, fake_upstream, tmp_path, True, {}, [CLIENT_TOOL])
    body = bodies[0]
    assert tool_names(body) == ["get_weather", SEARCH, EXPAND]
    rendered = summaries_in(body)
    assert rendered and all(HINT in s and EXPAND in s and EXPAND_LINE_PREFIX in s for s in rendered)


async def test_stored_summary_keeps_its_expand_line(make_proxy: ProxyFactory, fake_upstream: FakeUpstream,
                                                    tmp_path: Path) -> None:
    """Stripping happens at render time only: the inspector still shows the structured summary."""
    _, server = await forwarded(make_proxy, fake_upstream, tmp_path, False, {}, [CLIENT_TOOL])
    await settled(server)
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))
    [conversation] = tenant.list_conversations()
    stored = tenant.summaries(conversation.id)
    assert stored and all(EXPAND_LINE_PREFIX in s.content for s in stored)


@pytest.mark.parametrize(("overrides", "n", "tools", "expected"), [
    ({}, None, [], True),
    ({}, 1, [CLIENT_TOOL], True),
    ({"enabled": False}, None, [], False),
    ({"max_rounds": 0}, None, [], False),
    ({}, 2, [], False),
    ({}, None, [CLIENT_TOOL, CLIENT_SEARCH], False),
    ({"search_tool_name": "history_search"}, None, [CLIENT_SEARCH], True),
])
def test_offered_for_request(overrides: JSON, n: Any, tools: list[JSON], expected: bool) -> None:
    recall_settings = replace(RecallSettings(), **overrides)
    assert recall.offered_for_request(recall_settings, n=n, client_tools=tools) is expected
