"""DELETE /v1/context/conversations/{id} and DELETE /v1/context/tenant: callers erase their own data.

The caller is its bearer key's tenant, as for recall (a keyless caller is refused: the shared
`anonymous` tenant is not one caller's to erase); another tenant's conversation id is a 404 like an
unknown one. Deleting scrubs the search indexes and the WAL (store/lifecycle.py), which rewrites the
indexes: it runs on the engine thread (proxy/engine_host.py), where the store lives, not on this loop.
"""

from __future__ import annotations

from aiohttp import web

from proxy import appkeys
from proxy.server.auth import KEYLESS_DELETE, caller_tenant


async def delete_conversation(request: web.Request) -> web.Response:
    """One of the caller's conversations, with its summaries, anchors, index entries and logs."""
    tenant = caller_tenant(request, KEYLESS_DELETE)
    conversation_id = request.match_info["conversation_id"]
    await request.app[appkeys.HOST].run(lambda: tenant.delete_conversation(conversation_id))
    return web.json_response({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


async def delete_tenant(request: web.Request) -> web.Response:
    """Every conversation of the caller's tenant; says how many there were."""
    tenant = caller_tenant(request, KEYLESS_DELETE)
    count = await request.app[appkeys.HOST].run(tenant.delete_tenant)
    return web.json_response({"object": "tenant.deleted", "deleted": True,
                              "conversations_deleted": count})


def setup_lifecycle_routes(app: web.Application) -> None:
    """Register the delete routes (called by proxy.app.create_app)."""
    app.router.add_delete("/v1/context/conversations/{conversation_id}", delete_conversation)
    app.router.add_delete("/v1/context/tenant", delete_tenant)
