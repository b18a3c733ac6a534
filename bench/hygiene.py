"""Memory hygiene benchmark (issue 37): duplicate and conflict precision and recall on a
labelled set, findings on its clean notes (and conflict findings on its near-misses), and the
time to check a generated 10,000-note workspace.

The labelled set is bench/hygiene/ (written for this benchmark: a MEMORY.md, two topic files
and a dozen dated notes with verbatim and reworded copies, near-misses that are not copies and
clean notes; labels.json says which line repeats which file, and which older line a newer
note supersedes: "moved off Helm to Kustomize", "no longer", a version changed for the same
service, beside near-misses such as another service's version or another day's event). It is
checked twice: keyword-only (no vectors: what `memory-ls check` does on an index that was never
embedded) and, when a local model is found, after `memory-ls index` embedded the chunks and their
lines (the line vectors then confirm close pairs).

    python bench/hygiene.py                  # both modes, and 10,000 generated notes
    python bench/hygiene.py --files 0        # the labelled set only

With generated notes it times, side by side in one run: the check from scratch, the same check
again with nothing changed, a draft check, and the check after each of ``--edits`` edits (the
file's buffer indexed first, not timed: what the language server does after a keystroke's
debounce), then the same check and draft by the code of ``--before`` (a git revision from before
the per-file cache, run from ``git archive`` on the same index).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import env_isolate, find_default_model, log  # noqa: E402
from perf import Corpus  # noqa: E402

from memory_ls.engine import MemoryEngine  # noqa: E402
from memory_ls.hygiene import Finding, check_index  # noqa: E402
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
        "conflict": conflict_score(found, labels),
    }  # fmt: skip


def conflict_score(found: list[Finding], labels: dict) -> dict:
    """``conflict`` findings against labels.json's ``conflicts`` (the older passage, and the
    newer file it is superseded by): precision, recall, and findings on the clean notes and
    on the labelled near-misses (each of those is a wrong warning)."""
    got = [f for f in found if f.code == "conflict"]
    want = {(c["path"], c["line"]): c["newer"] for c in labels["conflicts"]}
    hit: set[tuple[str, int]] = set()
    right = []
    for f in got:
        mine = {k for k in want if k[0] == f.path and f.start_line <= k[1] <= f.end_line}
        ok = {k for k in mine if want[k] in {r.path for r in f.related}}
        hit |= ok
        right.append(bool(ok))
    near = [n.split(" ", 1)[0] for n in labels["conflict_near_misses"]]
    return {
        "findings": len(got),
        "precision": sum(right) / len(got) if got else 1.0,
        "recall": len(hit) / len(want),
        "missed": sorted(f"{p}:{n}" for p, n in set(want) - hit),
        "wrong": [f"{f.path}:{f.start_line} -> {f.related[0].citation}"
                  for f, ok in zip(got, right, strict=True) if not ok],
        "onClean": sum(any(_in(f, c) for c in labels["clean"]) for f in got),
        "onNearMisses": sum(any(_in(f, n) for n in near) for f in got),
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


OLD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from memory_ls.engine import MemoryEngine
from memory_ls.settings import Settings
from pathlib import Path
with MemoryEngine(Path(sys.argv[2]), Settings(provider="none"), index_path=Path(sys.argv[3])) as e:
    e.sync("bench", embed=False)  # its own index: another schema's would be moved aside
    t0 = time.perf_counter(); found = e.check(); check_s = time.perf_counter() - t0
    t0 = time.perf_counter(); e.check_draft(sys.argv[4]); draft_s = time.perf_counter() - t0
print(json.dumps({"checkSeconds": round(check_s, 1), "draftSeconds": round(draft_s, 2),
                  "findings": len(found)}))
"""
DRAFT = "- alpha alpha alpha a draft line of a few words to check"


def baseline(tmp: Path, rev: str, root: Path, index: Path) -> dict:
    """The same checks by the code of ``rev`` (before the per-file cache), on the same notes
    (its own index, built first and not timed: ``index`` is of this code's schema)."""
    old = tmp / "old"
    old.mkdir()
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "memory_ls"],
                             check=True, capture_output=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    own = tmp / "old.sqlite"
    out = subprocess.run([sys.executable, "-c", OLD, str(old), str(root), str(own), DRAFT],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    return {"rev": rev} | json.loads(out)


def generated(tmp: Path, n_files: int, edits: int, rev: str | None) -> dict:
    root = tmp / f"gen{n_files}"
    info = Corpus(seed=7).write_workspace(root, n_files, target_chunks=n_files * 2)
    index = tmp / "gen.sqlite"
    with MemoryEngine(root, Settings(provider="none"), index_path=index) as e:
        t0 = time.perf_counter()
        e.sync("bench", embed=False)
        index_s = time.perf_counter() - t0
        chunks = e.status()["chunks"]
        before = baseline(tmp, rev, root, index) if rev else None
        t0 = time.perf_counter()
        found = e.check()  # from scratch: the engine's cache is empty
        check_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        e.check()
        again_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        e.check_draft(DRAFT)
        draft_s = time.perf_counter() - t0
        edit_ms = _edits(e, root, edits)
        # The cache after the edits answers what a check from scratch answers.
        kept = e.check()
        with e.indexer.reader() as r:
            fresh = check_index(r, e.settings.hygiene)
        edit_ms |= {"findingsAfter": len(kept), "sameAsFromScratch": kept == fresh}
    by: dict[str, int] = {}
    for f in found:
        by[f.code] = by.get(f.code, 0) + 1
    out = {
        "files": info["files"], "chunks": chunks, "indexSeconds": round(index_s, 1),
        "checkSeconds": round(check_s, 1), "unchangedMs": round(again_s * 1000, 1),
        "draftMs": round(draft_s * 1000, 1), "findings": by,
        "editRecheckMs": edit_ms,
    }  # fmt: skip
    if before:
        out["before"] = before
    return out


def _edits(e: MemoryEngine, root: Path, n: int) -> dict:
    """An editor's edit: a file's buffer indexed (not timed), then the check (timed). Every
    other edit copies a sentence of another file, so that the pair is judged and found."""
    rng = random.Random(11)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md"))
    took = []
    for i in range(n):
        rel = rng.choice(files)
        text = (root / rel).read_text()
        other = (root / rng.choice(files)).read_text().splitlines()
        line = max(other, key=len) if i % 2 else f"An edit number {i} of this note, written now."
        e.set_document(rel, text + "\n" + line + "\n")
        t0 = time.perf_counter()
        e.check()
        took.append((time.perf_counter() - t0) * 1000)
    took.sort()
    return {"edits": n, "p50": round(took[n // 2], 1), "p95": round(took[int(n * 0.95)], 1),
            "max": round(took[-1], 1)}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=10_000, help="generated notes (0: none)")
    ap.add_argument("--no-model", action="store_true", help="keyword-only on the labelled set")
    ap.add_argument("--edits", type=int, default=200, help="edits re-checked, for p95")
    ap.add_argument(
        "--before",
        default="55e8daf",
        metavar="REV",
        help="also time the code of this git revision (before the cache; '' for none)",
    )
    args = ap.parse_args()
    model = None if args.no_model else find_default_model()
    with tempfile.TemporaryDirectory(prefix="memory-ls-hygiene-") as d:
        tmp = Path(d)
        env_isolate(tmp)
        result: dict = {"labelled": labelled(tmp, model)}
        if args.files:
            log(f"checking {args.files} generated notes")
            result["generated"] = generated(tmp, args.files, args.edits, args.before or None)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
