"""Grain (JAX): TFRecord files as a random-access data source (extra ``grain``).

:class:`TFRecordDataSource` is what Grain's ``MapDataset.source(...)`` and ``grain.DataLoader``
take: ``len(source)``, ``source[i]`` and, for several indices at once, ``source._getitems``
(Grain's batched-read protocol, also spelled ``__getitems__``). Record ``i`` is record ``i`` of
the files concatenated, found through the files' indexes, so any order Grain asks for (shuffled,
sharded, repeated) is read directly, and Grain's checkpoints, which hold positions in that
order, resume exactly. ``source.read_batch`` reads and parses a whole batch at once, as the
``batch_fn`` of a Grain pipeline over record indices.

Grain is not imported here: the source is a plain object following Grain's protocol.
"""

from __future__ import annotations

import bisect
import collections
import hashlib
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .columns import BytesColumn, Ragged
from .errors import DataLossError, ExampleParseError
from .example import parse_examples
from .index import IndexedTFRecordReader, detected_compression, indexes_of
from .index import write_index as _write_index
from .records import RecordBatch
from .spec import FixedLen, normalize_spec
from .storage import Location, expand, find_indexes, load_index, resolve_beside

__all__ = ["DEFAULT_MAX_OPEN_FILES", "TFRecordDataSource"]

# Files a process keeps open at once (one descriptor, or one remote reader, each).
DEFAULT_MAX_OPEN_FILES = 128

# The name of a file's index beside it: FILE.idx.
INDEX_SUFFIX = ".idx"

Index = Tuple[np.ndarray, np.ndarray]


class TFRecordDataSource:
    """Random access to the records of uncompressed TFRecord files, for Grain.

    ``source[i]`` is record ``i`` of the files concatenated (in the order given, each glob's
    matches sorted): the serialized record as ``bytes`` when ``spec`` is None (what Grain's own
    sources give), else the record parsed with ``spec`` into a dict of numpy values: a FixedLen
    feature is an array of its shape (a numpy scalar for shape ``()``), a VarLen one a 1-D
    array; bytes features are ``bytes`` for one value and object arrays of ``bytes`` otherwise.

    ``source._getitems(indices)`` (and ``source.__getitems__``) reads several records with one
    coalesced read per file and one parse per file; Grain calls it where it reads batches of
    indices. :meth:`read_batch` gives such a read as one batch of stacked columns, for
    ``grain.MapDataset.range(len(source)).shuffle(seed=0).batch(256,
    batch_fn=source.read_batch)``: Grain's pipeline and checkpoints, without its per-record work.

    Every file needs an index (the record offsets): ``index`` is None or ``"auto"`` (``FILE.idx``
    next to each file when it exists, else the index is built now by a scan that reads only the
    record headers), one index path (a single file), a list aligned with the files, or a dict
    ``{file: index path}`` keyed by path or URL (files not in it: auto). A remote object without
    an index is streamed once per version per machine: its index is kept in the index cache
    (see :mod:`tfrec_fast.storage`), so other processes making the same source (ranks, a
    restore, the next run) read none of it. Indexes are text files in the format of the
    ``tfrecord`` package and DALI (see :func:`tfrec_fast.create_index`). With
    ``write_index=True`` the indexes built are also written to ``FILE.idx`` (atomically), so
    later runs skip the scan.

    Parameters
    ----------
    paths : str, os.PathLike, tfrec_fast.storage.Location or a list of them
        Files or glob patterns; URLs (``s3://``, ``gs://``, ``https://``, ...) with
        ``storage_options``, or paths on ``filesystem`` (an fsspec or pyarrow filesystem).
    spec : dict, optional
        Feature specs as :func:`tfrec_fast.parse_examples` takes them; None: raw records.
    index : None, "auto", path, list or dict, optional
        Where the indexes are (see above).
    verify : bool
        Check both checksums of every record read (default). Each record's length is always
        checked against its index.
    write_index : bool
        Write the indexes built to ``FILE.idx`` next to their files.
    max_open_files : int
        Files each process keeps open at once; the least recently used is closed beyond that.
    storage_options : dict, optional
        Options of the filesystem of URLs (credentials, endpoint), and the settings of
        :class:`tfrec_fast.storage.Settings` (retries, read-ahead, ``index_cache``).
    filesystem : optional
        An fsspec or ``pyarrow.fs`` filesystem all paths are on.

    Raises
    ------
    FileNotFoundError
        A file, a pattern matching nothing, or an index path given that does not exist.
    ValueError
        A compressed file (random access needs uncompressed bytes), or an index list of
        another length than the files.
    tfrec_fast.DataLossError
        An index that does not fit its file (``reason == "index_mismatch"``), or a file that
        is damaged where the scan reads it.

    Notes
    -----
    The source pickles without its open files and without the indexes it loaded from index
    files (each process loads the ones it needs again; an index rewritten meanwhile with
    another record count is refused), so Grain's worker processes get it cheaply. Files are
    opened in the process that reads them, on first use; reads are thread-safe. A remote
    object is read at the version the source was made with: one rewritten since raises
    :class:`tfrec_fast.ObjectChangedError` rather than mixing versions.

    ``repr(source)`` names the files, their record counts and the spec by a digest, the same
    in every process: Grain's ``DataLoader`` compares it when a checkpoint is restored.
    """

    def __init__(
        self,
        paths,
        spec=None,
        index=None,
        *,
        verify: bool = True,
        write_index: bool = False,
        max_open_files: int = DEFAULT_MAX_OPEN_FILES,
        storage_options: Optional[Mapping[str, Any]] = None,
        filesystem=None,
    ):
        if int(max_open_files) < 1:
            raise ValueError(f"max_open_files must be at least 1, not {max_open_files}")
        self._files = _files(paths, storage_options, filesystem)
        index_files = _index_files(self._files, index, storage_options, filesystem)
        self._spec = None if spec is None else normalize_spec(spec)
        self._verify = bool(verify)
        self._max_open = int(max_open_files)
        # Per file: its index file (reloaded in each process) or None (built here: then the
        # arrays are part of the pickled state); the arrays themselves while this process has
        # them.
        self._index_paths: List[Optional[Location]] = list(index_files)
        # The index files given or found first (a stale one fails before any scan), then the
        # scans of the files without one.
        indexes: Dict[int, Index] = {
            k: _checked_index(f, ix)
            for k, (f, ix) in enumerate(zip(self._files, index_files))
            if ix is not None
        }
        missing = [k for k in range(len(self._files)) if k not in indexes]
        for k, built in zip(missing, _build_indexes([self._files[k] for k in missing])):
            indexes[k] = built
            if write_index:
                written = self._files[k].with_suffix(INDEX_SUFFIX)
                _write_index(written, *built)
                self._index_paths[k] = written
        self._indexes: List[Optional[Index]] = [indexes[k] for k in range(len(self._files))]
        self._counts = [len(indexes[k][0]) for k in range(len(self._files))]
        self._starts = [0]
        for n in self._counts:
            self._starts.append(self._starts[-1] + n)
        self._open = _OpenFiles(self._max_open)

    # ---- Grain's protocol ------------------------------------------------------------------

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index) -> Any:
        i = self._global(index)
        k = bisect.bisect_right(self._starts, i) - 1
        local = i - self._starts[k]
        if self._spec is None:
            with self._open.use(k, self._reader) as reader:
                return bytes(reader[local])
        return self._read(k, np.array([local], np.int64))[0]

    def _getitems(self, indices: Sequence[int]) -> List[Any]:
        """The records at ``indices`` (any order, duplicates allowed), read with one coalesced
        read and one parse per file."""
        parts = self._by_file(indices)
        if len(parts) == 1:
            return self._read(*parts[0][:2])
        out: List[Any] = [None] * sum(len(where) for _, _, where in parts)
        for k, local, where in parts:
            for j, row in zip(where.tolist(), self._read(k, local)):
                out[j] = row
        return out

    __getitems__ = _getitems  # the spelling of array_record's sources and PyTorch

    def read_batch(self, indices: Sequence[int]) -> Union[List[bytes], Dict[str, Any]]:
        """The records at ``indices`` as one batch: a list of ``bytes`` without a spec, else a
        dict of the parsed features, each stacked along a first axis of ``len(indices)``.

        A FixedLen feature is a numpy array ``[B, *shape]`` (bytes ones of dtype object); a
        VarLen one a list of ``B`` 1-D arrays. This is the ``batch_fn`` of a Grain pipeline over
        record indices, which reads and parses each batch in one go instead of record by
        record: ``grain.MapDataset.range(len(source)).shuffle(seed=0).batch(256,
        batch_fn=source.read_batch)``.

        Parameters
        ----------
        indices : sequence of int
            Record indices, in any order, repeats allowed; negative ones count from the end.

        Returns
        -------
        list of bytes or dict

        Raises
        ------
        IndexError
            An index out of range.
        tfrec_fast.DataLossError, tfrec_fast.ExampleParseError
            A damaged record, or one that does not fit the spec (naming its file and its
            index in that file).
        """
        if self._spec is None:
            return self._getitems(indices)
        none = np.zeros(0, np.int64)
        parts = self._by_file(indices) or [(0, none, none)]  # (typed empty columns)
        columns = [self._batch_columns(k, local) for k, local, _ in parts]
        if len(parts) == 1:
            return columns[0]
        inverse = np.argsort(np.concatenate([where for _, _, where in parts]), kind="stable")
        out: Dict[str, Any] = {}
        for name in columns[0]:
            values = [c[name] for c in columns]
            if isinstance(values[0], np.ndarray):
                out[name] = np.concatenate(values)[inverse]
            else:
                rows = [row for v in values for row in v]
                out[name] = [rows[j] for j in inverse.tolist()]
        return out

    # ---- reading -----------------------------------------------------------------------------

    def _global(self, index) -> int:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"record indices must be integers, not {type(index).__name__}")
        n = len(self)
        i = int(index)
        if not -n <= i < n:
            raise IndexError(f"record index {i} out of range for {n} records")
        return i % n

    def _by_file(self, indices) -> List[Tuple[int, np.ndarray, np.ndarray]]:
        """(file, indices in it, positions in ``indices``) for each file ``indices`` touch."""
        n = len(self)
        given = np.asarray(indices)
        if given.size == 0:
            return []
        if given.ndim != 1 or given.dtype.kind not in "iu":
            raise TypeError("indices must be a sequence of integers")
        idx = given.astype(np.int64)
        idx = np.where(idx < 0, idx + n, idx)
        bad = np.flatnonzero((idx < 0) | (idx >= n) | (given > n))  # (given: uint64 overflow)
        if len(bad):
            raise IndexError(f"record index {given[bad[0]]} out of range for {n} records")
        files = np.searchsorted(self._starts, idx, side="right") - 1
        first, last = int(files[0]), int(files[-1])
        if first == last and (files == first).all():  # the common case: one file
            return [(first, idx - self._starts[first], np.arange(len(idx)))]
        parts = []
        for k in np.unique(files).tolist():
            where = np.flatnonzero(files == k)
            parts.append((k, idx[where] - self._starts[k], where))
        return parts

    def _read(self, k: int, local: np.ndarray) -> list:
        """Records ``local`` of file ``k``: bytes, or parsed rows."""
        batch = self._records(k, local)
        if self._spec is None:
            return batch.to_list()
        return _rows(self._parse(k, batch, local), self._spec, len(batch))

    def _records(self, k: int, local: np.ndarray) -> RecordBatch:
        with self._open.use(k, self._reader) as reader:
            return reader.get_batch(local)

    def _batch_columns(self, k: int, local: np.ndarray) -> Dict[str, Any]:
        assert self._spec is not None
        batch = self._records(k, local)
        columns = self._parse(k, batch, local)
        return {
            name: _column_batch(col, self._spec.get(name), len(batch))
            for name, col in columns.items()
        }

    def _parse(self, k: int, batch: RecordBatch, local: np.ndarray) -> Dict[str, Any]:
        try:
            return parse_examples(batch, self._spec, name=self._files[k].name)
        except ExampleParseError as error:  # name the record in its file, not in the batch
            j = error.record_index
            raise ExampleParseError(
                error.detail,
                path=self._files[k].name,
                record_index=None if j is None else int(local[j]),
                feature=error.feature,
            ) from None

    def _reader(self, k: int) -> IndexedTFRecordReader:
        """Opens file ``k`` in this process (its index loaded again if it was not pickled)."""
        index = self._indexes[k]
        if index is None:
            index_file = self._index_paths[k]
            assert index_file is not None  # (only indexes loaded from files are left out)
            offsets, sizes = load_index(index_file)
            if len(offsets) != self._counts[k]:
                raise DataLossError(
                    f"the index {index_file.name} now lists {len(offsets)} records; the data "
                    f"source was made when it listed {self._counts[k]}",
                    path=self._files[k].name,
                    record_index=min(len(offsets), self._counts[k]),
                    reason="index_mismatch",
                )
            index = (offsets, sizes)
            self._indexes[k] = index
        return IndexedTFRecordReader(self._files[k], index, verify=self._verify)

    # ---- the rest ------------------------------------------------------------------------------

    @property
    def paths(self) -> List[str]:
        """The files, in record order (URLs as given or found by a glob)."""
        return [f.url for f in self._files]

    @property
    def spec(self) -> Optional[Dict[str, Any]]:
        return self._spec

    def record_counts(self) -> List[int]:
        """The number of records of each file, in the order of :attr:`paths`."""
        return list(self._counts)

    def close(self) -> None:
        """Closes the files this process has open; reading again opens them again."""
        self._open.close_all()

    def __enter__(self) -> "TFRecordDataSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_open"] = None
        state["_indexes"] = [
            None if ix is not None else arrays
            for ix, arrays in zip(self._index_paths, self._indexes)
        ]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._open = _OpenFiles(self._max_open)

    def __repr__(self) -> str:
        digest = hashlib.sha1()
        for path, count in zip(self.paths, self._counts):
            digest.update(f"{path}\0{count}\0".encode())
        digest.update(repr(sorted(self._spec.items())).encode() if self._spec else b"raw")
        return (
            f"TFRecordDataSource({len(self._files)} files, {len(self)} records, "
            f"sha1={digest.hexdigest()})"
        )


# ---- files and indexes ---------------------------------------------------------------------


def _files(paths, storage_options, filesystem) -> List[Location]:
    """Paths and patterns -> the files, in order (each glob's matches sorted)."""
    if paths is None:
        raise TypeError("paths must be a path, a glob pattern or a list of them, not None")
    if isinstance(paths, (str, os.PathLike, Location)):
        paths = [paths]
    files: List[Location] = []
    for p in paths:
        if not isinstance(p, (str, os.PathLike, Location)):
            raise TypeError(f"each path must be a str or os.PathLike, not {type(p).__name__}")
        files.extend(expand(p, storage_options, filesystem))
    if not files:
        raise ValueError("no TFRecord files given")
    return files


def _index_files(
    files: List[Location], index, storage_options, filesystem
) -> List[Optional[Location]]:
    """Per file: its index file, or None (to be built). "auto": ``FILE.idx`` where it exists
    (one listing per directory)."""

    def given(path) -> Location:
        return resolve_beside(path, storage_options, filesystem)

    if index is None or (isinstance(index, str) and index == "auto"):
        return find_indexes(files)
    if isinstance(index, (str, os.PathLike, Location)):
        if len(files) != 1:
            raise ValueError(
                f"one index path given for {len(files)} files: pass a list or a "
                "dict {file: index path}"
            )
        return [given(index)]
    if isinstance(index, Mapping):
        named = {_url(k): v for k, v in index.items()}
        wanted = [named.get(f.url) for f in files]
        auto = iter(find_indexes([f for f, ix in zip(files, wanted) if ix is None]))
        return [next(auto) if ix is None else given(ix) for ix in wanted]
    index = list(index)
    if len(index) != len(files):
        raise ValueError(f"{len(index)} index paths for {len(files)} files")
    auto = iter(find_indexes([f for f, ix in zip(files, index) if ix is None]))
    return [next(auto) if ix is None else given(ix) for ix in index]


def _url(path) -> str:
    """A file as the dict of indexes may name it: a path, a URL or a Location."""
    return path.url if isinstance(path, Location) else os.fsdecode(os.fspath(path))


def _checked_index(path: Location, index_file: Location) -> Index:
    """The index in ``index_file``, once opening a reader with it has checked that it ends
    where the file does."""
    with IndexedTFRecordReader(path, index_file, verify=False) as reader:
        return reader.offsets, reader.sizes


def _build_indexes(files: List[Location]) -> List[Index]:
    """The indexes of files that have no index file: a scan of the record headers of each, a
    remote object streamed once per version per machine (the index cache), several through one
    read-ahead."""
    for f in files:  # refused before any is scanned (the scan of a remote object checks again)
        compression = detected_compression(f)
        if compression:
            raise ValueError(
                f"{f.name} cannot be indexed: compressed ({compression}); random "
                "access needs an uncompressed TFRecord file"
            )
    return indexes_of(files)


# ---- open files ----------------------------------------------------------------------------


class _OpenFiles:
    """The readers a process has open: at most ``limit``, the least recently used closed first,
    but never one a thread is reading from (then more stay open until it is done)."""

    def __init__(self, limit: int):
        self._limit = limit
        self._lock = threading.Lock()
        self._readers: "collections.OrderedDict[int, IndexedTFRecordReader]" = (
            collections.OrderedDict()
        )
        self._users: Dict[int, int] = collections.defaultdict(int)
        self._pid = os.getpid()

    def use(self, k: int, opener) -> "_Using":
        return _Using(self, k, opener)

    def _acquire(self, k: int, opener) -> IndexedTFRecordReader:
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's readers are not ours to close
                self._readers.clear()
                self._users.clear()
                self._pid = os.getpid()
            reader = self._readers.get(k)
            if reader is not None:
                self._readers.move_to_end(k)
                self._users[k] += 1
                return reader
        reader = opener(k)  # outside the lock: opening a remote file takes a request
        with self._lock:
            if k in self._readers:  # another thread opened it meanwhile: use that one
                reader.close()
                reader = self._readers[k]
                self._readers.move_to_end(k)
            else:
                self._readers[k] = reader
            self._users[k] += 1
            closing = self._evict()
        for old in closing:
            old.close()
        return reader

    def _release(self, k: int) -> None:
        with self._lock:
            self._users[k] -= 1
            closing = self._evict()
        for old in closing:
            old.close()

    def _evict(self) -> list:
        """Readers to close (called under the lock): the least recently used idle ones."""
        closing = []
        for key in list(self._readers):
            if len(self._readers) <= self._limit:
                break
            if self._users[key] == 0:
                closing.append(self._readers.pop(key))
                del self._users[key]
        return closing

    def close_all(self) -> None:
        with self._lock:
            readers = list(self._readers.values())
            self._readers.clear()
            self._users.clear()
        for reader in readers:
            reader.close()

    def __len__(self) -> int:
        return len(self._readers)


class _Using:
    __slots__ = ("_files", "_k", "_opener")

    def __init__(self, files: _OpenFiles, k: int, opener):
        self._files, self._k, self._opener = files, k, opener

    def __enter__(self) -> IndexedTFRecordReader:
        return self._files._acquire(self._k, self._opener)

    def __exit__(self, *exc) -> None:
        self._files._release(self._k)


# ---- parsed rows -----------------------------------------------------------------------------


def _rows(columns: Dict[str, Any], spec: Mapping[str, Any], n: int) -> List[dict]:
    """Parsed columns of n records -> n dicts of per-record numpy values."""
    per_feature = [_column_rows(col, spec.get(name), n) for name, col in columns.items()]
    names = list(columns)
    return (
        [dict(zip(names, values)) for values in zip(*per_feature)]
        if names
        else [{} for _ in range(n)]
    )


def _objects(values: list) -> np.ndarray:
    """A 1-D object array of bytes (np.array would make an |S array, which drops trailing
    NUL bytes)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _column_rows(col, s, n: int) -> list:
    """One parsed column -> its n per-record values."""
    if isinstance(col, np.ndarray):
        return list(col)
    if isinstance(col, BytesColumn):
        if col.row_splits is None:
            return col.to_list()
        shape = s.shape if isinstance(s, FixedLen) and len(s.shape) > 1 else None
        rows = [_objects(values) for values in col.to_list()]
        return rows if shape is None else [row.reshape(shape) for row in rows]
    if isinstance(col, Ragged) and isinstance(col.values, np.ndarray):
        splits = col.row_splits.tolist()
        return [col.values[a:b] for a, b in zip(splits[:-1], splits[1:])]
    return list(col)


def _column_batch(col, s, n: int):
    """One parsed column -> the batch's value: an array [n, ...] for FixedLen, else a list."""
    if isinstance(col, BytesColumn) and isinstance(s, FixedLen):
        return _objects(col.to_list(flat=True)).reshape((n,) + s.shape)
    if isinstance(col, np.ndarray):
        return col
    return _column_rows(col, s, n)
