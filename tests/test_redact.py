"""The secret-pattern table: every kind of fake secret goes, prose stays, lines are kept.

The fake secrets are assembled at run time so that this file holds no string a secret
scanner (a push hook, CI) would take for a real credential.
"""

from __future__ import annotations

import pytest

from memory_ls.embeddings.remote import redact as scrub_remote_error
from memory_ls.redact import find_secrets, redact


def j(*parts: str) -> str:
    return "".join(parts)


# (context with {} where the secret goes, the secret)
SECRETS: list[tuple[str, str]] = [
    ("export OPENAI_API_KEY={}", j("sk-", "proj-", "Xa81Kq", "2mZ7Lp0Wc4Vb9Nd3Tg6Rf1Hy")),
    ("legacy key {} here", j("sk-", "4fT9kWq2", "LmN8pR3sV7xZ1bC5dE0gH6jK")),
    ("anthropic: {}", j("sk-", "ant-", "api03-", "Zq8Wm2Lp5Xn7Rt1Yv4Bc9Df3Gh6Jk0Ms")),
    ("GOOGLE_API_KEY={}", j("AI", "za", "SyB1c2D3e4F5g6H7i8J9k0L1m2N3o4P5q6R")),
    ("oauth token {}", j("ya", "29.", "a0AfH6SMBx7Yq2Wm9Lp3Zn5Rt8Vc1Bd4Gh")),
    ("client secret {}", j("GOC", "SPX-", "1a2B3c4D5e6F7g8H9i0J1k2L3m4N")),
    ("aws id {} ok", j("AK", "IA", "Q3EXAMPLEZ7KD4WP")),
    ("temp creds {} ok", j("AS", "IA", "Y7EXAMPLEM2QX9LB")),
    ("aws_secret_access_key = {}", j("wJalrXUtnFEMI", "/K7MDENG/bPxRfiCY", "EXAMPLEKEY")),
    ("git clone with {}", j("gh", "p_", "16C7e42F292c6912E7710c838347Ae178B4a")),
    ("pat {}", j("github", "_pat_", "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123")),
    ("gitlab {}", j("gl", "pat-", "xZ1y2W3v4U5t6S7r8Q9p")),
    ("slack bot {}", j("xo", "xb-", "2048-1111122222-", "aBcDeFgHiJkLmNoPqRsTuVwX")),
    ("slack user {}", j("xo", "xp-", "2048-1111122222-3333344444-", "5c6d7e8f9a0b")),
    (
        "webhook {}",
        j("https://hooks.", "slack.com/services/", "T00000000/B00000000/", "XXXXXXXXXXXXXXXX"),
    ),
    ("hf {}", j("h", "f_", "AbCdEfGhIjKlMnOpQrStUvWxYz012345")),
    ("voyage {}", j("p", "a-", "Xq7Lm2Wp9Zr4Tv6Yb1Nc8Kd3Hf5Gj0Ms")),
    ("stripe {}", j("sk", "_live_", "51HxYzAbCdEfGhIjKlMnOp")),
    (
        "curl -H 'Authorization: Bearer {}'",
        j("abc123", "def456", "ghi789.jkl-mno_pqr"),
    ),
    ("Authorization: Basic {}", j("dXNlcj", "pwYXNzd29yZA==")),
    ("Authorization: token {}", j("tok", "enValue123456")),
    (
        "jwt {}",
        j(
            "ey",
            "JhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
            ".ey",
            "JzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvZSJ9",
            ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        ),
    ),
    ("password={} next", "hunter2-Prod!"),
    ("my password: {} ok", "sunshine"),
    ('{{"password": "{}", "user": "bob"}}', "correct horse battery staple"),
    ("token={}&page=2", "q7Z9x2W4v6"),
    ("api_key: {}", "9f8e7d6c5b4a3f2e1d0c"),
    ("DB_PASSWORD={};", "pg-s3cret"),
    ("client_secret='{}'", "Zm9vYmFyYmF6cXV4"),
    ("postgres://admin:{}@db.internal:5432/app", "S3cr3tPass"),
    ("mongodb+srv://svc:{}@cluster0.example.net/x", "p@ss:w0rd"),
    ("redis://:{}@cache:6379/0", "r3d1sPassw0rd"),
    ("Server=db;User Id=sa;Password={};", "Mssql!Pass1"),
]

PRIVATE_KEY = j(
    "-----BEGIN ",
    "RSA PRIVATE KEY-----\n",
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n",
    "-----END RSA ",
    "PRIVATE KEY-----",
)


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
