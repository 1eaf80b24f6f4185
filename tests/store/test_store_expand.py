"""Expand: full messages, tool calls, media, omitted tool results, summaries down to messages."""

from __future__ import annotations

from typing import Any

import pytest

from config.errors import InvalidRequestError, NotFoundError
from store.encoding.content import TOOL_RESULT_NOTE
from store.models import SummaryDraft
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter

MSGS: list[dict[str, Any]] = [
    {"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "input_audio", "input_audio": {"data": "QUJD", "format": "mp3"}},
        {"type": "file", "file": {"file_id": "file-123", "filename": "report.pdf"}}]},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "vision", "arguments": '{"zoom": 2}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "HUGE PAYLOAD " * 1000},
    {"role": "assistant", "content": "A cat on a mat."},
]


@pytest.fixture
def stored(alice: TenantStore, counter: TokenCounter) -> list[str]:
    result = alice.ingest(MSGS, model="m", external_id=None, count_tokens=counter)
    return [str(m.id) for m in result.messages]


def test_expand_message_with_media(alice: TenantStore, stored: list[str]) -> None:
    (item,) = alice.expand([stored[0]])
    assert item.kind == "message" and item.role == "user" and item.text == "What is in this picture?"
    media = [p for p in item.parts if p["type"] == "media"]
    assert [p["uri"] for p in media] == ["https://example.com/cat.png", "data:audio/mp3;base64,QUJD",
                                         "file:file-123"]


def test_expand_tool_call_arguments(alice: TenantStore, stored: list[str]) -> None:
    (item,) = alice.expand([stored[1]])
    assert {"type": "tool_call", "id": "call_1", "name": "vision", "arguments": '{"zoom": 2}'} in item.parts
    assert '{"zoom": 2}' in item.text and "Let me look." in item.text


def test_tool_result_payload_omitted(alice: TenantStore, stored: list[str]) -> None:
    (item,) = alice.expand([stored[2]])
    assert item.role == "tool" and item.text == "" and item.note == TOOL_RESULT_NOTE
    assert "HUGE" not in repr(item)


def test_expand_keeps_order_and_normalises_ids(alice: TenantStore, stored: list[str]) -> None:
    items = alice.expand([stored[3], " " + stored[0]])
    assert [i.id for i in items] == [stored[3], stored[0]]


def test_expand_summary_down_to_messages(alice: TenantStore, stored: list[str]) -> None:
    cid = alice.message(int(stored[0])).conversation_id
    leaf = alice.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "User asked about a picture.", 6, 0, 1,
                                          (int(stored[0]), int(stored[1]))))
    top = alice.add_summary(SummaryDraft(cid, "condensed", 1, "normal", "Picture discussion.", 3, 0, 1,
                                         source_summary_ids=(leaf.id,)))
    (top_item,) = alice.expand([top.id])
    assert top_item.kind == "summary" and top_item.depth == 1 and top_item.sources == (leaf.id,)
    (leaf_item,) = alice.expand(list(top_item.sources))
    assert leaf_item.depth == 0 and leaf_item.sources == (stored[0], stored[1])
    messages = alice.expand(list(leaf_item.sources))
    assert [m.role for m in messages] == ["user", "assistant"]


@pytest.mark.parametrize("bad", ["999999", "sum_000000000000", "abc", "", "-1", "1.5", "١٢"])
def test_unknown_ids_not_found(alice: TenantStore, stored: list[str], bad: str) -> None:
    with pytest.raises(NotFoundError) as err:
        alice.expand([stored[0], bad])
    assert repr(bad) in err.value.message


def test_too_many_ids(alice: TenantStore, stored: list[str]) -> None:
    with pytest.raises(InvalidRequestError):
        alice.expand([stored[0]] * 51)
    assert len(alice.expand([stored[0]] * 50)) == 50
