"""`ctxproxy inspect`: a tenant's conversations, or one conversation in detail, read from the store.

`ctxproxy inspect [--config FILE] [--db PATH] (--api-key KEY | --tenant ID) [CONVERSATION_ID] [--json]`.
The tenant comes from --tenant, else the keyed hash of --api-key / $CTXPROXY_API_KEY; the key itself is
only hashed in memory. Reads go through `TenantStore`, so another tenant's conversation is not found.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from config.errors import CtxProxyError
from proxy.cli.common import add_store_args, console_for, store_settings, tenant_of
from proxy.inspector import text, view

HELP = "show a tenant's conversations, or one conversation's view, summaries, anchors and budget"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `inspect` on the main CLI's subparsers (sets `func`)."""
    parser: argparse.ArgumentParser = subparsers.add_parser("inspect", help=HELP, description=HELP)
    configure_parser(parser)
    return parser


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_store_args(parser)
    parser.add_argument("conversation_id", nargs="?", metavar="CONVERSATION_ID")
    parser.add_argument("--json", action="store_true", help="machine-readable JSON (stable keys)")
    parser.set_defaults(func=run)


def collect(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, Any]:
    """Open the store, read what was asked, close it: ("list", rows) or ("conversation", dict)."""
    from store.factory import open_store  # deferred: `--help` works without touching the store

    store = open_store(store_settings(args, env))
    try:
        tenant = store.for_tenant(tenant_of(store, args, env))
        if args.conversation_id:
            return "conversation", view.inspect_conversation(tenant, args.conversation_id)
        return "list", view.conversation_list(tenant)
    finally:
        store.close()


def emit(kind: str, data: Any, as_json: bool, out: TextIO) -> None:
    """JSON (sorted keys) or rich text; text is 160 columns wide unless writing to a terminal."""
    if as_json:
        payload = {"conversations": data} if kind == "list" else data
        out.write(json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return
    console = console_for(out)
    if kind == "list":
        text.render_list(data, console)
    else:
        text.render_conversation(data, console)


def run(args: argparse.Namespace, env: Mapping[str, str] | None = None, out: TextIO | None = None,
        err: TextIO | None = None) -> int:
    """Execute `inspect`; 0 on success, 1 when the store or conversation is unusable or unknown."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        kind, data = collect(args, os.environ if env is None else env)
    except CtxProxyError as exc:
        err.write(f"ctxproxy inspect: {exc.message}\n")
        return 1
    emit(kind, data, args.json, out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry (`python -m proxy.cli.inspect`), same options as `ctxproxy inspect`."""
    parser = argparse.ArgumentParser(prog="ctxproxy inspect", description=HELP)
    configure_parser(parser)
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
