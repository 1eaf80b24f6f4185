"""Corrections of value-keyed facts (emails, paths, ids) labelled the same way share one anchor key."""

from __future__ import annotations

from pathlib import Path

import pytest

from compaction.anchors.extract import extract_anchors
from config.settings import StoreSettings
from store.models import StoredMessage
from store.sqlite.store import Store


def stored(seq: int, text: str, role: str = "user") -> StoredMessage:
    return StoredMessage(id=100 + seq, conversation_id="c", seq=seq, role=role,
                         message={"role": role, "content": text}, token_count=1, chain_hash="",
                         content_hash="", pinned=False)


def keys(*texts: str) -> list[tuple[str, str, str]]:
    return [(d.kind, d.key, d.value) for d in extract_anchors([stored(i, t) for i, t in enumerate(texts)])]


@pytest.mark.parametrize(("first", "second", "kind", "key"), [
    ("My email is ana@example.com", "Correction: my email is ana.silva@example.com", "email", "email"),
    ("The config file is src/app/config_v1.yaml", "Sorry, the config file is src/app/config_v2.yaml",
     "path", "config file"),
    ("My ticket is BILL-2291.", "Correction: my ticket is BILL-2292.", "ticket", "ticket"),
    ("The docs URL is https://a.example.com/v1", "Update: the docs URL is https://a.example.com/v2",
     "url", "docs url"),
])
def test_same_label_gives_same_key(first: str, second: str, kind: str, key: str) -> None:
    got = keys(first, second)
    assert [(k, kk) for k, kk, _ in got] == [(kind, key), (kind, key)]


def test_unlabelled_and_enumerated_values_keep_value_keys() -> None:
    got = keys("I sent an email to bob@example.com",
               "Files: src/a/one.py and src/a/two.py",
               "Edit src/billing/invoice_v2.py, not src/billing/invoice_v3.py")
    assert ("email", "bob@example.com", "bob@example.com") in got
    assert ("path", "src/a/one.py", "src/a/one.py") in got
    assert ("path", "src/a/two.py", "src/a/two.py") in got
    assert ("path", "src/billing/invoice_v2.py", "src/billing/invoice_v2.py") in got
    assert not any(v == "src/billing/invoice_v3.py" for _, _, v in got)  # negated: not a fact


def test_decimal_point_does_not_cut_a_decision() -> None:
    got = keys("The refund of $1,249.50 was approved by Dana.")
    assert ("decision", "decision: the refund of $1,249.50 was approved by dana",
            "The refund of $1,249.50 was approved by Dana") in got


def test_store_supersedes_corrected_email(tmp_path: Path) -> None:
    store = Store.open(StoreSettings(path=str(tmp_path / "a.db"), tenant_secret="s" * 32))
    try:
        tenant = store.for_tenant("t")
        ingest = tenant.ingest([{"role": "user", "content": "My email is ana@example.com"},
                                {"role": "assistant", "content": "ok"},
                                {"role": "user", "content": "Correction: my email is ana.silva@example.com"}],
                               model="gpt-4o-mini", external_id=None, count_tokens=lambda _m: 5)
        cid = ingest.conversation.id
        added, superseded = tenant.upsert_anchors(cid, extract_anchors(ingest.messages))
        assert [a.value for a in tenant.anchors(cid)] == ["ana.silva@example.com"]
        assert [a.value for a in superseded] == ["ana@example.com"]
        assert {a.value for a in tenant.anchors(cid, include_superseded=True)} == {
            "ana@example.com", "ana.silva@example.com"}
        assert len(added) == 2
    finally:
        store.close()
