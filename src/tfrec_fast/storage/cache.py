"""Counts and indexes of remote objects kept on local disk, keyed by the object's version.

Counting the records of an object without an index means reading all of it. The first process
that needs a count or an index computes it while holding a lock file, and leaves it in the cache
directory (:func:`~tfrec_fast.storage.settings.cache_dir`); every other process of the machine
(DataLoader workers, other ranks, the next epoch, the next job) takes it from there. The key is
the object's name (without credentials) and version (ETag, generation, version id, or size and
modification time), so a rewritten object is counted again; an object whose store tells no
version is not cached. A cache that cannot be written is skipped, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import sys
import threading
from typing import Callable, Dict, Iterator, Tuple

import numpy as np

from .paths import Location
from .settings import DEFAULTS, cache_dir

__all__ = ["cached_array", "peek"]

_memo: Dict[str, np.ndarray] = {}
_memo_lock = threading.Lock()


def _key(location: Location, what: str) -> Tuple[str, bool]:
    """(cache key, whether it may be kept on disk) of ``what`` about the object's version."""
    stat = location.stat()
    version = stat.version
    text = f"{location.store.key(location.path)}\0{version}\0{stat.size}\0{what}"
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest(), version is not None


def cached_array(location: Location, what: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """``compute()`` (an int64 array about the object: its index, its count), once per version
    of the object: from this process's memory, else the disk cache, else computed under a lock
    (others wait for it) and kept. Objects of stores that read locally are not cached.

    Parameters
    ----------
    location : Location
        The object, at the version of its stat.
    what : str
        What the array is (``"idx"``, ``"count"``): part of the cache key.
    compute : callable
        Makes the array, when neither cache has it.

    Returns
    -------
    numpy.ndarray
        int64, read-only.
    """
    if not getattr(location.store, "cache_counts", False):
        return compute()
    key, durable = _key(location, what)
    with _memo_lock:
        hit = _memo.get(key)
    if hit is not None:
        return hit
    directory = cache_dir(getattr(location.store, "settings", DEFAULTS)) if durable else None
    value = _through_disk(directory, key, compute) if directory else compute()
    value = np.ascontiguousarray(value, dtype=np.int64)
    value.flags.writeable = False
    with _memo_lock:
        _memo[key] = value
    return value


def peek(location: Location, what: str):
    """What cached_array would find without computing it: the array, or None."""
    if not getattr(location.store, "cache_counts", False):
        return None
    key, durable = _key(location, what)
    with _memo_lock:
        hit = _memo.get(key)
    if hit is not None or not durable:
        return hit
    directory = cache_dir(getattr(location.store, "settings", DEFAULTS))
    return None if directory is None else _load(os.path.join(directory, "indexes", key + ".npy"))


def _through_disk(directory: str, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
    path = os.path.join(directory, "indexes", key + ".npy")
    hit = _load(path)
    if hit is not None:
        return hit
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lock = _locked(path + ".lock")
        lock.__enter__()
    except OSError:  # no cache here (read-only home, ...): compute in this process
        return compute()
    try:
        hit = _load(path)  # computed by the process that held the lock before us
        if hit is not None:
            return hit
        value = np.ascontiguousarray(compute(), dtype=np.int64)
        _save(path, value)
        return value
    finally:
        lock.__exit__(None, None, None)


def _load(path: str):
    try:
        with open(path, "rb") as f:
            value = np.load(f, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    return value if value.dtype == np.int64 else None


def _save(path: str, value: np.ndarray) -> None:
    temp = f"{path}.tmp-{secrets.token_hex(4)}"
    try:
        with open(temp, "wb") as f:
            np.save(f, value, allow_pickle=False)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(temp)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive lock on ``path`` between processes and threads (released if the holder
    dies: the kernel drops it with the file)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if sys.platform == "win32":
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # waits up to 10 s, then raises
                    break
                except OSError:
                    continue
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (releases the lock)
