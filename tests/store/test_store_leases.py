"""Leases on background compaction steps: one holder at a time, taken over once expired."""

from __future__ import annotations

import pytest

from config.errors import NotFoundError
from store.models import SummaryDraft
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, history, scalar, sql


def _conversation(alice: TenantStore, counter: TokenCounter) -> str:
    return alice.ingest(history(2), model="m", external_id=None, count_tokens=counter).conversation.id


def test_one_holder_at_a_time_until_released(alice: TenantStore, counter: TokenCounter) -> None:
    cid = _conversation(alice, counter)
    assert alice.claim_step(cid, "replica-a", 60)
    assert not alice.claim_step(cid, "replica-b", 60)
    assert alice.claim_step(cid, "replica-a", 60)  # renewing its own claim
    alice.release_step(cid, "replica-b")  # not b's: nothing happens
    assert not alice.claim_step(cid, "replica-b", 60)
    alice.release_step(cid, "replica-a")
    assert alice.claim_step(cid, "replica-b", 60)


def test_an_expired_claim_is_taken_over(store: Store, alice: TenantStore, counter: TokenCounter) -> None:
    cid = _conversation(alice, counter)
    assert alice.claim_step(cid, "killed-replica", 60)
    sql(store, "UPDATE step_leases SET expires_at = expires_at - 120")  # its lease ran out
    assert alice.claim_step(cid, "replica-b", 60)
    assert not alice.claim_step(cid, "killed-replica", 60)
    assert scalar(store, "SELECT holder FROM step_leases") == "replica-b"


def test_claims_are_per_tenant_and_go_with_the_conversation(store: Store, alice: TenantStore,
                                                            bob: TenantStore, counter: TokenCounter) -> None:
    cid = _conversation(alice, counter)
    with pytest.raises(NotFoundError):
        bob.claim_step(cid, "replica-a", 60)
    assert alice.claim_step(cid, "replica-a", 60)
    alice.delete_conversation(cid)
    assert scalar(store, "SELECT COUNT(*) FROM step_leases") == 0


def test_the_same_summary_is_stored_once(alice: TenantStore, counter: TokenCounter) -> None:
    """Two writers storing one summary of one chunk (two replicas past their deadline, whose local
    levels are deterministic) leave one summary; a different level or source set is a different one."""
    result = alice.ingest(history(3), model="m", external_id=None, count_tokens=counter)
    cid, ids = result.conversation.id, tuple(m.id for m in result.messages)
    first = alice.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "Intent: first writer.", 5, 1, 2,
                                           ids[1:3]))
    second = alice.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "Intent: first writer.", 5, 1, 2,
                                            ids[1:3]))
    assert second == first and [s.id for s in alice.summaries(cid)] == [first.id]
    shorter = alice.add_summary(SummaryDraft(cid, "leaf", 0, "aggressive", "Intent.", 2, 1, 2, ids[1:3]))
    wider = alice.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "Intent: wider.", 5, 1, 3, ids[1:4]))
    assert len({first.id, shorter.id, wider.id}) == 3 and len(alice.summaries(cid)) == 3
