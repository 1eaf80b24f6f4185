"""Compaction raises only config/errors.py classes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from compaction import llm
from compaction.recall import tools as recall
from config.errors import CtxProxyError
from config.settings import RecallSettings, StoreSettings
from store.sqlite.store import Store


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("context_search", "[]", "arguments must be a JSON object"),
    ("context_search", '{"pattern": ""}', "pattern: a non-empty string is required"),
    ("context_search", '{"pattern": "x", "limit": 99}', "limit: an integer between 1 and 50"),
    ("context_expand", '{"ids": []}', "ids: a non-empty list of id strings is required"),
    ("context_search", "{not json", "Expecting property name"),
])
async def test_recall_argument_errors_become_json_errors(tmp_path: Path, name: str, arguments: str,
                                                         message: str) -> None:
    store = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    out = json.loads(recall.execute(store.for_tenant("t"), "c", name, arguments, RecallSettings()))
    assert message in out["error"]
    store.close()


def test_missing_litellm_is_a_ctxproxy_error(monkeypatch: pytest.MonkeyPatch) -> None:
    llm.litellm_package_dir.cache_clear()
    monkeypatch.setattr(importlib.util, "find_spec", lambda _name: None)
    try:
        with pytest.raises(CtxProxyError, match="litellm is not installed"):
            llm.bundled_tokenizers_dir()
    finally:
        monkeypatch.undo()
        llm.litellm_package_dir.cache_clear()
