"""`ctxproxy search` / `ctxproxy expand` over a real store: text and --json, same answers as the API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.settings import StoreSettings
from proxy.cli.main import main
from proxy.recall.api import as_list, hit_json, item_json, run_search, search_query
from store.sqlite.store import Store
from tests.proxy.recall.recall_data import ALPHA_KEY, BETA_KEY, FACT, Populated

Capture = pytest.CaptureFixture[str]


def run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_search_text_lists_hits_with_marked_snippets(populated: Populated, capsys: Capture) -> None:
    code, out, _ = run(capsys, "search", "Halvorsen", "--conversation", populated.alpha_conv,
                       "--db", populated.path, "--api-key", ALPHA_KEY)
    assert code == 0
    assert populated.fact_id in out and "[Halvorsen]" in out and "user" in out
    assert f"ctxproxy expand {populated.fact_id}" in out


def test_search_json_is_the_api_shape(populated: Populated, capsys: Capture) -> None:
    argv = ["search", "kayak OR Bergen", "--all-conversations", "--scope", "message", "--role", "user",
            "--last", "7d", "--limit", "5", "--json", "--db", populated.path, "--api-key", ALPHA_KEY]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    store = Store.open(StoreSettings(path=populated.path))
    try:
        tenant = store.for_tenant(store.tenant_id_for_key(ALPHA_KEY))
        query = search_query({"pattern": "kayak OR Bergen", "all_conversations": True, "scope": "message",
                              "role": "user", "last": "7d", "limit": 5})
        expected = as_list([hit_json(h) for h in run_search(tenant, query)])
    finally:
        store.close()
    assert json.loads(out) == expected
    assert {h["id"] for h in expected["data"]} >= {populated.fact_id, populated.bag_id}
    assert populated.old_id not in {h["id"] for h in expected["data"]}


def test_search_time_bounds_and_summaries(populated: Populated, capsys: Capture) -> None:
    base = ["--conversation", populated.alpha_conv, "--db", populated.path, "--api-key", ALPHA_KEY, "--json"]
    _, out, _ = run(capsys, "search", "kayak", "--before", "2000-01-01", *base)
    assert json.loads(out)["data"] == []
    _, out, _ = run(capsys, "search", "Bergen", "--scope", "summary", "--since", "2000-01-01T00:00:00Z",
                    *base)
    assert [(h["id"], h["depth"]) for h in json.loads(out)["data"]] == [(populated.summary_id, 0)]


def test_expand_text_and_json(populated: Populated, capsys: Capture) -> None:
    who = ["--db", populated.path, "--tenant", _tenant_id(populated.path, ALPHA_KEY)]
    code, out, _ = run(capsys, "expand", populated.fact_id, populated.reply_id, populated.tool_id,
                       populated.summary_id, *who)
    assert code == 0
    assert FACT in out and "[tool call lookup_order]" in out and "tool result payload omitted" in out
    assert f"sources: {populated.old_id}, {populated.fact_id}, {populated.reply_id}" in out
    code, out, _ = run(capsys, "expand", populated.fact_id, "--json", *who)
    store = Store.open(StoreSettings(path=populated.path))
    try:
        tenant = store.for_tenant(store.tenant_id_for_key(ALPHA_KEY))
        assert json.loads(out) == as_list([item_json(i) for i in tenant.expand([populated.fact_id])])
    finally:
        store.close()
    assert FACT in json.loads(out)["data"][0]["text"]


def _tenant_id(path: str, key: str) -> str:
    store = Store.open(StoreSettings(path=path))
    try:
        return store.tenant_id_for_key(key)
    finally:
        store.close()


def test_config_file_and_env_key(populated: Populated, capsys: Capture, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "ctxproxy.yaml"
    config.write_text(f"store:\n  path: {populated.path}\n", encoding="utf-8")
    monkeypatch.setenv("CTXPROXY_API_KEY", ALPHA_KEY)
    code, out, _ = run(capsys, "search", "paddle", "--config", str(config), "--json")
    assert code == 0 and [h["conversation_id"] for h in json.loads(out)["data"]] == [populated.alpha_recent]


def test_errors_and_isolation(populated: Populated, capsys: Capture) -> None:
    beta = ["--db", populated.path, "--api-key", BETA_KEY]
    code, out, err = run(capsys, "expand", populated.fact_id, *beta)
    assert code == 1 and out == "" and "no message or summary" in err
    code, out, _ = run(capsys, "search", "Halvorsen", "--all-conversations", "--json", *beta)
    assert code == 0 and json.loads(out)["data"] == []
    code, _, err = run(capsys, "search", "kayak NOT", "--all-conversations", *beta)
    assert code == 1 and "(pattern)" in err
    code, _, err = run(capsys, "search", "kayak", "--last", "forever", *beta)
    assert code == 1 and "(last)" in err
    code, _, err = run(capsys, "search", "kayak", "--db", populated.path)
    assert code == 1 and "--api-key" in err
    code, _, err = run(capsys, "search", "kayak", "--db", str(Path(populated.path).with_name("none.db")),
                       "--tenant", "anonymous")
    assert code == 1 and "no store" in err
    with pytest.raises(SystemExit):
        main(["search", "kayak", "--conversation", "x", "--all-conversations", *beta])


def test_no_matches_text(populated: Populated, capsys: Capture) -> None:
    code, out, _ = run(capsys, "search", "zeppelin", "--all-conversations", "--db", populated.path,
                       "--api-key", ALPHA_KEY)
    assert code == 0 and out.strip() == "no matches"
