"""A summary is stored once: a second writer of the same summary (same sources, same words) gets the
first one back, no second committed event; a re-summary of the same sources in other words (tighter,
another summarizer) is a summary of its own. The migrations keying old rows fold exact duplicates
into their oldest copy and re-key with the content."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlite_utils

from config.settings import StoreSettings
from store.interface import PassFinisher, StoreBackend
from store.models import Anchor, AnchorDraft, CompactionEvent, ContextView, SummaryDraft, SummaryRecord
from store.postgres.db import Database
from store.postgres.migrations import MIGRATIONS as PG_MIGRATIONS
from store.postgres.migrations import apply_migrations as apply_pg
from store.postgres.store import PgStore
from store.sqlite.migrations import MIGRATIONS as SQLITE_MIGRATIONS
from store.sqlite.migrations import apply_migrations as apply_sqlite
from store.sqlite.store import Store
from store.summaries import draft_key
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, history, scalar, sql


def _conversation(alice: TenantStore, counter: TokenCounter) -> tuple[str, list[int]]:
    result = alice.ingest(history(3), model="m", external_id=None, count_tokens=counter)
    return result.conversation.id, [m.id for m in result.messages]


def _draft(cid: str, ids: list[int], content: str, level: str = "normal") -> SummaryDraft:
    return SummaryDraft(cid, "leaf", 0, level, content, 5, 1, 4, tuple(ids[1:5]))  # type: ignore[arg-type]


def _finisher(cid: str, seen: list[SummaryRecord]) -> PassFinisher:
    def finish(record: SummaryRecord, added: list[Anchor],
               superseded: list[Anchor]) -> tuple[ContextView | None, CompactionEvent]:
        seen.append(record)
        return None, CompactionEvent(cid, "hard_budget", "leaf", "normal", "committed", "m",
                                     summary_id=record.id, anchors_added=tuple(a.id for a in added))
    return finish


def test_the_second_pass_of_the_same_summary_gets_the_first_summary_and_event(
        alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids = _conversation(alice, counter)
    anchors = [AnchorDraft("order", "order number", "ORD-7", ids[1], 1)]
    seen: list[SummaryRecord] = []
    first, _, event = alice.commit_pass(_draft(cid, ids, "The extractive words."), anchors,
                                        _finisher(cid, seen))
    again, view, repeat = alice.commit_pass(_draft(cid, ids, "The extractive words."), anchors,
                                            _finisher(cid, seen))
    assert again == first and view is None
    assert repeat == event and alice.events(cid) == [event]  # no second committed event
    assert alice.summaries(cid) == [first] and seen == [first, first]  # B's view built from A's
    assert [a.value for a in alice.anchors(cid, include_superseded=True)] == ["ORD-7"]


def test_a_re_summary_in_other_words_is_a_summary_and_event_of_its_own(
        alice: TenantStore, counter: TokenCounter) -> None:
    """A step that re-summarizes a chunk tighter must get its own words back, not the longer
    summary stored before (which would not fit, leaving the work to elision)."""
    cid, ids = _conversation(alice, counter)
    seen: list[SummaryRecord] = []
    first, _, event = alice.commit_pass(_draft(cid, ids, "A longer first summary of the chunk."), [],
                                        _finisher(cid, seen))
    tighter, _, second = alice.commit_pass(_draft(cid, ids, "Tighter."), [], _finisher(cid, seen))
    assert tighter.id != first.id and tighter.content == "Tighter."
    assert alice.summaries(cid) == [first, tighter] and alice.events(cid) == [event, second]
    assert second.summary_id == tighter.id != event.summary_id


def test_add_summary_twice_stores_once_but_other_words_or_level_are_other_summaries(
        alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids = _conversation(alice, counter)
    first = alice.add_summary(_draft(cid, ids, "one"))
    assert alice.add_summary(_draft(cid, ids, "one")) == first
    other_words = alice.add_summary(_draft(cid, ids, "two"))
    other_level = alice.add_summary(_draft(cid, ids, "one", "aggressive"))
    assert len({first.id, other_words.id, other_level.id}) == 3
    assert [s.id for s in alice.summaries(cid)] == [first.id, other_words.id, other_level.id]


def test_a_summary_stored_without_an_event_gets_its_first_event_from_a_pass(
        alice: TenantStore, counter: TokenCounter) -> None:
    cid, ids = _conversation(alice, counter)
    stored = alice.add_summary(_draft(cid, ids, "copied from the parent conversation"))
    record, _, event = alice.commit_pass(_draft(cid, ids, "copied from the parent conversation"), [],
                                         _finisher(cid, []))
    assert record == stored and alice.events(cid) == [event] and event.summary_id == stored.id


def test_the_store_refuses_a_duplicate_source_key(store: StoreBackend, alice: TenantStore,
                                                  counter: TokenCounter) -> None:
    cid, ids = _conversation(alice, counter)
    alice.add_summary(_draft(cid, ids, "one"))
    columns = ("id, tenant_id, conversation_id, kind, depth, generation, level, content, token_count, "
               "first_seq, last_seq, model, prompt_version, created_at, source_key")
    with pytest.raises(Exception, match="(?i)unique"):  # sqlite3 or psycopg: a raw statement
        sql(store, f"INSERT INTO summaries ({columns}) SELECT 'sum_000000000000', tenant_id, "
                   "conversation_id, kind, depth, generation, level, 'copy', token_count, first_seq, "
                   f"last_seq, model, prompt_version, created_at, source_key FROM summaries")
    if isinstance(store, PgStore):
        store.db.conn.rollback()
    assert scalar(store, "SELECT COUNT(*) FROM summaries") == 1


# -- the migration: keys for old rows, duplicates folded --------------------------------------------

_OLD_SUMMARY = ("INSERT INTO summaries (id, tenant_id, conversation_id, kind, depth, generation, level, "
                "content, token_count, first_seq, last_seq, model, prompt_version, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, 'normal', ?, 5, 1, 4, 'm', '', 0)")


_OLD_TEXT = {"sum_aaaaaaaaaaaa": "text of the chunk", "sum_bbbbbbbbbbbb": "text of the chunk"}


def _old_duplicates(store: StoreBackend) -> tuple[str, list[int]]:
    """Rows as an older ctxproxy (no unique key) could leave them: two copies of one leaf, a
    condensed summary of the later copy, a view and events naming it, and a tighter leaf of the
    same sources in other words (a summary of its own)."""
    alice = store.for_tenant(store.tenant_id_for_key("sk-alice"))
    cid, ids = _conversation(alice, TokenCounter())  # type: ignore[arg-type]
    tenant = alice.tenant_id
    for sid, kind, depth, gen, sources in (
            ("sum_aaaaaaaaaaaa", "leaf", 0, 1, [("message", str(i)) for i in ids[1:5]]),
            ("sum_bbbbbbbbbbbb", "leaf", 0, 2, [("message", str(i)) for i in ids[1:5]]),
            ("sum_cccccccccccc", "condensed", 1, 3, [("summary", "sum_bbbbbbbbbbbb")]),
            ("sum_dddddddddddd", "leaf", 0, 4, [("message", str(i)) for i in ids[1:5]])):
        sql(store, _OLD_SUMMARY, (sid, tenant, cid, kind, depth, gen, _OLD_TEXT.get(sid, f"text of {sid}")))
        for ord_, (k, s) in enumerate(sources):
            sql(store, "INSERT INTO summary_sources (tenant_id, summary_id, source_kind, source_id, ord) "
                       "VALUES (?, ?, ?, ?, ?)", (tenant, sid, k, s, ord_))
    sql(store, "INSERT INTO views (tenant_id, conversation_id, version, items_json, covered_through_seq, "
               "anchor_ids_json, created_at) VALUES (?, ?, 1, ?, 4, '[]', 0)",
        (tenant, cid, '[["message","0"],["summary","sum_bbbbbbbbbbbb"]]'))
    for sid, sources_json in (("sum_bbbbbbbbbbbb", "[]"), ("sum_cccccccccccc", '["sum_bbbbbbbbbbbb"]')):
        sql(store, "INSERT INTO compaction_events (tenant_id, conversation_id, trigger, tier, level, "
                   "outcome, summarizer_model, summarizer_settings_json, prompt_version, "
                   "source_message_ids_json, source_summary_ids_json, summary_id, tokens_before, "
                   "tokens_after, verification, rejected_facts_json, anchors_added_json, "
                   "anchors_superseded_json, duration_ms, created_at) VALUES (?, ?, 'manual', 'leaf', "
                   "'normal', 'committed', 'm', '{}', '', '[]', ?, ?, 0, 0, 'not_run', '[]', '[]', '[]', "
                   "0, 0)", (tenant, cid, sources_json, sid))
    return cid, ids


def _check_folded(store: StoreBackend, cid: str, ids: list[int]) -> None:
    alice = store.for_tenant(store.tenant_id_for_key("sk-alice"))
    found = {s.id: s for s in alice.summaries(cid)}
    assert sorted(found) == ["sum_aaaaaaaaaaaa", "sum_cccccccccccc", "sum_dddddddddddd"]  # copy folded
    assert found["sum_cccccccccccc"].source_summary_ids == ("sum_aaaaaaaaaaaa",)
    view = alice.view(cid)
    assert view is not None and [i.ref for i in view.items] == ["0", "sum_aaaaaaaaaaaa"]
    events = alice.events(cid)
    assert [e.summary_id for e in events] == ["sum_aaaaaaaaaaaa", "sum_cccccccccccc"]
    assert events[1].source_summary_ids == ("sum_aaaaaaaaaaaa",)
    assert alice.add_summary(_draft(cid, ids, "text of the chunk")).id == "sum_aaaaaaaaaaaa"  # keyed
    assert alice.add_summary(_draft(cid, ids, "text of sum_dddddddddddd")).id == "sum_dddddddddddd"


def _sqlite_before(tmp_path: Path, version: int) -> tuple[Store, Callable[[], object]]:
    """A SQLite store migrated to just below `version`, and the call applying the rest."""
    path = str(tmp_path / "old.db")
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA foreign_keys = ON")
    apply_sqlite(conn, tuple(m for m in SQLITE_MIGRATIONS if m.version < version))
    return Store(sqlite_utils.Database(conn), "s" * 64, StoreSettings(path=path)), lambda: apply_sqlite(conn)


def _postgres_before(pg_url: str, version: int) -> tuple[PgStore, Callable[[], object]]:
    """A PostgreSQL store migrated to just below `version`, and the call applying the rest."""
    db = Database(pg_url)
    apply_pg(db, tuple(m for m in PG_MIGRATIONS if m.version < version))
    db.execute("INSERT INTO meta (key, value) VALUES ('tenant_secret', :v)", {"v": "s" * 64})
    return PgStore(db, "s" * 64, StoreSettings(url=pg_url)), lambda: apply_pg(db)


def test_sqlite_migration_folds_duplicate_summaries(tmp_path: Path) -> None:
    store, apply_rest = _sqlite_before(tmp_path, 5)
    cid, ids = _old_duplicates(store)
    apply_rest()
    _check_folded(store, cid, ids)
    store.close()


def test_postgres_migration_folds_duplicate_summaries(pg_url: str) -> None:
    store, apply_rest = _postgres_before(pg_url, 4)
    cid, ids = _old_duplicates(store)
    apply_rest()
    _check_folded(store, cid, ids)
    store.close()


# -- migration 7 (both backends): keys of a version-6 store re-made with the content -------------------

def _rekeyed_at_7(store: StoreBackend, apply_rest: Callable[[], object]) -> None:
    """A version-6 summary keyed by its sources only: after migration 7 it carries its content key,
    so the same words find it and a tighter re-summary of the same sources is stored beside it."""
    alice = store.for_tenant(store.tenant_id_for_key("sk-alice"))
    cid, ids = _conversation(alice, TokenCounter())  # type: ignore[arg-type]
    stored = alice.add_summary(_draft(cid, ids, "the first words"))
    sql(store, "UPDATE summaries SET source_key = ?", ("sources-only key of version 6",))
    apply_rest()
    assert scalar(store, "SELECT source_key FROM summaries") == draft_key(_draft(cid, ids, "the first words"))
    assert alice.add_summary(_draft(cid, ids, "the first words")) == stored
    assert alice.add_summary(_draft(cid, ids, "tighter")).id != stored.id


def test_sqlite_migration_7_keys_summaries_with_their_content(tmp_path: Path) -> None:
    store, apply_rest = _sqlite_before(tmp_path, 7)
    _rekeyed_at_7(store, apply_rest)
    store.close()


def test_postgres_migration_7_keys_summaries_with_their_content(pg_url: str) -> None:
    store, apply_rest = _postgres_before(pg_url, 7)
    _rekeyed_at_7(store, apply_rest)
    store.close()
