"""A compaction pass that fails half-way leaves no orphan summary, view or anchor behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from config.errors import CtxProxyError, StoreError
from config.settings import StoreSettings
from store.models import SummaryDraft, SummaryRecord
from store.sqlite.store import SqliteTenantConnection, Store
from store.tenant import TenantStore
from tests.compaction.test_engine import history, make_engine, turn
from tests.fakes.summarizer import ScriptedSummarizer


class _SummarylessTenant(TenantStore):
    """Fails when a pass writes its summary: after its anchors were written, in the same transaction."""

    def add_summary(self, draft: SummaryDraft, key: str | None = None) -> SummaryRecord:
        raise StoreError("injected: disk full while writing the summary")


class _SummarylessStore(Store):
    def for_tenant(self, tenant_id: str) -> TenantStore:
        return _SummarylessTenant(SqliteTenantConnection(self, tenant_id))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = _SummarylessStore.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    yield s
    s.close()


async def test_a_pass_failing_half_way_writes_only_the_failed_event(store: Store) -> None:
    engine = make_engine(store, ScriptedSummarizer("faithful"))
    msgs = history(24, words=40)
    prepared = await engine.prepare(turn(msgs))
    with pytest.raises((RuntimeError, CtxProxyError), match="compaction step failed"):
        await engine.compact(turn(msgs), prepared.conversation_id, "manual")
    tenant = store.for_tenant("tenant-a")
    cid = prepared.conversation_id
    events = tenant.events(cid)
    assert events and all(e.outcome == "failed" for e in events)
    assert events[0].error is not None and "injected" in events[0].error
    assert tenant.summaries(cid) == [] and tenant.view(cid) is None
    assert tenant.anchors(cid, include_superseded=True) == []  # history has ORD-... values to anchor
    await engine.aclose()
