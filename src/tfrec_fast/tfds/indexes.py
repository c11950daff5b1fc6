"""Record indexes of a dataset's shards, built on first random access and kept for next time.

An index (tfrec_fast.index: one "offset size" line per record) is made by a header-only scan
and written beside the shard as ``<shard>.idx`` (where tfrec_fast's other readers look for
it), or, when the dataset's directory is read-only or ``index_dir`` is given, in a cache
directory (``index_dir``, else ``$TFREC_FAST_CACHE_DIR``, else ``~/.cache/tfrec_fast``)
under a name that encodes the shard's path. An index found there is used only if it still
describes the shard (its records end where the file ends, as many as dataset_info.json says);
otherwise it is made again.
"""

from __future__ import annotations

import hashlib
import os
from typing import Optional, Tuple

import numpy as np

from . import _files
from ..errors import DataLossError

__all__ = ["shard_index", "kept_index", "cache_dir", "check_count"]

Index = Tuple[np.ndarray, np.ndarray]


def cache_dir(index_dir: Optional[str] = None) -> str:
    if index_dir is not None:
        return _files.normalize(index_dir)
    if os.environ.get("TFREC_FAST_CACHE_DIR"):
        return os.environ["TFREC_FAST_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfrec_fast")


def _cached_name(path: str, index_dir: Optional[str]) -> str:
    digest = hashlib.sha256(_files.realpath(path).encode("utf-8", "surrogateescape"))
    return _files.join(cache_dir(index_dir), "index",
                       f"{_files.basename(path)}.{digest.hexdigest()[:16]}.idx")


def _usable(index_path: str, path: str, expected: int) -> Optional[Index]:
    """The index at ``index_path`` if it describes the shard as it is now, else None."""
    try:
        if _files.mtime(index_path) < _files.mtime(path):
            return None
        offsets, sizes = _files.load_index(index_path)
    except (OSError, ValueError):
        return None
    if len(offsets) != expected or (len(offsets) and int(offsets[-1] + sizes[-1]) !=
                                    _files.size(path)):
        return None
    return offsets, sizes


def _candidates(path: str, index_dir: Optional[str]) -> list:
    """Where a shard's index may be kept, in the order they are tried."""
    if _files.is_url(path):  # no place to keep it that could be checked against the shard
        return []
    if index_dir is not None:
        return [_cached_name(path, index_dir)]
    return [path + ".idx", _cached_name(path, index_dir)]


def kept_index(path: str, expected: int, *, index_dir: Optional[str] = None) -> Optional[Index]:
    """``(offsets, sizes)`` of a shard from an index kept earlier that still describes it (as
    many records as dataset_info.json says, ending where the file ends), or None: nothing is
    scanned."""
    for candidate in _candidates(path, index_dir):
        found = _usable(candidate, path, expected)
        if found is not None:
            return found
    return None


def shard_index(path: str, expected: int, *, index_dir: Optional[str] = None) -> Index:
    """``(offsets, sizes)`` of a shard that dataset_info.json says holds ``expected`` records:
    a kept index, or a new one (then kept). A shard holding another number of records raises
    :class:`~tfrec_fast.DataLossError` (reason ``shard_lengths``)."""
    found = kept_index(path, expected, index_dir=index_dir)
    if found is not None:
        return found
    offsets, sizes = _files.create_index(path)
    if len(offsets) != expected:
        end = int(offsets[-1] + sizes[-1]) if len(offsets) else 0
        check_count(path, expected, len(offsets),
                    int(offsets[expected]) if len(offsets) > expected else end)
    for candidate in _candidates(path, index_dir):
        try:
            _files.write_index(candidate, offsets, sizes)
            break
        except OSError:  # read-only here: try the next place (or keep it in memory)
            continue
    return offsets, sizes


def check_count(path: str, expected: int, found: int, offset: int) -> None:
    """A shard must hold the number of records dataset_info.json gives it. ``offset``: where
    the first record beyond ``expected`` starts, or the end of the file if it holds fewer."""
    if found == expected:
        return
    if found < expected:
        detail = (f"dataset_info.json says this shard holds {expected} records, but the file "
                  f"ends after {found}")
        record = found
    else:
        detail = (f"dataset_info.json says this shard holds {expected} records, but the file "
                  "holds more")
        record = expected
    raise DataLossError(detail + " (the shard or dataset_info.json was replaced or cut?)",
                        path=path, record_index=record, offset=offset, reason="shard_lengths")
