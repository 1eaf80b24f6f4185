"""Atomic message groups and the validation of every forwarded list: providers reject a split tool round.

A group is what compaction, selection and truncation may never split: an assistant message carrying
`tool_calls` (or a legacy `function_call`) together with ALL the tool/function results that follow it
(parallel calls give several results, in any order) and any system message between them; every
other message is a group of its own. A
later assistant `tool_calls` message in the same turn (nested rounds) starts its own group.

`validate_outgoing` is the last gate before a request leaves the proxy. ctxproxy never CREATES a
pairing violation: a violation in the outgoing list is tolerated only when the client's own list
contains the identical violation (same kind, same call id), because forwarding the client's history
as it was is not ours to repair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from config.errors import CtxProxyError
from store.models import assembled

RESULT_ROLES = frozenset({"tool", "function"})
SYSTEM_ROLES = frozenset({"system", "developer"})
TRUNCATION_MARK = "[ctxproxy: "


@dataclass(frozen=True)
class Group:
    """Messages `start..end-1` of a list, kept or dropped together."""

    start: int
    end: int
    kind: str  # "system" | "tool_round" | "user" | "assistant" | "orphan_result" | other role

    def __len__(self) -> int:
        return self.end - self.start


def call_ids(message: Mapping[str, Any]) -> tuple[str, ...]:
    """Tool call ids an assistant message makes; a legacy `function_call` counts as one unnamed call."""
    calls = message.get("tool_calls") or ()
    ids = tuple(str(c.get("id")) for c in calls if isinstance(c, Mapping))
    if not ids and isinstance(message.get("function_call"), Mapping):
        return ("function_call",)
    return ids


def _result_id(message: Mapping[str, Any]) -> str:
    if message.get("role") == "function":
        return "function_call"
    return str(message.get("tool_call_id"))


def makes_calls(message: Mapping[str, Any]) -> bool:
    if message.get("role") != "assistant":
        return False
    if not message.get("tool_calls") and message.get("function_call") is None:
        return False  # call_ids would be empty: skip building it (most assistant messages)
    return bool(call_ids(message))


def group_messages(messages: Sequence[Mapping[str, Any]]) -> list[Group]:
    """Split `messages` into atomic groups, in order, covering every index exactly once."""
    groups: list[Group] = []
    i, n = 0, len(messages)
    while i < n:
        msg = messages[i]
        end = i + 1
        if makes_calls(msg):
            end = _round_end(messages, end)
            kind = "tool_round"
        else:
            role = str(msg.get("role"))
            kind = "orphan_result" if role in RESULT_ROLES else "system" if role in SYSTEM_ROLES else role
        groups.append(assembled(Group, {"start": i, "end": end, "kind": kind}))  # Group(i, end, kind)
        i = end
    return groups


def _round_end(messages: Sequence[Mapping[str, Any]], start: int) -> int:
    """End of the results that follow a call at `start - 1`; system messages between the call and
    its last result belong to the round (a client's mid-round instructions must not split it)."""
    end = scan = start
    while scan < len(messages):
        role = messages[scan].get("role")
        if role in RESULT_ROLES:
            end = scan + 1
        elif role not in SYSTEM_ROLES:
            break
        scan += 1
    return end


def group_index(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """For each message, the ordinal of the group it belongs to."""
    out: list[int] = []
    for ordinal, group in enumerate(group_messages(messages)):
        out.extend([ordinal] * len(group))
    return out


def pairing_violations(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(kind, call id) for every pairing problem: `orphan_result`, `unanswered_call`, `duplicate_result`."""
    problems: list[tuple[str, str]] = []
    for group in group_messages(messages):
        head = messages[group.start]
        if group.kind == "orphan_result":
            problems.append(("orphan_result", _result_id(head)))
            continue
        if group.kind != "tool_round":
            continue
        expected = set(call_ids(head))
        seen: set[str] = set()
        for result in messages[group.start + 1:group.end]:
            if result.get("role") in SYSTEM_ROLES:
                continue
            rid = _result_id(result)
            if rid not in expected:
                problems.append(("orphan_result", rid))
            elif rid in seen:
                problems.append(("duplicate_result", rid))
            seen.add(rid)
        problems.extend(("unanswered_call", cid) for cid in sorted(expected - seen))
    return problems


def is_derived(out: Mapping[str, Any], original: Mapping[str, Any]) -> bool:
    """`out` is `original` forwarded unchanged, or cut by truncate.py (role and call ids intact)."""
    clean = {k: v for k, v in original.items() if k != "pinned"}
    if dict(out) == clean:
        return True
    same_shape = all(out.get(k) == clean.get(k) for k in ("role", "tool_call_id", "name"))
    return same_shape and call_ids(out) == call_ids(clean) and TRUNCATION_MARK in _text(out)


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def validate_outgoing(outgoing: Sequence[Mapping[str, Any]],
                      received: Sequence[Mapping[str, Any]]) -> None:
    """Raise CtxProxyError (internal: a bug in ctxproxy) when the forwarded list is not valid.

    Checks: no pairing violation the client did not send itself; every system/developer message
    the client sent is forwarded (possibly cut) in order; the client's last message is the last
    forwarded one (possibly cut). The client's own list forwarded unchanged passes at once (the
    common case on resends; walking a long history's groups twice cost milliseconds).
    """
    if _is_clients_own(outgoing, received):
        return
    problems = _new_pairing_problems(outgoing, received)
    problems += _missing_system(outgoing, received)
    if received and (not outgoing or not is_derived(outgoing[-1], received[-1])):
        problems.append("the client's last message is not the last forwarded message")
    if problems:
        raise CtxProxyError("ctxproxy built an invalid forwarded request: " + "; ".join(problems),
                            code="invalid_forwarded_context")


def _is_clients_own(outgoing: Sequence[Mapping[str, Any]], received: Sequence[Mapping[str, Any]]) -> bool:
    """`outgoing` is `received` message for message, ctxproxy's own fields (`pinned`) aside."""
    if len(outgoing) != len(received):
        return False
    for out, original in zip(outgoing, received, strict=True):
        if out != original and out != {k: v for k, v in original.items() if k != "pinned"}:
            return False
    return True


def _new_pairing_problems(outgoing: Sequence[Mapping[str, Any]],
                          received: Sequence[Mapping[str, Any]]) -> list[str]:
    """The forwarded list's pairing problems the client's own list does not have (that list is
    walked only when the forwarded one has any: the common case walks the shorter list alone)."""
    found = pairing_violations(outgoing)
    tolerated = set(pairing_violations(received)) if found else set()
    return [f"{kind} {cid!r}" for kind, cid in found if (kind, cid) not in tolerated]


def _missing_system(outgoing: Sequence[Mapping[str, Any]],
                    received: Sequence[Mapping[str, Any]]) -> list[str]:
    wanted = [m for m in received if m.get("role") in SYSTEM_ROLES]
    pos = 0
    for message in wanted:
        while pos < len(outgoing) and not is_derived(outgoing[pos], message):
            pos += 1
        if pos == len(outgoing):
            return [f"a {message.get('role')} message the client sent is missing"]
        pos += 1
    return []
