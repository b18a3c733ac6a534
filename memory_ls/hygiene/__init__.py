"""Memory hygiene: checks over what the index already holds (each memory file's lines, from
its chunks, and the line vectors when there are any), each a plain function with a stable
code and a severity the settings choose: ``duplicate``, ``conflict``, ``load-cap``, ``expired``,
``front-matter``, ``orphan``. A consumer of the index: it reads, never writes, and never
changes how a file is indexed."""

from .checks import caps_of
from .findings import CODES, SEVERITY_RANK, Finding, Related, at_or_above
from .incremental import Checker
from .run import check_draft, check_index, severities

__all__ = [
    "CODES",
    "Checker",
    "SEVERITY_RANK",
    "Finding",
    "Related",
    "at_or_above",
    "caps_of",
    "check_draft",
    "check_index",
    "severities",
]
