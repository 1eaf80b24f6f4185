"""The search pattern language, parsed by us and compiled to a safe FTS5 MATCH expression.

User text never reaches MATCH as is: terms are tokenised here and emitted as quoted FTS5 strings,
operators are rebuilt from a parsed tree, and anything we cannot read raises InvalidRequestError
(param="pattern"). Language:

- words (`invoice`), quoted phrases (`"payment failed"`), uppercase `AND` / `OR` / `NOT`
  (adjacent terms mean AND; NOT is binary: `invoice NOT draft`), parentheses for grouping;
- `%fuzzy%` substring match (also `%suffix`), `prefix%` prefix match;
- code identifiers (`parse_invoice_v2`) match as a phrase of their parts in word mode.

A pattern made only of words, phrases and prefixes runs on the unicode61 index (word match, bm25).
Any substring term or CJK text switches the whole pattern to the trigram index, where every term is a
case-insensitive substring and needs at least 3 characters (a trigram limit).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from config.errors import InvalidRequestError

MAX_PATTERN_CHARS = 1_000
MAX_TERMS = 32
MAX_NESTING = 8
_OPERATORS = {"AND", "OR", "NOT"}
_WORD_TOKEN = re.compile(r"[^\W_]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f]")
_SPECIAL = set('()"')

LeafKind = Literal["word", "prefix", "substring", "phrase"]
Mode = Literal["words", "trigram"]


def _fail(message: str) -> InvalidRequestError:
    return InvalidRequestError(f"invalid search pattern: {message}", param="pattern")


@dataclass(frozen=True)
class Leaf:
    kind: LeafKind
    text: str

    @property
    def needs_trigram(self) -> bool:
        return self.kind == "substring" or bool(_CJK.search(self.text))


@dataclass(frozen=True)
class Group:
    op: Literal["AND", "OR"]
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Exclude:
    keep: Node
    drop: tuple[Node, ...]


Node = Leaf | Group | Exclude


def _lex(pattern: str) -> list[tuple[str, str]]:
    """Tokens as (kind, text): '(' ')' OP TERM PHRASE."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            out.append((ch, ch))
            i += 1
        elif ch == '"':
            end = pattern.find('"', i + 1)
            if end < 0:
                raise _fail("unbalanced double quote")
            out.append(("PHRASE", pattern[i + 1:end]))
            i = end + 1
        else:
            j = i
            while j < n and not pattern[j].isspace() and pattern[j] not in _SPECIAL:
                j += 1
            word = pattern[i:j]
            out.append(("OP", word) if word in _OPERATORS else ("TERM", word))
            i = j
    return out


def _leaf(kind: str, text: str) -> Leaf:
    """Classify one term or phrase; reject what cannot be searched."""
    if kind == "PHRASE":
        if not text.strip():
            raise _fail("empty quoted phrase")
        return Leaf("phrase", text)
    if text == "NEAR":
        raise _fail("NEAR is not supported; use AND or a quoted phrase")
    core = text.strip("%")
    if "%" in core:
        raise _fail(f"'%' may only start or end a term ({text!r})")
    if not core:
        raise _fail(f"{text!r} needs text between the '%' signs")
    if text.startswith("%"):
        return Leaf("substring", core)
    return Leaf("prefix" if text.endswith("%") else "word", core)


class _Parser:
    """Recursive descent: or := and (OR and)*; and := [NOT] primary ...; primary := ( or ) | leaf."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0
        self.leaves = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def parse(self) -> Node:
        node = self.or_expr()
        if self.peek() is not None:
            raise _fail("unbalanced parentheses")
        return node

    def or_expr(self) -> Node:
        items = [self.and_expr()]
        while self.peek() == ("OP", "OR"):
            self.take()
            if self._at_boundary():
                raise _fail("OR needs a term on each side")
            items.append(self.and_expr())
        return items[0] if len(items) == 1 else Group("OR", tuple(items))

    def _at_boundary(self) -> bool:
        token = self.peek()
        return token is None or token[0] == ")" or token == ("OP", "OR") or token == ("OP", "AND")

    def and_expr(self) -> Node:
        keep: list[Node] = []
        drop: list[Node] = []
        while not (self.peek() is None or self.peek() == (")", ")") or self.peek() == ("OP", "OR")):
            token = self.peek()
            if token == ("OP", "AND"):
                self.take()
                if not keep or self._at_boundary():
                    raise _fail("AND needs a term on each side")
                continue
            if token == ("OP", "NOT"):
                self.take()
                if not keep:
                    raise _fail("NOT needs a term before it, e.g. 'invoice NOT draft'")
                drop.append(self.primary())
                continue
            keep.append(self.primary())
        if not keep:
            token = self.peek()
            raise _fail(f"{token[1]} needs a term on each side" if token and token[0] == "OP"
                        else "expected a search term")
        node: Node = keep[0] if len(keep) == 1 else Group("AND", tuple(keep))
        return Exclude(node, tuple(drop)) if drop else node

    def primary(self) -> Node:
        kind, text = self.take() if self.peek() else ("END", "")
        if kind == "(":
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise _fail(f"parentheses nested deeper than {MAX_NESTING}")
            node = self.or_expr()
            if self.peek() != (")", ")"):
                raise _fail("unbalanced parentheses")
            self.take()
            self.depth -= 1
            return node
        if kind in ("TERM", "PHRASE"):
            self.leaves += 1
            if self.leaves > MAX_TERMS:
                raise _fail(f"more than {MAX_TERMS} terms")
            return _leaf(kind, text)
        if kind == "OP":
            raise _fail(f"{text} needs a term after it")
        raise _fail("unbalanced parentheses" if kind == ")" else "expected a search term")


def parse_pattern(pattern: str) -> Node:
    """Parse the user pattern into a tree, or raise InvalidRequestError(param='pattern')."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise _fail("pattern is empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise _fail(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    _reject_control_characters(pattern)
    return _Parser(_lex(pattern)).parse()


def _reject_control_characters(pattern: str) -> None:
    """Control characters (NUL above all: SQLite cuts strings there) would make FTS5 fail, not answer.

    Whitespace controls (tab, newline) stay: they only separate terms.
    """
    for ch in pattern:
        if unicodedata.category(ch) == "Cc" and not ch.isspace():
            raise _fail(f"control character U+{ord(ch):04X} is not allowed")


def _leaves(node: Node) -> list[Leaf]:
    if isinstance(node, Leaf):
        return [node]
    if isinstance(node, Group):
        return [leaf for item in node.items for leaf in _leaves(item)]
    return _leaves(node.keep) + [leaf for item in node.drop for leaf in _leaves(item)]


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _emit_leaf(leaf: Leaf, mode: Mode) -> str:
    if mode == "trigram":
        text = leaf.text.strip()
        if len(text) < 3:
            raise _fail(f"{leaf.text!r} is too short: substring and CJK searches need at least "
                        "3 characters in every term")
        return _quote(text)
    tokens = _WORD_TOKEN.findall(leaf.text)
    if not tokens:
        raise _fail(f"{leaf.text!r} has no letters or digits to search for")
    return _quote(" ".join(tokens)) + (" *" if leaf.kind == "prefix" else "")


def _emit(node: Node, mode: Mode) -> str:
    if isinstance(node, Leaf):
        return _emit_leaf(node, mode)
    if isinstance(node, Group):
        return "(" + f" {node.op} ".join(_emit(item, mode) for item in node.items) + ")"
    return "(" + " NOT ".join([_emit(node.keep, mode)] + [_emit(d, mode) for d in node.drop]) + ")"


def compile_pattern(pattern: str) -> tuple[Mode, str]:
    """(index to use, FTS5 MATCH expression) for a user pattern."""
    tree = parse_pattern(pattern)
    mode: Mode = "trigram" if any(leaf.needs_trigram for leaf in _leaves(tree)) else "words"
    return mode, _emit(tree, mode)
