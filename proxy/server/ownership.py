"""Provider objects relayed through an operator-keyed entry belong to the tenant that created them.

With the operator's key every tenant reaches one provider account, so the proxy keeps what the
provider cannot: which tenant created which file, response, batch, vector store, upload, job, ...
(the store's `provider_objects`, read through the caller's TenantAccess). A path naming an object
(`/v1/files/{id}`, `/v1/responses/{id}/...`) or a body referring to one (`previous_response_id`,
`file_id`, `input_file_id`, `vector_store_ids`, ...) must name the caller's own objects, else the
answer is the provider's 404 for an unknown id; lists (`GET /v1/files`) show only the caller's own.
With the client's own key the provider enforces all this itself, and nothing here runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from config.errors import ProviderObjectNotFoundError
from config.settings import LiteLLMParams
from proxy import appkeys
from proxy.server.auth import tenant_of
from proxy.upstream.forwarding import Body
from proxy.wire.openai import compact_json

COLLECTIONS: dict[tuple[str, ...], str] = {
    ("files",): "file", ("responses",): "response", ("batches",): "batch",
    ("vector_stores",): "vector store", ("uploads",): "upload", ("fine_tuning", "jobs"): "fine-tuning job",
    ("assistants",): "assistant", ("threads",): "thread", ("containers",): "container",
    ("conversations",): "conversation", ("chat", "completions"): "chat completion", ("evals",): "eval",
}
NOT_IDS = frozenset({"input_tokens", "compact", "runs"})  # /v1/responses/input_tokens, /v1/threads/runs
REFERENCES = {"previous_response_id": "response", "file_id": "file", "file_ids": "file",
              "input_file_id": "file", "training_file": "file", "validation_file": "file",
              "vector_store_id": "vector store", "vector_store_ids": "vector store",
              "assistant_id": "assistant", "thread_id": "thread", "container_id": "container"}
# The client's own keys and schemas: Codex names its session in `client_metadata.thread_id`.
UNCHECKED = frozenset({"metadata", "client_metadata", "parameters", "input_schema"})
FIRST_ID = re.compile(rb'"id"\s*:\s*"([^"\\]{1,256})"')
TAP_LIMIT = 65_536  # bytes of a stream searched for the created object's id

Wanted = tuple[str | None, str, str]  # (param, kind, object id)


@dataclass(frozen=True)
class Target:
    """The provider collection a path is under, and the object it names (None: the collection)."""

    kind: str
    object_id: str | None


def target_of(tail: str) -> Target | None:
    """The collection and object id a still-encoded tail names; None outside every collection."""
    segments = [unquote(s) for s in tail.split("/") if s]
    for prefix, kind in COLLECTIONS.items():
        if tuple(segments[:len(prefix)]) == prefix:
            rest = segments[len(prefix):]
            if rest and rest[0] in NOT_IDS:
                return None
            return Target(kind, rest[0] if rest else None)
    return None


def referenced(body: dict[str, Any] | None) -> list[Wanted]:
    """Every object id a parsed JSON body refers to by a known key, wherever it is nested (one
    pass without recursion: a 10 MB chat body of 5,000 messages takes under 10 ms)."""
    found: list[Wanted] = []
    pending: list[Any] = [body]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in REFERENCES:
                    found += _ids(key, value)
                elif key not in UNCHECKED and isinstance(value, dict | list):
                    pending.append(value)
    return found


def _ids(key: str, value: Any) -> list[Wanted]:
    """The ids a reference key holds: one string or a list of them."""
    kind = REFERENCES[key]
    if isinstance(value, str):
        return [(key, kind, value)] if value else []
    if isinstance(value, list):
        return [(key, kind, v) for v in value if isinstance(v, str) and v]
    return []


class Owner:
    """The caller's tenant's provider objects, read and written on the store's thread."""

    def __init__(self, request: web.Request) -> None:
        self._host = request.app[appkeys.HOST]
        self._tenant = request.app[appkeys.STORE].for_tenant(tenant_of(request))

    async def require(self, wanted: list[Wanted]) -> None:
        """404 in the provider's words for the first wanted id this tenant did not create."""
        if not wanted:
            return
        ids = [object_id for _, _, object_id in wanted]
        owned = await self._host.run(lambda: self._tenant.owned_objects(ids))
        for param, kind, object_id in wanted:
            if object_id not in owned:
                raise ProviderObjectNotFoundError(kind, object_id, param=param)

    async def record(self, kind: str, ids: list[str]) -> None:
        """Note `ids` as objects this tenant created."""
        if ids:
            await self._host.run(lambda: self._tenant.record_objects(kind, ids))

    async def forget(self, ids: list[str]) -> None:
        """Drop objects the provider deleted."""
        await self._host.run(lambda: self._tenant.forget_objects(ids))

    async def owned(self, ids: list[str]) -> set[str]:
        """Those of `ids` this tenant created."""
        return await self._host.run(lambda: self._tenant.owned_objects(ids))


def operator_owner(request: web.Request, params: LiteLLMParams) -> Owner | None:
    """The caller's objects when `params` carries the operator's key; None with the client's own."""
    return Owner(request) if params.api_key is not None else None


async def require_references(request: web.Request, body: dict[str, Any]) -> None:
    """Refuse (404) a chat, Responses or Messages body referring to objects the caller did not
    create, when its model's entry sends the operator's key (an unknown model is left to the handler)."""
    model = body.get("model")
    entry = request.app[appkeys.SETTINGS].find_model(model) if isinstance(model, str) else None
    if entry is not None and entry.litellm_params.api_key is not None:
        await Owner(request).require(referenced(body))


async def record_created(request: web.Request, params: LiteLLMParams, kind: str, created: Any) -> None:
    """Note the object a reply created (its `id`) as the caller's, when the operator's key made it."""
    owner = operator_owner(request, params)
    object_id = created.get("id") if isinstance(created, dict) else None
    if owner is not None and isinstance(object_id, str) and object_id:
        await owner.record(kind, [object_id])


@dataclass
class Guard:
    """One pass-through request under a collection, relayed with the operator's key."""

    owner: Owner
    method: str
    target: Target
    streamed: bool
    tapped: bytearray = field(default_factory=bytearray)

    @property
    def buffers(self) -> bool:
        """True when the whole answer is read first: what a POST creates, what a list shows."""
        if self.streamed:
            return False
        return self.method == "POST" or (self.method == "GET" and self.target.object_id is None)

    async def answered(self, status: int, raw: bytes) -> bytes:
        """A buffered answer: creations recorded, lists cut to the caller's own objects."""
        try:
            data = json.loads(raw) if 200 <= status < 300 else None
        except ValueError:
            return raw
        if not isinstance(data, dict):
            return raw
        if self.method == "GET":
            return compact_json(await self._own_list(data))
        await self._record(data)
        return raw

    async def _record(self, data: dict[str, Any]) -> None:
        """A POST's answer: the object it created (at the collection itself) is the caller's."""
        if self.target.object_id is None and isinstance(data.get("id"), str):
            await self.owner.record(self.target.kind, [data["id"]])
        nested = data.get("file")  # a completed upload carries the file it made
        if isinstance(nested, dict) and isinstance(nested.get("id"), str):
            await self.owner.record("file", [nested["id"]])

    async def _own_list(self, data: dict[str, Any]) -> dict[str, Any]:
        """A list answer with only the caller's objects (its first and last ids to match)."""
        items = data.get("data")
        if not isinstance(items, list):
            return data
        ids = [i["id"] for i in items if isinstance(i, dict) and isinstance(i.get("id"), str)]
        owned = await self.owner.owned(ids)
        kept = [i for i in items if isinstance(i, dict) and i.get("id") in owned]
        trimmed = {**data, "data": kept}
        if "first_id" in data:
            trimmed["first_id"] = kept[0]["id"] if kept else None
        if "last_id" in data:
            trimmed["last_id"] = kept[-1]["id"] if kept else None
        return trimmed

    def tap(self, chunk: bytes) -> None:
        """A streamed answer's bytes, kept until the first `"id"` (the created object's) is seen."""
        if len(self.tapped) < TAP_LIMIT:
            self.tapped += chunk[:TAP_LIMIT - len(self.tapped)]

    async def finished(self, status: int) -> None:
        """After an unbuffered answer: a streamed creation recorded, a deleted object forgotten."""
        if not 200 <= status < 300:
            return
        if self.method == "DELETE" and self.target.object_id is not None:
            await self.owner.forget([self.target.object_id])
        found = FIRST_ID.search(self.tapped) if self.streamed and self.target.object_id is None else None
        if found is not None:
            await self.owner.record(self.target.kind, [found.group(1).decode()])


async def guard(request: web.Request, params: LiteLLMParams, tail: str, body: Body) -> Guard | None:
    """Check a pass-through request's object ids (404 for another tenant's) and return how its
    answer is to be handled; None with the client's own key or away from every collection."""
    owner = operator_owner(request, params)
    if owner is None:
        return None
    target = target_of(tail)
    parsed = request.get(appkeys.PARSED_BODY) if isinstance(body, bytes) else None
    wanted = referenced(parsed)
    if target is not None and target.object_id is not None:
        wanted.insert(0, (None, target.kind, target.object_id))
    await owner.require(wanted)
    if target is None:
        return None
    return Guard(owner, request.method, target, streamed=parsed is not None and parsed.get("stream") is True)
