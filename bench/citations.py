"""What checking the citations of one open document costs (its diagnostics and links): a
workspace of two 3,000-line notes and a 3,000-record transcript, and a document citing them
N times (a quarter each to the notes, the transcript and a missing file). Times the check that
the language server runs in its read pool (``server.citations._check_all``), then finding the
citations in the text and turning the problems into diagnostics (the server does both in a
thread as well).

    python bench/citations.py                 # 50,000 citations
    python bench/citations.py --citations 4000

Run it with PYTHONPATH pointing at another checkout to compare revisions side by side.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from memory_ls.engine import MemoryEngine
from memory_ls.server import convert
from memory_ls.server.citations import _check_all
from memory_ls.settings import Settings

LINES = 3000


def workspace(root: Path) -> None:
    (root / "memory").mkdir(parents=True)
    (root / "sessions").mkdir()
    (root / "MEMORY.md").write_text("".join(f"line {i} of the note\n" for i in range(LINES)))
    (root / "memory/2026-01-10.md").write_text("".join(f"day line {i}\n" for i in range(LINES)))
    records = (
        {"type": "user", "message": {"role": "user", "content": f"message {i}\nsecond line"}}
        for i in range(LINES)
    )
    (root / "sessions/a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def document(n: int) -> str:
    def row(i: int) -> str:
        k = i % LINES + 1
        return (
            f"see MEMORY.md#L{k}-L{k + 2}, memory/2026-01-10.md#L{k}, "
            f"memory/missing.md#L{i + 1} and sessions/a.jsonl#L{k}\n"
        )

    return "".join(row(i) for i in range(n // 4))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--citations", type=int, default=50_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "w"
        workspace(root)
        settings = Settings(provider="none")
        settings.sources, settings.sessions.globs = ["memory", "sessions"], ["sessions/*.jsonl"]
        text = document(args.citations)
        t0 = time.perf_counter()
        lines = text.split("\n")
        spans = list(convert.citation_spans(lines))
        t1 = time.perf_counter()
        with MemoryEngine(root, settings, provider=None, index_path=Path(tmp) / "i.sqlite") as eng:
            checks = _check_all(eng, [s.citation for s in spans], list(range(len(spans))), None)
        t2 = time.perf_counter()
        codec = PositionCodec(types.PositionEncodingKind.Utf16)
        diags = [
            convert.citation_diagnostic(lines, s, chk.problem, codec)
            for s, (_, chk) in zip(spans, checks, strict=True)
            if chk.problem
        ]
        t3 = time.perf_counter()
    found = sum(1 for _, c in checks if c.excerpt is not None)
    print(f"{len(spans):,} citations ({found:,} resolved, {len(diags):,} diagnostics)")
    print(f"find {t1 - t0:.2f} s, check {t2 - t1:.2f} s, diagnostics {t3 - t2:.2f} s")


if __name__ == "__main__":
    main()
