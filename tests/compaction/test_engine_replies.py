"""The engine stores each reply after the request it answers (regenerated replies branch)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compaction.engine import Engine
from config.settings import StoreSettings
from store.sqlite.store import Store
from tests.compaction.conftest import asst, sys, user
from tests.compaction.test_engine import make_engine, turn
from tests.fakes.summarizer import ScriptedSummarizer


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(StoreSettings(path=str(tmp_path / "t.db"), tenant_secret="x" * 32))
    yield s
    s.close()


def _bodies(store: Store, cid: str) -> list[dict[str, Any]]:
    return [m.message for m in store.for_tenant("tenant-a").messages(cid)]


async def test_regenerate_then_continue_on_the_new_branch(store: Store) -> None:
    engine: Engine = make_engine(store, ScriptedSummarizer("faithful"))
    msgs = [sys("You are terse."), user("hi")]
    first = await engine.prepare(turn(msgs))
    assert first.last_seq == 1
    engine.record_reply(first, turn(msgs), asst("reply A"))
    regen = await engine.prepare(turn(msgs))  # same request again: the client regenerates
    assert regen.conversation_id == first.conversation_id and regen.last_seq == 1
    engine.record_reply(regen, turn(msgs), asst("reply B"))
    assert _bodies(store, first.conversation_id) == [*msgs, asst("reply A")]
    nxt_msgs = [*msgs, asst("reply B"), user("next")]
    nxt = await engine.prepare(turn(nxt_msgs))
    assert nxt.conversation_id != first.conversation_id
    assert _bodies(store, nxt.conversation_id) == nxt_msgs
    conv = store.for_tenant("tenant-a").conversation(nxt.conversation_id)
    assert conv.forked_from == first.conversation_id
    assert list(nxt.messages) == nxt_msgs  # small request: forwarded as sent
    await engine.aclose()
