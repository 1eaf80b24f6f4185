"""`ctxproxy delete` and `ctxproxy export`: operators erase or export a conversation or a tenant.

Both read the store file directly (the server may be running: SQLite's WAL lets both work).
`export` writes JSONL, one record a line, each with a `type`: `conversation`, then its `message`s,
`summary`s (with their source ids) and `anchor`s (superseded ones included), conversation by
conversation, oldest first. `delete` removes the same records plus index entries, views, events,
the forwarded log and tool rounds, and scrubs the files (store/lifecycle.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from config.errors import ConfigError, CtxProxyError, NotFoundError
from proxy.cli.common import API_KEY_ENV, store_settings
from store.interface import StoreBackend, TenantAccess

DELETE_HELP = "delete a conversation, or a whole tenant, with everything stored about it"
EXPORT_HELP = "export a conversation or a whole tenant as JSONL (messages, summaries, anchors)"
ALL = 2**62  # list_conversations limit meaning "every one"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `delete` and `export` on the main CLI (each sets `func`); returns `delete`."""
    delete: argparse.ArgumentParser = subparsers.add_parser("delete", help=DELETE_HELP,
                                                            description=DELETE_HELP)
    _target_args(delete)
    delete.set_defaults(func=run_delete_command)
    export: argparse.ArgumentParser = subparsers.add_parser("export", help=EXPORT_HELP,
                                                            description=EXPORT_HELP)
    _target_args(export)
    export.add_argument("--out", metavar="FILE", help="write here instead of standard output")
    export.set_defaults(func=run_export_command)
    return delete


def _target_args(parser: argparse.ArgumentParser) -> None:
    """--conversation ID and/or the tenant (--tenant ID or --api-key KEY), plus the store options."""
    parser.add_argument("--config", metavar="FILE", help="YAML config (store.path is read from it)")
    parser.add_argument("--db", metavar="PATH", help="SQLite store file (overrides the config)")
    parser.add_argument("--conversation", metavar="ID", help="one conversation (any tenant's)")
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--tenant", metavar="ID", help="the tenant (alone: every conversation of it)")
    who.add_argument("--api-key", metavar="KEY", help=f"the tenant of this client key (or ${API_KEY_ENV})")


def _tenant(store: StoreBackend, args: argparse.Namespace, env: Mapping[str, str]) -> TenantAccess:
    """The tenant named, else (with --conversation only) the one owning that conversation."""
    key = args.api_key or (None if args.tenant or args.conversation else env.get(API_KEY_ENV))
    if args.tenant or key:
        return store.for_tenant(args.tenant or store.tenant_id_for_key(key))
    if not args.conversation:
        raise ConfigError(f"pass --conversation ID, --tenant ID or --api-key KEY (or set {API_KEY_ENV})")
    for tenant_id in store.tenant_ids():
        tenant = store.for_tenant(tenant_id)
        try:
            tenant.conversation(args.conversation)
        except NotFoundError:
            continue
        return tenant
    raise NotFoundError(f"conversation {args.conversation!r} not found")


def _with_tenant(name: str, args: argparse.Namespace, env: Mapping[str, str] | None, err: TextIO | None,
                 work: Any) -> int:
    """Open the store, resolve the tenant, run `work(tenant)`; 1 with a message on any ctxproxy error."""
    from store.factory import open_store  # deferred: `--help` works without touching the store

    env = os.environ if env is None else env
    try:
        store = open_store(store_settings(args, env))
        try:
            work(_tenant(store, args, env))
        finally:
            store.close()
    except CtxProxyError as exc:
        (err or sys.stderr).write(f"ctxproxy {name}: {exc.message}\n")
        return 1
    return 0


def run_delete_command(args: argparse.Namespace, env: Mapping[str, str] | None = None,
                       out: TextIO | None = None, err: TextIO | None = None) -> int:
    def work(tenant: TenantAccess) -> None:
        if args.conversation:
            tenant.delete_conversation(args.conversation)
            print(f"deleted conversation {args.conversation}", file=out or sys.stdout)
        else:
            count = tenant.delete_tenant()
            print(f"deleted tenant {tenant.tenant_id}: {count} conversations", file=out or sys.stdout)

    return _with_tenant("delete", args, env, err, work)


def run_export_command(args: argparse.Namespace, env: Mapping[str, str] | None = None,
                       out: TextIO | None = None, err: TextIO | None = None) -> int:
    def work(tenant: TenantAccess) -> None:
        ids = ([args.conversation] if args.conversation else
               [c.id for c in reversed(tenant.list_conversations(limit=ALL))])
        lines = (json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                 for cid in ids for r in export_records(tenant, cid))
        if args.out:
            with open(args.out, "w", encoding="utf-8") as file:
                file.writelines(lines)
        else:
            (out or sys.stdout).writelines(lines)

    return _with_tenant("export", args, env, err, work)


def export_records(tenant: TenantAccess, conversation_id: str) -> Iterator[dict[str, Any]]:
    """One conversation's records, JSON-ready: the conversation, messages, summaries, anchors."""
    yield _typed("conversation", tenant.conversation(conversation_id))
    for message in tenant.messages(conversation_id):
        yield _typed("message", message)
    for summary in tenant.summaries(conversation_id):
        yield _typed("summary", summary)
    for anchor in tenant.anchors(conversation_id, include_superseded=True):
        yield _typed("anchor", anchor)


def _typed(kind: str, record: Any) -> dict[str, Any]:
    return {"type": kind, **dataclasses.asdict(record)}
