"""A fake provider behind a gateway base path (`/openai/v1`) that keeps objects and records every path.

It answers any path on its host (so a request that escaped the base path is seen, not lost in a
404 of the test server), records each request's raw path, and keeps what an OpenAI account keeps:
files (multipart uploads), responses (chained by `previous_response_id`), batches and vector stores,
each readable, listable and deletable by id with OpenAI's answers, its 404s included.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.fakes import responses_api

JSON = dict[str, Any]
BASE = "/openai/v1"
CREATED = {"files": ("file-", "file"), "responses": ("resp_", "response"),
           "batches": ("batch_", "batch"), "vector_stores": ("vs_", "vector_store")}


async def _streamed(request: web.Request, created: JSON) -> web.StreamResponse:
    """A created response as the Responses API streams it: response.created, then response.completed."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    started = {**created, "status": "in_progress", "output": []}
    for number, (kind, body) in enumerate([("response.created", started), ("response.completed", created)]):
        data = json.dumps({"type": kind, "sequence_number": number, "response": body})
        await response.write(f"event: {kind}\ndata: {data}\n\n".encode())
    await response.write_eof()
    return response


def not_found(message: str, param: str | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error",
                                        "param": param, "code": None}}, status=404)


class ProviderObjects:
    """Start with `await fake.start()`; `url` is the base (`http://127.0.0.1:PORT/openai/v1`)."""

    def __init__(self) -> None:
        self.paths: list[str] = []  # raw path and query of every request, as received
        self.objects: dict[str, JSON] = {}
        self._numbers = itertools.count(1)
        self.app = web.Application()
        self.app.router.add_route("*", "/{anything:.*}", self._serve)
        self.server: TestServer | None = None

    async def start(self) -> ProviderObjects:
        self.server = TestServer(self.app)
        await self.server.start_server()
        return self

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    @property
    def url(self) -> str:
        assert self.server is not None, "start() first"
        return str(self.server.make_url(BASE))

    def outside_base(self) -> list[str]:
        """Recorded paths that left the base path."""
        return [p for p in self.paths if not p.startswith(BASE + "/")]

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.raw_path)
        if not request.path.startswith(BASE + "/"):
            return web.json_response({"escaped": request.path}, status=200)
        parts = request.path[len(BASE) + 1:].split("/")
        if parts[0] in CREATED and len(parts) == 1:
            return await self._collection(request, parts[0])
        if parts[0] in CREATED and len(parts) == 2:
            return self._one(request, parts[0], parts[1])
        return web.json_response({"echo": "/".join(parts), "method": request.method})

    async def _collection(self, request: web.Request, kind: str) -> web.StreamResponse:
        if request.method == "GET":
            data = [o for o in self.objects.values() if o["object"] == CREATED[kind][1]]
            return web.json_response({"object": "list", "data": data, "has_more": False,
                                      "first_id": data[0]["id"] if data else None,
                                      "last_id": data[-1]["id"] if data else None})
        body = await self._body(request)
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.objects:
            return web.json_response({"error": {
                "message": f"Previous response with id '{previous}' not found.",
                "type": "invalid_request_error", "param": "previous_response_id",
                "code": "previous_response_not_found"}}, status=400)
        created = self._create(kind, body)
        if body.get("stream") is True:
            return await _streamed(request, created)
        return web.json_response(created)

    def _create(self, kind: str, body: JSON) -> JSON:
        prefix, object_type = CREATED[kind]
        object_id = f"{prefix}{next(self._numbers):04d}"
        if kind == "responses":
            items = responses_api.output_items("ok", [], False)
            created = {**responses_api.response_json(body, items), "id": object_id}
        else:
            created = {"id": object_id, "object": object_type, "created_at": 0}
        self.objects[object_id] = created
        return created

    def _one(self, request: web.Request, kind: str, object_id: str) -> web.Response:
        found = self.objects.get(object_id)
        if found is None or found["object"] != CREATED[kind][1]:
            return not_found(f"No {CREATED[kind][1]} found with id '{object_id}'.", "id")
        if request.method == "DELETE":
            del self.objects[object_id]
            return web.json_response({"id": object_id, "object": found["object"], "deleted": True})
        return web.json_response(found)

    @staticmethod
    async def _body(request: web.Request) -> JSON:
        raw = await request.read()
        if request.content_type != "application/json":
            return {}
        data = json.loads(raw) if raw else {}
        return data if isinstance(data, dict) else {}
