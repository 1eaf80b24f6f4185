"""The session-wide network block: loopback works, anything else raises."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import NetworkBlockedError


def test_connect_to_public_address_is_blocked() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("203.0.113.7", 443), timeout=1)


def test_name_resolution_of_public_names_is_blocked() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.getaddrinfo("api.openai.com", 443)


async def test_aiohttp_to_public_host_is_blocked() -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            await session.get("http://198.51.100.9:80/")


def test_loopback_is_allowed() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        client = socket.create_connection(server.getsockname(), timeout=1)
        client.close()
        assert socket.getaddrinfo("localhost", 80)
    finally:
        server.close()
