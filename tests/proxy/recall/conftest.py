"""Recall fixtures: the populated store (tests/proxy/recall/recall_data.py) and the real app over it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from openai import AsyncOpenAI
from pytest_aiohttp import AiohttpServer

from proxy.app import create_app
from tests.fakes.engine import UnusedEngine
from tests.proxy.recall.recall_data import ALPHA_KEY, BETA_KEY, Populated, populate, settings_for


@pytest.fixture
def populated(tmp_path: Path) -> Populated:
    return populate(str(tmp_path / "ctxproxy.db"))


@pytest.fixture
async def base_url(populated: Populated, aiohttp_server: AiohttpServer) -> AsyncIterator[str]:
    app = create_app(settings_for(populated.path), engine_factory=lambda *_: UnusedEngine())
    server = await aiohttp_server(app)
    yield str(server.make_url("/v1"))


@pytest.fixture
def clients(base_url: str) -> Iterator[dict[str, AsyncOpenAI]]:
    """One openai SDK client per tenant key."""
    yield {"alpha": AsyncOpenAI(base_url=base_url, api_key=ALPHA_KEY, max_retries=0),
           "beta": AsyncOpenAI(base_url=base_url, api_key=BETA_KEY, max_retries=0)}
