"""A recall loop's rounds as one client stream: the pieces the streaming Messages and Responses loops share.

`open_looped` reads the looped stream up to its first block before the client's response starts,
so a failure of the first round is still a plain error reply; after that, errors reach the client
in its API's stream format (the relays in proxy/upstream/ write them).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field

from proxy.recall.tool_loop import JSON
from proxy.upstream.openai import StreamingReply


@dataclass
class NoRounds:
    """The loop's transport when a streaming loop opens the rounds itself (it uses the loop's round
    bodies and answers only)."""

    async def complete(self, body: JSON) -> JSON:
        raise AssertionError("streamed rounds are opened by the streaming loops")

    def stream(self, body: JSON) -> AsyncGenerator[JSON, None]:
        raise AssertionError("streamed rounds are opened by the streaming loops")


@dataclass
class LoopStream:
    """The looped stream as one `StreamingReply`; the first block is read before it is returned."""

    blocks: AsyncGenerator[bytes, None]
    first: bytes | None
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200

    async def events(self) -> AsyncIterator[bytes]:
        if self.first is not None:
            yield self.first
        async with aclosing(self.blocks) as blocks:
            async for block in blocks:
                yield block

    async def aclose(self) -> None:
        await self.blocks.aclose()


async def open_looped(blocks: AsyncGenerator[bytes, None], headers: dict[str, str]) -> StreamingReply:
    """Runs until the first block for the client, so an early failure is a plain error reply."""
    try:
        first: bytes | None = await anext(blocks)
    except StopAsyncIteration:
        first = None
    except BaseException:
        await blocks.aclose()
        raise
    return LoopStream(blocks, first, headers)


async def relayed_round(opening: Awaitable[StreamingReply], feed: Callable[[bytes], bytes | None],
                        headers: dict[str, str] | None) -> AsyncGenerator[bytes, None]:
    """One round's upstream blocks as the client's (`feed` rewrites or withholds each), the
    upstream stream closed whatever happens; `headers` (the first round only) gets the relayed ones."""
    reply = await opening
    if headers is not None:
        headers.update(reply.headers)
    try:
        async for block in reply.events():
            out = feed(block)
            if out is not None:
                yield out
    finally:
        await reply.aclose()
