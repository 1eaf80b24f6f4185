"""Helpers shared by the store tests (a uniquely named module: tests/store has no __init__)."""

from __future__ import annotations

from typing import Any

from store.store import Store


class TokenCounter:
    """count_tokens callback that records which messages it was asked about."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def __call__(self, m: dict[str, Any]) -> int:
        self.seen.append(m)
        return 3 + len(str(m.get("content") or "")) // 4


def history(turns: int, topic: str = "invoices",
            system: str = "You are a careful assistant.") -> list[dict[str, Any]]:
    """A deterministic chat: system prompt then `turns` user/assistant pairs."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"turn {i}: tell me about {topic} number {i}"})
        msgs.append({"role": "assistant", "content": f"reply {i}: {topic} {i} are fine"})
    return msgs


def set_created_at(store: Store, table: str, ids: list[Any], when: float) -> None:
    """Move rows in time (tests of since/before/last); `ids` are the table's id column values."""
    assert table in ("messages", "summaries")
    with store.lock:
        for i in ids:
            store.conn.execute(f"UPDATE {table} SET created_at = ? WHERE id = ?", (when, i))
