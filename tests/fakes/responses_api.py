"""The fake upstream's OpenAI Responses API: a scripted Reply as a Response object or typed SSE events.

Output items: an optional reasoning item (encrypted content), the text as one message item, and each
scripted tool call as a function_call item. Streams follow the event order the real API uses.
"""

from __future__ import annotations

import json
from typing import Any

JSON = dict[str, Any]


def output_items(text: str | None, tool_calls: list[JSON], reasoning: bool, suffix: str = "") -> list[JSON]:
    """The output items of one reply; `suffix` keeps item ids unique across replies, as the API's are."""
    items: list[JSON] = []
    if reasoning:
        items.append({"type": "reasoning", "id": f"rs_fake{suffix}", "summary": [],
                      "encrypted_content": "gAAAA-opaque-reasoning-blob"})
    if text:
        items.append({"type": "message", "id": f"msg_fake{suffix}", "role": "assistant",
                      "status": "completed",
                      "content": [{"type": "output_text", "text": text, "annotations": []}]})
    items += [{"type": "function_call", "id": f"fc_{c['id']}", "call_id": c["id"], "name": c["name"],
               "arguments": c["arguments"], "status": "completed"} for c in tool_calls]
    return items


def response_json(body: JSON, items: list[JSON], status: str = "completed") -> JSON:
    """A Response object around `items`, with usage."""
    sent = len(json.dumps(body.get("input"))) // 4
    out = sum(len(json.dumps(i)) // 4 for i in items)
    return {"id": "resp_fake", "object": "response", "created_at": 0, "status": status,
            "model": body.get("model", "fake"), "output": items, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": body.get("tools") or [], "error": None,
            "incomplete_details": None, "instructions": body.get("instructions"), "metadata": {},
            "temperature": None, "top_p": None, "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": sent, "output_tokens": out, "total_tokens": sent + out,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def sse_events(body: JSON, items: list[JSON], chunk_size: int = 4) -> list[bytes]:
    """response.created, each item added/streamed/done, response.completed: as SSE blocks."""
    events: list[JSON] = [{"type": "response.created",
                           "response": {**response_json(body, [], "in_progress"), "usage": None}}]
    for index, item in enumerate(items):
        events += _item_events(item, index, chunk_size)
    events.append({"type": "response.completed", "response": response_json(body, items)})
    return [f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
            for n, e in enumerate(events)]


def _item_events(item: JSON, index: int, chunk_size: int) -> list[JSON]:
    head = {"output_index": index, "item_id": item["id"]}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        deltas = [{"type": "response.output_text.delta", **head, "content_index": 0,
                   "delta": text[i:i + chunk_size], "logprobs": []} for i in range(0, len(text), chunk_size)]
        return [{"type": "response.output_item.added", "output_index": index,
                 "item": {**item, "content": [], "status": "in_progress"}},
                {"type": "response.content_part.added", **head, "content_index": 0, "part": part},
                *deltas,
                {"type": "response.output_text.done", **head, "content_index": 0, "text": text,
                 "logprobs": []},
                {"type": "response.content_part.done", **head, "content_index": 0,
                 "part": {**part, "text": text}},
                {"type": "response.output_item.done", "output_index": index, "item": item}]
    if item["type"] == "function_call":
        return [{"type": "response.output_item.added", "output_index": index,
                 "item": {**item, "arguments": "", "status": "in_progress"}},
                {"type": "response.function_call_arguments.delta", **head, "delta": item["arguments"]},
                {"type": "response.function_call_arguments.done", **head, "arguments": item["arguments"]},
                {"type": "response.output_item.done", "output_index": index, "item": item}]
    return [{"type": "response.output_item.added", "output_index": index, "item": item},
            {"type": "response.output_item.done", "output_index": index, "item": item}]
