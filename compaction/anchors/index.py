"""The agent index: files and symbols an agent touched, errors it met, commands it ran (needed again later).

Each draft is one (value, message) pair, so the block can list every message a value came from
("files: src/a.py (edited #41, read #12)") and the model can expand them with `context_expand`.
The key carries the action and the message id (`index_key`); the value is always a whole token
span of its source, copied verbatim: a tool-call argument (decoded), a command's first line, or an
error line of a tool result or message, cut only at a whitespace boundary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Literal

from store.encoding.content import message_text
from store.models import AnchorDraft, StoredMessage

IndexKind = Literal["file", "symbol", "error", "command"]
Action = Literal["edited", "read", "ran", "seen"]
INDEX_KINDS: frozenset[str] = frozenset({"file", "symbol", "error", "command"})
MAX_VALUE_CHARS = 160  # commands and error lines: a verbatim prefix ending at a whitespace
SCAN_CHARS = 6_000  # tool results: errors are looked for in the head and the tail
_FILE_KEYS = frozenset({"file_path", "path", "filename", "file", "notebook_path", "target_file",
                        "paths", "files", "directory", "dir"})
_COMMAND_KEYS = frozenset({"command", "cmd", "script"})
_CODE_KEYS = frozenset({"new_string", "content", "code", "patch", "new_str", "file_text"})
_PATTERN_KEYS = frozenset({"pattern", "query", "symbol", "name"})
_EDIT_TOOLS = re.compile(r"(?i)edit|write|create|patch|replace|insert|notebook")
_READ_TOOLS = re.compile(r"(?i)read|view|open|cat|grep|glob|search|find|list|ls")
_PATH_TOKEN = re.compile(r"(?<![\w./~-])(?:~?/)?(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}"
                         r"(?![\w/-]|\.\w)|(?<![\w./~-])~?/(?:[\w.-]+/)+[\w.-]+(?![\w/-]|\.\w)")
_WRITES = re.compile(r"(?:^|\s)(?:sed\s+-i|tee|touch|rm|mv|cp|patch|chmod)\b|>{1,2}\s*$")
_DEFINITION = re.compile(r"(?m)^\s*(?:async\s+)?(?:def|defp|defmodule|class|function|func|fn|struct|enum"
                         r"|interface|trait|impl|module)\s+([A-Za-z_][\w.]*[!?]?)")
_SYMBOL = re.compile(r"[A-Za-z_][\w]*(?:(?:\.|::)[A-Za-z_]\w*)*")
_BACKTICKED = re.compile(r"`([A-Za-z_][\w]*(?:(?:\.|::)[A-Za-z_]\w*)*)(?:\(\))?`")
_ERROR_LINE = re.compile(
    r"(?m)^[ \t]*(?:E[ \t]+)?(?P<line>(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::[^\n]*)?"
    r"|\*\* \(\w+\)[^\n]*|(?:error|fatal|FAILED|ERROR|panic)(?:\[\w+\])?:[^\n]*|FAILED [^\n]+"
    r"|[\w./-]+:\d+: (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b[^\n]*)[ \t]*$")
_INLINE_ERROR = re.compile(r"(?<![\w.])(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)(?::[ \t]?(?:'[^'\n]{1,80}'"
                           r"|\"[^\"\n]{1,80}\"|[^\s.,;)]+))?")
_EXTENSIONS = frozenset("""
py pyi pyx js mjs cjs ts tsx jsx json jsonl md rst txt toml yaml yml ini cfg conf env ex exs heex eex
erl hrl rs go java kt kts scala c h cc cpp cxx hpp cs rb php sh bash zsh fish ps1 sql html htm css
scss sass less vue svelte lock xml csv tsv log lua swift m mm r jl dart proto gradle mk tf hcl ipynb
out output diff patch pem crt png jpg jpeg svg gif pdf zip gz tgz tar whl so dll exe bin db sqlite
""".split())  # noqa: SIM905
_FENCE = re.compile(r"```[^\n]*\n.*?```", re.DOTALL)


def index_key(action: Action, message_id: int | None, value: str) -> str:
    """The key of an index draft: one (action, message, value) triple per anchor row."""
    return f"{action} #{message_id if message_id is not None else '?'}: {value}"


def parse_index_key(key: str) -> tuple[Action, int | None]:
    """(action, message id) from an `index_key`; ("seen", None) for a foreign key."""
    match = re.match(r"(edited|read|ran|seen) #(\d+|\?): ", key)
    if match is None:
        return "seen", None
    action: Action = match.group(1)  # type: ignore[assignment]
    return action, int(match.group(2)) if match.group(2).isdigit() else None


def bounded(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """The first line of `text`, stripped, cut at the last whitespace before `limit` characters.

    A cut value is still a verbatim span of its source ending at a token boundary.
    """
    line = text.strip().split("\n", 1)[0].rstrip()
    if len(line) <= limit:
        return line
    cut = line[:limit].rstrip()
    space = max(cut.rfind(" "), cut.rfind("\t"))
    return cut[:space].rstrip() if space > limit // 2 else ""


def command_line(command: str, limit: int = MAX_VALUE_CHARS) -> str:
    """A command's first line (bounded), or "" when that line leaves a quote open ("bash -c '"):
    such a line means nothing on its own."""
    line = bounded(command, limit)
    unbalanced = any(line.replace("\\" + q, "").count(q) % 2 for q in ("'", '"'))
    return "" if unbalanced else line


def index_drafts(stored: StoredMessage) -> list[AnchorDraft]:
    """Index drafts of one stored message, in order, without duplicates."""
    found: dict[tuple[str, str], AnchorDraft] = {}
    for kind, action, value in _entries(stored):
        draft = AnchorDraft(kind=kind, key=index_key(action, stored.id, value), value=value,
                            source_message_id=stored.id, source_seq=stored.seq)
        found.setdefault((kind, draft.key), draft)
    return list(found.values())


def _entries(stored: StoredMessage) -> Iterator[tuple[IndexKind, Action, str]]:
    message = stored.message
    if stored.role == "tool":
        text = message_text(message)
        scanned = text if len(text) <= 2 * SCAN_CHARS else f"{text[:SCAN_CHARS]}\n{text[-SCAN_CHARS:]}"
        yield from (("error", "seen", e) for e in error_lines(scanned))
        return
    if stored.role not in ("user", "assistant"):
        return
    content = message.get("content")
    prose = content if isinstance(content, str) else message_text({"content": content})
    yield from (("error", "seen", e) for e in error_lines(prose, inline=True))
    if stored.role == "assistant":
        yield from (("symbol", "seen", s) for s in _prose_symbols(prose))
    for call in message.get("tool_calls") or ():
        yield from _call_entries(call)


def error_lines(text: str, *, inline: bool = False) -> list[str]:
    """Exception and error lines with their message (`KeyError: 'user_id'`), verbatim; with
    `inline`, also exceptions quoted inside a sentence of prose."""
    found = [bounded(m.group("line")) for m in _ERROR_LINE.finditer(text)]
    if inline:
        found += [m.group() for m in _INLINE_ERROR.finditer(_FENCE.sub("", text)) if ":" in m.group()]
    unique: list[str] = []
    for value in found:
        if value and not any(value in kept for kept in unique):
            unique.append(value)
    return unique


def _prose_symbols(text: str) -> list[str]:
    """Backticked code identifiers of the assistant's prose (`evaluate_xfail_marks`, `item._store`)."""
    return [m.group(1) for m in _BACKTICKED.finditer(text)
            if _code_shaped(m.group(1)) and not _file_shaped(m.group(1))]


def _code_shaped(name: str) -> bool:
    """snake_case, dotted, `::` or CamelCase: an identifier, not a word in backticks."""
    return 3 <= len(name) <= 80 and ("_" in name.strip("_") or "." in name or "::" in name
                                     or re.search(r"[a-z][A-Z]", name) is not None)


def _call_entries(call: Any) -> Iterator[tuple[IndexKind, Action, str]]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return
    name = str(function.get("name") or "")
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError):
        return
    if not isinstance(arguments, dict):
        return
    action: Action = "edited" if _EDIT_TOOLS.search(name) else "read" if _READ_TOOLS.search(name) else "seen"
    for key, value in arguments.items():
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and text.strip():
                yield from _argument_entries(key, text, action)


def _argument_entries(key: str, text: str, action: Action) -> Iterator[tuple[IndexKind, Action, str]]:
    if key in _FILE_KEYS and _PATH_TOKEN.fullmatch(text.strip()) and not text.startswith("/dev/"):
        yield ("file", action, text.strip())
    elif key in _COMMAND_KEYS:
        command = command_line(text)
        if command:
            yield ("command", "ran", command)
        yield from command_files(text)
    elif key in _CODE_KEYS:
        yield from (("symbol", "edited", m.group(1)) for m in _DEFINITION.finditer(text)
                    if _code_shaped(m.group(1)))
    elif key in _PATTERN_KEYS and _SYMBOL.fullmatch(text) and _code_shaped(text):
        yield ("symbol", "seen", text)


def command_files(command: str) -> Iterator[tuple[IndexKind, Action, str]]:
    """Paths a shell command names (first line and heredoc target), edited when it writes them."""
    head = re.sub(r"'[^']*'", lambda m: " " * len(m.group()), command.split("\n", 1)[0])  # sed/awk scripts
    for match in _PATH_TOKEN.finditer(head):
        value = match.group()
        if ("://" in head[max(0, match.start() - 8):match.start() + 3] or not _file_shaped(value)
                or value.startswith("/dev/") or glued(head, match.start(), match.end())):
            continue
        before = head[:match.start()]
        writes = bool(re.search(r">{1,2}\s*$", before)) or bool(_WRITES.search(before))
        yield ("file", "edited" if writes else "read", value)


def _file_shaped(value: str) -> bool:
    """A path with a directory, or a file name with a known extension ("a.py", not "pkg.mod")."""
    if not re.search(r"[A-Za-z]", value):
        return False
    return "/" in value or value.rsplit(".", 1)[-1].lower() in _EXTENSIONS


_GLUE = "-_.#/+@"


def glued(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` is part of a longer token (an identifier character, or a joiner
    followed by one, touches it): such a span is never a value on its own."""
    def ident(i: int) -> bool:
        return 0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")
    return (ident(end) or (end < len(text) and text[end] in _GLUE and ident(end + 1))
            or ident(start - 1) or (start > 0 and text[start - 1] in _GLUE and ident(start - 2)))
