"""Budget arithmetic, rejection of hopeless max_tokens, context window resolution."""

from __future__ import annotations

import pytest

from compaction.view.budget import MIN_INPUT_BUDGET, Budget, resolve_context_window
from config.errors import InvalidRequestError
from config.settings import CompactionSettings, LiteLLMParams, ModelEntry, Settings


def test_defaulted_reserve_is_capped_at_a_quarter_of_the_window() -> None:
    b = Budget.compute(CompactionSettings(reserve_tokens=4096), 8_000, None, 100)
    assert b.reserve_tokens == 2_000
    assert b.total == 8_000 - 2_000 - 256
    assert b.messages == b.total - 100
    assert b.threshold == b.total * 60 // 100 and b.target == b.total * 35 // 100
    assert b.prepare_limit == b.total * 20 // 100
    # a step lands deep; summaries are prepared from the threshold down
    assert b.prepare_limit < b.target < b.threshold < b.total
    assert b.oversized == b.messages // 4
    assert b.leaf_chunk_tokens(CompactionSettings()) == b.total // 10  # a tenth of a small budget
    big = Budget.compute(CompactionSettings(), 1_000_000, None, 0)
    assert big.leaf_chunk_tokens(CompactionSettings()) == 20_000  # leaf_chunk_tokens caps it


def test_explicit_max_tokens_is_used_as_is() -> None:
    b = Budget.compute(CompactionSettings(), 128_000, 16_000, 0)
    assert b.reserve_tokens == 16_000 and b.total == 128_000 - 16_000 - 256


def test_max_tokens_leaving_no_room_is_a_clear_400() -> None:
    with pytest.raises(InvalidRequestError) as err:
        Budget.compute(CompactionSettings(), 8_000, 7_600, 0)
    assert err.value.param == "max_tokens" and "lower max_tokens" in err.value.message


def test_tools_eating_the_budget_names_tools() -> None:
    with pytest.raises(InvalidRequestError) as err:
        Budget.compute(CompactionSettings(), 4_096, 1_000, 4_096 - 1_000 - 256 - MIN_INPUT_BUDGET)
    assert err.value.param == "tools"


def _settings(entry_window: int | None = None, global_window: int | None = None) -> Settings:
    entry = ModelEntry("m", LiteLLMParams("openai/m"), context_window=entry_window)
    return Settings((entry,), compaction=CompactionSettings(context_window=global_window))


def test_window_resolution_order() -> None:
    def meta(model: str) -> int | None:
        return 32_000 if model == "openai/m" else None

    assert resolve_context_window(_settings(9_000, 10_000), "m", meta) == (9_000, "model_entry")
    assert resolve_context_window(_settings(None, 10_000), "m", meta) == (10_000, "config")
    assert resolve_context_window(_settings(), "m", meta) == (32_000, "provider_metadata")
    assert resolve_context_window(_settings(), "m", lambda _: None) == (50_000, "fallback")
