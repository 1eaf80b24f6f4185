"""Anchor corrections: the newest value of a fact is active, older ones are superseded (history kept).

Drafts are applied in order (source seq, then position). An identical active value is not added
twice. A different value of the same kind+key supersedes the active one, unless the draft comes from
an older message than the active anchor (a late extraction of an old turn): then it is stored already
superseded, so history keeps both.

A `RevisionDraft` comes from a sentence that corrects or rules out something (the extractor found
the cue; the store resolves it against what is active, so it works across compaction steps):
- `correct`: with no active anchor of the same kind+key, it supersedes the active anchor of the
  same kind whose old value the sentence mentions, else whose key shares a word with the sentence,
  and takes over that anchor's key.
- `retract`: retractable anchors (amounts, dates, decisions) the sentence mentions (value, or key
  words) are superseded by the ruling-out sentence itself, stored as a `ruled_out` anchor.
Superseding a value also supersedes its copies (same kind and value, under a key sharing a word with
the old key or under the bare value) and decisions quoting it as a whole token, so no stale copy stays
current; an equal value of an unrelated fact stays ("flight $500" when the deposit's $500 changes).
Values are matched on token boundaries ("5" is not mentioned in "port 5432").
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from store import rows
from store.models import Anchor, AnchorDraft
from store.runner import Runner

RETRACTABLE_KINDS = frozenset({"amount", "date", "decision"})  # ideas and values, never identities
_KEY_WORD = re.compile(r"[a-z][a-z0-9_']+")
_CLAUSE_END = re.compile(r"[,;!?]\s|\.\s|\n")


@dataclass(frozen=True)
class RevisionDraft(AnchorDraft):
    """An anchor draft from a sentence carrying a correction or ruling-out cue."""

    action: Literal["correct", "retract"] = "correct"
    words: frozenset[str] = field(default_factory=frozenset)  # content words of the sentence
    sentence: str = ""  # the sentence, verbatim


Row = dict[str, Any]


def _active_rows(run: Runner, cid: str) -> list[Row]:
    sql = ("SELECT * FROM anchors WHERE tenant_id = :tenant AND conversation_id = :cid "
           "AND status = 'active' ORDER BY id")
    return [_as_dict(r) for r in run(sql, {"cid": cid}).fetchall()]


def _as_dict(row: Any) -> Row:
    """A backend's result row (sqlite3.Row, store/postgres/db.Row) as a plain dict."""
    columns = row.keys()  # iterating a sqlite3.Row gives its values, not its column names
    return {k: row[k] for k in columns}


class _Active:
    """A conversation's active anchors, read once per upsert and kept current as its drafts apply:
    each draft then finds its same-key anchor and the copies of a superseded value by index, not by
    reading every active anchor again (an imported history brings thousands of drafts)."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows: dict[int, Row] = {}  # by id, in id order
        self._by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
        self._by_value: dict[tuple[str, str], list[int]] = defaultdict(list)
        self._decisions: dict[int, None] = {}
        for row in rows:
            self.add(row)

    def add(self, row: Row) -> None:
        anchor_id = int(row["id"])
        self.rows[anchor_id] = row
        self._by_key[(row["kind"], row["key"])].append(anchor_id)
        self._by_value[(row["kind"], row["value"])].append(anchor_id)
        if row["kind"] == "decision":
            self._decisions[anchor_id] = None

    def discard(self, anchor_id: int) -> None:
        row = self.rows.pop(anchor_id, None)
        if row is not None:
            self._by_key[(row["kind"], row["key"])].remove(anchor_id)
            self._by_value[(row["kind"], row["value"])].remove(anchor_id)
            self._decisions.pop(anchor_id, None)

    def same_key(self, kind: str, key: str) -> Row | None:
        ids = self._by_key.get((kind, key))
        return self.rows[ids[-1]] if ids else None

    def of_kind(self, kind: str | None = None) -> list[Row]:
        return [r for r in self.rows.values() if kind is None or r["kind"] == kind]

    def copy_candidates(self, old: Row) -> list[Row]:
        """Active anchors that could restate `old` (same kind and value, or a decision), in id order."""
        ids = set(self._by_value.get((old["kind"], old["value"]), ()))
        if old["kind"] != "decision":
            ids.update(self._decisions)
        return [self.rows[i] for i in sorted(ids)]


def _insert(run: Runner, cid: str, draft: AnchorDraft, superseded_by: int | None,
            key: str | None = None) -> int:
    cur = run("INSERT INTO anchors (tenant_id, conversation_id, kind, key, value, source_message_id, "
              "source_seq, status, superseded_by, created_at) VALUES (:tenant, :cid, :kind, :key, :value, "
              ":source, :seq, :status, :by, :now)",
              {"cid": cid, "kind": draft.kind, "key": draft.key if key is None else key,
               "value": draft.value, "source": draft.source_message_id, "seq": draft.source_seq,
               "status": "active" if superseded_by is None else "superseded", "by": superseded_by,
               "now": time.time()})
    return int(cur.lastrowid or 0)


def _row(run: Runner, anchor_id: int) -> Any:
    return run("SELECT * FROM anchors WHERE tenant_id = :tenant AND id = :id", {"id": anchor_id}).fetchone()


def _get(run: Runner, anchor_id: int) -> Anchor:
    return rows.anchor(_row(run, anchor_id))


def _mark(run: Runner, anchor_id: int, by: int) -> None:
    run("UPDATE anchors SET status = 'superseded', superseded_by = :by WHERE tenant_id = :tenant "
        "AND id = :id", {"by": by, "id": anchor_id})


def _supersede(run: Runner, active: _Active, old: Row, by: int) -> list[int]:
    """Supersede `old` and the active copies of the same fact (see `_is_copy`)."""
    gone = [int(old["id"])]
    for row in active.copy_candidates(old):
        if row["id"] == old["id"] or row["id"] == by or row["kind"] == "pinned":
            continue
        if _is_copy(row, old) or (row["kind"] == old["kind"] and row["value"] == old["value"]
                                  and _misread_copy(run, row, old)):
            gone.append(int(row["id"]))
    for anchor_id in gone:
        _mark(run, anchor_id, by)
        active.discard(anchor_id)
    return gone


def _is_copy(row: Row, old: Row) -> bool:
    """`row` restates the fact `old` held: the same value of the same kind about the same thing (its
    key shares a word with old's key, or is the bare value), or a decision quoting old's value.

    An equal value under an unrelated key is another fact ("flight $500" next to "deposit $500"),
    unless its label was misread (`_misread_copy`).
    """
    if row["kind"] == "decision" and old["kind"] != "decision":
        return value_in(str(old["value"]), str(row["value"]))
    if row["kind"] != old["kind"] or row["value"] != old["value"]:
        return False
    bare = " ".join(str(row["value"]).lower().split())
    old_words = key_words(str(old["key"]))
    return row["key"] == bare or bool(key_words(str(row["key"])) & old_words)


def _misread_copy(run: Runner, row: Row, old: Row) -> bool:
    """An equal value whose label was read from a clause that also names old's key ("the budget for
    goodwill on this account is $4,500": key "account", but the budget's value)."""
    found = run("SELECT text FROM messages WHERE tenant_id = :tenant AND id = :id",
                {"id": row["source_message_id"]}).fetchone()
    if found is None:
        return False
    own, old_words = key_words(str(row["key"])), key_words(str(old["key"]))
    text = str(found[0])
    for match in _value_pattern(str(row["value"])).finditer(text):
        clause = _CLAUSE_END.split(text[:match.start()])[-1]
        words = key_words(clause)
        if own & words and old_words & words:
            return True
    return False


@lru_cache(maxsize=1024)
def _value_pattern(value: str) -> re.Pattern[str]:
    # Not inside a longer word or number: "5" is not in "5432" nor "1.5", "$500" is in "$500." though.
    return re.compile(r"(?<!\w)(?<!\w\.)" + re.escape(value) + r"(?!\.?\w)")


def value_in(value: str, text: str) -> bool:
    """`value` occurs in `text` as a whole token, not as part of a longer word or number."""
    return bool(value) and _value_pattern(value).search(text) is not None


def key_words(key: str) -> set[str]:
    """Words of an anchor key ("hypothesis:" and "decision:" prefixes are labels, not content)."""
    return set(_KEY_WORD.findall(key.lower())) - {"hypothesis", "decision", "ruled", "out"}


def _mentioned(row: Row, draft: RevisionDraft, min_shared: int) -> tuple[int, int] | None:
    """How strongly the sentence points at `row`: (value mentioned, shared key words), or None."""
    if value_in(str(row["value"]), draft.sentence):
        return (1, 0)
    shared = len(key_words(str(row["key"])) & draft.words)
    return (0, shared) if shared >= min_shared else None


def _correction_target(active: _Active, draft: RevisionDraft) -> Row | None:
    best: tuple[tuple[int, int, int], Row] | None = None
    for row in active.of_kind(draft.kind):
        score = _mentioned(row, draft, 1)
        if score is None or row["source_seq"] > draft.source_seq:
            continue
        if best is None or (*score, row["id"]) > best[0]:
            best = ((*score, int(row["id"])), row)
    return None if best is None else best[1]


def _apply(run: Runner, cid: str, active: _Active, draft: AnchorDraft, added: list[Anchor],
           gone: list[int]) -> None:
    """One draft: plain same-key supersession, or a revision resolved against active anchors."""
    if isinstance(draft, RevisionDraft) and draft.action == "retract":
        _retract(run, cid, active, draft, added, gone)
        return
    current = active.same_key(draft.kind, draft.key)
    key = None
    if current is None and isinstance(draft, RevisionDraft):
        current = _correction_target(active, draft)
        key = None if current is None else str(current["key"])
    if current is not None and current["value"] == draft.value:
        return
    if current is not None and draft.source_seq >= 0 and current["source_seq"] > draft.source_seq:
        gone.append(_insert(run, cid, draft, superseded_by=int(current["id"])))
        return
    _added(run, cid, active, _insert(run, cid, draft, superseded_by=None, key=key), added)
    if current is not None:
        gone += _supersede(run, active, current, added[-1].id)


def _added(run: Runner, cid: str, active: _Active, anchor_id: int, added: list[Anchor]) -> None:
    """Note an inserted active anchor: returned to the caller, and indexed for the next drafts."""
    row = _row(run, anchor_id)
    added.append(rows.anchor(row))
    active.add(_as_dict(row))


def _retract(run: Runner, cid: str, active: _Active, draft: RevisionDraft, added: list[Anchor],
             gone: list[int]) -> None:
    """Supersede what the ruling-out sentence names; the sentence itself becomes the record."""
    targets = [r for r in active.of_kind() if r["kind"] in RETRACTABLE_KINDS
               and r["source_seq"] <= draft.source_seq
               and _mentioned(r, draft, 2 if r["kind"] == "decision" else 1) is not None]
    if not targets or active.same_key(draft.kind, draft.key) is not None:
        return
    _added(run, cid, active, _insert(run, cid, draft, superseded_by=None), added)
    for row in targets:
        if int(row["id"]) not in gone:  # a cascade may have superseded it already
            gone += _supersede(run, active, row, added[-1].id)


def upsert_anchors(run: Runner, cid: str, drafts: Sequence[AnchorDraft]) -> tuple[list[Anchor], list[Anchor]]:
    """Apply drafts inside the caller's transaction; return (added, superseded)."""
    added: list[Anchor] = []
    gone: list[int] = []
    active = _Active(_active_rows(run, cid))
    for draft in sorted(drafts, key=lambda d: d.source_seq):  # stable: keeps in-message order
        _apply(run, cid, active, draft, added, gone)
    unique = list(dict.fromkeys(gone))
    return added, [_get(run, i) for i in unique]
