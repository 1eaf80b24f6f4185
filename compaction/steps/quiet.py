"""Conversations whose last background step found nothing to prepare: no new step until they grow.

Once a conversation is compacted, every request of it stays over the threshold, and each would
schedule a background step that loads the whole conversation only to find that the prepared
summaries already reach the preparation limit (measured: about 25 ms of CPU per request on a resent
100k-token history in a 32k window, five times the request's own). A step finds new work only once
new raw material has arrived, so after an idle step the next waits until the request has grown by
the smallest leaf chunk (budget.MIN_LEAF_CHUNK_TOKENS). A step that prepared something, or failed,
lets the next one run at once.
"""

from __future__ import annotations

from compaction.view.budget import MIN_LEAF_CHUNK_TOKENS
from config.sized_lru import SizedLru

MAX_CONVERSATIONS = 16_384  # one int each: well under 2 MiB
ENTRY_BYTES = 112  # one conversation id and its int in the ordered dict, about


class QuietConversations:
    """The request size (tokens received) at each conversation's last idle background step."""

    def __init__(self, max_conversations: int = MAX_CONVERSATIONS, name: str | None = None) -> None:
        self._idle: SizedLru[str, int] = SizedLru(max_conversations, name=name, unit_bytes=ENTRY_BYTES)

    def due(self, conversation_id: str, tokens: int) -> bool:
        """Whether a background step may find something new for a request of `tokens`."""
        idle = self._idle.get(conversation_id)
        return idle is None or tokens - idle >= MIN_LEAF_CHUNK_TOKENS or tokens < idle

    def settled(self, conversation_id: str, tokens: int, prepared_any: bool) -> None:
        """Note a step's outcome: idle at `tokens` when it prepared nothing, else not idle."""
        if prepared_any:
            self._idle.discard(conversation_id)
        else:
            self._idle.put(conversation_id, tokens, 1)
