"""The embedding queues of a namespace (chunks without a vector of a model; chunks with it but
without their line vectors), and claims on them.

A client claims a batch before embedding it (``FOR NO KEY UPDATE SKIP LOCKED``, then a claim
row with an expiry), so clients syncing the same notes at once never pay for the same text twice; a
client that died mid-batch holds its claims for ``CLAIM_MINUTES`` only.
"""

from __future__ import annotations

from collections.abc import Sequence

from .database import Session

CLAIM_MINUTES = 10
_NO_VECTOR = (
    "NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.chunk_id = c.id AND v.model = %(m)s)"
)
# The second queue: chunks with this model's vector but not yet its line vectors (lines.py).
_NO_LINES = (
    "EXISTS (SELECT 1 FROM memory_vectors v WHERE v.chunk_id = c.id AND v.model = %(m)s) "
    "AND NOT EXISTS (SELECT 1 FROM memory_chunk_lines l "
    "WHERE l.chunk_id = c.id AND l.model = %(m)s)"
)
QUEUES = {"vectors": _NO_VECTOR, "lines": _NO_LINES}


def _claim_key(store: Session, queue: str) -> str:
    """The claims table's model column: the model for vectors, model#lines for its lines."""
    return store.db.model_key if queue == "vectors" else f"{store.db.model_key}#{queue}"


def claim(
    store: Session, limit: int, after: int, queue: str = "vectors"
) -> list[tuple[int, str, str]]:
    """(id, hash, text) of up to ``limit`` chunks of ``queue`` above id ``after`` that no
    other client is embedding, now claimed for this one. Resuming after the last id claimed
    keeps a backfill linear: each call would otherwise walk past every chunk embedded before."""
    while True:
        rows, last = _claim_once(store, limit, after, queue)
        if rows or last is None:
            return rows
        after = last  # every chunk picked went to another client meanwhile: look further on


def _claim_once(
    store: Session, limit: int, after: int, queue: str
) -> tuple[list[tuple[int, str, str]], int | None]:
    """The chunks claimed, and the last id looked at (None: nothing left to look at)."""
    args = {
        "ns": store.ns,
        "m": store.db.model_key,
        "k": _claim_key(store, queue),
        "me": store.db.claimant,
        "n": limit,
        "after": after,
        "mins": CLAIM_MINUTES,
    }
    # A claim is taken over only when it is this client's or has expired: ON CONFLICT's row
    # lock sees another client's claim committed after this statement's snapshot was taken.
    picked = store.q(
        f"""WITH picked AS (
             SELECT c.id, c.hash, c.text FROM memory_chunks c
             WHERE c.ns = %(ns)s AND c.id > %(after)s AND {QUEUES[queue]}
               AND NOT EXISTS (SELECT 1 FROM memory_embed_claims k
                               WHERE k.chunk_id = c.id AND k.model = %(k)s
                                 AND k.owner <> %(me)s AND k.until > now())
             ORDER BY c.id LIMIT %(n)s FOR NO KEY UPDATE OF c SKIP LOCKED),
           claimed AS (
             INSERT INTO memory_embed_claims (chunk_id, model, owner, until)
             SELECT id, %(k)s, %(me)s, now() + make_interval(mins => %(mins)s) FROM picked
             ON CONFLICT (chunk_id, model) DO UPDATE
             SET owner = excluded.owner, until = excluded.until
             WHERE memory_embed_claims.owner = excluded.owner
                OR memory_embed_claims.until <= now()
             RETURNING chunk_id)
           SELECT p.id, p.hash, p.text, k.chunk_id IS NOT NULL
           FROM picked p LEFT JOIN claimed k ON k.chunk_id = p.id ORDER BY p.id""",
        args,
    ).fetchall()
    if not picked:
        return [], None
    mine = [r[0] for r in picked if r[3]]
    # A fresh snapshot: a client that finished one of these and let go of its claim after
    # the statement above began is not paid twice.
    live = set()
    if mine:
        live = {
            r[0]
            for r in store.q(
                f"SELECT c.id FROM memory_chunks c WHERE c.ns = %(ns)s AND c.id = ANY(%(ids)s) "
                f"AND {QUEUES[queue]}",
                {**args, "ids": mine},
            )
        }
        done = [i for i in mine if i not in live]
        if done:
            release(store, done, queue)
    return [(r[0], r[1], r[2]) for r in picked if r[0] in live], picked[-1][0]


def release(store: Session, ids: Sequence[int], queue: str = "vectors") -> None:
    """Let go of this client's claims on these chunks (never another client's)."""
    store.q(
        "DELETE FROM memory_embed_claims WHERE chunk_id = ANY(%s) AND model = %s AND owner = %s",
        (list(ids), _claim_key(store, queue), store.db.claimant),
    )


def still_pending(store: Session, rows: Sequence[tuple[int, str]]) -> set[int]:
    """Of (id, hash) pairs read earlier, those still waiting for that text's vector."""
    if not rows:
        return set()
    found = store.q(
        f"SELECT c.id, c.hash FROM memory_chunks c WHERE c.ns = %(ns)s AND c.id = ANY(%(ids)s) "
        f"AND {_NO_VECTOR}",
        {"ns": store.ns, "ids": [cid for cid, _ in rows], "m": store.db.model_key},
    )
    wanted = dict(rows)
    return {cid for cid, h in found if wanted.get(cid) == h}


def count(store: Session, queue: str = "vectors") -> int:
    row = store.q(
        f"SELECT count(*) FROM memory_chunks c WHERE c.ns = %(ns)s AND {QUEUES[queue]}",
        {"ns": store.ns, "m": store.db.model_key},
    ).fetchone()
    return int(row[0]) if row else 0
