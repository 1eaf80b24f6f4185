"""Start-up warm-up: litellm (when a route or the summarizer needs it), the model map and the
configured models' tokenizers, loaded in a worker thread.

Importing litellm takes seconds and a tokenizer's tables about one; done on the event loop (the
first summarizer call, a model's first request) they stalled every request, /healthz included.
`/readyz` answers 503 until the warm-up is done and chat requests wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import web

from config.errors import NotReadyError
from config.settings import Settings
from proxy import appkeys


@dataclass
class Warmup:
    """Whether the heavy start-up work is done, how long it took and what failed (if anything)."""

    done: asyncio.Event = field(default_factory=asyncio.Event)
    seconds: float | None = None
    error: str | None = None

    def check_ready(self) -> None:
        """Raise NotReadyError (503) while the warm-up is still running."""
        if not self.done.is_set():
            raise NotReadyError("warming up: loading litellm and the tokenizers")


WARMUP = web.AppKey("warmup", Warmup)


def tokenizer_models(settings: Settings) -> tuple[str, ...]:
    """Model names whose tokenizers requests will need: every entry's name and upstream model."""
    names = {name for m in settings.model_list
             for name in (m.model_name, m.litellm_params.model) if name}
    return tuple(sorted(names))


def needs_litellm(settings: Settings) -> bool:
    """Whether some route or the summarizer goes through litellm: a model entry that does not speak
    OpenAI's wire format, or a summarizer whose endpoint or `extra` only litellm takes. Otherwise
    litellm (~180 MiB, seconds to import) is never loaded."""
    from proxy.summarizers import summaries_need_litellm

    routed = any(not m.litellm_params.uses_openai_wire for m in settings.model_list)
    return routed or summaries_need_litellm(settings)


def load_heavy(settings: Settings) -> None:
    """The blocking part (a worker thread runs it): litellm when the configuration needs it, the
    model map, every needed tokenizer."""
    from compaction import TokenCounter, bundled_model_windows, get_litellm

    if needs_litellm(settings):
        get_litellm()
    bundled_model_windows()
    for name in tokenizer_models(settings):
        TokenCounter.for_model(name)


async def warmup_ctx(app: web.Application) -> AsyncIterator[None]:
    """Cleanup context: start the warm-up with the app, never block start-up on it."""
    warmup = Warmup()
    app[WARMUP] = warmup
    task = asyncio.create_task(_run(app, warmup))
    yield
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _run(app: web.Application, warmup: Warmup) -> None:
    started = time.perf_counter()
    try:
        await asyncio.to_thread(load_heavy, app[appkeys.SETTINGS])
    except Exception as exc:  # a missing tokenizer must not keep the proxy unready forever
        warmup.error = type(exc).__name__
        app[appkeys.LOGGER].warning("warmup_failed", error=warmup.error)
    warmup.seconds = round(time.perf_counter() - started, 3)
    app[appkeys.LOGGER].info("warmup_done", seconds=warmup.seconds)
    warmup.done.set()


async def freeze_after_warmup(app: web.Application) -> None:
    """Once the warm-up is done, move every object then alive out of the cyclic collector's reach
    (`gc.freeze`: instant). litellm's tables alone are ~400k objects, which every full collection
    walked again: 0.4-0.9 s each, about one per hundred resent 100k-token histories (measured), a
    stall for every request in flight. Only a served app does this (`protocol.serve`), not tests'."""
    await app[WARMUP].done.wait()
    gc.freeze()
