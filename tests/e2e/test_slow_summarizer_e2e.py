"""A summariser that takes 3 s per call barely ever blocks a turn (issue 3: "never blocks").

Turns follow back to back as an agent sends them; the fake model takes `MODEL_DELAY_S` to answer.
Background compaction runs off the request path, so at most 1 turn in 20 waits on the summariser.
Waits are read from the proxy's `X-Ctxproxy-Summarizer-Wait` response header (the engine's
PreparedRequest.waited_on_summarizer), cross-checked with the engine's own record; no timing asserts.
"""

from __future__ import annotations

from tests.e2e.conftest import RigFactory
from tests.e2e.conversation import generate
from tests.e2e.harness import MODEL, CachedCounter, budget_for, paced_replay, request_tokens

TURNS = 60
SUMMARIZER_DELAY_S = 3.0
MODEL_DELAY_S = 0.4


async def test_slow_summariser_rarely_blocks_a_turn(rig: RigFactory) -> None:
    r = await rig("slow", delay_s=SUMMARIZER_DELAY_S)
    conv = generate(turns=150, seed=7)
    result = await paced_replay(r.client, conv, r.model, r.engine, turns=TURNS,
                                model_delay_s=MODEL_DELAY_S)
    await r.engine.background.drain()
    waited = [i for i, w in enumerate(result.waits) if w == "true"]
    assert result.waits and all(w in ("true", "false") for w in result.waits)
    assert waited == [i for i, p in enumerate(result.prepared) if p.waited_on_summarizer]
    assert r.summarizer.requests, "the slow summariser was really used (background steps)"
    print(f"\n[slow summariser] {len(waited)} of {TURNS} turns waited: {waited}; "
          f"{len(r.summarizer.requests)} summariser calls")
    assert len(waited) * 20 <= TURNS, f"turns {waited} waited on the summariser"
    counter = CachedCounter(MODEL)
    assert all(request_tokens(counter, b) <= budget_for() for b in result.forwarded)
