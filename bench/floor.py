"""The floor: a bare aiohttp forwarder, the least a Python proxy can cost per request.

It forwards a chat request's bytes to the upstream and relays the answer (streamed as it arrives),
nothing else: no parsing, no store, no compaction. `make bench` runs it beside ctxproxy and LiteLLM's
proxy (bench/throughput.py) to tell how much of ctxproxy's cost any proxy would pay.

    python -m bench.floor --port P --upstream http://127.0.0.1:Q/v1
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web

UPSTREAM = web.AppKey("upstream", str)
SESSION = web.AppKey("session", aiohttp.ClientSession)


async def chat(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    headers = {"Content-Type": "application/json", "Authorization": request.headers.get("Authorization", "")}
    async with request.app[SESSION].post(request.app[UPSTREAM] + "/chat/completions", data=body,
                                         headers=headers) as upstream:
        response = web.StreamResponse(status=upstream.status,
                                      headers={"Content-Type": upstream.headers.get("Content-Type", "")})
        await response.prepare(request)
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
        return response


async def models(_request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": []})


def app(upstream: str) -> web.Application:
    application = web.Application(client_max_size=256 * 1024 * 1024)
    application[UPSTREAM] = upstream.rstrip("/")

    async def session(app_: web.Application) -> AsyncIterator[None]:
        app_[SESSION] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        yield
        await app_[SESSION].close()

    application.cleanup_ctx.append(session)
    application.router.add_post("/v1/chat/completions", chat)
    application.router.add_get("/v1/models", models)
    return application


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the upstream's base URL, ending in /v1")
    args = parser.parse_args(argv)
    web.run_app(app(args.upstream), host="127.0.0.1", port=args.port, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
