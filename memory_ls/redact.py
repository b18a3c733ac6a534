"""The one table of secret patterns, and redaction with it.

Used for everything that may carry a secret: transcript text before it reaches the index,
search results or files we write (``sources/sessions.py``, ``sessions/writer.py``), and the errors
and logs of remote embedding providers (``embeddings/remote.py``, which also replaces the keys
it was configured with). A key format added here is caught everywhere.

A table of patterns rather than a detector library: detect-secrets (the maintained candidate)
reports findings line by line for code review, keeps global plugin settings, flags only the
first line of a private key block and has no Anthropic, Google or bearer-token rules; here we
need to *replace* every secret in free text, quickly, and deterministically.

Every replacement keeps the number of lines of the input, so line numbers computed on the
redacted text stay valid for the original. Replacements read ``[REDACTED:<kind>]``; for
``key=value`` pairs and URLs with credentials the key / user name is kept for context.
Patterns err on the side of redacting: a false positive costs a word, a miss leaks a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MARK = "[REDACTED"
_NOT_MARK = r"(?!\[REDACTED)"  # never redact our own markers a second time


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    # Builds the replacement from the match; the default replaces the whole match.
    replace: Callable[[re.Match[str]], str] | None = None


def _keep_lines(kind: str) -> Callable[[re.Match[str]], str]:
    # A multi-line secret becomes one marker plus the same number of newlines.
    return lambda m: f"[REDACTED:{kind}]" + "\n" * m.group(0).count("\n")


def _keep_prefix(kind: str) -> Callable[[re.Match[str]], str]:
    return lambda m: f"{m.group('keep')}[REDACTED:{kind}]"


_KEY_WORDS = (
    r"password|passwd|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|client[_-]?secret|credentials?|auth"
)
# "password: the one in the vault" is prose; "password=..." and quoted JSON/YAML values are
# not. So after ":" a value is taken only when quoted or when it looks like a secret.
_SECRETISH = r"(?=[^\s\"'`,;]*[0-9!@#$%^&*+/=_~-])[^\s\"'`,;]{6,}|[^\s\"'`,;]{20,}"

_KEY = rf"\b[\w.-]*(?:{_KEY_WORDS})"
# A value in quotes runs to its closing quote, spaces and other quotes included: cut at the
# first space or quote, password="correct horse battery staple" kept "horse battery staple"
# and "password": "it's mine" kept "s mine". Unquoted, it ends at a space, a quote or ``stop``.
_QUOTE = r"(?P<q>[\"'`])?"
_QUOTED = r"(?:\\.|(?!(?P=q))[^\\\n])+"


def _value(stop: str) -> str:
    return rf"(?(q){_QUOTED}|[^\s\"'`{stop}]+)"


_TOKEN_CHARS = r"[A-Za-z0-9._~+/=-]"
# A token that looks random (a digit, a symbol or a case change), so "basic authentication"
# or "bearer credentials" in prose stay as they are.
_RANDOMISH = rf"(?={_TOKEN_CHARS}*(?:[0-9._~+/=-]|[a-z][A-Z])){_TOKEN_CHARS}{{8,}}"

RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
        ),
        _keep_lines("private-key"),
    ),
    # scheme://user:password@host (postgres, mysql, mongodb+srv, redis, amqp, https, ...); the
    # password runs up to the last "@" of the authority, as passwords may contain "@" too.
    Rule(
        "password",
        re.compile(
            rf"(?P<keep>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@\"'`]*:){_NOT_MARK}"
            r"[^\s/\"'`]+(?=@[^\s@/\"'`]+)"
        ),
        _keep_prefix("password"),
    ),
    Rule("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}")),
    # sk-proj-..., sk-svcacct-..., legacy sk-...; "*" for the masked keys an API echoes back.
    Rule("openai-key", re.compile(r"\bsk-[A-Za-z0-9_*-]{16,}")),
    Rule("stripe-key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    Rule("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{20,}")),
    Rule("voyage-key", re.compile(r"\bpa-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{16,}")),
    Rule("google-oauth", re.compile(r"\b(?:ya29\.[0-9A-Za-z_-]{20,}|GOCSPX-[A-Za-z0-9_-]{20,})")),
    Rule("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b")),
    Rule(
        "github-token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ),
    Rule("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    Rule("slack-token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}|\bxapp-\d-[\w-]{10,}")),
    Rule(
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+"),
    ),
    Rule("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    Rule("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{30,}")),
    Rule("sendgrid-key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")),
    Rule("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")),
    # "Authorization: <scheme> <credentials>" whatever the scheme.
    Rule(
        "token",
        re.compile(
            rf"(?P<keep>\bAuthorization[\"'`]?\s*[:=]\s*[\"'`]?(?:[A-Za-z-]+\s+)?+){_NOT_MARK}"
            r"[^\s\"'`,;]+",
            re.IGNORECASE,
        ),
        _keep_prefix("token"),
    ),
    # A bare "Bearer <token>" or "Basic <base64>" anywhere.
    Rule(
        "token",
        re.compile(rf"(?P<keep>\b(?:[Bb]earer|BEARER|[Bb]asic|BASIC)\s+){_NOT_MARK}{_RANDOMISH}"),
        _keep_prefix("token"),
    ),
    # key=value: env files, CLI flags, URL query strings, INI, connection strings' Password=.
    Rule(
        "secret",
        re.compile(rf"(?P<keep>{_KEY}[\"'`]?\s*=\s*{_QUOTE}){_NOT_MARK}{_value('&,;')}", re.I),
        _keep_prefix("secret"),
    ),
    # "key": "value" (JSON, quoted YAML keys).
    Rule(
        "secret",
        re.compile(rf"(?P<keep>{_KEY}(?P<q>[\"'`])\s*:\s*(?P=q)){_NOT_MARK}{_QUOTED}", re.I),
        _keep_prefix("secret"),
    ),
    # password: value, whatever the value looks like ("my password: sunshine").
    Rule(
        "secret",
        re.compile(
            rf"(?P<keep>\b[\w.-]*(?:password|passwd|passphrase)\s*:\s*{_QUOTE}){_NOT_MARK}"
            + _value(",;"),
            re.I,
        ),
        _keep_prefix("secret"),
    ),
    # key: value (YAML, prose): only values that look like secrets, see _SECRETISH.
    Rule(
        "secret",
        re.compile(rf"(?P<keep>{_KEY}\s*:\s*[\"'`]?){_NOT_MARK}(?:{_SECRETISH})", re.I),
        _keep_prefix("secret"),
    ),
)

# A cheap pre-check: text with none of these fragments cannot match any rule above.
_HINT = re.compile(
    r"PRIVATE KEY|://|sk-|sk_|rk_|pk_|AIza|pa-|ya29\.|GOCSPX|A3T|AKIA|ASIA|ABIA|ACCA|gh[pousr]_"
    r"|github_pat_|glpat-|xox|xapp-|hf_|npm_|SG\.|eyJ|bearer|basic|" + _KEY_WORDS,
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """``text`` with every secret the rules know replaced; line count unchanged."""
    if not text or not _HINT.search(text):
        return text
    for rule in RULES:
        # A kind is letters and hyphens, so the marker is a literal replacement template.
        text = rule.pattern.sub(rule.replace or f"[REDACTED:{rule.kind}]", text)
    return text


def find_secrets(text: str) -> list[tuple[str, str]]:
    """(kind, matched text) of every rule match, for tests and diagnostics; never log the result."""
    out: list[tuple[str, str]] = []
    for rule in RULES:
        out += [(rule.kind, m.group(0)) for m in rule.pattern.finditer(text)]
    return out
