"""A resent chat, Messages or Responses body parsed without its shared leading messages (items).

An agent resends its whole history each turn, so a request body begins, byte for byte, with the
previous body up to the end of its last message. Where it does, only the rest is parsed: the shared
messages' bytes are cut out, a marker string stands in their place, and the marker is replaced by
the previous parse's dicts (equal bytes parse to equal values, and they passed every check then).
The marker, random per process, comes first in the top-level `messages` only when the cut was exactly
that array's leading messages; anything else (another layout, a miss, a body orjson refuses) is
parsed in full by the caller. A client that moves a per-request mark (`cache_control`) off its
previous newest message changes that message only: the body then shares the previous one's bytes up
to the end of the message before it, found where the client writes compact JSON as orjson does
(`Held.all_but_last`), and the parse resumes there. Held bodies are scoped by tenant (no timing
side channel between tenants) and bounded in bytes, least recently used first out.
"""

from __future__ import annotations

import functools
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from compaction import Message, SizedLru

MIN_BYTES = 32 * 1024  # a smaller body parses in well under 0.1 ms: not worth holding
MAX_BYTES = 16 * 1024 * 1024  # about 20 resent 100k-token histories (at the estimate in `_size`)
KEY_BYTES = 256  # of the messages array: mostly the start of the system prompt
CANDIDATES = 4  # bodies held per key: conversations of one tenant that begin alike
# `"messages": [` (JSON whitespace allowed). A quote cannot stand unescaped inside a JSON string, so
# this is a key; the marker check proves it was the top-level one.
_MESSAGES_ARRAY = re.compile(rb'"messages"[ \t\n\r]*:[ \t\n\r]*\[')
_MESSAGES_KEY = re.compile(rb'"messages"[ \t\n\r]*:')
# The Responses API's history is its `input` array (proxy/routes/responses.py holds those bodies).
_INPUT_ARRAY = re.compile(rb'"input"[ \t\n\r]*:[ \t\n\r]*\[')
_INPUT_KEY = re.compile(rb'"input"[ \t\n\r]*:')
ARRAYS = {"messages": (_MESSAGES_ARRAY, _MESSAGES_KEY), "input": (_INPUT_ARRAY, _INPUT_KEY)}
_JSON_SPACE = frozenset(b" \t\n\r")

Key = tuple[str, bytes]  # (scope: the tenant, the first KEY_BYTES of the messages array)
Checked = Callable[[dict[str, Any]], bool]  # the caller's checks of a parsed body (depth, numbers)


@dataclass(frozen=True)
class Held:
    """One body as received and its parsed messages (the array's at `start`, no other)."""

    raw: bytes
    start: int  # offset of the messages array's `[`
    messages: tuple[Message, ...]
    known_cut: int | None = None  # `cut`, when the parse that held it found it
    key: re.Pattern[bytes] = _MESSAGES_KEY  # the array's key (`ARRAYS`)

    @functools.cached_property
    def cut(self) -> int | None:
        """Offset just past the array's last message, where a resend's new part begins (found once,
        when first needed); None when it cannot be found."""
        if self.known_cut is not None:
            return self.known_cut
        cut = _elements_end(self.raw, self.start)
        # A parse keeps the last of two equal keys: the held messages are this array's only when no
        # other `"messages"` key follows it (a nested one too, to keep this check simple).
        return cut if cut is not None and self.key.search(self.raw, cut) is None else None

    @functools.cached_property
    def all_but_last(self) -> int | None:
        """Offset just past the array's last message but one (found once, when first needed): where
        the array's bytes are exactly orjson's encoding of those messages (a compact writer), that
        encoding's end is their end. None otherwise, or with fewer than two messages."""
        if self.cut is None or len(self.messages) < 2:
            return None
        try:
            leading = orjson.dumps(list(self.messages[:-1]))
        except orjson.JSONEncodeError:
            return None
        head = memoryview(leading)[:-1]  # without its `]`
        if not self.raw.startswith(head, self.start):
            return None
        return self.start + len(head)


class ResentBodies:
    """The latest large chat bodies per tenant, so that a resend's new part alone is parsed;
    thread-safe."""

    def __init__(self, max_bytes: int = MAX_BYTES, array: str = "messages", name: str | None = None) -> None:
        self._held: SizedLru[Key, tuple[Held, ...]] = SizedLru(max_bytes, name=name)
        self._array = array  # the body's history array: `messages`, or the Responses API's `input`
        self._pattern, self._key_pattern = ARRAYS[array]
        self._marker = "ctxproxy-shared-" + secrets.token_hex(16)
        self._token = b'["' + self._marker.encode() + b'"'

    def parse(self, scope: str, raw: bytes, checked: Checked) -> dict[str, Any] | None:
        """`raw` parsed with a held body's messages reused (then held in its place); None where that
        does not apply. `checked` must accept the parse of the rest (else None too)."""
        start = _messages_start(raw, self._pattern)
        if start is None:
            return None
        key = _key(scope, raw, start)
        for held in self._held.get(key) or ():
            extended = self._extended(held, raw, checked)
            if extended is not None:
                body, newer = extended
                self._put(key, newer, replacing=held)
                return body
        return None

    def keep(self, scope: str, raw: bytes, body: dict[str, Any]) -> None:
        """Hold a body parsed in full (and checked) for its resends."""
        start, messages = _messages_start(raw, self._pattern), body.get(self._array)
        if start is not None and isinstance(messages, list) and messages:
            self._put(_key(scope, raw, start), Held(raw, start, tuple(messages), key=self._key_pattern),
                      replacing=None)

    @property
    def held_bytes(self) -> int:
        return self._held.held

    def _extended(self, held: Held, raw: bytes, checked: Checked) -> tuple[dict[str, Any], Held] | None:
        """`raw` parsed as `held`'s messages (all, else all but the last) and more, and what to hold
        for its own resends; None when `raw` begins with neither."""
        cut, reused = held.cut, len(held.messages)
        if cut is None:
            return None
        if not raw.startswith(memoryview(held.raw)[:cut]):
            cut, reused = held.all_but_last, reused - 1
            if cut is None or not raw.startswith(memoryview(held.raw)[:cut]):
                return None
        rest = self._token + raw[cut:]  # `,` and the new messages, or the array's `]`
        try:
            body = orjson.loads(raw[:held.start] + rest)
        except orjson.JSONDecodeError:
            return None
        new = body.get(self._array) if isinstance(body, dict) else None
        if not isinstance(new, list) or new[:1] != [self._marker] or not checked(body):
            return None
        messages = (*held.messages[:reused], *new[1:])
        body[self._array] = list(messages)
        rest_cut = _elements_end(rest, 0)  # the new messages alone are parsed again
        cut_now = None if rest_cut is None else cut + rest_cut - len(self._token)
        return body, Held(raw, held.start, messages, cut_now, self._key_pattern)

    def _put(self, key: Key, held: Held, *, replacing: Held | None) -> None:
        others = [h for h in self._held.get(key) or () if h is not replacing]
        kept = (held, *others)[:CANDIDATES]
        self._held.put(key, kept, sum(map(_size, kept)))


def _key(scope: str, raw: bytes, start: int) -> Key:
    return scope, raw[start:start + KEY_BYTES]


def _messages_start(raw: bytes, pattern: re.Pattern[bytes] = _MESSAGES_ARRAY) -> int | None:
    """In a body of MIN_BYTES or more, the offset of the bracket of a `"messages": [` that is a key of
    the body object itself: nothing but the body's own `{` opens before it (a brace inside a string
    before it only forgoes the reuse)."""
    found = pattern.search(raw) if len(raw) >= MIN_BYTES else None
    if found is None:
        return None
    before = raw[:found.start()]
    return found.end() - 1 if before.count(b"{") == 1 and b"[" not in before else None


def _elements_end(doc: bytes, start: int) -> int | None:
    """Offset just past the last element of the JSON array that opens at `doc[start]`, None when
    none does: orjson parses the array and reports where the content after it begins (in
    characters, not bytes); back from there over whitespace, the `]`, whitespace again."""
    view = memoryview(doc)[start:]
    try:
        orjson.loads(view)
    except orjson.JSONDecodeError as exc:
        if doc[start:start + 1] != b"[" or not exc.msg.startswith("unexpected content after"):
            return None
        after = start + (exc.pos if doc.isascii() else _byte_offset(view, exc.pos))
    else:
        return None  # the array is all that follows: not inside an object
    after = _before_space(doc, after, start) - 1  # at the `]`
    return _before_space(doc, after, start)


def _before_space(doc: bytes, offset: int, low: int) -> int:
    while offset > low and doc[offset - 1] in _JSON_SPACE:
        offset -= 1
    return offset


def _byte_offset(view: memoryview, chars: int) -> int:
    """The byte offset in UTF-8 `view` of its character `chars`."""
    return len(str(view, "utf-8", "replace")[:chars].encode())


def _size(held: Held) -> int:
    """Bytes held: the body, and about as much again for its parsed messages' strings."""
    return 2 * len(held.raw) + 256 * len(held.messages)
