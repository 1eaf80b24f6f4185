"""/ui sessions: expiring and revocable tokens, Secure behind TLS proxies, login back-off."""

from __future__ import annotations

from dataclasses import replace

from aiohttp import ClientResponse
from pytest_aiohttp import AiohttpClient, AiohttpServer

from config.settings import Settings
from proxy.inspector.session import FAILURE_LIMIT, LOCKOUT_S, SESSION_MAX_AGE_S, SESSIONS, UiSessions
from tests.proxy.inspector.inspect_fixtures import (
    ADMIN_KEY,
    Populated,
    UiClient,
    UiServerFactory,
    build_app,
    ui_settings,
)


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_token_expires_and_is_bound_to_key_and_time() -> None:
    clock = Clock()
    sessions = UiSessions(clock=clock)
    token = sessions.issue(ADMIN_KEY)
    assert ADMIN_KEY not in token
    assert sessions.valid(token, ADMIN_KEY)
    assert not sessions.valid(token, ADMIN_KEY + "x")  # a rotated admin key ends every session
    issued, mac = token.split(".")
    assert not sessions.valid(f"{int(issued) + 3600}.{mac}", ADMIN_KEY)  # issued_at is signed
    clock.now += SESSION_MAX_AGE_S - 1
    assert sessions.valid(token, ADMIN_KEY)
    clock.now += 1
    assert not sessions.valid(token, ADMIN_KEY)


def test_tokens_differ_per_session_and_revocation_is_per_token() -> None:
    clock = Clock()
    sessions = UiSessions(clock=clock)
    first = sessions.issue(ADMIN_KEY)
    clock.now += 5
    second = sessions.issue(ADMIN_KEY)
    assert first != second
    sessions.revoke(first)
    assert not sessions.valid(first, ADMIN_KEY) and sessions.valid(second, ADMIN_KEY)
    clock.now += SESSION_MAX_AGE_S + 1
    sessions.revoke(sessions.issue(ADMIN_KEY))
    assert first not in sessions.revoked  # expired revocations are dropped


def test_failed_logins_lock_the_peer_out_for_a_while() -> None:
    clock = Clock()
    sessions = UiSessions(clock=clock)
    for _ in range(FAILURE_LIMIT - 1):
        sessions.failed("10.0.0.1")
        clock.now += 1
    assert sessions.retry_after("10.0.0.1") == 0
    sessions.failed("10.0.0.1")
    assert sessions.retry_after("10.0.0.1") == LOCKOUT_S
    assert sessions.retry_after("10.0.0.2") == 0  # per peer
    clock.now += LOCKOUT_S
    assert sessions.retry_after("10.0.0.1") == 0


def test_failures_spread_over_more_than_a_minute_do_not_lock() -> None:
    clock = Clock()
    sessions = UiSessions(clock=clock)
    for _ in range(FAILURE_LIMIT * 3):
        sessions.failed("10.0.0.1")
        clock.now += 20
    assert sessions.retry_after("10.0.0.1") == 0


async def _login(client: UiClient, key: str,
                 **headers: str) -> ClientResponse:
    return await client.post("/ui/login", data={"admin_key": key}, allow_redirects=False, headers=headers)


async def _cookie(client: UiClient, **headers: str) -> str:
    return (await _login(client, ADMIN_KEY, **headers)).headers["Set-Cookie"]


async def test_cookie_is_secure_only_behind_a_trusted_tls_proxy(aiohttp_server: AiohttpServer,
                                                                aiohttp_client: AiohttpClient,
                                                                populated: Populated) -> None:
    https = {"X-Forwarded-Proto": "https"}
    anyone: UiClient = await aiohttp_client(await aiohttp_server(build_app(_settings(populated, ()))))
    plain = await _cookie(anyone)
    assert f"Max-Age={SESSION_MAX_AGE_S}" in plain and "Secure" not in plain
    assert "Secure" not in await _cookie(anyone, **https)  # any client could claim TLS it did not use
    behind: UiClient = await aiohttp_client(await aiohttp_server(build_app(_settings(populated,
                                                                                     ("127.0.0.0/8",)))))
    proxied = await _cookie(behind, **https)
    assert f"Max-Age={SESSION_MAX_AGE_S}" in proxied and "Secure" in proxied
    assert "Secure" not in await _cookie(behind)  # a trusted proxy that does not say https
    assert "Secure" not in await _cookie(behind, **{"X-Forwarded-Proto": "http, https"})


def _settings(populated: Populated, trusted: tuple[str, ...]) -> Settings:
    settings = ui_settings(populated.db_path, ADMIN_KEY)
    return replace(settings, server=replace(settings.server, trusted_proxies=trusted))


async def test_logout_revokes_a_copied_cookie_and_sessions_expire(make_ui_server: UiServerFactory,
                                                                  aiohttp_client: AiohttpClient) -> None:
    server = await make_ui_server()
    clock = Clock()
    server.app[SESSIONS].clock = clock
    client: UiClient = await aiohttp_client(server)
    first = (await _login(client, ADMIN_KEY)).cookies["ctxproxy_admin"].value
    copied = {"Cookie": f"ctxproxy_admin={first}"}
    assert (await client.get("/ui/api/conversations", headers=copied)).status == 200
    await client.post("/ui/logout", allow_redirects=False)
    assert (await client.get("/ui/api/conversations", headers=copied)).status == 401
    clock.now += 10
    second = (await _login(client, ADMIN_KEY)).cookies["ctxproxy_admin"].value
    assert second != first
    live = {"Cookie": f"ctxproxy_admin={second}"}
    assert (await client.get("/ui/api/conversations", headers=live)).status == 200
    clock.now += SESSION_MAX_AGE_S
    assert (await client.get("/ui/api/conversations", headers=live)).status == 401


async def test_repeated_failures_get_429_even_with_the_right_key(make_ui_server: UiServerFactory,
                                                                 aiohttp_client: AiohttpClient) -> None:
    server = await make_ui_server()
    clock = Clock()
    server.app[SESSIONS].clock = clock
    client: UiClient = await aiohttp_client(server)
    for _ in range(FAILURE_LIMIT):
        assert (await _login(client, "wrong")).status == 401
    locked = await _login(client, ADMIN_KEY)
    assert locked.status == 429 and locked.headers["Retry-After"] == str(int(LOCKOUT_S))
    assert "ctxproxy_admin" not in locked.cookies
    clock.now += LOCKOUT_S
    assert (await _login(client, ADMIN_KEY)).status == 303


async def test_bearer_scheme_is_case_insensitive(make_ui_server: UiServerFactory,
                                                 aiohttp_client: AiohttpClient) -> None:
    client: UiClient = await aiohttp_client(await make_ui_server())
    for scheme in ("Bearer", "bearer", "BEARER"):
        resp = await client.get("/ui/api/conversations", headers={"Authorization": f"{scheme} {ADMIN_KEY}"})
        assert resp.status == 200
