"""Helpers for the observability tests: settings with a small window, a driven conversation,
log and /metrics parsing. (Uniquely named module: no shared `conftest` import.)"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import openai
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from compaction.types import Message
from config.settings import (
    LOCAL_EXTRACTIVE,
    LiteLLMParams,
    ModelEntry,
    ServerSettings,
    Settings,
    StoreSettings,
    SummarizerSettings,
)
from tests.fakes.engine import drain_background
from tests.sdk_params import sdk_messages

MODEL = "gpt-4o-mini"
WINDOW = 4_096
CLIENT_KEY = "sk-test-SECRETKEY1234567890abcdef"
SECRET_MESSAGE = "my key is sk-live-SECRETabcdef1234567890XYZ and password=SECRETpw"


def small_window_settings(upstream_url: str, store_path: Path) -> Settings:
    """One model routed to the fake upstream with a 4,096-token window; local extractive summaries."""
    return Settings(model_list=(ModelEntry(MODEL, LiteLLMParams(f"openai/{MODEL}", upstream_url), WINDOW),),
                    store=StoreSettings(path=str(store_path)),
                    server=replace(ServerSettings(), upstream_timeout_s=30.0),
                    summarizer=SummarizerSettings(model=LOCAL_EXTRACTIVE))


def filler(turn: int) -> str:
    """A user turn of roughly 120 tokens with a planted order number (an anchor)."""
    words = " ".join(f"topic{turn}word{i}" for i in range(40))
    return f"Turn {turn}: order ORD-{1000 + turn} is pending review. Notes: {words}."


@dataclass
class Driven:
    """What driving a conversation through the proxy produced."""

    headers: list[dict[str, str]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    http_requests: int = 0


async def drive(client: openai.AsyncOpenAI, app: web.Application, turns: int, *, first: str | None = None,
                stream_every: int = 0) -> Driven:
    """Send `turns` growing-history requests (resending the full history), draining background work."""
    out = Driven()
    for turn in range(turns):
        text = first if (turn == 0 and first) else filler(turn)
        out.messages.append({"role": "user", "content": text})
        stream = bool(stream_every) and turn % stream_every == stream_every - 1
        reply = await _one(client, out.messages, stream)
        out.headers.append(reply[0])
        out.messages.append({"role": "assistant", "content": reply[1]})
        out.http_requests += 1
        await drain_background(app)
    return out


async def _one(client: openai.AsyncOpenAI, messages: list[Message],
               stream: bool) -> tuple[dict[str, str], str]:
    if not stream:
        raw = await client.chat.completions.with_raw_response.create(model=MODEL,
                                                                     messages=sdk_messages(messages))
        return dict(raw.headers), raw.parse().choices[0].message.content or ""
    async with client.chat.completions.with_streaming_response.create(
            model=MODEL, messages=sdk_messages(messages), stream=True) as resp:
        chunks = await resp.parse()  # an AsyncStream of chunks (stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])
        return dict(resp.headers), text


def log_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_metrics(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, keyed by (sample name, labels)."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples named `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, lab), v in samples.items() if n == name and want <= set(lab))
