"""Record indexes of a dataset's shards, built on first random access and kept for next time.

An index (tfrec_fast.index: one "offset size" line per record) describes where each record of a
shard starts. Where it is kept depends on where the shard is:

- a local shard: made by a header-only scan and written beside the shard as ``<shard>.idx``
  (where tfrec_fast's other readers look for it), or, when the dataset's directory is
  read-only or ``index_dir`` is given, in a cache directory (``index_dir``, else
  ``$TFREC_FAST_CACHE_DIR``, else ``~/.cache/tfrec_fast``) under a name that encodes the
  shard's path; one found there is used only if it is newer than the shard;
- a shard of a store (``gs://``, ``s3://``, ...): a ``<shard>.idx`` beside it is read (once per
  version of it); otherwise the shard is streamed once and its index kept in the storage layer's
  index cache, keyed by the shard's version (:mod:`tfrec_fast.storage.cache`), for every process
  of the machine and the next runs. Nothing is written into the store.

Either way an index is used only if it still describes the shard: as many records as
dataset_info.json says, ending where the shard ends. Otherwise it is made again.
"""

from __future__ import annotations

import hashlib
import os
from typing import Optional, Tuple

import numpy as np

from ..errors import DataLossError
from ..storage import Location
from . import _files

__all__ = ["shard_index", "kept_index", "cache_dir", "check_count"]

Index = Tuple[np.ndarray, np.ndarray]


def cache_dir(index_dir=None) -> str:
    """Where indexes of local shards are kept when they cannot be written beside them."""
    if index_dir is not None:
        return os.path.expanduser(os.fspath(index_dir))
    if os.environ.get("TFREC_FAST_CACHE_DIR"):
        return os.environ["TFREC_FAST_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tfrec_fast")


def _cached_name(path: str, index_dir) -> Location:
    digest = hashlib.sha256(os.path.realpath(path).encode("utf-8", "surrogateescape"))
    return _files.directory(
        os.path.join(
            cache_dir(index_dir), "index", f"{os.path.basename(path)}.{digest.hexdigest()[:16]}.idx"
        )
    )


def _describes(index: Index, shard: Location, expected: int) -> bool:
    """Whether an index holds ``expected`` records ending where the shard ends."""
    offsets, sizes = index
    if len(offsets) != expected:
        return False
    return not len(offsets) or int(offsets[-1] + sizes[-1]) == shard.size()


def _local_candidates(shard: str, index_dir) -> list:
    """Where a local shard's index may be kept, in the order they are tried."""
    if index_dir is not None:
        return [_cached_name(shard, index_dir)]
    return [_files.directory(shard + ".idx"), _cached_name(shard, index_dir)]


def _kept_local(shard: Location, path: str, expected: int, index_dir) -> Optional[Index]:
    for candidate in _local_candidates(path, index_dir):
        try:
            if os.path.getmtime(candidate.path) < os.path.getmtime(path):
                continue  # older than the shard: made for what was there before
            index = _files.load_index(candidate)
            if _describes(index, shard, expected):
                return index
        except (OSError, ValueError):
            continue
    return None


def _kept_remote(shard: Location, expected: int, beside: Optional[Location]) -> Optional[Index]:
    found = []
    if beside is not None:
        try:
            found.append(_files.load_index(beside))
        except (OSError, ValueError):
            pass  # not there (any more), or not an index: the cache, or a new one
    cached = _files.cached_index(shard)
    if cached is not None:
        found.append(cached)
    for index in found:
        if _describes(index, shard, expected):
            return index
    return None


def kept_index(
    shard: Location, expected: int, *, index_dir=None, beside: Optional[Location] = None
) -> Optional[Index]:
    """``(offsets, sizes)`` of a shard from an index kept earlier that still describes it (as
    many records as dataset_info.json says, ending where the file ends), or None: no shard is
    scanned. ``beside``: for a shard of a store, the ``<shard>.idx`` its directory's listing
    holds (None: there is none)."""
    if shard.os_path is not None:
        return _kept_local(shard, shard.os_path, expected, index_dir)
    return _kept_remote(shard, expected, beside)


def shard_index(
    shard: Location, expected: int, *, index_dir=None, beside: Optional[Location] = None
) -> Index:
    """``(offsets, sizes)`` of a shard that dataset_info.json says holds ``expected`` records:
    a kept index, or a new one (then kept). A shard holding another number of records raises
    :class:`~tfrec_fast.DataLossError` (reason ``shard_lengths``)."""
    found = kept_index(shard, expected, index_dir=index_dir, beside=beside)
    if found is not None:
        return found
    offsets, sizes = _files.create_index(shard)  # (of a store: kept in the index cache)
    if len(offsets) != expected:
        end = int(offsets[-1] + sizes[-1]) if len(offsets) else 0
        check_count(
            shard.name,
            expected,
            len(offsets),
            int(offsets[expected]) if len(offsets) > expected else end,
        )
    path = shard.os_path
    if path is not None:
        for candidate in _local_candidates(path, index_dir):
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
        detail = (
            f"dataset_info.json says this shard holds {expected} records, but the file "
            f"ends after {found}"
        )
        record = found
    else:
        detail = (
            f"dataset_info.json says this shard holds {expected} records, but the file holds more"
        )
        record = expected
    raise DataLossError(
        detail + " (the shard or dataset_info.json was replaced or cut?)",
        path=path,
        record_index=record,
        offset=offset,
        reason="shard_lengths",
    )
