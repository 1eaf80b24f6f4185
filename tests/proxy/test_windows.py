"""WindowResolver: one lookup per model name, and a bounded cache however many names clients send."""

from __future__ import annotations

from compaction.view.budget import WindowSource
from config.settings import Settings, default_model_list
from proxy.windows import WindowResolver


class CountingResolve:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, settings: Settings, model: str) -> tuple[int, WindowSource]:
        self.calls.append(model)
        return 1000 + len(model), "config"


async def test_each_name_is_resolved_once_while_cached() -> None:
    resolve = CountingResolve()
    windows = WindowResolver(Settings(default_model_list()), resolve=resolve)
    assert [await windows.window(m) for m in ("a", "a", "bb", "a")] == [1001, 1001, 1002, 1001]
    assert resolve.calls == ["a", "bb"]


async def test_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    resolve = CountingResolve()
    windows = WindowResolver(Settings(default_model_list()), max_size=2,
                             resolve=resolve)
    for name in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" arrives
        await windows.window(name)
    assert len(windows) == 2
    await windows.window("a")
    await windows.window("b")
    assert resolve.calls == ["a", "b", "c", "b"]


async def test_many_made_up_names_never_grow_past_the_bound() -> None:
    windows = WindowResolver(Settings(default_model_list()), max_size=8,
                             resolve=CountingResolve())
    for i in range(100):
        await windows.window(f"gpt-made-up-{i}")
    assert len(windows) == 8
