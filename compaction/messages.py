"""Validation and small accessors for chat messages as clients send them.

Errors name the exact JSON path (`messages[3].content`) so a person can find the problem; the proxy
renders them as OpenAI-shaped 400s. `pinned` is ctxproxy's own field and never leaves the proxy.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from config.errors import InvalidRequestError
from config.sized_lru import SizedLru
from store.encoding.running_hashes import kept
from store.models import Message

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
PRIVATE_FIELDS = ("pinned",)
# Text the provider sees in a message that the engine neither reads nor summarizes (reasoning items,
# thinking blocks and their signatures, carried opaque by the API converters): counted, nothing else.
OPAQUE_TEXT_FIELD = "ctxproxy_opaque_text"
_TEXT_PART_TYPES = {"text"}
_USER_PART_TYPES = {"text", "image_url", "input_audio", "file"}
_PART_TYPES_BY_ROLE: dict[str, set[str]] = {
    "system": _TEXT_PART_TYPES, "developer": _TEXT_PART_TYPES, "tool": _TEXT_PART_TYPES,
    "function": _TEXT_PART_TYPES, "user": _USER_PART_TYPES, "assistant": {"text", "refusal"},
}
Expected = frozenset[str]  # the tool call ids a tool result may answer at a point of the list
_NO_CALLS: Expected = frozenset()
_ROUND_OPEN_ROLES = frozenset({"function", "system", "developer"})  # roles after which results may follow
MAX_VALID_BYTES = 4 * 1024 * 1024  # valid messages remembered (about seven resent 100k-token histories)
_VALID_OVERHEAD = 160  # an entry beyond its JSON: the bytes header 33, the ordered dict's slots ~120


class ValidMessages:
    """Exact JSON (store/encoding/running_hashes.py `exact_keys`) of messages that passed `_validate_message`,
    bounded in bytes, least recently used first out; thread-safe. A message's own checks depend on
    nothing but its bytes, so a resent message found here passes them again without being walked."""

    def __init__(self, max_bytes: int = MAX_VALID_BYTES, name: str | None = None) -> None:
        self._keys: SizedLru[bytes, bool] = SizedLru(max_bytes, name=name)  # sized in bytes

    def known(self, keys: Sequence[bytes | None]) -> list[bool]:
        """Whether each key was seen valid (None, a message outside JSON's own types: never)."""
        return [key is not None and self._keys.get(key) is not None for key in keys]

    def remember(self, keys: Sequence[bytes]) -> None:
        for key in keys:
            if self._keys.get(key) is None:  # right-sized: orjson's buffer is >= 4 KiB
                self._keys.put(kept(key), True, len(key) + _VALID_OVERHEAD)

    @property
    def held_bytes(self) -> int:
        return self._keys.held

    def __len__(self) -> int:
        return len(self._keys)


VALID = ValidMessages(name="valid_messages")


def _fail(path: str, message: str) -> InvalidRequestError:
    return InvalidRequestError(f"Invalid {path}: {message}", param=path, code="invalid_value")


def validate_messages(raw: Any, keys: Sequence[bytes | None] | None = None,
                      memo: ValidMessages = VALID) -> list[Message]:
    """Check a request's `messages` and return them (same objects) or raise InvalidRequestError.

    `keys`: each message's exact JSON (`exact_keys`); a message `memo` knows valid is not walked
    again, and each one that passes is remembered. The list's own check (tool results answering
    calls) runs every time."""
    return validate_resent(raw, keys, memo=memo)[0]


def validate_resent(raw: Any, keys: Sequence[bytes | None] | None = None, *, valid: int = 0,
                    expected: Expected | None = None,
                    memo: ValidMessages = VALID) -> tuple[list[Message], Expected]:
    """`validate_messages`, where the first `valid` messages passed before as the leading messages of
    a list (compaction/resend/previous.py), and `expected` (when known) is the tool calls a result may answer
    after them; also returns that state after the last message (to resume from next time)."""
    if not isinstance(raw, list):
        raise _fail("messages", f"expected an array of message objects, got {_type_name(raw)}")
    if not raw:
        raise _fail("messages", "must contain at least one message")
    rest = keys[valid:] if keys is not None else None
    known = memo.known(rest) if rest is not None else [False] * (len(raw) - valid)
    unseen = [valid + index for index, seen in enumerate(known) if not seen]
    for index in unseen:
        _validate_message(raw[index], f"messages[{index}]")
    if keys is not None:
        memo.remember([key for key in (keys[index] for index in unseen) if key is not None])
    if expected is None or not valid:
        return raw, _refuse_orphan_results(raw)
    return raw, _refuse_orphan_results(raw, valid, expected)


def _refuse_orphan_results(messages: list[Message], start: int = 0,
                           expected: Expected = _NO_CALLS) -> Expected:
    """A tool result must answer a call of the assistant message its round starts with (as OpenAI
    requires; a system message between them, as Anthropic clients send, leaves the round open): an
    orphan is refused, never forwarded nor repaired behind the client's back. Checks from `start`
    on, with `expected` the state there; returns the state after the last message."""
    for index in range(start, len(messages)):
        message = messages[index]
        role = message.get("role")
        if role == "tool":
            if message["tool_call_id"] not in expected:
                raise _fail(f"messages[{index}].tool_call_id",
                            f"no preceding assistant tool call has the id {message['tool_call_id']!r} "
                            "(a tool message must follow the assistant message that made the call)")
        elif role == "assistant":
            calls = message.get("tool_calls")
            expected = frozenset(c["id"] for c in calls) if calls else _NO_CALLS
        elif role not in _ROUND_OPEN_ROLES:
            expected = _NO_CALLS
    return expected


def _type_name(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _validate_message(message: Any, path: str) -> None:
    if not isinstance(message, dict):
        raise _fail(path, f"each message must be an object, got {_type_name(message)}")
    role = message.get("role")
    if role not in ROLES:
        raise _fail(f"{path}.role", f"must be one of {', '.join(ROLES)}; got {role!r}")
    if "pinned" in message and not isinstance(message["pinned"], bool):
        raise _fail(f"{path}.pinned", f"must be true or false, got {_type_name(message['pinned'])}")
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise _fail(f"{path}.name", f"must be a string, got {_type_name(name)}")
    _validate_content(message.get("content"), role, f"{path}.content")
    if role == "assistant" and message.get("tool_calls") is not None:
        _validate_tool_calls(message["tool_calls"], f"{path}.tool_calls")
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _fail(f"{path}.tool_call_id", "a tool message needs the id of the tool call it answers")
    if role == "function" and not isinstance(name, str):
        raise _fail(f"{path}.name", "a function message needs the name of the function")


def _validate_content(content: Any, role: str, path: str) -> None:
    if isinstance(content, str):
        return
    if content is None:
        if role == "assistant":
            return  # null with tool_calls, refusals or audio replies: OpenAI accepts it
        raise _fail(path, f"a {role} message needs content (a string or an array of parts)")
    if not isinstance(content, list):
        raise _fail(path, f"must be a string or an array of content parts, got {_type_name(content)}")
    allowed = _PART_TYPES_BY_ROLE[role]
    for index, part in enumerate(content):
        _validate_part(part, allowed, role, f"{path}[{index}]")


def _validate_part(part: Any, allowed: set[str], role: str, path: str) -> None:
    if not isinstance(part, dict):
        raise _fail(path, f"each content part must be an object, got {_type_name(part)}")
    kind = part.get("type")
    if not isinstance(kind, str):
        raise _fail(f"{path}.type", "each content part needs a string `type`")
    if kind not in allowed:
        raise _fail(f"{path}.type", f"part type {kind!r} is not allowed in a {role} message "
                                    f"(allowed: {', '.join(sorted(allowed))})")
    if kind in ("text", "refusal") and not isinstance(part.get(kind), str):
        raise _fail(f"{path}.{kind}", f"a {kind} part needs a string `{kind}` field")
    if kind == "image_url":
        image = part.get("image_url")
        if not isinstance(image, dict) or not isinstance(image.get("url"), str):
            raise _fail(f"{path}.image_url", "an image part needs `image_url: {\"url\": \"...\"}`")


def _validate_tool_calls(calls: Any, path: str) -> None:
    if not isinstance(calls, list):
        raise _fail(path, f"must be an array of tool calls, got {_type_name(calls)}")
    for index, call in enumerate(calls):
        _validate_tool_call(call, f"{path}[{index}]")


def _validate_tool_call(call: Any, path: str) -> None:
    if not isinstance(call, dict):
        raise _fail(path, f"each tool call must be an object, got {_type_name(call)}")
    if not isinstance(call.get("id"), str) or not call["id"]:
        raise _fail(f"{path}.id", "each tool call needs a non-empty string id")
    if call.get("type", "function") != "function":
        raise _fail(f"{path}.type", f"only 'function' tool calls are supported, got {call.get('type')!r}")
    fn = call.get("function")
    if not isinstance(fn, dict):
        raise _fail(f"{path}.function", "each tool call needs a `function` object")
    if not isinstance(fn.get("name"), str) or not fn["name"]:
        raise _fail(f"{path}.function.name", "the function name must be a non-empty string")
    if not isinstance(fn.get("arguments"), str):
        raise _fail(f"{path}.function.arguments",
                    f"must be a JSON-encoded string, got {_type_name(fn.get('arguments'))}")


def private_positions(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the messages carrying one of ctxproxy's own fields (one pass per field)."""
    found: set[int] = set()
    for name in PRIVATE_FIELDS:
        has = list(map(operator.contains, messages, itertools.repeat(name)))  # in C: usually none
        found.update(itertools.compress(range(len(has)), has))
    return sorted(found)


def strip_private_fields(message: Mapping[str, Any]) -> Message:
    """A copy of the message without ctxproxy's own fields (`pinned`): what a provider may see."""
    return {k: v for k, v in message.items() if k not in PRIVATE_FIELDS}


def is_pinned(message: Mapping[str, Any]) -> bool:
    return message.get("pinned") is True
