"""Operational routes: /v1/models (and /v1/models/{id}), /healthz, /readyz, /metrics."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web

from config.errors import ModelNotFoundError, StoreError
from config.settings import OPENAI_API_BASE, ModelEntry, Settings
from proxy import appkeys
from proxy.server.auth import bearer_key
from proxy.server.forward import client_tail, forward_routed, forward_to
from proxy.server.warmup import WARMUP

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UPSTREAM_MODELS_TIMEOUT_S = 10.0  # a wildcard's upstream list is a courtesy: never hang /v1/models


def model_object(model_id: str, owner: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": owner}


def models_payload(settings: Settings, upstream_ids: list[str] | None = None) -> dict[str, Any]:
    """OpenAI's model list: concrete names, then what wildcard upstreams list; wildcards in a note."""
    data = [model_object(m.model_name, m.litellm_params.provider or "openai")
            for m in settings.model_list if not m.model_name.endswith("*")]
    known = {d["id"] for d in data}
    data += [model_object(i, "upstream") for i in upstream_ids or [] if i not in known]
    payload: dict[str, Any] = {"object": "list", "data": data}
    wildcards = [m.model_name for m in settings.model_list if m.model_name.endswith("*")]
    if wildcards:
        payload["ctxproxy_note"] = ("wildcard entries also accept any model name matching: "
                                    + ", ".join(wildcards))
    return payload


async def list_models(request: web.Request) -> web.Response:
    settings = request.app[appkeys.SETTINGS]
    ids: list[str] = []
    for entry in settings.model_list:
        if entry.model_name.endswith("*") and entry.litellm_params.uses_openai_wire:
            listed = await _upstream_ids(request, entry)
            ids += [i for i in listed if entry.matches(i) and i not in ids]
    return web.json_response(models_payload(settings, ids))


async def _upstream_ids(request: web.Request, entry: ModelEntry) -> list[str]:
    """Model ids a wildcard entry's upstream lists; [] when it cannot be asked (logged)."""
    params = entry.litellm_params
    key = params.api_key or bearer_key(request)
    url = f"{(params.api_base or OPENAI_API_BASE).rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        async with request.app[appkeys.SESSION].get(
                url, headers=headers, timeout=aiohttp.ClientTimeout(total=UPSTREAM_MODELS_TIMEOUT_S)) as resp:
            data = json.loads(await resp.read()) if resp.status == 200 else {}
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        request.app[appkeys.LOGGER].warning("upstream_models_failed", error=type(exc).__name__)
        return []
    items = data.get("data") if isinstance(data, dict) else None
    return [str(m["id"]) for m in items or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]


async def retrieve_model(request: web.Request) -> web.StreamResponse:
    """A configured name answers locally; a wildcard's model is asked of its upstream."""
    model_id = request.match_info["model_id"]
    entry = request.app[appkeys.SETTINGS].find_model(model_id)
    if entry is None:
        raise ModelNotFoundError(f"The model `{model_id}` does not exist or is not served by this proxy",
                                 param="model")
    if not entry.model_name.endswith("*") or not entry.litellm_params.uses_openai_wire:
        return web.json_response(model_object(model_id, entry.litellm_params.provider or "openai"))
    params = entry.resolved_params(model_id)
    return await forward_to(request, params, "models/" + quote(params.upstream_model, safe="/"), None,
                            body_rewritten=False)


async def delete_model(request: web.Request) -> web.StreamResponse:
    """DELETE /v1/models/{id} (a fine-tuned model): forwarded to the entry serving that name."""
    model_id = request.match_info["model_id"]
    return await forward_routed(request, client_tail(request), None, model_id)


async def healthz(_request: web.Request) -> web.Response:
    """Liveness: the process answers."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Readiness: the start-up warm-up is done and a real read through the store's API succeeds;
    whether the store takes writes is shown (a full disk still serves reads and pass-through)."""
    request.app[WARMUP].check_ready()
    store = request.app[appkeys.STORE]
    try:
        await request.app[appkeys.HOST].run(lambda: store.for_tenant("anonymous").list_conversations(limit=1))
    except Exception as exc:
        raise StoreError(f"store is not reachable: {type(exc).__name__}") from exc
    return web.json_response({"status": "ready", "store": request.app[appkeys.STORE_HEALTH].report()})


async def metrics(request: web.Request) -> web.Response:
    body = request.app[appkeys.METRICS].render()
    return web.Response(body=body, headers={"Content-Type": PROMETHEUS_CONTENT_TYPE})
