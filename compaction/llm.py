"""The one door to litellm: lazy import, offline model metadata, bundled tokenizer files.

Importing litellm costs seconds and, unless told otherwise, fetches a cost map over the network; so
nothing here imports it at module import time, and the environment is prepared before it is.
The tokenizer helpers and the model windows read litellm's bundled files *without* importing litellm,
so token counting and budgeting stay cheap and offline, and a proxy whose routes and summarizer all
speak OpenAI's wire format never imports litellm at all.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from config.errors import CtxProxyError
from store.models import Message

_TOKENIZERS_SUBDIR = ("litellm_core_utils", "tokenizers")
ANTHROPIC_TOKENIZER_FILE = "anthropic_tokenizer.json"
DEEPSEEK_TOKENIZER_FILE = "deepseek_tokenizer.json"
MODEL_MAP_FILE = "model_prices_and_context_window_backup.json"  # litellm's offline cost map
MAX_ALIAS_HOPS = 8


@lru_cache(maxsize=1)
def litellm_package_dir() -> Path:
    """Where litellm is installed (found via import metadata, not by importing it)."""
    spec = importlib.util.find_spec("litellm")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise CtxProxyError("litellm is not installed; its bundled tokenizer files and model map are "
                            "required", code="dependency_missing")
    return Path(locations[0])


def bundled_tokenizers_dir() -> Path:
    """Directory of the tokenizer files litellm ships."""
    return litellm_package_dir().joinpath(*_TOKENIZERS_SUBDIR)


def ensure_tiktoken_cache_dir() -> str:
    """Point tiktoken at litellm's bundled encodings so it never downloads (same rule as litellm).

    `CUSTOM_TIKTOKEN_CACHE_DIR` keeps its litellm meaning: an explicit operator override.
    """
    target = os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR") or str(bundled_tokenizers_dir())
    os.environ["TIKTOKEN_CACHE_DIR"] = target
    return target


def _prepare_environment() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    ensure_tiktoken_cache_dir()


@lru_cache(maxsize=1)
def get_litellm() -> Any:
    """Import litellm once, offline (local cost map, bundled tokenizers)."""
    _prepare_environment()
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def litellm_loaded() -> bool:
    """Whether litellm has been imported already (then `get_litellm` returns at once)."""
    return get_litellm.cache_info().currsize > 0


async def get_litellm_async() -> Any:
    """litellm for code on the event loop: the first import (seconds) runs in a worker thread."""
    if litellm_loaded():
        return get_litellm()
    return await asyncio.to_thread(get_litellm)


@lru_cache(maxsize=1)
def bundled_model_windows() -> dict[str, int | str]:
    """Input windows from litellm's bundled model map, read as JSON (litellm is never imported for
    this: it holds ~180 MiB): model name -> its window, or -> the name it is an alias of."""
    windows: dict[str, int | str] = {}
    raw = json.loads((litellm_package_dir() / MODEL_MAP_FILE).read_text(encoding="utf-8"))
    for name, info in raw.items():
        if not isinstance(info, dict):
            continue
        window = info.get("max_input_tokens") or info.get("max_tokens")
        if isinstance(info.get("alias_of"), str):
            windows[name] = info["alias_of"]
        elif isinstance(window, int) and not isinstance(window, bool) and window > 0:
            windows[name] = window
    return windows


def _window_of(name: str) -> int | None:
    """`name`'s window in the bundled map, following aliases (a bounded chain)."""
    windows = bundled_model_windows()
    found = windows.get(name)
    for _ in range(MAX_ALIAS_HOPS):
        if not isinstance(found, str):
            break
        found = windows.get(found)
    return found if isinstance(found, int) else None


def model_context_window(model: str) -> int | None:
    """Input window of `model` from litellm's model metadata: the bundled map with the provider
    prefixes stripped one by one (`openai/gpt-4o`, then `gpt-4o`), then, when litellm is loaded
    (the configuration routes something through it), litellm's own resolution, which also knows
    names the map lacks (dated Claude names, from its Bedrock entries). None when neither knows."""
    parts = model.split("/")
    for start in range(len(parts)):
        window = _window_of("/".join(parts[start:]))
        if window is not None:
            return window
    return _litellm_window(model) if litellm_loaded() else None


def _litellm_window(model: str) -> int | None:
    litellm = get_litellm()
    for name in dict.fromkeys((model, model.split("/", 1)[-1])):  # once when there is no prefix
        try:
            info = litellm.get_model_info(name)
        except Exception:  # litellm raises bare Exception for unknown models
            continue
        window = info.get("max_input_tokens") or info.get("max_tokens")
        if isinstance(window, int) and window > 0:
            return window
    return None


async def acompletion(*, model: str, messages: list[Message], api_base: str | None = None,
                      api_key: str | None = None, timeout_s: float | None = None,
                      temperature: float | None = None, max_tokens: int | None = None,
                      **extra: Any) -> Any:
    """Thin async wrapper over `litellm.acompletion` (non-streaming); returns litellm's response."""
    litellm = await get_litellm_async()
    kwargs: dict[str, Any] = {"model": model, "messages": messages, **extra}
    optional = {"api_base": api_base, "api_key": api_key, "timeout": timeout_s,
                "temperature": temperature, "max_tokens": max_tokens}
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    return await litellm.acompletion(**kwargs)


def response_text(response: Any) -> str:
    """The assistant text of a litellm/OpenAI chat response ('' when absent)."""
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        return ""
    return content if isinstance(content, str) else ""
