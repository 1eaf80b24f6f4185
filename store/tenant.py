"""The tenant store both backends run: tenant-scoped access to a store's data (`TenantStore`).

Every query a TenantStore runs goes through its backend's `TenantConnection.run`, which refuses SQL
without the `:tenant` parameter and binds it itself; so another tenant's ids behave exactly like
nonexistent ones. Writes run in one transaction each (`_tx`): a failure leaves nothing half-written.
The SQL is portable (SQLite and PostgreSQL alike); a backend supplies the connection, its
transactions and locks, scrubbing after a delete, and search (store/sqlite/, store/postgres/).
Summary ids are `sum_` + 12 random hex; a summary's generation is the number of summaries the
conversation already had, plus one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Protocol

from config.errors import NotFoundError
from store import expand as expand_mod
from store import lifecycle, rows, source_spans
from store import summaries as summaries_mod
from store.anchors import upsert_anchors
from store.encoding import forwarded as forwarded_mod
from store.history import ingest as ingest_mod
from store.history import reply as reply_mod
from store.history.ingest import Ahead
from store.history.prefix_rows import PrefixRows
from store.interface import PassFinisher
from store.models import (
    Anchor,
    AnchorDraft,
    CompactionEvent,
    ContextView,
    Conversation,
    ExpandedItem,
    ForwardedRecord,
    IngestResult,
    Message,
    SearchHit,
    SearchQuery,
    StoredMessage,
    SummaryDraft,
    SummaryRecord,
)
from store.query.filters import validate
from store.runner import Cursor
from store.summaries import SourceRef, Sources, SourcesCache, sources_bytes, sources_of

ANONYMOUS_TENANT = "anonymous"
OBJECTS_PER_QUERY = 500  # ids looked up in one statement (SQLite allows 32,766 parameters)
SOURCE_ROWS_PER_INSERT = 200  # summary source links written by one statement (5 parameters a row)


def tenant_id(secret: str, api_key: str | None) -> str:
    """HMAC-SHA256(secret, key), first 32 hex; no key -> `anonymous`. The key is never stored.
    Every backend derives tenants this way, so a key maps to the same tenant on SQLite and PostgreSQL."""
    if api_key is None:
        return ANONYMOUS_TENANT
    return hmac.new(secret.encode(), api_key.encode(), hashlib.sha256).hexdigest()[:32]


class TenantConnection(Protocol):
    """What a backend gives the TenantStore: one tenant's queries and transactions on its database."""

    @property
    def tenant_id(self) -> str: ...

    @property
    def prefix_rows(self) -> PrefixRows: ...  # stored rows ingest already read (store/history/prefix_rows.py)

    @property
    def summary_sources(self) -> SourcesCache: ...  # summaries' sources already read (store/summaries.py)

    def run(self, sql: str, params: dict[str, Any] | None = None, *, plain: bool = False) -> Cursor:
        """Execute with `:tenant` bound; SQL that does not filter on `:tenant` is a bug (StoreError).
        `plain`: rows read by position only (SQLite builds plain tuples, 5x faster for bulk reads)."""
        ...

    def run_many(self, sql: str, rows: Sequence[dict[str, Any]]) -> None:
        """`run` once per parameter row, in one call to the driver (a slice of an imported history)."""
        ...

    def transaction(self, conversation_id: str | None = None, *,
                    durable: bool = True) -> AbstractContextManager[None]:
        """One write transaction, all or nothing; `conversation_id` names what it writes (a backend
        may lock that conversation). `durable=False`: a report whose last moments a server crash may
        lose (a backend may commit it without waiting for its log to reach the disk)."""
        ...

    def ingest_transaction(self, messages: Sequence[dict[str, Any]]) -> AbstractContextManager[None]:
        """The transaction ingest runs in, before it knows which conversation `messages` continue."""
        ...

    def rolled_back(self, conversation_id: str) -> AbstractContextManager[None]:
        """A transaction undone when its block ends (previews); an error in the block still raises."""
        ...

    def scrub(self) -> None:
        """After a delete: leave no deleted text in the store's files, as far as the backend can."""
        ...

    def search(self, q: SearchQuery, check: Callable[[str], object]) -> list[SearchHit]:
        """Hits of a validated query; `check(conversation_id)` raises NotFoundError for a named
        conversation that is not this tenant's (called before the search, or when it found none)."""
        ...


class TenantStore:
    """Everything one tenant may read or write; nothing here can reach another tenant's rows."""

    def __init__(self, conn: TenantConnection) -> None:
        self._conn = conn
        self.tenant_id = conn.tenant_id

    # -- the one query function ------------------------------------------------------------------

    def _run(self, sql: str, params: dict[str, Any] | None = None, *, plain: bool = False) -> Cursor:
        """Execute with the tenant bound (the backend refuses SQL that does not filter on `:tenant`)."""
        return self._conn.run(sql, params, plain=plain)

    def _tx(self, conversation_id: str | None = None, *,
            durable: bool = True) -> AbstractContextManager[None]:
        """One write transaction; `conversation_id` names what it writes (TenantConnection.transaction)."""
        return self._conn.transaction(conversation_id, durable=durable)

    def _one(self, sql: str, params: dict[str, Any], what: str) -> Any:
        row = self._run(sql, params).fetchone()
        if row is None:
            raise NotFoundError(f"{what} not found")
        return row

    # -- conversations and messages --------------------------------------------------------------

    def ingest(self, messages: Sequence[Message], *, model: str, external_id: str | None,
               count_tokens: Callable[[Message], int],
               keys: Sequence[bytes | None] | None = None) -> IngestResult:
        """Store a request's history (only what is new); see store/history/ingest.py for identity rules.
        `keys`: the messages' exact JSON when the caller has it (store/encoding/running_hashes.py)."""
        with self._conn.ingest_transaction(messages):
            return ingest_mod.ingest(self._run, messages, model=model, external_id=external_id,
                                     count_tokens=count_tokens, prefix_rows=self._conn.prefix_rows,
                                     keys=keys, many=self._conn.run_many)

    def read_ahead(self, messages: Sequence[Message], *, external_id: str | None,
                   keys: Sequence[bytes | None] | None = None) -> Ahead:
        """What `ingest_slices` reads before its first transaction (ingest.py `read_ahead`): among it,
        how many of `messages` are stored already (`Ahead.keep`), so only the rest need counting."""
        return ingest_mod.read_ahead(self._run, messages, external_id=external_id,
                                     prefix_rows=self._conn.prefix_rows, keys=keys)

    def ingest_slices(self, messages: Sequence[Message], *, model: str, external_id: str | None,
                      count_tokens: Callable[[Message], int], keys: Sequence[bytes | None] | None = None,
                      size: int, ahead: Ahead | None = None) -> Iterator[IngestResult | None]:
        """`ingest` for a long history, `size` new messages per transaction: yields None between
        transactions (the caller lets other work run there), then the result. Its chain hashes and
        stored prefix are read before the first transaction (`read_ahead`, or `ahead` when the caller
        did). Should another request
        write to the conversation between two slices, the rest is ingested as a whole request (its
        identity found again). A failure leaves the slices before it stored: a prefix of the
        history, which the client's next request continues."""
        if ahead is None:  # not holding the store
            ahead = self.read_ahead(messages, external_id=external_id, keys=keys)
        many = self._conn.run_many
        with self._conn.ingest_transaction(messages):
            state = ingest_mod.begin(self._run, messages, model=model, external_id=external_id,
                                     count_tokens=count_tokens, prefix_rows=self._conn.prefix_rows, keys=keys,
                                     ahead=ahead)
            # More than one slice of new messages: a bulk import, indexed for search after the request.
            state.index_later = len(messages) - state.next > size
            ingest_mod.append(self._run, state, min(len(messages), state.next + size), many)
        while state.next < len(messages):
            yield None
            with self._tx(state.conversation_id):
                if not ingest_mod.still_at(self._run, state):
                    break
                ingest_mod.append(self._run, state, min(len(messages), state.next + size), many)
        if state.next == len(messages):
            yield ingest_mod.finish(state)
            return
        again = self.ingest(messages, model=model, external_id=external_id, count_tokens=count_tokens,
                            keys=keys)
        yield replace(again, forked=again.forked or state.forked, revised=again.revised or state.revised)

    def append_reply(self, conversation_id: str, message: Message, token_count: int, *,
                     parent_seq: int, parent_chain: str | None = None) -> StoredMessage:
        """Store the provider's reply (source='reply') to the request whose last message is
        `parent_seq` (its chain hash `parent_chain`, checked when given): appended at the tip, not
        written again when already stored, else a new branch (store/history/reply.py)."""
        with self._tx(conversation_id):
            conv = self._one("SELECT * FROM conversations WHERE tenant_id = :tenant AND id = :cid",
                             {"cid": conversation_id}, f"conversation {conversation_id!r}")
            return reply_mod.append_reply(self._run, conv, message, token_count,
                                          parent_seq=parent_seq, parent_chain=parent_chain)

    def conversation(self, conversation_id: str) -> Conversation:
        row = self._one("SELECT * FROM conversations WHERE tenant_id = :tenant AND id = :cid",
                        {"cid": conversation_id}, f"conversation {conversation_id!r}")
        return rows.conversation(row)

    def list_conversations(self, limit: int = 50) -> list[Conversation]:
        """Newest activity first."""
        found = self._run("SELECT * FROM conversations WHERE tenant_id = :tenant "
                          "ORDER BY updated_at DESC, rowid DESC LIMIT :limit", {"limit": limit})
        return [rows.conversation(r) for r in found]

    def messages(self, conversation_id: str, *, start_seq: int = 0,
                 end_seq: int | None = None) -> list[StoredMessage]:
        """Messages with start_seq <= seq < end_seq (end exclusive, like range), in order."""
        self.conversation(conversation_id)
        found = self._run("SELECT * FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid "
                          "AND seq >= :start AND seq < :end ORDER BY seq",
                          {"cid": conversation_id, "start": start_seq,
                           "end": end_seq if end_seq is not None else 2**62})
        return [rows.message(r) for r in found]

    def message(self, message_id: int) -> StoredMessage:
        row = self._one("SELECT * FROM messages WHERE tenant_id = :tenant AND id = :id",
                        {"id": message_id}, f"message {message_id}")
        return rows.message(row)

    def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation and all it owns, then scrub the files (store/lifecycle.py);
        NotFoundError for an unknown id. A fork of it keeps its own copy of the shared history."""
        with self._tx(conversation_id):
            self.conversation(conversation_id)
            lifecycle.delete_conversations(self._run, "id = :cid", {"cid": conversation_id})
        self._scrub()

    def delete_tenant(self) -> int:
        """Delete every conversation of this tenant (and all they own); how many went."""
        return self._delete_scrubbed("1 = 1", {})

    def delete_idle(self, before: float) -> int:
        """Delete this tenant's conversations last active before `before` (epoch s): retention."""
        return self._delete_scrubbed("updated_at < :before", {"before": before})

    def _delete_scrubbed(self, selector: str, params: dict[str, object]) -> int:
        with self._tx():
            count = lifecycle.delete_conversations(self._run, selector, params)
        if count:
            self._scrub()
        return count

    def _scrub(self) -> None:
        """Leave no deleted text in the store's files (the backend's own way)."""
        self._conn.scrub()

    # -- summaries and views ---------------------------------------------------------------------

    def add_summary(self, draft: SummaryDraft, key: str | None = None) -> SummaryRecord:
        """Commit a summary: id, generation (previous count + 1), source links, FTS rows. The same
        summary (sources, kind, depth, level and content) is stored once (its unique `source_key`,
        store/summaries.py; `key` when the caller made it already): a second writer of it gets the
        one already there."""
        with self._tx(draft.conversation_id):
            self.conversation(draft.conversation_id)
            linking = self._check_sources(draft)
            key = summaries_mod.draft_key(draft) if key is None else key
            existing = self._summary_by_key(draft.conversation_id, key)
            if existing is not None:
                return existing
            cid = draft.conversation_id
            generation = 1 + self._run("SELECT COUNT(*) FROM summaries WHERE tenant_id = :tenant "
                                       "AND conversation_id = :cid", {"cid": cid}).fetchone()[0]
            values = {"id": "sum_" + secrets.token_hex(6), "cid": cid, "kind": draft.kind,
                      "depth": draft.depth, "gen": generation, "level": draft.level,
                      "content": draft.content, "tokens": draft.token_count, "first": draft.first_seq,
                      "last": draft.last_seq, "model": draft.model, "pv": draft.prompt_version,
                      "now": time.time(), "key": key}
            # The unique key is the backstop when no lock serialised the writers: the loser's row is
            # dropped and it reads the winner's back.
            self._run("INSERT INTO summaries (id, tenant_id, conversation_id, kind, depth, generation, "
                      "level, content, token_count, first_seq, last_seq, model, prompt_version, "
                      "created_at, source_key) VALUES (:id, :tenant, :cid, :kind, :depth, :gen, :level, "
                      ":content, :tokens, :first, :last, :model, :pv, :now, :key) "
                      "ON CONFLICT (conversation_id, source_key) DO NOTHING", values)
            winner = self._run("SELECT id FROM summaries WHERE tenant_id = :tenant "
                               "AND conversation_id = :cid AND source_key = :key",
                               {"cid": cid, "key": key}).fetchone()
            if winner is None or winner[0] != values["id"]:
                stored = self._summary_by_key(cid, key)
                return stored if stored is not None else self.summary(str(values["id"]))
            self._insert_sources(str(values["id"]), summaries_mod.source_refs(draft), cid, linking)
            # Kept as the record holds them (a rolled-back id is never read: harmless).
            self._keep_sources(str(values["id"]), (draft.source_message_ids, draft.source_summary_ids))
            # Built from what was written, not read back (a collapsed history has 50,000 sources).
            return SummaryRecord(str(values["id"]), cid, draft.kind, draft.depth, generation, draft.level,
                                 draft.content, draft.token_count, draft.first_seq, draft.last_seq,
                                 draft.source_message_ids, draft.source_summary_ids, draft.model,
                                 draft.prompt_version, float(values["now"]))

    def _insert_sources(self, summary_id: str, refs: Sequence[SourceRef], conversation_id: str,
                        linking: int | tuple[int, int] | None) -> None:
        """A summary's source links (`linking`: `_check_sources`): one span row for a long run of
        messages (store/source_spans.py), one INSERT ... SELECT when they are the messages of one
        seq run from a first seq, else SOURCE_ROWS_PER_INSERT rows per statement."""
        if isinstance(linking, tuple):
            source_spans.add_span(self._run, summary_id, conversation_id, linking)
            return
        if linking is not None:
            self._run("INSERT INTO summary_sources (tenant_id, summary_id, source_kind, source_id, ord) "
                      "SELECT :tenant, :sid, 'message', CAST(id AS TEXT), seq - :first FROM messages "
                      "WHERE tenant_id = :tenant AND conversation_id = :cid AND seq BETWEEN :first AND :last",
                      {"sid": summary_id, "cid": conversation_id, "first": linking,
                       "last": linking + len(refs) - 1})
            return
        for start in range(0, len(refs), SOURCE_ROWS_PER_INSERT):
            chunk = refs[start:start + SOURCE_ROWS_PER_INSERT]
            rows_sql = ", ".join(f"(:tenant, :sid, :k{i}, :s{i}, :o{i})" for i in range(len(chunk)))
            params: dict[str, Any] = {"sid": summary_id}
            for i, (kind, source_id) in enumerate(chunk):
                params.update({f"k{i}": kind, f"s{i}": source_id, f"o{i}": start + i})
            self._run("INSERT INTO summary_sources (tenant_id, summary_id, source_kind, source_id, ord) "
                      f"VALUES {rows_sql}", params)

    def _summary_by_key(self, conversation_id: str, key: str) -> SummaryRecord | None:
        """The stored summary with this source key (store/summaries.py), if any."""
        row = self._run("SELECT * FROM summaries WHERE tenant_id = :tenant AND conversation_id = :cid "
                        "AND source_key = :key", {"cid": conversation_id, "key": key}).fetchone()
        if row is None:
            return None
        return rows.summary(row, self._sources([str(row["id"])])[str(row["id"])])

    def _check_sources(self, draft: SummaryDraft) -> int | tuple[int, int] | None:
        """Sources must be this conversation's messages and summaries. Returns how `_insert_sources`
        links them: the id span that stands for many messages (store/source_spans.py), or the first
        seq when they are messages in one unbroken seq run, in order (copied in one statement)."""
        cid = draft.conversation_id
        ids = [int(i) for i in draft.source_message_ids]
        if ids and not draft.source_summary_ids:
            span = source_spans.as_span(self._run, cid, ids)  # proves them this conversation's too
            if span is not None:
                return span
        seq_of: dict[int, int] = {}
        if ids:  # one range scan: a collapsed history names tens of thousands (an IN list that long is slow)
            seq_of = {r[0]: r[1] for r in self._run("SELECT id, seq FROM messages WHERE tenant_id = :tenant "
                                                    "AND conversation_id = :cid AND id BETWEEN :lo AND :hi",
                                                    {"cid": cid, "lo": min(ids), "hi": max(ids)}, plain=True)}
            _require(cid, [i for i in ids if i not in seq_of])
        if draft.source_summary_ids:
            marks, params = rows.in_list("i", list(draft.source_summary_ids))
            found_ids = {r[0] for r in self._run(f"SELECT id FROM summaries WHERE tenant_id = :tenant AND "
                                                 f"conversation_id = :cid AND id IN {marks}",
                                                 {**params, "cid": cid})}
            _require(cid, [i for i in draft.source_summary_ids if i not in found_ids])
            return None
        first = seq_of[ids[0]] if ids else -1
        in_run = first >= 0 and all(seq_of[i] == first + n for n, i in enumerate(ids))
        return first if in_run else None

    def summary(self, summary_id: str) -> SummaryRecord:
        row = self._one("SELECT * FROM summaries WHERE tenant_id = :tenant AND id = :id",
                        {"id": summary_id}, f"summary {summary_id!r}")
        return rows.summary(row, self._sources([summary_id])[summary_id])

    def summaries(self, conversation_id: str) -> list[SummaryRecord]:
        """All summaries of a conversation, oldest first."""
        self.conversation(conversation_id)
        found = self._run("SELECT * FROM summaries WHERE tenant_id = :tenant AND conversation_id = :cid "
                          "ORDER BY num", {"cid": conversation_id}).fetchall()
        sources = self._sources([str(r["id"]) for r in found], conversation_id)
        return [rows.summary(r, sources[r["id"]]) for r in found]

    def _sources(self, summary_ids: list[str], conversation_id: str | None = None) -> dict[str, Sources]:
        """The summaries' sources: those read before from the cache (a summary's sources never
        change), the others read now, by id or, for many, all of `conversation_id`'s at once."""
        cache = self._conn.summary_sources
        out: dict[str, Sources] = {}
        missing = []
        for sid in summary_ids:
            held = cache.get((self.tenant_id, sid))
            if held is None:
                missing.append(sid)
            else:
                out[sid] = held
        if missing:
            read = (self._read_sources(missing) if conversation_id is None or len(missing) < 64
                    else self._sources_of_conversation(conversation_id))
            for sid in missing:
                out[sid] = self._keep_sources(sid, sources_of(read.get(sid, [])))
        return out

    def _keep_sources(self, summary_id: str, sources: Sources) -> Sources:
        self._conn.summary_sources.put((self.tenant_id, summary_id), sources, sources_bytes(sources))
        return sources

    def _read_sources(self, summary_ids: list[str]) -> dict[str, list[SourceRef]]:
        marks, params = rows.in_list("s", summary_ids)
        out: dict[str, list[SourceRef]] = {}
        for r in self._run("SELECT summary_id, source_kind, source_id FROM summary_sources WHERE "
                           f"tenant_id = :tenant AND summary_id IN {marks} ORDER BY ord", params):
            out.setdefault(r[0], []).append((r[1], r[2]))
        return out | source_spans.span_sources(self._run, [s for s in summary_ids if s not in out])

    def _sources_of_conversation(self, conversation_id: str) -> dict[str, list[SourceRef]]:
        out: dict[str, list[SourceRef]] = {}
        for r in self._run("SELECT ss.summary_id, ss.source_kind, ss.source_id FROM summary_sources ss "
                           "JOIN summaries s ON s.id = ss.summary_id AND s.tenant_id = :tenant "
                           "WHERE ss.tenant_id = :tenant AND s.conversation_id = :cid "
                           "ORDER BY ss.summary_id, ss.ord",
                           {"cid": conversation_id}):
            out.setdefault(r[0], []).append((r[1], r[2]))
        return out | source_spans.span_sources(self._run, conversation_id=conversation_id)

    def view(self, conversation_id: str) -> ContextView | None:
        """The latest persisted view, or None before the first compaction."""
        # One statement checks the conversation and fetches its newest view (every request does).
        row = self._one("SELECT v.* FROM conversations c LEFT JOIN views v ON v.conversation_id = c.id "
                        "AND v.tenant_id = :tenant "
                        "AND v.version = (SELECT version FROM views WHERE tenant_id = :tenant AND "
                        "conversation_id = c.id ORDER BY version DESC LIMIT 1) "
                        "WHERE c.tenant_id = :tenant AND c.id = :cid", {"cid": conversation_id},
                        f"conversation {conversation_id!r}")
        return rows.view(row) if row["version"] is not None else None

    def save_view(self, view: ContextView) -> ContextView:
        """Persist a new version (previous + 1, whatever `view.version` says)."""
        with self._tx(view.conversation_id):
            self.conversation(view.conversation_id)
            previous = self._run("SELECT MAX(version) FROM views WHERE tenant_id = :tenant AND "
                                 "conversation_id = :cid", {"cid": view.conversation_id}).fetchone()[0]
            saved = replace(view, version=(previous or 0) + 1, created_at=time.time())
            self._run("INSERT INTO views (tenant_id, conversation_id, version, items_json, "
                      "covered_through_seq, anchor_ids_json, created_at) VALUES (:tenant, :cid, :version, "
                      ":items, :covered, :anchors, :now)",
                      {"cid": saved.conversation_id, "version": saved.version,
                       "items": rows.dumps([[i.kind, i.ref] for i in saved.items]),
                       "covered": saved.covered_through_seq, "anchors": rows.dumps(list(saved.anchor_ids)),
                       "now": saved.created_at})
            return saved

    def commit_pass(self, draft: SummaryDraft, anchor_drafts: Sequence[AnchorDraft],
                    finish: PassFinisher) -> tuple[SummaryRecord, ContextView | None, CompactionEvent]:
        """One compaction pass, all or nothing: the anchors of its sources, the summary, then the
        view (when `finish` gives one) and event it builds from them (it may read the store, never
        write it). A pass whose summary is already stored (another writer committed the same
        summary first) writes nothing: `finish` still builds the caller's view from the stored
        summary, and the first writer's committed event comes back (saved view: None)."""
        key = summaries_mod.draft_key(draft)  # before the lock: a collapsed import has 50,000 sources
        with self._tx(draft.conversation_id):
            self.conversation(draft.conversation_id)
            existing = self._summary_by_key(draft.conversation_id, key)
            if existing is not None:
                committed = self._committed_event(existing)
                if committed is not None:
                    finish(existing, [], [])
                    return existing, None, committed
            added, superseded = (self.upsert_anchors(draft.conversation_id, anchor_drafts)
                                 if anchor_drafts and existing is None else ([], []))
            record = existing or self.add_summary(draft, key)
            view, event = finish(record, added, superseded)
            saved = self.save_view(view) if view is not None else None
            return record, saved, self.record_event(event)

    def _committed_event(self, record: SummaryRecord) -> CompactionEvent | None:
        """The first `committed` event naming this summary (None for one stored by add_summary alone)."""
        row = self._run("SELECT * FROM compaction_events WHERE tenant_id = :tenant AND conversation_id = "
                        ":cid AND summary_id = :sid AND outcome = 'committed' ORDER BY id LIMIT 1",
                        {"cid": record.conversation_id, "sid": record.id}).fetchone()
        return rows.event(row) if row is not None else None

    # -- anchors, events, forwarded requests, tool rounds ----------------------------------------

    def anchors(self, conversation_id: str, *, include_superseded: bool = False) -> list[Anchor]:
        self.conversation(conversation_id)
        status = "" if include_superseded else " AND status = 'active'"
        found = self._run("SELECT * FROM anchors WHERE tenant_id = :tenant AND conversation_id = :cid"
                          f"{status} ORDER BY id", {"cid": conversation_id})
        return [rows.anchor(r) for r in found]

    def upsert_anchors(self, conversation_id: str,
                       drafts: Sequence[AnchorDraft]) -> tuple[list[Anchor], list[Anchor]]:
        """(added, superseded): see store/anchors.py for the correction rules."""
        with self._tx(conversation_id):
            self.conversation(conversation_id)
            return upsert_anchors(self._run, conversation_id, drafts)

    def preview_anchors(self, conversation_id: str, drafts: Sequence[AnchorDraft]) -> list[Anchor]:
        """The active anchors as they would be after `upsert_anchors(drafts)`; nothing is written."""
        with self._conn.rolled_back(conversation_id):
            self.conversation(conversation_id)
            upsert_anchors(self._run, conversation_id, drafts)
            active = self.anchors(conversation_id)
        return active

    def record_event(self, event: CompactionEvent) -> CompactionEvent:
        with self._tx(event.conversation_id):
            self.conversation(event.conversation_id)
            values = rows.event_values(event)
            now = time.time()
            names = list(values)
            cur = self._run(f"INSERT INTO compaction_events (tenant_id, created_at, {', '.join(names)}) "
                            f"VALUES (:tenant, :now, {', '.join(':' + n for n in names)})",
                            {**values, "now": now})
            return replace(event, id=int(cur.lastrowid or 0), created_at=now)

    def events(self, conversation_id: str) -> list[CompactionEvent]:
        self.conversation(conversation_id)
        found = self._run("SELECT * FROM compaction_events WHERE tenant_id = :tenant AND "
                          "conversation_id = :cid ORDER BY id", {"cid": conversation_id})
        return [rows.event(r) for r in found]

    def record_forwarded(self, rec: ForwardedRecord) -> bool | None:
        """Store it in constant space (store/encoding/forwarded.py); True when the previous forwarded request
        is a prefix of this one (None if first)."""
        return self.record_forwarded_cost(rec).extends_previous

    def record_forwarded_cost(self, rec: ForwardedRecord) -> ForwardedRecord:
        """`record_forwarded`, handing back the record with what the store set: the shared prefix in
        messages and tokens (forwarded and received) and the billed-input estimates."""
        # Packed before the lock: a resumed 50,000-message history has as many received hashes.
        packed, received = forwarded_mod.pack(rec.prefix_hashes), forwarded_mod.pack(rec.received_hashes)
        with self._tx(rec.conversation_id, durable=False):
            # One statement checks the conversation and fetches the previous request's tips.
            tip = self._one("SELECT t.hashes, t.received_hashes, t.tools_digests FROM conversations c "
                            "LEFT JOIN forwarded_tips t ON t.conversation_id = c.id AND "
                            "t.tenant_id = :tenant WHERE c.tenant_id = :tenant AND c.id = :cid",
                            {"cid": rec.conversation_id}, f"conversation {rec.conversation_id!r}")
            done = forwarded_mod.costed(rec, tip[0], tip[1], tip[2], packed, received)
            self._run("INSERT INTO forwarded (tenant_id, conversation_id, messages_forwarded, shared_prefix, "
                      "extends_previous, tokens_received, tokens_forwarded, budget, occupancy_json, "
                      "compacted, view_version, created_at, prefix_tokens, full_prefix_tokens, "
                      "billed_input_estimate, full_history_billed_estimate) VALUES (:tenant, :cid, "
                      ":count, :shared, :extends, :received, :forwarded, :budget, :occupancy, :compacted, "
                      ":view, :now, :prefix, :full_prefix, :billed, :full_billed)",
                      {"cid": rec.conversation_id, "count": done.messages_forwarded,
                       "shared": done.shared_prefix,
                       "extends": None if done.extends_previous is None else int(done.extends_previous),
                       "received": rec.tokens_received, "forwarded": rec.tokens_forwarded,
                       "budget": rec.budget, "occupancy": rows.dumps(rec.occupancy),
                       "compacted": int(rec.compacted), "view": rec.view_version, "now": time.time(),
                       "prefix": done.prefix_tokens, "full_prefix": done.full_prefix_tokens,
                       "billed": done.billed_input_estimate,
                       "full_billed": done.full_history_billed_estimate})
            self._run("INSERT INTO forwarded_tips (tenant_id, conversation_id, hashes, received_hashes, "
                      "tools_digests) VALUES (:tenant, :cid, :hashes, :received, :tools) ON CONFLICT "
                      "(conversation_id) DO UPDATE SET hashes = excluded.hashes, "
                      "received_hashes = excluded.received_hashes, tools_digests = excluded.tools_digests",
                      {"cid": rec.conversation_id, "hashes": packed, "received": received,
                       "tools": forwarded_mod.tools_digests(rec)})
            return done

    def note_cache_read(self, conversation_id: str, tokens: int) -> None:
        """The provider's reported cache reads, on the conversation's newest forwarded request."""
        with self._tx(conversation_id, durable=False):
            self._run("UPDATE forwarded SET cache_read_tokens = :tokens WHERE tenant_id = :tenant AND "
                      "id = (SELECT MAX(id) FROM forwarded WHERE tenant_id = :tenant AND "
                      "conversation_id = :cid)", {"cid": conversation_id, "tokens": tokens})

    def forwarded(self, conversation_id: str) -> list[ForwardedRecord]:
        self.conversation(conversation_id)
        found = self._run("SELECT * FROM forwarded WHERE tenant_id = :tenant AND conversation_id = :cid "
                          "ORDER BY id", {"cid": conversation_id})
        return [rows.forwarded(r) for r in found]

    def record_tool_round(self, conversation_id: str, calls: list[dict[str, Any]],
                          results: list[Message]) -> None:
        """Audit trail of the proxy's own recall tool calls (never messages, never compacted)."""
        with self._tx(conversation_id):
            self.conversation(conversation_id)
            self._run("INSERT INTO tool_rounds (tenant_id, conversation_id, calls_json, results_json, "
                      "created_at) VALUES (:tenant, :cid, :calls, :results, :now)",
                      {"cid": conversation_id, "calls": rows.dumps(calls), "results": rows.dumps(results),
                       "now": time.time()})

    def tool_rounds(self, conversation_id: str) -> list[dict[str, Any]]:
        """Recorded recall rounds, oldest first: {calls, results, created_at}."""
        self.conversation(conversation_id)
        found = self._run("SELECT * FROM tool_rounds WHERE tenant_id = :tenant AND conversation_id = :cid "
                          "ORDER BY id", {"cid": conversation_id})
        return [{"calls": json.loads(r["calls_json"]), "results": json.loads(r["results_json"]),
                 "created_at": r["created_at"]} for r in found]

    # -- leases on background compaction steps ------------------------------------------------------

    def claim_step(self, conversation_id: str, holder: str, lease_s: float) -> bool:
        """Claim the conversation's background compaction step for `lease_s` seconds: True when
        `holder` now holds it (it was free, expired, or already `holder`'s). Processes sharing the
        store run each step once; a holder killed mid-step loses the claim when it expires."""
        now = time.time()
        with self._tx(conversation_id):
            self.conversation(conversation_id)
            self._run("INSERT INTO step_leases (tenant_id, conversation_id, holder, expires_at) "
                      "VALUES (:tenant, :cid, :holder, :expires) ON CONFLICT (tenant_id, conversation_id) "
                      "DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at "
                      "WHERE step_leases.expires_at < :now OR step_leases.holder = excluded.holder",
                      {"cid": conversation_id, "holder": holder, "expires": now + lease_s, "now": now})
            row = self._one("SELECT holder FROM step_leases WHERE tenant_id = :tenant AND "
                            "conversation_id = :cid", {"cid": conversation_id}, "step lease")
            return bool(row[0] == holder)

    def release_step(self, conversation_id: str, holder: str) -> None:
        """Give the claim back (a no-op when `holder` no longer holds it)."""
        with self._tx(conversation_id):
            self._run("DELETE FROM step_leases WHERE tenant_id = :tenant AND conversation_id = :cid "
                      "AND holder = :holder", {"cid": conversation_id, "holder": holder})

    # -- provider objects ------------------------------------------------------------------------

    def record_objects(self, kind: str, object_ids: Sequence[str]) -> None:
        """Note provider objects this tenant created (an id already noted stays as it was)."""
        with self._tx():
            for object_id in object_ids:
                self._run("INSERT INTO provider_objects (tenant_id, object_id, kind, created_at) "
                          "VALUES (:tenant, :oid, :kind, :now) ON CONFLICT (tenant_id, object_id) DO NOTHING",
                          {"oid": object_id, "kind": kind, "now": time.time()})

    def owned_objects(self, object_ids: Sequence[str]) -> set[str]:
        """Those of `object_ids` this tenant created; another tenant's are simply not among them."""
        owned: set[str] = set()
        unique = list(dict.fromkeys(object_ids))
        for start in range(0, len(unique), OBJECTS_PER_QUERY):
            chunk = unique[start:start + OBJECTS_PER_QUERY]
            names = {f"o{i}": object_id for i, object_id in enumerate(chunk)}
            found = self._run("SELECT object_id FROM provider_objects WHERE tenant_id = :tenant AND "
                              f"object_id IN ({', '.join(':' + n for n in names)})", names)
            owned.update(str(row[0]) for row in found)
        return owned

    def forget_objects(self, object_ids: Sequence[str]) -> None:
        """Drop this tenant's records of objects the provider deleted."""
        with self._tx():
            for object_id in object_ids:
                self._run("DELETE FROM provider_objects WHERE tenant_id = :tenant AND object_id = :oid",
                          {"oid": object_id})

    # -- recall ----------------------------------------------------------------------------------

    def search(self, q: SearchQuery) -> list[SearchHit]:
        """Full-text search (the backend's search module); a named conversation must be this tenant's.

        Ranks the 1,000 most recent matches (per scope) that pass the filters; with fewer matches this
        is the full ranking.
        """
        validate(q)
        return self._conn.search(q, self.conversation)

    def expand(self, ids: Sequence[str]) -> list[ExpandedItem]:
        """Full messages / summaries by id (store/expand.py), in the order asked."""
        return [ExpandedItem(**fields) for fields in expand_mod.expand_rows(self._run, ids)]


def _require(conversation_id: str, missing: Sequence[object]) -> None:
    if missing:
        raise NotFoundError(f"summary sources not found in conversation {conversation_id!r}: {list(missing)}")
