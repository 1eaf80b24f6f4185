"""Replay a generated conversation through the real proxy with the openai SDK, and measure it.

The proxy runs the real app and engine; the model is one fake upstream (scripted replies, records
every forwarded body) and the summarizer is a second fake upstream reached through the `summarizer:`
config (litellm over loopback), answering as a faithful, inventing, empty, verbose or slow model.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from compaction.anchors.extract import ANCHOR_BLOCK_OPEN
from compaction.engine import EarlyStart
from compaction.resend.early_forward import EarlyForward
from compaction.summarize.summarizers import ExtractiveSummarizer, source_from_prompt
from compaction.tokens import REPLY_PRIMING, TokenCounter
from compaction.toolpairs import pairing_violations
from compaction.types import ChatTurn, PreparedRequest
from config.settings import (
    CompactionSettings,
    LiteLLMParams,
    ModelEntry,
    ServerSettings,
    Settings,
    StoreSettings,
    SummarizerSettings,
)
from tests.e2e.conversation import Conversation, Step
from tests.fakes.summarizer import with_invention
from tests.fakes.upstream import FakeUpstream, Reply, Script
from tests.sdk_params import sdk_messages, sdk_tools

JSON = dict[str, Any]
MODEL = "gpt-4o-mini"
WINDOW = 12_000
INVENTED_FACTS = ("ORD-99999", "7,777", "Zelda Quorn")
_TARGET = re.compile(r"Write at most about (\d+) tokens")


def budget_for(window: int = WINDOW, settings: CompactionSettings | None = None) -> int:
    """The engine's input budget when the request sets no max_tokens (as compaction/budget.py computes it)."""
    s = settings or CompactionSettings()
    return window - min(s.reserve_tokens, window // 4) - s.safety_margin_tokens


def settings_for(upstream_url: str, summarizer_url: str, store_path: Path,
                 window: int = WINDOW) -> Settings:
    """The model served by the fake upstream with a `window`-token context; summarizer separate."""
    entry = ModelEntry(MODEL, LiteLLMParams("openai/" + MODEL, upstream_url), window)
    return Settings(model_list=(entry,), store=StoreSettings(path=str(store_path)),
                    server=ServerSettings(upstream_timeout_s=60.0),
                    summarizer=SummarizerSettings(model="openai/fake-summarizer",
                                                  api_base=summarizer_url,
                                                  api_key="sk-summarizer-0123456789abcdef"))


def summarizer_responder(behaviour: str, delay_s: float = 0.0) -> Any:
    """A FakeUpstream responder answering summarization prompts like a (mis)behaving model."""
    extractive = ExtractiveSummarizer()

    def respond(body: JSON) -> Script:
        prompt = str(body["messages"][-1]["content"])
        source = source_from_prompt(prompt)
        match = _TARGET.search(prompt)
        faithful = extractive.summarize(source, int(match.group(1)) if match else 1_000)
        text = {"faithful": faithful, "slow": faithful, "empty": "",
                "verbose": (source + "\n") * 3,
                "inventing": with_invention(faithful)}[behaviour]
        return Reply(text=text, delay_s=delay_s)

    return respond


class RecordingEngine:
    """Delegates to the real Engine and keeps every PreparedRequest (how waits are observed)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.prepared: list[PreparedRequest] = []
        self.loop = asyncio.get_running_loop()  # built on the engine thread (proxy/engine_host.py)

    async def drain_background(self) -> None:
        """Wait for background steps, which run on the engine thread's loop."""
        done = asyncio.run_coroutine_threadsafe(self.inner.background.drain(), self.loop)
        await asyncio.wrap_future(done)

    async def prepare(self, turn: ChatTurn, early: EarlyForward | None = None,
                      start: EarlyStart | None = None) -> PreparedRequest:
        prepared: PreparedRequest = await self.inner.prepare(turn, early, start)
        self.prepared.append(prepared)
        return prepared

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class Replay:
    """What one replay produced: forwarded bodies, prepared requests, the client's last history."""

    forwarded: list[JSON] = field(default_factory=list)
    received: list[JSON] = field(default_factory=list)  # the client's request body per turn
    prepared: list[PreparedRequest] = field(default_factory=list)
    summarizer_calls: int = 0
    waits: list[str | None] = field(default_factory=list)  # X-Ctxproxy-Summarizer-Wait per turn


async def replay(client: AsyncOpenAI, conv: Conversation, fake: FakeUpstream, engine: RecordingEngine, *,
                 turns: int | None = None, settle: bool = True, model_delay_s: float = 0.0) -> Replay:
    """Send the conversation turn by turn, the client resending its full history each time.

    `settle`: before the next turn, wait for background compaction (a client with human or model
    think time); otherwise turns follow back to back, paced only by the upstream's reply delay
    (`model_delay_s` per reply).
    """
    out = Replay()
    history: list[JSON] = [conv.system]
    for step in conv.steps[:turns]:
        history += [dict(m) for m in step.client]
        fake.queue(_reply_for(step, model_delay_s))
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL, messages=sdk_messages(history), tools=sdk_tools(conv.tools))
        out.waits.append(raw.headers.get("x-ctxproxy-summarizer-wait"))
        response = raw.parse()
        out.received.append(body([dict(m) for m in history], list(conv.tools)))
        history.append(response.choices[0].message.model_dump(exclude_none=True))
        if settle:
            await engine.drain_background()
    out.forwarded = [r.body for r in fake.requests]
    out.prepared = list(engine.prepared)
    return out


def _reply_for(step: Step, delay_s: float = 0.0) -> Reply:
    return Reply(text=step.reply_text, tool_calls=list(step.reply_calls), delay_s=delay_s)


async def paced_replay(client: AsyncOpenAI, conv: Conversation, fake: FakeUpstream, engine: RecordingEngine,
                       *, turns: int, model_delay_s: float) -> Replay:
    """Back-to-back turns; the fake model takes `model_delay_s` to answer each (agent pacing)."""
    try:
        return await replay(client, conv, fake, engine, turns=turns, settle=False,
                            model_delay_s=model_delay_s)
    finally:
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------------- measurements


class CachedCounter:
    """TokenCounter with per-message memo: replays recount the same messages thousands of times."""

    def __init__(self, model: str = MODEL) -> None:
        self.inner = TokenCounter.for_model(model)
        self._memo: dict[str, int] = {}

    def count_message(self, message: JSON) -> int:
        key = json.dumps(message, sort_keys=True, ensure_ascii=False)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self.inner.count_message(message)
        return found

    def count_messages(self, messages: Sequence[JSON]) -> int:
        return REPLY_PRIMING + sum(self.count_message(m) for m in messages)

    def count_tools(self, tools: list[JSON]) -> int:
        return self.inner.count_tools(tools)


def request_tokens(counter: TokenCounter | CachedCounter, body: JSON) -> int:
    """Input tokens of a forwarded body, counted with ctxproxy's tokenizer (tools included)."""
    return counter.count_messages(body["messages"]) + counter.count_tools(body.get("tools") or [])


def context_text(messages: list[JSON]) -> str:
    """Everything a model would read: contents and tool-call arguments."""
    return json.dumps(messages, ensure_ascii=False)


def anchor_block(messages: list[JSON]) -> str | None:
    for m in messages:
        if m.get("role") == "system" and ANCHOR_BLOCK_OPEN in str(m.get("content")):
            return str(m["content"])
    return None


def extends(previous: list[JSON], current: list[JSON]) -> bool:
    return len(current) >= len(previous) and current[:len(previous)] == previous


@dataclass(frozen=True)
class Figures:
    """The product owner's figures for one strategy over one replay."""

    strategy: str
    turns: int
    ratio_final: float  # tokens the client sent / tokens forwarded, last turn
    ratio_mean: float  # mean over turns of the same ratio
    prefix_stability: float  # share of consecutive forwarded requests extending the previous one
    summarizer_calls_per_turn: float
    max_forwarded_tokens: int
    over_budget_requests: int
    pairing_violations: int
    facts_kept: tuple[str, ...]
    facts_lost: tuple[str, ...]

    def as_dict(self) -> JSON:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def body(messages: list[JSON], tools: list[JSON]) -> JSON:
    return {"messages": messages, "tools": tools}


def figures(strategy: str, received: list[JSON], forwarded: list[JSON], facts: dict[str, str],
            budget: int, counter: TokenCounter | CachedCounter, summarizer_calls: int = 0) -> Figures:
    """Figures of a strategy; `received`/`forwarded` are request bodies (messages + tools)."""
    sent = [request_tokens(counter, b) for b in received]
    fwd = [request_tokens(counter, b) for b in forwarded]
    ratios = [s / f for s, f in zip(sent, fwd, strict=True)]
    msgs = [b["messages"] for b in forwarded]
    stable = [extends(a, b) for a, b in zip(msgs, msgs[1:], strict=False)]
    final = context_text(msgs[-1])
    kept = tuple(k for k, v in facts.items() if v in final)
    return Figures(strategy, len(received), round(ratios[-1], 3), round(sum(ratios) / len(ratios), 3),
                   round(sum(stable) / max(1, len(stable)), 3),
                   round(summarizer_calls / max(1, len(received)), 3), max(fwd),
                   sum(1 for t in fwd if t > budget),
                   sum(1 for m in msgs if pairing_violations(m)), kept,
                   tuple(k for k in facts if k not in kept))
