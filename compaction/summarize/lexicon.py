"""Is a capitalised word an ordinary word or a name? BPE merge ranks as a word-frequency proxy.

The verifier must tell "Copy the text" (ordinary words at a sentence start) from "Zoe approved it"
(an invented name) without a dictionary file. The bundled cl100k tokenizer knows: a token's id is
its merge rank, and merges happen in order of frequency in its (web-scale) training text. A word
whose lowercase form (" copy") is one token ranked before its capitalised form (" Copy") is mostly
written in lowercase, so it is an ordinary word; a name ranks the other way (" Zoe" is a token,
" zoe" is not). Deterministic, offline (litellm's bundled encoding file) and loaded once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Literal

from compaction import llm

WordClass = Literal["ordinary", "name", "unknown"]
LEXICON_ENCODING = "cl100k_base"
_lock = threading.Lock()


@lru_cache(maxsize=1)
def _rank_lookup() -> Callable[[str], int | None]:
    """Merge rank of one whole token (" copy"), or None when the text is not a single token."""
    with _lock:
        llm.ensure_tiktoken_cache_dir()
        import tiktoken
        from tiktoken_ext import openai_public

        encoding = tiktoken.Encoding(**openai_public.ENCODING_CONSTRUCTORS[LEXICON_ENCODING]())

    def rank(text: str) -> int | None:
        try:
            return encoding.encode_single_token(text.encode("utf-8"))
        except KeyError:
            return None

    return rank


@lru_cache(maxsize=8192)
def word_class(word: str) -> WordClass:
    """`ordinary` when `word` is mostly written in lowercase, `name` when mostly capitalised,
    `unknown` when the tokenizer knows neither form as one token (a rare word)."""
    rank = _rank_lookup()
    lower = rank(" " + word.lower())
    capital = rank(" " + word[:1].upper() + word[1:].lower())
    if lower is not None and (capital is None or lower < capital):
        return "ordinary"
    if capital is not None:
        return "name"
    return "unknown"
