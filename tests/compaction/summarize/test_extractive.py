"""The local extractive summarizer on agent traffic: structured, copied from its sources (so it always
verifies), deterministic, within the requested tokens, and never a placeholder."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.summarize.extractive import parse_blocks
from compaction.summarize.prompts import EXPAND_LINE_PREFIX, SECTIONS, build_source_text
from compaction.summarize.summarizers import ExtractiveSummarizer
from compaction.summarize.verify import verify_summary
from compaction.tokens import TokenCounter
from compaction.types import Message
from store.models import StoredMessage

COUNTER = TokenCounter.for_model("gpt-4o")


def stored(seq: int, role: str, content: str = "",
           calls: list[tuple[str, dict[str, Any]]] | None = None) -> StoredMessage:
    message: Message = {"role": role, "content": content}
    if calls:
        message["tool_calls"] = [{"id": f"c{seq}{i}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}}
                                 for i, (name, args) in enumerate(calls)]
    return StoredMessage(id=seq + 10, conversation_id="c", seq=seq, role=role, message=message,
                         token_count=1, chain_hash="", content_hash="")


AGENT_CHUNK = [
    stored(0, "user", "Fix the failing import in the billing service. Keep the public API unchanged."),
    stored(1, "assistant", "I'll reproduce it first.",
           [("Bash", {"command": "pytest -x tests/test_billing.py"})]),
    stored(2, "tool", "E   ImportError: cannot import name 'round_half' from 'billing.money'\n1 failed"),
    stored(3, "assistant", "", [("Read", {"file_path": "/repo/billing/money.py"})]),
    stored(4, "tool", "   1→def round_half_even(x):\n   2→    ..."),
    stored(5, "assistant", "We decided to add an alias instead of renaming callers.",
           [("Edit", {"file_path": "/repo/billing/money.py", "old_string": "x", "new_string": "y"})]),
    stored(6, "tool", "The file /repo/billing/money.py has been updated successfully."),
    stored(7, "assistant", "", [("Bash", {"command": "pytest -x tests/test_billing.py"})]),
    stored(8, "tool", "12 passed in 0.4s"),
    stored(9, "assistant", "All 12 tests pass now. Next I will run the full suite.",
           [("Bash", {"command": "pytest -q"})]),
]


def test_agent_chunk_keeps_intent_calls_files_errors_and_last_state() -> None:
    source = build_source_text(AGENT_CHUNK)
    out = ExtractiveSummarizer(COUNTER).summarize(source, 400)
    headings = [line[3:] for line in out.splitlines() if line.startswith("## ")]
    assert headings == [s for s in SECTIONS if s != "Open operations and approvals"]  # none open
    assert "- Fix the failing import in the billing service. (#10)" in out
    assert "- We decided to add an alias instead of renaming callers. (#15)" in out
    assert "- /repo/billing/money.py: edited (#15), read (#13)" in out
    assert "- Bash command: pytest -x tests/test_billing.py (#11, #17)" in out
    assert "- ImportError: cannot import name 'round_half' from 'billing.money' (#12)" in out
    assert "- Next I will run the full suite. (#19)" in out
    assert out.splitlines()[-1].startswith(EXPAND_LINE_PREFIX) and "(#11, #17)" in out.splitlines()[-1]
    assert verify_summary(out, source).ok
    assert COUNTER.count_text(out) <= 400


def test_small_targets_keep_the_most_useful_lines_not_placeholders() -> None:
    source = build_source_text(AGENT_CHUNK)
    out = ExtractiveSummarizer(COUNTER).summarize(source, 120)
    assert COUNTER.count_text(out) <= 120
    assert "Fix the failing import" in out  # intent first, then the last state and the errors
    assert "(#19)" in out and "ImportError" in out


def test_condensed_sources_carry_the_sections_of_earlier_summaries() -> None:
    first = ExtractiveSummarizer(COUNTER).summarize(build_source_text(AGENT_CHUNK[:5]), 300)
    second = ExtractiveSummarizer(COUNTER).summarize(build_source_text(AGENT_CHUNK[5:]), 300)
    source = (f"[sum_aaaaaaaaaaaa summary of messages 0-4]\n{first}\n\n"
              f"[sum_bbbbbbbbbbbb summary of messages 5-9]\n{second}")
    out = ExtractiveSummarizer(COUNTER).summarize(source, 400)
    assert [b.ref for b in parse_blocks(source)] == ["sum_aaaaaaaaaaaa", "sum_bbbbbbbbbbbb"]
    assert "Fix the failing import" in out and "money.py" in out and "sum_aaaaaaaaaaaa" in out
    assert verify_summary(out, source).ok


def test_deterministic() -> None:
    source = build_source_text(AGENT_CHUNK)
    assert ExtractiveSummarizer(COUNTER).summarize(source, 300) == \
        ExtractiveSummarizer(COUNTER).summarize(source, 300)


_WORDS = st.sampled_from(["deploy", "Ana", "ORD-4471-B", "src/a.py", "$1,200", "2027-03-15", "failed",
                          "KeyError: 'user_id'", "https://x.example/a", "v2.3.1", "approved", "next"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.lists(_WORDS, min_size=3, max_size=12).map(" ".join), min_size=1, max_size=8),
       target=st.integers(min_value=80, max_value=400))
def test_output_always_verifies_and_fits(texts: list[str], target: int) -> None:
    messages = [stored(i, ("user", "assistant", "tool")[i % 3], text + ".") for i, text in enumerate(texts)]
    source = build_source_text(messages)
    out = ExtractiveSummarizer(COUNTER).summarize(source, target)
    assert verify_summary(out, source).ok
    assert COUNTER.count_text(out) <= max(target, 80)
