"""Settings: declared once, validated by name, documented from the declarations.

Bad input is reported by its camelCase key and ignored (the earlier value stays), never fatal;
the manual's settings tables and the VS Code extension's settings are generated from the same
declarations, the CLI's help and the MCP tools' schemas read them, and these tests fail when
any of them drifts.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import write
from repo_root import REPO

from memory_ls.settings import Settings, apply, leaves, load, to_dict
from memory_ls.settings.docs import markdown_tables


def value_at(s: Settings, key: str) -> Any:
    out: Any = to_dict(s)
    for part in key.split("."):
        out = out[part]
    return out


def nested(key: str, value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} for "a.b"."""
    out: Any = value
    for part in reversed(key.split(".")):
        out = {part: out}
    return out


# -- the declarations -----------------------------------------------------------------------


def test_every_setting_is_declared_with_a_description_and_bounds():
    all_leaves = list(leaves(Settings))
    assert len(all_leaves) > 60
    for leaf in all_leaves:
        assert leaf.spec.description.strip(), leaf.key
        assert "|" not in leaf.spec.description, leaf.key  # it goes into a Markdown table
        if leaf.hint in (int, float):
            assert leaf.spec.minimum is not None, f"{leaf.key}: numbers declare a minimum"
    keys = [leaf.key for leaf in all_leaves]
    assert len(set(keys)) == len(keys)


def test_the_defaults_pass_their_own_validation():
    s = Settings()
    assert apply(s, to_dict(Settings())) == []
    assert s == Settings()


def test_list_and_table_defaults_are_not_shared():
    a, b = Settings(), Settings()
    a.sources.append("sessions")
    a.remote.headers["X"] = "1"
    assert b.sources == ["memory"] and b.remote.headers == {}


def test_local_threads_says_what_zero_means():
    # 0 is default_threads(): all usable cores but one (llama.cpp does not decide).
    spec = next(leaf.spec for leaf in leaves(Settings) if leaf.key == "local.threads")
    assert "all usable cores but one" in spec.description
    assert "llama.cpp decides" not in spec.description


# -- validation by name -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "bad", "says"),
    [
        ("query.maxResults", 0, "must be at least 1"),
        ("query.maxResults", "x", "expected an integer"),
        ("query.maxResults", 2.5, "expected an integer"),
        ("query.maxResults", True, "expected an integer"),
        ("query.maxResults", math.inf, "expected an integer"),
        ("query.minScore", 1.5, "must be between 0 and 1"),
        ("query.minScore", math.nan, "expected a number"),
        ("query.hybrid.vectorWeight", -0.1, "must be between 0 and 1"),
        ("query.mmr.lambda", 2, "must be between 0 and 1"),
        ("query.commonTermFraction", 3, "must be between 0 and 1"),
        ("query.snippetMaxChars", 0, "must be at least 1"),
        ("chunking.tokens", 0, "must be at least 1"),
        ("remote.retries", -1, "must not be negative"),
        ("query.hybrid.fusion", "sum", "expected one of weighted, rrf"),
        ("provider", "cohere", "expected one of auto, none, local"),
        ("store.vectorBackend", "faiss", "expected one of auto, numpy, sqlite-vec"),
        ("logLevel", "trace", "expected one of error, warning, info, debug"),
        ("sources", [], "expected a non-empty list of memory, sessions"),
        ("sources", ["memory", "notes"], "expected a non-empty list of memory, sessions"),
        ("sessions.globs", [1], "sessions.globs[0]: expected a string"),
        ("remote.headers", {"X": 1}, "expected a table of strings"),
        ("sync.watch", "yes", "expected true or false"),
        ("local.modelPath", 3, "expected a string"),
    ],
)
def test_a_bad_value_is_reported_by_name_and_ignored(key: str, bad: Any, says: str):
    s = Settings()
    before = value_at(s, key)
    problems = apply(s, nested(key, bad))
    assert len(problems) == 1, problems
    assert problems[0].startswith(key) and says in problems[0], problems
    assert problems[0].endswith("; ignored")
    assert value_at(s, key) == before


def test_good_values_are_kept_next_to_bad_ones():
    s = Settings()
    problems = apply(
        s,
        {
            "bogus": 1,
            "query": {"maxResults": 3, "minScore": "high", "hybrid": {"fusion": "rrf"}},
            "sources": "sessions",  # a single string is a one-item list
            "remote": {"headers": {"X-Team": "a"}, "nope": 2},
        },
    )
    assert sorted(problems) == [
        "bogus: unknown setting, ignored",
        "query.minScore: expected a number, got 'high'; ignored",
        "remote.nope: unknown setting, ignored",
    ]
    assert s.query.max_results == 3 and s.query.min_score == 0.35
    assert s.query.hybrid.fusion == "rrf"
    assert s.sources == ["sessions"] and s.remote.headers == {"X-Team": "a"}


def test_good_entries_of_a_list_of_tables_are_kept_next_to_bad_ones():
    """One bad entry of sessions.roots dropped every agent's folder."""
    s = Settings()
    roots = [
        {"path": "~/.claude/projects"},
        {"path": 5},
        {"path": "/x", "bogus": 1},
        "not a table",
        {"path": "/y", "globs": ["*.jsonl"], "name": "y"},
    ]
    problems = apply(s, {"sessions": {"roots": roots}})
    assert problems == [
        "sessions.roots[1].path: expected a string, got 5; ignored",
        "sessions.roots[2].bogus: unknown setting; ignored",
        "sessions.roots[3]: expected a table, got 'not a table'; ignored",
    ]
    assert [(r.path, r.globs, r.name) for r in s.sessions.roots] == [
        ("~/.claude/projects", ["**/*.jsonl"], ""),
        ("/y", ["*.jsonl"], "y"),
    ]
    assert apply(s, {"sessions": {"roots": "nope"}}) == [
        "sessions.roots[0]: expected a table, got 'nope'; ignored"
    ]
    assert apply(s, {"sessions": {"roots": [{"path": 1}]}}) == [
        "sessions.roots[0].path: expected a string, got 1; ignored"
    ]
    assert [r.path for r in s.sessions.roots] == ["~/.claude/projects", "/y"]  # kept as it was
    assert apply(s, {"sessions": {"roots": []}}) == [] and s.sessions.roots == []


def test_a_section_that_is_not_a_table_is_reported():
    s = Settings()
    assert apply(s, {"query": 5}) == ["query: expected a table, got a number"]
    assert s.query == Settings().query
    # A section given as a string may be the secret itself: never quoted.
    url = "postgresql://memory:hunter2@db/memory"
    problems = apply(s, {"store": {"postgres": url}, "remote": "sk-live-abcdef"})
    assert problems == [
        "store.postgres: expected a table, got a string",
        "remote: expected a table, got a string",
    ]


def test_rules_between_settings():
    s = Settings()
    problems = apply(s, {"chunking": {"tokens": 100, "overlap": 100}})
    assert problems == ["chunking.overlap must be below chunking.tokens; using 20"]
    assert (s.chunking.tokens, s.chunking.overlap) == (100, 20)

    # Weighted fusion divides by the sum of the weights.
    s = Settings()
    problems = apply(s, {"query": {"hybrid": {"vectorWeight": 0, "textWeight": 0}}})
    assert problems == [
        "query.hybrid.vectorWeight and textWeight must not both be 0; using 0.7 and 0.3"
    ]
    assert (s.query.hybrid.vector_weight, s.query.hybrid.text_weight) == (0.7, 0.3)
    assert apply(Settings(), {"query": {"hybrid": {"vectorWeight": 0}}}) == []


def test_camel_case_round_trip():
    custom = Settings()
    custom.query.mmr.lambda_ = 0.4
    custom.session_writer.timeout_ms = 5
    custom.query.temporal_decay.half_life_days = 7
    data = to_dict(custom)
    assert data["query"]["mmr"]["lambda"] == 0.4
    assert data["sessionWriter"]["timeoutMs"] == 5
    s = Settings()
    assert apply(s, data) == [] and s == custom


def test_layers_later_wins_and_problems_name_their_file(tmp_path: Path):
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "memory-ls" / "config.toml"
    write(user.parent, user.name, 'provider = "none"\n[query]\nmaxResults = 9\nminScore = 0.2\n')
    root = tmp_path / "ws"
    write(root, ".memory-ls.toml", "[query]\nmaxResults = 4\nminScore = 7\n")
    s, problems = load(root, {"query": {"minScore": 0.1}}, {"chunking": {"tokens": "big"}})
    assert s.provider == "none" and s.query.max_results == 4 and s.query.min_score == 0.1
    assert problems == [
        f"{root / '.memory-ls.toml'}: query.minScore: must be between 0 and 1, got 7.0; ignored",
        "client: chunking.tokens: expected an integer, got 'big'; ignored",
    ]


def test_an_unreadable_settings_file_is_reported_not_fatal(tmp_path: Path):
    root = tmp_path / "ws"
    write(root, ".memory-ls.toml", "[query\nmaxResults = 4\n")
    s, problems = load(root)
    assert s == Settings()
    assert len(problems) == 1 and "cannot read settings" in problems[0]


def test_non_finite_numbers_from_toml_are_not_fatal(tmp_path: Path):
    root = tmp_path / "ws"
    write(root, ".memory-ls.toml", "[query]\nmaxResults = inf\nminScore = nan\n")
    s, problems = load(root)
    assert s.query == Settings().query
    assert [p.split(": ", 1)[1].split(":")[0] for p in problems] == [
        "query.maxResults",
        "query.minScore",
    ]


# -- generated documentation ------------------------------------------------------------------


def test_the_table_states_bounds_and_choices():
    lines = markdown_tables().splitlines()
    rows = {line.split(" | ")[0][3:-1]: line for line in lines if line.startswith("| `")}
    assert "integer, at least 1" in rows["query.maxResults"]
    assert "number, between 0 and 1" in rows["query.minScore"]
    assert "`weighted`, `rrf`" in rows["query.hybrid.fusion"]
    assert "non-empty list of `memory`, `sessions`" in rows["sources"]
    assert rows["sources"].startswith('| `sources` | `["memory"]` |')


def test_the_cli_and_the_mcp_tool_say_the_declared_defaults_bounds_and_choices(
    capsys: pytest.CaptureFixture[str],
):
    from memory_ls.cli import build_parser
    from memory_ls.mcp.schemas import SEARCH_TOOL
    from memory_ls.search.request import SOURCES

    q = Settings().query
    props = SEARCH_TOOL.input_schema["properties"]
    assert f"(default {q.max_results}, or the workspace's query.maxResults" in " ".join(
        props["maxResults"]["description"].split()
    )
    assert f"(default {q.min_score}, or the workspace's query.minScore" in " ".join(
        props["minScore"]["description"].split()
    )
    assert props["maxResults"]["minimum"] == 1
    assert (props["minScore"]["minimum"], props["minScore"]["maximum"]) == (0, 1)
    # What a search may ask for is what can be indexed.
    sources = next(leaf.spec.choices for leaf in leaves(Settings) if leaf.key == "sources")
    assert props["sources"]["items"]["enum"] == list(SOURCES) == list(sources)

    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert f"at least 1 (default {q.max_results}, or the setting query.maxResults)" in shown
    assert f"between 0 and 1 (default {q.min_score}, or the setting query.minScore)" in shown
    assert f"--source {{{','.join(sources)}}}" in shown


def test_vscode_package_json_matches_the_declarations():
    script = REPO / "editors" / "vscode" / "scripts" / "gen_settings.py"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [sys.executable, str(script), "--print"], capture_output=True, text=True, env=env
    )
    assert '"#memory.query.hybrid.minCandidates#"' not in r.stdout  # links stay in backquotes
    assert "`#memory.query.hybrid.minCandidates#`" in r.stdout
