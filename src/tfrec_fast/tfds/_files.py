"""Every file access of tfrec_fast.tfds, in one place: metadata, shards and their indexes.

The rest of tfrec_fast.tfds asks this module (never ``os.path`` or ``open``) whether a path
exists, what a directory holds, for a file's text, and for readers of its records, so where a
dataset can live is decided here alone. Today that is the local file system: a path given as
a URL (``gs://...``, ``s3://...``) raises :class:`URLNotSupportedError` up front, naming it.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import List, Tuple

import numpy as np

from .. import index as _index
from ..index import IndexedTFRecordReader
from ..records import TFRecordReader

__all__ = ["URLNotSupportedError", "is_url", "normalize", "join", "basename", "dirname",
           "exists", "isfile", "isdir", "listdir", "read_bytes", "read_text", "size", "mtime",
           "makedirs", "realpath", "open_records", "open_indexed", "create_index", "load_index",
           "write_index"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

Index = Tuple[np.ndarray, np.ndarray]


class URLNotSupportedError(ValueError):
    """A dataset path given as a URL: tfrec_fast.tfds reads local directories only, for now.

    Attributes: ``url``."""

    def __init__(self, url: str):
        self.url = url
        super().__init__(
            f"{url}: tfrec_fast.tfds reads TFDS datasets from local directories only in this "
            "version (URLs are not yet supported); copy the prepared directory to a local disk "
            "(e.g. `gsutil -m cp -r` or `gcloud storage cp -r`) and open it there")

    def __reduce__(self):
        return type(self), (self.url,)


def is_url(path: str) -> bool:
    return bool(_URL.match(path))


def _local(path: str) -> str:
    if is_url(path):
        raise URLNotSupportedError(path)
    return path


def normalize(path) -> str:
    """A path as the module takes it: ``os.fspath``, ``~`` expanded (URLs left as they are)."""
    path = os.fspath(path)
    return path if is_url(path) else os.path.expanduser(path)


def join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if is_url(base) else os.path.join(base, *parts)


def basename(path: str) -> str:
    return posixpath.basename(path) if is_url(path) else os.path.basename(path)


def dirname(path: str) -> str:
    return posixpath.dirname(path) if is_url(path) else os.path.dirname(path)


def exists(path: str) -> bool:
    return os.path.exists(_local(path))


def isfile(path: str) -> bool:
    return os.path.isfile(_local(path))


def isdir(path: str) -> bool:
    return os.path.isdir(_local(path))


def listdir(path: str) -> List[str]:
    """The names in a directory (OSError when it is not one)."""
    return os.listdir(_local(path))


def read_bytes(path: str) -> bytes:
    with open(_local(path), "rb") as f:
        return f.read()


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def size(path: str) -> int:
    return os.path.getsize(_local(path))


def mtime(path: str) -> float:
    return os.path.getmtime(_local(path))


def makedirs(path: str) -> None:
    os.makedirs(_local(path), exist_ok=True)


def realpath(path: str) -> str:
    return os.path.realpath(_local(path))


def open_records(path: str, *, verify: bool = True) -> TFRecordReader:
    """A reader of a shard's records from its start."""
    return TFRecordReader(_local(path), verify=verify)


def open_indexed(path: str, index: Index, *, verify: bool = True) -> IndexedTFRecordReader:
    """Random access to a shard's records through its index ``(offsets, sizes)``."""
    return IndexedTFRecordReader(_local(path), index, verify=verify)


def create_index(path: str) -> Index:
    """A shard's index, made by a header-only scan."""
    return _index.create_index(_local(path))


def load_index(path: str) -> Index:
    return _index.load_index(_local(path))


def write_index(path: str, offsets: np.ndarray, sizes: np.ndarray) -> None:
    """Writes an index file, making its directory (OSError where it cannot be written)."""
    makedirs(dirname(path) or ".")
    _index.write_index(_local(path), offsets, sizes)

