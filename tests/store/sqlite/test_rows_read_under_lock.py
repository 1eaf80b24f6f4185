"""A tenant query's rows are read whole under the store's lock (store/runner.py `Result`).

Engine threads share the store's one connection (proxy/engine_pool.py). A cursor read after the lock
was released kept a read transaction open on that connection: once another connection changed the
database (a checkpoint's, a worker's), the next write transaction on it failed at once with
"database is locked" (seen as a 500 under load)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from config.settings import StoreSettings
from store.sqlite.store import SqliteTenantConnection, Store
from tests.store.store_helpers import TokenCounter


def test_a_query_leaves_no_read_open_on_the_shared_connection(tmp_path: Path) -> None:
    path = tmp_path / "ctxproxy.db"
    store = Store.open(StoreSettings(path=str(path)))
    try:
        alice = store.for_tenant(store.tenant_id_for_key("sk-alice"))
        msgs = [{"role": "user", "content": f"message {i}"} for i in range(50)]
        cid = alice.ingest(msgs, model="m", external_id=None, count_tokens=TokenCounter()).conversation.id
        conn = SqliteTenantConnection(store, alice.tenant_id)
        rows = conn.run("SELECT seq FROM messages WHERE tenant_id = :tenant ORDER BY seq")
        assert rows.fetchone()[0] == 0  # the rest unread: a lazy cursor would hold a read open here
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("INSERT INTO meta (key, value) VALUES ('elsewhere', 'x')")
        other.close()
        later = alice.ingest(msgs + [{"role": "assistant", "content": "done"}], model="m", external_id=None,
                             count_tokens=TokenCounter())
        assert later.conversation.id == cid and len(later.messages) == 51
        assert len(rows.fetchall()) == 50  # read whole when the query ran
    finally:
        store.close()
