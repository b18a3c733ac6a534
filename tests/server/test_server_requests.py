"""The language server's requests over several real workspace folders, without a server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import pytest_asyncio
from conftest import write
from server_util import open_folder

from memory_ls.params import FolderParams, GetParams, ParamError
from memory_ls.search.request import SearchRequest
from memory_ls.server.folder import Folder
from memory_ls.server.folders import Folders
from memory_ls.server.progress import SyncOutcome
from memory_ls.server.requests import Requests, merge_limit
from memory_ls.settings import load as load_settings


def make_folder(root: Path, max_results: int, notes: int) -> Path:
    write(
        root,
        ".memory-ls.toml",
        f'provider = "none"\n[query]\nmaxResults = {max_results}\nminScore = 0\n',
    )
    for i in range(notes):
        write(root, f"memory/walrus-{i}.md", f"# Walrus {i}\n\nThe walrus herd number {i}.\n")
    return root


async def no_progress_sync(folder: Folder, reason: str, force: bool) -> SyncOutcome:
    return SyncOutcome(await folder.sync(reason, force))


@pytest_asyncio.fixture
async def requests(tmp_path: Path) -> AsyncIterator[Requests]:
    reads = ThreadPoolExecutor(2)
    folders = Folders()
    for name, max_results, notes in (("small", 1, 3), ("big", 3, 4)):
        root = make_folder(tmp_path / name, max_results, notes)
        settings, problems = load_settings(root)
        assert not problems
        folders.add(await open_folder(root, tmp_path / f"{name}.sqlite", reads, settings))
    yield Requests(folders, no_progress_sync, lambda: "off")
    for f in folders.clear():
        await f.close()
    reads.shutdown()


def by_folder(result: dict, tmp_path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for hit in result["results"]:
        name = Path(hit["uri"].removeprefix("file://")).relative_to(tmp_path).parts[0]
        counts[name] = counts.get(name, 0) + 1
    return counts


async def test_each_folder_applies_its_own_max_results(requests: Requests, tmp_path: Path) -> None:
    # Each folder answers with its own maxResults; the merge keeps the largest of them.
    res = await requests.search(SearchRequest("walrus herd"))
    assert len(res["results"]) == 3 and by_folder(res, tmp_path).get("small", 0) <= 1
    # An explicit maxResults applies to every folder and to the merge.
    res = await requests.search(SearchRequest("walrus herd", max_results=6))
    assert len(res["results"]) == 6 and by_folder(res, tmp_path)["small"] >= 2
    # One folder alone: its own default.
    small = (tmp_path / "small").as_uri()
    res = await requests.search(SearchRequest("walrus herd", folder=small))
    assert by_folder(res, tmp_path) == {"small": 1}
    # workspace/symbol asks for its own number, whatever the folders say.
    symbols = await requests.workspace_symbols("walrus herd")
    assert len(symbols) == 7


async def test_merge_limit(requests: Requests) -> None:
    folders = list(requests.folders)
    assert merge_limit(SearchRequest("q"), folders) == 3
    assert merge_limit(SearchRequest("q", max_results=10), folders) == 10
    assert merge_limit(SearchRequest("q"), []) == 1


async def test_errors_name_the_field(requests: Requests, tmp_path: Path) -> None:
    cases = [
        (requests.search(SearchRequest("q", folder="/nope")), "folder"),
        (requests.get(GetParams(path=str(tmp_path / "elsewhere.md"))), "path"),
        (requests.get(GetParams(path="README.md")), "path"),
        (requests.get(GetParams(citation="memory/gone.md#L1")), "citation"),
        (requests.status(FolderParams("/nope")), "folder"),
    ]
    for call, field in cases:
        with pytest.raises(ParamError) as exc_info:
            await call
        assert exc_info.value.field == field
    got = await requests.get(GetParams(citation="memory/walrus-3.md#L3"))
    assert got["text"] == "The walrus herd number 3." and "/big/" in got["uri"]
    st = await requests.status(FolderParams())
    assert st["files"] == 7 and len(st["folders"]) == 2 and st["watch"] == "off"
