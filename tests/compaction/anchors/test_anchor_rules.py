"""Anchor rules: precise decisions, hypotheses, corrections across wordings, ruling-outs, ranking."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compaction.anchors.extract import extract_anchors, render_anchor_block
from compaction.tokens import TokenCounter
from config.settings import StoreSettings
from store.models import Anchor, StoredMessage
from store.sqlite.store import Store
from store.tenant import TenantStore


@pytest.fixture()
def tenant(tmp_path: Path) -> Iterator[TenantStore]:
    store = Store.open(StoreSettings(path=str(tmp_path / "a.db"), tenant_secret="s" * 32))
    try:
        yield store.for_tenant("t")
    finally:
        store.close()


def run(tenant: TenantStore, *texts: str) -> str:
    """Ingest `texts` as alternating user/assistant turns, extract one batch per message (as
    separate compaction steps would), return the rendered block."""
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    ingest = tenant.ingest(msgs, model="gpt-4o-mini", external_id=None, count_tokens=lambda _m: 5)
    cid = ingest.conversation.id
    for stored in ingest.messages:
        tenant.upsert_anchors(cid, extract_anchors([stored]))
    block = render_anchor_block(tenant.anchors(cid), max_tokens=2_000,
                                counter=TokenCounter.for_model("gpt-4o"))
    return str(block["content"]) if block else ""


@pytest.mark.parametrize("text", [
    "The dashboard widget looks stable; the team agreed to leave it for now.",
    "Sounds good, we agreed.",
    "The budget approved for goodwill credits on this account is $4,500.",
    "We decided to leave it for now.",
    "Hypothesis: we might decide to switch to Postgres.",
])
def test_chatter_is_not_a_decision(text: str) -> None:
    kinds = {d.kind for d in extract_anchors([_msg(text)])}
    assert "decision" not in kinds


@pytest.mark.parametrize(("text", "value"), [
    ("We decided to use Postgres.", "We decided to use Postgres"),
    ("Decision: switch the rounding mode to ROUND_HALF_EVEN in src/billing/invoice_v3.py.",
     "Decision: switch the rounding mode to ROUND_HALF_EVEN in src/billing/invoice_v3.py"),
    ("Decision recorded: the fix ships in release 2.31.4.",
     "Decision recorded: the fix ships in release 2.31.4"),
    ("Ok. Let's go with the blue theme.", "Let's go with the blue theme"),
    ("The refund of $1,249.50 was approved by Dana.", "The refund of $1,249.50 was approved by Dana"),
])
def test_explicit_decision_is_kept_verbatim(text: str, value: str) -> None:
    assert value in {d.value for d in extract_anchors([_msg(text)]) if d.kind == "decision"}


@pytest.mark.parametrize("text", [
    "Hypothesis: the cache is stale; if so, the fix would be to lower RATE_CACHE_TTL to 75 seconds.",
    "Maybe the timeout should be 75 seconds.",
])
def test_hedged_value_is_a_hypothesis(text: str) -> None:
    drafts = [d for d in extract_anchors([_msg(text)]) if d.value == "75 seconds"]
    assert drafts and all(d.key.startswith("hypothesis: ") for d in drafts)


@pytest.mark.parametrize("correction", [
    "Correction on the goodwill budget: finance raised it to $5,200.",
    "Actually the goodwill budget is $5,200.",
    "Update: goodwill is $5,200 from today.",
    "The budget changed to $5,200.",
    "It is not $4,500 but $5,200.",
    "Use $5,200 instead of $4,500.",
    "Revised figure for the budget: $5,200.",
])
def test_correction_worded_differently_supersedes(tenant: TenantStore, correction: str) -> None:
    block = run(tenant, "The budget approved for goodwill credits on this account is $4,500.",
                "Noted, goodwill budget $4,500.", correction)
    assert "$5,200" in block
    assert "$4,500" not in block
    history = {a.value: a for a in tenant.anchors(_cid(tenant), include_superseded=True)}
    old = history["$4,500"]
    assert old.status == "superseded" and old.superseded_by == history["$5,200"].id


def test_correction_without_a_shared_word_leaves_other_facts(tenant: TenantStore) -> None:
    block = run(tenant, "The refund is $1,200 and the goodwill budget is $4,500.",
                "Correction: the goodwill budget is $5,200.")
    assert "$1,200" in block and "$5,200" in block and "$4,500" not in block


@pytest.mark.parametrize("ruling", [
    "The cache hypothesis is ruled out: rates were fresh, so RATE_CACHE_TTL stays as it is.",
    "We discarded the RATE_CACHE_TTL idea.",
    "Lowering RATE_CACHE_TTL was rejected.",
    "RATE_CACHE_TTL is not the cause.",
    "Drop the idea of 75 seconds, it won't work.",
])
def test_ruled_out_hypothesis_is_never_current(tenant: TenantStore, ruling: str) -> None:
    block = run(tenant, "Keep order ORD-12345 in mind.",
                "Hypothesis: the cache is stale; if so, the fix would be to lower RATE_CACHE_TTL to "
                "75 seconds.", ruling)
    lines = [line for line in block.splitlines() if "75 seconds" in line]
    assert all("ruled out" in line.lower() or "discard" in line.lower() or "drop the idea" in line.lower()
               for line in lines)
    assert "ORD-12345" in block  # identities are never retracted
    gone = [a for a in tenant.anchors(_cid(tenant), include_superseded=True) if a.value == "75 seconds"]
    assert gone and all(a.status == "superseded" and a.superseded_by is not None for a in gone)


def test_ruling_out_that_names_nothing_active_adds_nothing(tenant: TenantStore) -> None:
    run(tenant, "The deadline is 2027-03-01.", "That theory about the network was ruled out.")
    assert [a.kind for a in tenant.anchors(_cid(tenant))] == ["date"]


def test_block_ranks_specific_facts_first_and_dedupes() -> None:
    anchors = [_anchor(1, "decision", "decision: x", "We decided to ship on Friday"),
               _anchor(2, "order", "order number", "ORD-1"), _anchor(3, "order", "ord-1", "ORD-1"),
               _anchor(4, "amount", "hypothesis: ttl", "75 seconds"),
               _anchor(5, "pinned", "pinned:9", "Answer in French")]
    block = render_anchor_block(anchors, max_tokens=1_000, counter=TokenCounter.for_model("gpt-4o"))
    assert block is not None
    lines = str(block["content"]).splitlines()[2:-1]
    assert lines == ["- pinned: Answer in French (msg 15)", "- order number: ORD-1 (msg 12)",
                     "- decision: We decided to ship on Friday (msg 11)",
                     "- hypothesis: ttl: 75 seconds (msg 14)"]


def _msg(text: str) -> StoredMessage:
    return StoredMessage(id=100, conversation_id="c", seq=0, role="user",
                         message={"role": "user", "content": text}, token_count=1, chain_hash="",
                         content_hash="", pinned=False)


def _anchor(i: int, kind: str, key: str, value: str) -> Anchor:
    return Anchor(id=i, conversation_id="c", kind=kind, key=key, value=value, source_message_id=10 + i)


def _cid(tenant: TenantStore) -> str:
    return tenant.list_conversations(limit=1)[0].id
