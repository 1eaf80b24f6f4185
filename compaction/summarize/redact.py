"""Secret redaction for text that leaves the request path: logs, summarizer prompts, stored summaries.

Patterns are precompiled and ordered from most to least specific (a PEM block before anything that
could match inside it); secrets told in prose and bare high-entropy tokens come last
(compaction/summarize/redact_heuristics.py). Each match becomes `[REDACTED:<kind>]`; the output is
stable under a second pass (redaction is idempotent), and ordinary text, order numbers and file paths
are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from compaction.summarize.redact_heuristics import redact_high_entropy, redact_prose

_SECRET_KEYS = (r"(?:[a-z0-9]+[_-])*(?:password|passwd|pwd|passphrase|senha|contrase(?:ñ|n)a|secret"
                r"|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|private[_-]?key"
                r"|account[_-]?key|shared[_-]?access[_-]?key)(?:[_-][a-z0-9]+)*")
_TOKEN_KEYS = r"(?:[a-z0-9]+[_-])*token"  # `token`, `refresh_token`; not `token_count`


def _key_value(keys: str, min_chars: int) -> re.Pattern[str]:
    """`key: value`, `key=value`, `"key": "value"` (a quoted value may hold spaces).

    Groups: 1 key, 2 separator (quotes included), 3 value (the only part redacted).
    """
    return re.compile(
        rf"(?i)(?<![\w-])({keys})(?![\w-])"
        rf"([\"']?\s*[:=]\s*(?P<q>[\"'])?)(?!\[REDACTED)"
        rf"((?(q)(?:(?!(?P=q))[^\n]){{{min_chars},}}|[^\s\"',;&]{{{min_chars},}}))")


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private_key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S)),
    ("authorization", re.compile(
        r"(?i)(?<![\w-])(authorization|proxy-authorization)([\"']?\s*[:=]\s*[\"']?)"
        r"(?!\[REDACTED)(?:(?:bearer|basic|token|apikey)\s+)?[^\s\"',;]+")),
    ("url_credentials", re.compile(  # scheme://user:password@host: only the password goes
        r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@\"'<>]+)(:)(?!\[REDACTED)([^\s/@\"'<>]+)(?=@)")),
    ("bearer", re.compile(r"(?i)\bbearer\s+(?!\[REDACTED)[A-Za-z0-9\-._~+/]{8,}=*")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}")),
    ("stripe_key", re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{10,}")),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("gcp_oauth_token", re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}")),
    ("gcp_client_secret", re.compile(r"\bGOCSPX-[0-9A-Za-z_-]{20,}")),
    ("azure_client_secret", re.compile(
        r"(?<![\w~.-])[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![\w~.-])")),
    ("azure_sas_signature", re.compile(r"(?i)([?&]sig)(=)(?!\[REDACTED)([A-Za-z0-9%+/=]{16,})")),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("gitlab_token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("npm_token", re.compile(r"\bnpm_[A-Za-z0-9]{36}")),
    ("secret", _key_value(_SECRET_KEYS, 3)),
    ("secret", _key_value(_TOKEN_KEYS, 8)),
)

# Keep the label, redact the value.
_GROUPED_KINDS = {"authorization", "secret", "url_credentials", "azure_sas_signature"}


def _replacement(kind: str) -> Any:
    if kind in _GROUPED_KINDS:
        return lambda m: f"{m.group(1)}{m.group(2)}[REDACTED:{kind}]"
    return f"[REDACTED:{kind}]"


_COMPILED = tuple((pattern, _replacement(kind)) for kind, pattern in _PATTERNS)


def redact(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED:<kind>]`."""
    if not text:
        return text
    for pattern, replacement in _COMPILED:
        text = pattern.sub(replacement, text)
    return redact_high_entropy(redact_prose(text))


def redact_obj(obj: Any) -> Any:
    """Redact every string inside nested dicts/lists/tuples (keys are kept; values are redacted)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, Mapping):
        return {key: redact_obj(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(redact_obj(value) for value in obj)
    return obj
