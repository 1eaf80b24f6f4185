"""Back-references and superseded outputs found in a message list (compaction/view/backrefs.py)."""

from __future__ import annotations

import json
from typing import Any

from compaction.view.backrefs import analyze, call_key, is_unchanged_marker

MARKER = "Wasted call — file unchanged since your last Read. Refer to that earlier tool_result instead."


def call(cid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def result(cid: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": text}


def test_the_marker_wordings_of_claude_code_are_recognised_and_file_text_is_not() -> None:
    assert is_unchanged_marker(MARKER)
    assert is_unchanged_marker("Unchanged since last read")
    assert not is_unchanged_marker("def f():\n    pass\n" * 50 + "unchanged since last read")
    assert not is_unchanged_marker("the API stays unchanged.")


def test_descriptive_arguments_do_not_make_a_call_different() -> None:
    a = call_key("Bash", json.dumps({"command": "pytest -q", "description": "run the tests"}))
    b = call_key("Bash", json.dumps({"description": "again", "command": "pytest -q", "timeout": 60}))
    assert a == b and a[1] is None
    assert call_key("Read", '{"file_path": "/a.py"}')[1] == "/a.py"


def test_a_marker_refers_to_the_newest_earlier_read_of_the_same_file() -> None:
    msgs = [{"role": "user", "content": "fix it"},
            call("c1", "Read", file_path="/a.py"), result("c1", "v1 of a.py"),
            call("c2", "Read", file_path="/b.py"), result("c2", "b.py"),
            call("c3", "Read", file_path="/a.py", offset=10), result("c3", MARKER)]
    refs = analyze(enumerate(msgs))
    assert refs.referenced == {2} and refs.pointed == {6: 2}  # same path, another range: still a.py
    assert not refs.superseded


def test_a_newer_real_output_supersedes_and_ends_the_reference() -> None:
    msgs = [call("c1", "Read", file_path="/a.py"), result("c1", "v1"),
            call("c2", "Read", file_path="/a.py"), result("c2", MARKER),
            call("c3", "Read", file_path="/a.py"), result("c3", "v2"),
            call("c4", "Bash", command="pytest", description="x"), result("c4", "1 failed"),
            call("c5", "Bash", command="pytest", description="y"), result("c5", "1 failed")]
    refs = analyze(enumerate(msgs))
    assert refs.referenced == frozenset()  # v1 was read again with new content: the marker is stale
    assert refs.superseded == {1: 5, 7: 9} and refs.identical == {7}
    assert refs.calls[7].startswith("Bash")
