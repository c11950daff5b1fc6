"""Every file access of tfrec_fast.tfds, in one place, through the storage layer.

A dataset directory is a :class:`~tfrec_fast.storage.Location`: a local directory, a URL of
any fsspec protocol (``gs://``, ``s3://``, ``https://``, ... with ``storage_options``) or a
path on a ``filesystem`` (see :mod:`tfrec_fast.storage`). The rest of tfrec_fast.tfds asks this
module (never ``os.path`` or ``open``) for a directory's files, a file's bytes, and readers and
indexes of a shard's records, so what is read, and from where, is decided here alone.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, Optional, Tuple

import numpy as np

from .. import index as _index
from ..index import IndexedTFRecordReader
from ..records import TFRecordReader
from ..storage import Location, ReadAhead, is_url, resolve
from ..storage.cache import peek

__all__ = [
    "directory",
    "join",
    "listing",
    "read_bytes",
    "open_records",
    "open_indexed",
    "create_index",
    "load_index",
    "cached_index",
    "write_index",
]

Index = Tuple[np.ndarray, np.ndarray]


def directory(path, storage_options=None, filesystem=None) -> Location:
    """The Location of a directory given as a path (``~`` expanded), a URL or a Location."""
    if isinstance(path, Location):
        return path
    text = os.fsdecode(os.fspath(path))
    if filesystem is None and not is_url(text):
        text = os.path.expanduser(text)
    return resolve(text, storage_options, filesystem)


def join(location: Location, *names: str) -> Location:
    for name in names:
        location = location.join(name)
    return location


def listing(location: Location) -> Optional[Dict[str, Location]]:
    """The files of a directory by name: one listing, which for a store also gives each file's
    size and version (the reads that follow ask for that version). None when the store lists
    nothing there (an HTTP server without directory pages, a directory that does not exist):
    then the caller asks for each file it needs."""
    store = location.store
    if location.os_path is None and not store.has_magic(location.path):
        found = store.glob(store.join(location.path.rstrip("/"), "*"))
        out = {store.basename(path): Location(store, path, stat=stat) for path, stat in found}
    else:
        out = {name: location.join(name) for name in location.listdir()}
    return out or None


def read_bytes(location: Location) -> bytes:
    """A whole (small) file: metadata, label names, an index."""
    return location.read()


def open_records(location: Location, *, verify: bool = True, share: int = 1) -> TFRecordReader:
    """A reader of a shard's records from its start. A shard of a store is streamed with
    read-ahead; ``share``: how many shards are read at once (TFDS's interleave), which share
    the ``read_ahead`` memory bound of the store's settings."""
    settings = getattr(location.store, "settings", None)
    if location.os_path is None and settings is not None and share > 1:
        own = dataclasses.replace(
            settings, read_ahead=max(settings.range_size, settings.read_ahead // share)
        )
        stream = ReadAhead([location], settings=own).open(0, owner=True)
        return TFRecordReader._of_stream(location, stream, None, verify=verify)
    return TFRecordReader(location, verify=verify)


def open_indexed(location: Location, index: Index, *, verify: bool = True) -> IndexedTFRecordReader:
    """Random access to a shard's records through its index ``(offsets, sizes)``: ranges of
    only the records asked for, for a shard of a store."""
    return IndexedTFRecordReader(location, index, verify=verify)


def create_index(location: Location) -> Index:
    """A shard's index, made by a header-only scan (a shard of a store: streamed once, and kept
    in the index cache by the object's version)."""
    return _index.create_index(location)


def cached_index(location: Location) -> Optional[Index]:
    """The index of a shard of a store that the index cache holds for its version, or None
    (nothing is read)."""
    both = peek(location, "index")
    return None if both is None else (both[0], both[1])


def load_index(location: Location) -> Index:
    """An index file (``<shard>.idx``); of a store: read once per version of it."""
    return _index.load_index(location)


def write_index(location: Location, offsets: np.ndarray, sizes: np.ndarray) -> None:
    """Writes an index file, making its directory (OSError where it cannot be written)."""
    location.parent.makedirs()
    _index.write_index(location, offsets, sizes)
