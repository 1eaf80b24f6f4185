"""Identity by meaning in the store (both backends): an agent's re-serialised resend continues its
conversation, an edit still forks, and conversations stored under the older, byte-exact hashes are
found again after the migration that recomputes them (store/upgrades/rehash.py)."""

from __future__ import annotations

import hashlib
from typing import Any

from store.encoding.fastjson import canonical_ascii
from store.encoding.identity import chain_hashes, content_hash, normalise_message
from store.interface import StoreBackend, TenantAccess
from store.postgres.store import PgStore
from store.sqlite.store import Store
from store.sqlite.transaction import transaction
from store.upgrades.rehash import rehash_messages
from tests.store.store_helpers import TokenCounter, sql

JSON = dict[str, Any]


def _agent_history(spacing: str) -> list[JSON]:
    """A tool round whose call arguments are written with `spacing` after the colon."""
    arguments = '{"command":' + spacing + '"ls", "cwd":' + spacing + '"/w"}'
    return [{"role": "system", "content": "You are opencode."},
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.py b.py"}]


def test_reserialised_arguments_continue_the_conversation(alice: TenantAccess, counter: TokenCounter) -> None:
    first = alice.ingest(_agent_history(" "), model="m", external_id=None, count_tokens=counter)
    resent = [*_agent_history(""), {"role": "assistant", "content": "two files"}]
    second = alice.ingest(resent, model="m", external_id=None, count_tokens=counter)
    assert second.conversation.id == first.conversation.id and not second.forked
    assert second.new_count == 1


def test_changed_argument_values_still_fork(alice: TenantAccess, counter: TokenCounter) -> None:
    first = alice.ingest([*_agent_history(" "), {"role": "user", "content": "and now?"}], model="m",
                         external_id=None, count_tokens=counter)
    edited = _agent_history(" ")
    edited[2]["tool_calls"][0]["function"]["arguments"] = '{"command": "ls -la", "cwd": "/w"}'
    fork = alice.ingest(edited, model="m", external_id=None, count_tokens=counter)
    assert fork.forked and fork.conversation.id != first.conversation.id


def _legacy_chain(messages: list[JSON]) -> list[tuple[str, str]]:
    """(chain hash, content hash) as ctxproxy stored them before: arguments hashed as their bytes."""
    out, previous = [], ""
    for m in messages:
        normal = normalise_message(m)
        for i, call in enumerate(normal.get("tool_calls") or []):
            call["function"]["arguments"] = m["tool_calls"][i]["function"]["arguments"]
        body = canonical_ascii(normal)
        previous = hashlib.sha256(previous.encode() + body).hexdigest()
        out.append((previous, hashlib.sha256(body).hexdigest()))
    return out


def _migrate(store: StoreBackend) -> int:
    """The migration's step, in a transaction of the backend's own."""
    if isinstance(store, PgStore):
        with store.db.transaction():
            return rehash_messages(store.db.execute)
    assert isinstance(store, Store)
    with store.lock, transaction(store.conn):
        return rehash_messages(store.conn.execute)


def test_the_migration_lets_conversations_stored_before_be_found(
        store: StoreBackend, alice: TenantAccess, counter: TokenCounter) -> None:
    stored = _agent_history(" ")
    first = alice.ingest(stored, model="m", external_id=None, count_tokens=counter)
    legacy = _legacy_chain(stored)
    assert legacy[2] != (chain_hashes(stored)[2], content_hash(stored[2]))  # the hashes did change
    for seq, (chain, content) in enumerate(legacy):  # the store as the older ctxproxy left it
        sql(store, "UPDATE messages SET chain_hash = ?, content_hash = ? "
                   "WHERE conversation_id = ? AND seq = ?", (chain, content, first.conversation.id, seq))
    assert _migrate(store) == len(stored) - 2  # the system and user messages hashed alike before
    rows = sql(store, "SELECT chain_hash, content_hash FROM messages WHERE conversation_id = ? ORDER BY seq",
               (first.conversation.id,))
    assert rows == [(c, content_hash(m)) for c, m in zip(chain_hashes(stored), stored, strict=True)]
    assert _migrate(store) == 0  # nothing left to recompute
    resent = [*_agent_history(""), {"role": "assistant", "content": "two files"}]
    again = alice.ingest(resent, model="m", external_id=None, count_tokens=counter)
    assert again.conversation.id == first.conversation.id and again.new_count == 1
