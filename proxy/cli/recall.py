"""`ctxproxy search` and `ctxproxy expand`: recall over a tenant's history, read from the store.

Same parameters and JSON as POST /v1/context/search and /v1/context/expand (proxy/recall/api.py),
same implementation underneath (TenantStore.search / expand), so an operator sees what the API and
the model see. The tenant comes from --tenant, else the keyed hash of --api-key / $CTXPROXY_API_KEY
(the key is only hashed in memory). Without --conversation or --all-conversations, search looks in
the tenant's most recently active conversation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from config.errors import CtxProxyError
from proxy.cli.common import add_store_args, console_for, store_settings, tenant_of
from proxy.inspector.text import when
from proxy.recall.api import as_list, hit_json, item_json, run_search, search_query
from store.models import ExpandedItem, SearchHit

SEARCH_HELP = "full-text search over a tenant's stored messages and summaries"
EXPAND_HELP = "print stored messages or summaries in full, by id"
_MATCH = re.compile(r"\[([^\[\]]*)\]")  # the store's snippet marks matches as [term]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `search` and `expand` on the main CLI (each sets `func`); returns `search`."""
    search: argparse.ArgumentParser = subparsers.add_parser("search", help=SEARCH_HELP,
                                                            description=SEARCH_HELP)
    search.add_argument("pattern", metavar="PATTERN",
                        help='words, "phrases", AND/OR/NOT, %%fuzzy%% and prefix%% terms')
    search.add_argument("--scope", choices=("summary", "message", "both"))
    search.add_argument("--role", choices=("user", "assistant"))
    search.add_argument("--last", metavar="WINDOW", help="relative window: 6h, 7d, 2w, 1m")
    search.add_argument("--since", metavar="ISO", help="ISO 8601 lower bound (inclusive)")
    search.add_argument("--before", metavar="ISO", help="ISO 8601 upper bound (exclusive)")
    where = search.add_mutually_exclusive_group()
    where.add_argument("--conversation", metavar="ID", dest="conversation_id")
    where.add_argument("--all-conversations", action="store_true")
    search.add_argument("--limit", type=int)
    _common(search, run_search_command)
    expand: argparse.ArgumentParser = subparsers.add_parser("expand", help=EXPAND_HELP,
                                                            description=EXPAND_HELP)
    expand.add_argument("ids", nargs="+", metavar="ID", help="message ids (decimal) or summary ids (sum_...)")
    _common(expand, run_expand_command)
    return search


def _common(parser: argparse.ArgumentParser, func: Any) -> None:
    parser.add_argument("--json", action="store_true", help="the API's JSON ({object: list, data})")
    add_store_args(parser)
    parser.set_defaults(func=func)


def _query(args: argparse.Namespace) -> dict[str, Any]:
    """The request body the HTTP API would get for these options."""
    body = {k: getattr(args, k) for k in ("pattern", "scope", "role", "last", "since", "before",
                                           "conversation_id", "limit") if getattr(args, k) is not None}
    return {**body, "all_conversations": args.all_conversations}


def _run(name: str, args: argparse.Namespace, env: Mapping[str, str] | None, out: TextIO | None,
         err: TextIO | None) -> int:
    """Open the store, run `name` for the tenant, print; 1 with a message on any ctxproxy error."""
    from store.factory import open_store  # deferred: `--help` works without touching the store

    env = os.environ if env is None else env
    try:
        store = open_store(store_settings(args, env))
        try:
            tenant = store.for_tenant(tenant_of(store, args, env))
            if name == "search":
                results: list[Any] = run_search(tenant, search_query(_query(args)))
            else:
                results = tenant.expand(args.ids)
        finally:
            store.close()
    except CtxProxyError as exc:
        where = f" ({exc.param})" if exc.param else ""
        (err or sys.stderr).write(f"ctxproxy {name}: {exc.message}{where}\n")
        return 1
    _emit(name, results, args.json, out or sys.stdout)
    return 0


def run_search_command(args: argparse.Namespace, env: Mapping[str, str] | None = None,
                       out: TextIO | None = None, err: TextIO | None = None) -> int:
    return _run("search", args, env, out, err)


def run_expand_command(args: argparse.Namespace, env: Mapping[str, str] | None = None,
                       out: TextIO | None = None, err: TextIO | None = None) -> int:
    return _run("expand", args, env, out, err)


def _emit(name: str, results: list[Any], as_json: bool, out: TextIO) -> None:
    if as_json:
        data = [hit_json(r) if name == "search" else item_json(r) for r in results]
        out.write(json.dumps(as_list(data), indent=2, ensure_ascii=False) + "\n")
        return
    console = console_for(out)
    if name == "search":
        render_hits(results, console)
    else:
        for item in results:
            render_item(item, console)


def _snippet(snippet: str) -> Text:
    """The snippet with its [matches] emphasised (brackets kept, so plain output shows them too)."""
    text = Text()
    pos = 0
    for found in _MATCH.finditer(snippet):
        text.append(snippet[pos:found.start()])
        text.append(found.group(0), style="bold yellow")
        pos = found.end()
    text.append(snippet[pos:])
    return text


def render_hits(hits: list[SearchHit], console: Console) -> None:
    """One row per hit, best rank first: rank, kind, id, conversation, role or depth, time, snippet."""
    if not hits:
        console.print("no matches")
        return
    table = Table(show_lines=False, pad_edge=False)
    for column in ("rank", "kind", "id", "conversation", "role/depth", "created", "snippet"):
        table.add_column(column, overflow="fold")
    for h in hits:
        who = h.role if h.kind == "message" else f"depth {h.depth}"
        table.add_row(f"{h.rank:.2f}", h.kind, h.id, h.conversation_id, who or "-", when(h.created_at),
                      _snippet(h.snippet))
    console.print(table)
    console.print(f"{len(hits)} hit(s); expand with: ctxproxy expand {' '.join(h.id for h in hits[:5])}")


def render_item(item: ExpandedItem, console: Console) -> None:
    """A header line, then the full text, tool calls and media, sources and notes."""
    head = f"{item.kind} {item.id} · conversation {item.conversation_id}"
    head += f" · {item.role}" if item.role else f" · depth {item.depth}"
    console.print(Text(head, style="bold"))
    if item.text:
        console.print(Text(item.text))
    for part in item.parts:
        if part.get("type") == "media":
            console.print(Text(f"[media] {json.dumps(part, ensure_ascii=False)}", style="cyan"))
    if item.sources:
        console.print(Text("sources: " + ", ".join(item.sources), style="dim"))
    if item.note:
        console.print(Text(f"note: {item.note}", style="dim"))
    console.print()
