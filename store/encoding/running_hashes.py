"""Running hashes over message lists, memoised per (previous hash, the message's exact JSON); bounded.

Every request resends its whole history, so the chain hashes (identity) and the forwarded hashes
(prefix stability) were recomputed over every message each turn: a canonical, key-sorted encoding
and a sha256 per message. A message seen before after the same previous hash has the same running
hash, so it is looked up instead. The key is the message's orjson encoding as received (insertion
order kept): equal bytes mean equal JSON values (a different key order is only a miss). A message
holding anything but dicts, lists, strings, ints, booleans and nulls (a float, say) is not memoised.
With a run key (a conversation, say), the last sequence hashed under it is kept too, and a resend is
compared with it in order first (nothing hashed or looked up for the leading messages they share).
Bounded in bytes held (keys, values and the memo's own structures), least recently used first out.
orjson's output is a buffer of at least 4 KiB whatever its length (3.12 on): a key is kept as a
right-sized copy, or a 60-byte message would hold 4 KiB and the bound would understate memory 15-fold.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from config import cache_budget
from config.fair_lock import FairRLock
from store.encoding.fastjson import is_plain
from store.models import Message

Step = Callable[[str, Message], str]  # (previous hash, message) -> this message's running hash
MAX_KEY_BYTES = 8 * 1024 * 1024  # about 14 resent 100k-token histories (500 messages of ~800 bytes)
MAX_RUN_BYTES = 4 * 1024 * 1024  # the last sequence of each run key: about 7 such histories
LOCKED_MESSAGES = 512  # messages hashed per hold of the lock (an import of 50,000 held it for 0.3 s)
# Bytes of a memo entry beyond its message's JSON, measured (tests/store/encoding/test_running_hashes.py):
# the key tuple 56, the bytes header 33, the 64-hex hash string 113, the ordered dict ~180 (its
# tables are sized for the churn of an LRU: deleted slots linger until the next resize).
_ENTRY_OVERHEAD = 384
# A run's message beyond its JSON: the bytes header 33, two tuple slots 16, its hash string 113 (when
# the memo has let it go).
_RUN_ENTRY_OVERHEAD = 168


def exact_json(message: Any) -> bytes | None:
    """The message's exact JSON (None when it holds a type outside JSON's own)."""
    if not is_plain(message):
        return None
    try:
        return orjson.dumps(message)
    except orjson.JSONEncodeError:
        return None


def exact_keys(messages: Sequence[Any]) -> list[bytes | None]:
    """Every message's exact JSON, once per request: the key of each memo keyed by it (validation,
    chain hashes, forwarded hashes), so a resent history is encoded once, not once per memo."""
    return [exact_json(m) for m in messages]


def leading_equal(held: Sequence[bytes | None], keys: Sequence[bytes | None]) -> int:
    """How many leading `keys` equal the `held` ones (a None never does), compared in C: a resend
    shares hundreds of them, and a Python loop over them cost more than the rest of the look-up."""
    same = list(map(operator.eq, held, keys))
    shared = same.index(False) if False in same else len(same)
    try:
        return list(held[:shared]).index(None)
    except ValueError:
        return shared


def key_bytes(keys: Sequence[bytes | None]) -> int:
    """The bytes of the keys that are known (summed in C)."""
    return sum(map(len, filter(None, keys)))


class Kept(bytes):
    """A right-sized key, held past its request. Every holder of keys holds these very objects when
    it can (`kept`, `as_held`), so a resend's keys are the held ones themselves: compared equal at
    once, by identity, instead of byte by byte over the whole history."""

    __slots__ = ()


_HELD_TYPES = frozenset({Kept, type(None)})


def kept(key: bytes) -> Kept:
    """`key` right-sized for holding past the request (an orjson buffer is >= 4 KiB): a copy, or the
    key itself when it is one already."""
    return key if isinstance(key, Kept) else Kept(memoryview(key))


def as_held(held: tuple[bytes | None, ...], keys: Sequence[bytes | None]) -> tuple[bytes | None, ...]:
    """What to hold for `keys`' leading entries, equal to `held`: the caller's own objects when all
    are held ones (Kept or None, checked in C), so holders converge on the same objects; else `held`."""
    lead = keys[:len(held)]
    return tuple(lead) if set(map(type, lead)) <= _HELD_TYPES else held


@dataclass(frozen=True)
class _Run:
    """The last sequence hashed under one run key (its keys right-sized)."""

    previous: str
    keys: tuple[bytes | None, ...]
    hashes: tuple[str, ...]
    size: int


class RunningHashes:
    """`over(messages)`: the running hash of each message under `step`, memoised; thread-safe."""

    def __init__(self, step: Step, max_bytes: int = MAX_KEY_BYTES, *, name: str | None = None,
                 max_run_bytes: int = MAX_RUN_BYTES) -> None:
        self._step = step
        self._memo: OrderedDict[tuple[str, bytes], str] = OrderedDict()
        self._bytes = 0
        self._max = self._default_max = max_bytes
        self._runs: OrderedDict[Hashable, _Run] = OrderedDict()
        self._run_bytes = 0
        self._max_run = self._default_max_run = max_run_bytes
        self._lock = FairRLock()  # engine threads take turns (config/fair_lock.py)
        if name is not None:
            cache_budget.register(name, self)

    def scale(self, factor: float) -> None:
        """Both bounds set to their defaults x `factor` (what is over them goes at the next write)."""
        with self._lock:
            self._max = int(self._default_max * factor)
            self._max_run = int(self._default_max_run * factor)

    def over(self, messages: Sequence[Message], previous: str = "",
             keys: Sequence[bytes | None] | None = None, run: Hashable | None = None) -> list[str]:
        """`keys`: the messages' `exact_keys` when the caller has them already; `run`: compare with
        (and then keep) the last sequence hashed under this key."""
        keys = exact_keys(messages) if keys is None else keys
        shared_keys, out = self._resumed(run, previous, keys) if run is not None else ((), [])
        last = out[-1] if out else previous
        # A sequence over half the memo would only push out everyone else's entries, then its own
        # (a resent 50,000-message history: every turn copied and evicted 50,000 keys, no hit).
        new_bytes = key_bytes(keys[len(out):])
        remember = new_bytes + _ENTRY_OVERHEAD * (len(keys) - len(out)) <= self._max // 2
        for start in range(len(out), len(messages), LOCKED_MESSAGES):
            end = min(len(messages), start + LOCKED_MESSAGES)
            with self._lock:  # a slice of look-ups at a time: other threads' look-ups go between
                last = self._hashed(messages[start:end], keys[start:end], last, out, remember)
        if run is not None:
            fits = _run_size(key_bytes(shared_keys) + new_bytes, len(keys)) <= self._max_run
            made = _run(previous, shared_keys, keys, out) if fits else None  # copies: not under the lock
            with self._lock:
                self._keep_run(run, made)
        return out

    def _hashed(self, messages: Sequence[Message], keys: Sequence[bytes | None], last: str,
                out: list[str], remember: bool = True) -> str:
        """Each message's hash after `last` appended to `out`, from the memo or made (lock held),
        the made ones memoised when `remember`; the last one."""
        memo = self._memo
        missed: list[tuple[tuple[str, bytes], str]] = []
        for message, exact in zip(messages, keys, strict=True):
            key = (last, exact) if exact is not None else None
            found = memo.get(key) if key is not None else None
            if found is None:
                found = self._step(last, message)
                if key is not None:
                    missed.append((key, found))
            else:
                memo.move_to_end(key)  # type: ignore[arg-type]
            out.append(found)
            last = found
        if remember:
            for key, value in missed:
                self._remember(key, value)
        return last

    def _resumed(self, run: Hashable, previous: str,
                 keys: Sequence[bytes | None]) -> tuple[tuple[bytes | None, ...], list[str]]:
        """The leading keys the run's last sequence shares with `keys` (its own right-sized copies),
        and their hashes."""
        with self._lock:
            seen = self._runs.get(run)
        if seen is None or seen.previous != previous:
            return (), []
        shared = leading_equal(seen.keys, keys)
        return seen.keys[:shared], list(seen.hashes[:shared])

    def _keep_run(self, run: Hashable, made: _Run | None) -> None:
        """`made` as the run's last sequence (None, or over the bound: the run's old one dropped)."""
        old = self._runs.pop(run, None)
        self._run_bytes -= old.size if old is not None else 0
        if made is None or made.size > self._max_run:
            return
        self._runs[run] = made
        self._run_bytes += made.size
        while self._run_bytes > self._max_run:
            _, dropped = self._runs.popitem(last=False)
            self._run_bytes -= dropped.size

    def _remember(self, key: tuple[str, bytes], value: str) -> None:
        if key in self._memo:
            return
        key = (key[0], kept(key[1]))  # right-sized: orjson's buffer is >= 4 KiB
        self._memo[key] = value
        self._bytes += len(key[1]) + _ENTRY_OVERHEAD
        while self._bytes > self._max and self._memo:
            (_, old), _ = self._memo.popitem(last=False)
            self._bytes -= len(old) + _ENTRY_OVERHEAD

    @property
    def held_bytes(self) -> int:
        """The memo's bytes and the runs'."""
        return self._bytes + self._run_bytes

    @property
    def max_bytes(self) -> int:
        return self._max + self._max_run

    @property
    def run_bytes(self) -> int:
        return self._run_bytes

    def __len__(self) -> int:
        return len(self._memo)


def _run(previous: str, shared: tuple[bytes | None, ...], keys: Sequence[bytes | None],
         hashes: list[str]) -> _Run:
    """The run to keep: the keys it shared with the last one (the caller's own objects when they
    are held ones, `as_held`; else as the run kept them), the rest copied right-sized."""
    fresh = tuple(None if k is None else kept(k) for k in keys[len(shared):])
    held = as_held(shared, keys) + fresh
    return _Run(previous, held, tuple(hashes), _run_size(key_bytes(held), len(held)))


def _run_size(keys_bytes: int, messages: int) -> int:
    """A kept run's bytes: its keys' and each message's overhead."""
    return keys_bytes + _RUN_ENTRY_OVERHEAD * (messages + 1)
