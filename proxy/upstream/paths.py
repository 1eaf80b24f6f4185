"""Upstream URLs confined to the entry's `api_base` path: a client's path is appended, never resolved.

A forwarded path is checked once, in every encoding a server on the way might decode (plain,
percent-encoded, double-encoded, with encoded slashes or backslashes): a `.` or `..` segment, a
backslash or a control character at any decoding is refused. What passes is appended to the base
path still encoded, as the client sent it, and the URL is built without normalisation, so no dot
segment can be resolved against the upstream URL by yarl, aiohttp or the provider.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote, unquote

from yarl import URL

from config.errors import InvalidRequestError

MAX_DECODINGS = 3  # percent-decodings checked; a path still changing after them is refused
DOT_SEGMENTS = frozenset({".", ".."})
# Characters a path segment may carry unescaped (RFC 3986 pchar), plus `%` for existing escapes.
PCHAR_SAFE = "!$&'()*+,;=:@%-._~/"


def decodings(tail: str) -> Iterator[str]:
    """`tail` as sent, then decoded again and again while decoding changes it."""
    current = tail
    for _ in range(MAX_DECODINGS + 1):
        yield current
        decoded = unquote(current)
        if decoded == current:
            return
        current = decoded
    yield "\x00"  # still changing: refused like a control character


def unsafe_reason(tail: str) -> str | None:
    """Why `tail` could leave the base path once some server decodes it; None when it cannot."""
    for form in decodings(tail):
        if "\\" in form:
            return "it holds a backslash"
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in form):
            return "it holds a control character or is encoded too many times"
        if any(segment.split(";", 1)[0] in DOT_SEGMENTS for segment in form.split("/")):
            return "a segment is '.' or '..'"
    return None


def check_tail(tail: str, shown: str) -> None:
    """Refuse (400, naming `shown`, the client's request) a tail that could leave the base path."""
    reason = unsafe_reason(tail)
    if reason is not None:
        raise InvalidRequestError(f"Invalid URL ({shown}): {reason} once decoded; ctxproxy forwards "
                                  "only paths under the upstream's base path", code="invalid_path")


def confined_url(api_base: str, tail: str, raw_query: str, shown: str) -> URL:
    """`{api_base}/{tail}?{raw_query}`: the checked tail appended still encoded, nothing resolved."""
    check_tail(tail, shown)
    base = URL(api_base)
    path = base.raw_path.rstrip("/") + "/" + quote(tail.lstrip("/"), safe=PCHAR_SAFE)
    return URL.build(scheme=base.scheme, authority=base.raw_authority, path=path,
                     query_string=raw_query, encoded=True)


def raw_tail(raw_path: str, prefix_segments: int) -> str:
    """The still-encoded path after its first `prefix_segments` segments (`/v1/x%2Fy` -> `x%2Fy`)."""
    parts = raw_path.split("/", prefix_segments + 1)
    return parts[prefix_segments + 1] if len(parts) > prefix_segments + 1 else ""
