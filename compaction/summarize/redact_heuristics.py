"""Secrets no fixed pattern names: a password told in prose, and bare high-entropy tokens.

Both are judgement calls, so both lean towards keeping what an agent needs: hex strings (git
hashes, digests, UUIDs), prefixed ids (`call_...`, `msg_...`), paths, versions and ordinary words
are never touched. compaction/summarize/redact.py runs these after its exact patterns.
"""

from __future__ import annotations

import math
import re
from collections import Counter

_PROSE_KEYS = (r"password|passwd|passphrase|passcode|pass\s?code|pin(?:\s?code)?|senha|"
               r"palavra-passe|contrase(?:ñ|n)a|mot\s+de\s+passe|kennwort|api[\s_-]?key|"
               r"secret\s+key|access\s+key|token|chave(?:\s+de\s+api)?")
_PROSE = re.compile(
    rf"(?i)(?P<lead>\b(?P<owner>my|our|your|his|her|their|minha|meu|sua|seu|nossa|nosso|mi|tu|mon|ma)?"
    rf"\s*(?P<key>{_PROSE_KEYS})(?:\s*[:=]\s*|\s+(?:is|was|are|é|era|es|est|ist)\s+)"
    rf"(?:now\s+|still\s+|just\s+|set\s+to\s+|agora\s+)?)(?P<q>[\"'“‘`])?"
    rf"(?P<value>(?!\[REDACTED)(?(q)[^\"'”’`\n]{{3,100}}(?=[\"'”’`])|[^\s\"'”’`,;]{{2,}}[^\s\"'”’`,;.!?:)]))")
# Words that follow "the password is" in ordinary prose about passwords, never a password.
_NOT_SECRETS = frozenset((
    "is", "was", "are", "the", "a", "an", "not", "no", "set", "stored", "required", "wrong",
    "correct", "incorrect", "invalid", "expired", "empty", "missing", "too", "very", "now", "still",
    "being", "saved", "changed", "reset", "hashed", "encrypted", "case", "sensitive", "strong",
    "weak", "long", "short", "needed", "optional", "mandatory", "here", "there", "below", "above",
    "in", "at", "on", "of", "for", "to", "and", "or", "what", "which", "fine", "ok", "okay",
    "valid", "rotated", "revoked", "leaked", "same", "different", "unknown", "unset", "null",
    "none", "given", "shown", "sent", "masked", "hidden", "used", "ignored", "accepted", "rejected",
    "deprecated", "obrigatória", "obrigatório", "inválida", "inválido", "incorreta", "incorreto",
    "errada", "errado", "expirada", "expirado", "vazia", "vazio", "muito", "nova", "novo", "antiga",
    "antigo", "igual", "diferente", "secreta", "secreto", "forte", "fraca",
))
_BARE = re.compile(r"(?<![\w/+=.-])[A-Za-z0-9+/_~-]{24,}={0,2}(?![\w/+=-])")
_ID_PREFIX = re.compile(r"^[a-z]{2,12}[_-]")  # call_..., msg_..., chatcmpl-...: ids, not secrets
_WORD = re.compile(r"[A-Z]?[a-z]*[aeiouy][a-z]*[a-z]|[A-Z]{2,}(?=[A-Z][a-z]|\d|$)")
_HEX = re.compile(r"^[0-9a-fA-F-]+$")
MIN_ENTROPY_BITS = 4.0  # per character; base62 noise of 24+ characters lies above, words below


def redact_prose(text: str) -> str:
    """`my password is hunter2`, `senha: abc123`, `the API key is 'x9...'`: the value redacted."""
    return _PROSE.sub(_prose_replacement, text)


def _prose_replacement(m: re.Match[str]) -> str:
    value = m.group("value")
    quoted = m.group("q") is not None
    if value.lower() in _NOT_SECRETS or (m.group("key").lower() == "token" and not quoted
                                         and not _looks_random(value)):
        return m.group(0)
    if quoted or _looks_random(value) or _has_digit_or_symbol(value) or m.group("owner"):
        return f"{m.group('lead')}{m.group('q') or ''}[REDACTED:secret]"
    return m.group(0)


def _has_digit_or_symbol(value: str) -> bool:
    return any(not c.isalpha() for c in value) or (value[1:] != value[1:].lower())


def redact_high_entropy(text: str) -> str:
    """Bare tokens of 24+ characters that look random (mixed classes, high entropy) redacted."""
    return _BARE.sub(_bare_replacement, text)


def _bare_replacement(m: re.Match[str]) -> str:
    token = m.group(0)
    if _ID_PREFIX.match(token) or _HEX.match(token) or not _looks_random(token):
        return token
    if "/" in token and any(_is_word(part) for part in token.split("/")):
        return token  # a path such as `src/Components/UserProfile2024`
    return "[REDACTED:high_entropy]"


def _looks_random(token: str) -> bool:
    core = token.rstrip("=")
    if len(core) < 16:
        return False
    classes = sum((any(c.islower() for c in core), any(c.isupper() for c in core),
                   any(c.isdigit() for c in core)))
    digits = sum(c.isdigit() for c in core)
    return (classes == 3 and digits >= (1 if len(core) >= 32 else 2) and not _wordy(core)
            and shannon_bits(core) >= MIN_ENTROPY_BITS)


def _wordy(token: str) -> bool:
    """Mostly made of pronounceable words (camelCase or snake_case names): an identifier."""
    letters = sum(len(w) for w in _WORD.findall(token))
    return letters >= 0.5 * len(token)


def _is_word(part: str) -> bool:
    return len(part) >= 3 and part.isalpha() and (part.islower() or part.istitle())


def shannon_bits(text: str) -> float:
    """Shannon entropy of `text`'s characters, in bits per character."""
    counts = Counter(text)
    total = len(text)
    return -sum(n / total * math.log2(n / total) for n in counts.values())
