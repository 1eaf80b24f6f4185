"""What a real provider would reject: each protocol's tool pairing, roles and limits, as lists of problems."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

JSON = dict[str, Any]
MAX_CACHE_CONTROL = 4
CALL_TYPES = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output",
              "local_shell_call": "local_shell_call_output"}


def anthropic_violations(body: JSON) -> list[str]:
    """Messages API: roles alternate from user, tool_use answered next turn, at most 4 cache_control marks."""
    problems: list[str] = []
    messages = [m for m in body.get("messages") or [] if m.get("role") != "system"]
    if not isinstance(body.get("max_tokens"), int):
        problems.append("max_tokens missing")
    if not messages or messages[0].get("role") != "user":
        problems.append("first message is not a user message")
    for index, message in enumerate(messages):
        problems += _anthropic_message(messages, index, message)
    marks = _cache_marks(body.get("system")) + _cache_marks(body.get("tools"))
    marks += sum(_cache_marks(m.get("content")) for m in messages)
    if marks > MAX_CACHE_CONTROL:
        problems.append(f"{marks} cache_control blocks (at most {MAX_CACHE_CONTROL})")
    return problems


def _anthropic_message(messages: list[JSON], index: int, message: JSON) -> list[str]:
    """One message: its role, empty text, and the tool_use/tool_result pairing with its neighbours."""
    role = message.get("role")
    if role not in ("user", "assistant"):
        return [f"message {index}: role {role!r}"]
    problems = []
    if index and messages[index - 1].get("role") == role:
        problems.append(f"message {index}: two {role} messages in a row")
    blocks = _blocks(message.get("content"))
    if any(b.get("type") == "text" and not str(b.get("text", "")).strip() for b in blocks):
        problems.append(f"message {index}: empty text block")
    if role == "assistant":
        uses = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
        answered = _result_ids(messages[index + 1]) if index + 1 < len(messages) else set()
        if uses and index + 1 < len(messages) and uses != answered:
            problems.append(f"message {index}: tool_use {sorted(map(str, uses - answered))} unanswered")
    else:
        results = _result_ids(message)
        before = messages[index - 1] if index else {}
        asked = {b.get("id") for b in _blocks(before.get("content")) if b.get("type") == "tool_use"}
        if results - asked:
            orphans = sorted(map(str, results - asked))
            problems.append(f"message {index}: tool_result {orphans} without tool_use")
        if results and blocks and blocks[0].get("type") != "tool_result":
            problems.append(f"message {index}: tool_result blocks do not come first")
    return problems


def _blocks(content: Any) -> list[JSON]:
    """A message's content as blocks (a string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _result_ids(message: JSON) -> set[Any]:
    """The tool_use ids a message's tool_result blocks answer."""
    return {b.get("tool_use_id") for b in _blocks(message.get("content")) if b.get("type") == "tool_result"}


def _cache_marks(value: Any) -> int:
    """cache_control marks anywhere in `value` (blocks and nested tool_result content)."""
    if isinstance(value, dict):
        return int("cache_control" in value) + sum(_cache_marks(v) for k, v in value.items()
                                                   if k != "cache_control")
    if isinstance(value, list):
        return sum(_cache_marks(v) for v in value)
    return 0


def responses_violations(body: JSON) -> list[str]:
    """Responses API: every call item answered by its output item later on, no output without its call."""
    items = body.get("input")
    if isinstance(items, str):
        return []
    problems: list[str] = []
    calls: dict[str, str] = {}
    outputs: set[str] = set()
    for index, item in enumerate(items or []):
        kind = str(item.get("type", "message"))
        call_id = str(item.get("call_id", ""))
        if kind in CALL_TYPES:
            if call_id in calls:
                problems.append(f"item {index}: call_id {call_id} repeated")
            calls[call_id] = CALL_TYPES[kind]
        elif kind in CALL_TYPES.values():
            if calls.get(call_id) != kind:
                problems.append(f"item {index}: {kind} {call_id} without its call before it")
            outputs.add(call_id)
        elif kind == "message" and item.get("role") not in ("user", "assistant", "system", "developer"):
            problems.append(f"item {index}: role {item.get('role')!r}")
    problems += [f"call {c} has no output" for c in calls if c not in outputs]
    return problems


def reasoning_violations(body: JSON, reasoning: dict[str, str]) -> list[str]:
    """Responses API: a function call that came with a reasoning item is sent back after that item."""
    items = body.get("input")
    if isinstance(items, str):
        return []
    seen: set[str] = set()
    problems: list[str] = []
    for index, item in enumerate(items or []):
        if item.get("type") == "reasoning":
            seen.add(str(item.get("id")))
        needed = reasoning.get(str(item.get("call_id")))
        if item.get("type") == "function_call" and needed is not None and needed not in seen:
            problems.append(f"item {index}: function_call {item.get('call_id')} without its reasoning item")
    return problems


def chat_violations(body: JSON) -> list[str]:
    """Chat completions: every assistant tool call answered by tool messages right after it, no orphans."""
    problems: list[str] = []
    pending: set[str] = set()
    for index, message in enumerate(body.get("messages") or []):
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id not in pending:
                problems.append(f"message {index}: tool message {call_id} without its call")
            pending.discard(call_id)
            continue
        if pending:
            problems.append(f"message {index}: tool calls {sorted(pending)} unanswered")
        if role not in ("system", "developer", "user", "assistant"):
            problems.append(f"message {index}: role {role!r}")
        calls = message.get("tool_calls") if role == "assistant" else None
        pending = {str(c.get("id")) for c in calls or []}
    if pending:
        problems.append(f"tool calls {sorted(pending)} unanswered at the end")
    return problems


def tool_names(tools: Iterable[Any] | None) -> set[str]:
    """Tool names in any of the three protocols' `tools` shapes."""
    names: set[str] = set()
    for tool in tools or []:
        if isinstance(tool, dict):
            fn = tool.get("function")
            names.add(str(fn.get("name") if isinstance(fn, dict) else tool.get("name")))
    return names
