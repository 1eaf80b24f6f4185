"""Anchors never corrupt a value: generated identifier shapes in prose, code and logs are extracted as
whole token spans of their source, never as a prefix or part of a longer token, never altered."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.anchors.extract import extract_anchors
from store.encoding.content import message_text
from store.models import AnchorDraft, StoredMessage

_ALNUM = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789", min_size=1,
                 max_size=6)
_SEPARATORS = st.sampled_from(["-", "_", ".", ":", "#", "/"])
_ID_CHAR = re.compile(r"[A-Za-z0-9_]")


@st.composite
def identifiers(draw: st.DrawFn) -> str:
    """Identifiers of any shape: letters and digits joined by -_.:/# in any order, with suffixes."""
    parts = draw(st.lists(_ALNUM, min_size=1, max_size=4))
    seps = draw(st.lists(_SEPARATORS, min_size=len(parts) - 1, max_size=len(parts) - 1))
    value = parts[0] + "".join(s + p for s, p in zip(seps, parts[1:], strict=True))
    digit = draw(st.sampled_from("0123456789"))
    return value + digit if not any(c.isdigit() for c in value) else value


_CONTEXTS = st.sampled_from([
    "My order number is {v} and it shipped.",
    "Please check {v}, it failed twice.",
    "Ticket {v} is still open (see also {v}).",
    "ERROR 2026-11-02T09:00:01Z worker-3 failed on {v}: retrying",
    "Traceback (most recent call last):\nKeyError: '{v}'",
    "def handler_{n}(event):\n    return lookup('{v}')  # FROM orders HAVING id",
    "The id is {v}-B now, not {v}.",
    "see `{v}` and {v}x in the log",
])


def stored(seq: int, role: str, message: dict[str, object]) -> StoredMessage:
    return StoredMessage(id=seq + 1, conversation_id="c", seq=seq, role=role, message=message,
                         token_count=1, chain_hash="", content_hash="")


def sources_of(draft: AnchorDraft, messages: list[StoredMessage]) -> list[str]:
    """The texts a draft may come from: the message text and its tool-call arguments, decoded."""
    message = next(m for m in messages if m.id == draft.source_message_id).message
    texts = [message_text(message)]
    for call in message.get("tool_calls") or ():
        texts += [str(v) for v in json.loads(call["function"]["arguments"]).values()]
    return texts


def whole_span_in(value: str, text: str) -> bool:
    """`value` occurs in `text` with no identifier character glued to either end."""
    for match in re.finditer(re.escape(value), text):
        before = text[match.start() - 1] if match.start() else " "
        after = text[match.end()] if match.end() < len(text) else " "
        glued_after = _ID_CHAR.match(after) or (after in "-_./#" and match.end() + 1 < len(text)
                                                and _ID_CHAR.match(text[match.end() + 1]))
        if not _ID_CHAR.match(before) and not glued_after:
            return True
    return False


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=identifiers(), template=_CONTEXTS, role=st.sampled_from(["user", "assistant", "tool"]))
def test_extracted_values_are_whole_token_spans_of_their_source(value: str, template: str, role: str) -> None:
    text = template.format(v=value, n=len(value))
    messages = [stored(0, "user", {"role": "user", "content": f"Look at {value} please."}),
                stored(1, role, {"role": role, "content": text})]
    for draft in extract_anchors(messages):
        if draft.kind in ("decision", "ruled_out", "pinned"):
            continue
        assert any(whole_span_in(draft.value, t) for t in sources_of(draft, messages)), (draft, text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=identifiers(), suffix=st.sampled_from(["-B", "x", "_2", ".v3", "-7c"]))
def test_an_id_with_a_suffix_is_never_pinned_without_it(value: str, suffix: str) -> None:
    full = f"ORD-4471{value[:0]}{suffix}"
    drafts = extract_anchors([stored(0, "user", {"role": "user",
                                                 "content": f"My order number is {full}, thanks."})])
    values = {d.value for d in drafts}
    assert full in values and "ORD-4471" not in values


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=identifiers(),
       command=st.sampled_from(["cat {v}.py", "pytest -x tests/{v}.py", "grep -n {v} a.py"]))
def test_tool_call_values_are_copied_verbatim(value: str, command: str) -> None:
    arguments = {"command": command.format(v=value), "file_path": f"/repo/src/{value}.py"}
    call = {"id": "c1", "type": "function", "function": {"name": "Bash", "arguments": json.dumps(arguments)}}
    messages = [stored(0, "assistant", {"role": "assistant", "content": "", "tool_calls": [call]})]
    for draft in extract_anchors(messages):
        assert any(whole_span_in(draft.value, t) for t in arguments.values()), draft
