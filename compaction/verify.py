"""Extractive-summary verifier (seed 002): a summary may not introduce facts its sources lack.

Fact-like tokens (numbers, ids, paths, URLs, emails, capitalised names) of the summary must occur
in the source text or the anchor block. Numbers are compared normalised ("$1,250.00" == "1250"),
names case-insensitively as whole words. Structural words of the summary format are ignored.
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
    r"|(?P<name>\b[A-Z][a-z\u00C0-\u017F]{2,}\b)"
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
    text = _LIST_MARKER.sub(r"\1", _HEADER_LINE.sub("", text))
    facts: set[tuple[str, str]] = set()
    for match in _FACT.finditer(text):
        kind = match.lastgroup or ""
        value = match.group()
        if kind == "number":
            facts.add((kind, normalise_number(value)))
        elif kind == "name":
            if value.lower() not in SECTION_WORDS and not _at_sentence_start(text, match.start()):
                facts.add((kind, value.lower()))
        else:
            facts.add((kind, value.lower().rstrip(".")))
    return facts


def fact_tokens(text: str) -> set[str]:
    """Normalised fact-like tokens of `text` (lowercased; numbers canonicalised)."""
    return {value for _, value in _facts_with_kind(text)}


def verify_summary(summary_text: str, sources_text: str, anchors_text: str = "") -> VerificationResult:
    """Accept the summary only if each of its facts occurs in the sources or the anchors."""
    reference = f"{sources_text}\n{anchors_text}"
    known = fact_tokens(reference)
    lowered = reference.lower()
    rejected = sorted(value for kind, value in _facts_with_kind(summary_text)
                      if value not in known and not _occurs(kind, value, lowered))
    return VerificationResult(ok=not rejected, rejected_facts=tuple(rejected))


def _occurs(kind: str, value: str, lowered_reference: str) -> bool:
    """Names may appear lowercased or at a sentence start in the sources: whole-word search."""
    if kind == "number":
        return False
    return re.search(rf"(?<![\w]){re.escape(value)}(?![\w])", lowered_reference) is not None
