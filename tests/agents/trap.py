"""A loopback stand-in for an HTTP proxy (the CLIs' HTTP(S)_PROXY): records each request line, refuses it.

Anything a CLI tries to reach outside 127.0.0.1 goes through it (CONNECT host:443 or GET http://...), so the
suite can tell that no CLI tried to reach the internet, and what it tried when one did.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

REFUSAL = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass
class ProxyTrap:
    """Records the request line of each connection ("CONNECT example.com:443 HTTP/1.1") and answers 403."""

    attempts: list[str] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def start(self) -> ProxyTrap:
        """Listen on a loopback port."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def url(self) -> str:
        """The proxy URL to give the CLIs."""
        assert self.server is not None, "start() first"
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        """Stop listening."""
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Record one connection's request line and refuse it."""
        try:
            line = await asyncio.wait_for(reader.readline(), 5.0)
            if line:
                self.attempts.append(line.decode(errors="replace").strip())
            writer.write(REFUSAL)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
