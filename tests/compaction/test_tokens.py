"""Token counting: tokenizer choice, OpenAI framing, offline loading from litellm's bundled files."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction import llm, tokens
from compaction.tokens import TokenCounter, encoding_for_model


@pytest.mark.parametrize(("model", "expected"), [
    ("gpt-4o", "o200k_base"), ("openai/gpt-4o-mini", "o200k_base"), ("gpt-4.1-nano", "o200k_base"),
    ("gpt-4.5-preview", "o200k_base"), ("gpt-5", "o200k_base"), ("o1-mini", "o200k_base"),
    ("o3", "o200k_base"), ("o4-mini", "o200k_base"), ("chatgpt-4o-latest", "o200k_base"),
    ("azure/gpt-4o", "o200k_base"), ("gpt-4", "cl100k_base"), ("gpt-4-turbo", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"), ("text-embedding-3-small", "cl100k_base"),
    ("mistral/mistral-large", "cl100k_base"), ("", "cl100k_base"),
    ("claude-3-5-sonnet-20241022", "hf:anthropic"), ("anthropic/claude-sonnet-4", "hf:anthropic"),
    ("deepseek/deepseek-chat", "hf:deepseek"),
])
def test_encoding_choice(model: str, expected: str) -> None:
    assert encoding_for_model(model) == expected


def test_counter_cached_per_encoding() -> None:
    assert TokenCounter.for_model("gpt-4o") is TokenCounter.for_model("openai/gpt-4o-mini")
    assert TokenCounter.for_model("gpt-4o") is not TokenCounter.for_model("gpt-4")


def test_known_counts() -> None:
    assert TokenCounter.for_model("gpt-4o").count_text("hello world") == 2
    assert TokenCounter.for_model("gpt-4").count_text("hello world") == 2
    assert TokenCounter.for_model("gpt-4o").count_text("") == 0


@pytest.mark.parametrize("model", ["claude-3-haiku", "deepseek-chat"])
def test_hf_tokenizers_count(model: str) -> None:
    counter = TokenCounter.for_model(model)
    assert 0 < counter.count_text("The quick brown fox jumps over the lazy dog") < 20


def test_tiktoken_loads_from_litellm_dir_without_network(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import tiktoken.load

    def no_download(blobpath: str) -> bytes:
        raise AssertionError(f"tiktoken tried to fetch {blobpath}")

    def no_connect(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(tiktoken.load, "read_file", no_download)
    monkeypatch.setattr(socket.socket, "connect", no_connect)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    monkeypatch.delenv("CUSTOM_TIKTOKEN_CACHE_DIR", raising=False)
    for name in ("o200k_base", "cl100k_base"):
        encode_len = tokens._load_tiktoken(name)  # uncached load
        assert encode_len("hello world") == 2
    assert llm.bundled_tokenizers_dir().joinpath(
        "fb374d419588a4632f3f557e76b4b70aebbca790").is_file()  # sha1 of the o200k URL
    import os
    assert os.environ["TIKTOKEN_CACHE_DIR"] == str(llm.bundled_tokenizers_dir())


def test_token_counting_does_not_import_litellm() -> None:
    TokenCounter.for_model("gpt-4o").count_text("x")
    TokenCounter.for_model("claude-3").count_text("x")
    assert "litellm" not in sys.modules or llm.get_litellm.cache_info().currsize == 1


def test_message_framing() -> None:
    c = TokenCounter.for_model("gpt-4o")
    msg = {"role": "user", "content": "hello world"}
    assert c.count_message(msg) == 3 + c.count_text("user") + 2
    named = {**msg, "name": "bob"}
    assert c.count_message(named) == c.count_message(msg) + c.count_text("bob") + 1
    assert c.count_messages([msg, msg]) == 2 * c.count_message(msg) + 3


def test_content_parts_and_images() -> None:
    c = TokenCounter.for_model("gpt-4o")
    as_string = c.count_message({"role": "user", "content": "hello world"})
    parts = {"role": "user", "content": [{"type": "text", "text": "hello world"}]}
    assert c.count_message(parts) == as_string
    low = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x", "detail": "low"}}]}
    high = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    assert c.count_message(high) - c.count_message(low) == tokens.IMAGE_TOKENS_HIGH - tokens.IMAGE_TOKENS_LOW


def test_tool_calls_and_results_count() -> None:
    c = TokenCounter.for_model("gpt-4o")
    bare = {"role": "assistant", "content": None}
    call = {**bare, "tool_calls": [{"id": "call_1", "type": "function",
                                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
    assert c.count_message(call) > c.count_message(bare) + c.count_text('{"city": "Paris"}')
    result = {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}
    assert c.count_message(result) > c.count_message({"role": "tool", "content": "sunny"})


def test_tools_schema_counted() -> None:
    c = TokenCounter.for_model("gpt-4o")
    tool = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                             "parameters": {"type": "object", "properties": {
                                                 "city": {"type": "string"}}}}}
    assert c.count_tools([]) == 0
    one = c.count_tools([tool])
    assert one > c.count_text("get_weather") + c.count_text("Weather for a city")
    assert c.count_tools([tool, tool]) == 2 * one - tokens.TOOLS_FRAMING


@given(st.lists(st.text(max_size=40), max_size=6))
def test_framing_is_additive(texts: list[str]) -> None:
    c = TokenCounter.for_model("gpt-4o")
    msgs = [{"role": "user", "content": t} for t in texts]
    assert c.count_messages(msgs) == 3 + sum(3 + 1 + c.count_text(t) for t in texts)


@pytest.mark.parametrize("part", [
    {"type": "text", "text": "word " * 500},
    {"type": "input_text", "text": "word " * 500},
    {"type": "output_text", "text": "word " * 500},
    {"type": "refusal", "refusal": "word " * 500},
])
def test_every_text_part_shape_is_counted_as_text(part: dict[str, object]) -> None:
    counter = TokenCounter.for_model("gpt-4o-mini")
    as_part = counter.count_message({"role": "user", "content": [part]})
    as_string = counter.count_message({"role": "user", "content": "word " * 500})
    assert as_part == as_string


RECOUNTED_CASES = [
    {"role": "system",
     "content": "<ctxproxy:summary id=\"s1\">\nSummary of messages 3-9.\nOrder A-1.</ctxproxy:summary>"},
    {"role": "tool", "tool_call_id": "call_7", "content": "[elided: 4,096 lines of build output]"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{\"cmd\": \"ls\"}"}}]},
    {"role": "user", "content": [{"type": "text", "text": "look"}]},
]


@pytest.mark.parametrize("message", RECOUNTED_CASES)
def test_a_recurring_count_is_the_count(message: dict[str, object]) -> None:
    counter = TokenCounter.for_model("gpt-4o-mini")
    assert counter.count_recurring(message) == counter.count_message(message)
    assert counter.count_recurring(dict(message)) == counter.count_message(message)


def spy_counter() -> tuple[TokenCounter, list[str]]:
    """A counter of words that records every text it was asked to count."""
    texts: list[str] = []

    def words(text: str) -> int:
        texts.append(text)
        return len(text.split())

    return TokenCounter("spy", words), texts


def test_a_message_built_again_is_not_tokenized_again() -> None:
    counter, texts = spy_counter()
    rendered = {"role": "system", "content": "Summary of earlier messages 3-9: the build passed."}
    first = counter.count_recurring(rendered)
    calls = len(texts)
    assert counter.count_recurring(dict(rendered)) == first and len(texts) == calls  # a new, equal dict
    counter.count_recurring({**rendered, "content": "another summary"})
    assert texts[-1] == "another summary"


def test_resent_tool_schemas_are_not_tokenized_again() -> None:
    """An agent resends the same (large) tool list every turn: counted once, then by its digest."""
    counter, texts = spy_counter()

    def read_tool(description: str) -> dict[str, Any]:
        return {"type": "function", "function": {"name": "read", "description": description,
                                                 "parameters": {"type": "object", "properties": {
                                                     "path": {"type": "string"}}}}}

    tool = read_tool("Read a file by path")
    first = counter.count_tools([tool])
    calls = len(texts)
    assert counter.count_tools([json.loads(json.dumps(tool))]) == first and len(texts) == calls
    changed = counter.count_tools([read_tool("Read a file by its path")])  # a changed schema: counted
    assert changed == first + 1 and len(texts) > calls


def test_tools_that_are_not_json_are_still_counted() -> None:
    counter = TokenCounter.for_model("gpt-4o-mini")
    tool = {"type": "function", "function": {"name": "f", "parameters": {1: {"type": "string"}}}}
    assert counter.count_tools([tool]) == counter.count_tools([tool]) > tokens.TOOLS_FRAMING
