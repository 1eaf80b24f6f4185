"""One request's plan: its context (budget, counter, system messages) and working view, measured, planned."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from compaction.anchors.extract import render_anchor_block
from compaction.messages import private_positions, strip_private_fields
from compaction.summarize.prompts import render_summary_message
from compaction.tokens import TokenCounter
from compaction.toolpairs import SYSTEM_ROLES
from compaction.types import ChatTurn
from compaction.view.budget import Budget
from compaction.view.elision import RecallNames
from compaction.view.entry import Entry
from compaction.view.plan import REPLY_PRIMING, Plan, Render, Slot, SystemMessage, build_plan
from compaction.view.slot_memo import SLOT_MEMO
from compaction.view.workview import WorkingView
from config.settings import RecallSettings
from store.interface import TenantAccess
from store.models import IngestResult, Message, SummaryRecord

_SEQ = operator.attrgetter("seq")


@dataclass(frozen=True)
class RequestContext:
    """The engine's working inputs for one ChatTurn (messages, budget, keys), computed once."""

    turn: ChatTurn
    messages: list[Message]  # validated request body (may carry `pinned`)
    ingest: IngestResult
    counter: TokenCounter
    budget: Budget
    tenant: TenantAccess
    recall: RecallSettings
    client_tools_tokens: int
    keys: Sequence[bytes | None] = ()  # the messages' exact JSON (store/encoding/running_hashes.py)
    body: dict[int, Message] = field(default_factory=dict)  # by seq: what is forwarded raw
    key_by_id: dict[int, bytes | None] = field(default_factory=dict)  # a body's exact JSON, by id()
    anchor_tokens: dict[tuple[int, ...], int] = field(default_factory=dict)  # by anchor snapshot

    def __post_init__(self) -> None:
        """A message without ctxproxy's own fields is forwarded as received (no copy: nothing
        mutates it), so its exact JSON is known; one with `pinned` is forwarded without it."""
        seqs = list(map(_SEQ, self.ingest.messages))
        self.body.update(zip(seqs, self.messages, strict=False))
        if len(self.keys) == len(self.messages):
            self.key_by_id.update(zip(map(id, self.messages), self.keys, strict=True))
        for i in private_positions(self.messages[:len(seqs)]):
            self.body[seqs[i]] = strip_private_fields(self.messages[i])
            self.key_by_id.pop(id(self.messages[i]), None)

    @property
    def conversation_id(self) -> str:
        return self.ingest.conversation.id

    @functools.cached_property
    def last_seq(self) -> int:
        return max(map(_SEQ, self.ingest.messages), default=-1)

    @functools.cached_property
    def tokens_received(self) -> int:
        tokens: int = sum(map(operator.attrgetter("token_count"), self.ingest.messages))
        return REPLY_PRIMING + tokens + self.client_tools_tokens

    @property
    def recall_names(self) -> RecallNames | None:
        """The tools truncation markers may name: only when this request offers them."""
        if not self.turn.offer_recall:
            return None
        return RecallNames(self.recall.search_tool_name, self.recall.expand_tool_name)

    @property
    def render_summary(self) -> Callable[[SummaryRecord], Message]:
        return self.renderer(self.recall, self.turn.offer_recall)

    @staticmethod
    def renderer(recall: RecallSettings, offered: bool) -> Callable[[SummaryRecord], Message]:
        """Summary rendering with retrieval hints only when the recall tools are `offered`."""
        def render(record: SummaryRecord) -> Message:
            return render_summary_message(record, tools_offered=offered,
                                          expand_tool_name=recall.expand_tool_name)
        return render


def plan_for(ctx: RequestContext, wv: WorkingView) -> Plan:
    """The untruncated plan of the request over the working view."""
    system = [SystemMessage(ctx.body.get(m.seq, strip_private_fields(m.message)), m.token_count,
                            str(m.id), i)
              for i, m in enumerate(ctx.ingest.messages) if m.role in SYSTEM_ROLES]
    block = anchor_block_for(ctx.tenant, ctx.conversation_id, wv, ctx.budget, ctx.counter)
    anchor_tokens = ctx.counter.count_message(block) if block else 0

    def render(entry: Entry) -> Message:
        if entry.kind == "summary":
            return ctx.render_summary(wv.summaries[entry.ref])
        message = ctx.body.get(entry.seq) or strip_private_fields(wv.stored[entry.seq].message)
        if entry.elided:  # an old oversized tool result, elided in place by a step
            return {**message, "content": wv.summaries[entry.elided].content}
        return message

    def slots(entries: Sequence[Entry], render: Render) -> list[Slot]:
        return SLOT_MEMO.slots(ctx.conversation_id, entries, render, ctx.body)

    return build_plan(system, block, anchor_tokens, wv.entries, render,
                      tools_tokens=ctx.budget.tools_tokens, budget=ctx.budget.total,
                      request_length=len(ctx.messages), make_slots=slots)


def measure_request(ctx: RequestContext, wv: WorkingView) -> int:
    """Input tokens `plan_for(ctx, wv)` would have, without building the plan (a step measures
    every candidate view)."""
    system = sum(m.token_count for m in ctx.ingest.messages if m.role in SYSTEM_ROLES)
    anchors = ctx.anchor_tokens.get(wv.anchor_ids)
    if anchors is None:
        block = anchor_block_for(ctx.tenant, ctx.conversation_id, wv, ctx.budget, ctx.counter)
        anchors = ctx.anchor_tokens[wv.anchor_ids] = ctx.counter.count_message(block) if block else 0
    return REPLY_PRIMING + system + anchors + sum(e.tokens for e in wv.entries) + ctx.budget.tools_tokens


def anchor_block_for(tenant: TenantAccess, cid: str, wv: WorkingView, budget: Budget,
                     counter: TokenCounter) -> Message | None:
    """The anchor block of the view's snapshot (stable between steps); None before any step.

    The snapshot's anchors were active when it was taken and render so until the next step, even
    when a newer value supersedes one meanwhile (the block's bytes, the prompt cache's prefix, stay)."""
    if not wv.anchor_ids:
        return None
    wanted = set(wv.anchor_ids)
    anchors = [a if a.status == "active" else replace(a, status="active")
               for a in tenant.anchors(cid, include_superseded=True) if a.id in wanted]
    return render_anchor_block(anchors, max_tokens=budget.anchor_max, counter=counter)


def measure_stored(wv: WorkingView, budget: Budget, counter: TokenCounter, tenant: TenantAccess,
                   cache: dict[tuple[int, ...], int] | None = None) -> int:
    """Input tokens a request for the stored conversation would take (background: no request body);
    `cache` keeps the anchor block's size by snapshot across the measures of one step."""
    cache = {} if cache is None else cache
    anchors = cache.get(wv.anchor_ids)
    if anchors is None:
        block = anchor_block_for(tenant, wv.conversation_id, wv, budget, counter)
        anchors = cache[wv.anchor_ids] = counter.count_message(block) if block else 0
    system = sum(m.token_count for m in wv.system)
    return REPLY_PRIMING + system + anchors + sum(e.tokens for e in wv.entries) + budget.tools_tokens
