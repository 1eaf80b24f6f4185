"""POST /v1/context/search and POST /v1/context/expand: recall over the caller's own history.

The caller is identified like a chat request: its bearer key hashed to a tenant. A keyless caller
is refused (401) whatever server.require_client_key says: keyless callers share the one `anonymous`
tenant, so recall there would show each caller the others' histories. Everything goes through the
caller's TenantAccess, so another tenant's ids are answered exactly like unknown ones (404).
Parameters: see proxy/recall/api.py.
"""

from __future__ import annotations

from aiohttp import web

from proxy import appkeys
from proxy.recall.api import as_list, expand_ids, hit_json, item_json, run_search, search_query
from proxy.server.auth import caller_tenant
from proxy.server.body import read_json_object


async def context_search(request: web.Request) -> web.Response:
    """Hits ranked by bm25 (more negative = better), in OpenAI's list envelope."""
    tenant = caller_tenant(request)  # 401 before the body is even read
    query = search_query(await read_json_object(request))
    hits = await request.app[appkeys.HOST].run(lambda: run_search(tenant, query))
    return web.json_response(as_list([hit_json(h) for h in hits]))


async def context_expand(request: web.Request) -> web.Response:
    """Full messages and summaries (with their sources), in the order asked."""
    tenant = caller_tenant(request)
    ids = expand_ids(await read_json_object(request))
    items = await request.app[appkeys.HOST].run(lambda: tenant.expand(ids))
    return web.json_response(as_list([item_json(i) for i in items]))


def setup_context_routes(app: web.Application) -> None:
    """Register the recall routes (called by proxy.app.create_app)."""
    app.router.add_post("/v1/context/search", context_search)
    app.router.add_post("/v1/context/expand", context_expand)
