"""The secret-pattern table: every kind of fake secret goes, prose stays, lines are kept.

The fake secrets are assembled at run time so that this file holds no string a secret
scanner (a push hook, CI) would take for a real credential.
"""

from __future__ import annotations

import pytest
from fake_secrets import PRIVATE_KEY, SECRETS, j

from memory_ls.embeddings.remote import redact as scrub_remote_error
from memory_ls.redact import find_secrets, redact


def corpus() -> str:
    return "\n".join(ctx.format(secret) for ctx, secret in SECRETS)


@pytest.mark.parametrize(("context", "secret"), SECRETS, ids=[c for c, _ in SECRETS])
def test_each_secret_is_redacted(context: str, secret: str):
    text = context.format(secret)
    out = redact(text)
    assert secret not in out
    assert "[REDACTED:" in out
    assert find_secrets(text)


# Key formats the remote providers' error scrubbing knew and transcript redaction did not,
# when the two kept separate lists.
ONCE_REMOTE_ONLY: list[tuple[str, str]] = [
    ("voyage key {} rejected", j("p", "a-", "voyage-key-33333333333333")),
    ("short key {}", j("sk", "-abcdefghijklmnop")),
    ("Incorrect API key provided: {}.", j("sk", "-proj-", "*" * 24, "AbCd")),
    ("google {}", j("AI", "za", "-gemini-key-2222222222222222")),
]


@pytest.mark.parametrize(
    ("context", "secret"),
    SECRETS + ONCE_REMOTE_ONLY,
    ids=[c for c, _ in SECRETS + ONCE_REMOTE_ONLY],
)
def test_one_table_for_transcripts_and_provider_errors(context: str, secret: str):
    text = context.format(secret)
    assert secret not in redact(text)
    assert secret not in scrub_remote_error(text)


def test_provider_errors_also_lose_the_configured_key():
    key = j("mistral", "-", "0123456789abcdefABCDEF")  # no known prefix: only the given key
    assert scrub_remote_error(f"bad key {key}!", [key]) == "bad key ***!"
    assert key in redact(f"bad key {key}!")


def test_a_plain_word_after_password_colon_is_redacted():
    # A false positive we accept: "password:" is too often followed by the password itself.
    assert redact("the password: sunshine") == "the password: [REDACTED:secret]"


def test_context_is_kept():
    assert redact("password=abc123 rest") == "password=[REDACTED:secret] rest"
    assert (
        redact("postgres://admin:S3cr3tPass@db:5432/app")
        == "postgres://admin:[REDACTED:password]@db:5432/app"
    )
    assert redact("Authorization: Bearer abc.def-123456").startswith("Authorization: Bearer [")


def test_private_key_block_keeps_the_line_count():
    text = f"before\n{PRIVATE_KEY}\nafter"
    out = redact(text)
    assert "MIIE" not in out and "PRIVATE KEY" not in out
    assert out.count("\n") == text.count("\n")
    assert out.split("\n")[0] == "before" and out.split("\n")[-1] == "after"


def test_unterminated_private_key_is_redacted_to_the_end():
    text = PRIVATE_KEY.split("-----END")[0]  # a transcript cut mid-key
    assert "MIIE" not in redact(text)


def test_whole_corpus_at_once_and_idempotent():
    text = corpus() + "\n" + PRIVATE_KEY
    out = redact(text)
    for _, secret in SECRETS:
        assert secret not in out
    assert out.count("\n") == text.count("\n")
    assert redact(out) == out


@pytest.mark.parametrize(
    "prose",
    [
        "We chose token bucket rate limiting backed by Redis.",
        "Basic authentication and bearer credentials are explained in the wiki.",
        "Set max_tokens=400 and tokenizer=unicode61 in the config.",
        "The password policy: rotate quarterly.",
        "Token: remember to rotate it.",
        "See https://example.com:8080/path and http://localhost:3000/api.",
        "The author=Jane field and the keyboard layout.",
        "我们使用令牌桶限流算法保护接口。",
        "",
    ],
)
def test_prose_is_left_alone(prose: str):
    assert redact(prose) == prose


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('password="correct horse battery staple" next', 'password="[REDACTED:secret]" next'),
        ("export DB_PASSWORD='two words' &&", "export DB_PASSWORD='[REDACTED:secret]' &&"),
        ('{"password": "it\'s mine, all of it", "user": "bob"}', None),
        ('{"api_key": "ab\\"c d", "user": "bob"}', None),
        ('password: "correct horse" ok', 'password: "[REDACTED:secret]" ok'),
        ('token="" and password=""', 'token="" and password=""'),  # nothing to hide
    ],
)
def test_a_quoted_value_is_redacted_to_its_closing_quote(text: str, expected: str | None):
    """A quoted value was cut at its first space or quote: password="correct horse battery
    staple" kept "horse battery staple", "password": "it's mine" kept "s mine"."""
    out = redact(text)
    if expected is None:
        assert out.endswith('[REDACTED:secret]", "user": "bob"}'), out
    else:
        assert out == expected
