"""Anthropic Messages requests <-> the engine's canonical form (OpenAI chat messages).

`system` becomes the first system message; a user turn becomes its tool results (one tool message
per `tool_result` block, which come first in Anthropic's user turns) then the rest as one user
message; an assistant turn becomes one assistant message whose `tool_use` blocks are tool calls;
a `system` entry of `messages` (mid-conversation instructions) stays a system message at its place.
Each canonical message keeps its original blocks under BLOCKS_KEY, so untouched turns go back
byte-identical (thinking blocks with their signatures, unknown blocks). The blocks are kept without
their `cache_control` marks, which a client moves to its newest message each turn: a resent turn is
then the same canonical message as before (identity, the resend comparison), and the request's own
marks are put back where the client placed them when the body is built (`with_client_marks`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compaction import OPAQUE_TEXT_FIELD, Message, SizedLru
from config.errors import InvalidRequestError
from store.encoding.fastjson import dumps_compact

BLOCKS_KEY = "ctxproxy_blocks"  # the original content (string or blocks) of a canonical message
MARK = "cache_control"  # a per-request mark: where the provider's prompt cache ends this time
SYSTEM_KEY = "ctxproxy_system"  # marks the system message made of the request's `system`
MESSAGE_ROLES = ("user", "assistant", "system")  # roles of `messages` entries
Block = dict[str, Any]


MAX_TRANSLATED = 16_384  # canonical messages kept by `Translations`: some 40 resent Claude Code sessions
TRANSLATED_BYTES = 160  # what one kept message costs beyond what the resend caches hold anyway


class Translations:
    """The canonical messages made of turns and system prompts seen before, by turn object and by
    system prompt: a resent body's shared turns are the previous parse's own dicts
    (proxy/server/resent_body.py), so they give the previous request's own canonical dicts, and the
    engine can take the resend on the HTTP loop (compaction/resend/previous.py `extension`). A
    translation depends on the turn alone. Bounded in messages, least recently used first out."""

    def __init__(self, max_messages: int = MAX_TRANSLATED, name: str | None = None) -> None:
        self._turns: SizedLru[int, tuple[Any, tuple[Message, ...]]] = SizedLru(
            max_messages, name=name, unit_bytes=TRANSLATED_BYTES)
        self._systems: SizedLru[tuple[str, bytes], Message] = SizedLru(64)

    def turn(self, index: int, message: Any) -> tuple[Message, ...]:
        held = self._turns.get(id(message))
        if held is not None and held[0] is message:  # the very object (`id` alone may be reused)
            return held[1]
        made = tuple(_turn(index, message))
        self._turns.put(id(message), (message, made), len(made))
        return made

    def system(self, system: Any, scope: str) -> Message:
        """Scoped (the tenant): one tenant's request never finds another's prompt, not even by timing."""
        key = (scope, dumps_compact(system))
        found = self._systems.get(key)
        if found is None:
            found = _system_message(system)
            self._systems.put(key, found, 1)
        return found

    @property
    def held_bytes(self) -> int:
        return self._turns.held_bytes

    @property
    def max_bytes(self) -> int:
        return self._turns.max_bytes


def to_messages(body: Mapping[str, Any], translations: Translations | None = None,
                scope: str = "") -> list[Message]:
    """The canonical messages of a Messages request (its `system` first); `translations`: those made
    before, reused (the same dicts) for the same turns and, within `scope` (the tenant), system prompt."""
    out: list[Message] = []
    system = body.get("system")
    if system:
        out.append(translations.system(system, scope) if translations is not None
                   else _system_message(system))
    raw = body.get("messages")
    if not isinstance(raw, list):
        raise InvalidRequestError("messages: Field required", param="messages", code="invalid_value")
    for index, message in enumerate(raw):
        out += translations.turn(index, message) if translations is not None else _turn(index, message)
    return out


def _system_message(system: Any) -> Message:
    return {"role": "system", "content": text_of(system), BLOCKS_KEY: system, SYSTEM_KEY: True}


def _turn(index: int, message: Any) -> list[Message]:
    """The canonical messages of `messages[index]`; a role the API does not know is the client's error."""
    role = message.get("role") if isinstance(message, dict) else None
    if role not in MESSAGE_ROLES:
        raise InvalidRequestError(f"messages.{index}: each message needs role user, assistant or system",
                                  param=f"messages.{index}", code="invalid_value")
    content = message.get("content")
    if role == "system":
        return [_system_entry(index, content)]
    return assistant_turn(content) if role == "assistant" else _user_turn(content)


def _system_entry(index: int, content: Any) -> Message:
    """A `system` entry of `messages` as a system message at its place (its own content kept)."""
    blocks = content if isinstance(content, list) else None
    texts = blocks is not None and all(isinstance(b, dict) and b.get("type") == "text" for b in blocks)
    if not (isinstance(content, str) or texts):
        raise InvalidRequestError(f"messages.{index}.content: a system message takes a string or text blocks",
                                  param=f"messages.{index}.content", code="invalid_value")
    return {"role": "system", "content": text_of(content), BLOCKS_KEY: content}


def _blocks(content: Any) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _marked(content: Any) -> bool:
    return isinstance(content, list) and any(isinstance(b, dict) and MARK in b for b in content)


def _unmarked(content: Any) -> Any:
    """Content without its cache marks: the content itself when it has none."""
    if not _marked(content):
        return content
    return [{k: v for k, v in b.items() if k != MARK} if isinstance(b, dict) and MARK in b else b
            for b in content]


def with_client_marks(turns: list[Message], client: Any) -> list[Message]:
    """`turns` with the client's own turns put back where they carry cache marks and were forwarded
    unchanged (their blocks then equal the client's, marks aside). Turns are matched from the end,
    where the client puts its marks and compaction leaves the turns in place."""
    if not isinstance(client, list):
        return turns
    out, offset = list(turns), len(turns) - len(client)
    for index, message in enumerate(client):
        content = message.get("content") if isinstance(message, dict) else None
        at = index + offset
        if at >= 0 and _marked(content) and out[at].get("role") == message.get("role"):
            out[at] = _remarked(out[at], content)
    return out


def _remarked(turn: Message, content: Any) -> Message:
    """`turn` with the client's marked `content` in place of its unmarked copy: the whole turn, or
    the turn's last blocks when a hoisted system entry let the turn absorb the one before it."""
    plain, own = _blocks(_unmarked(content)), _blocks(turn.get("content"))
    if own == plain:
        return {**turn, "content": content}
    if isinstance(content, list) and plain and len(own) > len(plain) and own[-len(plain):] == plain:
        return {**turn, "content": own[:-len(plain)] + content}
    return turn


def text_of(content: Any) -> str:
    """Text of a string or of the text blocks of a list, joined."""
    if isinstance(content, str):
        return content
    texts = [b.get("text") for b in _blocks(content) if b.get("type") == "text"]
    return "\n".join(t for t in texts if isinstance(t, str) and t)


def _user_turn(content: Any) -> list[Message]:
    content = _unmarked(content)
    blocks = _blocks(content)
    results = [b for b in blocks if b.get("type") == "tool_result"]
    rest = [b for b in blocks if b.get("type") != "tool_result"]
    out: list[Message] = [{"role": "tool", "tool_call_id": str(b.get("tool_use_id") or ""),
                           "content": text_of(b.get("content")), BLOCKS_KEY: [b]} for b in results]
    if rest or not results:
        parts = [_image(b) if b.get("type") == "image" else {"type": "text", "text": text_of([b])}
                 for b in rest if b.get("type") in ("text", "image")]
        body: str | list[dict[str, Any]] = text_of(rest)
        if any(p["type"] == "image_url" for p in parts):
            body = [p for p in parts if p["type"] == "image_url" or p.get("text")]
        out.append({"role": "user", "content": body,
                    BLOCKS_KEY: content if isinstance(content, str) else rest})
    return out


def _image(block: Mapping[str, Any]) -> dict[str, Any]:
    raw = block.get("source")
    source: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
    url = source.get("url") or f"data:{source.get('media_type', '')};base64,{source.get('data', '')}"
    return {"type": "image_url", "image_url": {"url": str(url)}}


def assistant_turn(content: Any) -> list[Message]:
    """One assistant message from an assistant turn's content (or a reply's content blocks)."""
    content = _unmarked(content)
    blocks = _blocks(content)
    calls = [{"id": str(b.get("id")), "type": "function",
              "function": {"name": str(b.get("name")),
                           "arguments": dumps_compact(b.get("input") or {}).decode()}}
             for b in blocks if b.get("type") == "tool_use"]
    message: Message = {"role": "assistant", "content": text_of(blocks) or None}
    if calls:
        message["tool_calls"] = calls
    opaque = [b for b in blocks if b.get("type") not in ("text", "tool_use")]
    if opaque:  # thinking (with signatures) and other blocks: sent, so counted in the budget
        message[OPAQUE_TEXT_FIELD] = dumps_compact(opaque).decode()
    message[BLOCKS_KEY] = content
    return [message]


def from_messages(messages: Sequence[Mapping[str, Any]]) -> tuple[list[Block], list[Message]]:
    """(system blocks, messages) of a forwarded canonical list. System messages before the first
    turn join `system` (the client's first, then ctxproxy's anchors and summaries), a later one is
    a user text block; the client's `system` entries of `messages` go back as such where they are,
    unless compaction moved them before the first turn; consecutive user-side messages merge into
    one user turn."""
    system: list[Block] = []
    turns: list[Message] = []
    started = False  # a user or assistant turn was made
    hoisted = _compacted(messages)
    for message in messages:
        role = message.get("role")
        if is_system_entry(message) and (started or not hoisted):
            turns.append({"role": "system", "content": _system_content(message)})
            continue
        if role == "system" and not started:
            system += _system_blocks(message)
            continue
        started = True
        side = "assistant" if role == "assistant" else "user"
        blocks = _turn_blocks(message)
        if turns and turns[-1]["role"] == side and side == "user":
            turns[-1]["content"] = _blocks(turns[-1]["content"]) + _blocks(blocks)
        else:
            turns.append({"role": side, "content": blocks})
    first = next((t["role"] for t in turns if t["role"] != "system"), "user")
    if first != "user":  # the API wants a user turn first
        turns.insert(0, {"role": "user", "content": "(earlier conversation summarised above)"})
    return system, turns


def is_system_entry(message: Mapping[str, Any]) -> bool:
    """A system message made of a `system` entry of the client's `messages`."""
    return message.get("role") == "system" and BLOCKS_KEY in message and not message.get(SYSTEM_KEY)


def _compacted(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the list holds a system message ctxproxy made (anchors, a summary): the engine then
    put every mid-conversation system message before the first turn."""
    return any(m.get("role") == "system" and BLOCKS_KEY not in m for m in messages)


def _system_content(message: Mapping[str, Any]) -> Any:
    """A `system` entry's own content when the engine left it alone, else its (cut) text."""
    own = message.get(BLOCKS_KEY)
    return own if message.get("content") == text_of(own) else message.get("content")


def _system_blocks(message: Mapping[str, Any]) -> list[Block]:
    own = message.get(BLOCKS_KEY) if message.get(SYSTEM_KEY) or is_system_entry(message) else None
    if isinstance(own, list):
        return [b for b in own if isinstance(b, dict)]
    return [{"type": "text", "text": text_of(own if own is not None else message.get("content"))}]


def _turn_blocks(message: Mapping[str, Any]) -> Any:
    """The original content when the engine left the message alone, else rebuilt from its text."""
    own = message.get(BLOCKS_KEY)
    if own is None:  # engine-made (a pointer line after the first turn)
        return [{"type": "text", "text": text_of(message.get("content"))}]
    if _unchanged(message, own):
        return own
    return _edited(message, _blocks(own))


def _edited(message: Mapping[str, Any], own: list[Block]) -> list[Block]:
    """Blocks of a message the engine shortened: its new text in place of the old text blocks;
    thinking blocks stay first (with their signatures), tool_use and other blocks after the text."""
    text = {"type": "text", "text": text_of(message.get("content"))}
    if message.get("role") == "tool":
        return [{**own[0], "content": text["text"]}]
    thinking = [b for b in own if b.get("type") in ("thinking", "redacted_thinking")]
    others = [b for b in own if b.get("type") not in ("text", "thinking", "redacted_thinking")]
    return [*thinking, text, *others]


def _unchanged(message: Mapping[str, Any], own: Any) -> bool:
    again = assistant_turn(own) if message.get("role") == "assistant" else _user_turn(own)
    return len(again) == 1 and again[0] == dict(message)


def cache_breakpoints(body: Mapping[str, Any]) -> int:
    """How many cache_control marks the client set (system, tools, message blocks)."""
    count = sum(1 for b in _blocks(body.get("system")) if "cache_control" in b)
    count += sum(1 for t in body.get("tools") or [] if isinstance(t, dict) and "cache_control" in t)
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            count += sum(1 for b in _blocks(message.get("content")) if "cache_control" in b)
    return count


MAX_BREAKPOINTS = 4  # Anthropic's limit per request
ENGINE_BLOCK_PREFIX = "<ctxproxy:"  # how the anchor block and summaries begin


def mark_stable_prefix(system: list[Block], client_system_blocks: int, client_marks: int) -> list[Block]:
    """A cache breakpoint on the last system block when ctxproxy added blocks (anchors, summaries)
    after the client's own, so the provider's cache survives between compaction steps; never past
    Anthropic's limit and never over a block the client already marked."""
    if len(system) <= client_system_blocks or client_marks >= MAX_BREAKPOINTS:
        return system
    last = system[-1]
    if "cache_control" in last or not str(last.get("text", "")).startswith(ENGINE_BLOCK_PREFIX):
        return system  # the client's own block last (a hoisted note): its marks are the client's
    return [*system[:-1], {**last, "cache_control": {"type": "ephemeral"}}]
