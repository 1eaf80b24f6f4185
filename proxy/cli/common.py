"""What the store-reading CLIs (`inspect`, `search`, `expand`) share: their store and tenant options,
store path and tenant resolution, and the rich console they print to.

Each command prefixes its own name to error messages, so the messages here name no command.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console

from config.errors import ConfigError
from config.loader import load_settings
from config.settings import StoreSettings

API_KEY_ENV = "CTXPROXY_API_KEY"
PIPE_WIDTH = 160  # rich text width when not writing to a terminal


def add_store_args(parser: argparse.ArgumentParser) -> None:
    """--config, --db, and --api-key / --tenant (mutually exclusive)."""
    parser.add_argument("--config", metavar="FILE",
                        help="YAML config (its store.path or store.url is read; CTXPROXY_STORE__* apply)")
    parser.add_argument("--db", metavar="PATH", help="SQLite store file (overrides the config)")
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--api-key", metavar="KEY", help=f"client API key (default: ${API_KEY_ENV})")
    who.add_argument("--tenant", metavar="ID", help="tenant id (as shown by the inspector, or 'anonymous')")


def console_for(out: TextIO) -> Console:
    """A rich console on `out`: the terminal's width and colours, else PIPE_WIDTH plain columns."""
    tty = out.isatty()
    return Console(file=out, width=None if tty else PIPE_WIDTH, force_terminal=tty, highlight=False)


def store_settings(args: argparse.Namespace, env: Mapping[str, str]) -> StoreSettings:
    """The config's store section (`store.url`: the shared PostgreSQL store), with --db naming a
    SQLite file instead; a SQLite file must already exist."""
    settings = load_settings(args.config, env).store
    if args.db:
        settings = dataclasses.replace(settings, path=args.db, url=None)
    if settings.url is None and not Path(settings.path).is_file():
        raise ConfigError(f"store.path: no store at {settings.path} (pass --db or --config)")
    return settings


def tenant_of(store: Any, args: argparse.Namespace, env: Mapping[str, str]) -> str:
    """--tenant as given, else the tenant hash of --api-key or $CTXPROXY_API_KEY (hashed in memory only)."""
    if args.tenant:
        return str(args.tenant)
    key = args.api_key or env.get(API_KEY_ENV)
    if not key:
        raise ConfigError(f"pass --api-key KEY or --tenant ID (or set {API_KEY_ENV})")
    return str(store.tenant_id_for_key(key))
