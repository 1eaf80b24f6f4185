"""Text read out of content parts: every text-bearing shape, never media."""

from __future__ import annotations

import pytest

from store.encoding.content import content_text


@pytest.mark.parametrize(("parts", "expected"), [
    ([{"type": "text", "text": "a"}, {"type": "input_text", "text": "b"}], "a\nb"),
    ([{"type": "output_text", "text": "c"}], "c"),
    ([{"type": "refusal", "refusal": "I can't help with that"}], "I can't help with that"),
    ([{"type": "image_url", "image_url": {"url": "https://x/y.png"}}, {"type": "text", "text": "d"}], "d"),
])
def test_content_text_reads_every_text_part(parts: list[dict[str, object]], expected: str) -> None:
    assert content_text({"role": "assistant", "content": parts}) == expected
