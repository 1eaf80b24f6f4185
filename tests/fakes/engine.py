"""An engine stand-in for apps whose tests never send a chat request (recall routes, /ui)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from compaction.engine import EarlyStart
from compaction.resend.early_forward import EarlyForward
from compaction.types import ChatTurn, Message, PreparedRequest
from proxy import appkeys
from proxy.engine_host import EngineHost


class UnusedEngine:
    """Satisfies the proxy's EngineAPI; any chat call is a test bug and fails loudly."""

    def early(self, turn: ChatTurn) -> None:
        raise AssertionError("this test app does not serve chat requests")

    async def prepare(self, turn: ChatTurn, early: EarlyForward | None = None,
                      start: EarlyStart | None = None) -> PreparedRequest:
        raise AssertionError("this test app does not serve chat requests")

    def record_reply(self, prepared: PreparedRequest, turn: ChatTurn, message: Message) -> None:
        raise AssertionError("this test app does not serve chat requests")

    def note_cache_read(self, prepared: PreparedRequest, turn: ChatTurn, tokens: int) -> None:
        raise AssertionError("this test app does not serve chat requests")

    def after_turn(self, prepared: PreparedRequest, turn: ChatTurn) -> bool:
        raise AssertionError("this test app does not serve chat requests")

    async def aclose(self) -> None:
        return None


async def drain_background(app: web.Application) -> None:
    """Wait for every engine's background steps, each on the engine thread where they run."""
    async def drain(host: EngineHost) -> None:
        engine: Any = host.engine
        await host.call(engine.background.drain)

    await app[appkeys.HOST].each(drain)
