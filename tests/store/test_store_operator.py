"""Operator-level store access: the tenant listing, and sqlite errors surfacing as StoreError."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from config.errors import StoreError
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, history, sql


def test_tenant_ids_lists_tenants_with_conversations_most_recent_first(
        store: Store, alice: TenantStore, bob: TenantStore, counter: TokenCounter) -> None:
    assert store.tenant_ids() == []
    alice.ingest(history(1), model="m", external_id=None, count_tokens=counter)
    bob.ingest(history(1, topic="boats"), model="m", external_id=None, count_tokens=counter)
    store.for_tenant("anonymous")  # no conversation: not listed
    assert store.tenant_ids() == [bob.tenant_id, alice.tenant_id]
    alice.ingest(history(2), model="m", external_id=None, count_tokens=counter)  # alice is active again
    assert store.tenant_ids() == [alice.tenant_id, bob.tenant_id]


def test_integrity_errors_become_store_errors(alice: TenantStore, counter: TokenCounter) -> None:
    cid = alice.ingest(history(1), model="m", external_id=None, count_tokens=counter).conversation.id
    with pytest.raises(StoreError, match="IntegrityError") as info:
        alice._run("INSERT INTO conversations (id, tenant_id, model, message_count, created_at, "
                   "updated_at) VALUES (:cid, :tenant, 'm', 0, 0, 0)", {"cid": cid})
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError | psycopg.IntegrityError)
    assert alice.conversation(cid).message_count == 3  # nothing changed


def test_a_foreign_view_row_is_never_read(store: Store, alice: TenantStore, bob: TenantStore,
                                          counter: TokenCounter) -> None:
    cid = alice.ingest(history(1), model="m", external_id=None, count_tokens=counter).conversation.id
    # a row that only a bug elsewhere could write: bob's view of alice's conversation
    sql(store, "INSERT INTO views (tenant_id, conversation_id, version, items_json, "
        "covered_through_seq, anchor_ids_json, created_at) VALUES "
        "(?, ?, 1, '[]', 7, '[]', 0)", (bob.tenant_id, cid))
    assert alice.view(cid) is None


def test_in_list_binds_every_value() -> None:
    from store.rows import in_list
    assert in_list("h", ["a", 7]) == ("(:h0, :h1)", {"h0": "a", "h1": 7})
