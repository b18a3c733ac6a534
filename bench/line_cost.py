"""What line vectors cost to embed, next to the chunk vectors they follow, in one process.

    python bench/line_cost.py [--model PATH] [--chunks 200] [--rounds 3]

Takes SciFact passages (../shared/eval) cut to about 400 tokens as bench/embed_speed.py does,
splits each into the parts that get a line vector (``index/line_vectors.segments``), and times,
alternating in each round, embedding the chunks and embedding their lines with the shipped
settings and batch size. Prints both rates, the ratio of the times and the bytes stored.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from common import find_default_model, md_table
from embed_speed import CHUNK_CHARS, SCIFACT

from memory_ls.embeddings.local import open_local
from memory_ls.index.line_vectors import segments
from memory_ls.settings import Settings


def passages(n: int) -> list[str]:
    out: list[str] = []
    with SCIFACT.open() as f:
        for line in f:
            text = json.loads(line)["text"]
            if len(text) >= CHUNK_CHARS:
                out.append(text[:CHUNK_CHARS].rsplit(" ", 1)[0])
            if len(out) == n:
                break
    return out


def timed(embed: object, texts: list[str], batch: int) -> float:
    began = time.perf_counter()
    for i in range(0, len(texts), batch):
        embed(texts[i : i + batch])  # type: ignore[operator]
    return time.perf_counter() - began


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="GGUF model (default: the pulled one)")
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    settings = Settings()
    provider = open_local(args.model or find_default_model(), settings)
    chunks = passages(args.chunks)
    lines = [p for c in chunks for _, p in segments(c, lambda t: provider.unknown_ratio(t) <= 0.25)]
    batch = settings.local.batch_size
    provider.embed_documents(chunks[:2])
    chunk_s: list[float] = []
    line_s: list[float] = []
    for _ in range(args.rounds):
        chunk_s.append(timed(provider.embed_documents, chunks, batch))
        line_s.append(timed(provider.embed_documents, lines, batch))
    c, ln = statistics.median(chunk_s), statistics.median(line_s)
    dims = provider.embed_documents(chunks[:1]).shape[1]
    print(
        md_table(
            ["", "texts", "median s", "range s", "per s", "bytes stored a chunk"],
            [
                [
                    "chunks",
                    len(chunks),
                    c,
                    f"{min(chunk_s):.1f}-{max(chunk_s):.1f}",
                    len(chunks) / c,
                    dims * 2,
                ],
                [
                    "their lines",
                    len(lines),
                    ln,
                    f"{min(line_s):.1f}-{max(line_s):.1f}",
                    len(lines) / ln,
                    round(len(lines) / len(chunks) * (dims + 2)),
                ],
            ],
        )
    )
    print(f"\nlines / chunks time: {ln / c:.2f} ({len(lines) / len(chunks):.1f} lines a chunk)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
