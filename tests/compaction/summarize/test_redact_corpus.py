"""Redaction corpus: secrets in prose and bare cloud secrets go; what an agent needs stays.

Positive cases name the secret that must vanish; negative cases must come back byte for byte.
Both run through `redact`, the function applied to summarizer prompts and to stored summaries.
"""

from __future__ import annotations

import pytest

from compaction.summarize.redact import redact
from compaction.summarize.redact_heuristics import redact_high_entropy, shannon_bits

PROSE_SECRETS = [
    ("my password is hunter2", "hunter2"),
    ("My password is swordfish.", "swordfish"),
    ("btw our password was Tr0ub4dor&3 until Monday", "Tr0ub4dor&3"),
    ("the password is 'correct horse battery staple'", "correct horse battery staple"),
    ("the API key is x9Kq2LmN8pR4tV7w", "x9Kq2LmN8pR4tV7w"),
    ("the token: 4f9a8b7c6d5e4f3a2b1c", "4f9a8b7c6d5e4f3a2b1c"),
    ("use the token is kP7vN2qR9sT4wX6yZ1aB", "kP7vN2qR9sT4wX6yZ1aB"),
    ("senha: batata123", "batata123"),
    ("minha senha é girassol", "girassol"),
    ("a senha é Xk9#mPq2", "Xk9#mPq2"),
    ("mi contraseña es perro42", "perro42"),
    ("my pin is 4821", "4821"),
    ("my passphrase = blue-river-77", "blue-river-77"),
    ("their secret key is s3cr3t!", "s3cr3t"),
]
CLOUD_SECRETS = [
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
    ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "secret"),
    ("the secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY was rotated", "high_entropy"),
    ("ya29.a0AfH6SMBx3JkL9mN0pQrStUvWxYz", "gcp_oauth_token"),
    ("GOCSPX-1a2B3c4D5e6F7g8H9i0JkLmNoPq", "gcp_client_secret"),
    ("AIzaSyB" + "x" * 32, "google_api_key"),
    ("client secret abc8Q~ABCDEFGHIJKLMNOPQRSTUVWXYZabcde12", "azure_client_secret"),
    ("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;",
     "secret"),
    ("https://acct.blob.core.windows.net/c/f?sv=2022-11-02&sig=AbCdEf123456789012%2B%3D&se=x",
     "azure_sas_signature"),
    ("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJnb29nbGUifQ.c2lnbmF0dXJlX2hlcmU", "jwt"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----", "private_key"),
    ('{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQ\\n"}',
     "private_key"),
    ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "huggingface_token"),
    ("glpat-AbCdEf0123456789xYz_", "gitlab_token"),
    ("random Qw9xE2uFZ8mN3pLk7RtYb2Xc in the log", "high_entropy"),
    ("kP7vN2qR9sT4wX6yZ1aB3cD5eF8gH0jL", "high_entropy"),
]
KEEP = [
    "commit 3f2a9c1 and 9fceb02d0ae598e95dc970b74767f19372d61af8 on main",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "request 550e8400-e29b-41d4-a716-446655440000 failed",
    "tenant f6aee03c503f41f5fc7ad76ff07b26ec, conversation conv_42e4543eab6e5ca7",
    "tool call call_Qw9xE2uFZ8mN3pLk7RtYb2Xc returned; toolu_01A09q90qw90lq917835lq9X",
    "chatcmpl-9AbCdEfGhIjKlMnOpQrStUvWx and msg_01XyZAbCdEfGhIjKlMnOpQr",
    "edit /home/ana/Projects/App2023/src/components/UserProfile2024.tsx",
    "C:\\Users\\Ana\\AppData\\Local\\Temp\\build2024\\out.log",
    "src/Components/UserProfile2024/index.ts",
    "upgrade litellm 1.82.6 to v2.0.0-rc.1+build.5 (numpy==1.26.4)",
    "order ORD-2024-1187-ABCDEF-99887766 and invoice INV-2024-001",
    "class AbstractSingletonProxyFactoryBean2 calls getUserProfileById2024Version",
    "test_getUserProfile2024_returnsData and HTTP2ConnectionPoolManager2024",
    "MAX_TOKENS_PER_REQUEST_2024 = 4096",
    "the password is stored in vault and the token is expired",
    "The password must be at least 12 characters; the password is case sensitive.",
    "reset your password at https://example.com/reset?user=42",
    "a senha é obrigatória; the pin is loose; password was reset yesterday",
    "ran with token_count: 1234 and max_tokens=4096",
    "E2024-ABC: connection refused at 10.0.0.12:5432",
    "",
]


@pytest.mark.parametrize(("text", "secret"), PROSE_SECRETS)
def test_secrets_in_prose_are_redacted(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out and "[REDACTED:secret]" in out
    assert redact(out) == out


@pytest.mark.parametrize(("text", "kind"), CLOUD_SECRETS)
def test_cloud_secrets_and_random_tokens_are_redacted(text: str, kind: str) -> None:
    out = redact(text)
    assert f"[REDACTED:{kind}]" in out, out
    assert redact(out) == out


@pytest.mark.parametrize("text", KEEP)
def test_what_the_agent_needs_is_kept(text: str) -> None:
    assert redact(text) == text


def test_entropy_threshold_sits_between_words_and_noise() -> None:
    assert shannon_bits("aaaa") == 0.0
    noise, name = "kP7vN2qR9sT4wX6yZ1aB3cD5eF8gH0jL", "AbstractSingletonProxyFactoryBean"
    assert shannon_bits(noise) > 4.5 > shannon_bits(name)
    assert redact_high_entropy("x" * 40) == "x" * 40
