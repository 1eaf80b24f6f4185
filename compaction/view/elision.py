"""What truncation leaves where content was taken out: one marker per elided message, one pointer
line per dropped run (never a husk per message: a run of empty stubs costs tokens and says nothing).

An elided message keeps its role, name, tool_call_id and tool_calls ids (so its pairing holds), a
long head and a shorter tail of its text, and between them one marker saying how much was taken out
and how to get it back. A dropped run of whole groups is replaced by one system line naming its
messages. Markers name the recall tools only when the request offers them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from compaction.summarize.source_blocks import compact_ids
from compaction.tokens import TokenCounter
from compaction.view.plan import Slot
from store.encoding.content import content_text
from store.models import Message

MARK = "[ctxproxy: "
POINTER_GROUP = -10_000  # pointer slots get group keys below this (never a real group)
MAX_IDS_CHARS = 80


@dataclass(frozen=True)
class RecallNames:
    """The recall tools this request offers (markers name them only then)."""

    search: str
    expand: str


KEPT_HOW = "re-run the tool for all of it"  # stored elisions: forwarded whether or not recall is offered


def marker(cut_tokens: int, total_tokens: int, slot: Slot, recall: RecallNames | None,
           how: str | None = None) -> str:
    """The note left where part of a message was taken out (`how`: the way back, when given)."""
    what = "tool result" if slot.message.get("role") in ("tool", "function") else "message"
    return f"{MARK}{cut_tokens} of {total_tokens} tokens of {what} {slot.ref} elided here; " \
           f"{how or _way_back(what, slot.ref, recall)}]"


def _way_back(what: str, ref: str, recall: RecallNames | None) -> str:
    if recall is None:
        return f"message {ref} is kept whole in the stored history"
    if what == "tool result":
        return f"{recall.search} finds text in it; re-run the tool for all of it"
    return f"call {recall.expand} with ids [\"{ref}\"]"


def pointer(refs: Sequence[str], recall: RecallNames | None) -> Message:
    """The one system line standing for a dropped run of messages and summaries."""
    ids = compact_ids(refs)
    if len(ids) > MAX_IDS_CHARS:
        ids = f"{refs[0]} ... {refs[-1]}"
    how = (f"call {recall.expand} with their ids, or {recall.search}" if recall is not None
           else "they are kept in the stored history")
    text = f"{MARK}{len(refs)} earlier messages or summaries omitted here (ids {ids}); {how}]"
    return {"role": "system", "content": text}


def pointer_slot(refs: Sequence[str], recall: RecallNames | None, counter: TokenCounter,
                 index: int) -> Slot:
    message = pointer(refs, recall)
    return Slot(message, counter.count_message(message), "summaries", POINTER_GROUP - index,
                "pointer", protected=True)


def elide(slot: Slot, allowance: int, counter: TokenCounter, recall: RecallNames | None,
          how: str | None = None) -> Slot:
    """`slot` with its text cut to `allowance` tokens around one marker (unchanged when it fits or
    has no text); two thirds of what is kept is the head."""
    text = content_text(dict(slot.message))
    if not text or slot.tokens <= allowance:
        return slot
    total = counter.count_text(text)
    overhead = slot.tokens - total
    keep = allowance - overhead - counter.count_text(marker(total, total, slot, recall, how)) - 2
    while True:
        message = _cut(slot, text, max(0, keep), total, counter, recall, how)
        tokens = counter.count_message(message)
        if tokens <= allowance or keep <= 0:
            return replace(slot, message=message, tokens=tokens) if tokens < slot.tokens else slot
        keep -= max(1, tokens - allowance)


def _cut(slot: Slot, text: str, keep: int, total: int, counter: TokenCounter,
         recall: RecallNames | None, how: str | None) -> Message:
    head = prefix_within(text, keep - keep // 3, counter.count_text)
    tail = suffix_within(text[len(head):], keep // 3, counter.count_text)
    cut = max(0, total - counter.count_text(head) - counter.count_text(tail))
    note = marker(cut, total, slot, recall, how)
    body = "\n".join(p for p in (head, note, tail) if p)
    return {**slot.message, "content": body}


def strip_arguments(slot: Slot, counter: TokenCounter, recall: RecallNames | None) -> Slot:
    """`slot` (an assistant tool_calls message) with every call's arguments replaced by `{}`."""
    calls = [{**c, "function": {**c.get("function", {}), "arguments": "{}"}}
             if isinstance(c, Mapping) else c for c in slot.message.get("tool_calls") or ()]
    how = (f"call {recall.expand} with ids [\"{slot.ref}\"]" if recall is not None
           else f"message {slot.ref} is kept whole in the stored history")
    message = {**slot.message, "tool_calls": calls,
               "content": f"{MARK}tool-call arguments of message {slot.ref} elided; {how}]"}
    return replace(slot, message=message, tokens=counter.count_message(message))


def longest_within(length: int, fits: Callable[[int], bool]) -> int:
    """The largest n in [0, length] with `fits(n)` (binary search; `fits` must be monotone)."""
    lo, hi = 0, max(length, 0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def prefix_within(text: str, tokens: int, count: Callable[[str], int]) -> str:
    """Longest prefix of `text` with at most `tokens` tokens."""
    if tokens <= 0:
        return ""
    return text[:longest_within(min(len(text), tokens * 8), lambda n: count(text[:n]) <= tokens)]


def suffix_within(text: str, tokens: int, count: Callable[[str], int]) -> str:
    """Longest suffix of `text` with at most `tokens` tokens."""
    if tokens <= 0:
        return ""
    n = longest_within(min(len(text), tokens * 8), lambda k: count(text[len(text) - k:]) <= tokens)
    return text[len(text) - n:] if n else ""
