"""Stored-prefix rows recently read, per conversation, bounded (LRU by rows held).

A client resends its whole history each turn, so ingest read every stored row of it each time
(most of a 100k-token resend's store time). A conversation's message rows never change once written
but for `pinned` (set, never cleared), which ingest reads from the database each time; so a row read
once is as good as a row read again. Only rows read from the database (committed) are kept, never
rows being written, and a cached run is used only when the request's own chain hash confirms it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

Row = tuple[Any, ...]  # store/ingest.py `_MSG_COLUMNS`, in order
MAX_ROWS = 16_384  # some 50 resent 100k-token histories
# Bytes one kept row costs at most: the tuple, its ints and float, two 64-hex hashes (the conversation
# id, role and source strings are shared; tests/store/test_prefix_rows.py measures it). 7 MiB in all.
ROW_BYTES = 448
_SEQ, _CHAIN = 2, 5


class PrefixRows:
    """Leading message rows of recently ingested conversations; thread-safe."""

    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self._rows: OrderedDict[str, tuple[Row, ...]] = OrderedDict()
        self._held = 0
        self._max = max_rows
        self._lock = threading.Lock()

    def leading(self, conversation_id: str, chain: Sequence[str], upto: int) -> tuple[Row, ...]:
        """The cached rows of seq 0..n-1 (n <= upto) when row n-1 carries the request's chain hash
        there (the chain then vouches for every row before it); () otherwise."""
        with self._lock:
            rows = self._rows.get(conversation_id)
            if rows is not None:
                self._rows.move_to_end(conversation_id)
        if not rows:
            return ()
        n = min(len(rows), upto, len(chain))
        if n and rows[n - 1][_SEQ] == n - 1 and rows[n - 1][_CHAIN] == chain[n - 1]:
            return rows[:n]
        return ()

    def keep(self, conversation_id: str, rows: tuple[Row, ...]) -> None:
        """Remember the rows seq 0..len-1 of a conversation as read; the oldest go past the bound."""
        with self._lock:
            old = self._rows.pop(conversation_id, None)
            self._held -= len(old) if old is not None else 0
            if not rows or len(rows) > self._max:
                return
            self._rows[conversation_id] = rows
            self._held += len(rows)
            while self._held > self._max:
                _, dropped = self._rows.popitem(last=False)
                self._held -= len(dropped)

    def forget(self, conversation_ids: Sequence[str] | None = None) -> None:
        """Drop some conversations' rows (deleted), or all of them."""
        with self._lock:
            for cid in list(self._rows) if conversation_ids is None else conversation_ids:
                old = self._rows.pop(cid, None)
                self._held -= len(old) if old is not None else 0

    @property
    def held(self) -> int:
        return self._held

    @property
    def held_bytes(self) -> int:
        """What the rows held cost, estimated from ROW_BYTES."""
        return self._held * ROW_BYTES

    @property
    def max_bytes(self) -> int:
        return self._max * ROW_BYTES
