"""Stored-prefix rows recently read, per conversation, bounded (LRU by rows and by bytes held).

A client resends its whole history each turn, so ingest read every stored row of it each time
(most of a 100k-token resend's store time). A conversation's message rows never change once written
but for `pinned` (set, never cleared), which ingest reads from the database each time; so a row read
once is as good as a row read again. Only rows read from the database (committed) are kept, never
rows being written, and a cached run is used only when the request's own chain hash confirms it.

Beside the rows, the StoredMessages ingest made of them last time, each with the exact JSON of the
request message its body came from (store/encoding/running_hashes.py `exact_keys`): a resent message with the
same exact JSON over the same row (its `pinned` flag included) is that same record, so it is reused
instead of being built again. A record's body is never handed to a provider (the engine forwards the
request's own dicts), only read. Kept keys are right-sized copies (store/encoding/running_hashes.py `kept`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.encoding.running_hashes import as_held, kept, key_bytes
from store.models import StoredMessage

Row = tuple[Any, ...]  # store/history/ingest.py `_MSG_COLUMNS`, in order
MAX_ROWS = 16_384  # some 50 resent 100k-token histories
# Bytes one kept row costs at most: the tuple, its ints and float, two 64-hex hashes (the conversation
# id, role and source strings are shared; tests/store/test_prefix_rows.py measures it). 7 MiB in all.
ROW_BYTES = 448
# Bytes of one kept record beyond its message's JSON, which it holds twice (the key, and the body's
# strings): the record and its attribute dict, the body dict (tests/store/test_prefix_rows.py).
RECORD_BYTES = 1_024
MAX_MADE_BYTES = 6 * 1024 * 1024  # the records: about six resent 100k-token histories
_ID, _SEQ, _CHAIN, _PINNED = 0, 2, 5, 7


def made_bytes(keys: Sequence[bytes | None]) -> int:
    """What the records made from messages with exact JSON `keys` cost: RECORD_BYTES each and
    their JSON twice."""
    return 2 * key_bytes(keys) + RECORD_BYTES * len(keys)


@dataclass(frozen=True)
class Made:
    """The records ingest made of a conversation's leading rows, and the request keys they came from."""

    rows: tuple[Row, ...]  # what the records were made of
    keys: tuple[bytes | None, ...]
    messages: tuple[StoredMessage, ...]
    size: int  # what the records cost in bytes, estimated (RECORD_BYTES and their JSON twice)

    @classmethod
    def of(cls, rows: tuple[Row, ...], keys: Sequence[bytes | None], messages: tuple[StoredMessage, ...],
           before: Made, leading: int = 0) -> Made:
        """The records of `rows` made from messages with exact JSON `keys`. A record reused from
        `before` keeps its key as kept there (the first `leading` ones, by position, take the
        caller's own key objects when those are held ones: `as_held`); the others' keys are copied
        right-sized."""
        held = as_held(before.keys[:leading], keys) + tuple(
            before.keys[i] if i < len(before.messages) and before.messages[i] is m else None if k is None
            else kept(k) for i, k, m in zip(range(leading, len(messages)), keys[leading:], messages[leading:],
                                            strict=True))
        return cls(rows, held, messages, made_bytes(held))

    def leading(self, rows: Sequence[Row], keys: Sequence[bytes | None]) -> tuple[StoredMessage, ...]:
        """The records of the leading `rows` in one go, when they are the very rows the records were
        made of (no flag changed since) and the request's exact JSON is the same for each; () else."""
        n = min(len(self.messages), len(rows))
        same_keys = self.keys[:n] == tuple(keys[:n]) and None not in self.keys[:n]
        return self.messages[:n] if n and same_keys and self.rows[:n] == tuple(rows[:n]) else ()

    def reusable(self, seq: int, row: Row, key: bytes | None) -> StoredMessage | None:
        """The record of `row` made from a message with exact JSON `key`, if one is held."""
        if key is None or seq >= len(self.keys) or self.keys[seq] != key:
            return None
        made = self.messages[seq]
        return made if made.id == row[_ID] and made.pinned == bool(row[_PINNED]) else None


NOTHING_MADE = Made((), (), (), 0)


@dataclass(frozen=True)
class _Held:
    rows: tuple[Row, ...]
    made: Made


class PrefixRows:
    """Leading message rows of recently ingested conversations (and their records); thread-safe."""

    def __init__(self, max_rows: int = MAX_ROWS, max_made_bytes: int = MAX_MADE_BYTES) -> None:
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._rows = 0
        self._bytes = 0
        self._max = self._default_rows = max_rows
        self._max_bytes = self._default_bytes = max_made_bytes
        self._lock = threading.Lock()

    def scale(self, factor: float) -> None:
        """Both bounds set to their defaults x `factor` (what is over them goes at the next write)."""
        with self._lock:
            self._max = int(self._default_rows * factor)
            self._max_bytes = int(self._default_bytes * factor)

    def leading(self, conversation_id: str, chain: Sequence[str], upto: int) -> tuple[Row, ...]:
        """The cached rows of seq 0..n-1 (n <= upto) when row n-1 carries the request's chain hash
        there (the chain then vouches for every row before it); () otherwise."""
        held = self._touch(conversation_id)
        rows = held.rows if held is not None else ()
        if not rows:
            return ()
        n = min(len(rows), upto, len(chain))
        if n and rows[n - 1][_SEQ] == n - 1 and rows[n - 1][_CHAIN] == chain[n - 1]:
            return rows[:n]
        return ()

    def made(self, conversation_id: str) -> Made:
        """The records kept with the conversation's rows (`Made.reusable` checks each one)."""
        held = self._touch(conversation_id)
        return held.made if held is not None else NOTHING_MADE

    def fits_made(self, keys: Sequence[bytes | None]) -> bool:
        """Whether the records made from messages with exact JSON `keys` would be kept (`Made.of`
        copies every key: a caller skips it for records that would only be let go)."""
        return made_bytes(keys) <= self._max_bytes

    def keep(self, conversation_id: str, rows: tuple[Row, ...], made: Made = NOTHING_MADE) -> None:
        """Remember the rows seq 0..len-1 of a conversation as read (and the records made of them);
        the least recently used go past the bounds."""
        with self._lock:
            self._drop(conversation_id)
            if not rows or len(rows) > self._max:
                return
            if made.size > self._max_bytes:
                made = NOTHING_MADE
            self._held[conversation_id] = _Held(rows, made)
            self._rows += len(rows)
            self._bytes += made.size
            while self._rows > self._max or self._bytes > self._max_bytes:
                self._drop(next(iter(self._held)))

    def forget(self, conversation_ids: Sequence[str] | None = None) -> None:
        """Drop some conversations' rows (deleted), or all of them."""
        with self._lock:
            for cid in list(self._held) if conversation_ids is None else conversation_ids:
                self._drop(cid)

    def _touch(self, conversation_id: str) -> _Held | None:
        with self._lock:
            held = self._held.get(conversation_id)
            if held is not None:
                self._held.move_to_end(conversation_id)
            return held

    def _drop(self, conversation_id: str) -> None:
        old = self._held.pop(conversation_id, None)
        if old is not None:
            self._rows -= len(old.rows)
            self._bytes -= old.made.size

    @property
    def held(self) -> int:
        return self._rows

    @property
    def held_bytes(self) -> int:
        """What the rows (estimated from ROW_BYTES) and the records held cost."""
        return self._rows * ROW_BYTES + self._bytes

    @property
    def made_bytes(self) -> int:
        return self._bytes

    @property
    def max_bytes(self) -> int:
        return self._max * ROW_BYTES + self._max_bytes
