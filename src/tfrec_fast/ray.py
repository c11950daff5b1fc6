"""Ray Data: read and write TFRecord datasets without TensorFlow (extra ``ray``).

``read_tfrecords`` takes the arguments of ``ray.data.read_tfrecords`` and gives its values for
tf.train.Example files: a feature holding one value in every record of a read task is a scalar
column, others are ``list<...>`` columns, bytes are ``binary``, floats ``float32``, a missing
feature is null. On top: both CRCs checked, the C++ decoder (no per-record Python object, no
TensorFlow import), an optional ``spec`` (tfrec_fast.FixedLen / VarLen: the types of
:mod:`tfrec_fast.arrow`), and big uncompressed files split into record ranges (by a header-only
scan) when more read tasks are asked for than there are files.

``write_tfrecords(dataset, path)`` takes the arguments of ``Dataset.write_tfrecords`` and writes
its records (a null as an empty list of its column's kind, as Ray does) into
``{prefix}-00000-of-0000N.tfrecord`` shards, one per write task that got rows, with the
:class:`~tfrec_fast.ShardedWriter` publish rule: each task writes under a temporary name, the
driver renames them all once every task has succeeded, and the manifest
(``_{prefix}.manifest.json``, which directory readers skip) is written last.
"""

from __future__ import annotations

import os
import secrets
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from . import arrow as _arrow
from .example import VarLen, spec_to_json
from .index import IndexedTFRecordReader, create_index
from .records import (_as_sources, _display, _is_path, detect_compression, file_version,
                      normalize_compression)
from .sharded import _Naming, _store_for, manifest_data

try:
    import pyarrow as pa
    import ray.data
    from ray.data import Datasink, Datasource, ReadTask
    from ray.data.block import BlockAccessor, BlockMetadata
except ImportError as error:  # pragma: no cover - exercised where ray is absent
    raise ImportError("tfrec_fast.ray needs Ray Data: pip install 'tfrec_fast[ray]'") from error

__all__ = ["read_tfrecords", "write_tfrecords", "TFRecordDatasource", "TFRecordDatasink"]

# A file range smaller than this is not split further between read tasks.
MIN_SPLIT_BYTES = 16 << 20
# Without a spec, the first block of this many files decides the schema.
SAMPLE_FILES = 64
_KIND_OF_ARROW = {"int64": "int64", "float": "float32", "large_binary": "bytes"}


class TFRecordDatasource(Datasource):
    """Read tasks over files, or record ranges of big uncompressed files, yielding Arrow blocks
    of ``block_size`` records."""

    def __init__(self, paths, spec=None, *, compression: Optional[str] = None,
                 include_paths: bool = False, block_size: int = 4096, verify: bool = True,
                 file_extensions: Optional[Sequence[str]] = None,
                 ignore_missing_paths: bool = False, partition_filter=None, shuffle=None,
                 storage_options=None, filesystem=None):
        super().__init__()
        self._spec = spec
        self._compression = normalize_compression(compression)
        self._include_paths = include_paths
        self._block_size = int(block_size)
        self._verify = verify
        self._options = {"storage_options": storage_options, "filesystem": filesystem}
        self._files = _files(paths, file_extensions, ignore_missing_paths, **self._options)
        if partition_filter is not None:
            self._files = list(partition_filter(self._files))
        self._files = _shuffled(self._files, shuffle)
        self._sizes = []
        for path in list(self._files):
            try:
                self._sizes.append(file_version(path)[0] or 0)
            except FileNotFoundError:  # a path named literally that is not there
                if not ignore_missing_paths:
                    raise
                self._files.remove(path)
        self._scalars: Any = False
        self._sampled = spec is None
        if self._sampled:  # one schema for every read task, so Ray's blocks agree
            self._spec, self._scalars = self._sample()

    def _sample(self):
        """Ray's schema rules (a feature with one value per record is a scalar) decided once,
        from the first block of each file (at most SAMPLE_FILES files)."""
        kinds: Dict[str, str] = {}
        lists = set()
        for path in self._files[:SAMPLE_FILES]:
            reader = _arrow.iter_batches(path, compression=self._compression,
                                         batch_size=self._block_size, verify=self._verify,
                                         scalars=True, **self._options)
            for field in reader.schema:
                is_list = pa.types.is_large_list(field.type)
                value = field.type.value_type if is_list else field.type
                kinds.setdefault(field.name, _KIND_OF_ARROW[str(value)])
                if is_list:
                    lists.add(field.name)
            reader.close()
        spec = {name: VarLen(kind) for name, kind in kinds.items()}  # first seen first
        return spec, frozenset(kinds) - lists

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return sum(self._sizes)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context=None) -> List[ReadTask]:
        pieces = self._pieces(max(1, parallelism))
        tasks = []
        for group in _groups(pieces, max(1, parallelism)):
            size = sum(p[3] for p in group)
            files = tuple(sorted({p[0] for p in group}))
            metadata = BlockMetadata(num_rows=sum(p[2] - p[1] for p in group if p[2] >= 0)
                                     if all(p[2] >= 0 for p in group) else None,
                                     size_bytes=int(size), input_files=files, exec_stats=None)
            tasks.append(ReadTask(lambda group=group: self._read(group), metadata))
        return tasks

    def _pieces(self, parallelism: int) -> List[tuple]:
        """(file, first record, end record or -1 for the whole file, bytes, index of the range
        or None) per piece."""
        pieces: List[tuple] = []
        spare = parallelism - len(self._files)
        for path, size in zip(self._files, self._sizes):
            parts = min(spare + 1, max(1, size // MIN_SPLIT_BYTES)) if spare > 0 else 1
            compression = self._compression
            if compression == "auto" and parts > 1:
                compression = detect_compression(path, **self._options)
            if parts <= 1 or compression:
                pieces.append((path, 0, -1, size, None))
                continue
            offsets, sizes = create_index(path, **self._options)  # headers only
            index = ray.put((offsets, sizes))  # once in the object store, not in every task
            spare -= parts - 1
            cuts = np.linspace(0, len(offsets), parts + 1).astype(int)
            for a, b in zip(cuts[:-1], cuts[1:]):
                if b > a:
                    pieces.append((path, int(a), int(b), size * (b - a) // max(1, len(offsets)),
                                   index))
        return pieces

    def _read(self, group) -> Iterable[pa.Table]:
        for path, first, end, _, index in group:
            for batch in self._blocks(path, first, end, index):
                table = pa.Table.from_batches([batch])
                if self._include_paths:
                    table = table.append_column("path", pa.array([_display(path)] * len(table)))
                yield table

    def _blocks(self, path, first: int, end: int, index) -> Iterator[pa.RecordBatch]:
        """The Arrow batches of a whole file (end < 0) or of its records [first, end)."""
        plan = _arrow._Plan(self._spec, None, None, (), "list", False, self._scalars)
        if self._sampled:  # a feature the sample did not show is an error, never dropped
            plan.inferred_from = (f"the first block ({self._block_size} records) of each of "
                                  f"the first {SAMPLE_FILES} files")
        if end < 0:
            for batch, segments in _arrow._record_batches(path, self._block_size,
                                                          self._compression, self._verify,
                                                          **self._options):
                yield plan.convert(batch, segments)
            return
        with IndexedTFRecordReader(path, ray.get(index), verify=self._verify,
                                   **self._options) as reader:
            for start in range(first, end, self._block_size):
                stop = min(end, start + self._block_size)
                batch = reader.get_batch(np.arange(start, stop, dtype=np.int64))
                yield plan.convert(batch, [(_display(path), start, stop - start)])


def _files(paths, extensions, ignore_missing: bool, **options) -> list:
    sources = []
    for source in ([paths] if isinstance(paths, (str, os.PathLike)) else list(paths)):
        text = os.fspath(source) if isinstance(source, os.PathLike) else source
        if isinstance(text, str) and os.path.isdir(text):
            sources.extend(_directory_files(text))
            continue
        try:
            sources.extend(_as_sources(text, **options))
        except FileNotFoundError:
            if not ignore_missing:
                raise
    if extensions is not None:
        wanted = tuple("." + e.lstrip(".").lower() for e in extensions)
        sources = [s for s in sources if _display(s).lower().endswith(wanted)]
    sources = [s for s in sources if _is_path(s)]
    if not sources and not ignore_missing:
        raise FileNotFoundError(f"no TFRecord file in {paths!r}")
    return sources


def _directory_files(directory: str) -> List[str]:
    """The files under a directory, at any depth, sorted, as Ray lists them: a file whose path
    below the directory starts with "." or "_" (hidden files, Spark's _SUCCESS, ...) is not
    data."""
    found = []
    for root, dirs, names in os.walk(directory):
        below = os.path.relpath(root, directory)
        if below != "." and below.startswith((".", "_")):
            dirs.clear()
            continue
        found += [os.path.join(root, name) for name in names
                  if below != "." or not name.startswith((".", "_"))]
    return sorted(found)


def _shuffled(files: list, shuffle) -> list:
    """Ray's ``shuffle``: None (file order), "files" (random order) or a FileShuffleConfig
    (its seed)."""
    if shuffle is None:
        return files
    if shuffle != "files" and not hasattr(shuffle, "seed"):
        raise ValueError(f"shuffle must be None, 'files' or a FileShuffleConfig, not {shuffle!r}")
    order = np.random.default_rng(getattr(shuffle, "seed", None)).permutation(len(files))
    return [files[i] for i in order]


def _groups(pieces: list, parallelism: int) -> List[list]:
    """At most ``parallelism`` groups of consecutive pieces, of similar byte counts."""
    if len(pieces) <= parallelism:
        return [[p] for p in pieces]
    total = sum(p[3] for p in pieces) or 1
    groups: List[list] = [[]]
    done = 0
    for piece in pieces:
        if groups[-1] and done >= total * len(groups) / parallelism:
            groups.append([])
        groups[-1].append(piece)
        done += piece[3]
    return groups


def read_tfrecords(paths, spec=None, *, filesystem=None, parallelism: int = -1,
                   num_cpus: Optional[float] = None, num_gpus: Optional[float] = None,
                   memory: Optional[float] = None,
                   arrow_open_stream_args: Optional[Dict[str, Any]] = None,
                   partition_filter=None, include_paths: bool = False,
                   ignore_missing_paths: bool = False, shuffle=None,
                   file_extensions: Optional[List[str]] = None,
                   concurrency: Optional[int] = None, override_num_blocks: Optional[int] = None,
                   ray_remote_args: Optional[Dict[str, Any]] = None, compression: Optional[str] = None,
                   block_size: int = 4096, verify: bool = True,
                   storage_options=None, **read_args) -> "ray.data.Dataset":
    """``ray.data.read_tfrecords`` without TensorFlow (see the module docstring for the values).

    ``arrow_open_stream_args={"compression": "gzip"}`` works as in Ray; ``compression=``
    ("gzip", "zlib", "auto") is the same thing. ``filesystem``: a pyarrow or fsspec filesystem;
    paths may also be URLs (``storage_options``). A directory is read as Ray reads it: every
    file below it except those whose path below it starts with "." or "_". ``partition_filter``
    and ``shuffle`` ("files" or a FileShuffleConfig) pick and order the files as in Ray.
    ``tf_schema`` is not supported (use ``spec``). Other keyword arguments (Ray's
    ``label_selector``, ``resources``, ...) go to ``ray.data.read_datasource``.
    """
    _refuse_tf_schema(read_args.pop("tf_schema", None))
    compression = _compression(compression, arrow_open_stream_args)
    source = TFRecordDatasource(paths, spec, compression=compression, include_paths=include_paths,
                                block_size=block_size, verify=verify,
                                file_extensions=file_extensions,
                                ignore_missing_paths=ignore_missing_paths,
                                partition_filter=partition_filter, shuffle=shuffle,
                                storage_options=storage_options, filesystem=filesystem)
    remote = {k: v for k, v in (("num_cpus", num_cpus), ("num_gpus", num_gpus),
                                ("memory", memory)) if v is not None}
    return ray.data.read_datasource(source, parallelism=parallelism,
                                    ray_remote_args=ray_remote_args, concurrency=concurrency,
                                    override_num_blocks=override_num_blocks, **remote,
                                    **read_args)


def _refuse_tf_schema(tf_schema) -> None:
    if tf_schema is not None:
        raise TypeError("tf_schema needs TensorFlow's schema protos: pass spec= (tfrec_fast "
                        "FixedLen / VarLen) instead")


def _compression(compression: Optional[str], stream_args: Optional[Dict[str, Any]]):
    """``compression=`` or Ray's ``arrow_open_stream_args={"compression": ...}``."""
    stream_args = dict(stream_args or {})
    if compression is None:
        compression = stream_args.pop("compression", None)
    if stream_args:
        raise TypeError(f"arrow_open_stream_args: only 'compression' is used, not {stream_args}")
    return compression


class TFRecordDatasink(Datasink):
    """One temporary TFRecord file per write task; published together on completion."""

    def __init__(self, path, *, prefix: str = "data", suffix: str = ".tfrecord",
                 compression: Optional[str] = None, spec=None, manifest: bool = True,
                 nulls: str = "empty", min_rows_per_file: Optional[int] = None,
                 try_create_dir: bool = True, mode: str = "append", storage_options=None,
                 filesystem=None):
        if nulls not in _arrow.NULLS:
            raise ValueError(f"nulls must be one of {_arrow.NULLS}, not {nulls!r}")
        self._path = path
        self._naming_args = (prefix, suffix)
        self._compression = normalize_compression(compression, auto=False)
        self._spec = spec_to_json(spec) if spec is not None else None
        self._manifest = manifest
        self._nulls = nulls
        self._min_rows = min_rows_per_file
        self._try_create_dir = try_create_dir
        self._mode = _save_mode(mode)
        self._options = {"storage_options": storage_options, "filesystem": filesystem}
        self._token = secrets.token_hex(4)
        self._started = False
        self._skip = False  # mode="ignore" and the path exists
        self._replaced: List[str] = []  # mode="overwrite": what the directory held before
        self.shards: List[str] = []

    @property
    def min_rows_per_write(self) -> Optional[int]:
        return self._min_rows

    def _naming(self) -> Tuple[Any, _Naming]:
        store, path = _store_for(self._path, **self._options)
        return store, _Naming.from_args(store, path, *self._naming_args)

    def on_write_start(self, schema=None) -> None:
        """Ray's save modes, decided before anything is written: "error" / "create" refuse an
        existing path, "ignore" writes nothing there, "overwrite" notes what to remove once the
        new shards are published, "append" keeps what is there (but not shards of this very
        naming, which would mix with the new ones)."""
        if self._started:  # Ray may call it more than once
            return
        self._started = True
        store, naming = self._naming()
        if store.exists(naming.directory):
            if self._mode in ("error", "create"):
                raise ValueError(f"Path {store.url(naming.directory)} already exists; "
                                 "mode='ignore' skips the write, 'overwrite' replaces it")
            if self._mode == "ignore":
                self._skip = True
                return
            if self._mode == "overwrite":
                self._replaced = [store.join(naming.directory, name)
                                  for name in store.listdir(naming.directory)]
        if self._try_create_dir:
            store.makedirs(naming.directory)
        taken = naming.family()
        if taken and self._mode != "overwrite":
            raise FileExistsError(f"{store.url(taken[0])} already exists: write to another "
                                  "directory or prefix, or pass mode='overwrite'")

    def write(self, blocks, ctx) -> Optional[Tuple[int, str, int]]:
        if self._skip:
            return None
        store, naming = self._naming()
        temp = naming.temp(ctx.task_idx, self._token)
        rows, writer = 0, None
        try:
            for block in blocks:
                table = BlockAccessor.for_block(block).to_arrow()
                if table.num_rows:  # as Ray's writers, no file for no rows
                    writer = writer or store.writer(temp, self._compression, None, 1 << 20)
                    rows += _arrow.write_table(table, writer, nulls=self._nulls)
        finally:
            if writer is not None:
                writer.close()
        return None if writer is None else (ctx.task_idx, temp, rows)

    def on_write_complete(self, write_result) -> None:
        if self._skip:
            return
        store, naming = self._naming()
        done = sorted(r for r in write_result.write_returns if r is not None)
        n = len(done)
        shards = []
        for i, (_, temp, rows) in enumerate(done):
            final = naming.final(i, n)
            store.replace(temp, final)
            shards.append((final, rows, store.size(final)))
        # "_" first: directory readers (Ray's, Spark's, read_tfrecords) take it for metadata
        manifest = store.join(naming.directory, f"_{naming.stem}.manifest.json") \
            if self._manifest else None
        if manifest is not None:
            store.write_json(manifest, manifest_data(store, manifest, shards, self._compression,
                                                     self._spec, False), self._token, False)
        written = {final for final, _, _ in shards} | {manifest}
        for old in self._replaced:  # the new output is complete: the old one goes
            if old not in written and not store.isdir(old):
                store.remove(old)
        self.shards = [store.url(final) for final, _, _ in shards]

    def on_write_failed(self, error: Exception) -> None:
        store, naming = self._naming()
        for name in store.listdir(naming.directory):
            if name.endswith(".tmp-" + self._token):
                try:
                    store.remove(store.join(naming.directory, name))
                except OSError:
                    pass


_SAVE_MODES = ("append", "overwrite", "ignore", "error", "create")


def _save_mode(mode) -> str:
    """Ray's SaveMode (a str enum) or its value."""
    value = getattr(mode, "value", mode)
    if value not in _SAVE_MODES:
        raise ValueError(f"mode must be one of {_SAVE_MODES}, not {mode!r}")
    return value


def write_tfrecords(dataset: "ray.data.Dataset", path, *, prefix: str = "data",
                    suffix: str = ".tfrecord", compression: Optional[str] = None, spec=None,
                    manifest: bool = True, nulls: str = "empty", filesystem=None,
                    try_create_dir: bool = True,
                    arrow_open_stream_args: Optional[Dict[str, Any]] = None,
                    min_rows_per_file: Optional[int] = None,
                    ray_remote_args: Optional[Dict[str, Any]] = None,
                    concurrency: Optional[int] = None, num_rows_per_file: Optional[int] = None,
                    mode: str = "append", storage_options=None, tf_schema=None,
                    filename_provider=None) -> List[str]:
    """``Dataset.write_tfrecords`` without TensorFlow: writes the rows of ``dataset`` as
    tf.train.Examples (see :func:`tfrec_fast.arrow.write_table` for the column types) into
    shards ``{path}/{prefix}-00000-of-0000N{suffix}`` (one per write task) and a manifest
    ``_{prefix}.manifest.json``, written last (named so that reading the directory, with Ray's
    reader or this one, skips it). Returns the shard paths (or URLs) in order.

    Ray's arguments mean what they mean there: a null value is written as an empty list of its
    column's kind (``nulls="omit"`` leaves the feature out instead), a column of no kind (only
    nulls) raises ValueError; ``min_rows_per_file`` (``num_rows_per_file``, deprecated) bundles
    at least that many rows per shard; ``arrow_open_stream_args={"compression": "gzip"}`` is
    ``compression="gzip"``; ``mode`` ("append", "overwrite", "ignore", "error"; Ray's SaveMode
    too) as in :meth:`TFRecordDatasink.on_write_start`, where "overwrite" removes the files the
    directory held only after the new shards are complete. ``tf_schema`` (use ``spec``) and
    ``filename_provider`` (shards are named by ``prefix`` and ``suffix``) are refused.
    """
    _refuse_tf_schema(tf_schema)
    if filename_provider is not None:
        raise TypeError("filename_provider is not supported: shards are named "
                        "{prefix}-00000-of-0000N{suffix}; pass prefix= and suffix=")
    if num_rows_per_file is not None:
        if min_rows_per_file is not None:
            raise ValueError("pass min_rows_per_file or num_rows_per_file (deprecated), not both")
        min_rows_per_file = num_rows_per_file
    sink = TFRecordDatasink(path, prefix=prefix, suffix=suffix,
                            compression=_compression(compression, arrow_open_stream_args),
                            spec=spec, manifest=manifest, nulls=nulls,
                            min_rows_per_file=min_rows_per_file, try_create_dir=try_create_dir,
                            mode=mode, storage_options=storage_options, filesystem=filesystem)
    dataset.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
    return sink.shards
