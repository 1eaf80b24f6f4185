"""One message-to-text rule: the search index, the inspector and the verifier see the same text."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.summarize.prompts import build_source_text
from compaction.types import Message
from proxy.inspector.view import inspect_conversation, preview, timeline
from store.encoding.content import message_text
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import scalar

PARTS: dict[str, dict[str, Any]] = {
    "text": {"type": "text", "text": "alpha text part"},
    "input_text": {"type": "input_text", "text": "bravo input part"},
    "output_text": {"type": "output_text", "text": "charlie output part"},
    "refusal": {"type": "refusal", "refusal": "delta refusal part"},
    "image_url": {"type": "image_url", "image_url": {"url": "https://img.example/echo.png"}},
    "input_audio": {"type": "input_audio", "input_audio": {"format": "mp3", "data": "Zm94dHJvdA=="}},
    "file_id": {"type": "file", "file": {"file_id": "file-golf123"}},
    "unknown": {"type": "hotel_widget", "payload": {"x": 1}},
}
EXPECTED = {
    "text": "alpha text part", "input_text": "bravo input part", "output_text": "charlie output part",
    "refusal": "delta refusal part", "image_url": "[image_url https://img.example/echo.png]",
    "input_audio": "[input_audio data:audio/mp3;base64,Zm94dHJvdA==]", "file_id": "[file file:file-golf123]",
    "unknown": "[hotel_widget]",
}


def _stored_text(store: Store, message_id: int) -> str:
    return str(scalar(store, "SELECT text FROM messages WHERE id = ?", (message_id,)))


@pytest.mark.parametrize("kind", sorted(PARTS))
def test_index_inspector_and_verifier_see_the_same_text(kind: str, store: Store, alice: TenantStore) -> None:
    role = "assistant" if kind in ("output_text", "refusal") else "user"
    message = {"role": role, "content": [PARTS[kind], {"type": "text", "text": "tail words"}]}
    result = alice.ingest([{"role": "system", "content": "s"}, message], model="gpt-4o-mini",
                          external_id=None, count_tokens=lambda m: 5)
    stored = result.messages[-1]
    text = message_text(stored.message)
    assert text == f"{EXPECTED[kind]}\ntail words"
    assert _stored_text(store, stored.id) == text  # the search index
    inspected = inspect_conversation(alice, stored.conversation_id)  # the inspector: list and detail
    assert [m["preview"] for m in inspected["timeline"] if m["id"] == stored.id] == [preview(text)]
    assert timeline([stored], {}, {})[0]["preview"] == preview(text)
    assert f"[#{stored.id} {role}]\n{text}" in build_source_text([stored])  # the verifier's sources


def test_tool_calls_read_the_same_everywhere(store: Store, alice: TenantStore) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": '{"q": "ORD-7A"}'}}
    history: list[Message] = [{"role": "user", "content": "find it"}, {"role": "assistant",
                                      "content": None, "tool_calls": [call]}]
    result = alice.ingest(history, model="gpt-4o-mini", external_id=None, count_tokens=lambda m: 5)
    stored = result.messages[-1]
    assert message_text(stored.message) == 'grep({"q": "ORD-7A"})'
    assert _stored_text(store, stored.id) == message_text(stored.message)
