"""TFRecordDatasink: Ray's block-based file datasink (its file names, save modes, directory
handling and filesystems) with tfrec_fast's encoder writing the records."""

from __future__ import annotations

import json
import logging
import posixpath
import secrets
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from ray.data._internal.delegating_block_builder import DelegatingBlockBuilder
from ray.data._internal.planner.plan_write_op import WRITE_UUID_KWARG_NAME
from ray.data._internal.savemode import SaveMode
from ray.data.block import BlockAccessor
from ray.data.datasource.file_datasink import BlockBasedFileDatasink

from .. import arrow as _arrow
from .._core import FRAMING_SIZE
from ..manifest import manifest_data
from ..records import TFRecordWriter, normalize_compression
from . import _files
from ._schema import TFSchema
from ._tensors import is_tensor_type, serialized_tensors

logger = logging.getLogger(__name__)

# Ray's underlying kinds of a column, and what a tf_schema kind accepts of them.
_RAY_WRITE_KIND = {"int64": "int", "float32": "float", "bytes": "bytes"}


class TFRecordDatasink(BlockBasedFileDatasink):
    """Writes each write task's rows as tf.train.Examples into one TFRecord file.

    Ray's datasink in everything Ray's ``write_tfrecords`` shows: the file names of its
    FilenameProvider (by default ``{dataset uuid}_{write uuid}_{task:06}.tar``, Ray's own
    default), the save modes, ``try_create_dir``, ``min_rows_per_file``, the filesystem and the
    output stream arguments. On top: a local file appears under its name only once complete;
    ``mode="overwrite"`` removes what the directory held only once the new files are complete;
    and, on request, ``FILE.idx`` index files (uncompressed output) and a manifest.

    Parameters
    ----------
    path : str
        The output directory (local, or a URL).
    tf_schema : tensorflow_metadata Schema, optional
        Ray's: the kind of every column, checked.
    compression : str, optional
        "gzip" or "zlib" (or pass ``open_stream_args={"compression": ...}`` as in Ray).
    nulls : {"empty", "omit"}
        A null value is an empty list of its column's kind (Ray's), or leaves the feature out.
    float64 : {"exact", "round"}
        See :func:`tfrec_fast.arrow.write_table`.
    index : bool
        Write ``FILE.idx`` beside each (uncompressed) file.
    manifest : bool
        Write ``_{dataset uuid}.manifest.json`` (tfrec_fast's shard manifest) last.
    storage_options : dict, optional
        fsspec options for a URL, when no ``filesystem`` is given.
    **file_datasink_args
        Ray's: ``filesystem``, ``try_create_dir``, ``open_stream_args``, ``filename_provider``,
        ``dataset_uuid``, ``file_format``, ``min_rows_per_file``, ``mode``.
    """

    mode: SaveMode  # set by Ray's __init__; declared for type checkers that do not see Ray

    def __init__(
        self,
        path,
        *,
        tf_schema=None,
        compression: Optional[str] = None,
        nulls: str = "empty",
        float64: str = "exact",
        index: bool = False,
        manifest: bool = False,
        storage_options=None,
        filesystem=None,
        open_stream_args: Optional[Dict[str, Any]] = None,
        file_format: str = "tar",
        mode=SaveMode.APPEND,
        **file_datasink_args,
    ):
        if nulls not in _arrow.NULLS:
            raise ValueError(f"nulls must be one of {_arrow.NULLS}, not {nulls!r}")
        if float64 not in _arrow.FLOAT64:
            raise ValueError(f"float64 must be one of {_arrow.FLOAT64}, not {float64!r}")
        open_args = dict(open_stream_args or {})
        given = open_args.get("compression")
        if compression is not None and given is not None:
            raise ValueError(
                "give compression= or arrow_open_stream_args={'compression': ...}, not both"
            )
        compression = compression if compression is not None else given
        own = str(compression).lower() if compression is not None else ""
        if own in ("gzip", "zlib", "none", ""):
            open_args.pop("compression", None)  # the writer compresses, not pyarrow's stream
            compression = normalize_compression(own, auto=False)
        else:
            compression = ""  # another codec: pyarrow's output stream
        if index and (compression or open_args.get("compression")):
            raise ValueError("index=True needs uncompressed output (random access)")
        if storage_options and filesystem is None:
            filesystem = _files._fsspec_filesystem(path, storage_options)
        super().__init__(
            path,
            filesystem=filesystem,
            open_stream_args=open_args,
            file_format=file_format,
            mode=SaveMode(getattr(mode, "value", mode)),
            **file_datasink_args,
        )
        self._tf_schema = None if tf_schema is None else TFSchema.of(tf_schema)
        self._compression = compression
        self._nulls = nulls
        self._float64 = float64
        self._index = bool(index)
        self._manifest = bool(manifest)
        self._token = secrets.token_hex(4)
        self._replaced: List[Tuple[str, bool]] = []  # mode="overwrite": (entry, is a directory)
        self.paths: List[str] = []  # the files written, once the write is complete

    # -- driver side --

    def on_write_start(self, schema=None) -> None:
        """Ray's save modes; "overwrite" notes what the directory holds, to remove it once the
        new files are complete (Ray removes it first)."""
        if self._write_started or self.mode != SaveMode.OVERWRITE:
            return super().on_write_start(schema)
        info = self.filesystem.get_file_info(self.path)
        if info.type == pafs.FileType.Directory:
            selector = pafs.FileSelector(self.path, recursive=False)
            self._replaced = [
                (entry.path, entry.type == pafs.FileType.Directory)
                for entry in self.filesystem.get_file_info(selector)
            ]
        self.mode = SaveMode.APPEND
        try:
            super().on_write_start(schema)
        finally:
            self.mode = SaveMode.OVERWRITE

    def on_write_complete(self, write_result) -> None:
        written = sorted(
            (r for r in write_result.write_returns if r is not None), key=lambda r: r["task"]
        )
        super().on_write_complete(write_result)
        self.paths = [r["path"] for r in written]
        keep = set(self.paths) | {p + _files.INDEX_SUFFIX for p in self.paths}
        if self._manifest and written:
            keep.add(self._write_manifest(written))
        for entry, is_dir in self._replaced:  # the new output is complete: the old one goes
            if entry in keep:
                continue
            if is_dir:
                self.filesystem.delete_dir(entry)
            else:
                self.filesystem.delete_file(entry)

    def on_write_failed(self, error: Exception) -> None:
        """Temporary files a failed task left (hidden from readers) are removed."""
        try:
            selector = pafs.FileSelector(self.path, recursive=False, allow_not_found=True)
            for entry in self.filesystem.get_file_info(selector):
                if posixpath.basename(entry.path).endswith(".tmp-" + self._token):
                    self.filesystem.delete_file(entry.path)
        except OSError:
            pass

    def _write_manifest(self, written: List[Dict[str, Any]]) -> str:
        name = f"_{self.dataset_uuid or 'data'}.manifest.json"
        path = _files.join(self.path, name)
        data = manifest_data(
            _PosixNames(),
            path,
            [(r["path"], r["rows"], r["bytes"]) for r in written],
            self._compression,
            None,
            self._index,
        )
        with self.filesystem.open_output_stream(path) as out:
            out.write(json.dumps(data, indent=1).encode())
        return path

    # -- in the write tasks --

    # (Ray's file datasinks return None; this one returns what it wrote, for the manifest)
    def write(  # type: ignore[override, unused-ignore]  # an override only where Ray is seen
        self, blocks: Iterable, ctx
    ) -> Optional[Dict[str, Any]]:
        """All of a task's blocks into one file; what was written, for on_write_complete."""
        builder = DelegatingBlockBuilder()
        for block in blocks:
            builder.add_block(block)
        block = BlockAccessor.for_block(builder.build())
        if block.num_rows() == 0:  # as Ray: no file for no rows
            return None
        table = self._prepared(block.to_arrow())
        filename = self.filename_provider.get_filename_for_task(
            ctx.kwargs[WRITE_UUID_KWARG_NAME], ctx.task_idx
        )
        final = _files.join(self.path, filename)
        local = _files.is_local(self.filesystem)
        # A local file is written under a hidden name (which readers skip) and renamed when
        # complete; an object store publishes an object only when it is complete anyway.
        target = _files.join(self.path, f".{filename}.tmp-{self._token}") if local else final
        rows, nbytes, sizes = self._write_file(table, target)
        if local:
            self.filesystem.move(target, final)
        if sizes is not None:
            offsets = np.zeros(len(sizes), np.int64)
            np.cumsum(sizes[:-1], out=offsets[1:])
            _files.write_index_file(self.filesystem, final + _files.INDEX_SUFFIX, offsets, sizes)
        return {"task": ctx.task_idx, "path": final, "rows": rows, "bytes": nbytes}

    def write_block_to_file(self, block: BlockAccessor, file: "pa.NativeFile") -> None:
        """Ray's hook: one block's rows as Examples into an open output stream."""
        writer = TFRecordWriter(file, self._compression)
        with writer:
            for batch in _arrow.encoded_batches(
                self._prepared(block.to_arrow()), nulls=self._nulls, float64=self._float64
            ):
                writer.write_batch(batch)

    def _write_file(self, table: pa.Table, path: str):
        """(rows, bytes, framed record sizes or None) of a new file holding ``table``."""
        sizes: List[np.ndarray] = []
        with _files.output_stream(self.filesystem, path, self.open_stream_args) as out:
            with TFRecordWriter(out, self._compression) as writer:
                for batch in _arrow.encoded_batches(
                    table, nulls=self._nulls, float64=self._float64
                ):
                    writer.write_batch(batch)
                    if self._index:
                        sizes.append(np.diff(np.asarray(batch.offsets)) + FRAMING_SIZE)
            rows = writer.records_written
            nbytes = out.tell()
        return rows, nbytes, (np.concatenate(sizes) if self._index else None)

    def _prepared(self, table: pa.Table) -> pa.Table:
        """Ray's writer's columns: tensors as serialized TensorProtos; with a tf_schema, Ray's
        checks, and columns of no kind typed by it."""
        for i, field in enumerate(table.schema):
            if is_tensor_type(field.type):
                table = table.set_column(i, field.name, serialized_tensors(table.column(i)))
        if self._tf_schema is None:
            return table
        kinds = dict(self._tf_schema.kinds)
        for name in table.column_names:
            if name not in kinds:
                raise ValueError(
                    f"Found extra unexpected feature {name} not in specified "
                    f"schema: {self._tf_schema.text}"
                )
        for i, field in enumerate(table.schema):
            table = table.set_column(
                i, field.name, _as_schema_kind(table.column(i), field, kinds[field.name])
            )
        return table


def _as_schema_kind(column, field: pa.Field, kind: str):
    """A column checked against its tf_schema kind as Ray checks it; one of no kind (nulls,
    empty lists) takes the schema's."""
    t = field.type
    value = (
        t.value_type
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
        else t
    )
    if pa.types.is_null(value):
        target = {"int64": pa.int64(), "float32": pa.float32(), "bytes": pa.binary()}[kind]
        return column.cast(pa.list_(target) if value is not t else target)
    underlying = (
        "string"
        if pa.types.is_string(value) or pa.types.is_large_string(value)
        else "bytes"
        if pa.types.is_binary(value) or pa.types.is_large_binary(value)
        else "float"
        if pa.types.is_floating(value)
        else "int"
        if pa.types.is_integer(value)
        else None
    )
    specified = _RAY_WRITE_KIND[kind]
    if specified == "bytes" and underlying == "string":
        specified = "string"
    if underlying is not None and underlying != specified:
        raise ValueError(
            "Schema field type mismatch during write: specified type is "
            f"{specified}, but underlying type is {underlying}"
        )
    return column


class _PosixNames:
    """The two path operations manifest_data needs, on '/'-separated paths."""

    @staticmethod
    def dirname(path: str) -> str:
        return posixpath.dirname(path)

    @staticmethod
    def relative(path: str, base: str) -> str:
        return posixpath.relpath(path, base)
