"""TFRecordDatasource: Ray's FileBasedDatasource (listing, partitions, filters, file shuffling)
with tfrec_fast's reader and decoder in its read tasks."""

from __future__ import annotations

import concurrent.futures
import copy
import functools
import queue
import threading
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import ray
from ray.data._internal.util import _autodetect_parallelism
from ray.data.block import BlockMetadata
from ray.data.context import (
    DEFAULT_READ_OP_MIN_NUM_BLOCKS,
    DEFAULT_TARGET_MIN_BLOCK_SIZE,
    DataContext,
)
from ray.data.datasource import ReadTask
from ray.data.datasource.file_based_datasource import (
    FileBasedDatasource,
    _add_partitions_to_table,
    _shuffle_file_metadata,
)
from ray.data.datasource.partitioning import PathPartitionParser

from ..errors import DataLossError
from ..records import normalize_compression
from . import _files
from ._schema import Column, Converter, TFSchema, columns_of, summarize_batch

# A file is split between read tasks (by its index, where the listing shows one) only in ranges
# of at least this many bytes, and only when more tasks are asked for than there are files.
MIN_SPLIT_BYTES = 16 << 20
# Without a spec, the schema comes from the first SAMPLE_RECORDS records (or SAMPLE_BYTES) of
# at most SAMPLE_FILES files spread over the listing: local files read on the driver (a few small
# reads cost less than a Ray task), remote ones in one Ray task, concurrently. (A remote sample is
# bytes the read tasks fetch again: at most 16 MiB.)
SAMPLE_FILES = 16
SAMPLE_RECORDS = 1024
SAMPLE_BYTES = 1 << 20
# Records per block when the data context sets no target block size.
DEFAULT_BLOCK_BYTES = 128 << 20
# Without override_num_blocks, a read asks for as many blocks as Ray's own rule gives with blocks
# of at least this many bytes (Ray's minimum is 1 MiB): every block costs Ray milliseconds of
# scheduling, storing, fetching and batching, far more than making it costs the read task.
MIN_BLOCK_BYTES = 16 << 20


class TFRecordReadError(DataLossError, RuntimeError):
    """A file that cannot be read as TFRecords: Ray's ``RuntimeError("Failed to read TFRecord
    file ...")``, and a :class:`~tfrec_fast.DataLossError` with the record index, the byte offset
    and the reason."""

    def __init__(self, detail, *, path=None, record_index=None, offset=None, reason=None):
        super().__init__(detail, path=path, record_index=record_index, offset=offset, reason=reason)
        rows = f" Already read {record_index} rows." if record_index is not None else ""
        self.args = (
            f"Failed to read TFRecord file {path}. Please ensure that the TFRecord "
            f"file has correct format.{rows} {self.args[0]}",
        )


@dataclass(frozen=True)
class _Reading:
    """What a read task needs (pickled into each, so: no file list)."""

    filesystem: Any
    compression: Optional[str]  # given; None: from each file's name, as Ray does
    open_args: Dict[str, Any]
    verify: bool
    block_records: Optional[int]
    block_bytes: int
    spec: Any = None
    columns: Optional[Tuple[Column, ...]] = None
    tf_schema: Optional[TFSchema] = None
    include_paths: bool = False
    partitioning: Any = None
    sample_records: int = 0

    def compression_of(self, path: str) -> str:
        if self.compression is not None:
            return self.compression
        return _files.compression_of_name(path)

    def converter(self) -> Converter:
        return Converter(self.spec, list(self.columns or ()), self.tf_schema)


# A piece of work: (path, size, part, parts, index path or None): records [N*part/parts,
# N*(part+1)/parts) of the file's N, by its index (or the whole file: part 0 of 1).
Piece = Tuple[str, Optional[int], int, int, Optional[str]]


class TFRecordDatasource(FileBasedDatasource):
    """Reads tf.train.Example records from TFRecord files into Arrow blocks.

    Parameters
    ----------
    paths : str or list of str
        Files, directories and glob patterns (local, or URLs), as Ray's file readers take them.
    spec : dict, optional
        tfrec_fast feature specs (FixedLen / VarLen ...) choosing and typing the columns.
        Without one the columns follow Ray's rules, from a sample (see ``tfrec_fast.ray``).
    tf_schema : tensorflow_metadata Schema, optional
        Ray's: every feature a list of the schema's type.
    compression : str, optional
        "gzip", "zlib", "auto" (told from the bytes) or a pyarrow codec; None: from the file
        name, as Ray does (``.gz``: gzip).
    verify : bool
        Check both CRCs of every record.
    block_size : int, optional
        Records per block at most (default: blocks of Ray's target block size in bytes).
    sample_remote_args : dict, optional
        Ray remote options for the schema-sampling tasks (e.g. ``runtime_env``).
    storage_options : dict, optional
        fsspec options for a URL, when no ``filesystem`` is given.
    **file_based_args
        Ray's FileBasedDatasource arguments: ``filesystem``, ``open_stream_args``,
        ``partition_filter``, ``partitioning``, ``ignore_missing_paths``, ``shuffle``,
        ``include_paths``, ``file_extensions``.
    """

    _FILE_EXTENSIONS = ["tfrecords"]

    def __init__(
        self,
        paths,
        spec=None,
        *,
        tf_schema=None,
        compression: Optional[str] = None,
        verify: bool = True,
        block_size: Optional[int] = None,
        sample_remote_args: Optional[Dict[str, Any]] = None,
        storage_options=None,
        filesystem=None,
        ignore_missing_paths: bool = False,
        open_stream_args: Optional[Dict[str, Any]] = None,
        **file_based_args,
    ):
        if spec is not None and tf_schema is not None:
            raise ValueError("give spec (tfrec_fast's) or tf_schema (Ray's), not both")
        if block_size is not None and block_size < 1:
            raise ValueError("block_size must be positive")
        open_args = dict(open_stream_args or {})
        given = open_args.pop("compression", None)
        if compression is not None and given is not None:
            raise ValueError(
                "give compression= or arrow_open_stream_args={'compression': ...}, not both"
            )
        paths, filesystem = _files.resolve_paths(
            paths, filesystem, storage_options, ignore_missing_paths
        )
        listing = _files.Listing()
        super().__init__(
            paths,
            filesystem=filesystem,
            meta_provider=listing,
            ignore_missing_paths=ignore_missing_paths,
            open_stream_args=open_args,
            **file_based_args,
        )
        self._indexes_ref = ray.put(listing.indexes)
        listing.indexes = {}  # (the provider stays on this object: keep it small)
        target = DataContext.get_current().target_max_block_size or DEFAULT_BLOCK_BYTES
        self._reading = _Reading(
            filesystem=self._filesystem,
            compression=_compression(compression or given),
            open_args=open_args,
            verify=bool(verify),
            block_records=block_size,
            block_bytes=int(target),
            spec=spec,
            tf_schema=None if tf_schema is None else TFSchema.of(tf_schema),
            include_paths=self._include_paths,
            partitioning=self._partitioning,
            sample_records=SAMPLE_RECORDS,
        )
        self._sample_remote_args = dict(sample_remote_args or {})
        self._sampled: Optional[Tuple[Column, ...]] = None

    # -- planning --

    def default_num_blocks(self) -> Optional[int]:
        """The number of blocks to ask Ray for when the caller names none: Ray's rule (at least
        twice the CPUs the dataset can use, blocks no larger than the target size) with blocks
        of at least ``MIN_BLOCK_BYTES``. None (Ray's rule as it is) where the DataContext sets
        its own minimum block count or size."""
        ctx = DataContext.get_current()
        if (
            ctx.read_op_min_num_blocks != DEFAULT_READ_OP_MIN_NUM_BLOCKS
            or ctx.target_min_block_size != DEFAULT_TARGET_MIN_BLOCK_SIZE
        ):
            return None
        ours = copy.copy(ctx)
        ours.target_min_block_size = MIN_BLOCK_BYTES
        blocks, _, _ = _autodetect_parallelism(
            -1, ctx.target_max_block_size, ours, mem_size=self.estimate_inmemory_data_size()
        )
        return blocks

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: Optional[int] = None, data_context=None
    ) -> List[ReadTask]:
        paths, sizes = self._paths(), self._file_sizes()
        reading = self._planned_reading()
        execution = data_context._execution_idx if data_context is not None else 0
        paths, sizes = _shuffle_file_metadata(paths, sizes, self._shuffle, execution)
        pieces = _pieces(paths, sizes, ray.get(self._indexes_ref), reading, max(1, parallelism))
        schema = _schema_with_extras(reading, paths[0] if paths else None)
        tasks = []
        for group in _groups(pieces, max(1, parallelism)):
            size = sum(int((p[1] or 0) // p[3]) for p in group)
            files = tuple(dict.fromkeys(p[0] for p in group))
            metadata = BlockMetadata(
                num_rows=None, size_bytes=size, input_files=files, exec_stats=None
            )
            read = functools.partial(_read_pieces, reading, tuple(group), per_task_row_limit)
            tasks.append(
                ReadTask(read, metadata, schema=schema, per_task_row_limit=per_task_row_limit)
            )
        return tasks

    def _planned_reading(self) -> _Reading:
        """The reading with its columns: sampled once (on the first planning)."""
        reading = self._reading
        if reading.spec is not None or reading.tf_schema is not None:
            return reading
        if self._sampled is None:
            self._sampled = tuple(self._sample())
        return replace(reading, columns=self._sampled)

    def _sample(self) -> List[Column]:
        """The columns the first records of files spread over the listing show: local files
        read here, remote ones in one Ray task (placed as the read tasks are)."""
        paths, sizes = self._paths(), self._file_sizes()
        chosen = sorted(
            {int(i) for i in np.linspace(0, len(paths) - 1, min(len(paths), SAMPLE_FILES))}
        )
        work = [(paths[i], sizes[i]) for i in chosen]
        if not work:
            return []
        if _files.is_local(self._reading.filesystem):
            return columns_of(_sample_files(self._reading, work))
        options = {"num_cpus": 1, **self._sample_remote_args}
        sample = _remote_sample_files().options(**options)
        return columns_of(ray.get(sample.remote(self._reading, work)))


@functools.lru_cache(maxsize=None)
def _remote_sample_files():
    """The sampling task, made once per process (each ray.remote() is exported anew)."""
    return ray.remote(_sample_files)


def _compression(compression: Optional[str]) -> Optional[str]:
    """None (each file's name tells, as in Ray), or one compression for every file: "" for
    none, "gzip", "zlib", "auto" (from the bytes), or another codec pyarrow's stream inflates."""
    if compression is None:
        return None
    name = str(compression).lower()
    if name in ("", "none", "gzip", "zlib", "auto"):
        return normalize_compression(name)
    if name == "snappy" or not pa.Codec.is_available(name):
        raise ValueError(
            f"compression {compression!r}: not one tfrec_fast or pyarrow's "
            "streams read (gzip, zlib, auto, bz2, zstd, lz4, brotli)"
        )
    return name


def _pieces(
    paths: Sequence[str],
    sizes: Sequence[Any],
    indexes: Dict[str, str],
    reading: _Reading,
    parallelism: int,
) -> List[Piece]:
    """Whole files, and parts of big uncompressed files with an index when more tasks are asked
    for than there are files. Nothing is read to plan them."""
    spare = parallelism - len(paths)
    pieces: List[Piece] = []
    for path, size in zip(paths, sizes):
        index = indexes.get(path)
        parts = 1
        if spare > 0 and index is not None and size and reading.compression_of(path) == "":
            parts = int(min(spare + 1, max(1, size // MIN_SPLIT_BYTES)))
            spare -= parts - 1
        pieces.extend(
            (path, size, part, parts, index if parts > 1 else None) for part in range(parts)
        )
    return pieces


def _groups(pieces: List[Piece], parallelism: int) -> List[List[Piece]]:
    """At most ``parallelism`` groups of consecutive pieces, of similar byte counts."""
    if len(pieces) <= parallelism:
        return [[p] for p in pieces]
    weights = [max(1, int((p[1] or 0) // p[3])) for p in pieces]
    total = sum(weights)
    groups: List[List[Piece]] = [[]]
    done = 0
    for piece, weight in zip(pieces, weights):
        if groups[-1] and done >= total * len(groups) / parallelism:
            groups.append([])
        groups[-1].append(piece)
        done += weight
    return groups


def _schema_with_extras(reading: _Reading, path: Optional[str]) -> pa.Schema:
    """The blocks' schema: the features', then Ray's partition columns and "path"."""
    schema = reading.converter().schema
    if path is not None:
        for key, value in _partitions(reading, path).items():
            if key not in schema.names:
                schema = schema.append(pa.field(key, pa.array([value]).type))
        if reading.include_paths:
            schema = schema.append(pa.field("path", pa.string()))
    return schema


def _partitions(reading: _Reading, path: str) -> Dict[str, Any]:
    if reading.partitioning is None:
        return {}
    return PathPartitionParser(reading.partitioning)(path)


# ---- in the read tasks ---------------------------------------------------------------------------


def _read_pieces(
    reading: _Reading, pieces: Tuple[Piece, ...], row_limit: Optional[int]
) -> Iterator[pa.Table]:
    """The blocks of a read task; it stops reading once ``row_limit`` rows are out. The next
    batch of records is read on a thread while this one is decoded and handed to Ray."""
    converter = reading.converter()
    rows = 0
    extras: Dict[str, Any] = {}
    last = None
    for path, batch, first in _read_ahead(_task_batches(reading, pieces)):
        if path != last:
            extras, last = _partitions(reading, path), path
        try:
            table = converter.convert(batch, path, first)
        except DataLossError as error:
            raise _read_error(error, path) from None
        if extras:
            table = _add_partitions_to_table(table, extras)
        if reading.include_paths:
            table = table.append_column("path", pa.array([path] * len(table), pa.string()))
        yield table
        rows += len(table)
        if row_limit is not None and rows >= row_limit:
            return


def _task_batches(reading: _Reading, pieces: Tuple[Piece, ...]) -> Iterator[Tuple[str, Any, int]]:
    """(path, RecordBatch, index in the file of its first record) of every piece in turn."""
    for piece in pieces:
        path = piece[0]
        try:
            for batch, first in _piece_batches(reading, piece):
                yield path, batch, first
        except DataLossError as error:
            raise _read_error(error, path) from None


def _read_error(error: DataLossError, path: str) -> TFRecordReadError:
    """Ray's RuntimeError for a file that cannot be read, with tfrec_fast's detail."""
    if isinstance(error, TFRecordReadError):
        return error
    return TFRecordReadError(
        error.detail,
        path=path,
        record_index=error.record_index,
        offset=error.offset,
        reason=error.reason,
    )


_END = object()


def _read_ahead(items: Iterator[Any]) -> Iterator[Any]:
    """The items of ``items``, each next one made on a thread while the caller works on the one
    it has (at most one waiting: a task holds at most three batches of records). An error making
    one is raised where that item would have come; stopping early stops the thread, which
    closes ``items``."""
    ready: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def make() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((_END, None))
        except BaseException as error:  # handed to the caller, raised there
            put((_END, error))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=make, name="tfrec-fast-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = ready.get()
            if item is _END:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join()


def _piece_batches(reading: _Reading, piece: Piece) -> Iterator[Tuple[Any, int]]:
    """(RecordBatch, index in the file of its first record) pairs of a piece."""
    path, size, part, parts, index = piece
    if index is not None:
        yield from _files.record_ranges(
            reading.filesystem,
            path,
            size,
            index,
            part,
            parts,
            verify=reading.verify,
            batch_records=reading.block_records or 65536,
        )
        return
    with _files.open_records(
        reading.filesystem,
        path,
        size,
        reading.compression_of(path),
        verify=reading.verify,
        open_args=reading.open_args,
    ) as reader:
        while True:
            first = reader.records_read
            batch = reader.read_batch(
                max_records=reading.block_records, max_bytes=reading.block_bytes
            )
            if not len(batch):
                return
            yield batch, first


def _sample_files(reading: _Reading, work) -> List[Dict[str, Any]]:
    """What the first records of each file say of its features; remote files read
    concurrently (their requests wait on the network, not on each other)."""
    if len(work) == 1 or _files.is_local(reading.filesystem):
        return [_sample_file(reading, path, size) for path, size in work]
    with concurrent.futures.ThreadPoolExecutor(len(work)) as pool:
        return list(pool.map(lambda item: _sample_file(reading, *item), work))


def _sample_file(reading: _Reading, path: str, size: Optional[int]) -> Dict[str, Any]:
    summary: Dict[str, Any] = {}
    try:
        with _files.open_records(
            reading.filesystem,
            path,
            size,
            reading.compression_of(path),
            verify=reading.verify,
            open_args=reading.open_args,
            prefix=SAMPLE_BYTES,
        ) as reader:
            batch = reader.read_batch(max_records=reading.sample_records, max_bytes=SAMPLE_BYTES)
    except DataLossError as error:
        raise _read_error(error, path) from None
    summarize_batch(batch, path, summary)
    return summary
