"""Opening the SQLite database and running transactions.

One connection per Store, in autocommit mode (`isolation_level=None`) so transactions are explicit:
`transaction(conn)` opens `BEGIN IMMEDIATE` (or a savepoint when already inside one) and commits or
rolls back as a unit, which is what makes every store write all-or-nothing.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import sqlite_utils

from config.errors import StoreError

_savepoints = itertools.count()
CheckpointMode = Literal["PASSIVE", "TRUNCATE"]
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024  # a reset WAL is truncated back to this size at most
TRUNCATE_BUSY_MS = 250  # a TRUNCATE checkpoint gives up (retried later) rather than stall writers
MIB = 1024 * 1024


def open_database(path: str, busy_timeout_ms: int, *, autocheckpoint: bool = True, cache_mib: int = 2,
                  mmap_mib: int = 0) -> sqlite_utils.Database:
    """Open (creating the parent directory) with WAL, busy_timeout, foreign keys; run migrations.

    `autocheckpoint=False` leaves WAL checkpoints to `checkpoint()` (a server runs it off the
    request path): SQLite's automatic checkpoint otherwise syncs inside a request's commit.
    `cache_mib` bounds SQLite's page cache (heap); `mmap_mib` the file's memory map, whose touched
    pages count in the process's RSS (0: no map; pages are read into the page cache instead).
    """
    from store.migrations import apply_migrations  # migrations import transaction() from here

    if path != ":memory:":
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        # Deleted content is overwritten with zeros: a deleted conversation leaves no text in the file.
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        conn.execute(f"PRAGMA mmap_size = {int(mmap_mib) * MIB}")
        conn.execute(f"PRAGMA cache_size = -{int(cache_mib) * 1024}")  # negative: KiB, not pages
        if not autocheckpoint:
            conn.execute("PRAGMA wal_autocheckpoint = 0")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open store at {path}: {exc}") from exc
    db = sqlite_utils.Database(conn)
    apply_migrations(conn)
    return db


def checkpoint(path: str, busy_timeout_ms: int, mode: CheckpointMode = "PASSIVE") -> bool:
    """Copy WAL pages into the database file (own connection: callable from a worker thread while
    the serving connection keeps working); True when every frame was copied.

    PASSIVE never blocks writers but cannot finish under continuous writes; TRUNCATE holds writers
    back while it copies everything, then empties the WAL file; it waits at most TRUNCATE_BUSY_MS
    for its turn (the store's writers then wait on it, not the other way round).
    """
    if path == ":memory:":
        return True
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        wait_ms = min(busy_timeout_ms, TRUNCATE_BUSY_MS) if mode == "TRUNCATE" else busy_timeout_ms
        conn.execute(f"PRAGMA busy_timeout = {int(wait_ms)}")
        return run_checkpoint(conn, mode)
    finally:
        conn.close()


def run_checkpoint(conn: sqlite3.Connection, mode: CheckpointMode) -> bool:
    """`PRAGMA wal_checkpoint(mode)` on `conn`; True when every frame was copied (and not busy)."""
    try:
        busy, log_frames, copied = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"WAL checkpoint failed: {exc}") from exc
    return not busy and copied == log_frames


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """All-or-nothing unit of work; nests through savepoints."""
    if conn.in_transaction:
        name = f"sp{next(_savepoints)}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
