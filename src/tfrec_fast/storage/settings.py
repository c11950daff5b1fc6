"""What a caller may tune per call: retries, read-ahead, concurrency, the index cache.

The settings travel in ``storage_options`` (the keys of :class:`Settings`, taken out before the
rest goes to fsspec), so every entry point that takes ``storage_options`` takes them, and they
go with a path into DataLoader workers and Ray tasks. With ``filesystem=``, ``storage_options``
may hold these keys only.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple, Union

__all__ = ["Settings", "DEFAULTS", "KEYS", "split_options", "cache_dir"]


@dataclass(frozen=True)
class Settings:
    """Per-call settings of remote reading (all optional in ``storage_options``).

    Attributes
    ----------
    retries : int
        Attempts after the first for a request that failed in a way another attempt may mend
        (a 5xx answer, a dropped connection, a short body). Back-off: ``retry_delay`` times 2 to
        the attempt, jittered (between half and all of it). Backends that retry by themselves
        are not retried on top (see :mod:`tfrec_fast.storage`).
    retry_delay : float
        Seconds before the first retry (before jitter).
    range_size : int
        Bytes per range request when streaming an object front to back.
    read_ahead : int
        Bytes a stream (one object, or a list of them read in order) may hold at once: ranges
        requested, arrived, or being read. The memory bound of streaming.
    concurrency : int
        Requests in flight at once, for streaming and for random access (``get_batch``).
    index_cache : str, bool or None
        Where record counts and indexes of remote objects, keyed by the object's version, are
        kept between processes and runs: a directory; ``None`` for the default
        (``$TFREC_FAST_CACHE_DIR``, else ``$XDG_CACHE_HOME/tfrec_fast`` or
        ``~/.cache/tfrec_fast``); ``False`` for none.
    """

    retries: int = 3
    retry_delay: float = 0.25
    range_size: int = 4 << 20
    read_ahead: int = 64 << 20
    concurrency: int = 32
    index_cache: Union[str, bool, None] = None

    def __post_init__(self):
        for name in ("retries", "range_size", "read_ahead", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if self.retries < 0:
            raise ValueError(f"retries must be 0 or more, not {self.retries}")
        if self.range_size < 1 or self.concurrency < 1:
            raise ValueError("range_size and concurrency must be positive")
        if self.read_ahead < self.range_size:
            raise ValueError(
                f"read_ahead ({self.read_ahead}) must hold at least one range "
                f"(range_size {self.range_size})"
            )
        if not isinstance(self.retry_delay, (int, float)) or self.retry_delay < 0:
            raise ValueError(
                f"retry_delay must be a number of seconds >= 0, not {self.retry_delay!r}"
            )

    @property
    def ranges_in_flight(self) -> int:
        """Range requests a stream keeps going: read_ahead // range_size, at most concurrency."""
        return max(1, min(self.concurrency, self.read_ahead // self.range_size))


DEFAULTS = Settings()
KEYS = frozenset(f.name for f in dataclasses.fields(Settings))


def split_options(options: Optional[Mapping[str, Any]]) -> Tuple[dict, Settings]:
    """Splits ``storage_options`` into fsspec's options and tfrec_fast's Settings.

    Parameters
    ----------
    options : mapping, optional
        ``storage_options`` as given.

    Returns
    -------
    fs_options : dict
        What goes to fsspec.
    settings : Settings
        :data:`DEFAULTS` with the Settings keys given in ``options``.

    Raises
    ------
    TypeError
        A Settings value of the wrong type or out of range.
    ValueError
        A Settings value of the wrong type or out of range.
    """
    options = dict(options or {})
    ours = {key: options.pop(key) for key in list(options) if key in KEYS}
    return options, (dataclasses.replace(DEFAULTS, **ours) if ours else DEFAULTS)


def cache_dir(settings: Settings) -> Optional[str]:
    """The index cache directory of ``settings`` (None: no cache)."""
    where = settings.index_cache
    if where is False or where == "":
        return None
    if isinstance(where, str):
        return where
    env = os.environ.get("TFREC_FAST_CACHE_DIR")
    if env is not None:
        return env or None  # set but empty: no cache
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfrec_fast")
