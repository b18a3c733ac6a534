#!/usr/bin/env python3
"""Generate (or check) the `memory.*` settings that the VS Code extension contributes.

Every server setting is declared once, in ``memory_ls/settings/schema.py`` (type, default,
bounds, choices, description). This script walks those declarations and writes
``contributes.configuration`` in ``package.json``: one ``memory.<camelCaseKey>`` entry per leaf
setting, with its JSON type, default, enum, minimum/maximum and description (a setting named in
backquotes becomes a settings link). Client-only settings (``memory.server.*``,
``memory.trace.server``) are declared below. The manual's settings page comes from
the same declarations: ``python -m memory_ls.docgen``.

    python3 scripts/gen_settings.py           rewrite package.json
    python3 scripts/gen_settings.py --check   exit 1 (and say what differs) when out of date

Run it with a Python that can import ``memory_ls`` (the repository's venv). ``npm test`` runs
``--check`` through ``test/settingsDrift.test.ts``, so a setting added to the server without
updating the extension fails the tests.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

HERE = Path(__file__).resolve().parent
PACKAGE_JSON = HERE.parent / "package.json"
REPO = HERE.parent.parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from memory_ls import settings as S  # noqa: E402

# Settings of the extension itself: never sent to the server.
CLIENT_SETTINGS: dict[str, dict[str, Any]] = {
    "memory.server.command": {
        "type": "string",
        "default": "",
        "markdownDescription": "The `memory-ls` executable (a name on `PATH` or a path; "
        "`${workspaceFolder}` and `~` are expanded). Empty: `.venv/bin/memory-ls` or "
        "`venv/bin/memory-ls` in the workspace, then `memory-ls` on `PATH`.",
        "scope": "machine-overridable",
        "order": 0,
    },
    "memory.server.pythonPath": {
        "type": "string",
        "default": "",
        "markdownDescription": "Run the server as `<python> -m memory_ls serve` with this "
        "interpreter (used when `#memory.server.command#` is empty).",
        "scope": "machine-overridable",
        "order": 1,
    },
    "memory.server.args": {
        "type": "array",
        "items": {"type": "string"},
        "default": ["serve"],
        "markdownDescription": "Arguments passed to the server command.",
        "scope": "machine-overridable",
        "order": 2,
    },
    "memory.server.env": {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "default": {},
        "markdownDescription": "Extra environment variables for the server process (e.g. "
        "`XDG_CACHE_HOME`). API keys are better set in the environment VS Code starts from.",
        "scope": "machine-overridable",
        "order": 3,
    },
    "memory.server.allMarkdown": {
        "type": "boolean",
        "default": True,
        "markdownDescription": "Attach the server to every Markdown file, so citations "
        "(`memory/x.md#L3-L9`) in READMEs or agent instructions get go-to-definition, hover and "
        "links. Off: memory files only. Only memory files are indexed either way.",
        "order": 4,
    },
    "memory.server.allFiles": {
        "type": "boolean",
        "default": True,
        "markdownDescription": "Attach the server to every file, so citations "
        "(`memory/x.md#L3-L9`) in code comments, plain text or config files get "
        "go-to-definition, hover, links and warnings too. Off: Markdown files as "
        "`#memory.server.allMarkdown#` says, and transcripts. Only memory files are indexed "
        "either way.",
        "order": 5,
    },
    "memory.trace.server": {
        "type": "string",
        "enum": ["off", "messages", "verbose"],
        "default": "off",
        "markdownDescription": "Trace the LSP messages between VS Code and memory-ls in the "
        "*Memory* output channel.",
        "scope": "window",
        "order": 6,
    },
    "memory.server.installSource": {
        "type": "string",
        "default": "",
        "markdownDescription": "What *Memory: Install Server* (and the offer shown when no "
        "`memory-ls` is found) installs into the extension's own environment: a pip requirement "
        "(e.g. `memory-ls==0.1.0`) or a path to a wheel (`~` is expanded). Empty: `memory-ls` "
        "from the package index. Meant for testing and offline installs; an update of the "
        "extension upgrades from the same source.",
        "scope": "machine",
        "order": 7,
    },
}


def linked(description: str, keys: set[str]) -> str:
    """Backquoted setting names become links in the VS Code settings UI (`#memory.key#`)."""
    return re.sub(
        r"`([A-Za-z.]+)`",
        lambda m: f"`#memory.{m.group(1)}#`" if m.group(1) in keys else m.group(0),
        description,
    )


def schema_for(leaf: S.Leaf) -> dict[str, Any]:
    """The JSON schema of one server setting, from its declaration."""
    hint, spec = leaf.hint, leaf.spec
    entry: dict[str, Any]
    if hint is bool:
        entry = {"type": "boolean"}
    elif hint in (int, float):
        entry = {"type": "integer" if hint is int else "number"}
    elif hint is str:
        entry = {"type": "string"}
        if spec.choices:
            entry["enum"] = list(spec.choices)
    elif get_origin(hint) is list and is_dataclass(get_args(hint)[0]):  # a list of tables
        props = {
            sub.key: {**schema_for(sub), "markdownDescription": sub.spec.description}
            for sub in S.leaves(get_args(hint)[0])
        }
        entry = {
            "type": "array",
            "items": {"type": "object", "properties": props, "additionalProperties": False},
        }
    elif get_origin(hint) is list:
        items: dict[str, Any] = {"type": "string"}
        if spec.choices:
            items["enum"] = list(spec.choices)
        entry = {"type": "array", "items": items, "uniqueItems": True}
        if spec.min_items:
            entry["minItems"] = spec.min_items
    elif get_origin(hint) is dict:
        entry = {"type": "object", "additionalProperties": {"type": "string"}}
    else:  # pragma: no cover - a new kind of setting: teach this script about it
        raise SystemExit(f"gen_settings: {leaf.key}: unsupported type {hint!r}")
    if spec.minimum is not None:
        entry["minimum"] = spec.minimum
    if spec.maximum is not None:
        entry["maximum"] = spec.maximum
    entry["default"] = leaf.default
    return entry


def build() -> dict[str, Any]:
    props: dict[str, Any] = dict(CLIENT_SETTINGS)
    all_leaves = list(S.leaves(S.Settings))
    keys = {leaf.key for leaf in all_leaves}
    for order, leaf in enumerate(all_leaves, start=10):
        entry = schema_for(leaf)
        entry["markdownDescription"] = linked(leaf.spec.description, keys)
        entry["scope"] = "resource"
        entry["order"] = order
        props[f"memory.{leaf.key}"] = entry
    return {"title": "Memory", "properties": props}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check package.json")
    ap.add_argument("--print", action="store_true", help="print the generated configuration")
    args = ap.parse_args()
    config = build()
    if args.print:
        print(json.dumps(config, indent=2))
        return 0
    pkg = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    current = pkg.get("contributes", {}).get("configuration")
    if args.check:
        if current != config:
            have = (current or {}).get("properties", {})
            want = config["properties"]
            for key in sorted(set(have) | set(want)):
                if have.get(key) != want.get(key):
                    print(
                        f"gen_settings: {key}: package.json has {json.dumps(have.get(key))}, "
                        f"the server schema says {json.dumps(want.get(key))}",
                        file=sys.stderr,
                    )
            if current is not None and {k: v for k, v in current.items() if k != "properties"} != {
                k: v for k, v in config.items() if k != "properties"
            }:
                print("gen_settings: configuration title differs", file=sys.stderr)
            print(
                "gen_settings: package.json is out of date; run "
                "`npm run gen-settings` in editors/vscode",
                file=sys.stderr,
            )
            return 1
        return 0
    pkg.setdefault("contributes", {})["configuration"] = config
    PACKAGE_JSON.write_text(json.dumps(pkg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"gen_settings: wrote {len(config['properties'])} settings to {PACKAGE_JSON.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
