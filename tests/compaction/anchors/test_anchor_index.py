"""The agent index: files and symbols touched, errors, commands, with message references; no noise."""

from __future__ import annotations

import json
from itertools import count
from typing import Any

from compaction.anchors.extract import extract_anchors, render_anchor_block
from compaction.anchors.index import bounded, error_lines, index_drafts
from compaction.tokens import TokenCounter
from compaction.types import Message
from store.models import Anchor, AnchorDraft, StoredMessage

COUNTER = TokenCounter.for_model("gpt-4o")


def stored(seq: int, role: str, content: str = "",
           calls: list[tuple[str, dict[str, Any]]] | None = None) -> StoredMessage:
    message: Message = {"role": role, "content": content}
    if calls:
        message["tool_calls"] = [{"id": f"c{seq}{i}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}
                                 for i, (name, args) in enumerate(calls)]
    return StoredMessage(id=seq + 1, conversation_id="c", seq=seq, role=role, message=message,
                         token_count=1, chain_hash="", content_hash="")


def as_anchors(drafts: list[AnchorDraft]) -> list[Anchor]:
    ids = count(1)
    return [Anchor(id=next(ids), conversation_id="c", kind=d.kind, key=d.key, value=d.value,
                   source_message_id=d.source_message_id) for d in drafts]


SESSION = [
    stored(0, "user", "Fix the KeyError: 'user_id' in the events handler. Order ORD-4471-B is affected."),
    stored(1, "assistant", "Reading `handle_event` first.", [("Read", {"file_path": "/repo/src/events.py"}),
                                                              ("Grep", {"pattern": "handle_event"})]),
    stored(2, "tool", "   1→def handle_event(e):\n   2→    return e['user_id']"),
    stored(3, "assistant", "", [("Bash", {"command": "pytest -x tests/test_events.py 2>&1"})]),
    stored(4, "tool", "Traceback (most recent call last):\n  File \"src/events.py\", line 2\n"
                      "KeyError: 'user_id'\nFAILED tests/test_events.py::test_handle - KeyError: 'user_id'"),
    stored(5, "assistant", "", [("Edit", {
        "file_path": "/repo/src/events.py", "old_string": "e['user_id']",
        "new_string": "def handle_event(e):\n    return e.get('user_id')"})]),
    stored(6, "assistant", "", [("Bash", {"command": "pytest -x tests/test_events.py 2>&1"})]),
]


def test_errors_with_their_message_are_kept_verbatim() -> None:
    text = "Traceback:\nE   KeyError: 'user_id'\n** (RuntimeError) boom here\nerror[E0308]: mismatched types"
    assert error_lines(text) == ["KeyError: 'user_id'", "** (RuntimeError) boom here",
                                 "error[E0308]: mismatched types"]
    assert error_lines("I get KeyError: 'user_id' when saving.", inline=True) == ["KeyError: 'user_id'"]


def test_index_lists_files_symbols_errors_and_commands_with_references() -> None:
    block = render_anchor_block(as_anchors(extract_anchors(SESSION)), max_tokens=2_000, counter=COUNTER)
    assert block is not None
    content = str(block["content"])
    assert "- order: ORD-4471-B (msg 1)" in content.replace("order number", "order")
    assert "/repo/src/events.py (edited #6, read #2)" in content
    assert "  - KeyError: 'user_id' (#1 #5)" in content
    assert "  - pytest -x tests/test_events.py 2>&1 (#4 #7)" in content
    assert "handle_event (edited #6, seen #2)" in content


def test_source_code_and_escapes_are_not_anchors() -> None:
    code = "rows = db.execute('SELECT id FROM orders GROUP BY id HAVING count(*) > 1')\nprint('e:\\n')"
    messages = [stored(0, "assistant", "```python\n" + code + "\n```",
                       [("Write", {"file_path": "src/report.py", "content": code})]),
                stored(1, "tool", code)]
    values = {d.value for d in extract_anchors(messages)}
    assert not values & {"FROM", "HAVING", "e:\\n", "e:"}
    assert values == {"src/report.py"}


def test_bounded_cuts_only_at_whitespace() -> None:
    line = "pytest " + " ".join(f"tests/test_{i}.py" for i in range(30))
    cut = bounded(line, 60)
    assert line.startswith(cut) and line[len(cut)] == " " and len(cut) <= 60


def test_commands_mark_the_files_they_write() -> None:
    drafts = index_drafts(stored(0, "assistant", "", [
        ("bash", {"command": "cat <<'EOF' > repro.py\nimport x\nEOF"}),
        ("bash", {"command": "sed -i 's/a.b/c/' src/x.py"})]))
    files = {(d.key.split(" ")[0], d.value) for d in drafts if d.kind == "file"}
    assert files == {("edited", "repro.py"), ("edited", "src/x.py")}


def test_block_stays_within_budget_and_keeps_errors_and_edited_files_first() -> None:
    session = list(SESSION)
    session += [stored(7 + i, "assistant", "", [("Read", {"file_path": f"/repo/docs/page_{i}.md"})])
                for i in range(40)]
    anchors = as_anchors(extract_anchors(session))
    block = render_anchor_block(anchors, max_tokens=220, counter=COUNTER)
    assert block is not None and COUNTER.count_message(block) <= 220
    content = str(block["content"])
    assert "KeyError: 'user_id'" in content and "src/events.py (edited #6" in content
    assert "left out" in content and "page_0.md" not in content
