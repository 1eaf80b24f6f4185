"""compaction.recall.tools: tool schemas, when recall is offered, and execute() never raising on bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from compaction.recall import tools as recall
from compaction.types import Occupancy, PreparedRequest
from config.settings import RecallSettings, StoreSettings
from store.sqlite.store import Store
from store.tenant import TenantStore

SETTINGS = RecallSettings()


@pytest.fixture
def tenant(tmp_path: Path) -> Iterator[tuple[TenantStore, str]]:
    store = Store.open(StoreSettings(path=str(tmp_path / "r.db"), tenant_secret="r" * 32))
    t = store.for_tenant("tenant-r")
    ingest = t.ingest([{"role": "user", "content": "The warehouse code is WH-7781 in Lisbon."},
                       {"role": "assistant", "content": "Noted the Lisbon warehouse."}],
                      model="gpt-4o-mini", external_id=None, count_tokens=lambda _m: 10)
    yield t, ingest.conversation.id
    store.close()


def prepared(**overrides: Any) -> PreparedRequest:
    base: dict[str, Any] = dict(conversation_id="c", messages=(), tools=(), tokens_received=1,
                                tokens_forwarded=1, budget=10, compacted=False, summary_ids=(),
                                occupancy=Occupancy(), waited_on_summarizer=False,
                                forced_truncation=False, prefix_stable=None)
    if "recall_offered" in {f.name for f in fields(PreparedRequest)}:
        base["recall_offered"] = True  # the request allowed recall (when the field exists)
    return replace(PreparedRequest(**base), **overrides)


def test_schemas_are_valid_openai_function_tools_named_per_settings() -> None:
    custom = RecallSettings(search_tool_name="grep_history", expand_tool_name="open_history")
    schemas = recall.tool_schemas(custom)
    assert [s["function"]["name"] for s in schemas] == ["grep_history", "open_history"]
    for schema in schemas:
        assert schema["type"] == "function"
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
        json.dumps(schema)  # serialisable as sent upstream
    search = schemas[0]["function"]["parameters"]["properties"]
    assert search["scope"]["enum"] == ["summary", "message", "both"]
    assert schemas[1]["function"]["parameters"]["properties"]["ids"]["maxItems"] == recall.MAX_EXPAND_IDS
    assert recall.is_recall_tool("grep_history", custom) and not recall.is_recall_tool("read_file", custom)


def test_offered_only_when_the_context_hides_something() -> None:
    assert not recall.should_offer(prepared(), SETTINGS)
    assert recall.should_offer(prepared(summary_ids=("sum_abc",)), SETTINGS)
    assert recall.should_offer(prepared(forced_truncation=True), SETTINGS)
    disabled = RecallSettings(enabled=False)
    assert not recall.should_offer(prepared(summary_ids=("sum_abc",)), disabled)


@pytest.mark.parametrize(("name", "arguments", "needle"), [
    ("context_search", "{not json", ""),
    ("context_search", "[1, 2]", "JSON object"),
    ("context_search", "{}", "pattern"),
    ("context_search", '{"pattern": "   "}', "pattern"),
    ("context_search", '{"pattern": "x", "limit": 0}', "limit"),
    ("context_search", '{"pattern": "x", "limit": "ten"}', "limit"),
    ("context_expand", "{}", "ids"),
    ("context_expand", '{"ids": []}', "ids"),
    ("context_expand", '{"ids": [{"a": 1}]}', "ids"),
    ("context_delete", "{}", "unknown tool"),
])
async def test_bad_arguments_answer_a_json_error(tenant: tuple[TenantStore, str], name: str,
                                                 arguments: str, needle: str) -> None:
    store, cid = tenant
    answer = json.loads(recall.execute(store, cid, name, arguments, SETTINGS))
    assert set(answer) == {"error"} and needle in answer["error"]


async def test_search_then_expand_round_trip(tenant: tuple[TenantStore, str]) -> None:
    store, cid = tenant
    found = json.loads(recall.execute(store, cid, "context_search",
                                            '{"pattern": "warehouse", "scope": "message"}', SETTINGS))
    assert found["hits"] and all(h["conversation_id"] == cid for h in found["hits"])
    ids = [h["id"] for h in found["hits"]]
    expanded = json.loads(recall.execute(store, cid, "context_expand",
                                               json.dumps({"ids": ids}), SETTINGS))
    texts = " ".join(item["text"] for item in expanded["items"])
    assert "WH-7781" in texts


async def test_empty_arguments_string_is_an_empty_object(tenant: tuple[TenantStore, str]) -> None:
    store, cid = tenant
    answer = json.loads(recall.execute(store, cid, "context_search", "", SETTINGS))
    assert "pattern" in answer["error"]
