"""Normalisation and hash-chain identity (store/encoding/identity.py)."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.encoding.identity import canonical_json, chain_hashes, content_hash, normalise_message

BASE_REPLY: dict[str, Any] = {"role": "assistant", "content": "The order is 4711."}

SDK_NOISE = [
    {"refusal": None},
    {"annotations": []},
    {"audio": None},
    {"function_call": None},
    {"tool_calls": []},
    {"name": ""},
    {"pinned": True},
    {"pinned": False},
    {"reasoning_content": "internal"},  # provider extras outside the kept keys
    {"refusal": None, "annotations": [], "audio": None, "tool_calls": None},
]


@pytest.mark.parametrize("noise", SDK_NOISE, ids=lambda n: ",".join(n))
def test_sdk_noise_does_not_change_identity(noise: dict[str, Any]) -> None:
    noisy = {**BASE_REPLY, **noise}
    assert normalise_message(noisy) == normalise_message(BASE_REPLY)
    assert content_hash(noisy) == content_hash(BASE_REPLY)


def test_text_parts_equal_joined_string() -> None:
    parts = {"role": "user",
             "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]}
    assert normalise_message(parts) == {"role": "user", "content": "Hello there"}


def test_mixed_parts_stay_a_list_and_drop_empty_fields() -> None:
    m = {"role": "user", "content": [{"type": "text", "text": "see"},
                                      {"type": "image_url",
                                       "image_url": {"url": "https://x/y.png", "detail": None}}]}
    assert normalise_message(m)["content"] == [{"type": "text", "text": "see"},
                                                {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]


def test_tool_calls_reduced_to_identity_fields() -> None:
    call = {"id": "call_1", "type": "function", "index": 0,
            "function": {"name": "lookup", "arguments": '{"q": 1}', "parsed": None}}
    m = {"role": "assistant", "content": None, "tool_calls": [call]}
    assert normalise_message(m) == {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":1}'}}]}


def test_different_content_changes_hash() -> None:
    assert content_hash(BASE_REPLY) != content_hash({**BASE_REPLY, "content": "The order is 4712."})
    assert content_hash({"role": "tool", "tool_call_id": "a", "content": "x"}) != content_hash(
        {"role": "tool", "tool_call_id": "b", "content": "x"})


def test_chain_formula_matches_contract() -> None:
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    first = hashlib.sha256(canonical_json(normalise_message(msgs[0])).encode()).hexdigest()
    second = hashlib.sha256((first + canonical_json(normalise_message(msgs[1]))).encode()).hexdigest()
    assert chain_hashes(msgs) == [first, second]
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'


def test_chain_depends_on_order_and_prefix() -> None:
    a, b = {"role": "user", "content": "a"}, {"role": "user", "content": "b"}
    assert chain_hashes([a, b])[1] != chain_hashes([b, a])[1]
    assert chain_hashes([a, b])[:1] == chain_hashes([a])


def test_normalise_does_not_mutate_input() -> None:
    m = {"role": "assistant", "content": [{"type": "text", "text": "x"}], "pinned": True, "refusal": None}
    before = copy.deepcopy(m)
    normalise_message(m)
    assert m == before


_text = st.text(max_size=40)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": _text},
    optional={"name": st.text(min_size=1, max_size=8), "tool_call_id": st.text(min_size=1, max_size=8)})
_NOISE_KEYS = ["refusal", "annotations", "audio", "function_call", "pinned", "tool_calls"]
_noise: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
    st.sampled_from(_NOISE_KEYS), st.sampled_from([None, [], {}, "", True, False]), max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_message, _noise, st.booleans()), min_size=1, max_size=8))
def test_chain_stable_under_sdk_noise(items: list[tuple[dict[str, Any], dict[str, Any], bool]]) -> None:
    """Adding empty SDK fields, `pinned`, or splitting text into parts never changes the chain."""
    clean = [m for m, _, _ in items]
    noisy = []
    for m, noise, as_parts in items:
        extra = {k: v for k, v in noise.items() if k == "pinned" or v in (None, [], {}, "")}
        body = {**m, **extra}
        if as_parts and m["content"]:
            half = len(m["content"]) // 2
            body["content"] = [{"type": "text", "text": m["content"][:half]},
                               {"type": "text", "text": m["content"][half:]}]
        noisy.append(body)
    assert chain_hashes(noisy) == chain_hashes(clean)
