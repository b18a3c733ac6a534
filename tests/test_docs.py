"""The manual and the front door stay true: the site builds with every link and anchor
resolved, the generated reference pages match the code, the getting-started tour runs as
written, and README.md stays a short page whose links lead somewhere."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from model_util import ensure_test_model
from repo_root import REPO

from memory_ls import docgen
from memory_ls.models import registry
from memory_ls.settings import Settings, leaves

DOCS = REPO / "docs"
GETTING_STARTED = DOCS / "getting-started.md"
EXE = Path(sys.executable).parent / "memory-ls"
README_MAX_LINES = 250


def test_the_site_builds_strict(tmp_path: Path):
    """`mkdocs build --strict`: a broken link, a missing anchor, a page left out of the nav or
    a snippet file that is gone fails the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    site = tmp_path / "site"
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "mkdocs.yml", "-d", site]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    assert (site / "getting-started" / "index.html").is_file()
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert "Keep a Changelog" in changelog  # the snippet took CHANGELOG.md in


def test_generated_pages_match_the_code():
    assert docgen.main(["--check"]) == 0, "run `python -m memory_ls.docgen`"
    settings_page = docgen.SETTINGS_PAGE.read_text(encoding="utf-8")
    for leaf in leaves(Settings):
        assert f"| `{leaf.key}` |" in settings_page
    cli_page = docgen.CLI_PAGE.read_text(encoding="utf-8")
    for command in ("serve", "index", "search", "get", "status", "session save", "mcp"):
        assert f"## `memory-ls {command}`" in cli_page


def test_regenerating_the_settings_page_touches_only_its_tables(tmp_path: Path):
    page = docgen.SETTINGS_PAGE.read_text(encoding="utf-8")
    drifted = page.replace("| `query.maxResults` | `6` |", "| x | y |")
    assert drifted != page
    assert docgen.settings_page(drifted) == page
    with pytest.raises(ValueError, match="markers"):
        docgen.settings_page("# no markers\n")


def _blocks(markdown: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a page, as (language, text), in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", markdown, flags=re.M | re.S)


def _tour() -> list[tuple[str, str]]:
    """(command line, the ```text block that shows its output or "") in page order: the
    ```sh blocks. Install commands are ```bash blocks, run by tests/test_install.py (uv, pipx,
    pip) and by CI itself (install.sh)."""
    steps: list[tuple[str, str]] = []
    for lang, text in _blocks(GETTING_STARTED.read_text(encoding="utf-8")):
        if lang == "text" and steps:
            steps[-1] = (steps[-1][0], text)
        if lang != "sh":
            continue
        for line in text.splitlines():
            command = line.split("  #", 1)[0].strip()
            if command:
                steps.append((command, ""))
    return steps


def test_the_getting_started_tour_runs_as_written(tmp_path: Path):
    """Every command of the page, run on a copy of the demo workspace with a cache of its own
    (the model already there, as `memory-ls model pull` leaves it: the pull's download and
    conversion have their own tests); each exits 0, and the output the page shows is there."""
    shutil.copytree(REPO / "examples" / "demo", tmp_path / "examples" / "demo")
    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("MEMORY_LS_PG_URL", None)
    model = registry.model_path(registry.DEFAULT_MODEL_NAME, cache / "memory-ls" / "models")
    model.parent.mkdir(parents=True)
    shutil.copyfile(ensure_test_model(), model)

    steps = _tour()
    ran = [shlex.split(command)[1] for command, _ in steps]
    assert {"model", "index", "search", "get", "status"} <= set(ran), ran
    for command, shown in steps:
        argv = shlex.split(command)
        assert argv[0] == "memory-ls", f"the tour runs only memory-ls commands: {command}"
        proc = subprocess.run(
            [str(EXE), *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        assert proc.stdout.strip(), command
        for line in shown.splitlines()[:1]:
            citation = line.split()[0]
            assert citation in proc.stdout, f"{command}: the page shows {citation}\n{proc.stdout}"
    assert model.is_file()


def test_the_readme_is_a_front_door():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links to the manual"
    for target in local:
        assert (REPO / target).exists(), f"README.md links to {target}, which is not there"
    assert "../shared" not in text
