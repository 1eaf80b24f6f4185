"""Messages as the needed-later measure reads them: readable text, authored text, shell commands.

The readable text of a message is `store.encoding.content.message_text` (the one message-to-text rule) plus
the decoded values of its tool-call arguments, so an identifier inside a JSON string is found even
when the raw arguments escape it (`"cd /repo\\nls"`). Matching is word-bounded and case-sensitive on
ASCII word characters, so CJK or Portuguese text glued to an identifier does not hide it.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from compaction import Message
from store.encoding.content import content_text, message_text

_SHELL_FENCE = re.compile(r"```(?:bash|sh|shell|console)\n(.*?)```", re.S)
_WORD_RUN = re.compile(r"[A-Za-z0-9_]+")
_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")


def occurs(ident: str, text: str) -> bool:
    """Whether `ident` appears verbatim in `text`, not as part of a longer ASCII word."""
    start = text.find(ident) if ident else -1
    while start != -1:
        end = start + len(ident)
        bounded_left = start == 0 or text[start - 1] not in _WORD_CHARS
        if bounded_left and (end == len(text) or text[end] not in _WORD_CHARS):
            return True
        start = text.find(ident, start + 1)
    return False


@lru_cache(maxsize=200_000)
def _runs(ident: str) -> tuple[str, ...]:
    return tuple(_WORD_RUN.findall(ident))


class TextIndex:
    """A text asked about many identifiers: its ASCII word runs rule most absent ones out at once
    (every word run of an identifier that occurs word-bounded is a whole word run of the text)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._words = frozenset(_WORD_RUN.findall(text))

    def has(self, ident: str) -> bool:
        """`occurs(ident, text)`, faster."""
        return all(run in self._words for run in _runs(ident)) and occurs(ident, self.text)


def _decoded(arguments: Any) -> Any:
    """Tool-call arguments as JSON values (undecodable text stays one string)."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def argument_values(arguments: Any) -> list[str]:
    """The scalar values inside a tool call's arguments, depth first (keys and booleans left out)."""
    out: list[str] = []
    stack: list[Any] = [_decoded(arguments)]
    while stack:
        value = stack.pop(0)
        if isinstance(value, dict):
            stack[0:0] = list(value.values())
        elif isinstance(value, list):
            stack[0:0] = value
        elif value is not None and not isinstance(value, bool):
            out.append(str(value))
    return out


def call_values(message: Message) -> list[str]:
    """Decoded argument values of every tool call an assistant message makes."""
    out: list[str] = []
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            out += argument_values(fn.get("arguments"))
    return out


def readable_text(message: Message) -> str:
    """Everything a model reads in `message`: `message_text` plus decoded argument values."""
    values = call_values(message)
    return "\n".join([message_text(message), *values]) if values else message_text(message)


def authored_text(message: Message) -> str:
    """What an assistant wrote: its content and its tool-call argument values (tool names left out)."""
    return "\n".join([content_text(message), *call_values(message)])


def shell_commands(message: Message) -> list[str]:
    """Shell scripts an assistant message runs: `command`/`cmd` arguments and fenced shell blocks."""
    scripts = [m.group(1) for m in _SHELL_FENCE.finditer(content_text(message))]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        args = _decoded(fn.get("arguments")) if isinstance(fn, Mapping) else None
        if isinstance(args, Mapping):
            scripts += [str(args[k]) for k in ("command", "cmd") if isinstance(args.get(k), str)]
    return scripts
