"""POST /v1/context/search and POST /v1/context/expand: recall over the caller's own history.

The caller is identified like a chat request: its bearer key hashed to a tenant (no key: the
`anonymous` tenant). Everything goes through that tenant's TenantStore, so another tenant's ids
are answered exactly like unknown ones (404). Parameters: see proxy/recall_api.py.
"""

from __future__ import annotations

from aiohttp import web

from proxy import appkeys
from proxy.handlers_chat import bearer_key, read_json_object
from proxy.recall_api import as_list, expand_ids, hit_json, item_json, run_search, search_query
from store.store import TenantStore


def _tenant_store(request: web.Request) -> TenantStore:
    store = request.app[appkeys.STORE]
    tenant = store.tenant_id_for_key(bearer_key(request))
    record = request.get(appkeys.RECORD)
    if record is not None:
        record.tenant_id = tenant
    tenant_store: TenantStore = store.for_tenant(tenant)
    return tenant_store


async def context_search(request: web.Request) -> web.Response:
    """Hits ranked by bm25 (more negative = better), in OpenAI's list envelope."""
    query = search_query(await read_json_object(request))
    hits = run_search(_tenant_store(request), query)
    return web.json_response(as_list([hit_json(h) for h in hits]))


async def context_expand(request: web.Request) -> web.Response:
    """Full messages and summaries (with their sources), in the order asked."""
    ids = expand_ids(await read_json_object(request))
    items = _tenant_store(request).expand(ids)
    return web.json_response(as_list([item_json(i) for i in items]))


def setup_context_routes(app: web.Application) -> None:
    """Register the recall routes (called by proxy.app.create_app)."""
    app.router.add_post("/v1/context/search", context_search)
    app.router.add_post("/v1/context/expand", context_expand)
