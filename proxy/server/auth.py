"""Client keys: who the caller is (`bearer_key`, `tenant_of`) and the one rule on who may call at all.

`client_key_middleware` runs before every handler, whatever route matched: with
`server.require_client_key: true` a request without a key is refused (401, in the route's error
shape) unless its route is open. Open routes are the probes and metrics (`/healthz`, `/readyz`,
`/metrics`) and the operator inspector under `/ui`, which has its own admin key. The recall and
data-deletion routes need a key whatever the setting says: keyless callers share the one `anonymous`
tenant, so recall or deletion there would reach the others' data.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from config.errors import AuthenticationError
from proxy import appkeys
from proxy.upstream.openai import MISSING_API_KEY
from store.interface import TenantAccess

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
OPEN_PREFIXES = ("/ui/",)
KEYLESS_RECALL = "recall needs an API key: keyless callers share one anonymous tenant"
KEYLESS_DELETE = "deleting needs an API key: keyless callers share one anonymous tenant"
ALWAYS_KEYED = {"/v1/context/search": KEYLESS_RECALL, "/v1/context/expand": KEYLESS_RECALL,
                "/v1/context/conversations/{conversation_id}": KEYLESS_DELETE,
                "/v1/context/tenant": KEYLESS_DELETE}


def bearer_key(request: web.Request) -> str | None:
    """The client's API key from `Authorization: Bearer ...`, else `x-api-key` (the anthropic
    SDK's header); None when absent."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key", "").strip() or None


def tenant_of(request: web.Request) -> str:
    """The caller's tenant: an HMAC of its key (the store's `tenant_id_for_key`)."""
    return request.app[appkeys.STORE].tenant_id_for_key(bearer_key(request))


def caller_tenant(request: web.Request, keyless: str = KEYLESS_RECALL) -> TenantAccess:
    """The bearer key's own TenantAccess (401 saying `keyless` without a key); records the tenant
    on the request."""
    store = request.app[appkeys.STORE]
    key = bearer_key(request)
    if key is None:
        raise AuthenticationError(keyless, code="missing_api_key")
    tenant = store.tenant_id_for_key(key)
    record = request.get(appkeys.RECORD)
    if record is not None:
        record.tenant_id = tenant
    tenant_store: TenantAccess = store.for_tenant(tenant)
    return tenant_store


def is_open(path: str) -> bool:
    """True for the routes anyone may call: probes, metrics and the inspector (admin-keyed)."""
    return path in OPEN_PATHS or path == "/ui" or path.startswith(OPEN_PREFIXES)


def keyless_refusal(request: web.Request) -> str | None:
    """Why a keyless request to this route is refused; None when it may go on without a key."""
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else None
    if route in ALWAYS_KEYED:
        return ALWAYS_KEYED[route]
    if is_open(request.path) or not request.app[appkeys.SETTINGS].server.require_client_key:
        return None
    return MISSING_API_KEY


@web.middleware
async def client_key_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse (401) a keyless request its route does not serve keyless, before any handler runs."""
    if bearer_key(request) is None:
        refusal = keyless_refusal(request)
        if refusal is not None:
            raise AuthenticationError(refusal, code="missing_api_key")
    return await handler(request)
