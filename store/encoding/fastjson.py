"""JSON encodings byte-identical to the json module's, through orjson wherever that is provably so.

A resent 100k-token history is serialised three times per request (identity hashes, forwarded
hashes, the upstream body); json's encoder made that the largest cost of the request path. orjson
writes the same bytes as `json.dumps(..., ensure_ascii=False, separators=(",", ":"))` for values
made only of dicts (str keys), lists, tuples, str, int (64-bit), bool and None; floats (another
shortest-repr spelling), other types, big ints and lone surrogates take json's path, unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_ASCII_SORTED = json.JSONEncoder(sort_keys=True, separators=(",", ":"))  # ensure_ascii=True
_LEAVES = (str, int, bool, type(None))
_CONTAINERS = (dict, list, tuple)


def is_plain(value: Any) -> bool:
    """Whether `value` holds only the types both encoders spell alike (iterative: any depth)."""
    stack = [value]
    while stack:
        node = stack.pop()
        cls = node.__class__
        if cls is dict:
            children = node.values()
        elif cls is list or cls is tuple:
            children = node
        else:
            if cls not in _LEAVES:
                return False
            continue
        for child in children:
            kind = child.__class__
            if kind is str:
                continue
            if kind in _CONTAINERS:
                stack.append(child)
            elif kind not in _LEAVES:
                return False
    return True


def dumps_compact(value: Any) -> bytes:
    """`json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()`, faster.

    A container that is not plain (a request body with a `temperature` float, say) is written member
    by member, as json writes it, so only the members that need json's encoder take it."""
    if is_plain(value):
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError:  # a big int, a lone surrogate, a non-str key: json decides
            pass
    elif value.__class__ is dict and all(k.__class__ is str for k in value):
        return b"{" + b",".join(dumps_compact(k) + b":" + dumps_compact(v) for k, v in value.items()) + b"}"
    elif value.__class__ is list or value.__class__ is tuple:
        return b"[" + b",".join(dumps_compact(v) for v in value) + b"]"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def dumps_sorted(value: Any) -> bytes:
    """`json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()`."""
    if is_plain(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def canonical_ascii(value: Any) -> bytes:
    """`json.dumps(value, sort_keys=True, separators=(",", ":")).encode()` (non-ASCII escaped): the
    canonical form identity hashes. orjson's output is used when it is ASCII already (DEL, which
    json escapes, is escaped here too); other text takes json's own escaping."""
    if is_plain(value):
        try:
            out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass
        else:
            if out.isascii():
                return out.replace(b"\x7f", b"\\u007f") if b"\x7f" in out else out
    return _ASCII_SORTED.encode(value).encode()
