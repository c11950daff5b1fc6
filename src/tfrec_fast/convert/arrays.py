"""Numpy arrays sharing their first dimension -> one tf.train.Example per row, in shards.

What row ``i`` of an array named ``key`` becomes, by the array's rank and dtype:

- rank 1, bool or integer: ``key`` = one int64 (bools as 0/1; uint64 beyond int64 is an error).
- rank 1, floating: ``key`` = one float. TFRecord floats are float32: float64 values are rounded.
- rank 1, strings (numpy ``S`` or ``U``; ``U`` is stored as UTF-8): ``key`` = one bytes value.
- rank > 1, numeric (bool, integer, floating, complex): ``key`` = the row's raw bytes as ONE
  bytes value (C order, little-endian), ``key/shape`` = the row's shape (int64 list),
  ``key/dtype`` = the numpy dtype name (b"uint8", b"float32", ...). Read it back with
  ``FixedLen(shape, dtype)`` (``from_bytes=True`` for int64 and float32), or
  ``np.frombuffer(value, dtype).reshape(shape)``.
- rank > 1, strings: ``key`` = the row's values as a bytes list (C order), ``key/shape``.

Arrays of one conversion must have the same number of rows (a mismatch is a ValueError naming
each array's length). Encoding is columnar, in C++, a chunk of rows at a time.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ..encode import Bytes, encode_examples
from ..spec import FixedLen
from ._common import ConvertSummary, WriteOptions
from ._pipeline import permutation, write_jobs

__all__ = ["convert_numpy"]

# Rows per encoded chunk are chosen to hold about this many array bytes: big enough for the
# columnar encoder to pay off, small enough to keep memory flat.
_CHUNK_BYTES = 4 << 20
_MAX_CHUNK_ROWS = 1 << 16

PathLike = Union[str, "os.PathLike[str]"]


class _Column(NamedTuple):
    key: str
    array: np.ndarray
    layout: str  # "int64", "float", "bytes" (rank 1), "raw" or "strings" (rank > 1)


def _layout(key: str, array: np.ndarray) -> str:
    kind = array.dtype.kind
    if kind in "SU":
        return "bytes" if array.ndim == 1 else "strings"
    if kind not in "biufc":
        raise ValueError(f"array {key!r}: dtype {array.dtype} is not numeric, bytes or str")
    if array.ndim == 1 and kind != "c":
        return "float" if kind == "f" else "int64"
    return "raw"


def _columns(
    arrays: Mapping[str, np.ndarray], keys: Optional[Sequence[str]], source: str
) -> List[_Column]:
    keys = list(arrays) if keys is None else list(keys)
    if not keys:
        raise ValueError(f"no arrays to convert in {source}")
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise KeyError(f"no array {missing[0]!r} in {source} (it has: {', '.join(arrays)})")
    columns = []
    for key in keys:
        array = np.asarray(arrays[key])
        if array.ndim == 0:
            raise ValueError(f"array {key!r} is a scalar: it has no rows")
        layout = _layout(key, array)
        if layout == "raw":  # the documented byte order
            array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        columns.append(_Column(key, array, layout))
    rows = {c.key: len(c.array) for c in columns}
    if len(set(rows.values())) > 1:
        listed = ", ".join(f"{k} has {n}" for k, n in rows.items())
        raise ValueError(f"arrays must share their first dimension (one row per Example): {listed}")
    names = set(keys)
    for c in columns:
        for extra in _extra_keys(c):
            if extra in names:
                raise ValueError(
                    f"array {extra!r} collides with the {extra!r} feature written "
                    f"for array {c.key!r}"
                )
    return columns


def _extra_keys(column: _Column) -> List[str]:
    return {
        "raw": [f"{column.key}/shape", f"{column.key}/dtype"],
        "strings": [f"{column.key}/shape"],
    }.get(column.layout, [])


def _spec(columns: Sequence[_Column]) -> dict:
    """The feature spec of the Examples written (what the manifest records)."""
    spec: Dict[str, FixedLen] = {}
    for c in columns:
        row_shape = c.array.shape[1:]
        if c.layout == "raw":
            spec[c.key] = FixedLen(row_shape, c.array.dtype.name, from_bytes=True)
            spec[f"{c.key}/shape"] = FixedLen((len(row_shape),), "int64")
            spec[f"{c.key}/dtype"] = FixedLen((), "bytes")
        elif c.layout == "strings":
            spec[c.key] = FixedLen(row_shape, "bytes")
            spec[f"{c.key}/shape"] = FixedLen((len(row_shape),), "int64")
        else:
            spec[c.key] = FixedLen(
                (), {"int64": "int64", "float": "float32", "bytes": "bytes"}[c.layout]
            )
    return spec


def _encode_rows(columns: Sequence[_Column], rows: Union[slice, np.ndarray]):
    """The Examples of some rows (a slice, or row indices when shuffled) as one RecordBatch."""
    out: Dict[str, Any] = {}
    for c in columns:
        part = c.array[rows]
        n = len(part)
        if c.layout == "raw":
            out[c.key] = Bytes(np.ascontiguousarray(part))  # each row's raw bytes, one value
        else:
            out[c.key] = part
        if c.layout in ("raw", "strings"):
            shape = np.array(c.array.shape[1:], dtype=np.int64)
            out[f"{c.key}/shape"] = np.broadcast_to(shape, (n, len(shape)))
        if c.layout == "raw":
            out[f"{c.key}/dtype"] = np.broadcast_to(np.array(c.array.dtype.name.encode()), (n,))
    return encode_examples(out, n)


def _chunk_rows(columns: Sequence[_Column]) -> int:
    row_bytes = sum(c.array[:1].nbytes for c in columns)
    return max(1, min(_MAX_CHUNK_ROWS, _CHUNK_BYTES // max(1, row_bytes)))


def _load(
    arrays: Union[PathLike, Mapping[str, np.ndarray]], keys: Optional[Sequence[str]]
) -> Tuple[Dict[str, np.ndarray], str]:
    """(name -> array, a name for messages): from a file, only the arrays asked for are read."""
    if isinstance(arrays, Mapping):
        return dict(arrays), "the arrays given"
    path = os.fspath(arrays)
    data = np.load(path, allow_pickle=False)  # pickled object arrays are never loaded
    if not hasattr(data, "files"):
        raise ValueError(f"{path} holds a single array (.npy): save it in an .npz with a name")
    with data:
        missing = [k for k in keys or () if k not in data.files]
        if missing:
            raise KeyError(f"no array {missing[0]!r} in {path} (it has: {', '.join(data.files)})")
        return {name: data[name] for name in data.files if keys is None or name in keys}, path


def convert_numpy(
    arrays: Union[PathLike, Mapping[str, np.ndarray]],
    out_dir: PathLike,
    *,
    keys: Optional[Sequence[str]] = None,
    prefix: Optional[str] = None,
    num_shards: Optional[int] = None,
    shard_size: Union[int, str, None] = None,
    records_per_shard: Optional[int] = None,
    compression: Optional[str] = None,
    index: bool = False,
    shuffle: bool = False,
    seed: int = 0,
    workers: int = 1,
    progress: Optional[bool] = None,
    strict: bool = False,
    overwrite: bool = False,
    storage_options: Optional[Mapping[str, Any]] = None,
    filesystem=None,
) -> ConvertSummary:
    """Converts the arrays of an ``.npz`` file (or a mapping name -> array) into shards
    ``{out_dir}/{prefix}-*``, one Example per row (see the module docstring for the features).

    ``keys`` picks and orders the arrays (default: all, in the file's order). ``prefix`` defaults
    to the file's name without ``.npz`` (``"data"`` for a mapping). ``shuffle`` permutes the rows
    by ``seed``. ``workers`` are threads here (the arrays are in memory; the encoder releases the
    GIL). The other options are those of :func:`~tfrec_fast.convert.convert_imagefolder`;
    ``strict`` changes nothing, as arrays have no bad inputs to skip.
    """
    started = time.perf_counter()
    options = WriteOptions(
        num_shards,
        shard_size,
        records_per_shard,
        compression,
        index,
        shuffle,
        seed,
        workers,
        progress,
        strict,
        overwrite,
        storage_options,
        filesystem,
    )
    loaded, source = _load(arrays, keys)
    if prefix is None:
        prefix = (
            "data"
            if isinstance(arrays, Mapping)
            else os.path.basename(os.fspath(arrays)).removesuffix(".npz")
        )
    columns = _columns(loaded, keys, source)
    n = len(columns[0].array)
    step = _chunk_rows(columns)
    jobs: List[Union[slice, np.ndarray]]
    if options.shuffle:
        order = permutation(n, options.seed)
        jobs = [order[i : i + step] for i in range(0, n, step)]
    else:
        jobs = [slice(i, min(i + step, n)) for i in range(0, n, step)]
    build = functools.partial(_encode_rows, columns)
    inputs = () if isinstance(arrays, Mapping) else (os.fspath(arrays),)
    return write_jobs(
        jobs,
        build,
        os.fspath(out_dir),
        prefix,
        _spec(columns),
        options,
        total=n,
        threads=True,
        desc="rows",
        unit="row",
        started=started,
        inputs=inputs,
    )
