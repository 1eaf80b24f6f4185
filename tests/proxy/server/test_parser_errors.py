"""Requests aiohttp's HTTP parser refuses (control bytes in a header value, a bad request line, a
line too long, broken chunking) and header values that are not UTF-8 get OpenAI's error JSON, not
aiohttp's plain text: sent over a raw socket to the real `ctxproxy serve` subprocess."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TEST_API_KEY
from tests.e2e.server_process import ServerProcess, free_port, write_config
from tests.fakes.upstream import FakeUpstream

pytestmark = pytest.mark.integration  # a `ctxproxy serve` subprocess

CHAT = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'


def chat_request(*headers: bytes, key: bytes = TEST_API_KEY.encode(), body: bytes = CHAT) -> bytes:
    """A chat request on a connection the server closes after answering (so reading to EOF ends)."""
    head = [b"POST /v1/chat/completions HTTP/1.1", b"Host: proxy", b"Content-Type: application/json",
            b"Authorization: Bearer " + key, b"Content-Length: %d" % len(body), b"Connection: close",
            *headers]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


# name -> (raw request, what the error message says)
PARSER_REFUSED: dict[str, tuple[bytes, str]] = {
    "control byte in a header value": (chat_request(b"X-Trace: a\x01b"), "Invalid header value char"),
    "NUL in a header value": (chat_request(b"X-Trace: a\x00b"), "Invalid header value char"),
    "invalid method": (b"G@T /v1/models HTTP/1.1\r\nHost: proxy\r\n\r\n", "Invalid method"),
    "unknown HTTP version": (b"GET /v1/models HTTP/9.9\r\nHost: proxy\r\n\r\n", "Bad status line"),
    "space in a header name": (b"GET /v1/models HTTP/1.1\r\nHo st: proxy\r\n\r\n", "Invalid header token"),
    "control byte in the path": (b"GET /v1/\x7fmodels HTTP/1.1\r\nHost: proxy\r\n\r\n",
                                 "Invalid char in url"),
    "request line too long": (b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: proxy\r\n\r\n",
                              "Got more than"),
    "bad chunk size": (b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nTransfer-Encoding: chunked"
                       b"\r\n\r\nzz\r\n\r\n", "Invalid character in chunk size"),
    "TLS on the plain port": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "Received HTTPS traffic"),
}
# name -> (raw request, the header named in `param`)
NOT_UTF8: dict[str, tuple[bytes, str]] = {
    "non-UTF-8 byte in a header value": (chat_request(b"X-Trace: caf\xe9\xff"), "X-Trace"),
    "non-UTF-8 byte in the API key": (chat_request(key=b"sk-\xff\xfe"), "Authorization"),
}


@pytest.fixture
async def served(fake_upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[ServerProcess]:
    config = write_config(tmp_path / "ctxproxy.yaml", fake_upstream.url, tmp_path / "store.db")
    server = await ServerProcess(config, free_port()).start()
    try:
        yield server
    finally:
        server.stop()


async def exchange(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `raw` on a fresh connection; status, headers and body of the answer (read to EOF: the
    server closes the connection after an error it cannot trust the framing of)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    length = int(headers.get("content-length", len(body)))
    return int(status_line.split()[1]), headers, body[:length]


def assert_openai_400(status: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    assert status == 400, body
    assert headers["content-type"].startswith("application/json")
    error: dict[str, Any] = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    return error


async def test_every_malformed_request_is_answered_in_openai_shape(served: ServerProcess,
                                                                   fake_upstream: FakeUpstream) -> None:
    for name, (raw, reason) in PARSER_REFUSED.items():
        status, headers, body = await exchange(served.port, raw)
        error = assert_openai_400(status, headers, body)
        assert error["code"] == "malformed_request" and error["param"] is None, name
        assert error["message"].startswith(f"malformed HTTP request: {reason}"), (name, error)
        assert "\\x" not in error["message"] and "aaaa" not in error["message"]  # the bytes are not echoed
    for name, (raw, header) in NOT_UTF8.items():
        status, headers, body = await exchange(served.port, raw)
        error = assert_openai_400(status, headers, body)
        assert (error["code"], error["param"]) == ("invalid_header", header), name
        assert "not valid UTF-8" in error["message"]
    assert not [r for r in fake_upstream.requests if r.path.endswith("/chat/completions")]  # none forwarded
    status, _, body = await exchange(served.port, chat_request())
    assert status == 200 and json.loads(body)["object"] == "chat.completion"  # the server still serves
