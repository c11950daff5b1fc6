"""Torch-free plumbing shared by tfrec_fast.torch and tfrec_fast.compat.tfrecord.reader.

File lists, per-file record indexes, splitting a job's records among (rank, worker) slots,
reading a range of records, a bounded shuffle buffer and re-batching. Nothing here imports
torch; nothing here keeps a file open between calls.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _buffers
from .errors import DataLossError
from .records import (
    ITER_BATCH_BYTES,
    RecordBatch,
    TFRecordReader,
    count_records,
    normalize_compression,
)
from .storage import Location, cached_array, expand, find_indexes, resolve, resolve_beside
from .storage import load_index as _load_index

# Records parsed at a time after a shuffle buffer (the buffer hands out single records).
SHUFFLE_CHUNK = 256


# ---- files and indexes ---------------------------------------------------------------------


def expand_locations(paths, storage_options=None, filesystem=None) -> List[Location]:
    """A path, a glob pattern, or a list of them -> the files, as Locations (as records.py's
    expand_pattern: globs sorted with their listing's sizes and versions, a literal path that
    exists wins, no match is an error)."""
    if paths is None:
        raise TypeError("paths must be a path, a glob pattern or a list of them, not None")
    if isinstance(paths, (str, os.PathLike, Location)):
        paths = [paths]
    out: List[Location] = []
    for p in paths:
        if not isinstance(p, (str, os.PathLike, Location)):
            raise TypeError(f"each path must be a str or os.PathLike, not {type(p).__name__}")
        out.extend(expand(p, storage_options, filesystem))
    if not out:
        raise ValueError("no TFRecord files given")
    return out


def expand_paths(paths, storage_options=None, filesystem=None) -> List[str]:
    """expand_locations, as the paths (URLs) the caller would pass back."""
    return [loc.url for loc in expand_locations(paths, storage_options, filesystem)]


def index_paths(
    files: Sequence, index, storage_options=None, filesystem=None
) -> List[Optional[Location]]:
    """Per-file index, or None (then the index is built when one is needed).

    ``index`` is None or "auto" (FILE.idx when it exists: one listing per directory), one path
    (a single file only), a list aligned with ``files``, or a dict {data path: index path}
    (missing files fall back to auto).
    """
    files = [resolve(f, storage_options, filesystem) for f in files]

    def given(path) -> Location:
        return resolve_beside(path, storage_options, filesystem)

    if index is None or index == "auto":
        return find_indexes(files)
    if isinstance(index, Mapping):
        auto = find_indexes([f for f in files if index.get(f.url) is None])
        found = iter(auto)
        return [given(index[f.url]) if index.get(f.url) is not None else next(found) for f in files]
    if isinstance(index, (str, os.PathLike, Location)):
        if len(files) != 1:
            raise ValueError("one index path given for several files: pass a list or a dict")
        return [given(index)]
    index = list(index)
    if len(index) != len(files):
        raise ValueError(f"{len(index)} index paths for {len(files)} files")
    return [None if i is None else given(i) for i in index]


@dataclass(frozen=True)
class RecordIndex:
    """What planning knows of a file: record offsets and framed sizes (None for compressed
    files, which cannot be indexed) and the record count."""

    offsets: Optional[np.ndarray]
    sizes: Optional[np.ndarray]
    count: int


# Per-process cache: (file key, index key, compression, version) -> RecordIndex.
_INDEX_CACHE: Dict[tuple, RecordIndex] = {}


def record_index(path, index_path=None, compression: Optional[str] = None) -> RecordIndex:
    """The offsets, sizes and count of one file's records.

    From ``index_path`` when given; else built by a header-only scan (uncompressed) or counted
    by decompressing (compressed files cannot be indexed: offsets are None then, and a range is
    read by skipping records). Cached per process; for remote objects also on local disk by
    object version (the index cache), so each machine reads an index file, scans or counts an
    object once, not once per DataLoader worker or per epoch.
    """
    from .index import check_covers, detected_compression, index_of

    location = resolve(path)
    index = None if index_path is None else resolve_beside(index_path)
    compression = normalize_compression(compression)
    if compression == "auto":
        compression = detected_compression(location)
    stat = location.stat()
    key = (
        location.store.key(location.path),
        None if index is None else index.store.key(index.path),
        compression,
        stat.version,
        stat.size,
    )
    hit = _INDEX_CACHE.get(key)
    if hit is not None:
        return hit
    if index is not None:
        offsets, sizes = _load_index(index)
        if not compression:
            check_covers(location, offsets, sizes, index.name, stat.size)
        found = RecordIndex(offsets, sizes, len(offsets))
    elif not compression:
        offsets, sizes = index_of(location)
        found = RecordIndex(offsets, sizes, len(offsets))
    else:
        count = cached_array(
            location,
            f"count:{compression}",
            lambda: np.array([count_records(location, compression)]),
        )
        found = RecordIndex(None, None, int(count[0]))
    _INDEX_CACHE[key] = found
    return found


def file_index(
    path, index_path=None, compression: Optional[str] = None
) -> Tuple[Optional[np.ndarray], int]:
    """(record start offsets or None, record count) of one file: see record_index."""
    found = record_index(path, index_path, compression)
    return found.offsets, found.count


# ---- splitting work -----------------------------------------------------------------------

Segment = Tuple[int, int, Optional[int]]  # (file number, first record, stop record or None = end)


def plan_slot(
    n_files: int, order: Sequence[int], slot: int, n_slots: int, count
) -> Tuple[str, List[Segment]]:
    """The records slot ``slot`` of ``n_slots`` reads, the files taken in ``order``.

    With at least as many files as slots, whole files: slot s takes order[s::n_slots] (no index
    needed). Otherwise the records of all files, concatenated in ``order``, are cut into
    n_slots contiguous ranges of sizes differing by at most one; ``count(i)`` gives file i's
    record count. Either way every record belongs to exactly one slot.
    """
    if not 0 <= slot < n_slots:
        raise ValueError(f"slot {slot} out of range for {n_slots} slots")
    if n_files >= n_slots:
        return "files", [(i, 0, None) for i in order[slot::n_slots]]
    counts = [count(i) for i in order]
    total = sum(counts)
    return "ranges", _segments_between(
        order, counts, total * slot // n_slots, total * (slot + 1) // n_slots
    )


def plan_ranks(
    order: Sequence[int],
    count,
    rank: int,
    world: int,
    worker: int,
    workers: int,
    uneven: str = "pad",
) -> List[Segment]:
    """The records worker ``worker`` (of ``workers``) of rank ``rank`` (of ``world``) reads, so
    that every rank reads the same number of records, as DistributedSampler does: a rank that
    ran out first would leave the others waiting in a collective (a hang on NCCL).

    The records of all files, concatenated in ``order`` (``count(i)``: file i's records), are cut
    into ``world`` equal contiguous parts. When they do not divide evenly, ``uneven="pad"``
    gives each rank ceil(N / world), the last ones wrapping around to the first records, and
    ``"drop"`` gives each floor(N / world), leaving out the last N mod world. Each rank's part is
    then cut among its workers into contiguous ranges of sizes differing by at most one.
    """
    if uneven not in ("pad", "drop"):
        raise ValueError(f"uneven must be 'pad' or 'drop', not {uneven!r}")
    if not (0 <= rank < world and 0 <= worker < workers):
        raise ValueError(f"rank {rank}/{world}, worker {worker}/{workers} out of range")
    counts = [count(i) for i in order]
    total = sum(counts)
    if total == 0:
        return []
    per_rank = -(-total // world) if uneven == "pad" else total // world
    first = rank * per_rank
    return _segments_between(
        order,
        counts,
        first + per_rank * worker // workers,
        first + per_rank * (worker + 1) // workers,
    )


def _segments_between(order, counts, lo: int, hi: int) -> List[Segment]:
    """(file, start, stop) of global record positions [lo, hi), wrapping past the last record."""
    total = sum(counts)
    segments: List[Segment] = []
    while lo < hi:  # (total > 0 whenever lo < hi)
        lap_start = lo - lo % total
        a_lap, b_lap = lo - lap_start, min(hi, lap_start + total) - lap_start
        base = 0
        for i, n in zip(order, counts):
            a, b = max(a_lap, base), min(b_lap, base + n)
            if a < b:
                segments.append((i, a - base, b - base))
            base += n
        lo = lap_start + b_lap
    return segments


# ---- reading ------------------------------------------------------------------------------


def read_range(
    path,
    start: int = 0,
    stop: Optional[int] = None,
    *,
    offsets: Optional[np.ndarray] = None,
    compression: Optional[str] = None,
    verify: bool = True,
    max_records: Optional[int] = None,
    max_bytes: Optional[int] = None,
    whole_multiples: bool = False,
    split_batches: bool = True,
    at: Optional[int] = None,
) -> Iterator[RecordBatch]:
    """Yields RecordBatches holding records [start, stop) of one file (stop None: to the end).

    With ``offsets`` (or ``at``, the byte offset of record ``start`` in an uncompressed file)
    the file is entered at record ``start`` directly and nothing past record ``stop`` is fetched
    when ``offsets`` says where it is (a remote object is read by range requests bounded to the
    planned bytes); otherwise the records before it are read and dropped. The file is opened on the
    first ``next()`` and closed when the generator finishes or is closed. Batches hold at most
    ``max_records`` records and, past their
    first record, ``max_bytes`` bytes (default: cache-sized batches, as iter_batches reads, when
    there is no ``max_records``; never the whole range in one). With ``whole_multiples`` (and
    both limits) a batch takes as many multiples of ``max_records`` as ``max_bytes`` holds at the
    size of the records read so far: small records in few large batches that split evenly; with
    ``split_batches=False`` as well, ``max_bytes`` only chooses that multiple and a batch always
    holds whole multiples of ``max_records`` (at least one), whatever their size.
    """
    if stop is not None and stop <= start:
        return
    if max_bytes is None and max_records is None:
        max_bytes = ITER_BATCH_BYTES
    location = resolve(path)
    end = None if offsets is None or stop is None or stop >= len(offsets) else int(offsets[stop])
    if at is None and offsets is not None and (start > 0 or end is not None):
        at = int(offsets[start]) if start < len(offsets) else location.size()
    if at is not None and (at > 0 or end is not None):
        reader = TFRecordReader._of_stream(
            location, location.open_input(at, end), compression, verify=verify
        )
        skip = 0
    else:
        reader = TFRecordReader(location, compression, verify=verify)
        skip = 0 if offsets is not None or at is not None else start
    # Epochs open their readers afresh: the process's pool keeps their batch buffers between them.
    reader.set_buffer_pool(_buffers.shared_pool())
    while skip:
        dropped = len(reader.read_batch(max_records=skip))
        if not dropped:
            raise DataLossError(
                f"expected at least {start} records",
                path=location.name,
                record_index=start - skip,
                offset=reader.tell(),
                reason="index_mismatch",
            )
        skip -= dropped
    try:
        remaining = None if stop is None else stop - start
        last = stop if stop is not None else 0  # (only read when remaining is known)
        step = max_records
        # Not splitting batches, max_bytes only chooses how many multiples of max_records a read
        # takes.
        read_cap = None if not split_batches and whole_multiples and max_records else max_bytes
        while remaining is None or remaining > 0:
            limit = step if remaining is None else min(remaining, step or remaining)
            batch = reader.read_batch(max_records=limit, max_bytes=read_cap)
            if whole_multiples and max_records and max_bytes and len(batch):
                record_bytes = max(1, int(batch.offsets[-1]) // len(batch))
                step = max_records * max(1, max_bytes // (record_bytes * max_records))
            if not len(batch):
                if remaining is not None:
                    raise DataLossError(
                        f"the file ended {remaining} records before record "
                        f"{stop} the index promised: is the index stale?",
                        path=location.name,
                        record_index=last - remaining,
                        offset=reader.tell(),
                        reason="index_mismatch",
                    )
                return
            if remaining is not None:
                remaining -= len(batch)
            yield batch
    finally:
        reader.close()


def shuffle_records(
    records: Iterable, size: int, rng: np.random.Generator, chunk: int = SHUFFLE_CHUNK
) -> Iterator[RecordBatch]:
    """A bounded shuffle buffer over single records (any bytes-like), re-batched ``chunk`` at a time.

    Like the tfrecord package's shuffle_iterator and tf.data's shuffle: fill ``size`` records,
    then each new record replaces a uniformly chosen buffered one, which is emitted. Records
    are copied into the buffer as ``bytes`` so it pins exactly ``size`` records of memory, not
    the read batches they came from. A buffer much smaller than the data is biased towards
    file order: for an exact shuffle use an index (IndexedTFRecordDataset + a sampler).
    """
    buf: List[bytes] = []
    out: List[bytes] = []
    picks = np.empty(0, dtype=np.int64)
    k = 0
    for record in records:
        record = bytes(record)
        if len(buf) < size:
            buf.append(record)
            continue
        if k == len(picks):
            picks = rng.integers(0, size, 4096)
            k = 0
        j = int(picks[k])
        k += 1
        out.append(buf[j])
        buf[j] = record
        if len(out) == chunk:
            yield RecordBatch.from_records(out)
            out = []
    rng.shuffle(buf)
    out.extend(buf)
    for i in range(0, len(out), chunk):
        yield RecordBatch.from_records(out[i : i + chunk])


def records_of(batches: Iterable[RecordBatch]) -> Iterator[memoryview]:
    for batch in batches:
        yield from batch


def rebatch(
    batches: Iterable[RecordBatch], size: int, drop_last: bool = False
) -> Iterator[RecordBatch]:
    """Batches of exactly ``size`` records (the last may be short unless ``drop_last``)."""
    pending: list = []
    held = None  # a short batch taken whole: copied only if records of a later batch join it
    for batch in batches:
        if not len(batch):
            continue
        if not pending and held is None and len(batch) <= size:
            if len(batch) == size:
                yield batch
            else:
                held = batch
            continue
        if held is not None:
            pending, held = list(held), None
        records = list(batch)
        i = 0
        while i < len(records):
            take = min(size - len(pending), len(records) - i)
            pending.extend(records[i : i + take])
            i += take
            if len(pending) == size:
                yield RecordBatch.from_records(pending)
                pending = []
    if held is not None and not drop_last:
        yield held
    elif pending and not drop_last:
        yield RecordBatch.from_records(pending)


def chunks(records: Iterable, size: int = SHUFFLE_CHUNK) -> Iterator[RecordBatch]:
    """Single records -> RecordBatches of ``size`` (copies them once)."""
    out: list = []
    for record in records:
        out.append(record)
        if len(out) == size:
            yield RecordBatch.from_records(out)
            out = []
    if out:
        yield RecordBatch.from_records(out)


def epoch_rng(*words: int) -> np.random.Generator:
    """A generator seeded by a tuple of non-negative ints (seed, epoch, ...)."""
    return np.random.default_rng([int(w) & 0xFFFFFFFFFFFFFFFF for w in words])
