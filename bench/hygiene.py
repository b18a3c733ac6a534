"""Memory hygiene benchmark (issue 37): duplicate precision and recall on a labelled set,
findings on its clean notes, and the time to check a generated 10,000-note workspace.

The labelled set is bench/hygiene/ (written for this benchmark: a MEMORY.md, two topic files
and a dozen dated notes with verbatim and reworded copies, near-misses that are not copies and
clean notes; labels.json says which line repeats which file). It is checked twice: keyword-only
(no vectors: what `memory-ls check` does on an index that was never embedded) and, when a local
model is found, after `memory-ls index` embedded the chunks and their lines (the line vectors
then confirm close pairs).

    python bench/hygiene.py                  # both modes, and 10,000 generated notes
    python bench/hygiene.py --files 0        # the labelled set only
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import env_isolate, find_default_model, log  # noqa: E402
from perf import Corpus  # noqa: E402

from memory_ls.engine import MemoryEngine  # noqa: E402
from memory_ls.hygiene import Finding  # noqa: E402
from memory_ls.settings import Settings  # noqa: E402

SET = Path(__file__).resolve().parent / "hygiene"


def score(found: list[Finding], labels: dict) -> dict:
    dups = [f for f in found if f.code == "duplicate"]
    want = {(d["path"], d["line"]): d["earlier"] for d in labels["duplicates"]}
    hit: set[tuple[str, int]] = set()
    right = 0
    for f in dups:
        mine = {k for k in want if k[0] == f.path and f.start_line <= k[1] <= f.end_line}
        ok = {k for k in mine if want[k] in {r.path for r in f.related}}
        right += bool(ok)
        hit |= ok
    clean = [f for f in found if any(_in(f, c) for c in labels["clean"])]
    return {
        "findings": len(dups),
        "precision": right / len(dups) if dups else 1.0,
        "recall": len(hit) / len(want),
        "missed": sorted(f"{p}:{n}" for p, n in set(want) - hit),
        "wrong": [f"{f.path}:{f.start_line}" for f in dups if not any(
            k[0] == f.path and f.start_line <= k[1] <= f.end_line for k in want)],
        "onClean": len(clean),
    }  # fmt: skip


def _in(f: Finding, where: str) -> bool:
    path, _, lines = where.partition(":")
    if f.path != path:
        return False
    if not lines:
        return True
    a, _, b = lines.partition("-")
    return f.start_line <= int(b or a) and f.end_line >= int(a)


def labelled(tmp: Path, model: Path | None) -> dict:
    root = tmp / "set"
    shutil.copytree(SET, root, ignore=shutil.ignore_patterns("labels.json"))
    labels = json.loads((SET / "labels.json").read_text())
    out = {}
    s = Settings(provider="none")
    with MemoryEngine(root, s, index_path=tmp / "kw.sqlite") as e:
        e.sync("bench", embed=False)
        out["keyword"] = score(e.check(), labels)
    if model is not None:
        s = Settings(provider="local")
        s.local.model_path = str(model)
        with MemoryEngine(root, s, index_path=tmp / "vec.sqlite") as e:
            e.sync("bench")
            e.embed_pending()
            st = e.status()
            out["lineVectors"] = score(e.check(), labels) | {
                "pendingLineVectors": st["pendingLineVectors"], "model": model.name}  # fmt: skip
    return out


def generated(tmp: Path, n_files: int) -> dict:
    root = tmp / f"gen{n_files}"
    info = Corpus(seed=7).write_workspace(root, n_files, target_chunks=n_files * 2)
    with MemoryEngine(root, Settings(provider="none"), index_path=tmp / "gen.sqlite") as e:
        t0 = time.perf_counter()
        e.sync("bench", embed=False)
        index_s = time.perf_counter() - t0
        chunks = e.status()["chunks"]
        t0 = time.perf_counter()
        found = e.check()
        check_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        e.check_draft("- " + " ".join(["alpha"] * 3) + " a draft line of a few words to check")
        draft_s = time.perf_counter() - t0
    by: dict[str, int] = {}
    for f in found:
        by[f.code] = by.get(f.code, 0) + 1
    return {
        "files": info["files"], "chunks": chunks, "indexSeconds": round(index_s, 1),
        "checkSeconds": round(check_s, 1), "draftSeconds": round(draft_s, 2), "findings": by,
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10_000, help="generated notes (0: none)")
    ap.add_argument("--no-model", action="store_true", help="keyword-only on the labelled set")
    args = ap.parse_args()
    model = None if args.no_model else find_default_model()
    with tempfile.TemporaryDirectory(prefix="memory-ls-hygiene-") as d:
        tmp = Path(d)
        env_isolate(tmp)
        result: dict = {"labelled": labelled(tmp, model)}
        if args.files:
            log(f"checking {args.files} generated notes")
            result["generated"] = generated(tmp, args.files)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
