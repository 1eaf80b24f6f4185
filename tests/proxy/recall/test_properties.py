"""Invariants: any pattern is answered or cleanly refused; streamed client calls survive any interleaving."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config.errors import InvalidRequestError
from config.settings import StoreSettings
from proxy.recall.api import run_search, search_query
from proxy.recall.tool_loop import ToolLoop
from store.sqlite.store import Store
from tests.proxy.recall.recall_data import ALPHA_KEY, populate

JSON = dict[str, Any]


@pytest.fixture(scope="module")
def alpha(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = str(Path(tmp_path_factory.mktemp("props")) / "s.db")
    populate(path)
    store = Store.open(StoreSettings(path=path))
    yield store.for_tenant(store.tenant_id_for_key(ALPHA_KEY))
    store.close()


PATTERN_ALPHABET = st.sampled_from(list('abkyAOR NDT()"%*:^-_\'\\\x00注文🛶') + ["AND", "OR", "NOT", "NEAR"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.one_of(st.text(max_size=40), st.lists(PATTERN_ALPHABET, max_size=12).map(" ".join),
                         st.lists(PATTERN_ALPHABET, max_size=20).map("".join)))
def test_any_pattern_is_answered_or_refused_by_name(alpha: Any, pattern: str) -> None:
    try:
        hits = run_search(alpha, search_query({"pattern": pattern, "all_conversations": True}))
    except InvalidRequestError as exc:
        assert exc.param == "pattern"
    else:
        assert all(h.conversation_id for h in hits)


class Recall:
    def schemas(self) -> list[JSON]:
        return [{"type": "function", "function": {"name": "context_search"}}]

    def is_recall(self, name: str) -> bool:
        return name == "context_search"

    async def execute(self, name: str, arguments: str) -> str:
        return "{}"

    async def record_round(self, calls: list[JSON], results: list[JSON]) -> None:
        return None


class OneStream:
    def __init__(self, chunks: list[JSON]) -> None:
        self.chunks = chunks

    async def complete(self, body: JSON) -> JSON:
        raise AssertionError("streaming only")

    async def stream(self, body: JSON) -> AsyncGenerator[JSON, None]:
        for chunk in self.chunks:
            yield chunk


def _deltas(calls: list[tuple[str, str]], order: list[int]) -> list[JSON]:
    """Each call's first delta (id + name) then one delta per argument character; `order` picks
    which call advances next, the rest follow in call order."""
    queues = [[{"index": i, "id": f"c{i}", "type": "function", "function": {"name": n, "arguments": ""}}]
              + [{"index": i, "function": {"arguments": ch}} for ch in args]
              for i, (n, args) in enumerate(calls)]
    out = [queues[k % len(queues)].pop(0) for k in order if queues[k % len(queues)]]
    return out + [d for queue in queues for d in queue]


@settings(max_examples=200, deadline=None)
@given(calls=st.lists(st.tuples(st.sampled_from(["context_search", "get_weather", "lookup"]),
                                st.text("abc{}\":", max_size=6)), min_size=1, max_size=5),
       order=st.lists(st.integers(0, 4), max_size=40))
async def test_client_calls_survive_any_interleaving(calls: list[tuple[str, str]], order: list[int]) -> None:
    chunks = [{"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [d]}, "finish_reason": None}]}
              for d in _deltas(calls, order)]
    chunks.append({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    mine = [(n, a) for n, a in calls if n != "context_search"]
    if not mine:
        return  # recall-only rounds continue with another upstream call: see test_tool_loop.py
    loop = ToolLoop(Recall(), OneStream(chunks), max_rounds=1)
    out = [c async for c in loop.stream({"messages": []})]
    seen: dict[int, JSON] = {}
    for c in out:
        for d in c["choices"][0]["delta"].get("tool_calls", []):
            slot = seen.setdefault(d["index"], {"name": "", "arguments": ""})
            slot["name"] += d["function"].get("name") or ""
            slot["arguments"] += d["function"].get("arguments") or ""
    assert sorted(seen) == list(range(len(mine)))
    # Client indices follow first appearance; each call keeps its own name and arguments.
    assert sorted((s["name"], s["arguments"]) for s in seen.values()) == sorted(mine)
    assert out[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert "context_search" not in json.dumps(out)
