"""The memory engine: one per workspace folder (see ``facade.MemoryEngine``)."""

from .facade import MemoryEngine
from .index_files import default_index_path, index_path_for

__all__ = ["MemoryEngine", "default_index_path", "index_path_for"]
