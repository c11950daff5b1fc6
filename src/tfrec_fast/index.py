"""Index files and random access to the records of uncompressed TFRecord files.

An index lists each record's header offset and framed size (12-byte header + payload + 4-byte
footer) in file order. Its text form, one ``"{offset} {size}\\n"`` line per record, is the one
the ``tfrecord`` package (``tfrecord2idx``) and NVIDIA DALI (``tools/tfrecord2idx``) write and
read, so index files move freely between the three.
"""

from __future__ import annotations

import os
import tempfile
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from . import _buffers, _core
from ._core import FRAMING_SIZE, RecordBatch
from ._platform import after_fork_in_child
from .errors import DataLossError
from .records import (ITER_BATCH_BYTES, TFRecordReader, _display, _one_path, _resolve,
                      detect_compression, normalize_compression)
from .remote import RemotePath

__all__ = ["create_index", "load_index", "write_index", "IndexedTFRecordReader"]

Index = Tuple[np.ndarray, np.ndarray]
PathLike = Union[str, os.PathLike]
Resolved = Union[str, RemotePath]  # what records._resolve makes of a path: local or remote

# Bumped in every forked child: a reader opened before a fork reopens its file in the child
# (cheaper to check than os.getpid(), a system call, on every r[i]).
_process_generation = 0


def _forked() -> None:
    global _process_generation
    _process_generation += 1


after_fork_in_child(_forked)

# Records at most this many bytes apart are fetched by one read, up to this many bytes per read.
MAX_GAP = 64 << 10
MAX_READ = 8 << 20


def _check_uncompressed(path, compression: Optional[str]) -> None:
    """Random access needs uncompressed bytes; None or "auto" detects from the first bytes."""
    compression = "auto" if compression is None else normalize_compression(compression)
    if compression == "auto":
        compression = detect_compression(path)
    if compression:
        raise ValueError(f"{_display(path)} cannot be indexed: compressed ({compression}); "
                         "random access needs an uncompressed TFRecord file")


def create_index(tfrecord_path: PathLike, index_path: Optional[PathLike] = None, *,
                 compression: Optional[str] = None, storage_options=None,
                 filesystem=None) -> Index:
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
    checksums checked on the way.
    """
    path: Resolved = _one_path(tfrecord_path, storage_options, filesystem)
    index: Optional[Resolved] = None
    if index_path is not None:
        index = _related(index_path, storage_options, filesystem)
        _refuse_same_file(path, index)
    _check_uncompressed(path, compression)
    if isinstance(path, RemotePath):
        offsets, sizes = _scan_stream(path)
    else:
        offsets, sizes = _core.scan_index(path)
    if index is not None:
        write_index(index, offsets, sizes)
    return offsets, sizes


def _related(path, storage_options, filesystem):
    """An index path next to data that may be remote: on ``filesystem`` when given, remote when a
    URL (with ``storage_options``), else local."""
    if isinstance(path, RemotePath):
        return path
    from .remote import is_url
    return _resolve(path, storage_options if is_url(os.fspath(path)) else None, filesystem)


def _scan_stream(rp: RemotePath) -> Index:
    """(offsets, sizes) of a remote file, read front to back (both checksums checked)."""
    offsets, sizes = [], []
    with TFRecordReader(rp) as reader:
        for batch in reader.iter_batches(max_bytes=ITER_BATCH_BYTES):
            offsets.append(np.array(batch.positions))
            sizes.append(np.diff(batch.offsets) + FRAMING_SIZE)
    if not offsets:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(offsets), np.concatenate(sizes)


def _refuse_same_file(data_path, index_path) -> None:
    if isinstance(data_path, RemotePath) or isinstance(index_path, RemotePath):
        if data_path == index_path:
            raise ValueError(f"the index path {_display(index_path)} is the data file itself: "
                             "writing the index would destroy the data")
        return
    try:
        same = os.path.samefile(data_path, index_path)
    except OSError:  # the index does not exist yet (or the data file does not: reported later)
        same = os.path.abspath(data_path) == os.path.abspath(os.fspath(index_path))
    if same:
        raise ValueError(f"the index path {os.fspath(index_path)} is the data file "
                         f"{data_path} itself: writing the index would destroy the data")


def write_index(index_path: Union[PathLike, RemotePath], offsets, sizes, *, storage_options=None,
                filesystem=None) -> None:
    """Writes ``(offsets, sizes)`` as an index file; a reader never sees a half-written one
    (a remote index is put in one request)."""
    text = _core.format_index(np.asarray(offsets, dtype=np.int64),
                              np.asarray(sizes, dtype=np.int64))
    resolved: Resolved = _resolve(index_path, storage_options, filesystem)
    if isinstance(resolved, RemotePath):
        resolved.write_bytes(text)
        return
    directory = os.path.dirname(os.path.abspath(resolved))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".idx", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, resolved)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_index(index_path: PathLike, *, storage_options=None, filesystem=None) -> Index:
    """Reads an index file (ours, the ``tfrecord`` package's or DALI's): ``(offsets, sizes)``.
    It may be a URL (``storage_options`` / ``filesystem`` as for readers).

    A file that is not an index raises ``ValueError`` naming the line.
    """
    resolved: Resolved = _resolve(index_path, storage_options, filesystem)
    if isinstance(resolved, RemotePath):
        return _core.parse_index(resolved.read(), resolved.name)
    with open(resolved, "rb") as f:
        data = f.read()
    return _core.parse_index(data, resolved)


def _as_index(path, index, storage_options=None, filesystem=None) -> Index:
    if index is None:
        return create_index(path)
    if isinstance(index, (str, os.PathLike, RemotePath)):
        index = _related(index, storage_options, filesystem)
        return load_index(index)
    try:
        offsets, sizes = index
    except (TypeError, ValueError):
        raise TypeError("index must be None, an index file path or an (offsets, sizes) pair, "
                        f"not {type(index).__name__}") from None
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape != sizes.shape:
        raise ValueError("offsets and sizes must be one-dimensional arrays of equal length")
    return offsets, sizes


def _check_covers(path, offsets: np.ndarray, sizes: np.ndarray, index_name: str,
                  size: Optional[int] = None) -> None:
    """A complete index (records back to back from byte 0, what create_index and the tools
    write) must end where the file ends; if not, the file changed since it was indexed, and
    len() and every position in the index are wrong. A partial index is not checked here (each
    read still checks its record against the file)."""
    if len(offsets) == 0 or offsets[0] != 0 or \
            not np.array_equal(offsets[1:], offsets[:-1] + sizes[:-1]):
        return
    if size is None:
        size = os.path.getsize(path)
    ends = offsets + sizes
    end = int(ends[-1])
    if end == size:
        return
    if end < size:  # name the first byte the index does not know
        record, offset = len(offsets), end
        detail = (f"the index {index_name} of {len(offsets)} records ends at byte {end} but "
                  f"the file has {size} bytes (records appended since it was written?)")
    else:  # name the first record the file no longer holds whole
        record = int(np.argmax(ends > size))
        offset = int(offsets[record])
        detail = (f"the index {index_name} says record {record} at offset {offset} takes "
                  f"{int(sizes[record])} bytes but the file has {size} bytes (the file was cut "
                  "or rewritten since the index was written?)")
    raise DataLossError(detail + "; make a new index with create_index()", path=_display(path),
                        record_index=record, offset=offset, reason="index_mismatch")


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
    :mod:`tfrec_fast.remote`). The object's size is taken when the reader opens; ``get_batch``
    then fetches the distinct records with range requests, records within
    :data:`tfrec_fast.remote.MAX_GAP` of each other sharing one, all sent at once (up to
    :data:`tfrec_fast.remote.DEFAULT_CONCURRENCY` in flight), and checks them in C++ as it
    checks local reads; ``r[i]`` is one request.
    """

    def __init__(self, path: PathLike, index: Union[None, PathLike, Index] = None, *,
                 verify: bool = True, storage_options=None, filesystem=None):
        self._path = _one_path(path, storage_options, filesystem)
        _check_uncompressed(self._path, None)
        self._offsets, self._sizes = _as_index(self._path, index, storage_options, filesystem)
        # What an index that does not fit the file is called in the error (None: built now).
        self._index_name = None if index is None else (
            _display(index) if isinstance(index, (str, os.PathLike, RemotePath))
            else "(offsets, sizes)")
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
            if isinstance(self._path, RemotePath):
                reader = _RemoteIndexedReader(self._path, self._offsets, self._sizes,
                                              self._verify)
                size = reader.size
            else:
                reader = _core.IndexedReader(self._path, self._offsets, self._sizes,
                                             self._verify, MAX_GAP, MAX_READ,
                                             _buffers.shared_pool())
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
            raise IndexError(f"record index {i} out of range for {_display(self._path)} "
                             f"({n} records)")
        return memoryview(self._live().read_one(i % n))

    def get_batch(self, indices: Union[Sequence[int], np.ndarray], *,
                  skip_corrupt: bool = False) -> RecordBatch:
        """The records at ``indices`` (any integer sequence or array), in that order.

        With ``skip_corrupt=True`` a damaged record is left out (the index says where the next
        one starts, so nothing else is lost) and reported in :attr:`skipped`.
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
        return self._path.url if isinstance(self._path, RemotePath) else self._path

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
        return {"path": self._path, "offsets": self._offsets, "sizes": self._sizes,
                "verify": self._verify, "closed": self._closed, "index_name": self._index_name}

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
        return f"<IndexedTFRecordReader {_display(self._path)!r} ({state})>"


class _RemoteIndexedReader:
    """What _core.IndexedReader does for a local file, for a remote one: the records of a
    batch fetched by concurrent, coalesced range requests (see remote.read_records_at) and
    checked in C++ the same way. The object's size is taken when it is opened."""

    def __init__(self, rp: RemotePath, offsets: np.ndarray, sizes: np.ndarray, verify: bool):
        bad = np.flatnonzero((offsets < 0) | (sizes < FRAMING_SIZE))
        if len(bad):
            i = int(bad[0])
            raise ValueError(f"index of '{rp.name}': entry {i} (offset {int(offsets[i])}, size "
                             f"{int(sizes[i])}) is impossible: a record takes at least "
                             f"{FRAMING_SIZE} bytes")
        self._rp = rp
        self._offsets = offsets
        self._sizes = sizes
        self._verify = verify
        self.size = rp.size()

    def read(self, indices: np.ndarray) -> RecordBatch:
        from .remote import read_records_at
        n = len(self._offsets)
        out = np.flatnonzero((indices < 0) | (indices >= n))
        if len(out):
            raise IndexError(f"record index {int(indices[out[0]])} out of range for "
                             f"{self._rp.name} ({n} records)")
        return read_records_at(self._rp, indices, self._offsets, self._sizes, self.size,
                               self._verify)

    def read_one(self, index: int) -> memoryview:
        return self.read(np.array([index], np.int64))[0]

    def close(self) -> None:
        pass


def _readonly(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view
