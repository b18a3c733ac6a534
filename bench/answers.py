"""Does a search answer? Empty answers at the shipped defaults, and queries with no answer.

Two checks for bench/eval.py (issue: "search that answers"):
- an answerable query (a relevant file in the top 10 at minScore 0) must not come back empty
  at the shipped defaults (maxResults and minScore as in Settings());
- a query with no answer in the workspace (words that occur nowhere in it, or a topic it does
  not cover) must come back empty or with every score in the weak band (< WEAK_BELOW).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from memory_ls.search.fusion import WEAK_BELOW

# Topics none of the shared sets is about (personal chats, science abstracts, Wikipedia
# paragraphs): some share a word with a corpus, which is the point.
OFF_TOPIC = (
    "how do I repot an orchid without damaging the roots",
    "what is the torque spec for a bicycle crank bolt",
    "recipe for a vegan lemon meringue pie",
    "when does the ferry to the outer islands run in winter",
    "how to descale an espresso machine with citric acid",
    "rules of the card game skat for three players",
    "what tyre pressure for a road bike with 28 mm tyres",
    "how long to cure a cast iron skillet in the oven",
    "best knots for tying a sailboat to a mooring buoy",
    "how to teach a parrot to whistle a tune",
    "which filament temperature for printing PETG",
    "how to remove red wine stains from a wool carpet",
    "怎么给兰花换盆才不会伤到根",
    "自行车曲柄螺丝的扭矩是多少",
    "如何用柠檬酸给咖啡机除垢",
    "冬天去外岛的渡轮几点开",
    "怎样教鹦鹉吹口哨",
    "羊毛地毯上的红酒渍怎么去掉",
)
# Rare words to pair into queries when the workspace never uses them.
RARE_WORDS = (
    "zeppelin", "xylophone", "kumquat", "narwhal", "obsidian", "trombone", "platypus",
    "quinoa", "yodel", "gazpacho", "marzipan", "sextant", "ocarina", "tamarind", "wombat",
    "zither", "kohlrabi", "armadillo", "bagpipe", "origami", "chinchilla", "samovar",
    "tuba", "meringue", "axolotl", "harpsichord", "fennel", "ukulele",
)  # fmt: skip
_WORD = re.compile(r"\w+")


def no_answer_queries(texts: list[str]) -> list[tuple[str, str]]:
    """(kind, query) pairs for one workspace: "absent words" and "off-topic" questions."""
    vocab = {w.lower() for t in texts for w in _WORD.findall(t)}
    absent = [w for w in RARE_WORDS if w not in vocab]
    pairs = [f"{a} {b}" for a, b in zip(absent[::2], absent[1::2], strict=False)]
    return [("absent words", q) for q in pairs] + [("off-topic", q) for q in OFF_TOPIC]


@dataclass
class AnswerStats:
    answerable: int = 0  # queries with a relevant file in the top 10 at minScore 0
    empty: int = 0  # ... of which came back empty at the shipped defaults
    default_rows: list[dict[str, Any]] = field(default_factory=list)  # metrics at defaults
    no_answer: dict[str, list[int]] = field(default_factory=dict)  # kind -> [quiet, total]

    def add_query(self, at_zero: dict[str, Any], at_default: dict[str, Any], empty: bool) -> None:
        self.default_rows.append(at_default)
        if at_zero["MRR@10"] > 0:
            self.answerable += 1
            self.empty += int(empty)

    def add_no_answer(self, kind: str, scores: list[float]) -> None:
        quiet, total = self.no_answer.setdefault(kind, [0, 0])
        self.no_answer[kind] = [quiet + int(all(s < WEAK_BELOW for s in scores)), total + 1]

    def to_json(self, aggregate: Any) -> dict[str, Any]:
        quiet = sum(q for q, _ in self.no_answer.values())
        total = sum(t for _, t in self.no_answer.values())
        return {
            "answerable": self.answerable,
            "emptyAtDefaults": self.empty,
            "emptyRate": self.empty / self.answerable if self.answerable else None,
            "defaults": aggregate(self.default_rows) if self.default_rows else None,
            "noAnswer": {k: {"quiet": q, "total": t} for k, (q, t) in self.no_answer.items()},
            "noAnswerQuietRate": quiet / total if total else None,
        }
