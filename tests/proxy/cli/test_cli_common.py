"""The tenant resolution `inspect`, `search` and `expand` share (proxy/cli/common.py)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.errors import ConfigError
from config.settings import StoreSettings
from proxy.cli.common import API_KEY_ENV, tenant_of
from proxy.cli.main import main
from store.sqlite.store import Store

MISSING = f"pass --api-key KEY or --tenant ID (or set {API_KEY_ENV})"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(StoreSettings(path=str(tmp_path / "s.db"), tenant_secret="k" * 32))
    yield s
    s.close()


def _args(tenant: str | None = None, api_key: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(tenant=tenant, api_key=api_key)


def test_tenant_flag_key_flag_then_env(store: Store) -> None:
    assert tenant_of(store, _args(tenant="anonymous", api_key="sk-a"), {}) == "anonymous"
    assert tenant_of(store, _args(api_key="sk-a"), {API_KEY_ENV: "sk-b"}) == store.tenant_id_for_key("sk-a")
    assert tenant_of(store, _args(), {API_KEY_ENV: "sk-b"}) == store.tenant_id_for_key("sk-b")
    assert store.tenant_id_for_key("sk-a") != store.tenant_id_for_key("sk-b")


def test_missing_tenant_message_names_no_command(store: Store) -> None:
    with pytest.raises(ConfigError) as err:
        tenant_of(store, _args(), {})
    assert err.value.message == MISSING


@pytest.mark.parametrize("command", [["inspect"], ["search", "kayak"], ["expand", "1"]])
def test_each_cli_prefixes_its_own_name_once(store: Store, tmp_path: Path, command: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*command, "--db", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"ctxproxy {command[0]}: {MISSING}")


def test_store_args_are_shared_and_exclusive() -> None:
    from proxy.cli.common import add_store_args

    parser = argparse.ArgumentParser()
    add_store_args(parser)
    args = parser.parse_args(["--db", "x.db", "--tenant", "t1"])
    assert (args.db, args.tenant, args.api_key, args.config) == ("x.db", "t1", None, None)
    with pytest.raises(SystemExit):
        parser.parse_args(["--tenant", "t1", "--api-key", "sk-a"])


def test_console_for_a_pipe_is_plain_and_fixed_width() -> None:
    import io

    from proxy.cli.common import PIPE_WIDTH, console_for

    out = io.StringIO()
    console = console_for(out)
    console.print("[bold]hi[/bold]")
    assert console.width == PIPE_WIDTH and out.getvalue() == "hi\n"
