"""An imported history (an agent resuming a session sends all of it at once) converges in one request.

The oldest part collapses into one truncation-level summary (compaction/steps/collapse.py), the
newest half budget is summarized as usual, the view is saved, and the next turns only append: no
step, no forced truncation. Nothing is lost: every message is stored, the summary's sources
expand back to the originals, and the import is searchable once the upkeep task has indexed it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp.test_utils import TestServer

from compaction.steps import collapse
from compaction.steps.collapse import collapse_run
from compaction.view.entry import Entry
from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    RecallSettings,
    Settings,
    StoreSettings,
    SummarizerSettings,
)
from proxy import appkeys
from store.models import SummaryRecord
from tests.conftest import TEST_API_KEY, ProxyFactory, settled
from tests.fakes.upstream import FakeUpstream

JSON = dict[str, Any]
WINDOW = 8_192


def settings(upstream_url: str, tmp_path: Path) -> Settings:
    compaction = CompactionSettings(background=False)
    model = ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", upstream_url), WINDOW, compaction)
    return Settings(model_list=(model,), compaction=compaction, store=StoreSettings(str(tmp_path / "s.db")),
                    summarizer=SummarizerSettings(model="local/extractive"), recall=RecallSettings())


def imported(exchanges: int) -> list[JSON]:
    """A long history with a fact in its first exchange (about fifteen windows of tokens)."""
    messages: list[JSON] = [{"role": "system", "content": "You are an operations assistant."},
                            {"role": "user", "content": "Track ticket TCK-40417 for the Halvorsen account."},
                            {"role": "assistant", "content": "Noted: TCK-40417, Halvorsen."}]
    for i in range(exchanges):
        messages.append({"role": "user", "content": f"Status of job J-{i:05d} on host h{i % 37}? "
                                                    + "Please include the details. " * 8})
        messages.append({"role": "assistant", "content": f"Job J-{i:05d} finished with code {i % 5}. "
                                                         + "The log shows nothing unusual. " * 8})
    messages.append({"role": "user", "content": "Summarise what failed."})
    return messages


async def turn(server: TestServer, client: openai.AsyncOpenAI, messages: list[JSON]) -> tuple[str, str]:
    """The conversation the turn went to (the tenant's only one) and the reply's text."""
    reply = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
    await settled(server)
    (conversation,) = tenant(server).list_conversations()
    return conversation.id, reply.choices[0].message.content or ""


def tenant(server: TestServer) -> Any:
    store = server.app[appkeys.STORE]
    return store.for_tenant(store.tenant_id_for_key(TEST_API_KEY))


def summaries(server: TestServer, cid: str) -> list[SummaryRecord]:
    return list(tenant(server).summaries(cid))


@pytest.fixture
async def server(make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path) -> TestServer:
    return await make_proxy(settings(fake_upstream.url, tmp_path))


@pytest.fixture
async def client(server: TestServer) -> Any:
    sdk = openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key=TEST_API_KEY, max_retries=0)
    yield sdk
    await sdk.close()


async def test_an_imported_history_collapses_once_and_the_next_turns_only_append(
        server: TestServer, client: openai.AsyncOpenAI, fake_upstream: FakeUpstream) -> None:
    messages = imported(1_000)
    cid, reply = await turn(server, client, messages)
    first = fake_upstream.last_body["messages"]
    collapsed = [s for s in summaries(server, cid) if s.level == "truncation"]
    assert len(collapsed) == 1 and collapsed[0].model == "local/truncation"
    assert "omitted" in collapsed[0].content  # the pointer line naming what it leaves out
    assert len(collapsed[0].source_message_ids) > 1_500  # most of the history, in one summary
    assert any("<ctxproxy:summary" in str(m["content"]) for m in first)
    assert first[-1] == messages[-1] and first[0] == messages[0]

    count = len(summaries(server, cid))
    for question in ("Why did J-00003 fail?", "What should we retry first?"):
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": question}]
        again, reply = await turn(server, client, messages)
        sent = fake_upstream.last_body["messages"]
        assert again == cid and sent[:len(first) - 1] == first[:-1]  # appended: the cache prefix holds
        first = sent
    assert len(summaries(server, cid)) == count  # no further step

    assert len(tenant(server).messages(cid)) == len(messages) + 1  # every message stored, the reply too
    expanded = await client.post("/context/expand", cast_to=object, body={"ids": [collapsed[0].id]})
    assert isinstance(expanded, dict)
    assert "TCK-40417" in str(expanded["data"])  # the collapsed first exchange comes back


async def test_an_imported_history_is_indexed_for_search_after_its_request(
        server: TestServer, client: openai.AsyncOpenAI) -> None:
    cid, _ = await turn(server, client, imported(300))  # unindexed: more than a slice of new messages
    first_exchange = {m.id for m in tenant(server).messages(cid)[1:3]}
    for _ in range(200):  # the upkeep task indexes it in batches within a few ticks
        found = await client.post("/context/search", cast_to=object,
                                  body={"pattern": "TCK-40417", "conversation_id": cid})
        assert isinstance(found, dict)
        if {int(h["id"]) for h in found["data"] if h["kind"] == "message"} == first_exchange:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the imported history never became searchable")


def entries(groups: list[tuple[str, int, int]]) -> list[Entry]:
    """Entries from (role, tokens, group) triples, message seqs in order."""
    return [Entry("message", str(i), tokens, role, group, i)
            for i, (role, tokens, group) in enumerate(groups)]


@pytest.mark.parametrize("keep", [0, 50, 100, 250, 10_000])
def test_a_collapse_takes_whole_groups_oldest_first_and_leaves_the_newest_history(keep: int) -> None:
    view = entries([("user", 50, 1), ("assistant", 50, 2), ("tool", 50, 2), ("tool", 50, 2),
                    ("assistant", 50, 3), ("user", 50, 4), ("assistant", 50, 5)])
    run = collapse_run(view, keep)
    assert run == tuple(range(len(run)))  # the oldest, contiguous
    groups = {view[i].group for i in run}
    assert all(view[i].group not in groups for i in range(len(run), len(view)))  # rounds whole
    assert 5 not in run and 6 not in run  # the last user message and the newest group stay
    left = sum(e.tokens for i, e in enumerate(view) if i not in run)
    assert left <= max(keep, 100) or len(run) == 5  # down to `keep`, or as far as it may go


def test_a_collapse_never_takes_a_summary_or_a_pinned_message_and_stays_contiguous() -> None:
    summary = Entry("summary", "sum_a", 40, "summary", 0, 0, depth=0)
    raw = entries([("user", 50, 1), ("assistant", 50, 2), ("user", 50, 3), ("assistant", 50, 4),
                   ("user", 50, 5), ("assistant", 50, 6)])
    raw[3] = Entry("message", "3", 50, "assistant", 4, 3, pinned=True)
    assert collapse_run([summary, *raw], 0) == (1, 2, 3)  # after the leading summary, up to the pin


async def test_a_collapse_that_fails_leaves_the_request_to_the_usual_passes_and_truncation(
        server: TestServer, client: openai.AsyncOpenAI, fake_upstream: FakeUpstream,
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: Any) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(collapse, "collapse_pass", broken)
    messages = imported(1_000)
    cid, _ = await turn(server, client, messages)  # answered all the same
    sent = fake_upstream.last_body["messages"]
    assert sent[0] == messages[0] and sent[-1] == messages[-1]
    assert not any(len(s.source_message_ids) > 1_500 for s in summaries(server, cid))  # no collapse
    failed = [e for e in tenant(server).events(cid) if e.outcome == "failed"]
    assert failed and "disk full" in (failed[0].error or "")
    assert len(tenant(server).messages(cid)) == len(messages) + 1  # nothing lost
