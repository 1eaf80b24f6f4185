"""Operational routes: /v1/models, /healthz, /readyz, /metrics."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from config.errors import StoreError
from config.settings import Settings
from proxy import appkeys
from proxy.server.warmup import WARMUP

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def models_payload(settings: Settings) -> dict[str, Any]:
    """OpenAI's model list: concrete names; wildcard entries are described in a note."""
    data = [{"id": m.model_name, "object": "model", "created": 0,
             "owned_by": m.litellm_params.provider or "openai"}
            for m in settings.model_list if not m.model_name.endswith("*")]
    payload: dict[str, Any] = {"object": "list", "data": data}
    wildcards = [m.model_name for m in settings.model_list if m.model_name.endswith("*")]
    if wildcards:
        payload["ctxproxy_note"] = ("wildcard entries also accept any model name matching: "
                                    + ", ".join(wildcards))
    return payload


async def list_models(request: web.Request) -> web.Response:
    return web.json_response(models_payload(request.app[appkeys.SETTINGS]))


async def healthz(_request: web.Request) -> web.Response:
    """Liveness: the process answers."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Readiness: the start-up warm-up is done and a real read through the store's API succeeds."""
    request.app[WARMUP].check_ready()
    store = request.app[appkeys.STORE]
    try:
        store.for_tenant("anonymous").list_conversations(limit=1)  # sqlite: loop thread only
    except Exception as exc:
        raise StoreError(f"store is not reachable: {type(exc).__name__}") from exc
    return web.json_response({"status": "ready"})


async def metrics(request: web.Request) -> web.Response:
    body = request.app[appkeys.METRICS].render()
    return web.Response(body=body, headers={"Content-Type": PROMETHEUS_CONTENT_TYPE})
