"""A store whose disk is full (SQLite's `max_page_count` reached: SQLITE_FULL, as on a full volume)
answers 507 in each route's error shape, naming the problem; it is counted on /metrics, shown by
/readyz, logged as one warning line without a traceback, and requests succeed again once there is room."""

from __future__ import annotations

import io
import json
import sqlite3
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from proxy import appkeys
from proxy.error_mapping import storage_failure
from tests.conftest import TEST_API_KEY, ProxyFactory
from tests.fakes.upstream import FakeUpstream

HEADERS = {"Authorization": f"Bearer {TEST_API_KEY}"}
BIG = "lorem ipsum dolor " * 4000  # ~70 KB: new pages for its rows


def bodies(turn: int) -> dict[str, dict[str, Any]]:
    """A new conversation per route (each needs new rows in the store)."""
    text = f"{turn} {BIG}"
    return {"/v1/chat/completions": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]},
            "/v1/responses": {"model": "gpt-4o-mini", "input": text},
            "/v1/messages": {"model": "gpt-4o-mini", "max_tokens": 5,
                             "messages": [{"role": "user", "content": text}]}}


async def cap_pages(server: TestServer, pages: int | None) -> None:
    """Limit the SQLite file to its current size (`None`: lift the limit), on the engine thread."""
    store: Any = server.app[appkeys.STORE]
    conn = getattr(store, "conn", None)
    if not isinstance(conn, sqlite3.Connection):
        pytest.skip("the page cap is SQLite's")

    def cap() -> None:
        limit = conn.execute("PRAGMA page_count").fetchone()[0] if pages is None else pages
        conn.execute(f"PRAGMA max_page_count = {limit}")

    await server.app[appkeys.HOST].run(cap)


async def get_json(http: aiohttp.ClientSession, url: Any) -> tuple[int, Any]:
    async with http.get(url) as resp:
        json_body = resp.content_type == "application/json"
        return resp.status, await resp.json() if json_body else await resp.text()


async def test_a_full_store_is_a_507_naming_it_and_recovers_when_space_is_freed(
        make_proxy: ProxyFactory, fake_upstream: FakeUpstream) -> None:
    logs = io.StringIO()
    server = await make_proxy(log_stream=logs)
    await cap_pages(server, None)
    async with aiohttp.ClientSession(headers=HEADERS) as http:
        for path, body in bodies(1).items():
            async with http.post(server.make_url(path), json=body) as resp:
                assert resp.status == 507, await resp.text()
                error = await resp.json()
            if path == "/v1/messages":
                assert error["type"] == "error" and error["error"]["type"] == "api_error"
            else:
                assert error["error"]["code"] == "store_full"
            assert "disk is full" in json.dumps(error)
        status, ready = await get_json(http, server.make_url("/readyz"))
        assert status == 200 and ready["store"]["writable"] is False
        assert "disk is full" in ready["store"]["message"]
        _, metrics = await get_json(http, server.make_url("/metrics"))
        assert 'ctxproxy_store_unwritable_total{reason="full"} 3.0' in metrics
        await cap_pages(server, 1_073_741_823)  # space freed
        for path, body in bodies(2).items():
            async with http.post(server.make_url(path), json=body) as resp:
                assert resp.status == 200, await resp.text()
        _, ready = await get_json(http, server.make_url("/readyz"))
        assert ready["store"] == {"writable": True}
    conn = server.app[appkeys.STORE].conn  # type: ignore[attr-defined]  # SQLite's (cap_pages checked)
    checked = await server.app[appkeys.HOST].run(lambda: conn.execute("PRAGMA integrity_check").fetchone())
    assert checked == ("ok",)  # nothing corrupted
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    warnings = [e for e in lines if e["event"] == "store_unwritable"]
    assert len(warnings) == 3 and all(e["level"] == "warning" for e in warnings)
    assert not [e for e in lines if "exception" in e or e["event"] == "unhandled_error"]
    assert len(fake_upstream.requests) == 3  # only the turns after the space was freed


@pytest.mark.parametrize(("exc", "code"), [
    (sqlite3.OperationalError("database or disk is full"), "store_full"),
    (sqlite3.OperationalError("attempt to write a readonly database"), "store_read_only"),
    (OSError(28, "No space left on device"), "store_full"),
    (OSError(30, "Read-only file system"), "store_read_only"),
])
def test_storage_failures_map_to_507(exc: BaseException, code: str) -> None:
    mapped = storage_failure(exc)
    assert mapped is not None and mapped.status == 507 and mapped.code == code


def test_psycopg_disk_full_wrapped_in_a_store_error_is_507() -> None:
    psycopg_errors = pytest.importorskip("psycopg.errors")
    from config.errors import StoreError

    wrapped = StoreError("store query failed")
    wrapped.__cause__ = psycopg_errors.DiskFull("could not extend file")
    mapped = storage_failure(wrapped)
    assert mapped is not None and mapped.code == "store_full"
    assert storage_failure(sqlite3.OperationalError("database is locked")) is None
