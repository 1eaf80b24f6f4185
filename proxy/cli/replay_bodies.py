"""`ctxproxy replay` over request logs: one request body a line, in any of the three APIs' shapes.

Each body is turned into the canonical conversation (proxy/wire/bodies.py); a body whose messages
extend an earlier conversation's continues it (an agent resends its whole history each turn), any
other starts a new one. Files in replay's own formats are read by replay/trajectory.py.
"""

from __future__ import annotations

from pathlib import Path

from config.errors import InvalidRequestError
from proxy.wire.bodies import canonical, is_request_body
from replay.records import RecordedConversation, bad_line, json_lines
from replay.trajectory import read_recorded

EXPECTED = "expected a request body of /v1/chat/completions, /v1/responses or /v1/messages"


def read_any(path: Path) -> list[RecordedConversation]:
    """The conversations of `path`: request bodies when its first line is one, else replay's formats."""
    lines = json_lines(path)
    if not lines or not is_request_body(lines[0][1]):
        return read_recorded(path)
    groups: list[RecordedConversation] = []
    for number, value in lines:
        if not is_request_body(value):
            raise bad_line(path, number, EXPECTED)
        try:
            messages, tools = canonical(value)
        except InvalidRequestError as exc:
            raise bad_line(path, number, exc.message) from None
        if not messages:
            raise bad_line(path, number, "the request has no messages")
        _add(groups, messages, tools, path)
    return groups


def _add(groups: list[RecordedConversation], messages: list[dict[str, object]],
         tools: list[dict[str, object]], path: Path) -> None:
    for index in range(len(groups) - 1, -1, -1):
        known = list(groups[index].messages)
        if messages[:len(known)] == known:
            groups[index] = RecordedConversation(groups[index].id, tuple(messages), (), tuple(tools))
            return
    groups.append(RecordedConversation(f"{path.stem}-{len(groups) + 1}", tuple(messages), (), tuple(tools)))
