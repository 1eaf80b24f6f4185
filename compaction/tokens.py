"""Token counting with the model's own tokenizer, never by characters: budgets match the provider.

OpenAI families use tiktoken (`o200k_base` / `cl100k_base`) read from litellm's bundled encoding
files; Anthropic and DeepSeek models use the Hugging Face tokenizers litellm ships. Nothing is ever
downloaded. Message framing follows OpenAI's published counting recipe: 3 tokens per message, +1
when a `name` is present, +3 to prime the reply.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, cast

import orjson

from compaction import llm
from compaction.messages import OPAQUE_TEXT_FIELD
from config.sized_lru import SizedLru
from store.encoding.content import part_text

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
TOKENS_PER_TOOL_CALL = 3  # framing around one tool call (id/type wrapper)
# Images: OpenAI bills 85 tokens for a low-detail image and 85 + 170 per 512px tile otherwise; the
# size is unknown here, so "high"/"auto" uses the 1024x1024 figure (4 tiles = 765).
IMAGE_TOKENS_LOW = 85
IMAGE_TOKENS_HIGH = 765
OTHER_PART_TOKENS = 85  # audio/file parts: a fixed, documented estimate (payloads are not text)
RECOUNTED_BYTES = 4 * 1024 * 1024  # per tokenizer: messages the request path builds and counts again
TOOLS_FRAMING = 12  # once per request that offers tools
TOKENS_PER_TOOL = 8  # per tool schema wrapper

O200K = "o200k_base"
CL100K = "cl100k_base"
HF_ANTHROPIC = "hf:anthropic"
HF_DEEPSEEK = "hf:deepseek"

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "text-embedding")


def encoding_for_model(model: str) -> str:
    """Tokenizer name for a model id, provider prefixes (`openai/`, `azure/`, ...) ignored."""
    lowered = model.strip().lower()
    segments = lowered.split("/")
    base = segments[-1]
    if "claude" in lowered or segments[0] == "anthropic":
        return HF_ANTHROPIC
    if "deepseek" in lowered:
        return HF_DEEPSEEK
    if base.startswith(_O200K_PREFIXES):
        return O200K
    if base.startswith(_CL100K_PREFIXES):
        return CL100K
    return CL100K  # unknown family: cl100k is a reasonable, slightly pessimistic default


def _load_tiktoken(name: str) -> Callable[[str], int]:
    """Build a tiktoken encoding from litellm's bundled file (uncached; see `_encoder`)."""
    llm.ensure_tiktoken_cache_dir()
    import tiktoken
    from tiktoken_ext import openai_public

    encoding = tiktoken.Encoding(**openai_public.ENCODING_CONSTRUCTORS[name]())
    return lambda text: len(encoding.encode_ordinary(text))


def _load_hf(filename: str) -> Callable[[str], int]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(llm.bundled_tokenizers_dir() / filename))
    # `encode_batch_fast` (no offsets) releases the GIL while it works, `encode` holds it about half
    # the time: a request being counted on the engine thread then leaves the HTTP loop free. Same
    # counts, 10-15 % quicker on a 7k-character tool result.
    return lambda text: len(tokenizer.encode_batch_fast([text], add_special_tokens=False)[0].ids)


def _load_encoder(name: str) -> Callable[[str], int]:
    if name == HF_ANTHROPIC:
        return _load_hf(llm.ANTHROPIC_TOKENIZER_FILE)
    if name == HF_DEEPSEEK:
        return _load_hf(llm.DEEPSEEK_TOKENIZER_FILE)
    return _load_tiktoken(name)


_lock = threading.Lock()
_loaded: set[str] = set()  # encodings whose tables are in memory (for_model is then instant)


@lru_cache(maxsize=8)
def _counter_for_encoding(name: str) -> TokenCounter:
    with _lock:
        counter = TokenCounter(name, _load_encoder(name))
    _loaded.add(name)
    return counter


TOOLS_KEY_BYTES = 128  # what one memoised tool list costs: its digest key and count


def _tools_key(tools: Sequence[Mapping[str, Any]]) -> tuple[str, bytes] | None:
    """A tool list's identity for the count memo: the digest of its canonical JSON (None: not JSON)."""
    try:
        encoded = orjson.dumps(list(tools), option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    return ("tools", hashlib.blake2b(encoded, digest_size=16).digest())


class TokenCounter:
    """Counts text, messages and tool schemas for one tokenizer. Get one with `for_model`."""

    def __init__(self, encoding_name: str, encode_len: Callable[[str], int]) -> None:
        self.encoding_name = encoding_name
        self._encode_len = encode_len
        # recurring messages by their fields, and tool lists by their schemas' digest
        self._recounted: SizedLru[tuple[Any, ...], int] = SizedLru(RECOUNTED_BYTES,
                                                                   name=f"recounted_{encoding_name}")

    @classmethod
    def for_model(cls, model: str) -> TokenCounter:
        """The (cached, shared) counter for `model`'s tokenizer."""
        return _counter_for_encoding(encoding_for_model(model))

    @classmethod
    def if_loaded(cls, model: str) -> TokenCounter | None:
        """`for_model` when its tokenizer is in memory already (instant), else None."""
        name = encoding_for_model(model)
        return _counter_for_encoding(name) if name in _loaded else None

    @classmethod
    async def for_model_async(cls, model: str) -> TokenCounter:
        """`for_model` for code on the event loop: a tokenizer's first load (~1 s) runs in a thread."""
        name = encoding_for_model(model)
        if name in _loaded:
            return _counter_for_encoding(name)
        return await asyncio.to_thread(_counter_for_encoding, name)

    def __repr__(self) -> str:
        return f"TokenCounter({self.encoding_name!r})"

    def count_text(self, text: str) -> int:
        return self._encode_len(text) if text else 0

    def count_message(self, message: Mapping[str, Any]) -> int:
        """Tokens of one chat message with OpenAI framing (excluding the per-request reply priming)."""
        total = TOKENS_PER_MESSAGE + self.count_text(str(message.get("role") or ""))
        total += self._count_content(message.get("content"))
        name = message.get("name")
        if isinstance(name, str) and name:
            total += self.count_text(name) + TOKENS_PER_NAME
        for call in message.get("tool_calls") or ():
            total += self._count_tool_call(call)
        legacy = message.get("function_call")
        if isinstance(legacy, Mapping):
            total += self._count_function(legacy)
        call_id = message.get("tool_call_id")
        if isinstance(call_id, str):
            total += self.count_text(call_id)
        refusal = message.get("refusal")
        if isinstance(refusal, str):
            total += self.count_text(refusal)
        opaque = message.get(OPAQUE_TEXT_FIELD)
        if isinstance(opaque, str):
            total += self.count_text(opaque)
        return total

    def count_recurring(self, message: Mapping[str, Any]) -> int:
        """`count_message` of a message built again for every request (a summary as rendered, an
        elided message), memoised by its fields when they are all text; any other is just counted.
        Bounded in bytes: a summary's text would otherwise go through the tokenizer each request."""
        if not all(isinstance(v, str) for v in message.values()):
            return self.count_message(message)
        key = tuple(cast("dict[str, str]", message).items())
        found = self._recounted.get(key)
        if found is None:
            found = self.count_message(message)
            self._recounted.put(key, found, sum(sys.getsizeof(v) for v in message.values()))
        return found

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Tokens of a whole message list, reply priming included."""
        return REPLY_PRIMING + sum(self.count_message(m) for m in messages)

    def count_tools(self, tools: Sequence[Mapping[str, Any]] | None) -> int:
        """Upper-biased estimate of the tool schemas' cost.

        OpenAI renders tools internally in a compact TypeScript-like form; counting the JSON schema
        (name, description, parameters) plus framing overestimates it slightly, which is the safe side
        for a budget.
        """
        if not tools:
            return 0
        key = _tools_key(tools)
        found = self._recounted.get(key) if key is not None else None
        if found is None:
            found = self._count_tools(tools)
            if key is not None:  # an agent resends the same schemas (often ~10k tokens) every turn
                self._recounted.put(key, found, TOOLS_KEY_BYTES)
        return found

    def _count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        total = TOOLS_FRAMING
        for tool in tools:
            inner = tool.get("function")
            fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tool
            total += TOKENS_PER_TOOL + self.count_text(str(fn.get("name") or ""))
            total += self.count_text(str(fn.get("description") or ""))
            params = fn.get("parameters")
            if params:
                total += self.count_text(json.dumps(params, separators=(",", ":"), sort_keys=True))
        return total

    def _count_content(self, content: Any) -> int:
        if isinstance(content, str):
            return self.count_text(content)
        if not isinstance(content, list):
            return 0
        return sum(self._count_part(part) for part in content if isinstance(part, Mapping))

    def _count_part(self, part: Mapping[str, Any]) -> int:
        text = part_text(part)
        if text is not None:
            return self.count_text(text)
        kind = part.get("type")
        if kind == "image_url":
            image = part.get("image_url")
            detail = image.get("detail") if isinstance(image, Mapping) else None
            return IMAGE_TOKENS_LOW if detail == "low" else IMAGE_TOKENS_HIGH
        return OTHER_PART_TOKENS

    def _count_tool_call(self, call: Any) -> int:
        if not isinstance(call, Mapping):
            return 0
        total = TOKENS_PER_TOOL_CALL + self.count_text(str(call.get("id") or ""))
        fn = call.get("function")
        return total + (self._count_function(fn) if isinstance(fn, Mapping) else 0)

    def _count_function(self, fn: Mapping[str, Any]) -> int:
        args = fn.get("arguments")
        args_text = args if isinstance(args, str) else json.dumps(args) if args is not None else ""
        return self.count_text(str(fn.get("name") or "")) + self.count_text(args_text)
