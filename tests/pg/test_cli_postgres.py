"""The operator commands on the shared PostgreSQL store (`store.url`): inspect, search, expand,
export and delete see and remove what the replicas stored, as they do on a SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.settings import StoreSettings
from proxy.cli.main import main
from store.postgres.store import PgStore
from tests.store.lifecycle_helpers import marked_conversation

Capture = pytest.CaptureFixture[str]
KEY = "sk-operator-on-postgres"
MARKER = "Petrel5Cairn8Tor"


def _run(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def config(pg_url: str, tmp_path: Path) -> tuple[str, str]:
    """A config naming the PostgreSQL store (no SQLite file anywhere) and a stored conversation."""
    store = PgStore.open(StoreSettings(url=pg_url))
    try:
        cid = marked_conversation(store.for_tenant(store.tenant_id_for_key(KEY)), MARKER, external_id="op-1")
    finally:
        store.close()
    path = tmp_path / "pg.yaml"
    path.write_text(f"store:\n  url: {pg_url}\n  path: {tmp_path / 'absent.db'}\n", encoding="utf-8")
    return str(path), cid


def test_search_expand_and_inspect_read_the_postgresql_store(config: tuple[str, str],
                                                           capsys: Capture) -> None:
    path, cid = config
    code, out, err = _run(capsys, "search", MARKER, "--scope", "message", "--json", "--config", path,
                          "--api-key", KEY)
    assert code == 0, err
    hits = json.loads(out)["data"]
    assert [h["role"] for h in hits] == ["user", "assistant"]
    code, out, err = _run(capsys, "expand", hits[0]["id"], "--json", "--config", path, "--api-key", KEY)
    assert code == 0, err
    assert MARKER in json.loads(out)["data"][0]["text"]
    code, out, err = _run(capsys, "inspect", cid, "--json", "--config", path, "--api-key", KEY)
    assert code == 0, err
    assert json.loads(out)["conversation"]["id"] == cid


def test_export_then_delete_on_the_postgresql_store(config: tuple[str, str], capsys: Capture) -> None:
    path, cid = config
    code, out, err = _run(capsys, "export", "--conversation", cid, "--config", path)
    assert code == 0, err
    assert MARKER in out and all(json.loads(line) for line in out.splitlines())
    code, out, err = _run(capsys, "delete", "--conversation", cid, "--config", path)
    assert code == 0 and f"deleted conversation {cid}" in out, err
    code, out, _ = _run(capsys, "search", MARKER, "--all-conversations", "--json", "--config", path,
                        "--api-key", KEY)
    assert code == 0 and json.loads(out)["data"] == []


def test_db_names_a_sqlite_file_instead_of_the_configured_url(config: tuple[str, str], tmp_path: Path,
                                                              capsys: Capture) -> None:
    path, _ = config
    code, _, err = _run(capsys, "search", MARKER, "--config", path, "--db", str(tmp_path / "none.db"),
                        "--api-key", KEY)
    assert code == 1 and "no store at" in err
