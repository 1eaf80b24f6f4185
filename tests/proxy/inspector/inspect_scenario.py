"""A compacted conversation written through the TenantStore write API (real store or the fake).

Shape: 40 messages (seq 0 system, seq 3 pinned, a tool round at 11-13); leaves over 1-8, 9-16, 17-24,
25-30 condensed into one depth-1 summary; a later leaf over 31-34; view = [seq 0, condensed, leaf];
an order-number anchor corrected once; committed, rejected and failed events; six forwarded requests,
the fourth one (after a compaction step) not extending the third.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compaction.types import Message
from store.models import (
    AnchorDraft,
    CompactionEvent,
    ContextView,
    ForwardedRecord,
    SummaryDraft,
    SummaryRecord,
    ViewItem,
)

ORIGINAL_TEXT = "The canary deploy of build 7731 failed on node kappa-3"
PINNED_TEXT = "Never restart the primary database during business hours"
MODEL = "gpt-4o-mini"


def conversation_messages() -> list[dict[str, Any]]:
    msgs: list[Message] = [{"role": "system", "content": "You are a careful deployment assistant."}]
    for seq in range(1, 40):
        role = "user" if seq % 2 == 1 else "assistant"
        msgs.append({"role": role, "content": f"Turn {seq}: status update number {seq} for the rollout."})
    msgs[2] = {"role": "assistant", "content": ORIGINAL_TEXT + ". Order A-1001 is blocked."}
    msgs[3] = {"role": "user", "content": PINNED_TEXT, "pinned": True}
    msgs[11] = {"role": "user", "content": "Please read the config file."}
    msgs[12] = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "/srv/app/deploy.yaml"}'}}]}
    msgs[13] = {"role": "tool", "tool_call_id": "call_1", "content": "replicas: 3\nimage: app:7731"}
    msgs[20] = {"role": "assistant", "content": "Correction: the order is A-1002, not A-1001."}
    return msgs


def count_tokens(message: Message) -> int:
    return 4 + len(str(message.get("content") or "")) // 4 + 10 * len(message.get("tool_calls") or [])


@dataclass(frozen=True)
class Scenario:
    conversation_id: str
    tenant_id: str
    message_ids: tuple[int, ...]  # by seq
    leaves: tuple[SummaryRecord, ...]  # the four condensed leaves, oldest first
    condensed: SummaryRecord
    late_leaf: SummaryRecord


def _leaf(cid: str, ids: tuple[int, ...], first: int, last: int) -> SummaryDraft:
    return SummaryDraft(conversation_id=cid, kind="leaf", depth=0, level="normal",
                        content=f"Intent: rollout turns {first}-{last}. Expand for details about: turns.",
                        token_count=30, first_seq=first, last_seq=last,
                        source_message_ids=ids[first:last + 1], model="local/extractive",
                        prompt_version="v1")


def _committed(cid: str, rec: SummaryRecord, anchors_added: tuple[int, ...] = (),
               anchors_superseded: tuple[int, ...] = ()) -> CompactionEvent:
    return CompactionEvent(conversation_id=cid, trigger="threshold",
                           tier="leaf" if rec.kind == "leaf" else "condensed", level=rec.level,
                           outcome="committed", summarizer_model=rec.model,
                           summarizer_settings={"temperature": 0.0}, prompt_version=rec.prompt_version,
                           source_message_ids=rec.source_message_ids,
                           source_summary_ids=rec.source_summary_ids, summary_id=rec.id, depth=rec.depth,
                           generation=rec.generation, tokens_before=400, tokens_after=rec.token_count,
                           verification="passed", anchors_added=anchors_added,
                           anchors_superseded=anchors_superseded, duration_ms=12.5)


def _forwarded(cid: str, n_messages: int, salt: str, view_version: int, compacted: bool,
               system: int, summaries: int, tail: int) -> ForwardedRecord:
    hashes = tuple(f"{salt}{i}" for i in range(n_messages))
    occ = {"system": system, "anchors": 20 if compacted else 0, "summaries": summaries,
           "fresh_tail": tail, "tools": 50}
    used = sum(occ.values())
    occ["free"] = 1000 - used
    return ForwardedRecord(conversation_id=cid, prefix_hashes=hashes, tokens_received=used + 200 * compacted,
                           tokens_forwarded=used, budget=1000, occupancy=occ, compacted=compacted,
                           view_version=view_version)


def populate(ts: Any, tenant_id: str) -> Scenario:
    """Write the whole scenario through `ts` (a TenantStore or the fake) and return the assigned ids."""
    result = ts.ingest(conversation_messages(), model=MODEL, external_id="ext-42", count_tokens=count_tokens)
    cid = result.conversation.id
    ids = tuple(m.id for m in result.messages)
    added, _ = ts.upsert_anchors(cid, [
        AnchorDraft("order", "order number", "A-1001", ids[2], 2),
        AnchorDraft("path", "config file", "/srv/app/deploy.yaml", ids[12], 12)])
    leaves = tuple(ts.add_summary(_leaf(cid, ids, a, b)) for a, b in ((1, 8), (9, 16), (17, 24), (25, 30)))
    for i, leaf in enumerate(leaves):
        ts.record_event(_committed(cid, leaf, tuple(a.id for a in added) if i == 0 else ()))
    ts.save_view(ContextView(cid, 0, (ViewItem("message", "0"), *(ViewItem("summary", s.id) for s in leaves)),
                             30))
    correction = AnchorDraft("order", "order number", "A-1002", ids[20], 20)
    corr_added, corr_sup = ts.upsert_anchors(cid, [correction])
    ts.record_event(CompactionEvent(conversation_id=cid, trigger="threshold", tier="condensed",
                                    level="normal", outcome="rejected", summarizer_model="openai/gpt-4o-mini",
                                    prompt_version="v1", source_summary_ids=tuple(s.id for s in leaves),
                                    tokens_before=120, verification="failed", rejected_facts=("9999",),
                                    duration_ms=40.0))
    condensed = ts.add_summary(SummaryDraft(
        conversation_id=cid, kind="condensed", depth=1, level="aggressive",
        content="Intent: roll out build 7731. Decisions: order A-1002. Expand for details about: rollout.",
        token_count=45, first_seq=1, last_seq=30, source_summary_ids=tuple(s.id for s in leaves),
        model="openai/gpt-4o-mini", prompt_version="v1"))
    ts.record_event(_committed(cid, condensed, tuple(a.id for a in corr_added),
                               tuple(a.id for a in corr_sup)))
    late = ts.add_summary(_leaf(cid, ids, 31, 34))
    ts.record_event(_committed(cid, late))
    ts.record_event(CompactionEvent(conversation_id=cid, trigger="hard_budget", tier="leaf", level="normal",
                                    outcome="failed", summarizer_model="openai/gpt-4o-mini",
                                    prompt_version="v1", error="summarizer timed out after 60s"))
    ts.save_view(ContextView(cid, 0, (ViewItem("message", "0"), ViewItem("summary", condensed.id),
                                      ViewItem("summary", late.id)), 34))
    for rec in (_forwarded(cid, 20, "a", 0, False, 10, 0, 600),
                _forwarded(cid, 22, "a", 0, False, 10, 0, 660),
                _forwarded(cid, 24, "a", 0, False, 10, 0, 720),
                _forwarded(cid, 12, "b", 1, True, 10, 120, 300),
                _forwarded(cid, 14, "b", 2, True, 10, 75, 360),
                _forwarded(cid, 16, "b", 2, True, 10, 75, 420)):
        ts.record_forwarded(rec)
    return Scenario(cid, tenant_id, ids, leaves, condensed, late)
