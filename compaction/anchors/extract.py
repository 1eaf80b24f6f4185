"""Anchors: concrete facts that travel raw instead of being paraphrased.

Extraction is deterministic (regular expressions, no model): ids, order and ticket numbers, amounts,
dates and deadlines, names, paths, URLs, emails, explicit decisions, plus pinned messages. Every
draft carries a `key` naming what the value is about ("budget", "deadline", "order number"), so a
later correction yields the same kind+key with a new value and the store supersedes the older one.
Values are copied verbatim from the source.

Precision over recall: decisions only from explicit decision statements with substance, paths in
tool results only when a user/assistant message or a tool-call argument names them too. Sentence
cues travel with the draft: a correction cue makes a `RevisionDraft` the store resolves against the
active anchors, a ruling-out cue retracts what it names, and a hedge ("hypothesis", "might") marks
a value as a hypothesis rather than a fact. The block itself lives in compaction/anchors/block.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from compaction.anchors.block import (
    ANCHOR_BLOCK_CLOSE,
    ANCHOR_BLOCK_INTRO,
    ANCHOR_BLOCK_OPEN,
    anchor_line,
    current_anchors,
    render_anchor_block,
)
from compaction.anchors.cues import (
    CORRECTION,
    HEDGE,
    RULED_OUT,
    Sentence,
    decision_in,
    sentence_at,
    sentences,
)
from compaction.anchors.index import index_drafts
from store.anchors import RevisionDraft, value_in
from store.encoding.content import message_text
from store.models import AnchorDraft, StoredMessage

__all__ = ["ANCHOR_BLOCK_CLOSE", "ANCHOR_BLOCK_INTRO", "ANCHOR_BLOCK_OPEN", "anchor_line",
           "current_anchors", "derive_key", "extract_anchors", "render_anchor_block"]

PINNED_MAX_CHARS = 800
TOOL_RESULT_SCAN_CHARS = 4_000  # tool results are scanned only for ids/paths/urls, bounded
DECISION_MAX_CHARS = 200  # decisions and ruled-out sentences: short, verbatim prefix
TOOL_KINDS = frozenset({"url", "email", "id", "path", "code", "ticket", "labelled"})
_ID_KINDS = frozenset({"id", "code", "ticket", "labelled", "idtoken", "path"})  # widened to the token
_ID_CHAR = re.compile(r"[A-Za-z0-9_]")
_RIGHT_JOINERS = "-_./#+"
_LEFT_JOINERS = "-_.#"
_FENCED = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
# Not ids: "python3", "utf-8", "300ms", "1mbold" (an ANSI code), "16-byte", "12:30", "1.pane_id",
# regex ranges ("a-zA-Z0-9"); a token with "/" is a path or nothing.
_NOT_AN_ID = re.compile(r"[a-z]+[-_]?\d{1,3}|\d+(?:[.,]\d+)*[A-Za-z%]{1,4}|\d+[a-z]+|\d+-[a-z]+"
                        r"|\d{1,2}:\d{2}(?::\d{2})?|\d+[.:][a-z_]\w*|.*(?:a-z|A-Z|0-9|/).*")

_MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
           r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_WEEKDAYS = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_NUM = r"\d{1,3}(?:[,.\u00a0 ]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?"
_UNITS = (r"%|percent|kg|g|mg|lbs?|km|m|cm|mm|mi|miles|ms|s|sec|seconds?|min|minutes?|h|hrs?|hours?"
          r"|days?|weeks?|months?|years?|[KMGT]B|[KMGT]iB|°[CF]|tokens|requests|rps|users|items|units")
_CURRENCY_CODES = r"USD|EUR|GBP|BRL|JPY|CHF|CAD|AUD|INR|CNY"
_NAME = r"[A-Z][a-z'\u00C0-\u017F]+(?:[ -][A-Z][a-z'\u00C0-\u017F]+){0,2}"

# (kind, pattern, group holding the value). Order matters: earlier spans win over overlaps.
_PATTERNS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("url", re.compile(r"\bhttps?://[^\s<>\"'()\[\]]+[^\s<>\"'()\[\].,;:!?]"), 0),
    ("email", re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"), 0),
    ("id", re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), 0),
    ("path", re.compile(r"(?<![\w/:.\\])(?:[A-Za-z]:\\[\w.-]{2,}(?:\\[\w.-]+)*"
                        r"|~?/(?:[\w.@-]+/)*[\w@-]+\.\w{1,8}"
                        r"|~?/(?:[\w.@-]+/){2,}[\w.@-]*|(?:[\w.@-]+/)+[\w@-]+\.[A-Za-z]\w{0,7})\b"), 0),
    ("code", re.compile(r"\b[A-Z][A-Z0-9]{1,9}(?:-[A-Z0-9]+)*-\d{2,}\b"), 0),
    ("ticket", re.compile(r"(?i)\b(?:ticket|issue|bug|case|pr|pull request)\s*(#\d{2,})\b"), 1),
    ("labelled", re.compile(r"(?i)\b(?:number|no\.?|nr\.?|id|code|#)\s*(?:is|:|=)?\s*"
                            r"(?-i:((?=[A-Z-]*\d)[A-Z0-9][A-Z0-9-]{2,}))\b"), 1),
    ("date", re.compile(
        rf"\b\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]\d{{2}}:\d{{2}}(?::\d{{2}})?(?:Z|[+-]\d{{2}}:?\d{{2}})?)?\b"
        rf"|\b{_MONTHS}\.? \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?\b"
        rf"|\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTHS}(?:,? \d{{4}})?\b"
        rf"|(?i:\b(?:by|until|till|before|due|deadline:?)\s+(?:next |this )?){_WEEKDAYS}\b"), 0),
    ("amount", re.compile(
        rf"(?:R\$|[$€£¥])\s?(?:{_NUM})(?:\s?(?:k|K|M|bn|million|billion)\b)?"
        rf"|\b(?:{_CURRENCY_CODES})\s?(?:{_NUM})\b"
        rf"|\b(?:{_NUM})\s?(?:{_CURRENCY_CODES}|dollars|euros|reais)\b"
        rf"|\b(?:{_NUM})\s?(?:{_UNITS})(?![\w])"), 0),
    ("idtoken", re.compile(r"(?<![\w.#/-])(?=[\w.:#-]*\d)(?=[\w.:#-]*[A-Za-z])[A-Za-z0-9]+"
                           r"(?:[-_.:#][A-Za-z0-9]+)*(?![\w-])"), 0),
    ("name", re.compile(
        rf"(?i:\bmy name is|\bi am|\bi'm|\bname\s*:|\bcustomer|\bclient|\bcontact\s*:?|\bsigned,?)"
        rf"\s+({_NAME})|(?m:^\s*(?:—|--|-)\s*({_NAME})\s*$)"), -1),
)

_STOPWORDS = frozenset(re.findall(r"\S+", """
a an the my our your their his her its this that these those it is are was were be been being am
to of for in on at by with from as into onto about over under per via and or but so then than not
no yes now actually correction sorry update updated please also just still only really new old
moved move changed change set sets setting will would should shall can could may might must need
needs want wants have has had do does did get got make made let lets we i you he she they me us
them here there what which who whom when where why how instead rather again total currently
is's it's that's remember note fyi ok okay well hi hello thanks thank going go use using
arrives arrive arriving arrived paid pay pays costs cost ships ship shipped starts start ends end
expires expire see sent send received receive came comes became becomes equals around about
"""))
_LABEL_GENERIC = frozenset({"number", "no", "nr", "id", "code", "#"})
_CLAUSE_BREAK = re.compile(r"[.!?;\n()\[\]{}\"]")
_NEGATED = re.compile(r"(?i)(?:\bnot|\bno longer|\binstead of|\brather than|\bformerly)\s*$")
_DEADLINE_WORDS = re.compile(r"(?i)\b(?:by|until|till|before|due|deadline)\W*$")
_TOKEN = re.compile(r"[^\s]+")
_PLAIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']*")  # RATE_CACHE_TTL is a word
_KEYED_KINDS = frozenset({"amount", "date", "name"})  # semantic key; others keyed by value
# Value-keyed kinds still take the label as key when the value is stated as the label's value
# ("my email is X", "the config file is now Y"), so a correction labelled the same way supersedes.
_LABELLABLE_KINDS = frozenset({"email", "path", "url", "id"})
_LINKED = re.compile(r"(?i)(?:\b(?:is|are)(?:\s+now)?|[:=]|\b(?:changed|moved|updated|switched|renamed)"
                     r"\s+to)\s*$")
_ENUMERATION = re.compile(r"^\s*(?:[,;&/]|\b(?:and|or)\b)")  # "Files: a.py and b.py": a list, no key
_HEDGEABLE = frozenset({"amount", "date"})  # a hedged value is a hypothesis, not a fact
_CUE_WORDS = frozenset({"correction", "corrected", "actually", "update", "updated", "revised",
                        "instead", "rather", "ruled", "discard", "discarded", "rejected", "cause",
                        "hypothesis", "idea", "scrap", "abandon", "abandoned"})
_ID_LABEL = re.compile(r"(?i)(?:number|no\.?|id|code|#)\s*(?:is|:|=)?\s*$")


def extract_anchors(messages: Sequence[StoredMessage]) -> list[AnchorDraft]:
    """Anchor drafts for `messages`, in source order, without duplicates (kind, key, value):
    facts of the conversation's prose, then the agent index of each message (anchors/index.py)."""
    mentioned = "\n".join(message_text(m.message) for m in messages if m.role in ("user", "assistant"))
    drafts: list[AnchorDraft] = []
    seen: set[tuple[str, str, str]] = set()
    for stored in messages:
        for draft in [*_drafts_for(stored, mentioned), *index_drafts(stored)]:
            ident = (draft.kind, draft.key, draft.value)
            if ident not in seen:
                seen.add(ident)
                drafts.append(draft)
    return drafts


def _drafts_for(stored: StoredMessage, mentioned: str) -> Iterator[AnchorDraft]:
    """Pinned text, then the message's anchors in text order (the store applies them in order).

    Prose only: an assistant's tool-call arguments (code, commands) belong to the agent index, and
    fenced code blocks are blanked, so source code never yields facts.
    """
    text = message_text(stored.message)
    if stored.pinned:
        yield _pinned_draft(stored, text)
    if stored.role == "tool":  # noisy listings: a few ids, and paths someone actually named
        found = _tool_result_facts(text[:TOOL_RESULT_SCAN_CHARS], mentioned)
        spans: list[Sentence] = []
    elif stored.role in ("user", "assistant"):
        text = _blank_code(_prose(stored))
        spans = sentences(text)
        found = _scan(text, None) + _sentence_anchors(spans)
    else:
        return
    for start, kind, key, value in sorted(found, key=lambda f: f[0]):
        sentence = sentence_at(spans, start)
        if kind in _HEDGEABLE and sentence is not None and RULED_OUT.search(sentence.text):
            continue  # a value named while ruling it out is not a fact
        yield _draft(stored, kind, key, value, sentence)


def _prose(stored: StoredMessage) -> str:
    content = stored.message.get("content")
    return content if isinstance(content, str) else message_text({"content": content})


def _blank_code(text: str) -> str:
    """Fenced code blocks replaced by spaces (offsets kept)."""
    return _FENCED.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def _tool_result_facts(text: str, mentioned: str) -> list[tuple[int, str, str, str]]:
    """Ids and paths of a tool result that a user or assistant message (or a tool call) names too:
    listings, logs and fixtures are full of ids nobody needs. Keyed by value (no labels)."""
    return [(start, kind, _value_key(value), value) for start, kind, _key, value in _scan(text, TOOL_KINDS)
            if value_in(value, mentioned)]


def _sentence_anchors(spans: list[Sentence]) -> list[tuple[int, str, str, str]]:
    """Decisions and ruled-out statements: whole sentences, verbatim and bounded."""
    found: list[tuple[int, str, str, str]] = []
    for sentence in spans:
        value = sentence.text[:DECISION_MAX_CHARS].rstrip()
        if RULED_OUT.search(sentence.text):
            found.append((sentence.start, "ruled_out", "ruled out: " + _value_key(value)[:80], value))
        elif decision_in(sentence) is not None:
            found.append((sentence.start, "decision", "decision: " + _value_key(value)[:80], value))
    return found


def _draft(stored: StoredMessage, kind: str, key: str, value: str,
           sentence: Sentence | None) -> AnchorDraft:
    """A plain draft, or a revision when its sentence corrects or rules something out."""
    base = AnchorDraft(kind=kind, key=key, value=value, source_message_id=stored.id,
                       source_seq=stored.seq)
    if sentence is None:
        return base
    if kind == "ruled_out":
        return RevisionDraft(**vars(base), action="retract", words=content_words(sentence.text),
                             sentence=sentence.text)
    if kind in _HEDGEABLE and HEDGE.search(sentence.text):
        return replace(base, key="hypothesis: " + key)
    if kind != "decision" and CORRECTION.search(sentence.text):
        return RevisionDraft(**vars(base), action="correct", words=content_words(sentence.text),
                             sentence=sentence.text)
    return base


def content_words(text: str) -> frozenset[str]:
    """Lower-cased words of `text` that say what it is about (no stopwords, no cue words)."""
    words = {t.lower() for t in re.findall(r"[A-Za-z][A-Za-z0-9_']+", text)}
    return frozenset(w for w in words if w not in _STOPWORDS and w not in _CUE_WORDS and len(w) > 2)


def _pinned_draft(stored: StoredMessage, text: str) -> AnchorDraft:
    value = text.strip()
    if len(value) > PINNED_MAX_CHARS:
        omitted = len(value) - PINNED_MAX_CHARS
        value = f"{value[:PINNED_MAX_CHARS]} [... {omitted} more characters in message {stored.id}]"
    return AnchorDraft(kind="pinned", key=f"pinned:{stored.seq}", value=value,
                       source_message_id=stored.id, source_seq=stored.seq)


def _scan(text: str, kinds: frozenset[str] | None) -> list[tuple[int, str, str, str]]:
    """(start, kind, key, value) of every non-overlapping match; earlier patterns claim spans first.

    A value is always a whole token span: an id-like match inside a longer token is widened to the
    whole token ("ORD-4471" in "ORD-4471-B"), any other match inside a token is dropped.
    """
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str, str, str]] = []
    for kind, pattern, group in _PATTERNS:
        if kinds is not None and kind not in kinds and not (kind == "idtoken" and "id" in kinds):
            continue
        for match in pattern.finditer(text):
            start, end, value = _match_span(match, group)
            if value and kind not in ("url", "email"):
                start, end, value = _whole_token(text, start, end, widen=kind in _ID_KINDS)
            if not value or any(start < e and s < end for s, e in taken):
                continue
            if kind == "idtoken" and not _id_shaped(value):
                continue
            taken.append((start, end))
            classified = _classify(kind, text, start, value)
            if classified is not None:
                found.append((start, *classified))
    return found


def _id_shaped(value: str) -> bool:
    """A generic id: at least 5 characters with a joiner, a capital or all hex digits ("A-77213x",
    "INV2024X", "3bb8701"); not prose-like alphanumerics ("topic3word17") nor the `_NOT_AN_ID` shapes."""
    if len(value) < 5 or _NOT_AN_ID.fullmatch(value):
        return False
    return bool(re.search(r"[-_.:#]", value) or re.search(r"[A-Z]", value)
                or (len(value) >= 7 and re.fullmatch(r"[0-9a-f]+", value)))


def _whole_token(text: str, start: int, end: int, *, widen: bool) -> tuple[int, int, str]:
    """The span widened to its whole identifier token; empty when not widened and not whole."""
    wide_start, wide_end = start, end
    while wide_end < len(text) and (_ID_CHAR.match(text[wide_end]) or (
            text[wide_end] in _RIGHT_JOINERS and wide_end + 1 < len(text)
            and _ID_CHAR.match(text[wide_end + 1]))):
        wide_end += 1
    while wide_start > 0 and (_ID_CHAR.match(text[wide_start - 1]) or (
            text[wide_start - 1] in _LEFT_JOINERS and wide_start >= 2
            and _ID_CHAR.match(text[wide_start - 2]))):
        wide_start -= 1
    if (wide_start, wide_end) == (start, end) or widen:
        return wide_start, wide_end, text[wide_start:wide_end]
    return start, end, ""


def _match_span(match: re.Match[str], group: int) -> tuple[int, int, str]:
    if group >= 0:
        return match.start(group), match.end(group), match.group(group) or ""
    for index in range(1, (match.lastindex or 0) + 1):
        if match.group(index):
            return match.start(index), match.end(index), match.group(index)
    return match.start(), match.end(), ""


def _classify(kind: str, text: str, start: int, value: str) -> tuple[str, str, str] | None:
    """Final kind and key of a match, or None for a negated (superseded-in-text) value."""
    before = text[max(0, start - 120):start]
    if _NEGATED.search(before):
        return None
    label = derive_key(before)
    linked = bool(label and _LINKED.search(before) and not _ENUMERATION.match(text[start + len(value):]))
    if kind in ("code", "labelled", "ticket", "idtoken"):
        return _classify_id(kind, value, label, before, linked)
    if kind in _KEYED_KINDS:
        if not label and kind == "date" and (_DEADLINE_WORDS.search(before) or "by" in value.lower()):
            label = "deadline"
        return (kind, label or _value_key(value), value)
    if kind in _LABELLABLE_KINDS and linked:
        return (kind, label, value)
    return (kind, _value_key(value), value)


def _classify_id(kind: str, value: str, label: str, before: str,
                 linked: bool) -> tuple[str, str, str]:
    """Order, ticket or generic id. Keyed semantically only when labelled ("the order number is")."""
    context = f"{label} {value}".lower()
    if "order" in context or value.upper().startswith(("ORD", "PO-")):
        final = "order"
    elif "approv" in context or value.upper().startswith("APR"):
        final = "approval"
    elif kind == "ticket" or re.search(r"ticket|issue|jira|bug", context):
        final = "ticket"
    else:
        final = "id"
    labelled = kind == "labelled" or bool(_ID_LABEL.search(before)) or linked
    key = label if labelled and label else _value_key(value)
    return (final, key, value)


def derive_key(before: str) -> str:
    """Normalised label of what a value is about, from the clause before it ("the budget is").

    Takes the last comma-part of the clause (then the last colon-part that says something) and the
    1-3 meaningful words closest to the value, skipping linking words ("is", "moved to").
    """
    clause = _CLAUSE_BREAK.split(before)[-1].split(",")[-1]
    parts = [p for p in clause.split(":") if _meaningful(_tokens(p))]
    if not parts:
        return ""
    run: list[str] = []
    for token in reversed(_tokens(parts[-1].lower())):
        if not _is_word(token) or (token in _STOPWORDS and token not in _LABEL_GENERIC):
            if run or not _is_word(token):
                break
            continue
        run.insert(0, token)
    return " ".join(run[-3:]) if _meaningful(run) else ""


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _is_word(token: str) -> bool:
    return bool(_PLAIN_WORD.fullmatch(token)) or token == "#"


def _meaningful(tokens: list[str]) -> bool:
    return any(_is_word(t) and t.lower() not in _STOPWORDS and t.lower() not in _LABEL_GENERIC
               for t in tokens)


def _value_key(value: str) -> str:
    return re.sub(r"\s+", " ", value.strip().lower())


