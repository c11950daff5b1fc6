"""PyTorch datasets over TFRecord files (needs ``pip install tfrec_fast[torch]``).

- :class:`TFRecordDataset`: an ``IterableDataset`` streaming one or many files, split across
  DataLoader workers and distributed ranks so every record is read exactly once per epoch;
  optional bounded shuffle buffer, reproducible per epoch (:meth:`~TFRecordDataset.set_epoch`).
- :class:`MultiTFRecordDataset`: several datasets mixed by weight (the ``tfrecord`` package's
  ``splits``), infinite by default.
- :class:`IndexedTFRecordDataset`: a map-style ``Dataset`` (random access through an index):
  works with any sampler, including ``RandomSampler`` (an exact shuffle) and
  ``DistributedSampler``; ``__getitems__`` reads a whole DataLoader batch in one call.

The first four positional parameters of TFRecordDataset and MultiTFRecordDataset follow
``tfrecord.torch.dataset`` (``data_path, index_path, description, shuffle_queue_size,
transform``), and those names are accepted as keywords, so switching is an import change.

Records come out as dicts of tensors made with ``torch.from_numpy`` from the parsed columns
(no copy): each record's tensors are views of its batch's column. Values by spec:

- ``FixedLen(shape, "int64" | "float32")`` -> tensor ``shape`` (batched: ``[B, *shape]``)
- ``FixedLen(shape, "uint8" | any numpy dtype)`` (raw bytes feature) -> tensor of that dtype
- ``FixedLen((), "bytes")`` -> ``bytes``; ``FixedLen((k,), "bytes")``/``VarLen("bytes")`` ->
  list of ``bytes`` (batched: a list per record)
- ``VarLen("int64" | "float32")`` -> 1-D tensor (batched: a list of B tensors, or with
  ``ragged="splits"`` a tuple ``(values, row_splits)``, row i being
  ``values[row_splits[i]:row_splits[i + 1]]``)
- a ``tfrecord``-package description (``{"name": "byte" | "int" | "float"}`` or a list of names):
  numbers -> 1-D tensors, a bytes feature -> ``bytes`` when it has one value, else a list
- ``spec=None`` -> the serialized record as ``bytes`` (the tfrecord package decodes every
  feature then; pass the names instead).
"""

from __future__ import annotations

import collections.abc
import itertools
import operator
import os
import warnings
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional,
                    Sequence, Tuple)

import numpy as np
import torch
import torch.utils.data

from . import _column_batches, _loader, _pipeline
from ._core import Kind
from .errors import ExampleParseError
from .example import BytesColumn, FixedLen, Ragged, VarLen, _KIND_NAMES, normalize_spec, parse_examples
from .records import ITER_BATCH_BYTES, RecordBatch, normalize_compression

__all__ = ["TFRecordDataset", "MultiTFRecordDataset", "IndexedTFRecordDataset", "collate"]

# Reads remembered for naming the file of a parse error (with threads: more, see _output).
_READ_LOG = 2


# ---- columns -> tensors ------------------------------------------------------------------

def _tensor(array: np.ndarray) -> torch.Tensor:
    """torch.from_numpy, sharing memory; read-only views (of file data) are shared as well
    (torch has no read-only tensors: writing into one changes only that batch's buffer)."""
    if array.flags.writeable:
        return torch.from_numpy(array)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


def _compat_names(spec) -> set:
    """Features named tfrecord-package style (a list of names, or kind strings): their bytes
    values are unwrapped to ``bytes`` when a record holds exactly one."""
    if spec is None:
        return set()
    if isinstance(spec, (list, tuple)):
        return {str(n) for n in spec}
    return {k for k, v in spec.items() if isinstance(v, str)}


def _byte_rows(column: BytesColumn, compat: bool) -> list:
    rows = column.to_list()
    if compat and column.row_splits is not None:
        rows = [r[0] if len(r) == 1 else r for r in rows]
    return rows


class _Record(dict):
    """A record as a plain dict of its values, of a type whose batches torch's default collate
    hands to :func:`_collate_records`: in a DataLoader worker, their tensors then travel through
    the worker's shared-memory ring instead of a new shared-memory segment and a file descriptor
    each (~1 ms a batch). Datasets with ``worker_ring=False`` give plain dicts."""


def _collate_records(batch, *, collate_fn_map=None):
    """default_collate of records: a plain dict of the collated values, as for plain dicts.
    Numeric arrays of one shape are stacked in one numpy call (default_collate makes a tensor
    of each first: 60% of a drop-in DataLoader's time, bench/RESULTS.md #12); in a worker,
    tensors are stacked in private memory and go through the ring."""
    handoff = _worker_ring_handoff()
    fns = collate_fn_map if handoff is None else _private_stacking(collate_fn_map)
    out = {}
    for key in batch[0]:
        values = [d[key] for d in batch]
        stacked = _stacked_arrays(values)
        out[key] = stacked if stacked is not None else _torch_collate(values, collate_fn_map=fns)
    return handoff(out) if handoff is not None else out


def _stacked_arrays(values: list) -> Optional[torch.Tensor]:
    """What default_collate makes of numeric numpy arrays of one shape and dtype (a tensor of
    them stacked), or None for anything else (left to torch, errors included)."""
    first = values[0]
    if type(first) is not np.ndarray or not first.ndim or first.dtype.kind not in "biuf":
        return None
    shape, dtype = first.shape, first.dtype
    # Every value an array of that shape and dtype, checked in C (map and set: no Python frame
    # per value, which cost as much as the stacking).
    if set(map(type, values)) != _JUST_ARRAYS or set(map(_shape_and_dtype, values)) != {(shape, dtype)}:
        return None
    return torch.from_numpy(np.concatenate(values)).view((len(values),) + shape)


_JUST_ARRAYS = {np.ndarray}
_shape_and_dtype = operator.attrgetter("shape", "dtype")


def _private_stacking(collate_fn_map):
    """collate_fn_map with tensors stacked in private memory (default_collate stacks into a new
    shared-memory segment inside a worker: the ring is that segment here)."""
    fns = dict(collate_fn_map or default_collate_fn_map)
    fns[torch.Tensor] = lambda batch, *, collate_fn_map=None: torch.stack(batch, 0)
    return fns


try:
    from torch.utils.data._utils.collate import collate as _torch_collate
    from torch.utils.data._utils.collate import default_collate_fn_map
    default_collate_fn_map[_Record] = _collate_records
except ImportError:  # an older torch: default_collate treats them as the dicts they are
    pass


def _one_per_row(row_splits: np.ndarray) -> bool:
    return bool(np.all(np.diff(row_splits) == 1))


def _numpy_rows(col, n: int) -> list:
    """The ``tfrecord`` package's per-record values: int64/float32 arrays, ``bytes`` for one
    bytes value and an ``|S`` array for several (what its transforms are written for)."""
    if isinstance(col, BytesColumn):
        if col.row_splits is None or _one_per_row(col.row_splits):
            return col.to_list(flat=True)
        return [r[0] if len(r) == 1 else np.array(r, dtype=bytes) for r in col.to_list()]
    if isinstance(col, Ragged):  # views of the batch's own (fresh, private) column
        values, splits = col.values, col.row_splits
        if n and splits[0] == 0 and splits[-1] % n == 0 and np.all(
                np.diff(splits) == splits[-1] // n):  # every row as long: rows of a 2-D view
            return list(values.reshape(n, splits[-1] // n))
        splits = splits.tolist()
        return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
    return list(col)


def _rows(columns: Mapping[str, Any], n: int, compat: set, record=_Record) -> Iterator[dict]:
    """Parsed columns of n records -> n dicts (of type ``record``) of per-record values: tensor
    views, or for features named the ``tfrecord`` package's way its numpy values (tensors come
    from the collate). Each dict is made when it is asked for: dicts are what the garbage
    collector follows, and the fewer of them live at once the rarer its full passes (a full
    pass over a DataLoader worker's heap took ~0.4 s per epoch, measured)."""
    per_feature: List[Any] = []
    for name, col in columns.items():
        if name in compat:
            per_feature.append(_numpy_rows(col, n))
        elif isinstance(col, np.ndarray):
            per_feature.append(_tensor(col).unbind(0) if n else ())
        elif isinstance(col, Ragged):
            values = _tensor(col.values)
            splits = col.row_splits.tolist()
            per_feature.append([values[a:b] for a, b in zip(splits[:-1], splits[1:])])
        else:
            per_feature.append(_byte_rows(col, name in compat))
    names = list(columns)
    if not names:
        return (record() for _ in range(n))
    return map(record, map(zip, itertools.repeat(names), zip(*per_feature)))  # (no frame a row)


def _batch(columns: Mapping[str, Any], compat: set, ragged: str) -> dict:
    """Parsed columns of a batch -> one dict of batched values."""
    out: Dict[str, Any] = {}
    for name, col in columns.items():
        if isinstance(col, np.ndarray):
            out[name] = _tensor(col)
        elif isinstance(col, Ragged):
            values = _tensor(col.values)
            if ragged == "splits":
                s = col.row_splits
                out[name] = (values[int(s[0]):int(s[-1])], torch.from_numpy(s - s[0]))
            else:
                splits = col.row_splits.tolist()
                out[name] = [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
        elif isinstance(col, list):  # bytes made into Python objects already (_piece)
            out[name] = col
        else:
            out[name] = _byte_rows(col, name in compat)
    return out


def _arrays_only(spec: Optional[Mapping[str, Any]]) -> bool:
    """Whether every feature of a spec parses into numpy arrays or Ragged numbers (no bytes
    column, nothing typed only from the data)."""
    if not spec:
        return False
    for s in spec.values():
        if isinstance(s, FixedLen) and (s.from_bytes or s.kind != Kind.BYTES):
            continue
        if isinstance(s, VarLen) and s.kind != Kind.BYTES:
            continue
        return False
    return True


def _until_error(pieces: Iterator[tuple]) -> Iterator[tuple]:
    """(records, columns) of each (records, columns, error), raising the error after its
    records."""
    for n, columns, error in pieces:
        yield n, columns
        if error is not None:
            raise error


def _worker_ring_handoff() -> Optional[Callable]:
    """In a DataLoader worker: puts dict-of-tensor batches into the worker's shared-memory ring
    (see tfrec_fast._worker_ring), far cheaper to send than torch's per-tensor sharing."""
    if torch.utils.data.get_worker_info() is None:
        return None
    from ._worker_ring import ring_writer

    def handoff(batch):
        writer = ring_writer(batch)
        return writer.put(batch) if writer is not None else batch
    return handoff


class _Rows(collections.abc.Sequence):
    """The rows of one batch from its parsed columns, made only when someone looks at them
    (default_collate does); :func:`collate` takes the columns as the batch instead, so neither
    the per-row dicts nor the stacking are paid for."""

    def __init__(self, columns: Mapping[str, np.ndarray], n: int, compat: set):
        self._columns, self._n, self._compat = columns, n, compat
        self._rows: Optional[list] = None
        self.batch = {name: _tensor(c) for name, c in columns.items()}

    def _made(self) -> list:
        if self._rows is None:
            self._rows = list(_rows(self._columns, self._n, self._compat))
        return self._rows

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        return self._made()[i]

    def __iter__(self):
        return iter(self._made())

    def __eq__(self, other):
        return self._made() == (other._made() if isinstance(other, _Rows) else other)

    def __repr__(self):
        return repr(self._made())


def collate(samples):
    """A DataLoader ``collate_fn``: ``default_collate``, except that in a worker a batch of dicts
    of tensors is stacked in private memory and handed over through the worker's shared-memory
    ring (as :class:`TFRecordDataset` does with ``batch_size``). Use it with per-record datasets
    (``IndexedTFRecordDataset``, ``TFRecordDataset`` without ``batch_size``) and
    ``num_workers > 0``: the same batches, much cheaper to send."""
    handoff = _worker_ring_handoff()
    if type(samples) is _Rows:
        return handoff(samples.batch) if handoff else samples.batch
    if handoff is None or not samples or not all(
            type(s) is dict and s.keys() == samples[0].keys() and
            all(isinstance(v, torch.Tensor) for v in s.values()) for s in samples):
        return torch.utils.data.default_collate(samples)
    return handoff({k: torch.stack([s[k] for s in samples]) for k in samples[0]})


# ---- rank / worker -------------------------------------------------------------------------

def _distributed() -> Optional[tuple]:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


def _resolve_rank(rank, world_size) -> Optional[tuple]:
    if rank is None and world_size is None:
        return _distributed()
    if rank is None or world_size is None:
        raise ValueError("give both rank and world_size, or neither")
    rank, world_size = int(rank), int(world_size)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} out of range for world_size {world_size}")
    return rank, world_size


def _is_spec(value) -> bool:
    """Whether a second positional argument is a feature spec rather than an index."""
    if isinstance(value, Mapping):
        return any(isinstance(v, (FixedLen, VarLen)) or (isinstance(v, str) and v in _KIND_NAMES)
                   or type(v).__name__ in ("FixedLenFeature", "VarLenFeature")
                   for v in value.values())
    return False


class _Slot(NamedTuple):
    rank: int
    world: int
    worker: int
    workers: int
    seed: int

    @property
    def position(self) -> int:  # this (rank, worker) among all of the job's
        return self.rank * self.workers + self.worker

    @property
    def slots(self) -> int:  # (rank, worker) pairs in the job
        return self.world * self.workers


class _Streaming(torch.utils.data.IterableDataset):
    """What TFRecordDataset and MultiTFRecordDataset share: the split, the epoch, the output."""

    def _setup(self, spec, shuffle_buffer, transform, batch_size, drop_last, ragged, seed,
               rank, world_size, compression, verify, shuffle_files, worker_ring, uneven,
               num_threads):
        if seed is None and world_size not in (None, 1):
            raise ValueError("seed=None gives each rank its own file order: pass an int seed")
        if ragged not in ("list", "splits"):
            raise ValueError("ragged must be 'list' or 'splits'")
        if batch_size is not None and int(batch_size) < 1:
            raise ValueError("batch_size must be positive")
        self.spec = spec
        self._compat = _compat_names(spec)
        self._spec = None if spec is None else normalize_spec(spec)
        self.shuffle_buffer = int(shuffle_buffer or 0)
        self.shuffle_files = self.shuffle_buffer > 0 if shuffle_files is None else bool(
            shuffle_files)
        self.transform = transform
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last = bool(drop_last)
        self.ragged = ragged
        self.seed = seed
        self.compression = normalize_compression(compression)
        self.verify = verify
        self.worker_ring = bool(worker_ring)
        if uneven not in ("pad", "drop"):
            raise ValueError(f"uneven must be 'pad' or 'drop', not {uneven!r}")
        self.uneven = uneven
        self.num_threads = None if num_threads is None else _pipeline.check_threads(num_threads)
        self.epoch = 0
        # The last batches read, with their file and first record's index in it: what parse
        # errors name (a batch is parsed right after it is read, or mixed from the last reads).
        self._read_log: collections.deque = collections.deque(maxlen=_READ_LOG)
        self._given_rank = (rank, world_size)
        self._rank = _resolve_rank(rank, world_size)

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch: shuffles are a function of (seed, epoch). Call it before each epoch
        (as with DistributedSampler), before iterating the DataLoader; with
        ``persistent_workers=True`` the workers keep the epoch they started with."""
        self.epoch = int(epoch)

    def __getstate__(self):
        # Pickled for spawned DataLoader workers: pin the rank now, while the process group
        # of the main process is visible.
        state = self.__dict__.copy()
        state["_read_log"] = collections.deque(maxlen=_READ_LOG)
        if state["_rank"] is None:
            state["_rank"] = _distributed()
        return state

    def _slot(self) -> "_Slot":
        """Who reads in this iteration: rank, worker and the base seed."""
        rank, world = self._rank or _distributed() or (0, 1)
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.seed is not None:
            seed = self.seed
        elif info is not None:
            seed = info.seed - info.id  # DataLoader's base seed: fresh each epoch, same per worker
        else:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        return _Slot(rank, world, worker, workers, seed)

    def _segments(self, files, index_paths, slot: "_Slot", *words):
        """Batches of this slot's share of ``files`` (Locations) for this epoch. Counts and
        indexes come from the index files, or once per machine from the index cache (see
        tfrec_fast.storage.cache), never from every worker reading the data; a slot's reads
        fetch its records' bytes and no more."""
        order = list(range(len(files)))
        if self.shuffle_files:
            _loader.epoch_rng(slot.seed, self.epoch, 0x66696C65, *words).shuffle(order)

        def count(i):
            return _loader.record_index(files[i], index_paths[i], self.compression).count

        if slot.world > 1:  # every rank the same number of records: cut by record ranges
            mode, segments = "ranges", _loader.plan_ranks(order, count, slot.rank, slot.world,
                                                          slot.worker, slot.workers, self.uneven)
        else:
            mode, segments = _loader.plan_slot(len(files), order, slot.position, slot.slots, count)
        # Reads of batch_size records (a read is a batch, as is); with a spec, small records in
        # whole multiples of batch_size up to cache size, so few reads and parses make many batches
        # (cut from their columns, _output). Large records are read in cache-sized parts when
        # their bytes become Python objects (made while the read is in cache); when every column
        # is an array, a read is a whole batch, decoded straight into the batch's arrays (parts
        # would cost one more copy of every record, to join them).
        limit = self.batch_size if self.batch_size and not self.shuffle_buffer else None
        cap = ITER_BATCH_BYTES if limit and self._spec is not None else None
        split = not _arrays_only(self._spec)
        for i, start, stop in segments:
            offsets = None
            if mode == "ranges":  # enter at `start`, fetch nothing past `stop`
                offsets = _loader.record_index(files[i], index_paths[i],
                                               self.compression).offsets
            first = start
            for batch in _loader.read_range(files[i], start, stop, offsets=offsets,
                                            compression=self.compression, verify=self.verify,
                                            max_records=limit, max_bytes=cap,
                                            whole_multiples=cap is not None,
                                            split_batches=split):
                self._read_log.append((batch, files[i].name, first))
                first += len(batch)
                yield batch

    def _parse(self, batch: RecordBatch):
        """parse_examples, with errors naming the file and the record's index in it (or, for a
        batch mixed from several reads by shuffling or re-batching, the files it may come from)."""
        try:  # with a pool of threads here (num_threads > 1), each batch on one of them
            return parse_examples(batch, self._spec, num_threads=self._parse_threads())
        except ExampleParseError as error:
            raise self._located(error, batch) from None

    def _located(self, error: ExampleParseError, batch: RecordBatch) -> ExampleParseError:
        log = tuple(self._read_log)  # other threads may append to it
        for read, path, first in log:
            if read is batch:
                return ExampleParseError(error.detail, path=path,
                                         record_index=first + error.record_index,
                                         feature=error.feature)
        paths = list(dict.fromkeys(path for _, path, _ in log))
        return ExampleParseError(
            f"{error.detail} (record {error.record_index} of a batch mixed by shuffling or "
            "re-batching)", path="one of " + ", ".join(paths) if paths else None,
            feature=error.feature)

    def _parse_threads(self) -> Optional[int]:
        """With a pool here (num_threads > 1) each batch parses on one of its threads."""
        return 1 if self._threads() > 1 else None

    def _threads(self) -> int:
        """num_threads, or by default the cores shared among the DataLoader's workers."""
        if self.num_threads is not None:
            return self.num_threads
        info = torch.utils.data.get_worker_info()
        return max(1, _pipeline.default_threads() // (info.num_workers if info else 1))

    def _output(self, batches: Iterator[RecordBatch], rng, shuffled_already=False):
        """Shuffles, batches, parses, converts, transforms. With threads the reading, shuffling
        and batching run on an I/O thread and the parsing on a pool, in order."""
        if self.shuffle_buffer and not shuffled_already:
            batches = _loader.shuffle_records(_loader.records_of(batches), self.shuffle_buffer,
                                              rng, self.batch_size or _loader.SHUFFLE_CHUNK)
        by_columns = self.batch_size is not None and self._spec is not None
        if self.batch_size and not by_columns:
            batches = _loader.rebatch(batches, self.batch_size, self.drop_last)
        transform = self.transform
        handoff = _worker_ring_handoff() if self.batch_size and self.worker_ring else None
        threads = self._threads()
        # The log must reach back past the batches in flight, and no further: it keeps them alive.
        self._read_log = collections.deque(maxlen=2 if threads == 1 else threads + 3)
        parsed_batches = _pipeline.ordered(self._piece if by_columns else self._convert, batches,
                                           threads, size_of=_pipeline.nbytes,
                                           name="tfrec_fast-torch")
        if by_columns:  # each read parsed as it comes, its columns cut and joined into batches
            parsed_batches = ((n, _batch(columns, self._compat, self.ragged)) for n, columns in
                              _column_batches.rebatch(_until_error(parsed_batches),
                                                      self.batch_size, self.drop_last))
        for n, parsed in parsed_batches:
            if self.batch_size:
                out = transform(parsed) if transform else parsed
                yield handoff(out) if handoff and self._spec is not None else out
                continue
            rows = parsed if self._spec is None else _rows(
                parsed, n, self._compat, _Record if self.worker_ring else dict)
            if transform:
                for row in rows:
                    yield transform(row)
            else:
                yield from rows

    def _convert(self, batch: RecordBatch):
        """(records, what they become): a batch's dict of values (batch_size), its parsed
        columns, or its records as bytes (no spec). Runs on the pool when there are threads."""
        if self._spec is None:
            return len(batch), batch.to_list()
        columns = self._parse(batch)
        return len(batch), (_batch(columns, self._compat, self.ragged) if self.batch_size
                            else columns)

    def _piece(self, batch: RecordBatch):
        """(records, columns, error) of a read, for batching by columns: its bytes made into
        Python objects here, while the read is in cache. A bad record's error comes with the
        records before it, which still complete batches."""
        error = None
        try:
            columns = parse_examples(batch, self._spec, num_threads=self._parse_threads())
        except ExampleParseError as raised:
            error = self._located(raised, batch)
            good = raised.record_index or 0
            batch = RecordBatch.from_records(batch[i] for i in range(good))  # (copied)
            columns = parse_examples(batch, self._spec, num_threads=1) if good else {}
        return len(batch), {name: col if isinstance(col, (np.ndarray, Ragged))
                            else _byte_rows(col, name in self._compat)
                            for name, col in columns.items()}, error


class TFRecordDataset(_Streaming):
    """Streams the records of TFRecord files, each exactly once per epoch across the job.

    ``paths``: a path, a glob pattern, or a list of them; URLs too (``s3://``, ``gs://``,
    ``https://``, ...), with ``storage_options`` for fsspec or ``filesystem`` (an fsspec or
    pyarrow filesystem), as for every reader (see :mod:`tfrec_fast.storage`). ``index``: None /
    "auto" (use FILE.idx when present, else build the index when one is needed: for a remote
    object once per machine, kept in the index cache), one index path, a list aligned with the
    files, or a dict {data path: index path}. ``spec``: feature specs for
    :func:`~tfrec_fast.parse_examples` (see the module docstring for what comes out), None for
    raw records. ``transform`` runs on each record (each batch when ``batch_size`` is set: then
    use ``DataLoader(dataset, batch_size=None)``).

    Work split: each DataLoader worker of each rank is a slot (rank and world size come from
    ``rank``/``world_size``, else from an initialised ``torch.distributed``). With several ranks,
    every rank reads the same number of records per epoch, as DistributedSampler gives (a rank
    that runs out first would leave the others waiting in a collective): the records of all
    files, in the epoch's file order, are cut into equal contiguous ranges (a header-only scan
    or the index gives each file's count); when they do not divide evenly, ``uneven="pad"``
    (default) repeats records from the start of the epoch's order so each rank gets
    ceil(N / ranks), ``uneven="drop"`` leaves out the last N mod ranks. Each rank's range is
    cut among its workers. On one rank, with at least as many files as workers, workers take
    whole files (``files[worker::workers]``); otherwise equal record ranges. Files are opened
    only inside the iterating process.

    Shuffling: ``shuffle_buffer=n`` shuffles the file order (the same on every rank: a function of
    ``seed`` and the epoch) and streams records through an n-record buffer seeded by (seed,
    epoch, slot). Call :meth:`set_epoch` every epoch for a new order; ``seed=None`` draws a fresh
    one on every pass instead (single-rank jobs only). A buffer much smaller than a sorted file
    stays biased: use :class:`IndexedTFRecordDataset` with ``RandomSampler`` for an exact shuffle.

    Hand-over from DataLoader workers (``worker_ring=True``): the tensors of a batch that is a
    dict (with ``batch_size``, or torch's default collate of the records, which are dicts of a
    type registered in its ``default_collate_fn_map``) are copied into a shared-memory ring of
    the worker and reach the training process as tensors viewing it, far cheaper than torch's
    per-tensor sharing. The slot is
    reused once every tensor of that batch is freed; while they live (a loop that keeps batches)
    new batches go torch's usual way. Pass ``worker_ring=False`` for torch's way throughout.

    Threads inside each process that iterates (``num_threads``; default: half the cores divided
    by the DataLoader's workers, at most 4, so 1 on a 2-core machine):
    with more than one, reading (and shuffling, re-batching) runs on an I/O thread while up to
    ``num_threads`` batches are parsed at once, output in order. Threads start in the process
    that iterates (never inherited by forked workers) and stop with the iteration.
    """

    def __init__(self, paths=None, index=None, spec=None, shuffle_buffer: int = 0,
                 transform: Optional[Callable] = None, *, batch_size: Optional[int] = None,
                 drop_last: bool = False, ragged: str = "list", seed: Optional[int] = 0,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 compression: Optional[str] = None, verify: bool = True,
                 shuffle_files: Optional[bool] = None, worker_ring: bool = True,
                 uneven: str = "pad", num_threads: Optional[int] = None,
                 storage_options=None, filesystem=None,
                 # the tfrecord package's names:
                 data_path=None, index_path=None, description=None, shuffle_queue_size=None,
                 compression_type=None, sequence_description=None):
        super().__init__()
        if sequence_description is not None:
            raise NotImplementedError("SequenceExample datasets: use tfrec_fast.reader."
                                      "tfrecord_loader(sequence_description=...)")
        paths = _alias(paths, data_path, "paths", "data_path")
        index = _alias(index, index_path, "index", "index_path")
        spec = _alias(spec, description, "spec", "description")
        shuffle_buffer = _alias(shuffle_buffer or None, shuffle_queue_size, "shuffle_buffer",
                                "shuffle_queue_size") or 0
        compression = _alias(compression, compression_type, "compression", "compression_type")
        if paths is None:
            raise TypeError("TFRecordDataset needs paths")
        if spec is None and _is_spec(index):
            index, spec = None, index
        self._locations = _loader.expand_locations(paths, storage_options, filesystem)
        self.files = [loc.url for loc in self._locations]
        self.index = index
        self._index_paths = _loader.index_paths(self._locations, index, storage_options,
                                                filesystem)
        self._setup(spec, shuffle_buffer, transform, batch_size, drop_last, ragged, seed, rank,
                    world_size, compression, verify, shuffle_files, worker_ring, uneven,
                    num_threads)

    def __iter__(self):
        slot = self._slot()
        rng = _loader.epoch_rng(slot.seed, self.epoch, slot.position)
        return self._output(self._segments(self._locations, self._index_paths, slot), rng)

    def __repr__(self):
        return (f"TFRecordDataset({len(self.files)} files, shuffle_buffer={self.shuffle_buffer}, "
                f"batch_size={self.batch_size}, epoch={self.epoch})")


class MultiTFRecordDataset(_Streaming):
    """Mixes several datasets, drawing each record from split ``name`` with probability
    ``splits[name] / sum(splits)`` (the ``tfrecord`` package's MultiTFRecordDataset).

    ``paths`` is a pattern with ``{}`` (formatted with each split name, as in the tfrecord
    package) or a dict {name: path, glob or list}; ``index`` likewise a pattern, a dict, or None
    ("auto"). With ``infinite=True`` (the default) each split restarts when it ends (with its
    next shuffle) and the stream never ends; otherwise a finished split drops out and the
    others' weights are renormalised. Each split is divided among the job's slots as in
    :class:`TFRecordDataset`; the mixing draws are seeded by (seed, epoch, slot). URLs with
    ``storage_options`` / ``filesystem`` as in :class:`TFRecordDataset`.
    """

    def __init__(self, paths=None, index=None, splits: Optional[Mapping[str, float]] = None,
                 spec=None, shuffle_buffer: int = 0, transform: Optional[Callable] = None, *,
                 infinite: bool = True, batch_size: Optional[int] = None, drop_last: bool = False,
                 ragged: str = "list", seed: Optional[int] = 0, rank: Optional[int] = None,
                 world_size: Optional[int] = None, compression: Optional[str] = None,
                 verify: bool = True, shuffle_files: Optional[bool] = None,
                 worker_ring: bool = True, uneven: str = "pad",
                 num_threads: Optional[int] = None, storage_options=None, filesystem=None,
                 data_pattern=None, index_pattern=None, description=None,
                 shuffle_queue_size=None, compression_type=None, sequence_description=None):
        super().__init__()
        if sequence_description is not None:
            raise NotImplementedError("SequenceExample datasets are not supported")
        paths = _alias(paths, data_pattern, "paths", "data_pattern")
        index = _alias(index, index_pattern, "index", "index_pattern")
        spec = _alias(spec, description, "spec", "description")
        shuffle_buffer = _alias(shuffle_buffer or None, shuffle_queue_size, "shuffle_buffer",
                                "shuffle_queue_size") or 0
        compression = _alias(compression, compression_type, "compression", "compression_type")
        if splits is None and isinstance(index, Mapping) and index and all(
                isinstance(v, (int, float)) for v in index.values()):
            index, splits = None, index
        if splits is None:
            if not isinstance(paths, Mapping):
                raise TypeError("MultiTFRecordDataset needs splits={name: weight}")
            splits = {name: 1.0 for name in paths}
        self.splits = {str(k): float(v) for k, v in splits.items()}
        if not self.splits or any(w < 0 for w in self.splits.values()) or not sum(
                self.splits.values()):
            raise ValueError("splits needs non-negative weights with a positive sum")
        self.files: Dict[str, List[str]] = {}
        self._locations: Dict[str, list] = {}
        self._index_paths: Dict[str, list] = {}
        for name in self.splits:
            p = paths.format(name) if isinstance(paths, str) else paths[name]
            self._locations[name] = _loader.expand_locations(p, storage_options, filesystem)
            self.files[name] = [loc.url for loc in self._locations[name]]
            if isinstance(index, str) and index != "auto":
                ix = [index.format(name)] if len(self.files[name]) == 1 else None
                if ix is None:
                    raise ValueError("an index pattern needs one file per split")
            elif isinstance(index, Mapping):
                ix = index.get(name)
            else:
                ix = None
            self._index_paths[name] = _loader.index_paths(self._locations[name], ix,
                                                          storage_options, filesystem)
        self.infinite = bool(infinite)
        self._setup(spec, shuffle_buffer, transform, batch_size, drop_last, ragged, seed, rank,
                    world_size, compression, verify, shuffle_files, worker_ring, uneven,
                    num_threads)

    def _split_records(self, k, name, slot):
        cycle = 0
        while True:
            got = 0
            for batch in self._segments(self._locations[name], self._index_paths[name], slot, k,
                                        cycle):
                got += len(batch)
                yield from batch
            if not self.infinite or not got:
                return
            cycle += 1

    def _mixed(self, slot, rng):
        names = [n for n, w in self.splits.items() if w > 0]
        streams = [self._split_records(k, n, slot) for k, n in enumerate(names)]
        weights = np.array([self.splits[n] for n in names])
        while streams:
            p = weights / weights.sum()
            for choice in rng.choice(len(streams), size=1024, p=p):
                try:
                    yield next(streams[choice])
                except StopIteration:
                    del streams[choice]
                    weights = np.delete(weights, choice)
                    break

    def __iter__(self):
        slot = self._slot()
        rng = _loader.epoch_rng(slot.seed, self.epoch, slot.position)
        records = self._mixed(slot, _loader.epoch_rng(slot.seed, self.epoch, slot.position, 1))
        if self.shuffle_buffer:
            batches = _loader.shuffle_records(records, self.shuffle_buffer, rng,
                                              self.batch_size or _loader.SHUFFLE_CHUNK)
        else:
            batches = _loader.chunks(records, self.batch_size or _loader.SHUFFLE_CHUNK)
        return self._output(batches, rng, shuffled_already=True)


class IndexedTFRecordDataset(torch.utils.data.Dataset):
    """Random access to the records of TFRecord files through their indexes (map-style).

    ``dataset[i]`` is record i of the files concatenated (in the order given; globs sorted),
    parsed with ``spec`` into a dict of tensors as :class:`TFRecordDataset` yields them (raw
    ``bytes`` when ``spec`` is None), then passed to ``transform``. ``__getitems__`` (used by
    DataLoader for each batch) reads all of a batch's records with one
    ``IndexedTFRecordReader.get_batch`` per file and parses them in one call; with
    ``collate_fn=tfrec_fast.torch.collate`` those parsed columns are the batch (no per-record
    dicts, no stacking) when they are all dense and there is no ``transform``. Use with any
    sampler: ``RandomSampler`` (an exact shuffle), ``DistributedSampler`` (call its set_epoch).

    ``index``, ``storage_options`` and ``filesystem`` as in :class:`TFRecordDataset`; indexes not
    found beside the files are built when the dataset is created (so ``len()`` is known), in the
    process that makes it: a remote object is scanned once per version per machine (the index
    cache), several of them through one read-ahead stream. Files are opened in the process
    that reads them (safe with DataLoader workers); remote records are fetched by coalesced
    range requests at the version the dataset planned with. Compressed files cannot be indexed.
    """

    def __init__(self, paths, spec=None, index=None, *, transform: Optional[Callable] = None,
                 verify: bool = True, storage_options=None, filesystem=None):
        from .index import indexes_of
        from .storage import load_index

        self._locations = _loader.expand_locations(paths, storage_options, filesystem)
        self.files = [loc.url for loc in self._locations]
        self.spec = spec
        self._compat = _compat_names(spec)
        self._spec = None if spec is None else normalize_spec(spec)
        self.transform = transform
        self.verify = verify
        # Counted here, in the process that makes the dataset (before DataLoader workers start):
        # from the index files, or by one scan per object version per machine (index cache).
        index_files = _loader.index_paths(self._locations, index, storage_options, filesystem)
        missing = [loc for loc, ix in zip(self._locations, index_files) if ix is None]
        scanned = iter(indexes_of(missing))
        self._indexes: List[Tuple[np.ndarray, np.ndarray]] = [
            load_index(ix) if ix is not None else next(scanned) for ix in index_files]
        lengths = [len(offsets) for offsets, _ in self._indexes]
        self._starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        self._readers: Dict[int, Any] = {}
        self._pid = os.getpid()

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_readers"] = {}
        return state

    def _reader(self, k: int):
        if self._pid != os.getpid():
            self._readers, self._pid = {}, os.getpid()
        reader = self._readers.get(k)
        if reader is None:
            from .index import IndexedTFRecordReader
            reader = IndexedTFRecordReader(self._locations[k], self._indexes[k],
                                           verify=self.verify)
            self._readers[k] = reader
        return reader

    def __getitem__(self, i: int):
        return self.__getitems__([i])[0]

    def __getitems__(self, indices: Sequence[int]) -> Sequence[dict]:
        n = len(self)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        idx = np.where(idx < 0, idx + n, idx)
        if len(idx) and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"record index out of range for {n} records")
        files = np.searchsorted(self._starts, idx, side="right") - 1
        out: list = [None] * len(idx)
        single = len(idx) > 0 and files[0] == files[-1] and (files == files[0]).all()
        for k in np.unique(files).tolist():
            where = np.flatnonzero(files == k)
            batch = self._reader(k).get_batch(idx[where] - self._starts[k])
            rows: Iterable[Any]
            if self._spec is None:
                rows = batch.to_list()
            else:
                columns = parse_examples(batch, self._spec, name=self._locations[k].name)
                if single and self.transform is None and all(
                        isinstance(c, np.ndarray) for c in columns.values()):
                    # The whole batch is these columns, in this order: collate() takes them
                    # as they are instead of stacking rows.
                    return _Rows(columns, len(batch), self._compat)
                rows = _rows(columns, len(batch), self._compat)
            for j, row in zip(where.tolist(), rows):
                out[j] = row
        if self.transform is not None:
            out = [self.transform(row) for row in out]
        return out

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers = {}

    def __repr__(self):
        return f"IndexedTFRecordDataset({len(self.files)} files, {len(self)} records)"


def _alias(value, old, name, old_name):
    if old is None:
        return value
    if value is not None:
        raise TypeError(f"give {name} or {old_name}, not both")
    return old
