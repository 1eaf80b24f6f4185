"""A forked conversation starts with its parent's summaries for the history they share.

A fork (an edited or regenerated history, stored as a new conversation) shares a prefix with its
parent, message for message. The parent's summaries of that prefix are still true for the fork, so
they are copied in as prepared summaries (sources mapped to the fork's own messages, condensed
summaries to the copies of theirs), with the parent's anchors from that prefix; the fork's first
step substitutes them like any prepared summary instead of summarizing from scratch while its
client waits. Summaries covering a message the fork must forward raw (its last user message, its
last message) are not copied. Only the store's Protocol methods are used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from store.interface import TenantAccess
from store.models import AnchorDraft, IngestResult, StoredMessage, SummaryDraft, SummaryRecord


def shared_prefix(parent: Sequence[StoredMessage], fork: Sequence[StoredMessage]) -> int:
    """How many leading messages the two histories have in common (same chain hash, same seq)."""
    n = 0
    for a, b in zip(parent, fork, strict=False):
        if a.seq != b.seq or a.chain_hash != b.chain_hash:
            break
        n += 1
    return n


def adopt_parent_summaries(tenant: TenantAccess, fork: IngestResult) -> int:
    """Copy the parent's summaries (and anchors) of the shared history into `fork`; how many."""
    parent_id = fork.conversation.forked_from
    if parent_id is None or not fork.forked:
        return 0
    parent = tenant.messages(parent_id)
    shared = shared_prefix(parent, fork.messages)
    protected = {m.seq for m in _protected(fork.messages)}
    ids = {p.id: f.id for p, f in zip(parent[:shared], fork.messages[:shared], strict=True)
           if p.seq not in protected}
    if not ids:
        return 0
    copied = _copy_summaries(tenant, fork.conversation.id, tenant.summaries(parent_id), ids)
    _copy_anchors(tenant, parent_id, fork.conversation.id, ids, {p.id: p.seq for p in parent})
    return copied


def _protected(messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    last_user = [m for m in messages if m.role == "user"][-1:]
    return last_user + list(messages[-1:])


def _copy_summaries(tenant: TenantAccess, cid: str, summaries: Sequence[SummaryRecord],
                    ids: dict[int, int]) -> int:
    """Copies in creation order, so a condensed summary finds the copies of its sources."""
    copies: dict[str, str] = {}
    for record in summaries:
        messages = [ids.get(i) for i in record.source_message_ids]
        sources = [copies.get(s) for s in record.source_summary_ids]
        if None in messages or None in sources or not (messages or sources):
            continue
        draft = _draft(replace(record, conversation_id=cid),
                       tuple(m for m in messages if m is not None),
                       tuple(s for s in sources if s is not None))
        copies[record.id] = tenant.add_summary(draft).id
    return len(copies)


def _draft(record: SummaryRecord, messages: tuple[int, ...], summaries: tuple[str, ...]) -> SummaryDraft:
    return SummaryDraft(record.conversation_id, record.kind, record.depth, record.level, record.content,
                        record.token_count, record.first_seq, record.last_seq, messages, summaries,
                        record.model, record.prompt_version)


def _copy_anchors(tenant: TenantAccess, parent_id: str, cid: str, ids: dict[int, int],
                  seqs: dict[int, int]) -> None:
    drafts = [AnchorDraft(a.kind, a.key, a.value, ids[a.source_message_id], seqs[a.source_message_id])
              for a in tenant.anchors(parent_id)
              if a.source_message_id is not None and a.source_message_id in ids]
    if drafts:
        tenant.upsert_anchors(cid, drafts)
