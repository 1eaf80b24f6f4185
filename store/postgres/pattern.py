"""The search pattern language (parsed by store/query/pattern.py) compiled to PostgreSQL conditions.

Words mode becomes one tsquery over the `tsv` column: each word or phrase a `phraseto_tsquery`, a
prefix a `:*` lexeme, AND/OR/NOT as `&&`/`||`/`&& !!`; text is unaccented and split on anything but
letters and digits, exactly as the trigger splits documents, by `ctxproxy_query_words` (migration 8:
declared IMMUTABLE, so the planner folds a search's whole tsquery into one constant instead of
re-running unaccent for every row it ranks). Trigram mode (a `%substring%` term or
CJK text) becomes ILIKE conditions, case-insensitive, served by the pg_trgm index. User text is
always a bound parameter, never SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.query.pattern import Group, Leaf, Mode, Node, compile_pattern, parse_pattern
from store.query.snippet import Phrase, phrase

_WORDS = "ctxproxy_query_words({p})"
_PHRASE = "phraseto_tsquery('simple', " + _WORDS + ")"
_PREFIX = ("to_tsquery('simple', regexp_replace(btrim(" + _WORDS + "), ' +', ' <-> ', 'g') || ':*')")


@dataclass(frozen=True)
class Compiled:
    """A pattern as SQL: `expr` is a tsquery (words) or a boolean over `{column}` (trigram)."""

    mode: Mode
    expr: str
    params: dict[str, Any]
    terms: tuple[str, ...]  # the positive terms, for ranking and snippets of substring matches
    phrases: tuple[Phrase, ...] = ()  # the positive terms as folded words, for snippets of word matches


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class _Emitter:
    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.params: dict[str, Any] = {}
        self.terms: list[str] = []
        self.phrases: list[Phrase] = []

    def bind(self, value: str) -> str:
        name = f"pat{len(self.params)}"
        self.params[name] = value
        return ":" + name

    def leaf(self, leaf: Leaf, positive: bool) -> str:
        text = leaf.text.strip()
        if positive:
            self.terms.append(text)
            words = phrase(text, prefix=leaf.kind == "prefix")
            self.phrases += [words] if words else []
        if self.mode == "trigram":
            return "{column} ILIKE " + self.bind(_like(text))
        template = _PREFIX if leaf.kind == "prefix" else _PHRASE
        return template.format(p=self.bind(text))

    def node(self, node: Node, positive: bool = True) -> str:
        ops = {"AND": " AND ", "OR": " OR "} if self.mode == "trigram" else {"AND": " && ", "OR": " || "}
        if isinstance(node, Leaf):
            return self.leaf(node, positive)
        if isinstance(node, Group):
            return "(" + ops[node.op].join(self.node(item, positive) for item in node.items) + ")"
        negate = " AND NOT " if self.mode == "trigram" else " && !!"
        return "(" + self.node(node.keep, positive) + "".join(
            negate + self.node(d, False) for d in node.drop) + ")"


def compile_pg(pattern: str) -> Compiled:
    """Validate exactly as the SQLite store does (same errors), then emit PostgreSQL."""
    mode, _fts5 = compile_pattern(pattern)
    emitter = _Emitter(mode)
    expr = emitter.node(parse_pattern(pattern))
    return Compiled(mode, expr, emitter.params, tuple(emitter.terms), tuple(emitter.phrases))
