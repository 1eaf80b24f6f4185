"""Extractive-summary verifier (seed 002): a summary may not introduce facts its sources lack.

Fact-like tokens (numbers, ids, paths, URLs, emails, capitalised names, acronyms, CamelCase) of the
summary must occur in the source text or the anchor block. Numbers are compared normalised
("$1,250.00" == "1250"), names case-insensitively as whole words. Structured summaries start nearly
every line with a capital, so a capitalised word at a line/sentence start is still a name unless it
is a common English or section word, or occurs (in any case) in the sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = r"\d{1,3}(?:[,.]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?"
_FACT = re.compile(
    r"(?P<url>https?://[^\s<>\"'()\[\]]*[^\s<>\"'()\[\].,;:!?])"
    r"|(?P<email>[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,})"
    r"|(?P<path>(?<![\w/])(?:[A-Za-z]:\\[^\s\"'<>|]+|~?/?(?:[\w.@-]+/)+[\w.@-]*[\w@-]))"
    r"|(?P<id>(?<![\w.,])(?=[\w#-]*\d)(?=[\w#-]*[A-Za-z#])[A-Za-z0-9#]+(?:[-_][A-Za-z0-9]+)*(?![\w]))"
    r"|(?P<date>\b\d{4}-\d{2}-\d{2}\b)"
    rf"|(?P<number>(?<![\w.,])(?:{_NUMBER})(?![\w]))"
    r"|(?P<camel>\b(?:[A-Z][a-z\u00C0-\u017F]+){1,}[A-Z][A-Za-z\u00C0-\u017F]*\b|\b[a-z]+[A-Z][A-Za-z]*\b)"
    r"|(?P<acronym>\b[A-Z]{2,}\b)"
    r"|(?P<name>\b[A-Z][a-z\u00C0-\u017F]+\b)"
)
_LIST_MARKER = re.compile(r"(?m)^(\s*)\d{1,2}[.)](?=\s)")
_HEADER_LINE = re.compile(r"(?m)^\s*</?ctxproxy:[^>]*>.*$")
_SENTENCE_END = set(".!?:;\n-*#>|([\"'`")
# Words of the summary format and the prompts: capitalised by the format, not facts.
SECTION_WORDS = frozenset("""
intent decisions decision files file artifacts artifact errors error fixes fix open operations
operation approvals approval next steps step expand details about user assistant summary tool
system none pending unknown the this that these those and but also then however note notes
current state task tasks todo todos durable facts rationale context conversation messages
message
""".split())  # noqa: SIM905
# Common English words (and summary verbs) that start lines and sentences; never names. Words that
# are also common first names (Will, Mark, Bill, May, ...) are left out on purpose.
COMMON_WORDS = SECTION_WORDS | frozenset("""
a am an as at be by do go he if in is it me my no of oh on or so to up us we ok id ids api url json
http https sql ui cli todo tbd fyi eta asap faq
all any are was were has have had not now new old one two per via yes its our out off own few
for from with without into onto over under after before during since until while when where
which who whom whose what why how than there here they them their she her his him you your
we our ours each every both either neither some many much more most other another such same
only just also still even very too again already always never often once there because though
although since unless whether so thus hence therefore instead meanwhile finally first second
third last later earlier previously currently recently today tomorrow yesterday
use used uses using add added adds adding fix fixed fixing run ran runs running check checked
checks checking send sent sends mail mailed email emailed call called calls ask asked asks
make made makes need needs needed want wants wanted create created update updated remove removed
delete deleted set sets get got gets keep kept move moved rename renamed change changed changes
write wrote written read review reviewed reviews test tested tests install installed deploy
deployed build built confirm confirmed confirms wait waiting waited verify verified try tried
replace replaced switch switched investigate investigated implement implemented refactor
refactored agreed agree decided decide chose choose choosing approved approve reject rejected
pending done completed complete finished finish started start starting stopped stop resolved
resolve failed fails fail found find see seen look looked note noted consider considered plan
planned planning continue continued follow followed reply replied answer answered explain
explained provide provided include included includes including ensure added also let lets
user's users assistant's key important main goal goals problem problems issue issues result
results outcome status reason cause background summary overview details question questions
answer answers request requests response responses change output input data code
yes no maybe please thanks thank
""".split())  # noqa: SIM905


@dataclass(frozen=True)
class VerificationResult:
    ok: bool
    rejected_facts: tuple[str, ...] = ()


def normalise_number(text: str) -> str:
    """Canonical digits: thousands separators dropped, decimal point kept, trailing zero decimals cut."""
    if "," in text and "." in text:
        decimal = "," if text.rfind(",") > text.rfind(".") else "."
    elif text.count(",") + text.count(".") == 1:
        sep = "," if "," in text else "."
        decimal = sep if len(text) - text.index(sep) - 1 != 3 else ""
    else:
        decimal = ""
    integer, _, fraction = text.rpartition(decimal) if decimal else (text, "", "")
    integer = re.sub(r"[,.]", "", integer) or "0"
    fraction = fraction.rstrip("0")
    return f"{integer.lstrip('0') or '0'}.{fraction}" if fraction else integer.lstrip("0") or "0"


def _at_sentence_start(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t")
    return not before or before[-1] in _SENTENCE_END


def _facts_with_kind(text: str) -> set[tuple[str, str]]:
    """(kind, value) facts; a capitalised word at a line/sentence start has kind `lead`."""
    text = _LIST_MARKER.sub(r"\1", _HEADER_LINE.sub("", text))
    facts: set[tuple[str, str]] = set()
    for match in _FACT.finditer(text):
        kind = match.lastgroup or ""
        value = match.group()
        if kind == "number":
            facts.add((kind, normalise_number(value)))
        elif kind in ("name", "acronym"):
            if value.lower() not in COMMON_WORDS:
                lead = kind == "name" and _at_sentence_start(text, match.start())
                facts.add(("lead" if lead else kind, value.lower()))
        else:
            facts.add((kind, value.lower().rstrip(".")))
    return facts


def fact_tokens(text: str) -> set[str]:
    """Normalised fact-like tokens of `text` (lowercased; numbers canonicalised).

    Capitalised words at a sentence start are left out: alone, they may be ordinary words.
    """
    return {value for kind, value in _facts_with_kind(text) if kind != "lead"}


def verify_summary(summary_text: str, sources_text: str, anchors_text: str = "") -> VerificationResult:
    """Accept the summary only if each of its facts occurs in the sources or the anchors."""
    reference = f"{sources_text}\n{anchors_text}"
    known = fact_tokens(reference)
    lowered = reference.lower()
    rejected = sorted(value for kind, value in _facts_with_kind(summary_text)
                      if value not in known and not _occurs(kind, value, lowered))
    return VerificationResult(ok=not rejected, rejected_facts=tuple(rejected))


def _occurs(kind: str, value: str, lowered_reference: str) -> bool:
    """Names may appear lowercased or at a sentence start in the sources: whole-word search.

    A sentence-start word (`lead`) passes when it or its stem ("shipped" -> "ship") is a common
    word or occurs in the sources.
    """
    if kind == "number":
        return False
    forms = _stems(value) if kind == "lead" else (value,)
    return any(form in COMMON_WORDS
               or re.search(rf"(?<![\w]){re.escape(form)}(?![\w])", lowered_reference) is not None
               for form in forms)


def _stems(word: str) -> tuple[str, ...]:
    """The word and its plausible stems without -s/-es/-d/-ed/-ing (doubled consonant undone)."""
    forms = [word]
    for suffix in ("s", "es", "d", "ed", "ing"):
        stem = word[: -len(suffix)]
        if word.endswith(suffix) and len(stem) >= 3:
            forms.append(stem)
            if len(stem) >= 4 and stem[-1] == stem[-2]:
                forms.append(stem[:-1])
    return tuple(forms)
