"""Storing a provider reply where it belongs: after the request's last message, not at the tip.

A reply answers one request, whose history ends at `parent_seq`. When that is still the stored
tip, the reply is appended. When the conversation has moved on (a regenerated reply, or two identical
requests answered concurrently) and the next stored message is this same reply, nothing is written.
Otherwise the reply starts a branch: a new conversation (`forked_from` set) holding messages
0..parent_seq and the reply; the old conversation is never modified. Runs inside the caller's
transaction, with the tenant-scoped runner of a TenantStore.
"""

from __future__ import annotations

import sqlite3
import time

from config.errors import StoreError
from store import rows
from store.encoding.identity import body_hash, canonical_bodies, chain_from_bodies
from store.history import ingest as ingest_mod
from store.models import Message, StoredMessage
from store.runner import Runner

_COPIED = ("seq, role, token_count, chain_hash, content_hash, pinned, source, created_at, message_json, "
           "text")


def _at(run: Runner, cid: str, seq: int) -> sqlite3.Row | None:
    row: sqlite3.Row | None = run(
        "SELECT * FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid AND seq = :seq",
        {"cid": cid, "seq": seq}).fetchone()
    return row


def _parent(run: Runner, conv: sqlite3.Row, parent_seq: int, parent_chain: str | None) -> sqlite3.Row:
    """The message the reply answers; a reply to anything else is a caller bug."""
    parent = _at(run, conv["id"], parent_seq) if 0 <= parent_seq < conv["message_count"] else None
    if parent is None:
        raise StoreError(f"reply parent seq {parent_seq} is not stored in conversation {conv['id']!r}")
    if parent_chain is not None and parent["chain_hash"] != parent_chain:
        raise StoreError(f"reply parent seq {parent_seq} of conversation {conv['id']!r} is not the "
                         "request's last message (chain hash differs)")
    return parent


def _fork(run: Runner, conv: sqlite3.Row, parent_seq: int, now: float) -> str:
    """A new conversation holding copies of messages 0..parent_seq (the FTS triggers index them)."""
    fork = ingest_mod.insert_conversation(run, conv["model"], conv["external_id"], conv["id"], now)
    run(f"INSERT INTO messages (tenant_id, conversation_id, {_COPIED}) SELECT tenant_id, :fork, "
        f"{_COPIED} FROM messages WHERE tenant_id = :tenant AND conversation_id = :cid AND seq >= 0 "
        "AND seq <= :upto ORDER BY seq", {"fork": fork["id"], "cid": conv["id"], "upto": parent_seq})
    return str(fork["id"])


def append_reply(run: Runner, conv: sqlite3.Row, message: Message, token_count: int, *,
                 parent_seq: int, parent_chain: str | None) -> StoredMessage:
    """Append, reuse the identical stored reply, or branch (see the module docstring)."""
    parent = _parent(run, conv, parent_seq, parent_chain)
    body = canonical_bodies([message])[0]
    pair = (chain_from_bodies([body], parent["chain_hash"])[0], body_hash(body))
    cid = str(conv["id"])
    if parent_seq < conv["message_count"] - 1:
        following = _at(run, cid, parent_seq + 1)
        if following is not None and following["content_hash"] == pair[1]:
            return rows.message(following)  # the same reply is already stored: idempotent
        cid = _fork(run, conv, parent_seq, time.time())
    now = time.time()
    stored = ingest_mod.insert_message(run, cid, parent_seq + 1, message, token_count, pair, "reply", now)
    run("UPDATE conversations SET message_count = :count, updated_at = :now "
        "WHERE tenant_id = :tenant AND id = :cid", {"count": parent_seq + 2, "now": now, "cid": cid})
    return stored
