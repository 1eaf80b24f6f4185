"""A minimal engine for HTTP-layer tests: real store ingest, no compaction (forwards everything).

It follows the Engine contract (prepare / record_reply / after_turn / aclose) so proxy tests can
isolate HTTP behaviour from compaction decisions; tests/proxy/server/test_store_identity.py uses the real one.
"""

from __future__ import annotations

from typing import Any

from compaction.engine import EarlyStart
from compaction.messages import strip_private_fields, validate_messages
from compaction.resend.early_forward import EarlyForward
from compaction.tokens import TokenCounter
from compaction.types import ChatTurn, Message, Occupancy, PreparedRequest


class PassthroughEngine:
    def __init__(self, store: Any, *_: Any) -> None:
        self.store = store
        self.replies: list[dict[str, Any]] = []
        self.after_turns = 0

    def early(self, turn: ChatTurn) -> None:
        """Never hands a request over from the HTTP loop (`prepare`'s `early` is the test seam)."""
        return None

    async def prepare(self, turn: ChatTurn, early: EarlyForward | None = None,
                      start: EarlyStart | None = None) -> PreparedRequest:
        messages = validate_messages(list(turn.messages))
        counter = TokenCounter.for_model(turn.upstream.model)
        result = self.store.for_tenant(turn.tenant_id).ingest(
            messages, model=turn.model, external_id=turn.external_conversation_id,
            count_tokens=counter.count_message)
        forwarded = tuple(strip_private_fields(m) for m in messages)
        tokens = sum(m.token_count for m in result.messages)
        return PreparedRequest(
            conversation_id=result.conversation.id, messages=forwarded, tools=turn.tools,
            tokens_received=tokens, tokens_forwarded=tokens, budget=turn.context_window,
            compacted=False, summary_ids=(), occupancy=Occupancy(fresh_tail=tokens),
            waited_on_summarizer=False, forced_truncation=False, prefix_stable=None,
            last_seq=result.messages[-1].seq, last_chain_hash=result.messages[-1].chain_hash)

    def note_cache_read(self, prepared: PreparedRequest, turn: ChatTurn, tokens: int) -> None:
        self.store.for_tenant(turn.tenant_id).note_cache_read(prepared.conversation_id, tokens)

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: Message) -> None:
        self.replies.append(message)
        assert prepared.last_seq is not None
        self.store.for_tenant(turn.tenant_id).append_reply(
            prepared.conversation_id, message, 1, parent_seq=prepared.last_seq,
            parent_chain=prepared.last_chain_hash)

    def after_turn(self, prepared: PreparedRequest, turn: ChatTurn) -> bool:
        """Counts the call; never schedules a compaction step (False, as the contract reports it)."""
        self.after_turns += 1
        return False

    async def aclose(self) -> None:
        return None


def factory(store: Any, *_: Any) -> PassthroughEngine:
    return PassthroughEngine(store)
