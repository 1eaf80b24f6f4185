"""Fuzzing the HTTP handlers: whatever the body, the answer is never a 5xx, and errors are OpenAI's shape.

Bodies are built by hypothesis from malformed JSON, unicode edge cases (lone surrogates, NUL,
non-characters), wrong types and odd sizes, around otherwise plausible chat, search and expand
requests. Examples are bounded and derandomized so the suite stays fast and deterministic.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.server.params import PARAMS
from tests.conftest import TEST_API_KEY

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
EDGE_TEXT = st.sampled_from(["\ud800", "\udfff", "\x00", "\ufffe", "\U0010ffff", "\u202e", "e\u0301",
                             "\U0001f600", "", " " * 300, "ü" * 50])
TEXT = st.one_of(st.text(max_size=30), EDGE_TEXT,
                 st.lists(st.one_of(st.text(max_size=5), EDGE_TEXT), max_size=4).map("".join))
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                   st.floats(allow_nan=False), TEXT)
JSONISH = st.recursive(SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)
ROLE = st.one_of(st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"]), TEXT)
TOOL_CALL = st.fixed_dictionaries(
    {"id": st.one_of(TEXT, st.just("c1")), "type": st.sampled_from(["function", "x"]),
     "function": st.one_of(JSONISH, st.fixed_dictionaries({"name": TEXT,
                                                           "arguments": st.one_of(TEXT, JSONISH)}))})
USER_MESSAGE = st.fixed_dictionaries({"role": st.just("user"), "content": TEXT})
MESSAGE = st.one_of(USER_MESSAGE, USER_MESSAGE, JSONISH, st.fixed_dictionaries(
    {"role": ROLE, "content": st.one_of(TEXT, JSONISH)},
    optional={"tool_calls": st.lists(TOOL_CALL, max_size=2), "tool_call_id": st.one_of(TEXT, st.just("c1")),
              "name": JSONISH, "pinned": JSONISH}))
PARAM_VALUES = st.dictionaries(st.sampled_from(sorted(PARAMS)), JSONISH, max_size=3)
CHAT = st.builds(lambda model, messages, params: {"model": model, "messages": messages, **params},
                 st.one_of(st.just("gpt-4o-mini"), st.just("gpt-4o-mini"), st.just("fake-x"), JSONISH),
                 st.one_of(st.lists(MESSAGE, min_size=1, max_size=4),
                           st.lists(USER_MESSAGE, min_size=1, max_size=3), JSONISH),
                 st.one_of(st.just({}), PARAM_VALUES))
SEARCH_KEYS = ["pattern", "scope", "role", "last", "since", "before", "conversation_id",
               "all_conversations", "limit", "x"]
SEARCH = st.one_of(st.fixed_dictionaries({"pattern": TEXT}),
                   st.dictionaries(st.sampled_from(SEARCH_KEYS), JSONISH, max_size=4))
EXPAND = st.one_of(st.dictionaries(st.sampled_from(["ids", "id", "x"]), JSONISH, max_size=2),
                   st.fixed_dictionaries({"ids": st.lists(st.one_of(TEXT, st.integers()), max_size=3)}))


def encode(value: Any) -> st.SearchStrategy[bytes]:
    """The JSON of `value`, or that JSON broken: cut short, with a bad byte, or padded."""
    text = json.dumps(value).encode()
    return st.sampled_from([text, text[:len(text) // 2], text + b"\xff", b"\xef\xbb\xbf" + text,
                            text.replace(b'"', b"'", 1), b" " * 10 + text])


async def assert_never_5xx(server: TestServer, path: str, data: bytes) -> None:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TEST_API_KEY}"}
    async with aiohttp.ClientSession() as http, http.post(server.make_url(path), data=data,
                                                         headers=headers) as resp:
        raw = await resp.read()
        assert resp.status < 500, raw[:500]
        if resp.status >= 400:
            error = json.loads(raw)["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert isinstance(error["message"], str) and isinstance(error["type"], str)


@FUZZ
@given(data=st.one_of(CHAT.flatmap(encode), st.binary(max_size=200), JSONISH.flatmap(encode)))
async def test_chat_never_answers_5xx(proxy_server: TestServer, data: bytes) -> None:
    await assert_never_5xx(proxy_server, "/v1/chat/completions", data)


@FUZZ
@given(data=st.one_of(SEARCH.flatmap(encode), st.binary(max_size=100), JSONISH.flatmap(encode)))
async def test_search_never_answers_5xx(proxy_server: TestServer, data: bytes) -> None:
    await assert_never_5xx(proxy_server, "/v1/context/search", data)


@FUZZ
@given(data=st.one_of(EXPAND.flatmap(encode), st.binary(max_size=100), JSONISH.flatmap(encode)))
async def test_expand_never_answers_5xx(proxy_server: TestServer, data: bytes) -> None:
    await assert_never_5xx(proxy_server, "/v1/context/expand", data)
