"""Migration step: every stored message's identity hashes recomputed under the current normalisation.

Identity hashes canonical forms (store/encoding/identity.py): when what counts as the same message widens
(tool arguments by their JSON value, per-request marks ignored), a conversation stored before must
still be found by its resends. The hashes are recomputed from the stored bodies, conversation by
conversation (a chain runs over its own conversation's messages from seq 0), inside the migration's
transaction; only rows whose hashes change are written. Either backend's `:name` execute.
"""

from __future__ import annotations

import json

from store.encoding.identity import body_hash, canonical_bodies, chain_from_bodies
from store.summaries import Execute


def rehash_messages(execute: Execute) -> int:
    """Recompute every message's chain and content hash; the number of rows rewritten."""
    conversations = [str(r[0]) for r in execute("SELECT id FROM conversations ORDER BY id", {}).fetchall()]
    return sum(_rehash_conversation(execute, cid) for cid in conversations)


def _rehash_conversation(execute: Execute, cid: str) -> int:
    """One conversation's messages, in seq order (one conversation's bodies in memory at a time)."""
    rows = execute("SELECT id, seq, chain_hash, content_hash, message_json FROM messages "
                   "WHERE conversation_id = :cid AND seq >= 0 ORDER BY seq", {"cid": cid}).fetchall()
    previous, changed = "", 0
    for expected_seq, row in enumerate(rows):
        if int(row[1]) != expected_seq:  # a gap: the chain past it cannot be recomputed
            break
        body = canonical_bodies([json.loads(row[4])])[0]
        chain, content = chain_from_bodies([body], previous)[0], body_hash(body)
        if (chain, content) != (row[2], row[3]):
            execute("UPDATE messages SET chain_hash = :chain, content_hash = :content WHERE id = :id",
                    {"chain": chain, "content": content, "id": row[0]})
            changed += 1
        previous = chain
    return changed
