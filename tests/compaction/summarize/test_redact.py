"""Secret redaction: each kind caught, ordinary text untouched, idempotent."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.summarize.redact import redact, redact_obj

SECRETS = [
    ("my key sk-abcdefghijklmnopqrstuvwx12", "sk-abcdefghijklmnopqrstuvwx12", "openai_key"),
    ("sk-proj-AbC123_defGHI456-jklMNO789", "sk-proj-AbC123_defGHI456-jklMNO789", "openai_key"),
    ("key=sk-ant-api03-AAAAAAAAAAAAAAAAAAAA", "sk-ant-api03-AAAAAAAAAAAAAAAAAAAA", "anthropic_key"),
    ("use sk-ant-api03-AAAAAAAAAAAAAAAAAAAA now", "sk-ant-api03-AAAAAAAAAAAAAAAAAAAA", "anthropic_key"),
    ("curl -H 'Bearer abcdef0123456789xyz'", "abcdef0123456789xyz", "bearer"),
    ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "authorization"),
    ("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("token ghp_" + "a1" * 18, "ghp_" + "a1" * 18, "github_token"),
    ("slack xoxb-123456789012-abcdefABCDEF", "xoxb-123456789012-abcdefABCDEF", "slack_token"),
    ("g AIza" + "Sy" + "B" * 33, "AIza" + "Sy" + "B" * 33, "google_api_key"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijkl", "eyJhbGciOiJIUzI1NiJ9", "jwt"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEv\nabc\n-----END PRIVATE KEY-----", "MIIEv", "private_key"),
    ("password=hunter2!", "hunter2!", "secret"),
    ("DB_PASSWORD: s3cr3t", "s3cr3t", "secret"),
    ('{"api_key": "abc123def"}', "abc123def", "secret"),
    ("client_secret=xyz789", "xyz789", "secret"),
]


@pytest.mark.parametrize(("text", "secret", "kind"), SECRETS)
def test_secret_is_redacted(text: str, secret: str, kind: str) -> None:
    out = redact(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out


@pytest.mark.parametrize("text", [
    "Please ship order ORD-2024-1187 to Ana Lima by March 3.",
    "Edit src/compaction/redact.py and /etc/nginx/nginx.conf",
    "The password must be at least 12 characters.",
    "Invoice INV-2024-001 totals $1,250.00; ticket JIRA-1234.",
    "the task-force met at https://example.com/docs?id=42",
    "skipped sk-short and desk-lamp",
    "",
])
def test_ordinary_text_untouched(text: str) -> None:
    assert redact(text) == text


@given(st.text())
def test_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@given(st.sampled_from([s for _, s, _ in SECRETS if len(s) > 15]), st.text(max_size=20))
def test_secret_in_context_redacted_idempotent(secret: str, noise: str) -> None:
    out = redact(f"{noise} {secret} {noise}")
    assert redact(out) == out


def test_redact_obj_recurses() -> None:
    obj = {"a": ["x", {"b": "Bearer abcdefghijklmnop"}], "n": 3, "t": ("password=abcd",)}
    out = redact_obj(obj)
    assert out == {"a": ["x", {"b": "[REDACTED:bearer]"}], "n": 3, "t": ("password=[REDACTED:secret]",)}


@pytest.mark.parametrize(("text", "secret", "kind"), [
    ('{"Authorization": "Basic dXNlcjpwYXNzd29yZA=="}', "dXNlcjpwYXNzd29yZA", "authorization"),
    ("{'authorization': 'Token abcdef123456'}", "abcdef123456", "authorization"),
    ('{"token": "tok_9f8e7d6c5b4a"}', "tok_9f8e7d6c5b4a", "secret"),
    ("refresh_token=r1a2b3c4d5e6f7", "r1a2b3c4d5e6f7", "secret"),
    ("DATABASE_URL=postgres://admin:Pa55word@db.internal:5432/app", "Pa55word", "url_credentials"),
    ("clone https://bob:ghsecret99@git.example.com/repo.git", "ghsecret99", "url_credentials"),
    ("stripe sk_live_51HabcDEFghiJKLmnop", "sk_live_51HabcDEFghiJKLmnop", "stripe_key"),
    ("test key sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "stripe_key"),
    ("restricted rk_live_abcdefghij1234", "rk_live_abcdefghij1234", "stripe_key"),
    ('password: "correct horse battery staple"', "horse battery staple", "secret"),
    ("{'db_password': 'two words'}", "words", "secret"),
])
def test_more_secret_shapes_redacted(text: str, secret: str, kind: str) -> None:
    out = redact(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert redact(out) == out


@pytest.mark.parametrize("text", [
    "see https://example.com:8443/docs and postgres://db.internal:5432/app",
    "ran with token_count: 1234 and max_tokens=4096",
    "order ORD-2024-1187 shipped; mail ana@example.com about /srv/app/config.yaml",
    "the tokens: 1200 used, a token: short",
])
def test_more_ordinary_text_untouched(text: str) -> None:
    assert redact(text) == text


def test_url_credentials_keep_user_and_host() -> None:
    assert redact("postgres://user:pass@host/db") == "postgres://user:[REDACTED:url_credentials]@host/db"
