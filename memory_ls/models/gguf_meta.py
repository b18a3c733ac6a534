"""A GGUF file's metadata and tensor names, read without the ``gguf`` package.

``gguf.GGUFReader`` builds every field of a file before answering, the tokenizer's vocabulary
included: 0.8 s for all-MiniLM-L6-v2's 30,522 pieces, on every start of a process that opens
the model (a CLI search took 1.2 s, most of it that), and several seconds for a 250,000-piece
vocabulary. Here the wanted keys are decoded and everything else is stepped over, stopping at
the last wanted key. Layout (GGUF v2 and v3, either byte order): magic, version, tensor count,
key count, the key/value pairs, then one (name, dims, type, offset) record per tensor.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"
VERSIONS = (2, 3)
_STRING, _ARRAY = 8, 9
# Value type -> struct code; strings and arrays are read by _Cursor.
_SCALARS = dict(enumerate("BbHhIif?")) | {10: "Q", 11: "q", 12: "d"}
_MAX_DIMS = 8


class GgufError(ValueError):
    """The file is not a GGUF this reader understands, or it is truncated."""


class _Cursor:
    def __init__(self, buf: mmap.mmap):
        self.buf, self.pos, self.order = buf, 0, "<"

    def take(self, code: str) -> Any:
        fmt = self.order + code
        try:
            (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        except struct.error:
            raise GgufError("the file is truncated") from None
        self.pos += struct.calcsize(fmt)
        return value

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise GgufError("the file is truncated")
        self.pos += n

    def string(self) -> str:
        n = self.take("Q")
        start = self.pos
        self.skip(n)
        return self.buf[start : self.pos].decode("utf-8", errors="replace")

    def value(self, vtype: int, keep: bool) -> Any:
        """The value of type ``vtype`` (None when not ``keep``: stepped over)."""
        if vtype in _SCALARS:
            if keep:
                return self.take(_SCALARS[vtype])
            self.skip(struct.calcsize(_SCALARS[vtype]))
            return None
        if vtype == _STRING:
            if keep:
                return self.string()
            self.skip(self.take("Q"))
            return None
        if vtype == _ARRAY:
            item, n = self.take("I"), self.take("Q")
            if item in _SCALARS and not keep:
                self.skip(n * struct.calcsize(_SCALARS[item]))
                return None
            if n > len(self.buf) - self.pos:  # every item takes at least one byte
                raise GgufError("the file is truncated")
            items = [self.value(item, keep) for _ in range(n)]
            return items if keep else None
        raise GgufError(f"unknown value type {vtype} at byte {self.pos}")


@contextmanager
def _open(path: Path) -> Iterator[tuple[_Cursor, int, int]]:
    """A cursor past the header, the tensor count and the key count."""
    with path.open("rb") as fh:
        try:
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise GgufError("the file is empty") from None
    with buf:
        yield _header(_Cursor(buf))


def _header(cur: _Cursor) -> tuple[_Cursor, int, int]:
    buf = cur.buf
    if buf[:4] != MAGIC:
        raise GgufError("not a GGUF file (bad magic bytes)")
    cur.skip(4)
    version = cur.take("I")
    if version & 0xFFFF == 0:  # written on a machine of the other byte order
        cur.order = ">"
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in VERSIONS:
        raise GgufError(f"GGUF version {version} (this reader knows {VERSIONS})")
    return cur, cur.take("Q"), cur.take("Q")


def metadata(path: Path, keys: Collection[str]) -> dict[str, Any]:
    """The values of ``keys`` that the file holds (str, int, float, bool or a list of them);
    ``GgufError`` when it is no readable GGUF, OSError when it cannot be read."""
    wanted = set(keys)
    found: dict[str, Any] = {}
    with _open(path) as (cur, _, n_keys):
        for _ in range(n_keys):
            if len(found) == len(wanted):
                break
            key = cur.string()
            keep = key in wanted
            value = cur.value(cur.take("I"), keep)
            if keep:
                found[key] = value
    return found


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the data section


def check_complete(path: Path) -> list[str]:
    """The names of the file's tensors, in the file's order; ``GgufError`` unless the file
    holds every byte they need (a download or copy cut short parses, then fails in llama.cpp
    with a message that does not say so)."""
    import gguf  # its table of block sizes; only on this path (40 ms to import)

    tensors, data_start = _tensors(path)
    end = data_start
    for t in tensors:
        try:
            block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(t.ggml_type)]
        except (ValueError, KeyError):
            break  # a type newer than the gguf package: llama.cpp will judge
        end = max(end, data_start + t.offset + math.prod(t.shape) // block * size)
    if end > path.stat().st_size:
        raise GgufError(f"the file is truncated: its tensors need {end} bytes")
    return [t.name for t in tensors]


def _tensors(path: Path) -> tuple[list[Tensor], int]:
    """The file's tensors and where their data starts."""
    out = []
    with _open(path) as (cur, n_tensors, n_keys):
        align = 32  # GGUF's default
        for _ in range(n_keys):
            key = cur.string()
            value = cur.value(cur.take("I"), key == "general.alignment")
            if key == "general.alignment" and isinstance(value, int) and value > 0:
                align = value
        for _ in range(n_tensors):
            name = cur.string()
            dims = cur.take("I")
            if dims > _MAX_DIMS:
                raise GgufError(f"tensor {name!r} has {dims} dimensions")
            shape = tuple(cur.take("Q") for _ in range(dims))
            out.append(Tensor(name, shape, cur.take("I"), cur.take("Q")))
        start = -(-cur.pos // align) * align
    return out, start
