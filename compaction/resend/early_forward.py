"""Forwarding a passthrough resend before its bookkeeping, so a large history does not wait on it.

While a conversation is uncompacted and fits its budget, ctxproxy forwards the client's messages
exactly as received. A resend of such a conversation (the previous request's messages, the reply
stored to it, then new ones) is known to stay so from what this process knows: the previous
request's outcome (compaction/resend/previous.py keeps it), the reply it stored after it (an edited reply
would fork) and the new messages (no new system message, within budget): `extended` checks them.
No store is read first: the HTTP loop decides (`Engine.early`, bounded work) and forwards at once,
and the engine thread does the request's bookkeeping (ingest, the forwarded record) while the
provider works. After ingest the premises are confirmed (`confirmed`, and no saved view: the plan
of an uncompacted conversation is its request, compaction/view/plan.py); when one fails the request
is planned in full as any other, recorded so, and a difference in what was forwarded reported
(`CompactionObserver.on_early_mismatch`). A view saved in this process ends early forwarding of its
conversation at once (`Resends.compacted`); one saved by another process (`ctxproxy compact`, a
replica) is found by that confirmation, so the one request forwarded meanwhile goes uncompacted,
still within budget. tests/compaction/resend/test_early_forward.py checks that what is handed over is
what a full preparation forwards.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from compaction.messages import PRIVATE_FIELDS
from compaction.tokens import TokenCounter
from compaction.toolpairs import SYSTEM_ROLES
from compaction.types import ChatTurn, PreparedRequest
from store.encoding.identity import content_hash, trimmed_hash
from store.history.revisions import MIN_KEPT, holds_in_order
from store.models import Message

# Handed the forwarded request before the bookkeeping, which goes on when it returns.
EarlyForward = Callable[[PreparedRequest], Awaitable[None]]
# Of the turn, what the budget and the forwarded tools depend on (compaction/view/budget.py).
Signature = tuple[str, tuple[dict[str, Any], ...], object, int, int | None, bool]
# Fields only the full preparation knows (the stored ids the reply is attached to).
_SETTLED_ONLY = frozenset({"last_seq", "last_chain_hash", "messages_json", "prefix_tokens",
                           "billed_input_estimate", "full_history_billed_estimate"})
_PRIVATE = frozenset(PRIVATE_FIELDS)


@dataclass(frozen=True)
class Passthrough:
    """A request forwarded exactly as received, nothing compacted: what its resend starts from."""

    prepared: PreparedRequest
    signature: Signature
    reply_hash: str | None = None  # content hash of the reply this process stored after it
    reply_tokens: int = 0  # its token count as stored (what the full preparation counts for it)
    reply_trimmed: str | None = None  # its trimmed hash (a client rebuilding its history may trim it)
    counts: tuple[int, ...] = ()  # tokens of each forwarded message, as the full preparation counted


def signature(turn: ChatTurn) -> Signature:
    return (turn.model, turn.tools, turn.settings, turn.context_window, turn.max_reply_tokens,
            turn.offer_recall)


def passthrough(prepared: PreparedRequest, messages: list[Message], turn: ChatTurn,
                view_version: int, counts: tuple[int, ...]) -> Passthrough | None:
    """`prepared`'s Passthrough when it forwards `messages` themselves (no copy: no `pinned` was
    stripped), with no summary, anchor, truncation or saved view; else None. `counts`: the
    messages' tokens as counted."""
    if (prepared.compacted or prepared.forced_truncation or prepared.events or view_version
            or not len(prepared.messages) == len(messages) == len(counts)
            or not all(map(operator.is_, prepared.messages, messages))):
        return None
    return Passthrough(replace(prepared, last_seq=None, last_chain_hash=None, messages_json=None),
                       signature(turn), counts=counts)


def _continues(prior: Passthrough, new: list[Message]) -> bool:
    """Whether `new` starts with the reply stored after `prior` (as identity hashes it, SDK echo
    noise aside): the request then extends the stored conversation rather than forking it."""
    return prior.reply_hash is not None and bool(new) and content_hash(new[0]) == prior.reply_hash


def extended(prior: Passthrough, turn: ChatTurn, messages: list[Message], counter: TokenCounter,
             encoded: bytes | None = None) -> tuple[PreparedRequest, dict[int, int]] | None:
    """The forwarded request of `turn` when its `messages` (validated) resend `prior`'s (as the resend
    handed them on, compaction/resend/previous.py) and then new ones, all forwarded as received; None
    when that is not certain (not first the reply stored after `prior`, a new system message, one
    with `pinned`, different parameters, or over the budget). `encoded`: the request's messages as
    one JSON list (compaction/resend/previous.py), forwarded as they are. The reply is counted as
    stored, as the full preparation counts it: a client may echo it with fewer fields (Codex drops
    its items' ids and statuses), which identity ignores. With the other new messages' token counts
    (by `id`), which ingest then does not make again."""
    before = prior.prepared
    new = messages[len(before.messages):]
    if not _continues(prior, new) or signature(turn) != prior.signature or any(
            m.get("role") in SYSTEM_ROLES or not _PRIVATE.isdisjoint(m) for m in new):
        return None
    counts = _counts(counter, new[1:])
    added = prior.reply_tokens + sum(counts.values())
    if before.tokens_forwarded + added > before.budget:
        return None
    occupancy = replace(before.occupancy, fresh_tail=before.occupancy.fresh_tail + added)
    return replace(before, messages=tuple(messages),
                   tokens_received=before.tokens_received + added,
                   tokens_forwarded=before.tokens_forwarded + added, occupancy=occupancy,
                   prefix_stable=True, messages_json=encoded), counts


def _counts(counter: TokenCounter, messages: list[Message]) -> dict[int, int]:
    """The messages' token counts by `id`, as ingest counts them (they carry no private field)."""
    return {id(m): counter.count_message(m) for m in messages}


def rebuilt(prior: Passthrough, dropped: tuple[Message, ...], turn: ChatTurn, messages: list[Message],
            counter: TokenCounter, encoded: bytes | None = None
            ) -> tuple[PreparedRequest, dict[int, int]] | None:
    """The forwarded request of `turn` when its `messages` rebuild `prior`'s: keep its leading ones,
    drop `dropped` (the rest of them), then new ones, which hold the dropped assistant messages and
    the reply stored after `prior` (text trimmed), with more after that reply (`_holds_dropped`). The
    store revises the same conversation (store/history/revisions.py), still uncompacted: its plan is
    the request as received, when within the budget. With the new messages' token counts (by `id`),
    for ingest."""
    kept = messages[:len(prior.prepared.messages) - len(dropped)]
    new = messages[len(kept):]
    if (prior.reply_trimmed is None or not _may_rebuild(prior, kept, turn, new)
            or not _holds_dropped(dropped, prior.reply_trimmed, new)):
        return None
    counts = _counts(counter, new)
    change = sum(counts.values()) - sum(prior.counts[len(kept):])
    before = prior.prepared
    if before.tokens_forwarded + change > before.budget:
        return None
    occupancy = replace(before.occupancy, fresh_tail=before.occupancy.fresh_tail + change)
    return replace(before, messages=tuple(messages), tokens_received=before.tokens_received + change,
                   tokens_forwarded=before.tokens_forwarded + change, occupancy=occupancy,
                   prefix_stable=False, messages_json=encoded), counts


def _may_rebuild(prior: Passthrough, kept: list[Message], turn: ChatTurn, new: list[Message]) -> bool:
    """What a rebuild's early forward needs besides the replies: the store's own rule (it keeps a
    conversation's first messages, not only system ones), the prior's counts, the same parameters,
    and new messages that are neither system messages nor carry ctxproxy's fields."""
    return (len(kept) >= MIN_KEPT and not all(m.get("role") in SYSTEM_ROLES for m in kept)
            and len(prior.counts) == len(prior.prepared.messages) and signature(turn) == prior.signature
            and not any(m.get("role") in SYSTEM_ROLES or not _PRIVATE.isdisjoint(m) for m in new))


def _holds_dropped(dropped: tuple[Message, ...], reply: str, new: list[Message]) -> bool:
    """Whether `new` holds the reply stored after the previous request with new input after it, and
    every assistant message the rebuild dropped from its old place. Which of those were provider
    replies (they must stay in order, store/history/revisions.py) only the store knows; when it
    disagrees, the request is planned in full and the difference reported."""
    if not holds_in_order([reply], new):
        return False
    echoed = {trimmed_hash(m) for m in new if m.get("role") == "assistant"}
    return all(trimmed_hash(m) in echoed for m in dropped if m.get("role") == "assistant")


def confirmed(early: PreparedRequest, conversation_id: str, tokens_received: int, stored: int) -> bool:
    """After ingest, whether the early forward is the request's plan: an uncompacted conversation's
    plan is its request as received (compaction/view/plan.py), so it is, when the request went to the
    same conversation, was counted alike and is stored one message per request message (and the
    conversation has no saved view, which the engine checks). Else the engine plans it in full."""
    return (conversation_id == early.conversation_id and tokens_received == early.tokens_received
            and stored == len(early.messages))


def differences(early: PreparedRequest, settled: PreparedRequest) -> tuple[str, ...]:
    """The fields in which the early forward differs from the full preparation (none expected)."""
    return tuple(f.name for f in fields(PreparedRequest) if f.name not in _SETTLED_ONLY
                 and getattr(early, f.name) != getattr(settled, f.name))
