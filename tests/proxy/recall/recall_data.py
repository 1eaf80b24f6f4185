"""Recall test data: a real SQLite store populated for two tenants (used by conftest fixtures)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from config.settings import LiteLLMParams, ModelEntry, Settings, StoreSettings
from store.models import SummaryDraft
from store.sqlite.store import Store

ALPHA_KEY, BETA_KEY = "sk-test-alpha-0001", "sk-test-beta-0002"
DAY = 86_400.0
FACT = "Order number is ORD-2024-1187 for Ingrid Halvorsen"


@dataclass(frozen=True)
class Populated:
    """Ids of what the fixture stored (message ids as decimal strings)."""

    path: str
    alpha_conv: str  # alpha's older conversation, with a summary
    alpha_recent: str  # alpha's most recently active conversation
    beta_conv: str
    fact_id: str  # the planted fact (alpha_conv, user)
    reply_id: str  # an assistant message mentioning the order (alpha_conv)
    tool_id: str  # a tool result (alpha_conv)
    bag_id: str  # alpha_conv's last user message (kayak bag)
    old_id: str  # alpha_conv message dated 10 days ago
    summary_id: str  # leaf summary over alpha_conv's first messages
    beta_id: str  # beta's message with the same order word


def _count(_m: dict[str, Any]) -> int:
    return 10


def _alpha_history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a helpful shop assistant."},
        {"role": "user", "content": "Cancel my old subscription to the kayak magazine please."},
        {"role": "user", "content": FACT + ", please ship it to Bergen."},
        {"role": "assistant", "content": "Noted: the order for Ingrid ships to Bergen by Friday.",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "lookup_order", "arguments": '{"order": "ORD-2024-1187"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "status: packed, warehouse Trondheim"},
        {"role": "assistant", "content": "Your parcel is packed in Trondheim."},
        {"role": "user", "content": "Thanks, also add a waterproof kayak bag."},
    ]


def populate(path: str) -> Populated:
    store = Store.open(StoreSettings(path=path))
    try:
        alpha = store.for_tenant(store.tenant_id_for_key(ALPHA_KEY))
        beta = store.for_tenant(store.tenant_id_for_key(BETA_KEY))
        conv = alpha.ingest(_alpha_history(), model="gpt-4o-mini", external_id=None, count_tokens=_count)
        ids = [str(m.id) for m in conv.messages]
        summary = alpha.add_summary(SummaryDraft(
            conversation_id=conv.conversation.id, kind="leaf", depth=0, level="extractive",
            content="Intent: cancel the kayak magazine subscription; order ORD-2024-1187 ships to Bergen.",
            token_count=20, first_seq=1, last_seq=3, source_message_ids=tuple(int(i) for i in ids[1:4]),
            model="local/extractive"))
        # Dates: message 1 is ten days old; the rest stay "now". created_at is not indexed text.
        store.conn.execute("UPDATE messages SET created_at = ? WHERE id = ?",
                           (time.time() - 10 * DAY, ids[1]))
        store.conn.commit()
        recent = alpha.ingest([{"role": "user", "content": "Which kayak paddle length suits me?"}],
                              model="gpt-4o-mini", external_id="second", count_tokens=_count)
        other = beta.ingest([{"role": "user", "content": "My kayak order ORD-7777 is late."}],
                            model="gpt-4o-mini", external_id=None, count_tokens=_count)
        return Populated(path, conv.conversation.id, recent.conversation.id, other.conversation.id,
                         fact_id=ids[2], reply_id=ids[3], tool_id=ids[4], bag_id=ids[6], old_id=ids[1],
                         summary_id=summary.id, beta_id=str(other.messages[0].id))
    finally:
        store.close()



def settings_for(path: str) -> Settings:
    return Settings(model_list=(ModelEntry("*", LiteLLMParams("openai/*", "http://127.0.0.1:9/v1")),),
                    store=StoreSettings(path=path))
