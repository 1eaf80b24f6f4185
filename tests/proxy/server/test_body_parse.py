"""proxy/server/body.py reads a body exactly as json.loads would: orjson's parse is taken only where it
is json's own, every other body (and every error) is json's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config.errors import InvalidRequestError
from proxy.server.body import parse_json_object

TEXT = st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(
    ["\x00", "\x1f", "\x7f", '"', "\\", "/", "\u2028", "é", "\U0001f600", "\ufeff"])))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
                    st.floats(allow_nan=True, allow_infinity=True), TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)), max_leaves=20)
# Number spellings json and orjson could read apart: long mantissas, exponents at the edges.
NUMBERS = st.builds(lambda sign, digits, frac, exp: f"{sign}{digits}{frac}{exp}",
                    st.sampled_from(["", "-"]), st.from_regex(r"(0|[1-9][0-9]{0,30})", fullmatch=True),
                    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,25}", fullmatch=True)),
                    st.one_of(st.just(""), st.from_regex(r"[eE][+-]?[0-9]{1,3}", fullmatch=True)))


def _outcome(read: Any, raw: bytes) -> tuple[str, str]:
    """What a reader makes of `raw`: its value spelled exactly (types, key order), or its error."""
    try:
        return "value", repr(read(raw))
    except InvalidRequestError as exc:
        return "error", f"{exc.message}|{exc.param}|{exc.code}"


def _json_reader(raw: bytes) -> dict[str, Any]:
    """parse_json_object as it was: json's parse alone."""
    return parse_json_object(raw, fast_path=False)


@pytest.mark.slow
@settings(max_examples=400)
@given(st.dictionaries(TEXT, VALUES, max_size=5), st.booleans())
def test_any_object_reads_as_json_reads_it(value: dict[str, Any], ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert _outcome(parse_json_object, raw) == _outcome(_json_reader, raw)


@settings(max_examples=400)
@given(NUMBERS)
def test_numbers_read_alike(number: str) -> None:
    raw = f'{{"n":{number},"l":[{number}]}}'.encode()
    assert _outcome(parse_json_object, raw) == _outcome(_json_reader, raw)


@pytest.mark.parametrize("raw", [
    b'{"a":"\\ud800"}', b'{"a":"\\udc00x"}', b'{"\\ud800":1}', b'{"a":"\\ud83d\\ude00"}',
    b'{"a":123456789012345678901234567890}', b'{"a":-9223372036854775809}', b'{"a":18446744073709551616}',
    b'{"a":1e400}', b'{"a":NaN}', b'{"a":-Infinity}', b'\xef\xbb\xbf{"a":1}', b'{"a":"\xed\xa0\x80"}',
    b'{"a":1,"a":2,"b":3}', b'{"a":"x\x01y"}', b'{"a":1}x', b"", b"[1]", b'"x"', b"7", b'{"a":1.0}',
    '{"a":"é"}'.encode("utf-16"), b'{"a":' * 200 + b"1" + b"}" * 200, b'{"a":[' * 1100 + b"]" * 1100 + b"}",
])
def test_edge_bodies_read_as_json_reads_them(raw: bytes) -> None:
    assert _outcome(parse_json_object, raw) == _outcome(_json_reader, raw)


def test_a_big_integer_is_read_exactly() -> None:
    """orjson would read it as a float; json keeps the integer."""
    big = 2**64 + 1
    assert parse_json_object(f'{{"seed":{big},"x":[-{big}]}}'.encode()) == {"seed": big, "x": [-big]}
