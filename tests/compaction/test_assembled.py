"""`store.models.assembled` builds exactly what each class's constructor would (the hot loops use it)."""

from __future__ import annotations

from typing import Any

import pytest

from compaction.toolpairs import Group
from compaction.view.entry import Entry
from compaction.view.plan import Slot, raw_entries
from store.models import StoredMessage, assembled, field_names

VALUES: dict[type[Any], dict[str, Any]] = {
    StoredMessage: {"id": 7, "conversation_id": "conv_1", "seq": 2, "role": "user",
                    "message": {"role": "user", "content": "hi"}, "token_count": 5, "chain_hash": "a" * 64,
                    "content_hash": "b" * 64, "pinned": True, "source": "client", "created_at": 1.5},
    Entry: {"kind": "message", "ref": "2", "tokens": 5, "role": "user", "group": 3, "seq": 2, "depth": -1,
            "pinned": False, "message_id": 7, "elided": None},
    Group: {"start": 2, "end": 5, "kind": "tool_round"},
    Slot: {"message": {"role": "user", "content": "hi"}, "tokens": 5, "category": "fresh_tail", "group": 3,
           "ref": "7", "protected": True},
}


@pytest.mark.parametrize("cls", list(VALUES))
def test_assembled_equals_constructed(cls: type[Any]) -> None:
    values = VALUES[cls]
    assert set(values) == set(field_names(cls))  # every field given, none invented
    assert not hasattr(cls, "__slots__") and not hasattr(cls, "__post_init__")
    built, constructed = assembled(cls, values), cls(**values)
    assert built == constructed and repr(built) == repr(constructed)
    if cls in (Entry, Group):
        assert hash(built) == hash(constructed)
    with pytest.raises(AttributeError):  # still frozen
        setattr(built, field_names(cls)[0], None)


def test_raw_entries_are_plain_entries() -> None:
    rows = [({"role": "user", "content": "q"}, 0, 10, 4, False),
            ({"role": "assistant", "content": "a"}, 1, 11, 6, True)]
    assert raw_entries(rows, 5) == [Entry("message", "0", 4, "user", 5, 0, message_id=10),
                                    Entry("message", "1", 6, "assistant", 6, 1, pinned=True, message_id=11)]
