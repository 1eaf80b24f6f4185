"""Conversation identity: message normalisation and the hash chain over a history.

SDKs add noise when they echo an assistant reply back (`refusal: null`, `annotations: []`,
`audio: null`, content as a list of text parts...), agents re-serialise what they received (a tool
call's JSON arguments with other spacing or key order) and move per-request marks (`cache_control`)
to the newest message each turn. Normalising before hashing makes a resent history hash exactly like
the stored one, so a stateless client is recognised without any header. Only meaning is kept: a
different role, text, tool name, call id or argument value is a different message.

`chain_hash[i] = sha256(chain_hash[i-1] + canonical_json(normalise(m_i)))` (hex), with an empty
string before the first message; `content_hash = sha256(canonical_json(normalise(m)))`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import orjson

from store.encoding.fastjson import canonical_ascii
from store.encoding.running_hashes import RunningHashes, exact_keys
from store.models import Message

# `function_call` (legacy function calling) is kept beside the contract's fields: two different legacy
# calls must not hash alike. It is dropped like any other key when null.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_KEPT_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id", "function_call")
# Per-request marks a client moves between messages (prompt caching): never part of a message's meaning.
_MARKS = frozenset({"cache_control"})


def _is_empty(value: Any) -> bool:
    """Null, empty string, empty list and empty dict carry no meaning for identity."""
    return value is None or (isinstance(value, (str, list, dict, tuple)) and len(value) == 0)


def _prune(value: Any) -> Any:
    """Drop empty values recursively from dicts (inside content parts and function objects)."""
    if isinstance(value, dict):
        pruned = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if not _is_empty(v)}
    if isinstance(value, (list, tuple)):
        return [_prune(v) for v in value]
    return value


def _unmarked(part: Any) -> Any:
    """A content part without its per-request marks (a part's own fields otherwise kept)."""
    if isinstance(part, dict) and not _MARKS.isdisjoint(part):
        return {k: v for k, v in part.items() if k not in _MARKS}
    return part


def _normalise_content(content: Any) -> Any:
    """A list made only of text parts is the joined string; other lists keep their pruned parts,
    without per-request marks."""
    if isinstance(content, (list, tuple)):
        if all(isinstance(p, dict) and p.get("type") == "text" for p in content):
            return "".join(str(p.get("text") or "") for p in content)
        return [_prune(_unmarked(p)) for p in content]
    return content


def canonical_arguments(arguments: Any) -> Any:
    """Tool-call arguments by meaning: a JSON string as the canonical encoding of its value (any
    spacing and key order alike), an object likewise; anything else (not JSON) as it is."""
    if isinstance(arguments, str):
        try:
            value = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            try:  # what orjson refuses and json reads (an integer beyond 64 bits, a lone surrogate)
                value = json.loads(arguments)
            except ValueError:
                return arguments
    elif isinstance(arguments, (dict, list)):
        value = arguments
    else:
        return arguments
    try:
        return canonical_ascii(value).decode()
    except (TypeError, ValueError):
        return arguments


def _normalise_function(function: Any) -> Any:
    """A function object (a tool call's, or a legacy `function_call`) as name and canonical arguments."""
    if not isinstance(function, dict):
        return _prune(function)
    return _prune({"name": function.get("name"), "arguments": canonical_arguments(function.get("arguments"))})


def _normalise_tool_call(call: Any) -> Any:
    """Reduce a tool call to id, type, function.name and function.arguments."""
    if not isinstance(call, dict):
        return call
    raw = call.get("function")
    reduced = {
        "id": call.get("id"),
        "type": call.get("type") or "function",
        "function": _normalise_function(raw if isinstance(raw, dict) else {}),
    }
    return _prune(reduced)


def normalise_message(m: Message) -> Message:
    """The identity-relevant part of a message: kept keys, empty values and `pinned` dropped."""
    out: Message = {}
    for key in _KEPT_KEYS:
        value = m.get(key)
        if value is None or value == "":
            continue
        if value.__class__ is str:  # the common case, kept as is
            out[key] = value
            continue
        if key == "content":
            value = _normalise_content(value)
        elif key == "tool_calls" and isinstance(value, (list, tuple)):
            value = [_normalise_tool_call(c) for c in value]
        elif key == "function_call":
            value = _normalise_function(value)
        elif isinstance(value, (dict, list, tuple)):
            value = _prune(value)
        if not _is_empty(value):
            out[key] = value
    return out


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, compact separators, non-ASCII as \\u escapes (the faster
    encoder path, and byte-identical whatever the input's normalisation of unicode storage)."""
    return _ENCODER.encode(value)


def content_hash(m: Message) -> str:
    """Hash of one normalised message alone."""
    return hashlib.sha256(canonical_ascii(normalise_message(m))).hexdigest()


def canonical_bodies(msgs: Sequence[Message]) -> list[bytes]:
    """Canonical JSON bytes of each normalised message (what both hashes are computed over)."""
    return [canonical_ascii(normalise_message(m)) for m in msgs]


def chain_from_bodies(bodies: Sequence[bytes], previous: str = "") -> list[str]:
    """Running hash over canonical bodies; `previous` continues an already stored chain."""
    out: list[str] = []
    sha256 = hashlib.sha256
    for body in bodies:
        previous = sha256(previous.encode() + body).hexdigest()
        out.append(previous)
    return out


def chain_hashes(msgs: Sequence[Message], previous: str = "") -> list[str]:
    """Running hash per message; `previous` continues an already stored chain."""
    return chain_from_bodies(canonical_bodies(msgs), previous)


def trimmed_hash(m: Message) -> str:
    """The content hash of `m` with its text trimmed of surrounding whitespace: a client that rebuilds
    its history may trim the replies it echoes (aider), which must not hide them
    (store/history/revisions.py)."""
    normal = normalise_message(m)
    if isinstance(normal.get("content"), str):
        normal = {**normal, "content": normal["content"].strip()}
    return hashlib.sha256(canonical_ascii(normal)).hexdigest()


def body_hash(body: bytes) -> str:
    """content_hash from a canonical body."""
    return hashlib.sha256(body).hexdigest()


def _chain_step(previous: str, m: Message) -> str:
    return hashlib.sha256(previous.encode() + canonical_ascii(normalise_message(m))).hexdigest()


# Chain hashes of recently seen messages (a resent history is looked up, not re-encoded and hashed).
CHAINS = RunningHashes(_chain_step, name="chain_hashes")


def chain_of(msgs: Sequence[Message], keys: Sequence[bytes | None] | None = None) -> list[str]:
    """`chain_hashes(msgs)`, memoised per message (store/encoding/running_hashes.py); `keys`: the messages'
    exact JSON when the caller has it already. The run is the first message: a resend of the last
    history starting with it shares that history's hashes up to where the two differ."""
    keys = exact_keys(msgs) if keys is None else keys
    return CHAINS.over(msgs, keys=keys, run=keys[0] if keys else None)
