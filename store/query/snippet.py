"""Word-search snippets cut and marked as SQLite FTS5's `snippet()` does, for stores without FTS5.

The PostgreSQL store finds word matches with a tsquery but cannot ask FTS5 for the snippet, and
`ts_headline`'s parser splits text differently from the index (`PED-89415-X` becomes `PED`, `-89415`,
`X`), so it missed multi-part ids and showed the text's first words. Here the text is split as both
indexes split it (runs of letters and digits, diacritics and case folded), every occurrence of a
positive query phrase is found, and the window of `tokens` words is chosen, cut and bracketed with
FTS5's own rules: the window scoring most distinct phrases (a sentence start preferred), centred on
its matches, overlapping matches merged into one bracket that keeps the text between their words.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

SNIPPET_TOKENS = {"words": 16, "trigram": 48}  # a snippet's length; trigram tokens are characters, not words

_TOKEN = re.compile(r"[^\W_]+")
_SPACE = " \t\n\r"
_SENTENCE_END = ".:"
OPEN, CLOSE, ELLIPSIS = "[", "]", "…"


@dataclass(frozen=True)
class Phrase:
    """Folded query words that must follow each other; with `prefix` the last may only start a word."""

    words: tuple[str, ...]
    prefix: bool = False


@dataclass(frozen=True)
class _Hit:
    """One occurrence of a phrase: its first token, the phrase's index and length in tokens."""

    pos: int
    phrase: int
    size: int


@dataclass
class _Span:
    """Matches merged into one bracket: first and last token (-1 when there is none left)."""

    start: int = -1
    end: int = -1


def fold(word: str) -> str:
    """A word as the indexes compare it: diacritics removed, case folded."""
    if word.isascii():
        return word.lower()
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def phrase(text: str, prefix: bool = False) -> Phrase | None:
    """A query word or phrase as folded words (None when it has no letters or digits)."""
    words = tuple(fold(w) for w in _TOKEN.findall(text))
    return Phrase(words, prefix) if words else None


def _starts_of(words: Sequence[str], p: Phrase, where: dict[str, list[int]]) -> list[int]:
    """Positions where phrase `p` occurs, found from the positions of its first word."""
    n = len(p.words)
    if n == 1 and p.prefix:
        return [pos for pos, word in enumerate(words) if word.startswith(p.words[0])]
    found = []
    for pos in where.get(p.words[0], ()):
        tail = words[pos + n - 1] if pos + n <= len(words) else None
        if tail is not None and list(words[pos:pos + n - 1]) == list(p.words[:-1]) and (
                tail.startswith(p.words[-1]) if p.prefix else tail == p.words[-1]):
            found.append(pos)
    return found


def _hits(words: Sequence[str], phrases: Sequence[Phrase]) -> list[_Hit]:
    """Every occurrence of every phrase, in text order (ties by phrase order, as FTS5 lists them)."""
    where: dict[str, list[int]] = {}
    for pos, word in enumerate(words):
        where.setdefault(word, []).append(pos)
    found = [_Hit(pos, index, len(p.words))
             for index, p in enumerate(phrases) for pos in _starts_of(words, p, where)]
    found.sort(key=lambda h: (h.pos, h.phrase))
    return found


def _ends_sentence(text: str, start: int) -> bool:
    """True when whitespace, and before it '.' or ':', precede the word at `start`."""
    i = start - 1
    while i >= 0 and text[i] in _SPACE:
        i -= 1
    return i not in (start - 1, -1) and text[i] in _SENTENCE_END


def _sentence_starts(text: str, spans: Sequence[tuple[int, int]]) -> list[int]:
    """Tokens that start a sentence: the first, and any after '.' or ':' and whitespace."""
    rest = [index for index, (start, _end) in enumerate(spans[1:], 1) if _ends_sentence(text, start)]
    return [0, *rest] if spans else []


def _half(value: int) -> int:
    """value / 2 truncated toward zero, as C divides."""
    return -((-value) // 2) if value < 0 else value // 2


def _score(hits: Sequence[_Hit], at: Sequence[int], start: int, tokens: int, size: int) -> tuple[int, int]:
    """(score, centred start) of the window at `start`: 1000 per distinct phrase, 1 per repeat."""
    seen: set[int] = set()
    score, first, last = 0, -1, 0
    for h in hits[bisect_left(at, start):bisect_left(at, start + tokens)]:
        score += 1 if h.phrase in seen else 1000
        seen.add(h.phrase)
        first = h.pos if first < 0 else first
        last = h.pos + h.size
    centred = min(first - _half(tokens - (last - first)), size - tokens)
    return score, max(centred, 0)


def _best_start(hits: Sequence[_Hit], starts: Sequence[int], tokens: int, size: int) -> int:
    """The first token of the best-scoring window (0 when nothing matched)."""
    at = [h.pos for h in hits]
    scored: dict[int, tuple[int, int]] = {}

    def score(start: int) -> tuple[int, int]:
        if start not in scored:
            scored[start] = _score(hits, at, start, tokens, size)
        return scored[start]

    best, best_start = 0, 0
    for pos in at:
        value, centred = score(pos)
        if value > best:
            best, best_start = value, centred
        if not starts or size <= tokens:
            continue
        sentence = starts[max(bisect_right(starts, pos) - 1, 0)]
        if sentence >= pos:
            continue
        value = score(sentence)[0] + (120 if sentence == 0 else 100)
        if value > best:
            best, best_start = value, sentence
    return best_start


class _Marker:
    """Copies the window's text token by token, opening and closing brackets (FTS5's highlight callback)."""

    def __init__(self, text: str, hits: Sequence[_Hit], first: int, last: int) -> None:
        self.text, self.hits, self.first, self.last = text, hits, first, last
        self.out: list[str] = []
        self.offset, self.is_open, self.cursor = 0, False, 0
        self.span = self._next_span()
        while 0 <= self.span.start < first:
            self.span = self._next_span()

    def _next_span(self) -> _Span:
        """The next bracket: the next hit merged with every following hit that overlaps it."""
        span = _Span()
        while self.cursor < len(self.hits):
            h = self.hits[self.cursor]
            end = h.pos + h.size - 1
            if span.start < 0:
                span = _Span(h.pos, end)
            elif h.pos <= span.end:
                span.end = max(span.end, end)
            else:
                break
            self.cursor += 1
        return span

    def _copy(self, to: int) -> None:
        """Append the text from the offset reached up to `to`."""
        self.out.append(self.text[self.offset:to])
        self.offset = to

    def _bracket(self, mark: str) -> None:
        """Open or close a bracket."""
        self.out.append(mark)
        self.is_open = mark == OPEN

    def token(self, pos: int, start: int, end: int) -> None:
        """Copy one token of the window with the text before it, bracketing matches."""
        if self.first and pos == self.first:
            self.offset = start
        if self.is_open and (pos <= self.span.start or self.span.start < 0) and start > self.offset:
            self._bracket(CLOSE)
        if pos == self.span.start and not self.is_open:
            self._copy(start)
            self._bracket(OPEN)
        if pos == self.span.end:
            if not self.is_open:
                self._bracket(OPEN)
            self._copy(end)
            self.span = self._next_span()
        if pos == self.last:
            if self.is_open:
                if 0 <= self.span.start <= pos:
                    self._copy(end)
                self._bracket(CLOSE)
            self._copy(end)

    def done(self) -> str:
        """The marked window, its last bracket closed."""
        if self.is_open:
            self._bracket(CLOSE)
        return "".join(self.out)


def snippet(text: str, phrases: Sequence[Phrase], tokens: int) -> str:
    """The `tokens`-word window of `text` that best shows the phrases, each match in brackets."""
    spans = [m.span() for m in _TOKEN.finditer(text)]
    hits = _hits([fold(text[a:b]) for a, b in spans], phrases)
    first = _best_start(hits, _sentence_starts(text, spans), tokens, len(spans))
    last = first + tokens - 1
    marker = _Marker(text, hits, first, last)
    for pos in range(first, min(last, len(spans) - 1) + 1):
        marker.token(pos, *spans[pos])
    body = marker.done()
    tail = text[marker.offset:] if last >= len(spans) - 1 else ELLIPSIS
    return (ELLIPSIS if first > 0 else "") + body + tail
