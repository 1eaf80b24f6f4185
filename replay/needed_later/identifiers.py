"""Identifier extraction: the concrete, code-like values an agent carries through a session.

Text is cut into code-like spans (runs of ASCII word characters and `@ ~ . / : * -`; any other
character, CJK or accented letters included, separates spans). Each span is classified and also
yields its meaningful components (the basename of a path, the parts of a dotted name). Prose never
becomes an identifier: a bare word counts only when it is quoted or back-ticked and is not an
ordinary word. An ordinary word is a stopword, anything of one or two letters, or a word the
tokenizer encodes as one token after a space (its vocabulary holds the common words of English and
of code); the predicate is injectable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Literal

from compaction import TokenCounter

Kind = Literal["url", "path", "symbol", "file", "test_id", "dotted", "version", "date", "uuid", "hash",
               "kebab", "snake", "camel", "error", "alnum", "number", "quantity", "quoted", "command"]
OrdinaryWord = Callable[[str], bool]
Found = dict[str, Kind]  # identifier -> kind (the first kind found wins)
Pairs = list[tuple[str, Kind]]

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each else few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just let me more most my myself no nor not now of off on once only or other our ours out over
own same she should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself http https www com org e.g i.e etc todo
""".split())  # noqa: SIM905
FILE_EXTENSIONS = frozenset("""
py pyi pyc ex exs eex heex leex erl hrl js jsx mjs cjs ts tsx json jsonl md rst txt toml yaml yml
cfg ini conf lock log rs go java kt rb php c h cc cpp hpp cs swift sh bash zsh fish sql html htm css
scss sass vue svelte xml csv tsv env db sqlite ipynb gradle mk cmake dockerfile tf hcl lua pl r jl
dart scala clj out err patch diff tar gz zip whl png jpg svg pdf
""".split())  # noqa: SIM905

_A = re.ASCII
_SPAN = re.compile(r"[\w@~./:*\-]+", _A)
_URL = re.compile(r"^[a-z][a-z0-9+.\-]*://\S+$", re.I | _A)
_URL_IN_TEXT = re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s<>\"'`)\]]+", re.I | _A)
_LINE_SUFFIX = re.compile(r"^(?P<base>.+?)(?P<lines>(?::\d+)+)$", _A)
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I | _A)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:T[\d:.]+Z?)?$", _A)
_VERSION = re.compile(r"^v?\d+(?:\.\d+)+(?:[-.]?(?:rc|a|b|alpha|beta|pre|post|dev)\.?\d*)*$", _A)
_DECIMAL = re.compile(r"^\d+\.\d+$", _A)
_SNAKE = re.compile(r"^_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*$", _A)
_DUNDER = re.compile(r"^__[A-Za-z]\w*__$", _A)
_HEX = re.compile(r"^[0-9a-f]{7,64}$", _A)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*[?!]?$", _A)
_SYMBOL = re.compile(r"^[A-Za-z_][\w.]*[?!]?/\d$", _A)
_KEBAB = re.compile(r"^[A-Za-z0-9]\w*(?:-\w+)+(?:\.\d+)*$", _A)
_CAMEL = re.compile(r"[a-z][A-Z]|^[A-Z]{2,}[a-z]", _A)
_ERROR_NAME = re.compile(r"(?:Error|Exception|Warning)$", _A)
_ALNUM = re.compile(r"^[A-Za-z]+\d+[A-Za-z\d]*$", _A)
_COMMA_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,])", _A)
_QUANTITY = re.compile(
    r"(?<![\w.,])\d+(?:\.\d+)?(?:ms|s|us|ns|m|h|KB|MB|GB|TB|kB|KiB|MiB|GiB|%|px|x)(?!\w)"
    r"|(?<![\w.,])\d+(?:\.\d+)? (?:seconds|minutes|hours|tokens|bytes|lines|files|tests|passed|"
    r"failed|errors|warnings|skipped|xfailed|xpassed|deselected|issues|commits)\b", _A)
_QUOTED = re.compile(r"(?<!\w)([`\"'])([A-Za-z_][\w.\-/:]{2,79})\1(?!\w)", _A)


def tokenizer_ordinary_word(count_text: Callable[[str], int]) -> OrdinaryWord:
    """The ordinary-word test built on a tokenizer's token count."""
    @lru_cache(maxsize=65536)
    def ordinary(word: str) -> bool:
        """Stopword, one or two letters, or a single token after a space."""
        lower = word.lower()
        if len(lower) <= 2 or lower in STOPWORDS:
            return True
        return lower.isascii() and lower.isalpha() and count_text(" " + lower) == 1
    return ordinary


def default_ordinary_word() -> OrdinaryWord:
    """Ordinary words of o200k_base (the tokenizer ctxproxy uses for current OpenAI models)."""
    return tokenizer_ordinary_word(TokenCounter.for_model("gpt-4o-mini").count_text)


def _strip(token: str) -> str:
    """Drop the punctuation a code-like span picks up from prose or markup."""
    token = re.sub(r"^\.{2,}(?!/)", "", token.strip(":-@*"))
    return token.rstrip(".:-/")


def _add(found: Found, ident: str, kind: Kind) -> None:
    if ident and ident not in found:
        found[ident] = kind


class IdentifierExtractor:
    """Finds identifiers in text: `extract(text)` returns {identifier: kind}."""

    def __init__(self, ordinary_word: OrdinaryWord | None = None) -> None:
        self._ordinary = ordinary_word or default_ordinary_word()

    def extract(self, text: str) -> Found:
        """Every identifier of `text`: URLs, code-like spans and their parts, quantities, quoted keys."""
        found: Found = {}
        for url in _URL_IN_TEXT.findall(text):
            _add(found, url.rstrip(".,;:"), "url")
        for match in _COMMA_NUMBER.finditer(text):
            _add(found, match.group(), "number")
        for span in _SPAN.findall(_COMMA_NUMBER.sub(" ", _URL_IN_TEXT.sub(" ", text))):
            for ident, kind in self.classify(span):
                _add(found, ident, kind)
        for match in _QUANTITY.finditer(text):
            _add(found, match.group(), "quantity")
        for match in _QUOTED.finditer(text):
            inner = match.group(2)
            if _NAME.match(inner) and not self._ordinary(inner) and not self.classify(inner):
                _add(found, inner, "quoted")
        return found

    def classify(self, span: str) -> Pairs:
        """Identifiers of one code-like span: itself (when it qualifies) and its components."""
        token = _strip(span)
        if len(token) < 3 and not token.isdigit():
            return []
        if _URL.match(token):
            return [(token, "url")]
        if "::" in token:
            return self._test_id(token)
        lines = _LINE_SUFFIX.match(token)
        if lines:
            numbers: Pairs = [(n, "number") for n in lines.group("lines").split(":") if len(n) >= 3]
            return self.classify(lines.group("base")) + numbers
        if "/" in token:
            return self._path(token)
        if ":" in token:
            return [pair for part in token.split(":") if part for pair in self.classify(part)]
        return self._segment(token)

    def _test_id(self, token: str) -> Pairs:
        """`file.py::Class::test`: the whole id and each part."""
        parts = [p for p in token.split("::") if p]
        out: Pairs = [(token, "test_id")] if len(parts) >= 2 else []
        return out + [pair for part in parts for pair in self.classify(part)]

    def _path(self, token: str) -> Pairs:
        """A span with slashes: `name/arity` symbols, paths (with their segments), or plain prose."""
        segments = [s for s in token.split("/") if s]
        if not segments or re.fullmatch(r"[\d/.\-]+", token):
            return []
        if _SYMBOL.match(token):
            return [(token, "symbol"), *self._segment(token.split("/")[0])]
        parts = [pair for segment in segments for pair in self._segment(segment)]
        rooted = token.startswith(("/", "~", "./", "../"))
        if not rooted and len(segments) == 2 and not parts and all(map(self._ordinary, segments)):
            return parts  # `and/or`, `input/output`
        if len(segments) == 1 and not self._specific(segments[0]):
            return parts  # `/div`, `/tmp`
        return [(token, "path"), *parts]

    def _specific(self, segment: str) -> bool:
        """A lone `/segment` is a path only when the segment is not a plain word."""
        return bool(re.search(r"[._\-\d]", segment)) or not self._ordinary(segment)

    def _segment(self, token: str) -> Pairs:
        """A span without slashes: uuids, dates, kebab ids, dotted names and versions, atoms."""
        token = _strip(token)
        if _UUID.match(token):
            return [(token, "uuid")]
        if _DATE.match(token):
            return [(token, "date")]
        if "-" in token and _KEBAB.match(token) and not _VERSION.match(token):
            return self._kebab(token)
        if "." in token:
            return self._dotted(token)
        kind = self._atom(token)
        return [(token, kind)] if kind else []

    def _kebab(self, token: str) -> Pairs:
        """`spotter-fum.1`, `INV-2031-b`: kept when it has a digit, a code-like part or a rare word."""
        words = re.split(r"[-.]", token)
        parts: Pairs = [(w, k) for w in words if (k := self._atom(w))]
        if max(len(w) for w in words) < 3:
            return []
        if any(c.isdigit() for c in token) or parts or not all(map(self._ordinary, words)):
            return [(token, "kebab"), *parts]
        return []

    def _dotted(self, token: str) -> Pairs:
        """Versions, file names, dotted module/attribute paths (`request.node.add_marker`)."""
        if _VERSION.match(token):
            letters = any(c.isalpha() for c in token.lstrip("v"))
            return [(token, "version")] if token.count(".") >= 2 or letters else []
        if _DECIMAL.match(token):
            return []
        if token.startswith("."):
            name = token[1:]
            return [(token, "file")] if _NAME.match(name) and not self._ordinary(name) else []
        parts = token.split(".")
        if any(not _NAME.match(p) for p in parts if p) or "" in parts[1:]:
            return [pair for p in parts if p for pair in self._segment(p)]
        atoms: Pairs = [(p, k) for p in parts if p and (k := self._atom(p))]
        if len(parts) >= 2 and parts[-1].lower() in FILE_EXTENSIONS:
            return [(token, "file"), *atoms]
        if len(parts) >= 3 or atoms or not all(self._ordinary(p) for p in parts if p):
            return [(token, "dotted"), *atoms]
        return []

    @staticmethod
    def _atom(token: str) -> Kind | None:
        """The kind of a separator-free token, or None for plain words and short numbers."""
        if token.isdigit():
            return "number" if len(token) >= 3 else None
        if _HEX.match(token) and any(c.isdigit() for c in token) and any(c.isalpha() for c in token):
            return "hash"
        if _SNAKE.match(token) or _DUNDER.match(token):
            return "snake"
        if _CAMEL.search(token):
            return "error" if _ERROR_NAME.search(token) else "camel"
        if _ALNUM.match(token) and len(token) >= 4:
            return "alnum"
        return None
