"""`ctxproxy export` and `ctxproxy delete` over a real store file: JSONL out, nothing left after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.settings import StoreSettings
from proxy.cli.main import main
from store.models import SearchQuery
from store.sqlite.store import Store
from tests.store.lifecycle_helpers import holds, marked_conversation

Capture = pytest.CaptureFixture[str]
MARKER = "Gannet4Rill9Scree"


def _run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Alice: two marked conversations; bob: one."""
    path = tmp_path / "ctx.db"
    store = Store.open(StoreSettings(path=str(path)))
    try:
        alice = store.for_tenant(store.tenant_id_for_key("sk-alice"))
        marked_conversation(alice, f"{MARKER}A", external_id="a1")
        marked_conversation(alice, f"{MARKER}B", external_id="a2")
        marked_conversation(store.for_tenant("bobs-tenant"), "BobMarker7Fen")
    finally:
        store.close()
    return path


def _records(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_export_a_tenant_as_jsonl(db: Path, capsys: Capture) -> None:
    code, out, _ = _run(capsys, "export", "--db", str(db), "--api-key", "sk-alice")
    assert code == 0
    records = _records(out)
    assert [r["type"] for r in records].count("conversation") == 2
    assert [r["external_id"] for r in records if r["type"] == "conversation"] == ["a1", "a2"]
    assert {r["type"] for r in records} == {"conversation", "message", "summary", "anchor"}
    summary = next(r for r in records if r["type"] == "summary")
    assert isinstance(summary["source_message_ids"], list) and len(summary["source_message_ids"]) == 3
    assert "BobMarker7Fen" not in out
    assert f"{MARKER}A" in out and f"{MARKER}B" in out


def test_export_one_conversation_to_a_file_finds_its_tenant(db: Path, capsys: Capture,
                                                            tmp_path: Path) -> None:
    code, out, _ = _run(capsys, "export", "--db", str(db), "--tenant", "bobs-tenant")
    cid = _records(out)[0]["id"]
    target = tmp_path / "one.jsonl"
    code, out, _ = _run(capsys, "export", "--db", str(db), "--conversation", str(cid), "--out", str(target))
    assert code == 0 and out == ""
    records = _records(target.read_text(encoding="utf-8"))
    assert records[0] == {**records[0], "type": "conversation", "tenant_id": "bobs-tenant"}
    assert [r["type"] for r in records].count("message") == 3


def test_delete_a_conversation_then_a_tenant(db: Path, capsys: Capture) -> None:
    _, out, _ = _run(capsys, "export", "--db", str(db), "--api-key", "sk-alice")
    first = next(r["id"] for r in _records(out) if r.get("external_id") == "a1")
    code, out, _ = _run(capsys, "delete", "--db", str(db), "--conversation", str(first))
    assert (code, out) == (0, f"deleted conversation {first}\n")
    assert not holds(db, f"{MARKER}A") and holds(db, f"{MARKER}B")
    code, out, _ = _run(capsys, "delete", "--db", str(db), "--api-key", "sk-alice")
    assert code == 0 and out.endswith(": 1 conversations\n")
    assert not holds(db, MARKER) and holds(db, "BobMarker7Fen")
    store = Store.open(StoreSettings(path=str(db)))
    try:
        alice = store.for_tenant(store.tenant_id_for_key("sk-alice"))
        assert alice.search(SearchQuery(MARKER, all_conversations=True)) == []
        assert store.tenant_ids() == ["bobs-tenant"]
    finally:
        store.close()


def test_unknown_conversation_is_an_error(db: Path, capsys: Capture) -> None:
    code, _, err = _run(capsys, "delete", "--db", str(db), "--conversation", "conv_nope")
    assert code == 1 and "not found" in err
    code, _, err = _run(capsys, "export", "--db", str(db))
    assert code == 1 and "--conversation" in err
