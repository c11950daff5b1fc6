"""Ray Data: read and write TFRecord datasets without TensorFlow (extra ``ray``).

``read_tfrecords`` takes the arguments of ``ray.data.read_tfrecords`` and gives its values for
tf.train.Example files: a feature holding one value in every record of a read task is a scalar
column, others are ``list<...>`` columns, bytes are ``binary``, floats ``float32``, a missing
feature is null. On top: both CRCs checked, the C++ decoder (no per-record Python object, no
TensorFlow import), an optional ``spec`` (tfrec_fast.FixedLen / VarLen: the types of
:mod:`tfrec_fast.arrow`), and big uncompressed files split into record ranges (by a header-only
scan) when more read tasks are asked for than there are files.

``write_tfrecords(dataset, path)`` writes ``{prefix}-00000-of-0000N.tfrecord`` shards, one per
write task, with the :class:`~tfrec_fast.ShardedWriter` publish rule: each task writes under a
temporary name, the driver renames them all once every task has succeeded, and the manifest is
written last.
"""

from __future__ import annotations

import os
import secrets
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

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
                 ignore_missing_paths: bool = False, storage_options=None, filesystem=None):
        super().__init__()
        self._spec = spec
        self._compression = normalize_compression(compression)
        self._include_paths = include_paths
        self._block_size = int(block_size)
        self._verify = verify
        self._options = {"storage_options": storage_options, "filesystem": filesystem}
        self._files = _files(paths, file_extensions, ignore_missing_paths, **self._options)
        self._sizes = [file_version(f)[0] or 0 for f in self._files]
        self._scalars: Any = False
        if spec is None:  # one schema for every read task, so Ray's blocks agree
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
            table = self._read_piece(path, first, end, index)
            if self._include_paths:
                table = table.append_column("path", pa.array([_display(path)] * len(table)))
            for start in range(0, max(len(table), 1), self._block_size):
                yield table.slice(start, self._block_size)

    def _read_piece(self, path, first: int, end: int, index) -> pa.Table:
        if end < 0:
            return _arrow.read_table(path, self._spec, compression=self._compression,
                                     verify=self._verify, large_types=False,
                                     scalars=self._scalars, batch_size=self._block_size,
                                     **self._options)
        plan = _arrow._Plan(self._spec, None, None, (), "list", False, self._scalars)
        with IndexedTFRecordReader(path, ray.get(index), verify=self._verify,
                                   **self._options) as reader:
            batch = reader.get_batch(np.arange(first, end, dtype=np.int64))
        plan.infer([batch])
        return pa.Table.from_batches([plan.convert(batch, [(_display(path), first, end - first)])])


def _files(paths, extensions, ignore_missing: bool, **options) -> list:
    sources = []
    for source in ([paths] if isinstance(paths, (str, os.PathLike)) else list(paths)):
        text = os.fspath(source) if isinstance(source, os.PathLike) else source
        if isinstance(text, str) and os.path.isdir(text):
            text = os.path.join(text, "*")
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
                   include_paths: bool = False, ignore_missing_paths: bool = False,
                   file_extensions: Optional[List[str]] = None,
                   concurrency: Optional[int] = None, override_num_blocks: Optional[int] = None,
                   ray_remote_args: Optional[Dict[str, Any]] = None, compression: Optional[str] = None,
                   block_size: int = 4096, verify: bool = True,
                   storage_options=None, **read_args) -> "ray.data.Dataset":
    """``ray.data.read_tfrecords`` without TensorFlow (see the module docstring for the values).

    ``arrow_open_stream_args={"compression": "gzip"}`` works as in Ray; ``compression=``
    ("gzip", "zlib", "auto") is the same thing. ``filesystem``: a pyarrow or fsspec filesystem;
    paths may also be URLs (``storage_options``). ``tf_schema`` is not supported (use
    ``spec``). Other keyword arguments go to ``ray.data.read_datasource``.
    """
    if read_args.pop("tf_schema", None) is not None:
        raise TypeError("tf_schema needs TensorFlow's schema protos: pass spec= (tfrec_fast "
                        "FixedLen / VarLen) instead")
    stream_args = dict(arrow_open_stream_args or {})
    if compression is None:
        compression = stream_args.pop("compression", None)
    if stream_args:
        raise TypeError(f"arrow_open_stream_args: only 'compression' is used, not {stream_args}")
    source = TFRecordDatasource(paths, spec, compression=compression, include_paths=include_paths,
                                block_size=block_size, verify=verify,
                                file_extensions=file_extensions,
                                ignore_missing_paths=ignore_missing_paths,
                                storage_options=storage_options, filesystem=filesystem)
    remote = {k: v for k, v in (("num_cpus", num_cpus), ("num_gpus", num_gpus),
                                ("memory", memory)) if v is not None}
    return ray.data.read_datasource(source, parallelism=parallelism,
                                    ray_remote_args=ray_remote_args, concurrency=concurrency,
                                    override_num_blocks=override_num_blocks, **remote,
                                    **read_args)


class TFRecordDatasink(Datasink):
    """One temporary TFRecord file per write task; published together on completion."""

    def __init__(self, path, *, prefix: str = "data", suffix: str = ".tfrecord",
                 compression: Optional[str] = None, spec=None, manifest: bool = True,
                 storage_options=None, filesystem=None):
        self._path = path
        self._naming_args = (prefix, suffix)
        self._compression = normalize_compression(compression, auto=False)
        self._spec = spec_to_json(spec) if spec is not None else None
        self._manifest = manifest
        self._options = {"storage_options": storage_options, "filesystem": filesystem}
        self._token = secrets.token_hex(4)

    def _naming(self) -> Tuple[Any, _Naming]:
        store, path = _store_for(self._path, **self._options)
        return store, _Naming.from_args(store, path, *self._naming_args)

    def on_write_start(self, schema=None) -> None:
        store, naming = self._naming()
        store.makedirs(naming.directory)
        taken = naming.family()
        if taken:
            raise FileExistsError(f"{store.url(taken[0])} already exists: write to an empty "
                                  "directory or another prefix")

    def write(self, blocks, ctx) -> Tuple[int, str, int]:
        store, naming = self._naming()
        temp = naming.temp(ctx.task_idx, self._token)
        rows = 0
        with store.writer(temp, self._compression, None, 1 << 20) as writer:
            for block in blocks:
                table = BlockAccessor.for_block(block).to_arrow()
                rows += _arrow.write_table(table, writer)
        return ctx.task_idx, temp, rows

    def on_write_complete(self, write_result) -> None:
        store, naming = self._naming()
        done = sorted(write_result.write_returns)
        n = len(done)
        shards = []
        for i, (_, temp, rows) in enumerate(done):
            final = naming.final(i, n)
            store.replace(temp, final)
            shards.append((final, rows, store.size(final)))
        if self._manifest:
            manifest = naming.default_manifest()
            store.write_json(manifest, manifest_data(store, manifest, shards, self._compression,
                                                     self._spec, False), self._token, False)
        self.shards = [store.url(final) for final, _, _ in shards]

    def on_write_failed(self, error: Exception) -> None:
        store, naming = self._naming()
        for name in store.listdir(naming.directory):
            if name.endswith(".tmp-" + self._token):
                try:
                    store.remove(store.join(naming.directory, name))
                except OSError:
                    pass


def write_tfrecords(dataset: "ray.data.Dataset", path, *, prefix: str = "data",
                    suffix: str = ".tfrecord", compression: Optional[str] = None, spec=None,
                    manifest: bool = True, storage_options=None, filesystem=None,
                    ray_remote_args: Optional[Dict[str, Any]] = None,
                    concurrency: Optional[int] = None) -> List[str]:
    """Writes the rows of ``dataset`` as tf.train.Examples (see
    :func:`tfrec_fast.arrow.write_table` for the column types) into shards
    ``{path}/{prefix}-00000-of-0000N{suffix}`` (one per write task) and a manifest
    ``{prefix}.manifest.json``, written last. Returns the shard paths (or URLs) in order."""
    sink = TFRecordDatasink(path, prefix=prefix, suffix=suffix, compression=compression,
                            spec=spec, manifest=manifest, storage_options=storage_options,
                            filesystem=filesystem)
    dataset.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
    return sink.shards
