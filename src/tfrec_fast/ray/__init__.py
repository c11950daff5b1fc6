"""Ray Data: read and write TFRecord datasets without TensorFlow (extra ``ray``).

``read_tfrecords`` and ``write_tfrecords`` take the arguments of ``ray.data.read_tfrecords`` and
``Dataset.write_tfrecords`` and give their values, on Ray's own file-based extension points
(:class:`TFRecordDatasource` is a ``FileBasedDatasource``, :class:`TFRecordDatasink` a
``BlockBasedFileDatasink``): local and remote directories, globs, Hive partitions, partition
filters, file shuffling, Ray's file names and save modes. The records are read and parsed by
tfrec_fast's C++ core (both CRCs checked, no Python object per record) and TensorFlow is never
imported, on the driver or in the tasks.

Without a schema the columns follow Ray's rules for tf.train.Example files: a feature holding one
value in every record is a plain column (int64, float, binary; null where a record has none), any
other a ``list<...>`` column. They are decided once for the whole dataset from a sample (the first
records of up to 16 files: local ones read on the driver, remote ones in a Ray task), so that
every block agrees; a record that later breaks the rule is read all the same, its column
following Ray's per-record rule (see :mod:`tfrec_fast.ray._schema`). ``spec`` (tfrec_fast's
FixedLen / VarLen: the types of :mod:`tfrec_fast.arrow`) and Ray's ``tf_schema`` fix the
columns instead.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

try:
    import pyarrow  # noqa: F401
    import ray.data
    from ray.data._internal.savemode import SaveMode
except ImportError as error:  # pragma: no cover - exercised where ray is absent
    raise ImportError("tfrec_fast.ray needs Ray Data: pip install 'tfrec_fast[ray]'") from error

from ._datasink import TFRecordDatasink
from ._datasource import MIN_BLOCK_BYTES, MIN_SPLIT_BYTES, TFRecordDatasource, TFRecordReadError

__all__ = [
    "read_tfrecords",
    "write_tfrecords",
    "TFRecordDatasource",
    "TFRecordDatasink",
    "TFRecordReadError",
    "MIN_BLOCK_BYTES",
    "MIN_SPLIT_BYTES",
]

# Remote options that place the schema-sampling tasks where the read tasks may run.
_PLACEMENT = ("label_selector", "fallback_strategy", "runtime_env", "resources")


def read_tfrecords(
    paths,
    spec=None,
    *,
    filesystem=None,
    parallelism: int = -1,
    num_cpus: Optional[float] = None,
    num_gpus: Optional[float] = None,
    memory: Optional[float] = None,
    arrow_open_stream_args: Optional[Dict[str, Any]] = None,
    partition_filter=None,
    partitioning=None,
    include_paths: bool = False,
    ignore_missing_paths: bool = False,
    tf_schema=None,
    shuffle=None,
    file_extensions: Optional[List[str]] = None,
    concurrency: Optional[int] = None,
    override_num_blocks: Optional[int] = None,
    label_selector: Optional[Dict[str, str]] = None,
    fallback_strategy: Optional[List[Dict[str, Any]]] = None,
    max_calls: Optional[int] = None,
    resources: Optional[Dict[str, float]] = None,
    accelerator_type: Optional[str] = None,
    runtime_env: Optional[Dict[str, Any]] = None,
    ray_remote_args: Optional[Dict[str, Any]] = None,
    compression: Optional[str] = None,
    verify: bool = True,
    block_size: Optional[int] = None,
    storage_options: Optional[Dict[str, Any]] = None,
) -> "ray.data.Dataset":
    """``ray.data.read_tfrecords`` without TensorFlow.

    Parameters
    ----------
    paths : str or list of str
        Files, directories (every file below, except names starting with "." or "_", and the
        ``FILE.idx`` index of a listed FILE) and glob patterns; local, or URLs.
    spec : dict, optional
        tfrec_fast feature specs choosing and typing the columns (see :mod:`tfrec_fast.arrow`).
    filesystem : pyarrow.fs.FileSystem or fsspec filesystem, optional
        As in Ray.
    partitioning : ray.data.datasource.Partitioning, optional
        Columns from the paths (e.g. Hive's ``split=train/``), as Ray's other file readers.
    tf_schema : tensorflow_metadata Schema, optional
        As in Ray: every feature a list of the schema's type.
    compression : str, optional
        "gzip", "zlib", "auto" (told from the bytes) or a pyarrow codec, for every file; the
        same as ``arrow_open_stream_args={"compression": ...}``. None: from each file's name,
        as Ray does.
    verify : bool
        Check both CRCs of every record (Ray checks none).
    block_size : int, optional
        Records per block at most; by default blocks hold Ray's target block size in bytes.
    storage_options : dict, optional
        fsspec options for a URL when no ``filesystem`` is given.
    override_num_blocks : int, optional
        As in Ray. Without it (and without ``parallelism``) the number of blocks follows Ray's
        rule with blocks of at least ``MIN_BLOCK_BYTES`` (16 MiB) of files rather than Ray's
        1 MiB: Ray spends milliseconds on every block, which is more than this reader spends
        making one. A DataContext with its own ``read_op_min_num_blocks`` or
        ``target_min_block_size`` keeps Ray's rule.
    **others
        Ray's, meaning what they mean there: ``parallelism``, ``num_cpus``, ``num_gpus``,
        ``memory``, ``arrow_open_stream_args``, ``partition_filter``, ``include_paths``,
        ``ignore_missing_paths``, ``shuffle`` ("files" or a FileShuffleConfig, reseeded per
        execution as configured), ``file_extensions``, ``concurrency``, ``label_selector``,
        ``fallback_strategy``, ``max_calls``, ``resources``, ``accelerator_type``,
        ``runtime_env``, ``ray_remote_args``.

    Returns
    -------
    ray.data.Dataset

    Raises
    ------
    TFRecordReadError
        (a RuntimeError, as Ray's, and a DataLossError) for a file that is not TFRecords or is
        damaged, naming it, the record and the byte offset.
    ExampleParseError
        (a ValueError, as Ray's) for a record that is not a tf.train.Example.
    """
    placement = {
        k: v
        for k, v in (
            ("label_selector", label_selector),
            ("fallback_strategy", fallback_strategy),
            ("runtime_env", runtime_env),
            ("resources", resources),
        )
        if v is not None
    }
    placement.update({k: v for k, v in (ray_remote_args or {}).items() if k in _PLACEMENT})
    source = TFRecordDatasource(
        paths,
        spec,
        tf_schema=tf_schema,
        compression=compression,
        verify=verify,
        block_size=block_size,
        sample_remote_args=placement,
        storage_options=storage_options,
        filesystem=filesystem,
        open_stream_args=arrow_open_stream_args,
        partition_filter=partition_filter,
        partitioning=partitioning,
        ignore_missing_paths=ignore_missing_paths,
        shuffle=shuffle,
        include_paths=include_paths,
        file_extensions=file_extensions,
    )
    if override_num_blocks is None and parallelism == -1:
        override_num_blocks = source.default_num_blocks()
    return ray.data.read_datasource(
        source,
        parallelism=parallelism,
        num_cpus=num_cpus,
        num_gpus=num_gpus,
        memory=memory,
        concurrency=concurrency,
        override_num_blocks=override_num_blocks,
        label_selector=label_selector,
        fallback_strategy=fallback_strategy,
        max_calls=max_calls,
        resources=resources,
        accelerator_type=accelerator_type,
        runtime_env=runtime_env,
        ray_remote_args=ray_remote_args,
    )


def write_tfrecords(
    dataset: "ray.data.Dataset",
    path: str,
    *,
    tf_schema=None,
    filesystem=None,
    try_create_dir: bool = True,
    arrow_open_stream_args: Optional[Dict[str, Any]] = None,
    filename_provider=None,
    min_rows_per_file: Optional[int] = None,
    ray_remote_args: Optional[Dict[str, Any]] = None,
    concurrency: Optional[int] = None,
    num_rows_per_file: Optional[int] = None,
    mode: SaveMode = SaveMode.APPEND,
    compression: Optional[str] = None,
    nulls: str = "empty",
    float64: str = "exact",
    index: bool = False,
    manifest: bool = False,
    storage_options: Optional[Dict[str, Any]] = None,
) -> None:
    """``Dataset.write_tfrecords`` without TensorFlow: one TFRecord file of tf.train.Examples
    per write task, named and placed as Ray names and places them.

    Parameters
    ----------
    dataset : ray.data.Dataset
        The rows to write, one Example each (see :func:`tfrec_fast.arrow.write_table` for the
        column types; tensor columns are serialized TensorProtos, as Ray writes them).
    path : str
        The output directory.
    compression : str, optional
        "gzip" or "zlib"; the same as ``arrow_open_stream_args={"compression": ...}``.
    nulls : {"empty", "omit"}
        A null is an empty list of its column's kind (Ray's), or leaves the feature out.
    float64 : {"exact", "round"}
        TFRecord floats are float32: "exact" refuses a float64 value float32 cannot hold
        exactly (naming the column and row); "round" rounds (what Ray's writer does silently).
    index : bool
        Write ``FILE.idx`` beside each file (uncompressed output), for split reads.
    manifest : bool
        Write a tfrec_fast shard manifest ``_{dataset uuid}.manifest.json`` last.
    storage_options : dict, optional
        fsspec options for a URL when no ``filesystem`` is given.
    override_num_blocks : int, optional
        As in Ray. Without it (and without ``parallelism``) the number of blocks follows Ray's
        rule with blocks of at least ``MIN_BLOCK_BYTES`` (16 MiB) of files rather than Ray's
        1 MiB: Ray spends milliseconds on every block, which is more than this reader spends
        making one. A DataContext with its own ``read_op_min_num_blocks`` or
        ``target_min_block_size`` keeps Ray's rule.
    **others
        Ray's, meaning what they mean there: ``tf_schema``, ``filesystem``,
        ``try_create_dir``, ``arrow_open_stream_args``, ``filename_provider``,
        ``min_rows_per_file`` (``num_rows_per_file``, deprecated), ``ray_remote_args``,
        ``concurrency``, ``mode`` (SaveMode or its value: "append", "create", "error",
        "ignore", "overwrite"; "overwrite" removes the old files only once the new ones are
        complete).

    Raises
    ------
    ValueError
        A column of no kind; a float64 value with no exact float32 form; Ray's tf_schema and
        save mode errors.
    """
    from ray.data._internal.util import _validate_rows_per_file_args

    min_rows, _ = _validate_rows_per_file_args(
        num_rows_per_file=num_rows_per_file, min_rows_per_file=min_rows_per_file
    )
    sink = TFRecordDatasink(
        path,
        tf_schema=tf_schema,
        compression=compression,
        nulls=nulls,
        float64=float64,
        index=index,
        manifest=manifest,
        storage_options=storage_options,
        filesystem=filesystem,
        open_stream_args=arrow_open_stream_args,
        try_create_dir=try_create_dir,
        filename_provider=filename_provider,
        dataset_uuid=dataset._uuid,
        min_rows_per_file=min_rows,
        mode=mode,
    )
    dataset.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
