"""Full-text search: every parameter, combinations, hostile patterns, CJK, identifiers, deletion."""

from __future__ import annotations

import time
from typing import Any

import pytest

from compaction.types import Message
from config.errors import InvalidRequestError, NotFoundError
from store.models import SearchQuery, SummaryDraft
from store.sqlite.store import Store
from store.tenant import TenantStore
from tests.store.store_helpers import TokenCounter, require_sqlite, scalar, set_created_at

DAY = 86_400.0


@pytest.fixture
def corpus(store: Store, alice: TenantStore, counter: TokenCounter) -> dict[str, Any]:
    """One conversation with known texts, ages and roles, plus a summary and a second conversation."""
    msgs: list[Message] = [
        {"role": "system", "content": "You help with billing."},
        {"role": "user", "content": "The invoice for ACME is overdue."},
        {"role": "assistant", "content": "I will call parse_invoice_v2 on the invoice draft."},
        {"role": "user", "content": "Payment failed twice yesterday."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "lookup_customer", "arguments": '{"customer": "Globex"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "customer Globex has balance 913"},
        {"role": "user", "content": "東京駅で会いましょう。请求超时了。"},
        {"role": "assistant", "content": "Le café est prêt; the refund is approved."},
    ]
    result = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter)
    ids = [m.id for m in result.messages]
    now = time.time()
    for seq, age_days in enumerate([40, 40, 20, 10, 3, 3, 1, 0.01]):
        set_created_at(store, "messages", [ids[seq]], now - age_days * DAY)
    cid = result.conversation.id
    summary = alice.add_summary(SummaryDraft(cid, "leaf", 0, "normal", "Intent: chase the overdue invoice.",
                                             8, 0, 3, tuple(ids[:4])))
    other = alice.ingest([{"role": "user", "content": "Another invoice question entirely"}], model="m",
                         external_id=None, count_tokens=counter)
    return {"cid": cid, "ids": ids, "summary": summary.id, "other": other.conversation.id, "now": now}


def _ids(hits: list[Any]) -> list[str]:
    return [h.id for h in hits]


def _q(corpus: dict[str, Any], pattern: str, **kw: Any) -> SearchQuery:
    kw.setdefault("conversation_id", corpus["cid"])
    return SearchQuery(pattern=pattern, **kw)


def test_word_match_both_scopes_with_ranks(alice: TenantStore, corpus: dict[str, Any]) -> None:
    hits = alice.search(_q(corpus, "invoice"))
    ids = corpus["ids"]
    assert set(_ids(hits)) == {str(ids[1]), str(ids[2]), corpus["summary"]}
    assert all(h.rank < 0 for h in hits) and [h.rank for h in hits] == sorted(h.rank for h in hits)
    summary_hit = next(h for h in hits if h.kind == "summary")
    assert summary_hit.depth == 0 and summary_hit.role is None
    message_hit = next(h for h in hits if h.id == str(ids[1]))
    assert message_hit.role == "user" and "[invoice]" in message_hit.snippet.lower()


def test_word_match_is_whole_word(alice: TenantStore, corpus: dict[str, Any]) -> None:
    assert alice.search(_q(corpus, "invoi")) == []
    assert {h.id for h in alice.search(_q(corpus, "invoi%"))} >= {str(corpus["ids"][1])}


@pytest.mark.parametrize(("pattern", "seqs", "with_summary"), [
    ("invoice AND overdue", [1], True),
    ("invoice overdue", [1], True),
    ("overdue OR refund", [1, 7], True),
    ("invoice NOT overdue", [2], False),
    ('"payment failed"', [3], False),
    ('"failed payment"', [], False),
    ("(payment OR refund) NOT café", [3], False),
    ("cafe", [7], False),  # diacritics folded
    ("%voice_v%", [2], False),
    ("%obex%", [4, 5], False),  # tool-call arguments and tool results are searchable
    ("lookup_customer", [4], False),
    ("%overdue% AND %ACME%", [1], False),
])
def test_operators_and_fuzzy(alice: TenantStore, corpus: dict[str, Any], pattern: str, seqs: list[int],
                             with_summary: bool) -> None:
    hits = alice.search(_q(corpus, pattern))
    expected = {str(corpus["ids"][s]) for s in seqs} | ({corpus["summary"]} if with_summary else set())
    assert set(_ids(hits)) == expected


@pytest.mark.parametrize("pattern", ["東京駅", "请求超时", "%会いましょう%"])
def test_cjk_substrings(alice: TenantStore, corpus: dict[str, Any], pattern: str) -> None:
    assert _ids(alice.search(_q(corpus, pattern))) == [str(corpus["ids"][6])]


def test_code_identifier_exact_and_substring(alice: TenantStore, corpus: dict[str, Any]) -> None:
    target = str(corpus["ids"][2])
    assert _ids(alice.search(_q(corpus, "parse_invoice_v2"))) == [target]
    assert _ids(alice.search(_q(corpus, "%parse_invoice%"))) == [target]
    assert _ids(alice.search(_q(corpus, "%INVOICE_V2%"))) == [target]  # case-insensitive


def test_scope_and_role(alice: TenantStore, corpus: dict[str, Any]) -> None:
    ids = corpus["ids"]
    assert _ids(alice.search(_q(corpus, "invoice", scope="summary"))) == [corpus["summary"]]
    assert corpus["summary"] not in _ids(alice.search(_q(corpus, "invoice", scope="message")))
    assert _ids(alice.search(_q(corpus, "invoice", role="user"))) == [str(ids[1])]
    assert _ids(alice.search(_q(corpus, "invoice", role="assistant"))) == [str(ids[2])]
    with pytest.raises(InvalidRequestError) as err:
        alice.search(_q(corpus, "invoice", scope="summary", role="user"))
    assert err.value.param == "role"


def test_time_windows(alice: TenantStore, corpus: dict[str, Any]) -> None:
    ids = corpus["ids"]
    assert _ids(alice.search(_q(corpus, "invoice", last="7d", scope="message"))) == []
    assert _ids(alice.search(_q(corpus, "invoice", last="3w", scope="message"))) == [str(ids[2])]
    assert set(_ids(alice.search(_q(corpus, "invoice", last="2m", scope="message")))) == {str(ids[1]),
                                                                                         str(ids[2])}
    assert _ids(alice.search(_q(corpus, "refund", last="6h"))) == [str(ids[7])]
    cutoff = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(corpus["now"] - 30 * DAY))
    assert _ids(alice.search(_q(corpus, "invoice", since=cutoff, scope="message"))) == [str(ids[2])]
    assert _ids(alice.search(_q(corpus, "invoice", before=cutoff, scope="message"))) == [str(ids[1])]
    assert _ids(alice.search(_q(corpus, "invoice", since=cutoff + "+00:00", before=cutoff + "Z",
                                scope="message"))) == []
    date_only = time.strftime("%Y-%m-%d", time.gmtime(corpus["now"] + 2 * DAY))
    assert len(alice.search(_q(corpus, "invoice", before=date_only, scope="message"))) == 2


@pytest.mark.parametrize(("field", "value"), [("last", "7"), ("last", "3y"), ("last", "0d"), ("last", "-1d"),
                                              ("since", "yesterday"), ("before", "2024-13-01"),
                                              ("limit", 0), ("limit", 101)])
def test_invalid_parameters(alice: TenantStore, corpus: dict[str, Any], field: str, value: Any) -> None:
    with pytest.raises(InvalidRequestError) as err:
        alice.search(_q(corpus, "invoice", **{field: value}))
    assert err.value.param == field


def test_conversation_scoping(alice: TenantStore, corpus: dict[str, Any]) -> None:
    scoped = alice.search(_q(corpus, "invoice"))
    assert corpus["other"] not in {h.conversation_id for h in scoped}
    everywhere = alice.search(_q(corpus, "invoice", conversation_id=None, all_conversations=True))
    assert {h.conversation_id for h in everywhere} == {corpus["cid"], corpus["other"]}
    with pytest.raises(InvalidRequestError) as err:
        alice.search(SearchQuery(pattern="invoice"))
    assert err.value.param == "conversation_id"
    with pytest.raises(NotFoundError):
        alice.search(SearchQuery(pattern="invoice", conversation_id="conv_unknown"))


def test_limit_and_merged_order(alice: TenantStore, corpus: dict[str, Any]) -> None:
    hits = alice.search(_q(corpus, "invoice OR payment OR refund", all_conversations=True, limit=3))
    assert len(hits) == 3
    full = alice.search(_q(corpus, "invoice OR payment OR refund", all_conversations=True, limit=100))
    assert hits == full[:3] and len(full) == 6


HOSTILE = ['', '   ', '"unbalanced', 'a "b', '(invoice', 'invoice)', '((a) OR b', 'AND', 'OR', 'NOT',
           'NOT NOT', 'invoice AND', 'OR invoice', 'invoice NOT', 'a AND OR b', '*', '^', ':', '-',
           'NEAR(a b)', 'NEAR', 'x' * 10_000, '%', '%%', '%ab%', 'in%voice', '()', '""', '"   "',
           "'; DROP TABLE messages", '(' * 50 + 'a' + ')' * 50, ' '.join(['w'] * 40),
           '\x00', 'invoice\x00', '\x00invoice', '%inv\x00oice%', '"pay\x00ment"', 'invoice\x07',
           '\x1b[31minvoice', 'invoice\x7f', '注文\x00']


@pytest.mark.parametrize("pattern", HOSTILE, ids=lambda p: repr(p[:20]))
def test_hostile_patterns_give_invalid_request(alice: TenantStore, corpus: dict[str, Any],
                                               pattern: str) -> None:
    with pytest.raises(InvalidRequestError) as err:
        alice.search(_q(corpus, pattern))
    assert err.value.param == "pattern" and err.value.message.startswith("invalid search pattern: ")


@pytest.mark.parametrize(("pattern", "plain"), [
    ("invoice:", "invoice"), ("invoice*", "invoice"), ("^invoice", "invoice"), ("{invoice}", "invoice"),
    ("invoice'", "invoice"), ("-invoice", "invoice"), ("+invoice", "invoice"),
    ("text:invoice*", "text invoice"), ("col:invoice", "col invoice")])
def test_fts_syntax_in_terms_is_literal(alice: TenantStore, corpus: dict[str, Any], pattern: str,
                                        plain: str) -> None:
    """Characters FTS5 would treat as syntax are separators for us; never an sqlite error."""
    hits = alice.search(_q(corpus, pattern))
    expected = alice.search(_q(corpus, plain))
    assert [(h.kind, h.id, h.rank) for h in hits] == [(h.kind, h.id, h.rank) for h in expected]
    if plain == "invoice":
        assert hits  # the corpus mentions invoices: a separator must not lose the word


def test_delete_conversation_keeps_fts5_indexes_consistent(store: Store, alice: TenantStore,
                                                           corpus: dict[str, Any]) -> None:
    require_sqlite(store)

    def counts() -> dict[str, int]:
        tables = ["messages", "messages_fts_docsize", "messages_tri_docsize", "summaries",
                  "summaries_fts_docsize", "summaries_tri_docsize"]
        return {t: store.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}

    before = counts()
    assert before["messages"] == before["messages_fts_docsize"] == before["messages_tri_docsize"] == 9
    alice.delete_conversation(corpus["cid"])
    after = counts()
    assert after["messages"] == after["messages_fts_docsize"] == after["messages_tri_docsize"] == 1
    assert after["summaries"] == after["summaries_fts_docsize"] == after["summaries_tri_docsize"] == 0
    stale = store.conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'overdue'").fetchall()
    stale += store.conn.execute("SELECT rowid FROM messages_tri WHERE messages_tri MATCH 'ACME'").fetchall()
    assert stale == []


def test_delete_conversation_leaves_nothing_searchable(store: Store, alice: TenantStore,
                                                       corpus: dict[str, Any]) -> None:
    alice.delete_conversation(corpus["cid"])
    assert alice.search(SearchQuery("overdue", all_conversations=True)) == []
    assert alice.search(SearchQuery("%ACME%", all_conversations=True)) == []
    assert scalar(store, "SELECT COUNT(*) FROM messages") == 1
    assert scalar(store, "SELECT COUNT(*) FROM summaries") == 0
    assert _ids(alice.search(SearchQuery("invoice", all_conversations=True))) == [
        alice.messages(corpus["other"])[0].id.__str__()]
    with pytest.raises(NotFoundError):
        alice.conversation(corpus["cid"])
    for table in ("summary_sources", "anchors", "views", "compaction_events", "forwarded", "tool_rounds"):
        assert scalar(store, f"SELECT COUNT(*) FROM {table}") == 0


def test_whitespace_controls_still_separate_terms(alice: TenantStore, corpus: dict[str, Any]) -> None:
    """Tab and newline are whitespace, not refused control characters."""
    expected = alice.search(_q(corpus, "invoice overdue"))
    assert expected
    assert alice.search(_q(corpus, "invoice\toverdue")) == expected
    assert alice.search(_q(corpus, "invoice\noverdue")) == expected


@pytest.mark.parametrize("pattern", ["retry", "OrderService3", "module_3", "2093", "INV-2093"])
def test_words_inside_hosts_paths_and_codes_are_found(alice: TenantStore, counter: TokenCounter,
                                                      pattern: str) -> None:
    """Words split on anything but letters and digits, on both backends (PostgreSQL's default
    parser would keep `OrderService3.retry`, `src/module_3.py` or `-2093` whole)."""
    msgs = [{"role": "user", "content": "the job OrderService3.retry failed on INV-2093"},
            {"role": "assistant", "content": "cat src/module_3.py shows why"}]
    cid = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter).conversation.id
    hits = alice.search(SearchQuery(pattern=pattern, conversation_id=cid, scope="message"))
    assert len(hits) == 1, [h.snippet for h in hits]


_AFTER = " routine status line 0 reports nothing unusual…"
_ID_SNIPPET = "…The sample tagged [PED-89415-X] failed its assay." + _AFTER
_WORDS_SNIPPET = "…The sample [tagged] PED-89415-X failed its [assay]." + _AFTER


@pytest.mark.parametrize(("pattern", "expected"), [
    ('"PED-89415-X"', _ID_SNIPPET),
    ("PED-89415-X", _ID_SNIPPET),
    ("ped-89415-x", _ID_SNIPPET),
    ("assa% tagged", _WORDS_SNIPPET),
], ids=["phrase", "word", "lowercase", "prefix-and-word"])
def test_snippet_brackets_a_hyphenated_id_deep_in_a_long_text(alice: TenantStore, counter: TokenCounter,
                                                             pattern: str, expected: str) -> None:
    """Both backends cut the same snippet around the match and bracket a multi-part id whole."""
    filler = " ".join(f"routine status line {n} reports nothing unusual." for n in range(60))
    texts = [f"{filler} The sample tagged PED-89415-X failed its assay. {filler}",
             f"{filler} The sample tagged PED-89415-Y passed. {filler}"]
    msgs = [{"role": "user" if n % 2 == 0 else "assistant", "content": t} for n, t in enumerate(texts)]
    cid = alice.ingest(msgs, model="m", external_id=None, count_tokens=counter).conversation.id
    hits = alice.search(SearchQuery(pattern=pattern, conversation_id=cid, scope="message"))
    assert [h.snippet for h in hits] == [expected]
