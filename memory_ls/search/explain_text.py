"""The ``explain`` trace (``present.py``; its shape is in docs/protocol.md) as lines a person
reads: what ``memory-ls search --explain`` prints."""

from __future__ import annotations

from typing import Any


def explained_search(trace: dict[str, Any]) -> str:
    """``--explain``'s plan of one folder's search, as lines a person reads."""
    p, q, c = trace["plan"], trace["query"], trace["counts"]
    lines = [f"search in {trace['folder']}: {' -> '.join(trace['stages'])}"]
    lines.append(f"  query: words {q['words']!r}, terms {q['terms']}, filters {q['filters']}")
    weights = f"vector {p['weights']['vector']}, text {p['weights']['text']}"
    lines.append(f"  plan: {p['mode']}, {p['pool']} candidates a side, {p['fusion']} ({weights})")
    if kw := trace["keyword"]:
        lines.append(
            f"  keyword: {kw['expression']}; best BM25 {kw['bestBm25']}, coverage {kw['coverage']}"
        )
    if vec := trace["vector"]:
        lift = vec["lift"]
        scored = f"score = fused x {lift} x decay" if lift != 1.0 else "score = fused x decay"
        lines.append(f"  vector: calibration {vec['calibration']}; {scored}")
    lines.append(
        f"  counts: {c['retrieved']} retrieved, {c['passedFilters']} past the filters, "
        f"{c['belowMinScore']} under minScore, "
        + (f"{c['expired']} expired left out, " if c.get("expired") else "")
        + f"{c['picked']} picked\n"
    )
    return "\n".join(lines)


def explained_hit(e: dict[str, Any]) -> str:
    """One hit's ``--explain`` trace on one line: each stage's figure, in pipeline order."""
    parts = []
    if kw := e["keyword"]:
        parts.append(
            f"keyword #{kw['rank']} bm25 {kw['bm25']:.3f} -> {kw['relative']:.3f}"
            f" x coverage {kw['coverage']:.3f} = {kw['score']:.3f}"
        )
    if vec := e["vector"]:
        lines = f" -> lines {vec['lines']:.3f}" if vec["lines"] is not None else ""
        parts.append(
            f"vector #{vec['rank']} cosine {vec['cosine']:.3f}{lines} -> {vec['score']:.3f}"
        )
    if e["fused"] is not None:
        parts.append(f"fused {e['fused']:.3f}")
    if e["decay"]:
        parts.append(f"decay x{e['decay']['factor']:.3f} ({e['decay']['date']})")
    if rr := e.get("rerank"):
        parts.append(f"rerank {rr['score']:.3f} (fused rank {rr['fusedRank']})")
    parts.append(f"rank {e['rank']['final']} (by score {e['rank']['byScore']})")
    return " | ".join(parts)
