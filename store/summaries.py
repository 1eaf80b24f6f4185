"""A summary's identity: its `source_key`, unique per conversation, and the migration that sets it.

The key hashes what a summary replaces (kind, depth, level, message range and its ordered sources)
and what it says (its content): a writer storing the very summary another already stored (a retry, a
racing replica whose local levels are deterministic) gets the stored one back (`INSERT ... ON
CONFLICT DO NOTHING`), while a deliberate re-summary of the same sources, tighter or by another
summarizer, is a summary of its own. Racing summarizer calls are prevented earlier, by the step
claims (compaction/steps/claims.py). `dedupe_summaries` is the migration step (SQLite and PostgreSQL
alike) that keys existing rows and folds exact duplicates into their oldest copy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from config.sized_lru import SizedLru
from store.models import SummaryDraft

SourceRef = tuple[str, str]  # (source_kind, source_id): ("message", "42") or ("summary", "sum_...")
# Summary sources read once and kept (a summary's sources never change), as its record holds them:
# message ids, summary ids. A collapsed 50,000-message history is one summary with 50,000 sources,
# which every request of its conversation read back before (store/tenant.py `summaries`).
Sources = tuple[tuple[int, ...], tuple[str, ...]]
SOURCES_MAX_BYTES = 4 * 1024 * 1024
MESSAGE_SOURCE_BYTES = 40  # a held message id: its int and the tuple's pointer to it
SUMMARY_SOURCE_BYTES = 80  # a held summary id: its 16-character string and the pointer
SourcesCache = SizedLru[tuple[str, str], Sources]  # (tenant, summary id) -> its sources


def sources_of(refs: Iterable[SourceRef]) -> Sources:
    """(kind, id) pairs in stored order as a record holds them: message ids, then summary ids."""
    pairs = list(refs)
    return (tuple(int(i) for k, i in pairs if k == "message"), tuple(i for k, i in pairs if k == "summary"))


def sources_bytes(sources: Sources) -> int:
    """What held `sources` cost in memory, about."""
    return 64 + MESSAGE_SOURCE_BYTES * len(sources[0]) + SUMMARY_SOURCE_BYTES * len(sources[1])


def sources_cache() -> SourcesCache:
    """A store's cache of summary sources, bounded with the others by `server.cache_mib`."""
    return SizedLru(SOURCES_MAX_BYTES, name="summary_sources")


class _Rows(Protocol):
    def fetchall(self) -> Sequence[Any]: ...


Execute = Callable[[str, dict[str, Any]], _Rows]  # `:name` SQL on either backend's connection


def source_refs(draft: SummaryDraft) -> list[SourceRef]:
    """A draft's direct sources in their stored order (messages first, then summaries)."""
    return [("message", str(i)) for i in draft.source_message_ids] + [
        ("summary", s) for s in draft.source_summary_ids]


def source_key(kind: str, depth: int, level: str, first_seq: int, last_seq: int,
               sources: Iterable[SourceRef], content: str) -> str:
    """sha256 over what the summary replaces and what it says; equal keys in one conversation are
    one summary."""
    parts = [kind, str(depth), level, str(first_seq), str(last_seq)]
    parts += [f"{k}:{s}" for k, s in sources]
    parts.append(hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def draft_key(draft: SummaryDraft) -> str:
    return source_key(draft.kind, draft.depth, draft.level, draft.first_seq, draft.last_seq,
                      source_refs(draft), draft.content)


def dedupe_summaries(execute: Execute) -> None:
    """Migration step: key every summary, shallowest first so a condensed summary is keyed by its
    sources' surviving ids, and fold each duplicate into the oldest summary of its key (references
    moved, then the copy deleted). Re-keying under the unique index is safe: a key only refines."""
    sources: dict[str, list[SourceRef]] = {}
    for r in execute("SELECT summary_id, source_kind, source_id FROM summary_sources "
                     "ORDER BY summary_id, ord", {}).fetchall():
        sources.setdefault(str(r[0]), []).append((str(r[1]), str(r[2])))
    kept: dict[tuple[str, str], str] = {}
    folded: dict[str, str] = {}  # duplicate id -> the id it is folded into
    for r in execute("SELECT num, id, conversation_id, kind, depth, level, first_seq, last_seq, "
                     "content FROM summaries ORDER BY depth, num", {}).fetchall():
        refs = [(k, folded.get(s, s) if k == "summary" else s) for k, s in sources.get(str(r[1]), [])]
        key = source_key(str(r[3]), int(r[4]), str(r[5]), int(r[6]), int(r[7]), refs, str(r[8]))
        first = kept.setdefault((str(r[2]), key), str(r[1]))
        if first != str(r[1]):
            folded[str(r[1])] = first
            _fold(execute, str(r[1]), first)
        else:
            execute("UPDATE summaries SET source_key = :key WHERE num = :num", {"key": key, "num": r[0]})


def _fold(execute: Execute, duplicate: str, into: str) -> None:
    """Point every reference to `duplicate` at `into` (ids are fixed-length and unique, so a JSON
    text replace of the quoted id is exact), then delete the duplicate and its source links."""
    execute("UPDATE summary_sources SET source_id = :into WHERE source_kind = 'summary' "
            "AND source_id = :dup", {"into": into, "dup": duplicate})
    execute("UPDATE compaction_events SET summary_id = :into WHERE summary_id = :dup",
            {"into": into, "dup": duplicate})
    quoted = {"q": f'"{duplicate}"', "into": f'"{into}"', "like": f'%"{duplicate}"%'}
    execute("UPDATE compaction_events SET source_summary_ids_json = "
            "REPLACE(source_summary_ids_json, :q, :into) WHERE source_summary_ids_json LIKE :like", quoted)
    execute("UPDATE views SET items_json = REPLACE(items_json, :q, :into) WHERE items_json LIKE :like",
            quoted)
    execute("DELETE FROM summary_sources WHERE summary_id = :dup", {"dup": duplicate})
    execute("DELETE FROM summaries WHERE id = :dup", {"dup": duplicate})
