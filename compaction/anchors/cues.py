"""Sentence-level cues for anchor extraction: corrections, ruling-outs, hedges and decisions.

A cue changes what a value in its sentence means: "correction: ... $5,200" replaces an older value,
"the cache hypothesis is ruled out" retracts an idea, "hypothesis: ... 75 seconds" is not a fact,
and only an explicit decision statement with substance is a decision (generic agreement chatter
such as "the team agreed to leave it for now" is not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SENTENCE = re.compile(r"[^\n]+?(?:[.!?]+(?=\s|$)|$)", re.MULTILINE)  # "1,249.50" and "a.py" stay whole
CORRECTION = re.compile(
    r"(?i)\b(?:correction|corrected|correcting|actually|update|updated|changed to|revised|new value"
    r"|instead of|rather than)\b|(?<!\bfor )(?<!\bright )\bnow\b|\bnot\b[^.;]{1,60}\bbut\b")
RULED_OUT = re.compile(
    r"(?i)\b(?:ruled out|rule out|rules out|discard(?:ed|s)?|reject(?:ed|s)?|not the cause"
    r"|won't work|will not work|drop(?:ped)? the idea|scrap(?:ped)?|abandon(?:ed)?)\b")
HEDGE = re.compile(
    r"(?i)\b(?:hypothes[ie]s|hypothesi[sz]e|maybe|perhaps|might|possibly|probably|suspect|guess"
    r"|if so|would be|could be)\b")
_DECISION = re.compile(
    r"(?i)\b(?:we(?:'ve| have)? decided\b|i(?:'ve| have)? decided\b|decided to\b|decision(?: recorded| made"
    r"| taken)?:|let's go with\b|let us go with\b|we(?:'ll| will) go with\b|approved by\b|approved:"
    r"|(?:i|we|has|have|had) approved\b)")
_DEFERRAL = re.compile(r"(?i)\b(?:leave it|for now|revisit|later|as it is|nothing|no action)\b")
_SUBSTANCE = re.compile(r"[A-Za-z0-9$€£][\w$€£.,/-]*")
_FILLER = frozenset({"the", "a", "an", "to", "it", "that", "this", "we", "i", "and", "or", "of", "in",
                     "on", "for", "with", "is", "be", "will", "so", "use"})


@dataclass(frozen=True)
class Sentence:
    start: int
    end: int
    text: str  # verbatim, surrounding whitespace and the final period removed


def sentences(text: str) -> list[Sentence]:
    """Sentences of `text` with their offsets (a period inside a number or a path does not split)."""
    found: list[Sentence] = []
    for match in _SENTENCE.finditer(text):
        raw = match.group()
        stripped = raw.strip().rstrip(".")
        if stripped:
            found.append(Sentence(match.start(), match.end(), stripped))
    return found


def sentence_at(spans: list[Sentence], offset: int) -> Sentence | None:
    return next((s for s in spans if s.start <= offset < s.end), None)


def decision_in(sentence: Sentence) -> str | None:
    """The sentence, verbatim and bounded, when it states a decision with substance; else None."""
    cue = _DECISION.search(sentence.text)
    if cue is None or HEDGE.search(sentence.text) or RULED_OUT.search(sentence.text):
        return None
    after = sentence.text[cue.end():]
    words = [w for w in _SUBSTANCE.findall(after) if w.lower() not in _FILLER]
    if not words or _DEFERRAL.search(after):
        return None
    return sentence.text
