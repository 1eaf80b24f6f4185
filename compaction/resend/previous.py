"""The previous request of each conversation: a resend's leading messages found in one comparison.

A client resends its whole history each turn, so a request's leading messages are, byte for byte, the
previous request's. The request's messages are encoded as one list (orjson: one C call) and compared
with the previous request's encoding: the leading messages the two share are found without a pass per
message, and their exact JSON (store/encoding/running_hashes.py `exact_keys`) are slices of that encoding.
The shared messages are handed on as the previous request's own dicts (equal JSON: forwarding them
forwards the client's bytes), so what is memoised by identity downstream holds for them; they passed
validation then, so they are not checked again. When the leading messages already are the previous
request's own dicts (a body parsed only past its resent part, proxy/server/resent_body.py), only what
follows them is encoded. Bounded in bytes, least recently used first out.

Exactness: equal bytes are equal JSON values (key order included), except that orjson writes NaN and
the infinities as null; so the shared dicts are compared with `==` too (a NaN or an infinity is not
None), and a request holding anything but plain JSON (store/encoding/fastjson.py `is_plain`) is never kept.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

import orjson

from compaction.resend.early_forward import Passthrough
from config.sized_lru import SizedLru
from store.encoding.identity import trimmed_hash
from store.encoding.running_hashes import exact_json, exact_keys, kept
from store.models import Message, StoredMessage

MAX_BYTES = 12 * 1024 * 1024  # about six resent 100k-token histories (at the estimate below)
EXTENSION_BYTES = 64 * 1024  # new messages `extension` takes on (encoded, then counted on the loop)
LOOSE_COPIES = 8  # the previous request's messages a resend may carry as equal copies, not its own dicts
# Bytes of one kept message beyond its share of the encoding: its dict and its share of the tuple,
# and its strings once more (the records of store/history/prefix_rows.py mostly hold them already).
_MESSAGE_BYTES = 512
Key = tuple[str, str | None, bytes]  # (tenant, external conversation id, the first message's exact JSON)
Expected = frozenset[str]  # tool call ids a tool result may answer next (compaction/messages.py)


@dataclass(frozen=True)
class Prior:
    """One request's messages as validated, and their encoding as one list."""

    messages: tuple[Message, ...]
    blob: bytes  # orjson.dumps(list(messages)), right-sized
    ends: tuple[int, ...]  # offset in `blob` just past each message
    keys: tuple[bytes, ...]  # each message's exact JSON (its slice of `blob`), right-sized
    expected: Expected  # validation state after the last message
    size: int
    passing: Passthrough | None = None  # how it was forwarded, when exactly as received


@dataclass(frozen=True)
class Resent:
    """A request's messages: the previous request's dicts for the leading ones they share, then its own."""

    messages: list[Message]
    keys: list[bytes | None]  # each message's exact JSON
    shared: int  # leading messages the previous request had (validated then)
    expected: Expected | None  # validation state after them, when they are all the previous request's
    blob: bytes | None  # the request's encoding as one list (None: not plain JSON)
    key: Key | None
    ends: tuple[int, ...] = ()  # offset in `blob` just past each shared message
    passing: Passthrough | None = None  # the previous request's, when this one resends all of it
    # The previous request's, when this one keeps only its leading messages (a rebuilt history),
    # and the previous request's messages it does not keep (compaction/resend/early_forward.py `rebuilt`).
    rebuilding: Passthrough | None = None
    dropped: tuple[Message, ...] = ()


class Resends:
    """The previous request per (tenant, conversation id header, first message); thread-safe."""

    def __init__(self, max_bytes: int = MAX_BYTES, name: str | None = None) -> None:
        self._held: SizedLru[Key, Prior] = SizedLru(max_bytes, name=name)  # sized in bytes

    def resent(self, tenant: str, external_id: str | None, received: list[Message]) -> Resent:
        """`received` with the leading messages it shares with the previous request found."""
        key = _key(tenant, external_id, received)
        if key is None:
            return Resent(received, exact_keys(received), 0, None, None, None)
        prior = self._held.get(key)
        blob, shared, as_received = _compared(prior, received)
        if blob is None:
            return Resent(received, exact_keys(received), 0, None, None, None)
        if prior is None or not shared:
            return Resent(received, exact_keys(received), 0, None, blob, key)
        return _sharing(prior, received, shared, blob, key, as_received)

    def extension(self, tenant: str, external_id: str | None,
                  received: Sequence[Message]) -> Resent | None:
        """`resent` of a request that begins with the previous request's own dicts (a body parsed
        only past its resent part) and adds new messages of at most EXTENSION_BYTES, when that
        request was forwarded as received; else None. Bounded work, for the HTTP loop
        (compaction/resend/early_forward.py)."""
        key = _key(tenant, external_id, received)
        prior = self._held.get(key) if key is not None else None
        if prior is None or prior.passing is None or len(received) <= len(prior.messages):
            return None
        blob = _extended(prior, received)
        if blob is None or len(blob) - len(prior.blob) > EXTENSION_BYTES:
            return None
        return _sharing(prior, list(received), len(prior.messages), blob, cast("Key", key), as_received=True)

    def replied(self, tenant: str, external_id: str | None, received: Sequence[Message],
                reply: StoredMessage) -> None:
        """Note the reply stored to `received` on its kept passthrough (early_forward.extended):
        when it does not follow the request in its conversation (a branch), nothing is forwarded
        early after it."""
        key = _key(tenant, external_id, received)
        prior = self._held.get(key) if key is not None else None
        if prior is None or prior.passing is None or prior.messages[-1] is not received[-1]:
            return  # not this request's (another request of the conversation was kept since)
        follows = (reply.conversation_id == prior.passing.prepared.conversation_id
                   and reply.seq == len(prior.messages))
        passing = (replace(prior.passing, reply_hash=reply.content_hash, reply_tokens=reply.token_count,
                           reply_trimmed=trimmed_hash(reply.message)) if follows else None)
        self._held.put(cast("Key", key), replace(prior, passing=passing), prior.size)

    def compacted(self, conversation_id: str) -> None:
        """A view was saved for the conversation: its requests are planned in full from now on."""
        self._held.discard_where(lambda prior: prior.passing is not None
                                 and prior.passing.prepared.conversation_id == conversation_id)

    def keep(self, resent: Resent, expected: Expected, passing: Passthrough | None = None) -> None:
        """Remember `resent`'s messages, validated, as its conversation's previous request (not when
        they are not all plain JSON), with `passing` when they were forwarded as received."""
        if resent.key is None or resent.blob is None or None in resent.keys:
            return
        if not self._held.fits(_size(resent.blob, len(resent.messages))):  # not copied only to be let go
            self._held.discard(resent.key)
            return
        prior = _prior(resent, expected, passing)
        self._held.put(resent.key, prior, prior.size)

    def forget(self) -> None:
        self._held.clear()

    @property
    def held_bytes(self) -> int:
        return self._held.held

    def __len__(self) -> int:
        return len(self._held)


def _key(tenant: str, external_id: str | None, received: Sequence[Message]) -> Key | None:
    first = exact_json(received[0]) if received else None
    return None if first is None else (tenant, external_id, first)


def _sharing(prior: Prior, received: list[Message], shared: int, blob: bytes, key: Key,
             as_received: bool = False) -> Resent:
    """`received`, whose first `shared` messages are the prior's: as the prior's own dicts, or, when
    `as_received` (`_extended` found them the prior's own dicts or equal copies), as received."""
    keys: list[bytes | None] = [*prior.keys[:shared], *exact_keys(received[shared:])]
    whole = shared == len(prior.messages)
    messages = list(received) if as_received else [*prior.messages[:shared], *received[shared:]]
    return Resent(messages, keys, shared,
                  prior.expected if whole else None, blob, key, prior.ends[:shared],
                  prior.passing if whole else None, None if whole else prior.passing,
                  () if whole else prior.messages[shared:])


def _encoded(messages: list[Message]) -> bytes | None:
    try:
        return orjson.dumps(messages)
    except orjson.JSONEncodeError:  # a big int, a lone surrogate, a non-str key: no comparison
        return None


def _compared(prior: Prior | None, received: list[Message]) -> tuple[bytes | None, int, bool]:
    """`received`'s encoding (None: not plain JSON), how many leading messages it shares with the
    prior request, and whether those are its own dicts or equal copies (`_extended`)."""
    if prior is not None and (blob := _extended(prior, received)) is not None:
        return blob, len(prior.messages), True
    blob = _encoded(received)
    return blob, _shared(prior, blob, received) if prior is not None and blob is not None else 0, False


def _extended(prior: Prior, received: Sequence[Message]) -> bytes | None:
    """`received`'s encoding when it begins with the prior's own dicts (a body whose resent part was
    not parsed again, proxy/server/resent_body.py), at most LOOSE_COPIES of them equal copies
    (exact JSON): a client that moves its cache mark has its previous newest message parsed again,
    and the Messages route's translations (proxy/wire/anthropic.py) hand on the copies they made.
    The copies are kept from then on, so the next resend carries the same dicts. Only what follows
    the prior's messages is encoded. Else None."""
    held = prior.messages
    if len(received) < len(held):
        return None
    if not all(map(operator.is_, held, received)):
        copies = [i for i, mine in enumerate(held) if mine is not received[i]]
        if (len(copies) > LOOSE_COPIES or len(copies) == len(held)  # a body parsed anew: `_shared`
                or any(exact_json(received[i]) != prior.keys[i] for i in copies)):
            return None
    if len(received) == len(held):
        return prior.blob
    tail = _encoded(list(received[len(held):]))
    return None if tail is None else b"".join((memoryview(prior.blob)[:-1], b",", memoryview(tail)[1:]))


def _shared(prior: Prior, blob: bytes, received: Sequence[Message]) -> int:
    """How many leading messages of `received` are exactly the prior's: the longest run whose bytes
    are a prefix of `blob` (the encodings agree up to where a message ends, so it is that message),
    confirmed by `==` (NaN and infinity, written as null, differ from None)."""
    view = memoryview(prior.blob)
    if blob.startswith(view[:len(prior.blob) - 1]):  # every prior message (the list's `]` aside)
        shared = len(prior.messages)
    else:
        shared = _common_messages(prior.ends, view, blob)
    if shared > len(received):
        return 0
    return shared if list(prior.messages[:shared]) == received[:shared] else 0


def _common_messages(ends: tuple[int, ...], view: memoryview, blob: bytes) -> int:
    """The number of leading messages whose bytes `blob` shares with the prior's (binary search on
    message ends: sharing the bytes up to one message's end implies sharing every one before)."""
    low, high = 0, len(ends)  # the answer lies in [low, high]
    while low < high:
        mid = (low + high + 1) // 2
        if blob.startswith(view[:ends[mid - 1]]):
            low = mid
        else:
            high = mid - 1
    return low


def _prior(resent: Resent, expected: Expected, passing: Passthrough | None) -> Prior:
    """The Prior of a request whose messages are all plain (every key known)."""
    ends = list(resent.ends)
    end = ends[-1] if ends else 0
    for key in resent.keys[len(ends):]:
        end += 1 + len(key or b"")  # the `[` or `,` before it, then its bytes
        ends.append(end)
    blob = kept(resent.blob or b"")
    shared = len(resent.ends)
    keys = (*cast("tuple[bytes, ...]", resent.keys[:shared]), *(kept(k or b"") for k in resent.keys[shared:]))
    return Prior(tuple(resent.messages), blob, tuple(ends), keys, expected, _size(blob, len(resent.messages)),
                 passing)


def _size(blob: bytes, messages: int) -> int:
    """A Prior's bytes: the blob, the keys, the dicts' strings."""
    return 3 * len(blob) + _MESSAGE_BYTES * messages


RESENDS = Resends(name="resends")
