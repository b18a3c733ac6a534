"""The settings tables of the manual (docs/reference/settings.md), generated from the
declarations in ``schema.py``: ``python -m memory_ls.settings`` prints them and
``python -m memory_ls.docgen`` writes them into the page (``tests/test_docs.py`` fails on drift).
What else repeats a setting's default, bounds or choices (the CLI's help, the MCP tools'
schemas) reads them here too: ``declared`` and ``option_help``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields, is_dataclass, replace
from typing import Any, get_args, get_origin

from .loading import bounds_text, list_text
from .schema import Settings
from .spec import Leaf, Spec, leaves


def _ticked(choices: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"`{c}`" for c in choices)


def allowed(hint: Any, spec: Spec) -> str:
    """What a setting accepts, in words: "integer, at least 1", "`weighted`, `rrf`" ..."""
    if hint is bool:
        return "`true`, `false`"
    if hint in (int, float):
        kind = "integer" if hint is int else "number"
        bounds = bounds_text(spec)
        return f"{kind}, {bounds}" if bounds else kind
    if spec.choices and hint is str:
        return ", ".join(_ticked(spec.choices))
    if get_origin(hint) is list and spec.choices:
        return list_text(replace(spec, choices=_ticked(spec.choices)))
    if get_origin(hint) is list:
        (item,) = get_args(hint)
        if is_dataclass(item):  # a list of tables, e.g. sessions.roots
            return "list of tables `{" + ", ".join(f.name for f in fields(item)) + "}`"
        return "list of strings"
    if get_origin(hint) is dict:
        return "table of strings"
    return "string"


def declared(key: str) -> Leaf:
    """One setting's declaration by its key as users write it (``"query.maxResults"``);
    KeyError when there is no such setting."""
    for leaf in leaves(Settings):
        if leaf.key == key:
            return leaf
    raise KeyError(key)


def option_help(key: str, what: str) -> str:
    """The help of a command-line option that stands in for setting ``key``: ``what`` it
    does, with the setting's bounds and default ("max results, at least 1 (default 6, or
    the setting query.maxResults)")."""
    leaf = declared(key)
    bounds = bounds_text(leaf.spec)
    return f"{what}{', ' + bounds if bounds else ''} (default {leaf.default}, or the setting {key})"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(leaf: Leaf) -> str:
    default = json.dumps(leaf.default, ensure_ascii=False)
    cells = (f"`{leaf.key}`", f"`{default}`", allowed(leaf.hint, leaf.spec), leaf.spec.description)
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _group(key: str) -> str:
    return key.split(".", 1)[0] if "." in key else ""


GROUP_TITLES = {
    "": "Top level",
    "query": "`query`: how searches rank and cut",
    "chunking": "`chunking`: how files are cut into chunks",
    "local": "`local`: the local embedding model",
    "remote": "`remote`: remote embedding providers",
    "cache": "`cache`: the embedding cache",
    "sync": "`sync`: following the files",
    "sessions": "`sessions`: agent transcripts",
    "memory": "`memory`: agents' memory folders",
    "sessionWriter": "`sessionWriter`: session notes",
    "store": "`store`: where the index lives",
    "rerank": "`rerank`: reranking",
    "hygiene": "`hygiene`: memory checks (`memory-ls check`)",
}


def markdown_tables() -> str:
    """One table per group of settings (``query``, ``local``, ...) under its own heading, in
    declaration order, for the manual's settings page."""
    groups: dict[str, list[Leaf]] = {}
    for leaf in leaves(Settings):
        groups.setdefault(_group(leaf.key), []).append(leaf)
    parts: list[str] = []
    for group, members in groups.items():
        parts += [f"## {GROUP_TITLES.get(group, f'`{group}`')}", ""]
        parts += ["| key | default | allowed | meaning |", "|---|---|---|---|"]
        parts += [_row(leaf) for leaf in members]
        parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m memory_ls.settings",
        description="Print the settings tables (the manual's page: python -m memory_ls.docgen).",
    )
    ap.parse_args(argv)
    sys.stdout.write(markdown_tables())
    return 0
