"""Anchor extraction (kinds, keys, corrections) and the anchor block (stable, bounded)."""

from __future__ import annotations

from typing import Literal

from compaction.anchors.extract import (
    ANCHOR_BLOCK_CLOSE,
    ANCHOR_BLOCK_OPEN,
    extract_anchors,
    render_anchor_block,
)
from compaction.tokens import TokenCounter
from store.models import Anchor, StoredMessage


def stored(seq: int, role: str, text: str, pinned: bool = False) -> StoredMessage:
    return StoredMessage(id=100 + seq, conversation_id="c", seq=seq, role=role,
                         message={"role": role, "content": text}, token_count=1, chain_hash="",
                         content_hash="", pinned=pinned)


def found(texts: list[tuple[str, str]]) -> set[tuple[str, str, str]]:
    drafts = extract_anchors([stored(i, r, t) for i, (r, t) in enumerate(texts)])
    return {(d.kind, d.key, d.value) for d in drafts}


def test_kinds_extracted_verbatim() -> None:
    got = found([
        ("user", "Hi, my name is Ana Lima. My order number is ORD-88231 and the budget is $4,500. "
                 "The deadline is 2026-03-15."),
        ("assistant", "I see invoice INV-2024-001 for EUR 90 and ticket JIRA-1234, also ticket #4521. "
                      "Latency was 300 ms, weight 4.5 kg. Customer Bruno Souza paid R$ 1.200,00 on "
                      "March 3, 2026. Write to ana@example.com or see https://example.com/docs?a=1. "
                      "Files: src/store/db.py and /etc/app/config.yaml. We decided to use Postgres."),
    ])
    for expected in [("name", "name", "Ana Lima"), ("order", "order number", "ORD-88231"),
                     ("amount", "budget", "$4,500"), ("date", "deadline", "2026-03-15"),
                     ("id", "inv-2024-001", "INV-2024-001"), ("ticket", "jira-1234", "JIRA-1234"),
                     ("ticket", "#4521", "#4521"), ("amount", "eur 90", "EUR 90"),
                     ("amount", "latency", "300 ms"), ("amount", "weight", "4.5 kg"),
                     ("name", "customer", "Bruno Souza"), ("date", "march 3, 2026", "March 3, 2026"),
                     ("email", "ana@example.com", "ana@example.com"),
                     ("url", "https://example.com/docs?a=1", "https://example.com/docs?a=1"),
                     ("path", "src/store/db.py", "src/store/db.py"),
                     ("path", "/etc/app/config.yaml", "/etc/app/config.yaml")]:
        assert expected in got, expected
    assert any(k == "decision" and v == "We decided to use Postgres" for k, _, v in got)
    assert any(k == "amount" and v == "R$ 1.200,00" for k, _, v in got)


def test_correction_yields_same_kind_and_key_with_new_value() -> None:
    drafts = extract_anchors([
        stored(0, "user", "The budget is $4,500 and the deadline is 2026-03-15."),
        stored(1, "user", "Correction: the budget is $5,200, not $4,500. Actually the deadline moved "
                          "to 2026-04-02."),
    ])
    by_key: dict[tuple[str, str], list[tuple[int, str]]] = {(d.kind, d.key): [] for d in drafts}
    for d in drafts:
        by_key[(d.kind, d.key)].append((d.source_seq, d.value))
    assert by_key[("amount", "budget")] == [(0, "$4,500"), (1, "$5,200")]
    assert by_key[("date", "deadline")] == [(0, "2026-03-15"), (1, "2026-04-02")]


def test_ordinary_text_has_no_anchors_and_system_is_skipped() -> None:
    assert found([("user", "Could you explain how the cache works?")]) == set()
    assert found([("system", "Budget is $10 and my name is Sam Hill")]) == set()


def test_tool_results_only_ids_and_paths_someone_named() -> None:
    """Tool output (listings, logs, fixtures) is full of ids and paths nobody needs: only those a
    user or assistant message names too are facts (log noise is not an anchor)."""
    result = ("opened /var/log/app.log and /var/log/other.log; total $999; "
              "id 123e4567-e89b-12d3-a456-426614174000 and 9b2e4567-e89b-12d3-a456-426614174999")
    assert found([("tool", result)]) == set()
    got = found([("user", "Please read /var/log/app.log and look up 123e4567-e89b-12d3-a456-426614174000"),
                 ("tool", result)])
    assert {v for k, _, v in got if k == "path"} == {"/var/log/app.log"}
    assert {v for k, _, v in got if k == "id"} == {"123e4567-e89b-12d3-a456-426614174000"}


def test_pinned_message_bounded() -> None:
    drafts = extract_anchors([stored(4, "user", "Always answer in French. " + "x" * 900, pinned=True)])
    pinned = [d for d in drafts if d.kind == "pinned"]
    assert len(pinned) == 1 and pinned[0].key == "pinned:4"
    assert pinned[0].value.startswith("Always answer in French.") and "more characters" in pinned[0].value


def anchor(i: int, kind: str, key: str, value: str,
           status: Literal["active", "superseded"] = "active") -> Anchor:
    return Anchor(id=i, conversation_id="c", kind=kind, key=key, value=value, source_message_id=10 + i,
                  status=status)


def test_block_is_stable_and_shows_current_values() -> None:
    counter = TokenCounter.for_model("gpt-4o")
    anchors = [anchor(2, "amount", "budget", "$5,200"), anchor(1, "amount", "budget", "$4,500", "superseded"),
               anchor(3, "pinned", "pinned:0", "Answer in French")]
    block = render_anchor_block(anchors, max_tokens=1000, counter=counter)
    assert block is not None and block["role"] == "system"
    content = block["content"]
    assert content.startswith(ANCHOR_BLOCK_OPEN) and content.endswith(ANCHOR_BLOCK_CLOSE)
    assert "- budget: $5,200 (msg 12)" in content and "$4,500" not in content
    assert render_anchor_block(list(reversed(anchors)), max_tokens=1000, counter=counter) == block
    assert render_anchor_block([], max_tokens=1000, counter=counter) is None


def test_block_over_budget_keeps_pinned_then_earliest() -> None:
    counter = TokenCounter.for_model("gpt-4o")
    anchors = [anchor(0, "pinned", "pinned:0", "Answer in French")]
    anchors += [anchor(i, "id", f"k{i}", f"VALUE-{i:04d} " + "word " * 10) for i in range(1, 40)]
    block = render_anchor_block(anchors, max_tokens=150, counter=counter)
    assert block is not None
    assert counter.count_message(block) <= 150
    content = block["content"]
    assert "Answer in French" in content and "VALUE-0001" in content and "VALUE-0039" not in content
    assert "left out" in content
