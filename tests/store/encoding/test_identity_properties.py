"""Conversation identity in both directions (store/encoding/identity.py): what clients do to a history they
resend (re-serialised tool arguments, key order, spacing, moved `cache_control` marks, text split
into parts) never splits a conversation; a change of any message's meaning (role, text, tool name,
call id, an argument's value) never lets two histories hash alike."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from store.encoding.identity import canonical_arguments, chain_hashes, content_hash

JSON = dict[str, Any]
_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=12)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
_arguments = st.dictionaries(st.text(min_size=1, max_size=8), _values, max_size=4)
_words = st.text(min_size=1, max_size=30)
_names = st.text(alphabet="abcdefgh_", min_size=1, max_size=8)
_OTHER_ROLE = {"user": "assistant", "assistant": "user", "system": "developer", "tool": "user"}


@st.composite
def _histories(draw: st.DrawFn) -> list[JSON]:
    """A chat history: user turns, assistant turns with tool calls, and their results."""
    out: list[JSON] = [{"role": "system", "content": draw(_words)}]
    for turn in range(draw(st.integers(1, 4))):
        out.append({"role": "user", "content": draw(_words)})
        calls = [{"id": f"call_{turn}_{i}", "type": "function",
                  "function": {"name": draw(_names), "arguments": json.dumps(draw(_arguments))}}
                 for i in range(draw(st.integers(0, 2)))]
        reply: JSON = {"role": "assistant", "content": draw(st.none() | _words)}
        if calls:
            reply["tool_calls"] = calls
        out.append(reply)
        out += [{"role": "tool", "tool_call_id": c["id"], "content": draw(_words)} for c in calls]
    return out


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in another order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


def _reserialised(arguments: str, rng: random.Random) -> str:
    """Arguments as another client writes them: other key order, spacing, indentation, padding."""
    value = _shuffled(json.loads(arguments), rng)
    style = rng.choice([{"separators": (",", ":")}, {"separators": (", ", ": ")}, {"indent": 2},
                        {"indent": "\t", "ensure_ascii": False}])
    pad = rng.choice(["", " ", "\n", " \t"])
    return pad + json.dumps(value, **style) + pad  # type: ignore[arg-type]


def _as_client_resends(message: JSON, rng: random.Random) -> JSON:
    """`message` as an agent echoes it: arguments re-serialised, text as parts, a cache mark added."""
    out = dict(message)
    if "tool_calls" in out:
        out["tool_calls"] = [{**c, "function": {**c["function"], "arguments": _reserialised(
            c["function"]["arguments"], rng)}} for c in out["tool_calls"]]
    text = out.get("content")
    if isinstance(text, str) and text and rng.random() < 0.7:
        cut = rng.randrange(len(text) + 1)
        parts: list[JSON] = [{"type": "text", "text": text[:cut]}, {"type": "text", "text": text[cut:]}]
        if rng.random() < 0.5:
            parts[-1]["cache_control"] = {"type": "ephemeral"}
        out["content"] = parts
    return out


@settings(max_examples=150, deadline=None)
@given(_histories(), st.randoms(use_true_random=False))
def test_what_clients_do_to_a_resent_history_never_splits_it(history: list[JSON], rng: random.Random) -> None:
    resent = [_as_client_resends(m, rng) for m in history]
    assert chain_hashes(resent) == chain_hashes(history)
    assert [content_hash(m) for m in resent] == [content_hash(m) for m in history]


@settings(max_examples=150, deadline=None)
@given(_arguments, st.randoms(use_true_random=False))
def test_arguments_hash_by_their_value(arguments: JSON, rng: random.Random) -> None:
    written = json.dumps(arguments)
    assert canonical_arguments(_reserialised(written, rng)) == canonical_arguments(written)


def test_a_moved_cache_mark_on_mixed_parts_keeps_identity() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x/y.png"}}
    marked = {"role": "user", "content": [image, {"type": "text", "text": "see", "cache_control": {
        "type": "ephemeral"}}]}
    plain = {"role": "user", "content": [image, {"type": "text", "text": "see"}]}
    assert content_hash(marked) == content_hash(plain)


def _changed_meaning(message: JSON, rng: random.Random, tag: str) -> JSON:
    """`message` with one part of its meaning changed: role, text, or one of its tool calls' name,
    call id or an argument's value."""
    out: JSON = json.loads(json.dumps(message))
    choices = ["role", "text"] + (["tool", "argument", "call_id"] if out.get("tool_calls") else [])
    choice = rng.choice(choices)
    if choice == "role":
        out["role"] = _OTHER_ROLE[out["role"]]
    elif choice == "text":
        out["content"] = (out.get("content") or "") + tag
    else:
        call = rng.choice(out["tool_calls"])["function"] if choice != "call_id" else None
        if choice == "tool" and call is not None:
            call["name"] += tag
        elif choice == "argument" and call is not None:
            value = json.loads(call["arguments"])
            key = rng.choice(list(value)) if value else "k" + tag
            value[key] = [value.get(key), tag]
            call["arguments"] = json.dumps(value)
        else:
            out["tool_calls"][0]["id"] += tag
    return out


@settings(max_examples=200, deadline=None)
@given(_histories(), st.randoms(use_true_random=False), st.data())
def test_a_change_of_meaning_never_merges_two_histories(history: list[JSON], rng: random.Random,
                                                       data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(history) - 1))
    other = [*history[:at], _changed_meaning(history[at], rng, "~x"), *history[at + 1:]]
    mine, theirs = chain_hashes(history), chain_hashes(other)
    assert mine[:at] == theirs[:at]
    assert all(a != b for a, b in zip(mine[at:], theirs[at:], strict=True))
    assert content_hash(other[at]) != content_hash(history[at])


@settings(max_examples=100, deadline=None)
@given(_arguments, _arguments)
def test_arguments_of_different_values_never_hash_alike(a: JSON, b: JSON) -> None:
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (canonical_arguments(json.dumps(a)) == canonical_arguments(json.dumps(b))) == same


def test_arguments_that_are_not_json_are_kept_as_they_are() -> None:
    assert canonical_arguments("ls -la") == "ls -la"
    assert canonical_arguments('"ls"') != canonical_arguments("ls")
    assert canonical_arguments(' {"b": 1, "a": [1, 2]}\n') == '{"a":[1,2],"b":1}'
