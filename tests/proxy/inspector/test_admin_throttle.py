"""Admin-key guessing on /ui and /ui/api: Bearer throttled like logins, per source, bounded memory."""

from __future__ import annotations

from dataclasses import replace

import pytest
from aiohttp.test_utils import TestServer
from pytest_aiohttp import AiohttpClient, AiohttpServer

from proxy.inspector.session import FAILURE_LIMIT, LOCKOUT_S, SESSIONS
from proxy.inspector.source import parse_networks, request_source, source_key
from proxy.inspector.throttle import FailureThrottle
from tests.proxy.inspector.inspect_fixtures import ADMIN_KEY, Populated, UiClient, build_app, ui_settings

API = "/ui/api/conversations"


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def ui_server(aiohttp_server: AiohttpServer, populated: Populated,
                    trusted: tuple[str, ...] = ()) -> tuple[TestServer, Clock]:
    settings = ui_settings(populated.db_path, ADMIN_KEY)
    settings = replace(settings, server=replace(settings.server, trusted_proxies=trusted))
    server = await aiohttp_server(build_app(settings))
    clock = Clock()
    server.app[SESSIONS].clock = clock
    return server, clock


def bearer(key: str, forwarded_for: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key}"}
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    return headers


async def test_bearer_guesses_are_locked_out_and_the_lock_expires(
        aiohttp_server: AiohttpServer, aiohttp_client: AiohttpClient, populated: Populated) -> None:
    server, clock = await ui_server(aiohttp_server, populated)
    client: UiClient = await aiohttp_client(server)
    for _ in range(FAILURE_LIMIT):
        assert (await client.get(API, headers=bearer("guess"))).status == 401
    locked = await client.get(API, headers=bearer("another-guess"))
    assert locked.status == 429 and locked.headers["Retry-After"] == str(int(LOCKOUT_S))
    body = await locked.json()
    assert body["error"]["code"] == "too_many_attempts" and body["error"]["type"] == "rate_limit_error"
    assert (await client.get("/ui/", headers=bearer("guess"))).status == 429  # pages share the lock
    assert (await client.post("/ui/login", data={"admin_key": ADMIN_KEY})).status == 429
    clock.now += LOCKOUT_S
    assert (await client.get(API, headers=bearer(ADMIN_KEY))).status == 200


async def test_only_failures_count(aiohttp_server: AiohttpServer, aiohttp_client: AiohttpClient,
                                   populated: Populated) -> None:
    server, _ = await ui_server(aiohttp_server, populated)
    client: UiClient = await aiohttp_client(server)
    for _ in range(3 * FAILURE_LIMIT):  # right keys and keyless visits never lock anyone out
        assert (await client.get(API, headers=bearer(ADMIN_KEY))).status == 200
        assert (await client.get(API)).status == 401
    for _ in range(FAILURE_LIMIT - 1):
        assert (await client.get(API, headers=bearer("guess"))).status == 401
    assert (await client.get(API, headers=bearer(ADMIN_KEY))).status == 200  # forgives earlier failures
    for _ in range(FAILURE_LIMIT - 1):
        assert (await client.get(API, headers=bearer("guess"))).status == 401
    assert (await client.get(API, headers=bearer(ADMIN_KEY))).status == 200


async def test_a_session_cookie_works_from_a_locked_source(
        aiohttp_server: AiohttpServer, aiohttp_client: AiohttpClient, populated: Populated) -> None:
    server, _ = await ui_server(aiohttp_server, populated)
    client: UiClient = await aiohttp_client(server)
    login = await client.post("/ui/login", data={"admin_key": ADMIN_KEY}, allow_redirects=False)
    cookie = {"Cookie": f"ctxproxy_admin={login.cookies['ctxproxy_admin'].value}"}
    client.session.cookie_jar.clear()  # the guesses below carry no cookie
    for _ in range(FAILURE_LIMIT):
        await client.get(API, headers=bearer("guess"))
    assert (await client.get(API, headers=bearer("guess"))).status == 429
    assert (await client.get(API, headers=cookie)).status == 200


async def test_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy(
        aiohttp_server: AiohttpServer, aiohttp_client: AiohttpClient, populated: Populated) -> None:
    untrusted, _ = await ui_server(aiohttp_server, populated)
    client: UiClient = await aiohttp_client(untrusted)
    for n in range(FAILURE_LIMIT):  # a fresh spoofed address each time does not dodge the lock
        await client.get(API, headers=bearer("guess", forwarded_for=f"203.0.113.{n}"))
    assert (await client.get(API, headers=bearer(ADMIN_KEY, forwarded_for="198.51.100.7"))).status == 429


async def test_behind_a_trusted_proxy_an_attacker_locks_out_only_itself(
        aiohttp_server: AiohttpServer, aiohttp_client: AiohttpClient, populated: Populated) -> None:
    server, _ = await ui_server(aiohttp_server, populated, trusted=("127.0.0.1",))
    client: UiClient = await aiohttp_client(server)
    for _ in range(FAILURE_LIMIT):
        await client.get(API, headers=bearer("guess", forwarded_for="203.0.113.9"))
    assert (await client.get(API, headers=bearer(ADMIN_KEY, forwarded_for="203.0.113.9"))).status == 429
    operator = await client.get(API, headers=bearer(ADMIN_KEY, forwarded_for="198.51.100.7"))
    assert operator.status == 200
    # The client may prepend anything; only the hop the trusted proxy appended counts.
    spoofed = bearer(ADMIN_KEY, forwarded_for="198.51.100.7, 203.0.113.9")
    assert (await client.get(API, headers=spoofed)).status == 429


def test_source_keys() -> None:
    from ipaddress import ip_address

    assert source_key(ip_address("192.0.2.4")) == "192.0.2.4"
    assert source_key(ip_address("2001:db8:1:2:aaaa::1")) == source_key(ip_address("2001:db8:1:2::ffff"))
    assert source_key(ip_address("2001:db8:1:2::1")) == "2001:db8:1:2::/64"
    assert source_key(ip_address("::ffff:192.0.2.4")) == "192.0.2.4"
    assert parse_networks(["10.0.0.0/8", "::1"])[0].num_addresses == 2 ** 24
    with pytest.raises(ValueError):
        parse_networks(["10.0.0.300"])
    assert callable(request_source)


def test_throttle_memory_is_bounded_and_lockouts_survive_churn() -> None:
    clock = Clock()
    throttle = FailureThrottle(clock=clock, max_sources=100)
    for _ in range(FAILURE_LIMIT):
        throttle.failed("victim-of-own-guessing")
    for n in range(10_000):  # one failure each from many sources: the failure table stays bounded
        throttle.failed(f"10.{n // 256 % 256}.{n % 256}.1")
    assert throttle.tracked() <= 200
    assert throttle.retry_after("victim-of-own-guessing") == LOCKOUT_S
    clock.now += LOCKOUT_S
    assert throttle.retry_after("victim-of-own-guessing") == 0
