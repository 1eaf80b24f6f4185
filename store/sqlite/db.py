"""Opening the SQLite database, checkpointing its WAL, and merging its search indexes after a delete.

One connection per Store, in autocommit mode (`isolation_level=None`) so transactions are explicit
(store/sqlite/transaction.py). FTS5 keeps a deleted document's terms in older segments until they are
merged, so `merge_step` (run until done) merges every index into one segment; with `PRAGMA
secure_delete` the freed pages are zeroed, and a TRUNCATE checkpoint afterwards drops the WAL frames
that still held the old pages (`Store.scrub` does both).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal

import sqlite_utils

from config.errors import StoreError
from store.sqlite.migrations import apply_migrations

CheckpointMode = Literal["PASSIVE", "TRUNCATE"]
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024  # a reset WAL is truncated back to this size at most
TRUNCATE_BUSY_MS = 250  # a TRUNCATE checkpoint gives up (retried later) rather than stall writers
MIB = 1024 * 1024
FTS_INDEXES = ("messages_fts", "messages_tri", "summaries_fts", "summaries_tri")
MERGE_PAGES = 250  # per merge step: tens of milliseconds of holding the store
MAX_MERGE_STEPS = 100_000  # a guard: new segments keep coming under load, each step is bounded
TRUNCATE_TRIES = 100  # the WAL emptied after a delete: tried again while another checkpoint runs...
TRUNCATE_RETRY_S = 0.02  # ...this far apart (a periodic PASSIVE checkpoint takes milliseconds)


def open_database(path: str, busy_timeout_ms: int, *, autocheckpoint: bool = True, cache_mib: int = 2,
                  mmap_mib: int = 0) -> sqlite_utils.Database:
    """Open (creating the parent directory) with WAL, busy_timeout, foreign keys; run migrations.

    `autocheckpoint=False` leaves WAL checkpoints to `checkpoint()` (a server runs it off the
    request path): SQLite's automatic checkpoint otherwise syncs inside a request's commit.
    `cache_mib` bounds SQLite's page cache (heap); `mmap_mib` the file's memory map, whose touched
    pages count in the process's RSS (0: no map; pages are read into the page cache instead).
    """
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


def merge_step(conn: sqlite3.Connection, index: str, pages: int = MERGE_PAGES) -> bool:
    """One bounded step (about `pages` pages of work) of merging `index` into a single segment, which
    drops the entries of deleted rows for good; True while there is more to do.

    A full `optimize` does the same in one statement, which on a large store holds the write lock
    for seconds (1.1 s at 50k messages); steps let requests in between.
    """
    before = conn.total_changes
    conn.execute(f"INSERT INTO {index} ({index}, rank) VALUES ('merge', ?)", (-pages,))
    return conn.total_changes - before > 1
