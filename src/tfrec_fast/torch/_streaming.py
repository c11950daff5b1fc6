"""Streaming datasets: the records of TFRecord files split among a job's (rank, worker) slots,
optionally shuffled through a bounded buffer, parsed and yielded as records or batches."""

from __future__ import annotations

import collections
import functools
from typing import Callable, Iterator, List, Mapping, Optional, Sequence, Tuple

import torch
import torch.utils.data

from .. import _loader, _pipeline
from ..errors import ExampleParseError
from ..example import parse_examples
from ..records import ITER_BATCH_BYTES, RecordBatch, normalize_compression
from ..spec import FixedLen, VarLen, normalize_spec
from . import _column_batches, _plan, _shuffle, _state, _stream, _tensors
from ._collate import worker_ring_handoff
from ._epoch import SharedEpoch
from ._plan import Piece, Run
from ._resumable import Resumable
from ._slots import Slot, distributed, resolve_rank, worker
from ._stream import Place, Progress

__all__ = ["TFRecordDataset"]

# Reads remembered for naming the file of a parse error (with threads: more, see _output).
_READ_LOG = 2


def _is_spec(value) -> bool:
    """Whether a second positional argument is a feature spec rather than an index."""
    if isinstance(value, Mapping):
        return any(
            isinstance(v, (FixedLen, VarLen, str))
            or type(v).__name__ in ("FixedLenFeature", "VarLenFeature")
            for v in value.values()
        )
    return False


def _until_error(pieces: Iterator[tuple]) -> Iterator[tuple]:
    """(records, columns) of each (records, columns, error), raising the error after its
    records."""
    for n, columns, error in pieces:
        yield n, columns
        if error is not None:
            raise error


class _Pass:
    """One iteration of a slot over its share of an epoch: what state_dict() reports."""

    def __init__(
        self,
        slot: Slot,
        epoch: int,
        number: int,
        runs: Tuple[Run, ...],
        pieces: List[Piece],
        progress: Progress,
    ):
        self.slot, self.epoch, self.number, self.runs = slot, epoch, number, runs
        self.pieces, self.progress = pieces, progress


class _Streaming(Resumable, torch.utils.data.IterableDataset):
    """What TFRecordDataset and MultiTFRecordDataset share: the split, the epoch, the output;
    their state comes with Resumable."""

    def _setup(
        self,
        spec,
        shuffle_buffer,
        transform,
        batch_size,
        drop_last,
        ragged,
        seed,
        rank,
        world_size,
        compression,
        verify,
        shuffle_files,
        worker_ring,
        uneven,
        num_threads,
        copy_bytes,
    ):
        if seed is None and world_size not in (None, 1):
            raise ValueError("seed=None gives each rank its own file order: pass an int seed")
        if ragged not in ("list", "splits"):
            raise ValueError("ragged must be 'list' or 'splits'")
        if batch_size is not None and int(batch_size) < 1:
            raise ValueError("batch_size must be positive")
        self.spec = spec
        self._spec = None if spec is None else normalize_spec(spec)
        self.shuffle_buffer = int(shuffle_buffer or 0)
        self.shuffle_files = (
            self.shuffle_buffer > 0 if shuffle_files is None else bool(shuffle_files)
        )
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
        self.copy_bytes = bool(copy_bytes)
        self._epoch = SharedEpoch()
        self._passes = 0  # iterations begun in this process (seed=None: each with its own seed)
        self._pass: Optional[_Pass] = None  # the latest, for state_dict()
        self._files_print: Optional[list] = None
        self._loaded: Optional[tuple] = None  # (states, from a DataLoader) for the next one
        # The last batches read, with their file and first record's index in it: what parse
        # errors name (a batch is parsed right after it is read, or mixed from the last reads).
        self._read_log: collections.deque = collections.deque(maxlen=_READ_LOG)
        self._given_rank = (rank, world_size)
        self._rank = resolve_rank(rank, world_size)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration reads (see :meth:`set_epoch`)."""
        return self._epoch.epoch

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch: shuffles are a function of (seed, epoch).

        Call it before each epoch (as with DistributedSampler), before iterating the
        DataLoader. The epoch is shared with the copies of the dataset in DataLoader workers,
        persistent ones included: each iteration reads it when it starts.

        Parameters
        ----------
        epoch : int
            The epoch number.
        """
        self._epoch.epoch = int(epoch)

    def __getstate__(self):
        # Pickled for spawned DataLoader workers: pin the rank now, while the process group
        # of the main process is visible.
        state = self.__dict__.copy()
        state["_read_log"] = collections.deque(maxlen=_READ_LOG)
        state["_pass"] = None
        if state["_rank"] is None:
            state["_rank"] = distributed()
        return state

    # ---- who reads, and what --------------------------------------------------------------

    def _fresh_seed(self) -> int:
        """A seed for seed=None outside DataLoader workers."""
        return int(torch.empty((), dtype=torch.int64).random_().item())

    def _slot(self, number: int = 0) -> Slot:
        """Who reads in iteration ``number`` of this process: rank, worker and the base seed."""
        rank, world = self._rank or distributed() or (0, 1)
        info = torch.utils.data.get_worker_info()
        wid, workers = worker()
        if self.seed is not None:
            seed = int(self.seed)
        elif info is not None:
            # DataLoader's base seed: fresh each time workers start, the same in every worker;
            # persistent workers count their iterations to draw a new order each epoch.
            seed = (info.seed - info.id + number) & 0x7FFFFFFFFFFFFFFF
        else:
            seed = self._fresh_seed()
        return Slot(rank, world, wid, workers, seed)

    def _index_of(self, files, index_paths) -> Callable[[int], "_loader.RecordIndex"]:
        def index_of(i):
            return _loader.record_index(files[i], index_paths[i], self.compression)

        return index_of

    def _pieces(
        self, files, index_paths, slot: Slot, epoch: int, runs: Sequence[Run] = (), *words
    ) -> List[Piece]:
        """This slot's share of ``files`` (Locations) in ``epoch`` (after ``runs``). Counts and
        indexes come from the index files, or once per machine from the index cache (see
        tfrec_fast.storage.cache), never from every worker reading the data."""
        order = _plan.file_order(len(files), self.shuffle_files, slot.seed, epoch, *words)
        index_of = self._index_of(files, index_paths)

        def count(i):
            return index_of(i).count

        def first(rank, world, wid, workers, uneven=self.uneven):
            return _plan.first_run(len(files), order, count, rank, world, wid, workers, uneven)

        if not runs:
            return first(slot.rank, slot.world, slot.worker, slot.workers)
        everything = _plan.GlobalOrder(order, count)
        base = _plan.remaining(
            everything, lambda r, w, k, n: first(r, w, k, n, runs[0].uneven), runs, slot.seed, epoch
        )
        return everything.pieces(
            _plan.cut(base, slot.rank, slot.world, slot.worker, slot.workers, self.uneven)
        )

    def _read_options(self) -> dict:
        """How the files are read. Reads of batch_size records (a read is a batch, as is); with a
        spec, small records in whole multiples of batch_size up to cache size, so few reads and
        parses make many batches (cut from their columns, _output). Large records are read in
        cache-sized parts when their bytes become Python objects (made while the read is in
        cache); when every column is an array, a read is a whole batch, decoded straight into
        the batch's arrays (parts would cost one more copy of every record, to join them)."""
        limit = self.batch_size if self.batch_size and not self.shuffle_buffer else None
        cap = ITER_BATCH_BYTES if limit and self._spec is not None else None
        return dict(
            max_records=limit,
            max_bytes=cap,
            whole_multiples=cap is not None,
            split_batches=not _tensors.arrays_only(self._spec),
        )

    def _read(
        self,
        files,
        index_paths,
        pieces: Sequence[Piece],
        place: Place,
        progress: Optional[Progress],
    ) -> Iterator[RecordBatch]:
        """The records of ``pieces`` from ``place`` on; a slot's reads fetch its records' bytes
        and no more."""

        def logged(batch, f, first):
            self._read_log.append((batch, files[f].name, first))

        return _stream.read(
            files,
            pieces,
            place,
            progress,
            self._index_of(files, index_paths),
            compression=self.compression,
            verify=self.verify,
            on_read=logged,
            **self._read_options(),
        )

    def _shuffled(
        self, batches: Iterator[RecordBatch], rng, resumed=None, held=None
    ) -> Iterator[RecordBatch]:
        """Records through the shuffle buffer, as bytes (a buffer pins exactly its records of
        memory, not the batches they came in), then in batches again."""
        records = map(bytes, _loader.records_of(batches))
        return _loader.chunks(
            _shuffle.shuffled(records, self.shuffle_buffer, rng, resumed, held),
            self.batch_size or _loader.SHUFFLE_CHUNK,
        )

    def _resume_place(
        self, resumed: dict, slot: Slot, number: int, pieces: Sequence[Piece], index_of
    ) -> Place:
        """Where stream number ``number`` is: saved by the slot itself (no index needed), or
        found from the files' record counts."""
        hint = resumed["place"]
        if hint is not None and resumed["rank"] == slot.rank:
            return Place(
                number,
                int(hint[0]),
                int(hint[1]),
                None if hint[2] is None else int(hint[2]),
                tuple(int(c) for c in resumed["counts"]),
            )
        return _stream.place_by_counts(number, pieces, lambda i: index_of(i).count)

    def _pass_over(
        self,
        files,
        index_paths,
        slot: Slot,
        epoch: int,
        runs: Tuple[Run, ...],
        resumed: Optional[dict],
        number: int,
        *words,
    ) -> Iterator[RecordBatch]:
        """The records a slot reads in an epoch (from a resumed state's place), shuffled; the
        pass is what state_dict() then reports."""
        pieces = self._pieces(files, index_paths, slot, epoch, runs, *words)
        index_of = self._index_of(files, index_paths)
        size = self.shuffle_buffer
        rng = _plan.shuffle_rng(slot.seed, epoch, slot.position, len(runs))
        handed, at, held = 0, None, None
        place = Place(0, 0, pieces[0].start if pieces else 0, None, ())
        if resumed is not None:
            handed = int(resumed["handed_out"])
            length = resumed["length"]
            if size and handed:
                at = _shuffle.position(size, rng, handed, length)
            place = self._resume_place(
                resumed, slot, at.cursor if at is not None else handed, pieces, index_of
            )
            if at is not None and len(at.held):
                held = _stream.fetch(
                    files, at.held, pieces, place, index_of, self.compression, self.verify
                )
        progress = Progress(
            handed, place.counts, keep_from=lambda: self._cursor(progress.handed_out, None)
        )
        self._pass = _Pass(slot, epoch, number, runs, pieces, progress)
        batches = self._read(files, index_paths, pieces, place, progress)
        if size:
            batches = self._shuffled(batches, rng, at, held)
        return batches

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
                return ExampleParseError(
                    error.detail,
                    path=path,
                    record_index=first + error.record_index,
                    feature=error.feature,
                )
        paths = list(dict.fromkeys(path for _, path, _ in log))
        return ExampleParseError(
            f"{error.detail} (record {error.record_index} of a batch mixed by shuffling or "
            "re-batching)",
            path="one of " + ", ".join(paths) if paths else None,
            feature=error.feature,
        )

    def _parse_threads(self) -> Optional[int]:
        """With a pool here (num_threads > 1) each batch parses on one of its threads."""
        return 1 if self._threads() > 1 else None

    def _threads(self) -> int:
        """num_threads, or by default the cores shared among the DataLoader's workers."""
        if self.num_threads is not None:
            return self.num_threads
        info = torch.utils.data.get_worker_info()
        return max(1, _pipeline.default_threads() // (info.num_workers if info else 1))

    def _output(self, batches: Iterator[RecordBatch], progress: Progress):
        """What an iteration yields; in a DataLoader worker with copy_bytes=False, checked to
        hold no memoryview (they cannot be sent to the training process)."""
        out = self._outputs(batches, progress)
        if self.copy_bytes or torch.utils.data.get_worker_info() is None:
            return out
        what = "a batch" if self.batch_size else "a record"
        return (_tensors.sendable(item, what) for item in out)

    def _outputs(self, batches: Iterator[RecordBatch], progress: Progress):
        """Batches, parses, converts, transforms, counting what it hands out in ``progress``.
        With threads the reading, shuffling and batching run on an I/O thread and the parsing on
        a pool, in order."""
        size = self.batch_size
        by_columns = size is not None and self._spec is not None
        if size is not None and not by_columns:
            batches = _loader.rebatch(batches, size, self.drop_last)
        transform = self.transform
        handoff = worker_ring_handoff() if self.batch_size and self.worker_ring else None
        views = not self.copy_bytes
        threads = self._threads()
        # The log must reach back past the batches in flight, and no further: it keeps them alive.
        self._read_log = collections.deque(maxlen=2 if threads == 1 else threads + 3)
        work = functools.partial(self._piece if by_columns else self._convert, views=views)
        parsed_batches = _pipeline.ordered(
            work, batches, threads, size_of=_pipeline.nbytes, name="tfrec_fast-torch"
        )
        if size is not None and by_columns:  # each read parsed as it comes, its columns cut
            parsed_batches = (
                (n, _tensors.batch(columns, self.ragged))
                for n, columns in _column_batches.rebatch(
                    _until_error(parsed_batches), size, self.drop_last
                )
            )
        for n, parsed in parsed_batches:
            if self.batch_size:
                out = transform(parsed) if transform else parsed
                progress.handed_out += n
                yield handoff(out) if handoff and self._spec is not None else out
                continue
            rows = parsed if self._spec is None else self._records(parsed, n, views)
            for row in rows:
                progress.handed_out += 1
                yield transform(row) if transform else row

    def _records(self, columns, n: int, views: bool) -> Iterator[dict]:
        """The records of a parsed batch, one dict each."""
        return _tensors.rows(columns, n, _tensors.Record if self.worker_ring else dict, views)

    def _convert(self, batch: RecordBatch, views: bool = False):
        """(records, what they become): a batch's dict of values (batch_size), its parsed
        columns, or its records as bytes (no spec). Runs on the pool when there are threads."""
        if self._spec is None:
            return len(batch), batch.to_list()
        columns = self._parse(batch)
        return len(batch), (
            _tensors.batch(columns, self.ragged, views) if self.batch_size else columns
        )

    def _piece(self, batch: RecordBatch, views: bool = False):
        """(records, columns, error) of a read, for batching by columns: its bytes made into
        Python objects here (bytes, or memoryviews with ``views``), while the read is in cache.
        A bad record's error comes with the records before it, which still complete batches."""
        error = None
        try:
            columns = parse_examples(batch, self._spec, num_threads=self._parse_threads())
        except ExampleParseError as raised:
            error = self._located(raised, batch)
            good = raised.record_index or 0
            batch = RecordBatch.from_records(batch[i] for i in range(good))  # (copied)
            columns = parse_examples(batch, self._spec, num_threads=1) if good else {}
        return len(batch), _tensors.piece_columns(columns, views), error


class TFRecordDataset(_Streaming):
    """Streams the records of TFRecord files, each exactly once per epoch across the job.

    Work split: each DataLoader worker of each rank is a slot (rank and world size come from
    ``rank``/``world_size``, else from an initialised ``torch.distributed``). With several ranks,
    every rank reads the same number of records per epoch, as DistributedSampler gives (a rank
    that runs out first would leave the others waiting in a collective): the records of all
    files, in the epoch's file order, are cut into equal contiguous ranges (a header-only scan
    or the index gives each file's count), and each rank's range is cut among its workers. On
    one rank, with at least as many files as workers, workers take whole files
    (``files[worker::workers]``); otherwise equal record ranges. Files are opened only inside the
    iterating process.

    Shuffling: ``shuffle_buffer=n`` shuffles the file order (the same on every rank: a function
    of ``seed`` and the epoch) and streams records through an n-record buffer seeded by (seed,
    epoch, slot). A buffer much smaller than a sorted file stays biased: use
    :class:`IndexedTFRecordDataset` with ``RandomSampler`` for an exact shuffle.

    Hand-over from DataLoader workers (``worker_ring=True``): the tensors of a batch that is a
    dict (with ``batch_size``, or torch's default collate of the records, which are dicts of a
    type registered in its ``default_collate_fn_map``) are copied into a shared-memory ring of
    the worker and reach the training process as tensors viewing it, far cheaper than torch's
    per-tensor sharing. The slot is reused once every tensor of that batch is freed; while they
    live (a loop that keeps batches) new batches go torch's usual way.

    Parameters
    ----------
    paths : str, os.PathLike or list
        A path, a glob pattern, or a list of them; URLs too (``s3://``, ``gs://``,
        ``https://``, ...), see :mod:`tfrec_fast.storage`.
    index : None, "auto", path, list or dict
        None / "auto": FILE.idx when present, else the index is built when one is needed (for a
        remote object once per machine, kept in the index cache); one index path (one file), a
        list aligned with the files, or a dict {data path: index path}.
    spec : dict, optional
        Feature specs for :func:`~tfrec_fast.parse_examples` (see :mod:`tfrec_fast.torch` for
        what comes out); None yields each record's serialized bytes.
    shuffle_buffer : int
        Records shuffled through a buffer of this size (0: file order).
    transform : callable, optional
        Applied to each record, or to each batch with ``batch_size``.
    batch_size : int, optional
        Yield whole batches of this many records (use ``DataLoader(dataset, batch_size=None)``).
    drop_last : bool
        Drop each slot's last short batch (with ``batch_size``).
    ragged : {"list", "splits"}
        With ``batch_size``: VarLen numbers as a list of tensors, or as ``(values, row_splits)``.
    seed : int or None
        Seed of the shuffles, with the epoch (:meth:`set_epoch`). None: a fresh seed on every
        pass (single-rank jobs only).
    rank, world_size : int, optional
        This process's share (default: torch.distributed's when initialised, else all).
    compression : str, optional
        None (uncompressed), "gzip", "zlib" or "auto".
    verify : bool
        Check both CRCs of every record.
    shuffle_files : bool, optional
        Shuffle the file order each epoch (default: when ``shuffle_buffer`` is set).
    worker_ring : bool
        Hand batches from DataLoader workers over through a shared-memory ring.
    uneven : {"pad", "drop"}
        With several ranks and records they do not divide: ``"pad"`` repeats records from the
        start of the epoch's order so each rank gets ceil(N / ranks), ``"drop"`` leaves out the
        last N mod ranks.
    num_threads : int, optional
        Threads in each process that iterates: with more than one, reading (and shuffling,
        re-batching) runs on an I/O thread while up to ``num_threads`` batches are parsed at
        once, output in order (default: half the cores divided by the DataLoader's workers, at
        most 4).
    copy_bytes : bool
        Bytes features as ``bytes`` (True), or as read-only memoryviews of the batch they were
        read in (False: no copy; each view keeps its batch alive). Views are for a
        ``transform`` that consumes them (decoding an image, say) or a loop over the dataset
        itself: they do not pickle (a DataLoader worker sends what it yields by pickling), and
        torch's ``default_convert`` (``DataLoader(batch_size=None)``) turns a memoryview into a
        list of ints (the collation of records, :func:`~tfrec_fast.torch.collate` and
        ``default_collate`` of records with ``worker_ring``, keeps them as a list).
    storage_options : dict, optional
        Options for fsspec, for URLs.
    filesystem : fsspec or pyarrow filesystem, optional
        The filesystem ``paths`` are on.

    Raises
    ------
    ValueError
        No file matches, or a parameter is out of range.
    """

    def __init__(
        self,
        paths,
        index=None,
        spec=None,
        shuffle_buffer: int = 0,
        transform: Optional[Callable] = None,
        *,
        batch_size: Optional[int] = None,
        drop_last: bool = False,
        ragged: str = "list",
        seed: Optional[int] = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        compression: Optional[str] = None,
        verify: bool = True,
        shuffle_files: Optional[bool] = None,
        worker_ring: bool = True,
        uneven: str = "pad",
        num_threads: Optional[int] = None,
        copy_bytes: bool = True,
        storage_options=None,
        filesystem=None,
    ):
        super().__init__()
        if spec is None and _is_spec(index):
            index, spec = None, index
        self._locations = _loader.expand_locations(paths, storage_options, filesystem)
        self.files = [loc.url for loc in self._locations]
        self.index = index
        self._index_paths = _loader.index_paths(self._locations, index, storage_options, filesystem)
        self._setup(
            spec,
            shuffle_buffer,
            transform,
            batch_size,
            drop_last,
            ragged,
            seed,
            rank,
            world_size,
            compression,
            verify,
            shuffle_files,
            worker_ring,
            uneven,
            num_threads,
            copy_bytes,
        )

    def __iter__(self):
        slot, epoch, runs, resumed, number = self._begin()
        batches = self._pass_over(
            self._locations, self._index_paths, slot, epoch, runs, resumed, number
        )
        return self._output(batches, self._pass.progress)

    def _fingerprint(self) -> list:
        if self._files_print is None:  # (asked after every batch, in every worker)
            self._files_print = _state.fingerprint(self.files)
        return self._files_print

    def __repr__(self):
        return (
            f"TFRecordDataset({len(self.files)} files, shuffle_buffer={self.shuffle_buffer}, "
            f"batch_size={self.batch_size}, epoch={self.epoch})"
        )
