"""The CLI's one-line progress bar (indexing, embedding) on stderr."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """A one-line progress bar on a terminal; silent when stderr is not a TTY."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, done: int, total: int, what: str) -> None:
        if not self.enabled or (time.monotonic() - self.last < 0.1 and done < total):
            return
        self.last = time.monotonic()
        width = 30
        filled = int(width * done / total) if total else width
        sys.stderr.write(f"\r{what:<10} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()
