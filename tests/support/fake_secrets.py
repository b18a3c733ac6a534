"""Fake secrets of every kind the redaction table knows, each in a context, for the tests of
redaction (test_redact.py) and of what reaches the index (the session tests).

The fake secrets are assembled at run time so that this file holds no string a secret
scanner (a push hook, CI) would take for a real credential.
"""

from __future__ import annotations


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
