"""The forwarded log in constant space per request: prefix stability without every message hash.

A forwarded request is recorded as counts (messages forwarded, leading messages shared with the
previous request, whether it extends it); only the newest request of each conversation keeps its
per-message hashes (the tip, `TIP_HASH_BYTES` per message), to compare the next request with. So
bytes per recorded request do not grow with the conversation; the tip grows like the conversation.
Backend-agnostic: any store can keep the tip as one blob per conversation.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import replace

from store.encoding.billing import billed_input, prefix_tokens
from store.models import ForwardedRecord

TIP_HASH_BYTES = 8  # a truncated digest per message: collisions only blur a statistic
DIGESTS_KEPT = 16_384  # tip entries memoised (the running hash strings are the memo's own)


def pack(prefix_hashes: Sequence[str]) -> bytes:
    """The tip of one request: a short digest of each message's running hash, concatenated."""
    return b"".join(map(_digest, prefix_hashes))


@functools.lru_cache(maxsize=DIGESTS_KEPT)
def _digest(running_hash: str) -> bytes:
    """A tip entry; memoised (bounded): a resend's running hashes are mostly the previous request's."""
    return hashlib.blake2b(running_hash.encode(), digest_size=TIP_HASH_BYTES).digest()


def compare(previous: bytes | None, current: bytes) -> tuple[int, bool | None]:
    """(leading messages in common, whether `previous` is a prefix of `current`); (0, None) first."""
    if previous is None:
        return 0, None
    if current.startswith(previous):
        return len(previous) // TIP_HASH_BYTES, True
    shared = 0
    for start in range(0, min(len(previous), len(current)), TIP_HASH_BYTES):
        if previous[start:start + TIP_HASH_BYTES] != current[start:start + TIP_HASH_BYTES]:
            break
        shared += 1
    return shared, False


def tools_digests(rec: ForwardedRecord) -> bytes:
    """The tip's entry for the tool schemas: a digest of what was forwarded, then of what was received."""
    return _digest(rec.tools_key) + _digest(rec.received_tools_key)


def costed(rec: ForwardedRecord, tip: bytes | None, received_tip: bytes | None, tools: bytes | None,
           packed: bytes, received: bytes) -> ForwardedRecord:
    """`rec` with its comparison against the previous request's tips: shared prefixes in messages
    and tokens (tool schemas first: when they changed, nothing is shared), and the billed-input
    estimates of what was forwarded and of the whole history."""
    shared, extends = compare(tip, packed)
    full_shared, _ = compare(received_tip, received) if received_tip else (0, None)
    now = tools_digests(rec)
    same_tools = tools is not None and tools[:TIP_HASH_BYTES] == now[:TIP_HASH_BYTES]
    same_received_tools = tools is not None and tools[TIP_HASH_BYTES:] == now[TIP_HASH_BYTES:]
    prefix = (rec.tools_tokens + prefix_tokens(shared, rec.message_tokens)) if same_tools else 0
    full_prefix = (rec.received_tools_tokens + prefix_tokens(full_shared, rec.received_tokens)
                   if same_received_tools else 0)
    return replace(rec, messages_forwarded=len(rec.prefix_hashes), shared_prefix=shared,
                   extends_previous=extends, prefix_tokens=prefix, full_prefix_tokens=full_prefix,
                   billed_input_estimate=billed_input(rec.pricing, prefix, rec.tokens_forwarded),
                   full_history_billed_estimate=billed_input(rec.pricing, full_prefix, rec.tokens_received))
