"""A correction retires copies of the corrected fact, never an unrelated fact with an equal value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compaction.anchors.extract import extract_anchors
from config.settings import StoreSettings
from store.anchors import upsert_anchors, value_in
from store.models import AnchorDraft, StoredMessage
from store.sqlite.store import Store
from store.tenant import TenantStore


@pytest.fixture
def tenant(tmp_path: Path) -> Iterator[TenantStore]:
    store = Store.open(StoreSettings(path=str(tmp_path / "a.db"), tenant_secret="s" * 32))
    yield store.for_tenant("t")
    store.close()


def _apply(tenant: TenantStore, *texts: str) -> tuple[str, list[StoredMessage]]:
    """Store the texts as one conversation and upsert every anchor extracted from them, in order."""
    result = tenant.ingest([{"role": "user", "content": t} for t in texts], model="m", external_id=None,
                           count_tokens=lambda m: 1)
    tenant.upsert_anchors(result.conversation.id, extract_anchors(list(result.messages)))
    return result.conversation.id, list(result.messages)


def _active(tenant: TenantStore, cid: str, kind: str) -> set[tuple[str, str]]:
    return {(a.key, a.value) for a in tenant.anchors(cid) if a.kind == kind}


@pytest.mark.parametrize("texts", [
    ("The hotel deposit is $500, the flight is $500.",),
    ("The hotel deposit is $500.", "The flight is $500."),
])
def test_correcting_one_amount_keeps_an_unrelated_equal_amount(
        tenant: TenantStore, texts: tuple[str, ...]) -> None:
    cid, _ = _apply(tenant, *texts, "Correction: the hotel deposit is $600.")
    assert _active(tenant, cid, "amount") == {("hotel deposit", "$600"), ("flight", "$500")}


def test_a_copy_under_a_related_key_is_retired(tenant: TenantStore) -> None:
    cid, msgs = _apply(tenant, "ok")
    tenant.upsert_anchors(cid, [AnchorDraft("amount", "budget", "4000 EUR", msgs[0].id, 0),
                                AnchorDraft("amount", "total budget", "4000 EUR", msgs[0].id, 0),
                                AnchorDraft("amount", "4000 eur", "4000 EUR", msgs[0].id, 0),
                                AnchorDraft("amount", "rent", "4000 EUR", msgs[0].id, 0)])
    _, gone = tenant.upsert_anchors(cid, [AnchorDraft("amount", "budget", "5500 EUR", msgs[0].id, 1)])
    assert sorted(a.key for a in gone) == ["4000 eur", "budget", "total budget"]
    assert _active(tenant, cid, "amount") == {("budget", "5500 EUR"), ("rent", "4000 EUR")}


def test_a_decision_containing_the_value_inside_a_number_is_kept(tenant: TenantStore) -> None:
    cid, msgs = _apply(tenant, "ok")
    tenant.upsert_anchors(cid, [
        AnchorDraft("amount", "retry limit", "5", msgs[0].id, 0),
        AnchorDraft("decision", "decision: use port 5432", "We decided to use port 5432", msgs[0].id, 0),
        AnchorDraft("decision", "decision: retry 5 times", "We decided to retry 5 times", msgs[0].id, 0)])
    _, gone = tenant.upsert_anchors(cid, [AnchorDraft("amount", "retry limit", "7", msgs[0].id, 1)])
    assert sorted(a.value for a in gone) == ["5", "We decided to retry 5 times"]
    assert {v for _, v in _active(tenant, cid, "decision")} == {"We decided to use port 5432"}


@pytest.mark.parametrize(("value", "text", "found"), [
    ("5", "port 5432", False), ("5", "retry 5 times.", True), ("5", "ratio 1.5", False),
    ("5", "version 5.1", False), ("$500", "the flight is $500.", True), ("$500", "$5000", False),
    ("ORD-1", "order ORD-12", False), ("ORD-1", "(ORD-1)", True), ("", "anything", False),
])
def test_value_in_matches_on_boundaries(value: str, text: str, found: bool) -> None:
    assert value_in(value, text) is found


def test_many_drafts_read_the_active_anchors_once(tenant: TenantStore) -> None:
    """An imported history brings thousands of drafts: the active anchors are read once per upsert
    and kept current in memory, not read again for every draft (that was quadratic)."""
    cid, msgs = _apply(tenant, "ok")
    reads: list[str] = []

    def counting(sql: str, params: dict[str, object] | None = None) -> object:
        if sql.startswith("SELECT * FROM anchors") and "status = 'active'" in sql:
            reads.append(sql)
        return tenant._run(sql, params)

    drafts = [AnchorDraft("identifier", f"j{i:04d}", f"state {i % 3}", msgs[0].id, i) for i in range(300)]
    drafts += [AnchorDraft("identifier", f"j{i:04d}", "done", msgs[0].id, 300 + i) for i in range(0, 300, 2)]
    with tenant._tx(cid):
        added, gone = upsert_anchors(counting, cid, drafts)  # type: ignore[arg-type]
    assert len(reads) == 1
    assert len(added) == 450 and sorted(a.key for a in gone) == [f"j{i:04d}" for i in range(0, 300, 2)]
    active = _active(tenant, cid, "identifier")
    assert ("j0002", "done") in active and ("j0003", "state 0") in active and len(active) == 300
