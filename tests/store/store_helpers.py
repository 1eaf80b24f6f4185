"""Helpers shared by the store tests (a uniquely named module: tests/store has no __init__)."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.types import Message
from store.interface import StoreBackend
from store.postgres.store import PgStore
from store.sqlite.store import Store


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
    msgs: list[Message] = [{"role": "system", "content": system}]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"turn {i}: tell me about {topic} number {i}"})
        msgs.append({"role": "assistant", "content": f"reply {i}: {topic} {i} are fine"})
    return msgs


def sql(store: StoreBackend, text: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run raw SQL (`?` placeholders) on either backend, behind the store's back (tests only)."""
    if isinstance(store, PgStore):
        with store.db.lock:
            cur = store.db.conn.execute(text.replace("?", "%s"), params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
    assert isinstance(store, Store)
    with store.lock:
        return [tuple(r) for r in store.conn.execute(text, params).fetchall()]


def scalar(store: StoreBackend, text: str, params: tuple[Any, ...] = ()) -> Any:
    """The first column of the first row of a raw query."""
    return sql(store, text, params)[0][0]


def require_sqlite(store: StoreBackend) -> Store:
    """The SQLite store, or skip: the test reads SQLite internals (FTS5 tables, pragmas)."""
    if not isinstance(store, Store):
        pytest.skip("reads SQLite internals (FTS5 shadow tables); PostgreSQL is covered by the other tests")
    return store


def set_created_at(store: StoreBackend, table: str, ids: list[Any], when: float) -> None:
    """Move rows in time (tests of since/before/last); `ids` are the table's id column values."""
    assert table in ("messages", "summaries")
    for i in ids:
        sql(store, f"UPDATE {table} SET created_at = ? WHERE id = ?", (when, i))
