"""Vector scores that mean the same for every model and corpus: "how strongly this stands out".

A raw cosine means different things for different models (all-MiniLM-L6-v2 gives paraphrases
0.2-0.5; E5 models give unrelated text 0.7-0.8), so no fixed ``minScore`` can suit them all.
Each query's similarities are therefore measured against that query's own background: the
similarities to every chunk of the corpus (the in-memory matrix computes them anyway) pooled
with those to a fixed set of reference passages about unrelated everyday topics (so a memory
of three notes still has a background). A similarity ``z`` standard deviations above the
background mean scores ``1 / (1 + exp(-SLOPE * (z - MIDPOINT)))``: about 0.5 for a chunk that
stands out by MIDPOINT deviations, near 0 for one that looks like the background. The map is
monotone per query, so the vector side's order is the cosine order.

How these scores enter the fusion depends on the model (``policy``): they replace the cosines
of a model whose cosines are compressed; for any other model the raw fusion keeps its order
and the best calibrated score only lifts the scale (``lift``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

# Fitted on the shared dev sets with bench/eval.py (docs/concepts/search.md,
# docs/evaluation/retrieval.md).
MIDPOINT = 2.5
SLOPE = 1.6
MIN_STD = 1e-3  # a background of identical vectors must not divide by zero
# ``query.calibrate = "auto"`` calibrates a model whose unrelated reference passages sit this
# close on average: multilingual-e5-small 0.77, all-MiniLM-L6-v2 0.07 (measured here).
COMPRESSED_ABOVE = 0.4
# The "lift" policy's bar grows with the background's size n: the largest of n unrelated
# similarities grows like ln n, as the upper tail of cosines is about exponential, not Gaussian
# (measured: the 95th percentile of no-answer queries' best z is 3.2 at n ~ 110, 4.0 at 160,
# 5.0 at 1,400 and 6.5 at 7,500). Fitted with bench/eval.py on the dev sets
# (docs/evaluation/retrieval.md).
LIFT_BASE = 0.8
LIFT_PER_LN = 0.6

# Reference passages: everyday topics, several languages, none about software or work notes
# in particular, each a few sentences long like a memory chunk.
REFERENCE_PASSAGES = (
    "The bakery on the corner sells sourdough on Saturdays. Arrive early, it is gone by ten.",
    "We hiked along the ridge until the fog rolled in, then took the lower trail back.",
    "Grandma's recipe calls for two cups of flour, a pinch of salt and cold butter.",
    "The museum's new wing shows ceramics from the Song dynasty and modern glass art.",
    "Feed the cat twice a day; she likes the fish flavour and fresh water in the blue bowl.",
    "The train to the coast leaves every hour; the ride takes about ninety minutes.",
    "Tomatoes need full sun and regular watering; pinch off the side shoots in July.",
    "The choir rehearses on Thursday evenings in the church hall behind the market.",
    "Our football team lost two to one after a penalty in the last minute of the match.",
    "The lighthouse was built in 1874 and still guides fishing boats into the harbour.",
    "Remember to renew the passport before the trip; the office needs a recent photo.",
    "Birch trees turn yellow early in autumn, long before the oaks change colour.",
    "She painted the kitchen a pale green and hung new curtains over the window.",
    "The novel follows three sisters who inherit a vineyard in the south of France.",
    "Low tide is at four in the afternoon, the best time to look for crabs in the rocks.",
    "A thunderstorm knocked out the power for an hour; we played cards by candlelight.",
    "The violin needs new strings and the bow should be rehaired before the concert.",
    "Snow closed the mountain pass, so the bus went the long way through the valley.",
    "He collects old maps, especially sea charts from the eighteenth century.",
    "The farmers' market has strawberries in June and apples from September on.",
    "Yoga class moved to the community centre; bring your own mat and a towel.",
    "The wedding reception was held in a barn decorated with lanterns and wildflowers.",
    "Bees swarmed in the old apple tree; a beekeeper came to collect them in a box.",
    "The children built a sandcastle with towers, a moat and a bridge made of driftwood.",
    "周末我们去公园散步，看到很多人在湖边钓鱼和放风筝。",
    "这家餐馆的饺子很好吃，特别是猪肉白菜馅的，价格也不贵。",
    "春天到了，院子里的桃花都开了，小鸟在树上唱歌。",
    "明日は雨が降るそうなので、傘を持って出かけたほうがいいです。",
    "駅前の本屋で新しい料理の本を買いました。写真がとてもきれいです。",
    "주말에 가족과 함께 바닷가에 가서 조개를 줍고 회를 먹었다.",
    "El mercado del pueblo abre los domingos y venden queso, pan y aceitunas.",
    "A praia estava cheia no domingo; comemos sardinhas assadas perto do porto.",
)


@dataclass(frozen=True)
class Background:
    """Mean and standard deviation of one query's similarities to unrelated text."""

    mean: float
    std: float
    n: int = 0  # similarities pooled

    def score(self, similarity: float, midpoint: float = MIDPOINT) -> float:
        z = (similarity - self.mean) / self.std
        return 1.0 / (1.0 + math.exp(-SLOPE * (z - midpoint)))

    def lift_score(self, similarity: float) -> float:
        """The calibrated score under the "lift" policy: the bar grows with ln n."""
        return self.score(similarity, LIFT_BASE + LIFT_PER_LN * math.log(max(self.n, 2)))


@dataclass(frozen=True)
class Moments:
    """Count, mean and mean of squares of a set of similarities (cheap to pool)."""

    n: int
    mean: float
    mean_sq: float

    @classmethod
    def of(cls, sims: np.ndarray) -> Moments:
        if len(sims) == 0:
            return cls(0, 0.0, 0.0)
        s = sims.astype(np.float64)
        return cls(len(s), float(s.mean()), float((s * s).mean()))


def background(*parts: Moments | None) -> Background | None:
    """The pooled background of several sets of similarities; None when there are none."""
    have = [m for m in parts if m is not None and m.n > 0]
    n = sum(m.n for m in have)
    if n < 2:
        return None
    mean = sum(m.n * m.mean for m in have) / n
    var = sum(m.n * m.mean_sq for m in have) / n - mean * mean
    return Background(mean, max(math.sqrt(max(var, 0.0)), MIN_STD), n)


def compressed(reference: np.ndarray) -> bool:
    """Whether the model gives unrelated text high cosines (the reference passages' mean)."""
    n = len(reference)
    if n < 2:
        return False
    gram = reference @ reference.T
    return float((gram.sum() - np.trace(gram)) / (n * (n - 1))) >= COMPRESSED_ABOVE


Policy = Literal["scores", "lift", "off"]


def policy(mode: str, reference: np.ndarray | None) -> Policy:
    """How ``query.calibrate`` enters the scores: "scores", "lift" or "off".

    "scores" replaces each cosine by its calibrated score ("on", or "auto" for a model whose
    cosines are compressed, where raw cosines would let everything pass ``minScore``).
    "lift" ("auto" for any other model) keeps the raw fusion, whose order measured best for
    such models, and lets the best candidate's calibrated score raise the whole list when it
    is higher (``lift``): a chunk that stands out by meaning answers even when its raw cosine
    is modest, as paraphrases are with all-MiniLM-L6-v2; its bar grows with the size of the
    background (``Background.lift_score``), as the best of many unrelated chunks stands out
    further by chance. "off": raw cosines only."""
    if mode == "on":
        return "scores"
    if mode != "auto" or reference is None:
        return "off"
    return "scores" if compressed(reference) else "lift"


def lift(raw: Sequence[float], calibrated: Sequence[float]) -> float:
    """The factor (>= 1) that takes the best raw score to the best calibrated one.

    Multiplying every score of a query by one factor keeps the raw order; only the scale that
    ``minScore`` reads changes, so the best hit carries the calibrated confidence."""
    top = max(raw, default=0.0)
    best = max(calibrated, default=0.0)
    return best / top if top > 0 and best > top else 1.0
