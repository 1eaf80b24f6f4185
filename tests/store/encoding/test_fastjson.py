"""store/encoding/fastjson.py writes exactly the json module's bytes, whatever the value (orjson or not)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.encoding.fastjson import canonical_ascii, dumps_compact, dumps_sorted

# Text with what the encoders could spell differently: control characters, DEL, quotes,
# backslashes, non-ASCII, astral characters, U+2028, and lone surrogates.
TEXT = st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(
    ["\x00", "\x1f", "\x7f", '"', "\\", "/", "\u2028", "\ud800", "é", "\U0001f600", "\ufeff"])))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4),
    st.tuples(inner, inner)), max_leaves=20)


def _json(value: Any, **kw: Any) -> bytes | type[Exception]:
    try:
        return json.dumps(value, separators=(",", ":"), **kw).encode()
    except (UnicodeEncodeError, TypeError, ValueError) as exc:
        return type(exc)


def _fast(encode: Any, value: Any) -> bytes | type[Exception]:
    try:
        out: bytes = encode(value)
    except (UnicodeEncodeError, TypeError, ValueError) as exc:
        return type(exc)
    return out


@settings(max_examples=400)
@given(VALUES)
def test_every_encoding_is_the_json_modules(value: Any) -> None:
    assert _fast(dumps_compact, value) == _json(value, ensure_ascii=False)
    assert _fast(dumps_sorted, value) == _json(value, ensure_ascii=False, sort_keys=True)
    assert _fast(canonical_ascii, value) == _json(value, sort_keys=True)


@pytest.mark.parametrize("value", [
    {"b": "x\x7fy", "a": [1, None, True, False]},
    {"\uffff": 1, "\U00010000": 2, "a": {"z": "", "y": "é"}},
    {"f": 1e16, "g": 0.1, "h": 2**64},
    [{"role": "user", "content": "plain ASCII text"}],
    {1: "int key"},
])
def test_edge_values(value: Any) -> None:
    assert dumps_compact(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert dumps_sorted(value) == json.dumps(value, ensure_ascii=False, sort_keys=True,
                                             separators=(",", ":")).encode()
    assert canonical_ascii(value) == json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def test_other_types_are_refused_like_json() -> None:
    import datetime

    with pytest.raises(TypeError):
        dumps_compact({"when": datetime.datetime(2026, 1, 1)})
