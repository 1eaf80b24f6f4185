"""No API key or secret reaches logs, /metrics, summaries, anchors, events or the database file;
the user's own message is the one place its text is kept (stored as sent)."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import openai

from compaction.types import SummarizerChoice, SummaryRequest
from config.errors import SummarizerError
from proxy import appkeys
from proxy.observability.observer import ProxyObserver
from store.interface import StoreBackend
from store.postgres.store import PgStore
from tests.conftest import ProxyFactory, settled
from tests.fakes.upstream import ErrorReply, FakeUpstream
from tests.proxy.observability.obs_support import (
    CLIENT_KEY,
    MODEL,
    SECRET_MESSAGE,
    drive,
    log_lines,
    small_window_settings,
)
from tests.sdk_params import sdk_messages
from tests.store.lifecycle_helpers import table_text
from tests.store.store_helpers import sql

SECRET = b"SECRET"
LEAKY_KEY = "sk-live-LEAKabcdef1234567890QWERTY"


def _raw(path: Path) -> bytes:
    return b"".join(Path(str(path) + s).read_bytes() for s in ("", "-wal", "-shm")
                    if Path(str(path) + s).exists())


def _sql_count(store: StoreBackend, text: str) -> int:
    return sum(str(v).count("SECRET") for row in sql(store, text) for v in row if v is not None)


async def test_secrets_stay_out_of_everything_but_the_stored_message(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    db = tmp_path / "secret.db"
    logs = io.StringIO()
    server = await make_proxy(small_window_settings(fake_upstream.url, db), log_stream=logs)
    base = str(server.make_url("")).rstrip("/")
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key=CLIENT_KEY, max_retries=0)
    driven = await drive(client, server.app, 30, first=SECRET_MESSAGE)
    await client.close()
    async with aiohttp.ClientSession() as http:
        metrics_text = await (await http.get(base + "/metrics")).text()
    await settled(server)
    store = server.app[appkeys.STORE]
    tenant = store.for_tenant(store.tenant_id_for_key(CLIENT_KEY))
    cid = driven.headers[-1]["x-ctxproxy-conversation-id"]
    first_id = tenant.messages(cid)[0].id
    summarized = [s for s in tenant.summaries(cid) if first_id in s.source_message_ids]
    assert summarized, "the secret message was never compacted"
    assert "[REDACTED" in summarized[0].content  # its text reached the summary, redacted

    assert "SECRET" not in logs.getvalue() and "SECRET" not in metrics_text
    assert "SECRET" not in str(tenant.summaries(cid)) + str(tenant.anchors(cid, include_superseded=True))
    assert "SECRET" not in str(tenant.events(cid)) + str(tenant.forwarded(cid))
    # Upstream saw the raw message (the client sent it) but never a summary holding it.
    assert all("SECRET" not in str(m) for r in fake_upstream.requests
               for m in r.body["messages"] if m.get("role") == "system")

    # Through the app's own store (SQLite or PostgreSQL): stored as sent, and nowhere else.
    in_messages = _sql_count(store, "SELECT message_json, text FROM messages")
    assert in_messages == 4  # 2 secrets x (message_json, text): stored as sent
    elsewhere = sum(_sql_count(store, f"SELECT * FROM {table}") for table in (
        "summaries", "anchors", "compaction_events", "forwarded", "views", "meta"))
    assert elsewhere == 0
    if isinstance(store, PgStore):  # no files of ours to read: the key is in no table
        assert CLIENT_KEY not in table_text(store)
        await server.close()
        return
    raw = _raw(db)  # live files, before any checkpoint
    assert CLIENT_KEY.encode() not in raw
    await server.close()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = _raw(db)
    assert CLIENT_KEY.encode() not in raw
    assert raw.count(SECRET) == in_messages  # the FTS indexes keep lowercase tokens only


class LeakySummarizer:
    """A summarizer whose provider error quotes an API key (as some providers do)."""

    @property
    def name(self) -> str:
        return "openai/leaky"

    async def complete(self, request: SummaryRequest) -> str:
        raise SummarizerError(f"401 Incorrect API key provided: {LEAKY_KEY}. Authorization: "
                              f"Bearer {LEAKY_KEY}")


def _leaky_engine(store: Any, settings: Any, metrics: Any, logger: Any) -> Any:
    from compaction.engine import Engine

    leaky = LeakySummarizer()
    return Engine(store, settings, lambda turn: SummarizerChoice(leaky, {"model": leaky.name}),
                  observer=ProxyObserver(metrics, logger))


async def test_summarizer_and_upstream_error_texts_are_redacted_in_logs(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    logs = io.StringIO()
    server = await make_proxy(small_window_settings(fake_upstream.url, tmp_path / "e.db"),
                              engine_factory=_leaky_engine, log_stream=logs)
    base = str(server.make_url("")).rstrip("/")
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key=CLIENT_KEY, max_retries=0)
    driven = await drive(client, server.app, 30)
    fake_upstream.queue(ErrorReply(500, {"error": {"message": f"bad key {LEAKY_KEY}",
                                                   "type": "server_error"}}))
    try:
        await client.chat.completions.create(model=MODEL, messages=sdk_messages(
            driven.messages + [{"role": "user", "content": "again"}]))
    except openai.APIStatusError as exc:
        assert exc.status_code == 500
    await client.close()
    lines = log_lines(logs)
    rejected = [line for line in lines if line["event"] == "compaction.level_rejected"]
    assert rejected and all(line["reason"] == "error" for line in rejected)
    assert "[REDACTED" in rejected[0]["error"] and "Incorrect API key" in rejected[0]["error"]
    steps = [line for line in lines if line["event"] == "compaction.step"]
    levels = {s["compaction_level"] for s in steps}  # the failing LLM gave way to the local level
    assert "extractive" in levels and levels <= {"extractive", "elision"}
    assert [line["status"] for line in lines if line["event"] == "request"][-1] == 500
    assert LEAKY_KEY not in logs.getvalue() and "LEAK" not in logs.getvalue()
    assert "SECRET" not in logs.getvalue()
    metrics = server.app[appkeys.METRICS].render().decode()
    assert "ctxproxy_summarizer_errors_total 0.0" not in metrics
