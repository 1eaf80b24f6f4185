"""Conversation identity and ingest: find the stored conversation a request continues, store the rest.

Runs inside the caller's transaction, with the tenant-scoped runner of a TenantStore. Rules
(docs/architecture.md): with an external id, the newest conversation of the tenant with that id;
without, the longest stored chain prefix (newest conversation wins a tie). Extending appends;
a resent or shorter history adds nothing; a divergence forks a new conversation holding the full
request history, with `forked_from` set (the old one is never modified), unless the client rebuilt
its history (every stored reply still there, new input after the newest): that revises the
conversation in place (store/history/revisions.py). Without an external id, a shared prefix made only of
system/developer messages (a common system prompt) is not a fork but a new conversation. Live rows
have seq >= 0 (superseded ones are kept below zero), and every read here asks only for those.
"""

from __future__ import annotations

import itertools
import operator
import secrets
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from config.errors import InvalidRequestError
from store import rows
from store.encoding.content import message_text
from store.encoding.identity import body_hash, canonical_bodies, chain_of
from store.encoding.running_hashes import exact_keys
from store.history import revisions
from store.history.prefix_rows import NOTHING_MADE, Made, PrefixRows, Row
from store.models import Conversation, IngestResult, Message, StoredMessage, assembled
from store.runner import Many, Runner

_MSG_COLUMNS = ("id, conversation_id, seq, role, token_count, chain_hash, content_hash, pinned, source, "
                "created_at")
TAIL_HASHES = 4  # newest chain hashes asked first when matching a request without an external id
REBUILD_CANDIDATES = 4  # conversations sharing a diverging request's prefix asked whether it rebuilds them
_SHARED = {s: s for s in ("system", "developer", "user", "assistant", "tool", "function", "client", "reply")}


READ_PAGE_ROWS = 2_000  # stored rows read per query (a resumed session has tens of thousands)


@dataclass(frozen=True)
class _Match:
    conversation: sqlite3.Row | None  # conversations row the request continues (or diverges from)
    matched: int  # length of the common chain prefix


def public_body(m: Message) -> Message:
    """The message as stored: the client's object minus ctxproxy's own `pinned` field."""
    return {k: v for k, v in m.items() if k != "pinned"} if "pinned" in m else dict(m)


def new_conversation_id() -> str:
    return "conv_" + secrets.token_hex(8)


def _match_by_external_id(run: Runner, external_id: str, hashes: list[str]) -> _Match:
    conv = run("SELECT * FROM conversations WHERE tenant_id = :tenant AND external_id = :ext "
               "ORDER BY created_at DESC, rowid DESC LIMIT 1", {"ext": external_id}).fetchone()
    if conv is None:
        return _Match(None, 0)
    stored = run("SELECT chain_hash FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid "
                 "AND seq >= 0 AND seq < :n ORDER BY seq", {"cid": conv["id"], "n": len(hashes)}).fetchall()
    matched = 0
    for row, h in zip(stored, hashes, strict=False):
        if row[0] != h:
            break
        matched += 1
    return _Match(conv, matched)


def _match_by_chain(run: Runner, hashes: list[str]) -> _Match:
    """The longest stored prefix: the deepest valid hit among the request's chain hashes. A resend
    extends a stored history by a message or two, so the newest few hashes are asked first (one
    small query). Otherwise the deepest is found by bisection: stored positions are prefix-closed
    (a conversation holding the request's chain hash at seq i holds its first i messages too), so
    one indexed single-hash query per halving finds it (an imported history: 15 small queries,
    not one query over 20k hashes)."""
    tail = max(0, len(hashes) - TAIL_HASHES)
    match = _deepest_hit(run, hashes, tail)
    if match.conversation is not None or not tail:
        return match
    low, high, found = 0, tail, _Match(None, 0)  # hashes[:low] stored, hashes[high:tail] not
    while low < high:
        middle = (low + high) // 2
        hit = _deepest_hit(run, hashes, middle, middle + 1)
        if hit.conversation is None:
            high = middle
        else:
            low, found = middle + 1, hit
    return found


def _deepest_hit(run: Runner, hashes: list[str], start: int, end: int | None = None) -> _Match:
    """One indexed query for hashes[start:end]; a hit counts at its own position only."""
    marks, params = rows.in_list("h", hashes[start:end])
    hits = run("SELECT m.seq, m.chain_hash, c.* FROM messages m JOIN conversations c ON c.id = "
               "m.conversation_id AND c.tenant_id = :tenant "
               f"WHERE m.tenant_id = :tenant AND m.chain_hash IN {marks} AND m.seq >= 0 "
               "ORDER BY m.seq DESC, c.created_at DESC, c.rowid DESC LIMIT 16", params).fetchall()
    for row in hits:  # equal chain hash implies equal position; checked against a collision anyway
        if hashes[row["seq"]] == row["chain_hash"] if row["seq"] < len(hashes) else False:
            return _Match(row, row["seq"] + 1)
    return _Match(None, 0)


def insert_conversation(run: Runner, model: str, external_id: str | None,
                         forked_from: str | None, now: float) -> sqlite3.Row:
    cid = new_conversation_id()
    run("INSERT INTO conversations (id, tenant_id, model, external_id, forked_from, message_count, "
        "created_at, updated_at) VALUES (:cid, :tenant, :model, :ext, :fork, 0, :now, :now)",
        {"cid": cid, "model": model, "ext": external_id, "fork": forked_from, "now": now})
    row: sqlite3.Row = run("SELECT * FROM conversations WHERE tenant_id = :tenant AND id = :cid",
                           {"cid": cid}).fetchone()
    return row


INSERT_MESSAGE = ("INSERT INTO messages (tenant_id, conversation_id, seq, role, message_json, text, "
                  "token_count, chain_hash, content_hash, pinned, source, created_at) VALUES (:tenant, :cid, "
                  ":seq, :role, :json, :text, :tokens, :chain, :content, :pinned, :source, :now)")
INSERT_INDEXED_LATER = (INSERT_MESSAGE.replace("created_at)", "created_at, fts_pending)")
                        .replace(":now)", ":now, 1)"))


def insert_message(run: Runner, cid: str, seq: int, m: Message, token_count: int,
                   hashes: tuple[str, str], source: str, now: float, *,
                   index_later: bool = False) -> StoredMessage:
    """Write one message (the FTS triggers index its searchable text, or, `index_later`, the
    store's `index_pending` does, after the request: a bulk import)."""
    body, values = _message_row(cid, seq, m, token_count, hashes, source, now)
    cur = run(INSERT_INDEXED_LATER if index_later else INSERT_MESSAGE, values)
    return _stored_row(int(cur.lastrowid or 0), body, values)


_NewMessage = tuple[int, Message, int, tuple[str, str]]  # seq, message, token count, (chain, content) hashes


def insert_messages(run: Runner, many: Many, cid: str, rows_in: Sequence[_NewMessage], now: float, *,
                    index_later: bool = False) -> list[StoredMessage]:
    """`insert_message` for consecutive new client messages, (seq, message, tokens, hashes) each, in
    one statement call (a 250-message slice of an imported history: 0.2-0.6 s less at 50,000);
    their ids read back by seq (unique in a conversation)."""
    made = [_message_row(cid, seq, m, tokens, hashes, "client", now) for seq, m, tokens, hashes in rows_in]
    many(INSERT_INDEXED_LATER if index_later else INSERT_MESSAGE, [values for _, values in made])
    ids = dict(run("SELECT seq, id FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid "
                   "AND seq >= :first AND seq <= :last",
                   {"cid": cid, "first": rows_in[0][0], "last": rows_in[-1][0]}, plain=True).fetchall())
    return [_stored_row(int(ids[values["seq"]]), body, values) for body, values in made]


def _message_row(cid: str, seq: int, m: Message, token_count: int, hashes: tuple[str, str], source: str,
                 now: float) -> tuple[Message, dict[str, Any]]:
    """A message's stored body and its row's parameters."""
    body = public_body(m)
    return body, {"cid": cid, "seq": seq, "role": str(m.get("role") or ""), "json": rows.dumps(body),
                  "text": message_text(m), "tokens": token_count, "chain": hashes[0], "content": hashes[1],
                  "pinned": 1 if m.get("pinned") else 0, "source": source, "now": now}


def _stored_row(message_id: int, body: Message, values: dict[str, Any]) -> StoredMessage:
    return StoredMessage(id=message_id, conversation_id=values["cid"], seq=values["seq"], role=values["role"],
                         message=body, token_count=values["tokens"], chain_hash=values["chain"],
                         content_hash=values["content"], pinned=bool(values["pinned"]),
                         source="reply" if values["source"] == "reply" else "client",
                         created_at=values["now"])


def _stored_prefix(run: Runner, cid: str, messages: Sequence[Message], upto: int,
                   chain: Sequence[str], cache: PrefixRows | None,
                   keys: Sequence[bytes | None]) -> list[StoredMessage]:
    """Already stored messages 0..upto-1, bodies taken from the request (equal after normalisation).
    Rows `cache` holds for them are not read again; their `pinned` flags always are. A record made
    last time from a message with the same exact JSON (`keys`) over the same row is reused."""
    cached = cache.leading(cid, chain, upto) if cache is not None else ()
    found = _read_rows(run, cid, len(cached), upto) if len(cached) < upto else []
    if cached:
        pinned = {r[0] for r in run("SELECT seq FROM messages WHERE tenant_id = :tenant AND "
                                    "conversation_id = :cid AND seq < :n AND pinned = 1",
                                    {"cid": cid, "n": len(cached)})}
        prefix = _with_pins(cached, pinned) + found
    else:
        prefix = found
    made = cache.made(cid) if cache is not None else NOTHING_MADE
    out = list(made.leading(prefix, keys))
    leading = len(out)
    out += [made.reusable(r[2], r, keys[r[2]]) or _prefix_message(r, messages[r[2]])
            for r in prefix[leading:]]
    if cache is not None:
        kept_made = (Made.of(tuple(prefix), keys[:len(out)], tuple(out), made, leading)
                     if cache.fits_made(keys[:len(out)]) else NOTHING_MADE)
        cache.keep(cid, tuple(prefix), kept_made)
    carrying = any(map(operator.contains, messages[:upto], itertools.repeat("pinned")))  # in C: usually none
    newly_pinned = [s.id for s, r in zip(out, prefix, strict=True)
                    if messages[r[2]].get("pinned") and not r[7]] if carrying else []
    if newly_pinned:  # pinning is monotonic: a client may pin an old message later
        marks, params = rows.in_list("p", newly_pinned)
        run(f"UPDATE messages SET pinned = 1 WHERE tenant_id = :tenant AND id IN {marks}", params)
        out = [s if s.id not in newly_pinned else _pinned(s) for s in out]
    return out


def _with_pins(cached: Sequence[Row], pinned: set[int]) -> list[Row]:
    """Cached rows seq 0..n-1 with the pins read now: pinning only ever sets the flag (a pinned row
    stays pinned), so only the rows pinned since they were cached change, found by seq."""
    rows = list(cached)
    for seq in pinned:
        if seq < len(rows) and not rows[seq][7]:
            rows[seq] = (*rows[seq][:7], 1, *rows[seq][8:])
    return rows


def _read_rows(run: Runner, cid: str, start: int, upto: int) -> list[Row]:
    """Stored rows seq start..upto-1 as plain tuples (`_MSG_COLUMNS` order), READ_PAGE_ROWS per query
    (each holds the store while it runs). The conversation id, role and source are shared strings,
    not one copy per row: rows are kept (store/history/prefix_rows.py)."""
    shared = _SHARED.get
    out: list[Row] = []
    for first in range(start, upto, READ_PAGE_ROWS):
        found = run(f"SELECT {_MSG_COLUMNS} FROM messages WHERE tenant_id = :tenant AND conversation_id = "
                    ":cid AND seq >= :start AND seq < :upto ORDER BY seq",
                    {"cid": cid, "start": first, "upto": min(upto, first + READ_PAGE_ROWS)}, plain=True)
        out += [(r[0], cid, r[2], shared(r[3], r[3]), r[4], r[5], r[6], r[7], shared(r[8], r[8]), r[9])
                for r in found]
    return out


def _prefix_message(r: Any, m: Message) -> StoredMessage:
    """A row of `_MSG_COLUMNS` (read by position: the hot loop of a resent history) with the
    request's body."""
    return assembled(StoredMessage, {
        "id": r[0], "conversation_id": r[1], "seq": r[2], "role": r[3], "message": public_body(m),
        "token_count": r[4], "chain_hash": r[5], "content_hash": r[6], "pinned": bool(r[7]),
        "source": r[8], "created_at": r[9]})


def _pinned(m: StoredMessage) -> StoredMessage:
    return replace(m, pinned=True)


def _only_system(messages: Sequence[Message], upto: int) -> bool:
    return all(m.get("role") in ("system", "developer") for m in messages[:upto])


def _identify(run: Runner, messages: Sequence[Message], external_id: str | None,
              keys: Sequence[bytes | None], chain: list[str] | None = None) -> tuple[list[str], _Match]:
    """The request's chain hashes (`chain`, when made already) and the stored conversation its
    history matches."""
    chain = chain_of(messages, keys) if chain is None else chain
    if external_id:
        return chain, _match_by_external_id(run, external_id, chain)
    return chain, _match_by_chain(run, chain)


def _forks(match: _Match, length: int) -> bool:
    """A request of `length` messages diverges from the matched conversation's stored history."""
    conv = match.conversation
    return conv is not None and match.matched < conv["message_count"] and match.matched < length


def _rebuilt(run: Runner, match: _Match, chain: Sequence[str], messages: Sequence[Message],
             external_id: str | None) -> sqlite3.Row | None:
    """The conversation a diverging request rebuilds (store/history/revisions.py), or None (it forks). The
    matched one is asked first, then, without an external id, the others sharing the same prefix,
    newest first (two sessions of one client share their opening: the replies tell them apart)."""
    depth = match.matched
    if match.conversation is None or _only_system(messages, depth):
        return None
    candidates = [match.conversation]
    if external_id is None and depth:
        candidates += [row for row in run(
            "SELECT c.* FROM messages m JOIN conversations c ON c.id = m.conversation_id AND c.tenant_id "
            "= :tenant WHERE m.tenant_id = :tenant AND m.chain_hash = :h AND m.seq = :s AND c.id <> :cid "
            "AND c.message_count > :d ORDER BY c.created_at DESC, c.rowid DESC LIMIT :n",
            {"h": chain[depth - 1], "s": depth - 1, "cid": match.conversation["id"], "d": depth,
             "n": REBUILD_CANDIDATES - 1})]
    return next((c for c in candidates if revisions.is_rebuild(run, c["id"], depth, messages[depth:])), None)


@dataclass
class Ingesting:
    """An ingest under way: the conversation identified, the messages before `next` stored."""

    conversation: sqlite3.Row
    messages: Sequence[Message]
    chain: list[str]
    keep: int  # how many were stored before this request
    stored: list[StoredMessage]
    count_tokens: Callable[[Message], int]
    forked: bool
    revised: bool
    now: float
    index_later: bool = False  # a bulk import: searchable once `index_pending` has indexed it

    @property
    def next(self) -> int:
        return len(self.stored)

    @property
    def conversation_id(self) -> str:
        return str(self.conversation["id"])


def ingest(run: Runner, messages: Sequence[Message], *, model: str, external_id: str | None,
           count_tokens: Callable[[Message], int], prefix_rows: PrefixRows | None = None,
           keys: Sequence[bytes | None] | None = None, many: Many | None = None) -> IngestResult:
    """Identify the conversation, store only new messages; the caller holds the transaction.
    `prefix_rows`: the backend's cache of stored rows already read (store/history/prefix_rows.py); `keys`:
    the messages' `exact_keys` when the caller has them (store/encoding/running_hashes.py)."""
    state = begin(run, messages, model=model, external_id=external_id, count_tokens=count_tokens,
                  prefix_rows=prefix_rows, keys=keys)
    append(run, state, len(messages), many)
    return finish(state)


@dataclass(frozen=True)
class Ahead:
    """What `read_ahead` found before the write transaction: the request's chain hashes and, when
    it continues a stored conversation, that conversation's stored prefix."""

    chain: list[str]
    conversation_id: str | None = None
    keep: int = 0
    stored: list[StoredMessage] | None = None


def read_ahead(run: Runner, messages: Sequence[Message], *, external_id: str | None,
               prefix_rows: PrefixRows | None = None, keys: Sequence[bytes | None] | None = None) -> Ahead:
    """`begin`'s linear work done outside the write transaction, so that a long history (a resumed
    50,000-message session: hundreds of milliseconds) does not hold the store meanwhile: the chain
    hashes, and the stored prefix of the conversation the request continues. Stored rows never
    change but for `pinned`, which only ever gets set: `begin` takes them when it finds the same
    conversation and prefix again, under the transaction."""
    if not messages:
        raise InvalidRequestError("messages must not be empty", param="messages")
    keys = exact_keys(messages) if keys is None else keys
    chain, match = _identify(run, messages, external_id, keys)
    conv = match.conversation
    if conv is None or not match.matched or _forks(match, len(messages)):
        return Ahead(chain)
    stored = _stored_prefix(run, conv["id"], messages, match.matched, chain, prefix_rows, keys)
    return Ahead(chain, str(conv["id"]), match.matched, stored)


def begin(run: Runner, messages: Sequence[Message], *, model: str, external_id: str | None,
          count_tokens: Callable[[Message], int], prefix_rows: PrefixRows | None = None,
          keys: Sequence[bytes | None] | None = None, ahead: Ahead | None = None) -> Ingesting:
    """Identify the conversation `messages` continue (forking or revising when they diverge);
    nothing new is stored yet (`append`). `ahead`: `read_ahead`'s findings, used where they hold."""
    if not messages:
        raise InvalidRequestError("messages must not be empty", param="messages")
    keys = exact_keys(messages) if keys is None else keys
    chain, match = _identify(run, messages, external_id, keys, ahead.chain if ahead is not None else None)
    now = time.time()
    conv, keep = match.conversation, match.matched
    forked = revised = False
    if conv is not None and _forks(match, len(messages)):
        rebuilt = _rebuilt(run, match, chain, messages, external_id)
        if rebuilt is not None:
            conv = rebuilt
            revisions.revise(run, conv["id"], keep)
            revised = True
        else:
            forked = external_id is not None or not _only_system(messages, keep)
            conv = insert_conversation(run, model, external_id, conv["id"] if forked else None, now)
            keep = 0
    elif conv is None:
        conv = insert_conversation(run, model, external_id, None, now)
    if ahead is not None and ahead.stored is not None and ahead.conversation_id == conv["id"] \
            and ahead.keep == keep:
        stored = ahead.stored
    else:
        stored = _stored_prefix(run, conv["id"], messages, keep, chain, prefix_rows, keys) if keep else []
    return Ingesting(conv, messages, chain, keep, stored, count_tokens, forked, revised, now)


def append(run: Runner, state: Ingesting, upto: int, many: Many | None = None) -> None:
    """Store `state`'s messages up to `upto` (exclusive) and the conversation's new length; with
    `many` (the backend's bulk statement), several in one call."""
    messages, cid, start = state.messages, state.conversation_id, state.next
    contents = [body_hash(b) for b in canonical_bodies(messages[start:upto])]
    new = [(seq, messages[seq], state.count_tokens(messages[seq]), (state.chain[seq], content))
           for seq, content in zip(range(start, upto), contents, strict=True)]
    if many is not None and len(new) > 1:
        state.stored += insert_messages(run, many, cid, new, state.now, index_later=state.index_later)
    else:
        state.stored += [insert_message(run, cid, seq, m, tokens, hashes, "client", state.now,
                                        index_later=state.index_later) for seq, m, tokens, hashes in new]
    if upto > start:
        run("UPDATE conversations SET message_count = :count, updated_at = :now "
            "WHERE tenant_id = :tenant AND id = :cid", {"count": upto, "now": state.now, "cid": cid})


def still_at(run: Runner, state: Ingesting) -> bool:
    """Whether the conversation still ends where `state` stopped (no other request wrote to it
    between two slices of this one)."""
    row = run("SELECT message_count FROM conversations WHERE tenant_id = :tenant AND id = :cid",
              {"cid": state.conversation_id}).fetchone()
    return row is not None and row["message_count"] == state.next


def finish(state: Ingesting) -> IngestResult:
    """The result once every message is stored."""
    total = len(state.messages)
    new_count = total - state.keep if state.keep < total else 0
    conversation = _conversation_after(state.conversation, new_count, total, state.now, state.revised)
    return IngestResult(conversation, tuple(state.stored), new_count, state.forked, state.revised)


def _conversation_after(row: sqlite3.Row, new_count: int, total: int, now: float,
                        revised: bool) -> Conversation:
    base = rows.conversation(row)
    if not new_count:
        return base
    count = total if revised else max(base.message_count, total)  # a revision may be shorter
    return replace(base, message_count=count, updated_at=now)
