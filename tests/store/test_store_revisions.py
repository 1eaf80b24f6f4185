"""A client that rebuilds its history each turn (aider) keeps one conversation (store/history/revisions.py):
the rebuilt tail revises it in place, the superseded rows stay searchable and expandable by id, and a
regenerate or an edit still forks. Properties: a rebuild never forks; different conversations never merge."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from config.settings import StoreSettings
from store.interface import StoreBackend, TenantAccess
from store.models import ContextView, SearchQuery, SummaryDraft, ViewItem
from store.sqlite.store import Store
from tests.store.store_helpers import TokenCounter, scalar

JSON = dict[str, Any]
REMINDER = "\n\n# SEARCH/REPLACE rules: every block starts with the file name."
EXAMPLES: list[JSON] = [
    {"role": "system", "content": "Act as an expert software developer."},
    {"role": "user", "content": "Change get_factorial() to use math.factorial"},
    {"role": "assistant", "content": "To make this change we modify app.py."},
]


class AiderLike:
    """What aider sends: examples, the done exchanges, the files pair (their current contents) and the
    new input with a reminder; last turn's reminder stripped, the replies echoed trimmed."""

    def __init__(self, tenant: TenantAccess, files: str = "notes_0.txt: ledger line 3 of depot D0") -> None:
        self.tenant, self.files = tenant, files
        self.done: list[JSON] = []
        self.ids: set[str] = set()
        self.counter = TokenCounter()

    def request(self, text: str) -> list[JSON]:
        files = [{"role": "user", "content": f"I have added these files to the chat:\n{self.files}"},
                 {"role": "assistant", "content": "Ok, any changes I propose will be to those files."}]
        return [*EXAMPLES, *self.done, *files, {"role": "user", "content": text + REMINDER}]

    def turn(self, text: str, reply: str) -> str:
        """One turn: the rebuilt request stored, the provider's `reply` appended; the conversation id."""
        messages = self.request(text)
        result = self.tenant.ingest(messages, model="gpt-4o", external_id=None, count_tokens=self.counter)
        assert [m.seq for m in result.messages] == list(range(len(messages)))
        self.tenant.append_reply(result.conversation.id, {"role": "assistant", "content": reply + "\n"},
                                 token_count=5, parent_seq=len(messages) - 1)
        self.done += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
        self.ids.add(result.conversation.id)
        return result.conversation.id


def test_a_rebuilt_history_is_one_conversation_and_loses_nothing(store: StoreBackend,
                                                                 alice: TenantAccess) -> None:
    client = AiderLike(alice)
    for i in range(6):
        if i == 3:
            client.files = "notes_1.txt: ledger line 1003 of depot quokka"
        cid = client.turn(f"question {i} about the ledger", f"answer {i}")
    assert len(client.ids) == 1 and len(alice.list_conversations()) == 1
    live = alice.messages(cid)
    assert [m.seq for m in live] == list(range(len(client.request("next")) - 1))  # + the last reply
    assert alice.conversation(cid).message_count == len(live)
    superseded = int(scalar(store, "SELECT COUNT(*) FROM messages WHERE seq < 0"))
    assert superseded == 5 * 4  # per rebuild: the files pair, the input with its reminder, the reply
    hits = alice.search(SearchQuery("quokka", conversation_id=cid))
    assert hits, "the superseded files pair of turn 3 is still found"
    (old,) = alice.expand([hits[-1].id])
    assert "quokka" in old.text and old.conversation_id == cid


def test_a_revision_cuts_the_view_and_retires_what_covered_the_old_tail(alice: TenantAccess) -> None:
    client = AiderLike(alice)
    cid = client.turn("question 0", "answer 0")
    tail = alice.messages(cid)[len(EXAMPLES):]  # the files pair, the input, the reply
    early = alice.add_summary(SummaryDraft(cid, "leaf", 0, "extractive", "examples", 3, 1, 2,
                                           tuple(m.id for m in alice.messages(cid)[1:3])))
    late = alice.add_summary(SummaryDraft(cid, "leaf", 0, "extractive", "files and input", 3, tail[0].seq,
                                          tail[2].seq, tuple(m.id for m in tail[:3])))
    items = (ViewItem("message", "0"), ViewItem("summary", early.id), ViewItem("summary", late.id),
             ViewItem("message", str(tail[3].seq)))
    alice.save_view(ContextView(cid, 0, items, tail[3].seq, ()))
    assert client.turn("question 1", "answer 1") == cid
    view = alice.view(cid)
    assert view is not None and view.version == 2
    assert view.items == items[:2] and view.covered_through_seq == 2
    moved = alice.summary(late.id)
    assert moved.last_seq < 0 and moved.first_seq < 0
    assert alice.summary(early.id).last_seq == 2


def test_a_regenerated_or_edited_turn_still_forks(alice: TenantAccess) -> None:
    client = AiderLike(alice)
    cid = client.turn("question 0", "answer 0")
    client.turn("question 1", "answer 1")
    stored = [m.message for m in alice.messages(cid)]
    regenerated = [*stored[:-1], {"role": "assistant", "content": "another answer"},
                   {"role": "user", "content": "go on"}]
    other = alice.ingest(regenerated, model="gpt-4o", external_id=None, count_tokens=client.counter)
    assert other.conversation.id != cid and other.forked
    edited = [*EXAMPLES, {"role": "user", "content": "question 0, edited"}, {"role": "user", "content": "x"}]
    third = alice.ingest(edited, model="gpt-4o", external_id=None, count_tokens=client.counter)
    assert third.conversation.id not in (cid, other.conversation.id)


def _sqlite_tenant(folder: str) -> tuple[Store, TenantAccess]:
    store = Store.open(StoreSettings(path=str(Path(folder) / "ctxproxy.db")))
    return store, store.for_tenant(store.tenant_id_for_key("sk-prop"))


_texts = st.lists(st.text(alphabet="abcdefghij ", min_size=1, max_size=12), min_size=2, max_size=6)


@settings(max_examples=30, deadline=None)
@given(_texts, st.lists(st.sampled_from(["same", "new"]), min_size=6, max_size=6))
def test_a_rebuild_never_forks(texts: list[str], files: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store, tenant = _sqlite_tenant(folder)
        client = AiderLike(tenant)
        for i, text in enumerate(texts):
            if files[i] == "new":
                client.files += f"\nfile {i}"
            client.turn(f"{i}: {text}", f"reply {i}: {text}")
        store.close()
    assert len(client.ids) == 1


@settings(max_examples=30, deadline=None)
@given(_texts, _texts)
def test_two_conversations_never_merge(mine: list[str], theirs: list[str]) -> None:
    """Two sessions of the same client with the same opening: the replies differ, so do they."""
    with tempfile.TemporaryDirectory() as folder:
        store, tenant = _sqlite_tenant(folder)
        a, b = AiderLike(tenant), AiderLike(tenant)
        for i, (x, y) in enumerate(zip(mine, theirs, strict=False)):
            a.turn(f"{i}: a {x}", f"a's reply {i}: {x}")
            b.turn(f"{i}: b {y}", f"b's reply {i}: {y}")
        store.close()
    assert len(a.ids) == 1 and len(b.ids) == 1 and a.ids != b.ids
