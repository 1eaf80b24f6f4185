"""POST /v1/context/search and /v1/context/expand through the real app, with the openai SDK."""

from __future__ import annotations

import datetime as dt
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from tests.proxy.recall.recall_data import DAY, FACT, Populated

JSON = dict[str, Any]


async def post_json(client: AsyncOpenAI, path: str, body: JSON) -> JSON:
    """POST through the SDK (its auth and errors) and return the decoded JSON object as it came."""
    reply = await client.post(path, cast_to=object, body=body)
    assert isinstance(reply, dict)
    return reply


async def search(client: AsyncOpenAI, **body: Any) -> list[JSON]:
    reply = await post_json(client, "/context/search", body)
    assert reply["object"] == "list"
    data: list[JSON] = reply["data"]
    return data


async def expand(client: AsyncOpenAI, ids: list[Any]) -> list[JSON]:
    reply = await post_json(client, "/context/expand", {"ids": ids})
    assert reply["object"] == "list"
    data: list[JSON] = reply["data"]
    return data


def ids(hits: list[JSON]) -> set[str]:
    return {h["id"] for h in hits}


def iso(days_ago: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=days_ago * DAY)).isoformat()


async def test_search_hit_shape_and_rank_order(clients: dict[str, AsyncOpenAI], populated: Populated) -> None:
    hits = await search(clients["alpha"], pattern="ORD-2024-1187", conversation_id=populated.alpha_conv)
    assert ids(hits) == {populated.fact_id, populated.reply_id, populated.summary_id}
    assert [h["rank"] for h in hits] == sorted(h["rank"] for h in hits)
    for hit in hits:
        assert set(hit) >= {"rank", "snippet", "conversation_id", "id", "kind", "role", "depth", "created_at"}
        assert hit["conversation_id"] == populated.alpha_conv and "[" in hit["snippet"]
    by_id = {h["id"]: h for h in hits}
    assert by_id[populated.summary_id]["kind"] == "summary" and by_id[populated.summary_id]["depth"] == 0
    assert by_id[populated.fact_id]["role"] == "user" and by_id[populated.fact_id]["depth"] is None


async def test_default_conversation_is_the_most_recent(clients: dict[str, AsyncOpenAI],
                                                       populated: Populated) -> None:
    assert ids(await search(clients["alpha"], pattern="paddle")) != set()
    assert await search(clients["alpha"], pattern="Bergen") == []  # lives in the older conversation
    hits = await search(clients["alpha"], pattern="kayak", all_conversations=True)
    assert {h["conversation_id"] for h in hits} == {populated.alpha_conv, populated.alpha_recent}


@pytest.mark.parametrize(("scope", "kinds"), [("summary", {"summary"}), ("message", {"message"}),
                                              ("both", {"summary", "message"})])
async def test_scope(clients: dict[str, AsyncOpenAI], populated: Populated, scope: str,
                     kinds: set[str]) -> None:
    hits = await search(clients["alpha"], pattern="Bergen", scope=scope, conversation_id=populated.alpha_conv)
    assert {h["kind"] for h in hits} == kinds


@pytest.mark.parametrize(("role", "expected"), [("user", "fact_id"), ("assistant", "reply_id")])
async def test_role(clients: dict[str, AsyncOpenAI], populated: Populated, role: str, expected: str) -> None:
    hits = await search(clients["alpha"], pattern="Bergen", role=role, conversation_id=populated.alpha_conv)
    assert ids(hits) == {getattr(populated, expected)}
    assert {h["role"] for h in hits} == {role}


async def test_time_windows(clients: dict[str, AsyncOpenAI], populated: Populated) -> None:
    alpha, conv = clients["alpha"], populated.alpha_conv
    everything = ids(await search(alpha, pattern="kayak", conversation_id=conv))
    assert populated.old_id in everything and populated.summary_id in everything
    recent = ids(await search(alpha, pattern="kayak", last="7d", conversation_id=conv))
    assert recent == everything - {populated.old_id}
    assert ids(await search(alpha, pattern="kayak", last="2w", conversation_id=conv)) == everything
    assert ids(await search(alpha, pattern="kayak", since=iso(5), conversation_id=conv)) == recent
    older = await search(alpha, pattern="kayak", before=iso(5), conversation_id=conv)
    assert ids(older) == {populated.old_id}
    assert await search(alpha, pattern="kayak", since=iso(12), before=iso(11), conversation_id=conv) == []


async def test_operators_fuzzy_and_limit(clients: dict[str, AsyncOpenAI], populated: Populated) -> None:
    alpha, conv = clients["alpha"], populated.alpha_conv
    no_magazine = ids(await search(alpha, pattern="kayak NOT magazine", conversation_id=conv))
    assert populated.old_id not in no_magazine and no_magazine
    either = ids(await search(alpha, pattern="Trondheim OR subscription", scope="message",
                              conversation_id=conv))
    assert populated.old_id in either and len(either) >= 2
    assert ids(await search(alpha, pattern="%lvors%", scope="message", conversation_id=conv)) == {
        populated.fact_id}
    assert ids(await search(alpha, pattern="Halv%", scope="message", conversation_id=conv)) == {
        populated.fact_id}
    best = await search(alpha, pattern="kayak", conversation_id=conv)
    assert await search(alpha, pattern="kayak", limit=1, conversation_id=conv) == best[:1]


async def test_combined_parameters(clients: dict[str, AsyncOpenAI], populated: Populated) -> None:
    hits = await search(clients["alpha"], pattern="kayak OR Bergen", scope="message", role="user",
                        since=iso(30), last="7d", limit=5, all_conversations=True)
    assert ids(hits) == {populated.fact_id, populated.bag_id, _recent_question(hits)}
    assert all(h["role"] == "user" and h["kind"] == "message" for h in hits)


def _recent_question(hits: list[JSON]) -> str:
    """The id of the one hit from the second conversation (its id is not in the fixture)."""
    found: str = next(h["id"] for h in hits if "paddle" in h["snippet"])
    return found


async def test_expand_messages_and_summary(clients: dict[str, AsyncOpenAI], populated: Populated) -> None:
    items = await expand(clients["alpha"], [populated.summary_id, populated.fact_id, int(populated.reply_id),
                                            populated.tool_id])
    summary, fact, reply, tool = items
    assert summary["kind"] == "summary" and summary["depth"] == 0
    assert summary["sources"] == [populated.old_id, populated.fact_id, populated.reply_id]
    assert fact == {**fact, "kind": "message", "id": populated.fact_id, "role": "user",
                    "conversation_id": populated.alpha_conv}
    assert FACT in fact["text"]
    calls = [p for p in reply["parts"] if p["type"] == "tool_call"]
    assert calls and calls[0]["name"] == "lookup_order" and "ORD-2024-1187" in calls[0]["arguments"]
    assert tool["role"] == "tool" and tool["note"] and "Trondheim" not in tool["text"]


async def test_tenant_isolation(clients: dict[str, AsyncOpenAI], populated: Populated) -> None:
    alpha, beta = clients["alpha"], clients["beta"]
    assert await search(beta, pattern="ORD-2024-1187", all_conversations=True) == []
    assert await search(beta, pattern="Bergen", all_conversations=True) == []
    beta_hits = await search(beta, pattern="kayak", all_conversations=True)
    assert ids(beta_hits) == {populated.beta_id}
    alpha_hits = await search(alpha, pattern="kayak OR ORD-7777", all_conversations=True)
    assert populated.beta_id not in ids(alpha_hits)
    assert populated.beta_conv not in {h["conversation_id"] for h in alpha_hits}
    for stolen in ([populated.fact_id], [populated.summary_id], [populated.beta_id, populated.fact_id]):
        with pytest.raises(openai.NotFoundError):
            await expand(beta, stolen)
    with pytest.raises(openai.NotFoundError):
        await expand(alpha, [populated.beta_id])
    with pytest.raises(openai.NotFoundError):
        await search(beta, pattern="Bergen", conversation_id=populated.alpha_conv)
    assert [i["id"] for i in await expand(beta, [populated.beta_id])] == [populated.beta_id]


async def bad_request(coro: Any) -> JSON:
    with pytest.raises(openai.BadRequestError) as info:
        await coro
    body = info.value.body
    assert isinstance(body, dict)
    error: JSON = body.get("error", body)
    assert error["type"] == "invalid_request_error"
    return error


@pytest.mark.parametrize(("body", "param"), [
    ({}, "pattern"), ({"pattern": 12}, "pattern"), ({"pattern": "x", "scope": "all"}, "scope"),
    ({"pattern": "x", "role": "tool"}, "role"), ({"pattern": "x", "last": "yesterday"}, "last"),
    ({"pattern": "x", "since": "last tuesday"}, "since"), ({"pattern": "x", "before": "soon"}, "before"),
    ({"pattern": "x", "limit": 0}, "limit"), ({"pattern": "x", "limit": 10_000}, "limit"),
    ({"pattern": "x", "limit": "10"}, "limit"), ({"pattern": "x", "limit": True}, "limit"),
    ({"pattern": "x", "all_conversations": "yes"}, "all_conversations"),
    ({"pattern": "x", "conversation_id": "c", "all_conversations": True}, "all_conversations"),
    ({"pattern": "x", "conversation_id": 7}, "conversation_id"), ({"pattern": "x", "verbose": 1}, "verbose"),
])
async def test_search_validation(clients: dict[str, AsyncOpenAI], body: JSON, param: str) -> None:
    error = await bad_request(clients["alpha"].post("/context/search", cast_to=object, body=body))
    assert error["param"] == param


HOSTILE = ['"', '"unterminated', "(", "kayak)", "((kayak", "AND", "OR kayak", "kayak NOT", "NOT kayak",
           "NEAR(kayak bag)", "*", "%", "%%", "ka%yak", "%ab%", "\x00", "   ", "", "x" * 5_000,
           "(" * 20 + "kayak" + ")" * 20, " ".join(["kayak"] * 40), '""', "'; DROP TABLE messages; --",
           "0\x00注文", "kayak\x00"]


@pytest.mark.parametrize("pattern", HOSTILE)
async def test_hostile_patterns_are_clean_400s(clients: dict[str, AsyncOpenAI], pattern: str) -> None:
    error = await bad_request(clients["alpha"].post("/context/search", cast_to=object,
                                                    body={"pattern": pattern, "all_conversations": True}))
    assert error["param"] == "pattern"


@pytest.mark.parametrize("pattern", ["kayak:bag", "kayak^", "ORD-2024-1187*", "{kayak}", "col:kayak OR bag"])
async def test_odd_but_readable_patterns_search(clients: dict[str, AsyncOpenAI], pattern: str) -> None:
    assert isinstance(await search(clients["alpha"], pattern=pattern, all_conversations=True), list)


@pytest.mark.parametrize(("body", "param"), [
    ({}, "ids"), ({"ids": []}, "ids"), ({"ids": "7"}, "ids"), ({"ids": [{"id": 7}]}, "ids[0]"),
    ({"ids": ["1", None]}, "ids[1]"), ({"ids": ["1"], "all": True}, "all")])
async def test_expand_validation(clients: dict[str, AsyncOpenAI], body: JSON, param: str) -> None:
    error = await bad_request(clients["alpha"].post("/context/expand", cast_to=object, body=body))
    assert error["param"] == param


async def test_unknown_ids_are_404(clients: dict[str, AsyncOpenAI]) -> None:
    for unknown in (["999999"], ["sum_000000000000"], ["../etc/passwd"]):
        with pytest.raises(openai.NotFoundError):
            await expand(clients["alpha"], unknown)


@pytest.mark.parametrize("pattern", ["kayak'; DROP TABLE messages; --", "kayak + bag", "kayak -bag",
                                     "kayak\u200b", "ka\u0301yak", "注文 ORD", "🛶 kayak", "a" * 1_000])
async def test_strange_patterns_never_fail_otherwise(clients: dict[str, AsyncOpenAI], pattern: str) -> None:
    """Either results or a 400 naming the pattern; never a 500, never another parameter."""
    try:
        assert isinstance(await search(clients["alpha"], pattern=pattern, all_conversations=True), list)
    except openai.BadRequestError as exc:
        assert isinstance(exc.body, dict) and exc.body.get("param") == "pattern"
    hits = await search(clients["alpha"], pattern="kayak", all_conversations=True)
    assert hits  # the store is intact afterwards
