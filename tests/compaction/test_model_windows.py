"""Context windows from litellm's bundled model map, read without importing litellm: the same windows
litellm's own lookup gives for the names the map holds, aliases followed, provider prefixes stripped."""

from __future__ import annotations

import pytest

from compaction import llm


def test_known_models_and_provider_prefixes() -> None:
    assert llm.model_context_window("gpt-4o") == 128_000
    assert llm.model_context_window("openai/gpt-4o") == llm.model_context_window("gpt-4o")
    assert llm.model_context_window("openrouter/openai/gpt-4o") is not None  # prefixes stripped one by one
    assert llm.model_context_window("no-such-model-0xdeadbeef") is None


def test_an_alias_has_its_targets_window() -> None:
    windows = llm.bundled_model_windows()
    alias, target = next((name, value) for name, value in windows.items() if isinstance(value, str))
    assert llm.model_context_window(alias) == llm.model_context_window(target) is not None


def test_the_map_agrees_with_litellms_lookup() -> None:
    """Every 7th name the map holds: litellm's get_model_info gives the same window where it knows
    the name (it adds heuristics for names the map lacks; those are asked only when it is loaded)."""
    litellm = llm.get_litellm()
    compared = 0
    for name in list(llm.bundled_model_windows())[::7]:
        try:
            info = litellm.get_model_info(name)
        except Exception:  # litellm raises bare Exception for names it cannot map
            continue
        theirs = info.get("max_input_tokens") or info.get("max_tokens")
        if isinstance(theirs, int) and theirs > 0:
            assert llm.model_context_window(name) == theirs, name
            compared += 1
    assert compared > 300


@pytest.mark.parametrize("name", ["claude-sonnet-4-20250514", "claude-opus-4-1"])
def test_names_only_litellm_knows_are_asked_of_it_once_loaded(name: str) -> None:
    llm.get_litellm()
    assert name not in llm.bundled_model_windows()
    assert llm.model_context_window(name) == 200_000
