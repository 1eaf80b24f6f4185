"""The recall audit table never holds secrets from expanded messages or tool arguments."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from config.settings import RecallSettings, StoreSettings
from proxy.recall.transport import StoreRecallTools
from store.sqlite.store import Store

SECRET = "sk-abcdefghijklmnopqrstuvwx12"


def test_recorded_round_is_redacted(tmp_path: Path) -> None:
    store = Store.open(StoreSettings(path=str(tmp_path / "c.db")))
    try:
        tenant = store.for_tenant("t1")
        cid = tenant.ingest([{"role": "user", "content": f"my key is {SECRET}"}], model="gpt-4o",
                            external_id=None, count_tokens=lambda _m: 5).conversation.id
        tools = StoreRecallTools(tenant, cid, RecallSettings())
        calls = [{"id": "c1", "type": "function",
                  "function": {"name": "context_expand",
                               "arguments": json.dumps({"ids": ["1"], "note": "password=hunter22"})}}]
        result = json.dumps({"items": [{"id": "1", "text": f"my key is {SECRET}",
                                        "db": "postgres://app:Pa55word@db/x"}]})
        asyncio.run(tools.record_round(calls, [{"role": "tool", "tool_call_id": "c1", "content": result}]))
        stored = json.dumps(tenant.tool_rounds(cid))
        assert SECRET not in stored and "hunter22" not in stored and "Pa55word" not in stored
        assert "[REDACTED:openai_key]" in stored and "context_expand" in stored
        content = tenant.tool_rounds(cid)[0]["results"][0]["content"]
        assert json.loads(content)["items"][0]["id"] == "1"  # still valid JSON
    finally:
        store.close()
