"""What the forwarded context says about getting compacted text back: tools named only when offered."""

from __future__ import annotations

from compaction.anchors.block import ANCHOR_BLOCK_INTRO
from compaction.summarize.prompts import bound_text
from compaction.summarize.source_blocks import pointer_line
from compaction.tokens import TokenCounter
from compaction.view.elision import KEPT_HOW, RecallNames, elide, pointer, strip_arguments
from compaction.view.plan import Slot

COUNTER = TokenCounter.for_model("gpt-4o")
NAMES = RecallNames("context_search", "context_expand")


def _slot(role: str, text: str) -> Slot:
    message = {"role": role, "content": text}
    if role == "tool":
        message["tool_call_id"] = "call_1"
    return Slot(message, COUNTER.count_message(message), "fresh_tail", 1, "12")


def _texts(recall: RecallNames | None) -> list[str]:
    calls = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]}
    slot = Slot(calls, COUNTER.count_message(calls), "fresh_tail", 1, "12")
    return [str(elide(_slot(role, "word " * 2000), 200, COUNTER, recall).message["content"])
            for role in ("user", "tool")] + [
        str(pointer(["3", "4", "5"], recall)["content"]),
        str(strip_arguments(slot, COUNTER, recall).message["content"])]


def test_markers_name_the_tools_only_when_offered() -> None:
    assert all("expand" not in t and "context_search" not in t for t in _texts(None))
    offered = _texts(NAMES)
    assert all("context_search" in t or "context_expand" in t for t in offered)


def test_text_forwarded_whether_or_not_offered_promises_no_tool() -> None:
    stored = [ANCHOR_BLOCK_INTRO, KEPT_HOW, pointer_line(["3", "sum_ab"]), bound_text("x" * 5000, "7")]
    assert all("expand" not in t.lower() and "search" not in t.lower() for t in stored)
