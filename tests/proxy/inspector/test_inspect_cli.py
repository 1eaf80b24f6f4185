"""`ctxproxy inspect` through the real CLI entry point: text, --json, tenant selection, errors."""

from __future__ import annotations

import json

import pytest

from proxy.cli.main import main
from tests.proxy.inspector.inspect_fixtures import API_KEY, OTHER_KEY, Populated
from tests.proxy.inspector.inspect_scenario import PINNED_TEXT


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["inspect", *argv])
    out, err = capsys.readouterr()
    return code, out, err


Capture = pytest.CaptureFixture[str]


def test_list_shows_the_tenants_conversations(populated: Populated, capsys: Capture) -> None:
    code, out, _ = run(capsys, "--db", str(populated.db_path), "--api-key", API_KEY)
    assert code == 0
    line = next(line for line in out.splitlines() if populated.scenario.conversation_id in line)
    assert "gpt-4o-mini" in line and " 40 " in line and " 6 " in line and "ext-42" in line
    assert populated.other_conversation not in out


def test_conversation_text_has_every_section(populated: Populated, capsys: Capture) -> None:
    sc = populated.scenario
    code, out, _ = run(capsys, "--db", str(populated.db_path), "--api-key", API_KEY, sc.conversation_id)
    assert code == 0
    assert f"Conversation  {sc.conversation_id}" in out
    assert "40 (" in out and "6 raw, 33 summarised, 1 pinned" in out
    assert "Prefix stability: 4/5 consecutive requests extended the previous one (80.0%)" in out
    fresh = next(line for line in out.splitlines() if line.strip().startswith("fresh_tail"))
    assert "█" in fresh and "420" in fresh and "42.0%" in fresh
    assert f"{sc.condensed.id}  condensed d1 g{sc.condensed.generation}" in out
    assert "in_view" in out and "8 messages: seq 1-8" in out
    assert "replaced by #" in out and "(A-1002)" in out
    assert PINNED_TEXT in out and "4-30" in out
    assert "rejected facts: 9999" in out and "summarizer timed out after 60s" in out


def test_json_is_the_inspection_model(populated: Populated, capsys: Capture) -> None:
    sc = populated.scenario
    code, out, _ = run(capsys, "--db", str(populated.db_path), "--api-key", API_KEY, sc.conversation_id,
                       "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"schema", "conversation", "totals", "view", "timeline", "summaries", "anchors",
                         "events", "occupancy", "prefix_stability", "cost"}
    assert data["conversation"]["id"] == sc.conversation_id
    assert data["view"]["version"] == 2 and data["view"]["covered_through_seq"] == 34
    assert data["prefix_stability"]["rate"] == 0.8
    code, out, _ = run(capsys, "--db", str(populated.db_path), "--api-key", API_KEY, "--json")
    assert [c["id"] for c in json.loads(out)["conversations"]] == [sc.conversation_id]


def test_tenant_by_id_and_env_key(populated: Populated, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = run(capsys, "--db", str(populated.db_path), "--tenant", populated.other_tenant, "--json")
    assert code == 0 and [c["id"] for c in json.loads(out)["conversations"]] == [populated.other_conversation]
    monkeypatch.setenv("CTXPROXY_API_KEY", OTHER_KEY)
    code, out, _ = run(capsys, "--db", str(populated.db_path), populated.other_conversation, "--json")
    assert code == 0 and json.loads(out)["timeline"][0]["preview"] == "Tenant B secret plan: zebra"


def test_another_tenants_conversation_is_not_found(populated: Populated,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--db", str(populated.db_path), "--api-key", API_KEY,
                         populated.other_conversation)
    assert code == 1 and out == "" and "not found" in err


def test_config_store_path_and_usage_errors(populated: Populated,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    config = populated.db_path.parent / "config.yaml"
    config.write_text(f"store:\n  path: {populated.db_path}\n", encoding="utf-8")
    code, out, _ = run(capsys, "--config", str(config), "--api-key", API_KEY)
    assert code == 0 and populated.scenario.conversation_id in out
    code, _, err = run(capsys, "--db", str(populated.db_path))
    assert code == 1 and "--api-key" in err
    missing = populated.db_path.parent / "nope.db"
    code, _, err = run(capsys, "--db", str(missing), "--api-key", API_KEY)
    assert code == 1 and "no store at" in err and not missing.exists()
