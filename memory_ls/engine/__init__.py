"""The memory engine: one per workspace folder (see ``memory_engine.MemoryEngine``)."""

from .index_files import default_index_path, index_path_for
from .memory_engine import MemoryEngine

__all__ = ["MemoryEngine", "default_index_path", "index_path_for"]
