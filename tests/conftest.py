"""Shared test set-up: no network, offline model metadata, isolated env, proxy + fake upstream.

The network block is installed at import time (before any test module imports litellm or the
openai SDK) and lasts the whole session: connecting a socket to anything but loopback or a Unix
socket, or resolving a non-local name, raises NetworkBlockedError.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest
from hypothesis import settings as hypothesis_settings

if TYPE_CHECKING:  # imported for real only in fixtures: the network block must come first
    import openai
    from aiohttp.test_utils import TestServer
    from pytest_aiohttp import AiohttpServer

    from config.settings import Settings
    from proxy.app import EngineFactory
    from proxy.engine_host import EngineHost
    from tests.fakes.anthropic_upstream import FakeAnthropic
    from tests.fakes.upstream import FakeUpstream

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

# Property tests are deterministic: the same examples every run (no example database either).
hypothesis_settings.register_profile("ctxproxy", derandomize=True, database=None)
hypothesis_settings.load_profile("ctxproxy")

LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", ""})
TEST_API_KEY = "sk-test-0123456789abcdefghijklmnop"
ISOLATED_ENV_PREFIXES = ("CTXPROXY_", "OPENAI_", "ANTHROPIC_", "AZURE_", "GEMINI_", "LITELLM_PROXY")


class NetworkBlockedError(OSError):
    """Raised when a test tries to reach beyond loopback."""


def _is_local_host(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode()
    host = str(host).strip("[]").split("%")[0]
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_address(address: Any) -> None:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_local_host(host):
        raise NetworkBlockedError(f"network access blocked in tests: {address!r}")


def _install_network_block() -> None:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.SocketType, address: Any) -> None:
        _check_address(address)
        real_connect(self, address)

    def connect_ex(self: socket.SocketType, address: Any) -> int:
        _check_address(address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_local_host(host):
            raise NetworkBlockedError(f"name resolution blocked in tests: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    # Patching the class (not one socket) is the point: every socket any library opens is checked.
    socket.socket.connect = connect  # type: ignore[method-assign]  # deliberate class-level patch
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]  # deliberate class-level patch
    socket.getaddrinfo = getaddrinfo


_install_network_block()
# The SDK clients (and the httpx they share with litellm) load now, on this thread: a test importing
# them while a server's warm-up thread imports litellm could get a partially initialised httpx
# (concurrent imports that need each other's module locks; seen as `httpx has no attribute Timeout`).
import anthropic  # noqa: E402,F401
import openai  # noqa: E402,F401,F811

# Read CTXPROXY_TEST_PG_URL (the PostgreSQL test server) now, before `isolated_env` clears CTXPROXY_*.
from tests.pg import server as _pg_server  # noqa: E402,F401

TESTS = Path(__file__).resolve().parent
# Folders whose every test is an integration test: a server subprocess, PostgreSQL, a wheel build.
INTEGRATION_FOLDERS = frozenset({"e2e", "pg", "packaging"})
POSTGRES_FIXTURES = frozenset({"pg_url", "pg_database"})


def needs_postgres(item: pytest.Item) -> bool:
    """Asks for the PostgreSQL fixtures, or runs with a `postgres` parameter (the store backends)."""
    if POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgres" in callspec.params.values()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the integration tests (`make test-fast` leaves them out): by folder, by the PostgreSQL
    fixtures and parameters, or explicitly (`@pytest.mark.integration` on a subprocess or browser test)."""
    for item in items:
        parts = item.path.resolve().relative_to(TESTS).parts
        if (parts and parts[0] in INTEGRATION_FOLDERS) or needs_postgres(item):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's keys or ctxproxy overrides."""
    for name in list(os.environ):
        if name.startswith(ISOLATED_ENV_PREFIXES):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def fresh_resends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's engines start with no previous requests in memory (compaction/resend/previous.py): a
    process has one store, so what a test's store held must not meet the next test's."""
    from compaction import engine
    from compaction.resend import previous as resend

    monkeypatch.setattr(engine, "RESENDS", resend.Resends(name="resends"))  # reported as the real one is


@pytest.fixture
async def fake_upstream() -> AsyncIterator[FakeUpstream]:
    from tests.fakes.upstream import FakeUpstream

    fake = await FakeUpstream().start()
    try:
        yield fake
    finally:
        await fake.close()


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[FakeAnthropic]:
    """The fake Anthropic Messages API (tests/fakes/anthropic_upstream.py), started and closed."""
    from tests.fakes.anthropic_upstream import FakeAnthropic

    fake = await FakeAnthropic().start()
    try:
        yield fake
    finally:
        await fake.close()


def proxy_settings_for(upstream_url: str, store_path: Path, **server: Any) -> Settings:
    """Settings routing a few model names to the fake upstream (no litellm metadata lookups)."""
    from config.settings import LiteLLMParams, ModelEntry, ServerSettings, Settings, StoreSettings

    models = (
        ModelEntry("gpt-4o-mini", LiteLLMParams("openai/gpt-4o-mini", upstream_url), 128_000),
        ModelEntry("keyed-model", LiteLLMParams("openai/gpt-4o", upstream_url,
                                                "sk-upstream-configured-0123456789"), 128_000),
        ModelEntry("fake-*", LiteLLMParams("openai/*", upstream_url), 128_000),
    )
    server_settings = replace(ServerSettings(), **{"upstream_timeout_s": 30.0, **server})
    return Settings(model_list=models, store=StoreSettings(path=str(store_path)),
                    server=server_settings)


class ProxyFactory(Protocol):
    """The `make_proxy` fixture: a started TestServer running create_app."""

    def __call__(self, settings: Settings | None = None, *, engine_factory: EngineFactory | None = None,
                 log_stream: Any = None, **server: Any) -> Awaitable[TestServer]: ...


@pytest.fixture
def proxy_engine_factory() -> EngineFactory | None:
    """Engine factory for `make_proxy` (None: the real compaction.engine.Engine); override per suite."""
    return None


@pytest.fixture
def app_store_url(request: pytest.FixtureRequest) -> str | None:
    """With TEST_APP_STORE=postgres, apps built by `make_proxy` use a PostgreSQL schema of their own
    instead of the SQLite file in tmp_path (a way to run the HTTP suites on the shared store)."""
    if os.environ.get("TEST_APP_STORE") != "postgres":
        return None
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
async def make_proxy(aiohttp_server: AiohttpServer, fake_upstream: FakeUpstream, tmp_path: Path,
                     proxy_engine_factory: EngineFactory | None, app_store_url: str | None) -> ProxyFactory:
    """`await make_proxy(settings=None, engine_factory=None, log_stream=None, **server_overrides)`.

    Returns a started aiohttp TestServer running create_app (the real Engine unless a factory is
    given), with the store in tmp_path and every model routed to the fake upstream.
    """
    from proxy.app import create_app

    async def factory(settings: Settings | None = None, *, engine_factory: EngineFactory | None = None,
                      log_stream: Any = None, **server: Any) -> TestServer:
        settings = settings or proxy_settings_for(fake_upstream.url, tmp_path / "store.db", **server)
        if app_store_url is not None:
            settings = replace(settings, store=replace(settings.store, url=app_store_url))
        app = create_app(settings, engine_factory=engine_factory or proxy_engine_factory,
                         log_stream=log_stream)
        return await aiohttp_server(app)  # TestServer enables handler_cancellation

    return factory


async def settled(server: TestServer) -> None:
    """Wait until every engine thread has done what was queued on it so far: a non-streaming reply
    is stored after the client is answered (on its conversation's engine, whichever that is), so a
    test reading the store directly waits first."""
    from proxy import appkeys

    async def drained(host: EngineHost) -> None:
        await host.run(lambda: None)

    await server.app[appkeys.HOST].each(drained)


@pytest.fixture
async def proxy_server(make_proxy: ProxyFactory) -> TestServer:
    return await make_proxy()


@pytest.fixture
def proxy_url(proxy_server: TestServer) -> str:
    return str(proxy_server.make_url("")).rstrip("/")


@pytest.fixture
async def openai_client(proxy_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    import openai

    client = openai.AsyncOpenAI(base_url=proxy_url + "/v1", api_key=TEST_API_KEY, max_retries=0)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A throw-away PostgreSQL database for this test session (skips when no server answers)."""
    from tests.pg import server

    if not server.server_answers():
        pytest.skip(server.SKIP_REASON)
    url = server.create_database()
    yield url
    server.drop_database(url)


@pytest.fixture
def pg_url(pg_database: str) -> Iterator[str]:
    """A store URL of its own (a fresh schema in the session database), dropped after the test."""
    from tests.pg import server

    url = server.create_schema(pg_database)
    yield url
    server.drop_schema(url)
