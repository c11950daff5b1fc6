"""One optional tqdm progress bar for the command line and the converters."""

from __future__ import annotations

import sys
from typing import Optional


class Progress:
    """A tqdm bar on stderr: on when asked, or by default when stderr is a terminal; silent
    when tqdm (the ``progress`` extra) is not installed. Counts ``unit`` (bytes are scaled)."""

    def __init__(self, total: int, desc: str, unit: str = "rec", enabled: Optional[bool] = None):
        self.bar = None
        if not (sys.stderr.isatty() if enabled is None else enabled):
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return

        class Bar(tqdm):
            monitor_interval = 0  # no monitor thread: worker processes may then start by fork

        self.bar = Bar(
            total=total, desc=desc, unit=unit, unit_scale=unit == "B", file=sys.stderr, leave=False
        )

    def advance(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
