"""The wire-parameter parser shared by the language server and the MCP tools."""

from __future__ import annotations

import pytest

from memory_ls.params import (
    LSP,
    MCP,
    ParamError,
    parse_get,
    parse_save_session,
    parse_search,
    parse_status,
    parse_sync,
)
from memory_ls.search.request import SearchRequest


def error(fn, *args) -> ParamError:
    with pytest.raises(ParamError) as exc_info:
        fn(*args)
    return exc_info.value


def test_search_fields_defaults_and_unknown_fields() -> None:
    p = parse_search(
        {
            "query": "x",
            "maxResults": 3.0,
            "minScore": 0,
            "sources": "memory",
            "pathPrefix": "memory/",
            "mode": "keyword",
            "folder": "file:///w",
            "extra": 1,
            "another": {"nested": True},
        }
    )
    assert p == SearchRequest(
        query="x",
        max_results=3,
        min_score=0.0,
        sources=("memory",),
        path_prefix="memory/",
        mode="keyword",
        folder="file:///w",
    )
    assert parse_search({"query": "y", "maxResults": None, "mode": None}) == SearchRequest("y")
    # Positional params: a single object in a list.
    assert parse_search([{"query": "z"}]) == SearchRequest("z")


@pytest.mark.parametrize(
    ("params", "field", "says"),
    [
        ({}, "query", "is required"),
        ({"query": 3}, "query", "expected a string"),
        ({"query": "x" * 3000}, "query", "longer than 2000"),
        ({"query": "x", "maxResults": True}, "maxResults", "expected an integer"),
        ({"query": "x", "maxResults": 1.5}, "maxResults", "expected an integer"),
        ({"query": "x", "maxResults": "5"}, "maxResults", "expected an integer"),
        ({"query": "x", "maxResults": 0}, "maxResults", "at least 1"),
        ({"query": "x", "maxResults": 1001}, "maxResults", "at most 1000"),
        ({"query": "x", "minScore": float("nan")}, "minScore", "expected a number"),
        ({"query": "x", "minScore": "0.5"}, "minScore", "expected a number"),
        ({"query": "x", "minScore": 2}, "minScore", "between 0 and 1"),
        ({"query": "x", "sources": []}, "sources", "non-empty list"),
        ({"query": "x", "sources": ["web"]}, "sources", "unknown source 'web'"),
        ({"query": "x", "sources": {"memory": 1}}, "sources", "non-empty list"),
        ({"query": "x", "mode": "fuzzy"}, "mode", "expected one of auto"),
        ({"query": "x", "pathPrefix": 3}, "pathPrefix", "expected a string"),
        ({"query": "x", "folder": ["a"]}, "folder", "expected a string"),
        ("query", "params", "expected an object, got str"),
        ([1, 2], "params", "expected an object, got list"),
        ([{"query": "a"}, {"query": "b"}], "params", "expected an object, got list"),
    ],
)
def test_search_errors_name_the_wire_field(params: object, field: str, says: str) -> None:
    exc = error(parse_search, params)
    assert exc.field == field and says in exc.message, str(exc)
    assert str(exc) == f"{field}: {exc.message}"


def test_first_bad_field_in_field_order() -> None:
    exc = error(parse_search, {"folder": 1, "maxResults": "x", "query": "q"})
    assert exc.field == "maxResults"


def test_mcp_dialect_limits_and_fields() -> None:
    assert parse_search({"query": "x", "maxResults": 50}, MCP).max_results == 50
    assert error(parse_search, {"query": "x", "maxResults": 51}, MCP).field == "maxResults"
    assert parse_search({"query": "x", "maxResults": 51}, LSP).max_results == 51
    # No workspace folders or modes over MCP: ignored like any unknown field.
    p = parse_search({"query": "x", "mode": "fuzzy", "folder": 3}, MCP)
    assert (p.mode, p.folder) == ("auto", None)
    assert error(parse_get, {"path": "MEMORY.md", "lines": 2001}, MCP).field == "lines"
    assert parse_get({"path": "MEMORY.md", "lines": 2001}, LSP).lines == 2001
    assert parse_get({"path": "MEMORY.md", "folder": "f"}, MCP).folder is None


def test_get() -> None:
    g = parse_get({"citation": " memory/a.md#L2-L4 ", "from": 2, "path": "ignored.md"})
    assert (g.target, g.start, g.lines) == ("memory/a.md#L2-L4", 2, None)
    assert parse_get([{"path": "MEMORY.md", "lines": 3.0}]).lines == 3
    for params, field in [
        ({}, "path"),
        ({"path": "  "}, "path"),
        ({"path": 1}, "path"),
        ({"citation": False}, "citation"),
        ({"path": "MEMORY.md", "from": 0}, "from"),
        ({"path": "MEMORY.md", "from": 2**31}, "from"),  # no file's line; 1e30 was taken
        ({"path": "MEMORY.md", "lines": -1}, "lines"),
    ]:
        assert error(parse_get, params).field == field, params


def test_commands() -> None:
    assert parse_sync(()).force is False
    assert parse_sync((None,)).force is False
    assert parse_sync((True,)).force is True
    assert parse_sync(({"force": True, "folder": "f", "x": 1},)) == parse_sync(
        ({"force": True, "folder": "f"},)
    )
    assert parse_sync(({"force": None},)).force is False
    assert error(parse_sync, ({"force": 1},)).field == "force"
    assert error(parse_sync, ({"force": "yes"},)).field == "force"
    assert error(parse_sync, ("now",)).field == "params"

    s = parse_save_session(({"transcript": "s.jsonl", "messages": None},))
    assert (s.transcript, s.messages, s.source, s.folder) == ("s.jsonl", 15, None, None)
    assert parse_save_session(({"transcript": "s.jsonl", "messages": 1000},)).messages == 1000
    for args, field in [
        ((), "transcript"),
        (({"transcript": ""},), "transcript"),
        (({"transcript": "s", "messages": 0},), "messages"),
        (({"transcript": "s", "messages": 1001},), "messages"),
        (({"transcript": "s", "source": 1},), "source"),
    ]:
        assert error(parse_save_session, args).field == field, args

    assert parse_status(None).folder is None
    assert parse_status([{"folder": "file:///w"}]).folder == "file:///w"
    assert error(parse_status, {"folder": 2}).field == "folder"
