"""``memory-ls status`` as text: the engine's status (``MemoryEngine.status()``), a line each."""

from __future__ import annotations

from typing import Any


def print_status(st: dict[str, Any]) -> None:
    prov = st["provider"]
    print(f"workspace   {st['root']}")
    print(f"index       {st['indexPath']}")
    team = st["store"]
    if team["backend"] == "postgres":
        print(f"team index  {team['url']}  namespace {team['namespace']}")
        answering = team["answering"]
        if team["problem"]:
            answering += f": {team['problem']}"
        print(f"answering   {answering}")
        if "server" in team:
            srv = team["server"]
            size = sum(srv["searchIndexesMB"].values())
            indexes = f"{size:.0f} MB" if srv["searchIndexesMB"] else "none found"
            print(f"server      shared_buffers {srv['sharedBuffersMB']:.0f} MB, indexes {indexes}")
            if srv["hint"]:
                print(f"hint        {srv['hint']}")
    print(f"files       {st['files']}  chunks {st['chunks']}  {st['chunksBySource']}")
    print(f"mode        {st['mode']}" + (f"  ({st['providerReason']})" if not prov else ""))
    if prov:
        weights = f", {prov['weights']}" if "weights" in prov else ""
        print(f"provider    {prov['id']} {prov['model']} ({prov['dims']} dims{weights})")
    print(
        f"pending     {st['pendingEmbeddings']} chunks without vectors, "
        f"{st['pendingLineVectors']} without line vectors"
    )
    print(f"vectors     {st['vectorBackend']}  sqlite-vec: {st['sqliteVec']}")
    print(f"cache       {st['cacheEntries']} embeddings")
    rr, rs = st["reranker"], st["rerankerStats"]
    if rr:
        print(
            f"rerank      {rr['id']} {rr['model']} (top {rr['topN']}): {rs['reranked']} "
            f"reranked, {rs['fallbacks']} in fused order, {rs['requests']} requests"
        )
    elif st["rerankerReason"]:
        print(f"rerank      off ({st['rerankerReason']})")
    for problem in st["rootProblems"]:
        print(f"problem     {problem}")
    if st["needsRebuild"]:
        print("note        settings changed: the next `memory-ls index` rebuilds the index")
