"""Index files and random access to the records of uncompressed TFRecord files.

An index lists each record's header offset and framed size (12-byte header + payload + 4-byte
footer) in file order. Its text form, one ``"{offset} {size}\\n"`` line per record, is the one
the ``tfrecord`` package (``tfrecord2idx``) and NVIDIA DALI (``tools/tfrecord2idx``) write and
read, so index files move freely between the three.
"""

from __future__ import annotations

import functools
import os
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _buffers, _core
from ._core import FRAMING_SIZE, RecordBatch
from ._platform import after_fork_in_child
from .errors import DataLossError, ObjectChangedError
from .records import (
    ITER_BATCH_BYTES,
    TFRecordReader,
    _one_path,
    detect_compression,
    normalize_compression,
)
from .storage import Location, ReadAhead, cached_array, display, resolve, resolve_beside
from .storage import load_index as _load_index_cached
from .storage.cache import peek

__all__ = [
    "create_index",
    "load_index",
    "write_index",
    "index_of",
    "indexes_of",
    "detected_compression",
    "IndexedTFRecordReader",
]

Index = Tuple[np.ndarray, np.ndarray]
PathLike = Union[str, os.PathLike, Location]

# Bumped in every forked child: a reader opened before a fork reopens its file in the child
# (cheaper to check than os.getpid(), a system call, on every r[i]).
_process_generation = 0


def _forked() -> None:
    global _process_generation
    _process_generation += 1


after_fork_in_child(_forked)

# Local files: records at most this many bytes apart are fetched by one read, up to this many
# bytes per read.
MAX_GAP = 64 << 10
MAX_READ = 8 << 20
# Files of stores: a range request costs a round trip, so nearby records share one more readily.
RANGE_MAX_GAP = 256 << 10
RANGE_MAX_SIZE = 16 << 20


_COMPRESSIONS = ("", "gzip", "zlib")


def detected_compression(path: Location) -> str:
    """detect_compression(path), once per version of a remote object per machine (the index
    cache): every DataLoader worker opening a reader need not fetch the first bytes again.

    Parameters
    ----------
    path : Location
        The file.

    Returns
    -------
    str
        "", "gzip" or "zlib".
    """
    code = cached_array(
        path, "compression", lambda: np.array([_COMPRESSIONS.index(detect_compression(path))])
    )
    return _COMPRESSIONS[int(code[0])]


def _check_uncompressed(path: Location, compression: Optional[str]) -> None:
    """Random access needs uncompressed bytes; None or "auto" detects from the first bytes."""
    compression = "auto" if compression is None else normalize_compression(compression)
    if compression == "auto":
        compression = detected_compression(path)
    if compression:
        raise ValueError(
            f"{path.name} cannot be indexed: compressed ({compression}); "
            "random access needs an uncompressed TFRecord file"
        )


def create_index(
    tfrecord_path: PathLike,
    index_path: Optional[PathLike] = None,
    *,
    compression: Optional[str] = None,
    storage_options=None,
    filesystem=None,
) -> Index:
    """Indexes an uncompressed TFRecord file: returns ``(offsets, sizes)`` as int64 arrays.

    Only the 12-byte record headers are read (their length checksums checked, payloads skipped),
    with the GIL released. With ``index_path`` the index is also written there (atomically) in
    the text format of the ``tfrecord`` package and DALI. A damaged or cut file raises
    :class:`~tfrec_fast.DataLossError`; a compressed one (detected from its first bytes, or
    ``compression`` given) ``ValueError``. ``tfrecord_path`` may be a glob pattern matching one
    file. An ``index_path`` that is the data file itself (the same name, a link to it) is
    refused with ``ValueError``: the index would replace the data.

    Either path may be a URL (``storage_options`` / ``filesystem`` as for readers): a remote
    file is streamed once (headers cannot be skipped without a request each), its records'
    checksums checked on the way, and its index kept in the index cache (see
    :mod:`tfrec_fast.storage.cache`) for its version.

    Parameters
    ----------
    tfrecord_path : str or os.PathLike
        The data file: a path, a glob matching one file, or a URL.
    index_path : str or os.PathLike, optional
        Where to write the index as well (conventionally ``tfrecord_path + ".idx"``).
    compression : str, optional
        The file's compression if known; anything but none is refused.
    storage_options : dict, optional
        For URLs: fsspec's options and tfrec_fast's per-call settings.
    filesystem : fsspec.AbstractFileSystem or pyarrow.fs.FileSystem, optional
        The filesystem the paths are on.

    Returns
    -------
    offsets : numpy.ndarray
        int64: the offset of each record's header.
    sizes : numpy.ndarray
        int64: each record's framed size (payload + 16 bytes).

    Raises
    ------
    FileNotFoundError
        The data file does not exist.
    ValueError
        The file is compressed, or ``index_path`` is the data file.
    DataLossError
        A damaged header or a cut file.
    """
    path = _one_path(tfrecord_path, storage_options, filesystem)
    index: Optional[Location] = None
    if index_path is not None:
        index = resolve_beside(index_path, storage_options, filesystem)
        if path.same_file(index):
            raise ValueError(
                f"the index path {index.name} is the data file {path.name} "
                "itself: writing the index would destroy the data"
            )
    _check_uncompressed(path, compression)
    offsets, sizes = (np.array(a) for a in index_of(path))
    if index is not None:
        write_index(index, offsets, sizes)
    return offsets, sizes


def index_of(path: Location, stream=None) -> Index:
    """(offsets, sizes) of an uncompressed file by a scan of its headers: once per version of
    a remote object per machine (the index cache), read-only arrays.

    Parameters
    ----------
    path : Location
        The file.
    stream : callable, optional
        Opens the object's stream, when a ReadAhead over several reads it.

    Returns
    -------
    offsets : numpy.ndarray
        int64, read-only.
    sizes : numpy.ndarray
        int64, read-only.

    Raises
    ------
    DataLossError
        A damaged header or a cut file.
    """

    def scan() -> np.ndarray:
        os_path = path.os_path
        return np.stack(
            _core.scan_index(os_path) if os_path is not None else _scan_stream(path, stream)
        )

    both = cached_array(path, "index", scan)
    return both[0], both[1]


def indexes_of(paths: Sequence[Location]) -> list:
    """index_of() of each file; the remote ones not in the index cache are scanned through one
    ReadAhead, which reads on into the next object while one is scanned.

    Parameters
    ----------
    paths : sequence of Location
        The files.

    Returns
    -------
    list of (offsets, sizes)
        In the order of ``paths``.

    Raises
    ------
    DataLossError
        A damaged header or a cut file.
    """
    todo = [k for k, p in enumerate(paths) if p.os_path is None and peek(p, "index") is None]
    if len(todo) < 2:
        return [index_of(p) for p in paths]
    slot = {k: j for j, k in enumerate(todo)}
    ahead = ReadAhead([paths[k] for k in todo])
    try:
        return [
            index_of(p, None if k not in slot else functools.partial(ahead.open, slot[k]))
            for k, p in enumerate(paths)
        ]
    finally:
        ahead.close()


def _scan_stream(path: Location, stream=None) -> Index:
    """(offsets, sizes) of a file read front to back (both checksums checked); what it finds
    of the compression (none) is kept in the index cache too."""
    offsets, sizes = [], []
    reader = (
        TFRecordReader(path, "auto")
        if stream is None
        else TFRecordReader._of_stream(path, stream(), "auto")
    )
    if reader.compression:
        reader.close()
        raise ValueError(
            f"{path.name} cannot be indexed: compressed ({reader.compression}); "
            "random access needs an uncompressed TFRecord file"
        )
    cached_array(path, "compression", lambda: np.array([0]))
    with reader:
        for batch in reader.iter_batches(max_bytes=ITER_BATCH_BYTES, num_threads=1):
            offsets.append(np.array(batch.positions))
            sizes.append(np.diff(batch.offsets) + FRAMING_SIZE)
    if not offsets:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(offsets), np.concatenate(sizes)


def write_index(
    index_path: Union[PathLike, Location], offsets, sizes, *, storage_options=None, filesystem=None
) -> None:
    """Writes ``(offsets, sizes)`` as an index file; a reader never sees a half-written one
    (a remote index is put in one request).

    Parameters
    ----------
    index_path : str, os.PathLike or Location
        Where to write it.
    offsets : array-like of int
        Each record's header offset and framed size.
    sizes : array-like of int
        Each record's header offset and framed size.
    storage_options
        As for readers.
    filesystem
        As for readers.

    Raises
    ------
    OSError
        It could not be written.
    """
    text = _core.format_index(
        np.asarray(offsets, dtype=np.int64), np.asarray(sizes, dtype=np.int64)
    )
    resolve(index_path, storage_options, filesystem).write_bytes(text)


def load_index(index_path: PathLike, *, storage_options=None, filesystem=None) -> Index:
    """Reads an index file (ours, the ``tfrecord`` package's or DALI's): ``(offsets, sizes)``.
    It may be a URL (``storage_options`` / ``filesystem`` as for readers).

    A file that is not an index raises ``ValueError`` naming the line.

    Parameters
    ----------
    index_path : str or os.PathLike
        The index file: a path or a URL.
    storage_options : dict, optional
        For URLs: fsspec's options.
    filesystem : fsspec.AbstractFileSystem or pyarrow.fs.FileSystem, optional
        The filesystem the path is on.

    Returns
    -------
    offsets : numpy.ndarray
        int64: the offset of each record's header.
    sizes : numpy.ndarray
        int64: each record's framed size (payload + 16 bytes).

    Raises
    ------
    FileNotFoundError
        The index file does not exist.
    ValueError
        The file is not an index (the message names the line).
    """
    offsets, sizes = _load_index_cached(resolve(index_path, storage_options, filesystem))
    return np.array(offsets), np.array(sizes)


def _as_index(path: Location, index, storage_options=None, filesystem=None) -> Index:
    if index is None:
        return index_of(path)
    if isinstance(index, (str, os.PathLike, Location)):
        return _load_index_cached(resolve_beside(index, storage_options, filesystem))
    try:
        offsets, sizes = index
    except (TypeError, ValueError):
        raise TypeError(
            "index must be None, an index file path or an (offsets, sizes) pair, "
            f"not {type(index).__name__}"
        ) from None
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape != sizes.shape:
        raise ValueError("offsets and sizes must be one-dimensional arrays of equal length")
    return offsets, sizes


def check_covers(
    path: Location,
    offsets: np.ndarray,
    sizes: np.ndarray,
    index_name: str,
    size: Optional[int] = None,
) -> None:
    """A complete index (records back to back from byte 0, what create_index and the tools
    write) must end where the file ends; if not, the file changed since it was indexed, and
    len() and every position in the index are wrong. A partial index is not checked here (each
    read still checks its record against the file).

    Parameters
    ----------
    path : Location
        The data file.
    offsets : numpy.ndarray
        The index.
    sizes : numpy.ndarray
        The index.
    index_name : str
        The index's name, for the message.
    size : int, optional
        The file's size, if known (else asked).

    Raises
    ------
    DataLossError
        ``reason == "index_mismatch"``: a complete index that does not end where the file
        does, naming both sizes.
    """
    if (
        len(offsets) == 0
        or offsets[0] != 0
        or not np.array_equal(offsets[1:], offsets[:-1] + sizes[:-1])
    ):
        return
    if size is None:
        size = path.size()
    ends = offsets + sizes
    end = int(ends[-1])
    if end == size:
        return
    if end < size:  # name the first byte the index does not know
        record, offset = len(offsets), end
        detail = (
            f"the index {index_name} of {len(offsets)} records ends at byte {end} but "
            f"the file has {size} bytes (records appended since it was written?)"
        )
    else:  # name the first record the file no longer holds whole
        record = int(np.argmax(ends > size))
        offset = int(offsets[record])
        detail = (
            f"the index {index_name} says record {record} at offset {offset} takes "
            f"{int(sizes[record])} bytes but the file has {size} bytes (the file was cut "
            "or rewritten since the index was written?)"
        )
    raise DataLossError(
        detail + "; make a new index with create_index()",
        path=path.name,
        record_index=record,
        offset=offset,
        reason="index_mismatch",
    )


_check_covers = check_covers  # (its name in earlier releases)


class IndexedTFRecordReader:
    """Random access to the records of an uncompressed TFRecord file through its index.

    ``index`` is ``None`` (the file is scanned now, reading only headers), the path of an index
    file, or an ``(offsets, sizes)`` pair. ``len(r)`` is the number of records, ``r[i]`` record
    ``i`` as a read-only memoryview, ``r.get_batch(indices)`` several records as one
    :class:`RecordBatch` in the order asked for (duplicates allowed): they are read in file order,
    nearby ones coalesced into single reads, with the GIL released. Indices must be in
    ``range(len(r))``; negative ones raise ``IndexError`` as out-of-range ones do.

    Both checksums are verified (``verify=False``: neither), and always that each record's
    length field agrees with the index. An index that does not match the file (stale after the
    file changed, or made for another file) raises :class:`~tfrec_fast.DataLossError` with
    ``reason == "index_mismatch"`` naming the file, the record and its offset; it never yields
    wrong data. A complete index (records back to back from byte 0) that does not end where the
    file ends is refused when the reader is opened, so ``len()`` never counts a stale index.

    Reads use ``pread``, so one reader can serve many threads at once. It pickles by path and
    index, and opens the file again in a new process (after unpickling, or in a forked child).

    ``path`` (and an index path) may be a URL, with ``storage_options`` or ``filesystem`` (see
    :mod:`tfrec_fast.storage`). The object's size and version are taken when the reader opens
    (or come from the listing that found it); ``get_batch`` then fetches the distinct records
    with range requests at that version, records within :data:`RANGE_MAX_GAP` of each other
    sharing one, all sent at once (up to the ``concurrency`` setting in flight), and checks
    them in C++ as it checks local reads; ``r[i]`` is one request. An object rewritten since
    raises :class:`~tfrec_fast.ObjectChangedError`. Without an index, a remote object is
    scanned once per version per machine (the index cache).

    Parameters
    ----------
    path : str or os.PathLike
        The data file: a path, a glob matching one file, or a URL.
    index : None, str, os.PathLike or (offsets, sizes), optional
        None: scan the file now; a path: an index file (ours, the ``tfrecord`` package's or
        DALI's); or the arrays :func:`create_index` returns.
    verify : bool, default True
        Check both CRC32Cs of every record read.
    storage_options : dict, optional
        For URLs: fsspec's options and tfrec_fast's per-call settings.
    filesystem : fsspec.AbstractFileSystem or pyarrow.fs.FileSystem, optional
        The filesystem the paths are on.

    Raises
    ------
    FileNotFoundError
        The data file or the index file does not exist.
    ValueError
        The file is compressed, or the index file is not an index.
    DataLossError
        The index does not match the file (``reason == "index_mismatch"``), when opening or when
        a record is read; a damaged record when it is read.
    ObjectChangedError
        A remote object was rewritten since the reader opened.
    """

    def __init__(
        self,
        path: PathLike,
        index: Union[None, PathLike, Index] = None,
        *,
        verify: bool = True,
        storage_options=None,
        filesystem=None,
    ):
        self._path = _one_path(path, storage_options, filesystem)
        _check_uncompressed(self._path, None)
        self._offsets, self._sizes = _as_index(self._path, index, storage_options, filesystem)
        # What an index that does not fit the file is called in the error (None: built now).
        self._index_name = (
            None
            if index is None
            else (
                display(index)
                if isinstance(index, (str, os.PathLike, Location))
                else "(offsets, sizes)"
            )
        )
        self._verify = bool(verify)
        self.skipped: list = []  # DataLossErrors of records left out by get_batch(skip_corrupt=True)
        self._closed = False
        self._reader = None
        self._generation = None
        self._live()  # open now: a missing file or an impossible index fails here

    def _live(self):
        if self._closed:
            raise ValueError("I/O operation on a closed IndexedTFRecordReader")
        if self._reader is None or self._generation != _process_generation:
            os_path = self._path.os_path
            if os_path is None:
                reader = _RangeIndexedReader(self._path, self._offsets, self._sizes, self._verify)
                size = reader.size
            else:
                reader = _core.IndexedReader(
                    os_path,
                    self._offsets,
                    self._sizes,
                    self._verify,
                    MAX_GAP,
                    MAX_READ,
                    _buffers.shared_pool(),
                )
                size = None
            if self._index_name is not None:
                _check_covers(self._path, self._offsets, self._sizes, self._index_name, size)
            self._reader = reader
            self._generation = _process_generation
        return self._reader

    def __len__(self) -> int:
        return len(self._offsets)

    def __getitem__(self, i: int) -> memoryview:
        if type(i) is not int:
            if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
                raise TypeError(f"record indices must be integers, not {type(i).__name__}")
            i = int(i)
        n = len(self._offsets)
        if not -n <= i < n:
            raise IndexError(f"record index {i} out of range for {self._path.name} ({n} records)")
        return memoryview(self._live().read_one(i % n))

    def get_batch(
        self, indices: Union[Sequence[int], np.ndarray], *, skip_corrupt: bool = False
    ) -> RecordBatch:
        """The records at ``indices`` (any integer sequence or array), in that order.

        With ``skip_corrupt=True`` a damaged record is left out (the index says where the next
        one starts, so nothing else is lost) and reported in :attr:`skipped`.

        Parameters
        ----------
        indices : sequence of int or numpy.ndarray
            Record numbers in ``range(len(self))``, in any order, repeats allowed.
        skip_corrupt : bool, default False
            Leave damaged records out instead of raising.

        Returns
        -------
        RecordBatch
            The records, in the order of ``indices``.

        Raises
        ------
        IndexError
            An index out of range (negative ones included).
        TypeError
            Indices that are not integers.
        ValueError
            Indices that are not one-dimensional.
        DataLossError
            A damaged record, or an index that does not match the file.
        ObjectChangedError
            A remote object was rewritten since the reader opened.
        """
        if skip_corrupt:
            return self._get_batch_skipping(indices)
        arr = np.asarray(indices)
        if arr.size == 0:
            arr = arr.astype(np.int64)
        elif arr.dtype.kind not in "iu":
            raise TypeError(f"record indices must be integers, not {arr.dtype}")
        if arr.ndim != 1:
            raise ValueError(f"indices must be one-dimensional, not of shape {arr.shape}")
        if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise IndexError(f"record index {arr.max()} out of range")
        return self._live().read(np.ascontiguousarray(arr, dtype=np.int64))

    def _get_batch_skipping(self, indices) -> RecordBatch:
        try:
            return self.get_batch(indices)
        except DataLossError:
            pass  # find the damaged ones one by one; the rest come back in order
        intact = []
        for i in np.asarray(indices).tolist():
            try:
                intact.append(self[i])
            except DataLossError as error:
                self.skipped.append(error)
        return RecordBatch.from_records(intact)

    @property
    def path(self) -> str:
        """The file's path (or URL)."""
        return self._path.url

    @property
    def offsets(self) -> np.ndarray:
        """Header offset of each record (int64, read-only)."""
        return _readonly(self._offsets)

    @property
    def sizes(self) -> np.ndarray:
        """Framed size of each record: payload + 16 bytes (int64, read-only)."""
        return _readonly(self._sizes)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Closes the file; idempotent. Reads in flight in other threads finish first."""
        self._closed = True
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> "IndexedTFRecordReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self):
        return {
            "path": self._path,
            "offsets": self._offsets,
            "sizes": self._sizes,
            "verify": self._verify,
            "closed": self._closed,
            "index_name": self._index_name,
        }

    def __setstate__(self, state):
        self._path = state["path"]
        self._offsets = state["offsets"]
        self._sizes = state["sizes"]
        self._verify = state["verify"]
        self._closed = state["closed"]
        self._index_name = state.get("index_name")
        self.skipped = []
        self._reader = None  # opened on first use in this process
        self._generation = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self)} records"
        return f"<IndexedTFRecordReader {self._path.name!r} ({state})>"


class _RangeIndexedReader:
    """What _core.IndexedReader does for a local file, for a file of a store: the records of a
    batch fetched by concurrent, coalesced range requests at the version the reader opened and
    checked in C++ the same way."""

    def __init__(self, path: Location, offsets: np.ndarray, sizes: np.ndarray, verify: bool):
        bad = np.flatnonzero((offsets < 0) | (sizes < FRAMING_SIZE))
        if len(bad):
            i = int(bad[0])
            raise ValueError(
                f"index of '{path.name}': entry {i} (offset {int(offsets[i])}, "
                f"size {int(sizes[i])}) is impossible: a record takes at least "
                f"{FRAMING_SIZE} bytes"
            )
        self._path = path
        self._offsets = offsets
        self._sizes = sizes
        self._verify = verify
        self.size = path.size()

    def read(self, indices: np.ndarray) -> RecordBatch:
        n = len(self._offsets)
        out = np.flatnonzero((indices < 0) | (indices >= n))
        if len(out):
            raise IndexError(
                f"record index {int(indices[out[0]])} out of range for "
                f"{self._path.name} ({n} records)"
            )
        try:
            return _read_records_at(
                self._path, indices, self._offsets, self._sizes, self.size, self._verify
            )
        except DataLossError as error:
            changed = _changed_since(self._path, error)
            if changed is error:
                raise
            raise changed from error

    def read_one(self, index: int) -> memoryview:
        return self.read(np.array([index], np.int64))[0]

    def close(self) -> None:
        pass


def _changed_since(path: Location, error: DataLossError) -> BaseException:
    """ObjectChangedError when the object is no longer the version that was read (asked
    again: for stores that cannot pin a read to a version), else ``error``."""
    before = path.known_stat
    if before is None or not path.store.whole_objects:
        return error
    try:
        now = path.store.stat(path.path)
    except FileNotFoundError:
        return ObjectChangedError(
            "it no longer exists", path=path.name, offset=error.offset, pinned=False
        )
    except Exception:
        return error
    if not before.differs(now):
        return error
    return ObjectChangedError(
        f"{before.version} when the reader opened, now {now.version}",
        path=path.name,
        offset=error.offset,
        pinned=False,
    )


def coalesce(
    offsets: np.ndarray,
    ends: np.ndarray,
    max_gap: Optional[int] = None,
    max_range: Optional[int] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Byte ranges [offsets[k], ends[k]) sorted by offset -> (range starts, range ends, the range
    of each k): neighbours at most ``max_gap`` apart share a range of at most ``max_range``
    bytes (one record may be larger alone).

    Parameters
    ----------
    offsets : numpy.ndarray
        The byte ranges, sorted by offset.
    ends : numpy.ndarray
        The byte ranges, sorted by offset.
    max_gap : int, optional
        Neighbours at most this far apart share a range (default: :data:`RANGE_MAX_GAP`).
    max_range : int, optional
        A shared range's largest size (default: :data:`RANGE_MAX_SIZE`).

    Returns
    -------
    starts : numpy.ndarray
        The coalesced ranges.
    stops : numpy.ndarray
        The coalesced ranges.
    which : numpy.ndarray
        For each k, the range holding it.
    """
    max_gap = RANGE_MAX_GAP if max_gap is None else max_gap
    max_range = RANGE_MAX_SIZE if max_range is None else max_range
    n = len(offsets)
    which = np.zeros(n, dtype=np.int64)
    starts: list = []
    stops: list = []
    for k in range(n):
        o, e = int(offsets[k]), int(ends[k])
        if starts and o - stops[-1] <= max_gap and e - starts[-1] <= max_range:
            stops[-1] = max(stops[-1], e)
        else:
            starts.append(o)
            stops.append(e)
        which[k] = len(starts) - 1
    return np.asarray(starts, np.int64), np.asarray(stops, np.int64), which


def _read_records_at(
    path: Location,
    indices: np.ndarray,
    offsets: np.ndarray,
    sizes: np.ndarray,
    size: int,
    verify: bool,
) -> RecordBatch:
    """Records ``indices`` (of an index ``offsets``/``sizes``) of a file of ``size`` bytes, as
    one RecordBatch in the order asked for: the distinct records coalesced into range requests
    (:func:`coalesce`) sent concurrently, then checked in C++ as local reads are."""
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    if not len(indices):
        return RecordBatch.from_records([])
    # The distinct records in file order; inverse[k]: which of them request k is.
    wanted, inverse = np.unique(indices, return_inverse=True)
    order = np.argsort(offsets[wanted], kind="stable")
    rec_offsets = offsets[wanted][order]
    rec_ends = rec_offsets + sizes[wanted][order]
    beyond = np.flatnonzero(rec_ends > size)
    if len(beyond):
        i = int(wanted[order[beyond[0]]])
        raise DataLossError(
            f"record {i} at offset {int(offsets[i])}: the index says it takes {int(sizes[i])} "
            f"bytes but the file ends at {size} (the index is stale or belongs to another "
            "file: rebuild it with `tfrec-fast index`)",
            path=path.name,
            record_index=i,
            offset=int(offsets[i]),
            reason="index_mismatch",
        )
    starts, stops, which = coalesce(rec_offsets, rec_ends)
    blobs = path.read_ranges(starts.tolist(), stops.tolist())
    # The ranges back to back in one buffer, and where each distinct record starts in it.
    bases = np.concatenate([[0], np.cumsum(stops - starts)[:-1]]).astype(np.int64)
    at_sorted = bases[which] + (rec_offsets - starts[which])
    at = np.empty_like(at_sorted)
    at[order] = at_sorted
    data = blobs[0] if len(blobs) == 1 and isinstance(blobs[0], bytes) else b"".join(blobs)
    return _core.check_fetched(
        data,
        path.name,
        at[inverse.reshape(-1)],
        indices,
        offsets[indices],
        sizes[indices],
        bool(verify),
    )


def _readonly(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view
