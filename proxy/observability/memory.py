"""The process's bounded caches, each with the bytes it holds and its bound (for /metrics and the bench).

Request-path caches only (the ones that fill with traffic): the running-hash memos
(store/encoding/running_hashes.py) and the store's stored-prefix rows (store/history/prefix_rows.py).
SQLite's own page cache is bounded by `store.cache_mib`, its memory map by `store.mmap_mib`
(docs/operations.md "Memory").
"""

from __future__ import annotations

from proxy.wire.anthropic import Translations
from proxy.wire.responses import Translations as ResponsesTranslations
from store.encoding import running_hashes
from store.history.prefix_rows import PrefixRows


def cache_fill(store: object | None, translations: Translations | None = None,
               items: ResponsesTranslations | None = None) -> dict[str, tuple[int, int]]:
    """Cache name -> (bytes held, bound in bytes); `store`'s prefix rows when it keeps them, and the
    Messages and Responses routes' translations (proxy/wire/anthropic.py, responses.py) when given."""
    out = {name: (memo.held_bytes, memo.max_bytes) for name, memo in running_hashes.named().items()}
    rows = getattr(store, "prefix_rows", None)
    if isinstance(rows, PrefixRows):
        out["prefix_rows"] = (rows.held_bytes, rows.max_bytes)
    if translations is not None:
        out["anthropic_translations"] = (translations.held_bytes, translations.max_bytes)
    if items is not None:
        out["responses_translations"] = (items.held_bytes, items.max_bytes)
    return out
