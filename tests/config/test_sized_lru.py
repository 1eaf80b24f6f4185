"""config/sized_lru.py: bounded by the summed sizes, least recently used out first."""

from __future__ import annotations

from config.sized_lru import SizedLru


def test_the_least_recently_used_go_first_once_the_sizes_pass_the_bound() -> None:
    lru: SizedLru[str, int] = SizedLru(10)
    lru.put("a", 1, 4)
    lru.put("b", 2, 4)
    assert lru.get("a") == 1  # now the most recently used
    lru.put("c", 3, 4)
    assert (lru.get("b"), lru.get("a"), lru.get("c")) == (None, 1, 3)
    assert (lru.held, len(lru)) == (8, 2)


def test_a_replaced_value_counts_its_new_size_and_one_over_the_bound_is_not_kept() -> None:
    lru: SizedLru[str, str] = SizedLru(10)
    lru.put("a", "small", 2)
    lru.put("a", "larger", 7)
    assert (lru.get("a"), lru.held) == ("larger", 7)
    lru.put("a", "huge", 11)  # replaces, then is not kept: nothing stale stays behind
    assert (lru.get("a"), lru.held, len(lru)) == (None, 0, 0)
    lru.put("b", "x", 3)
    lru.clear()
    assert (lru.held, len(lru)) == (0, 0)
