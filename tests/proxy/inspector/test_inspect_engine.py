"""The inspector over what the real engine wrote: drive the real app (local/extractive summarizer,
a 4096-token window, no background) with the official openai SDK until it compacts, then read the
conversation back through /ui's JSON API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
from aiohttp import web
from aiohttp.test_utils import TestClient
from pytest_aiohttp import AiohttpClient, AiohttpServer

from compaction.types import Message
from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    RecallSettings,
    ServerSettings,
    Settings,
    StoreSettings,
    SummarizerSettings,
)
from proxy.app import create_app
from tests.fakes.upstream import FakeUpstream
from tests.sdk_params import sdk_messages

ADMIN = "admin-engine-test-key-0123456789"
PLANTED = "The staging database password rotation is scheduled for ticket OPS-4471"


def engine_settings(upstream_url: str, tmp_path: Path) -> Settings:
    compaction = CompactionSettings(background=False)
    model = ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", upstream_url), 4096, compaction)
    return Settings(model_list=(model,), compaction=compaction, store=StoreSettings(str(tmp_path / "e.db")),
                    summarizer=SummarizerSettings(model="local/extractive"),
                    recall=RecallSettings(enabled=False), server=ServerSettings(admin_key=ADMIN))


def turn(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Question {i}: explain step {i} of the migration plan in detail, "
             f"covering rollback, monitoring and the owners of step {i} for the whole team."},
            {"role": "assistant", "content": f"Answer {i}: step {i} moves one service at a time, watches "
             f"error rates for an hour and rolls back automatically if latency doubles during step {i}."}]


async def test_inspector_reads_engine_output(aiohttp_server: AiohttpServer, aiohttp_client: AiohttpClient,
                                             fake_upstream: FakeUpstream, tmp_path: Path) -> None:
    app = create_app(engine_settings(fake_upstream.url, tmp_path))
    server = await aiohttp_server(app)
    history: list[Message] = [{"role": "system", "content": "You are a release engineer."},
                                     {"role": "user", "content": PLANTED + "."},
                                     {"role": "assistant", "content": "Noted."}]
    client = openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="sk-engine-0123456789",
                                max_retries=0)
    try:
        for i in range(4):
            for j in range(10):
                history.extend(turn(10 * i + j))
            history.append({"role": "user", "content": f"Status after round {i}?"})
            reply = await client.chat.completions.create(model="gpt-4o-mini",
                                                         messages=sdk_messages(history))
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
    finally:
        await client.close()

    http: TestClient[web.Request, None] = await aiohttp_client(server)
    headers = {"Authorization": f"Bearer {ADMIN}"}
    listing = await (await http.get("/ui/api/conversations", headers=headers)).json()
    assert len(listing["conversations"]) == 1
    conv = listing["conversations"][0]
    detail = await (await http.get(f"/ui/api/tenants/{conv['tenant_id']}/conversations/{conv['id']}",
                                   headers=headers)).json()
    series = detail["occupancy"]["series"]
    assert len(series) == 4
    assert all(p["tokens_forwarded"] <= p["budget"] for p in series)
    assert all(set(p["occupancy"]) == set(detail["occupancy"]["categories"]) for p in series)
    assert any(p["compacted"] for p in series) and detail["summaries"]["nodes"]
    summarized = [r for r in detail["timeline"] if r["status"] == "summarised"]
    assert summarized and detail["timeline"][-1]["status"] == "raw"
    assert {e["outcome"] for e in detail["events"]} >= {"committed"}
    covering = next(r["summary_id"] for r in detail["timeline"] if r["seq"] == 1)
    assert covering is not None, "the planted early turn should be summarized"
    tree = await (await http.get(f"/ui/api/tenants/{conv['tenant_id']}/summaries/{covering}/expand",
                                 headers=headers)).json()

    def texts(node: dict[str, Any]) -> list[str]:
        if node["type"] == "message":
            return [node["text"]]
        return [t for s in node["sources"] for t in texts(s)]

    assert PLANTED + "." in texts(tree)
