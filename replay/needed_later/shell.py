"""`program subcommand` heads of shell scripts (`mix test`, `git diff`, `bd show`): commands an agent
reruns are identifiers too."""

from __future__ import annotations

import re
import shlex

_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_]\w*=\S*$")
_SUBCOMMAND = re.compile(r"^[a-z][a-z0-9_\-]*$")
_PROGRAM = re.compile(r"^(?:[a-z][\w.\-]*|\.{0,2}/[\w.\-/]+)$")
_NOT_PROGRAMS = frozenset({"cd", "echo", "export", "set", "then", "do", "done", "fi", "else"})
_OPERATOR_CHARS = frozenset(";&|")


def simple_commands(script: str) -> list[list[str]]:
    """The words of each simple command of `script`: heredoc bodies skipped, quotes kept together,
    split at `;`, `&&`, `||`, `|`, `&` and newlines."""
    out: list[list[str]] = []
    heredoc: str | None = None
    for line in script.split("\n"):
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        marker = _HEREDOC.search(line)
        heredoc = marker.group(1) if marker else None
        out += _split_operators(_shell_words(line))
    return out


def _shell_words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: a plain whitespace split
        return line.split()


def _split_operators(words: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for word in words:
        if word and set(word) <= _OPERATOR_CHARS:
            out.append([])
        else:
            out[-1].append(word)
    return [w for w in out if w]


def command_head(words: list[str]) -> str | None:
    """`program subcommand` of one simple command (leading VAR=value words skipped), or None."""
    while words and _ENV_ASSIGN.match(words[0]):
        words = words[1:]
    if len(words) < 2 or words[0] in _NOT_PROGRAMS:
        return None
    program, sub = words[0], words[1]
    if len(program) >= 2 and _PROGRAM.match(program) and _SUBCOMMAND.match(sub):
        return f"{program} {sub}"
    return None


def command_heads(scripts: list[str]) -> list[str]:
    """Every `program subcommand` head of `scripts`, first occurrence order, no repeats."""
    heads = (command_head(words) for script in scripts for words in simple_commands(script))
    return list(dict.fromkeys(h for h in heads if h))
