"""One leaf of the feature tree: its parsed Example columns -> one value per record.

- numbers: cast from the stored int64/float32 to the declared dtype (uint64 bit-cast, bool as
  ``!= 0``), reshaped to the declared shape; shape () gives a numpy scalar (``np.int64(3)``);
- strings: ``bytes``, or an object array of bytes for a non-scalar shape;
- values decoded one by one (*elements*): Tensors stored as bytes (encoding "bytes"/"zlib"),
  Images with ``decode_images`` (images.py, on a thread pool), Audio stored as files
  (audio.py);
- under a Sequence: one array with a leading dimension; under two or more: a
  :class:`tfrec_fast.Ragged` (TensorFlow gives a tf.RaggedTensor), values of the innermost
  level stacked. Decoded elements under nested Datasets read as elements (``lists``: that many
  outer levels are Python lists, not stacked), so each element of a nested dataset may have
  its own shape, as in TFDS.
"""

from __future__ import annotations

import functools
import math
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np

from .._platform import after_fork_in_child
from ..errors import ExampleParseError
from ..example import BytesColumn, Ragged
from .audio import decode_audio
from .features import Audio, Feature, Image, Tensor
from .images import decode_image
from .spec import Leaf, ragged_keys, value_keys

__all__ = ["LeafDecoder", "RawDecoder", "element_decoder"]


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Stored int64/float32 values -> the declared dtype, as TFDS's tf.cast (and its uint64
    bit-cast) do."""
    if values.dtype == dtype:
        return values
    if dtype == np.uint64:
        return values.view(np.uint64)
    return values.astype(dtype)


def _tensor_from_bytes(feature: Tensor, shape) -> Callable[..., np.ndarray]:
    """A Tensor stored as bytes ('bytes' / 'zlib' encoding) -> its array of ``shape``."""
    zipped = feature.encoding == "zlib"
    stored = feature.dtype.newbyteorder("<") if feature.dtype.itemsize > 1 else feature.dtype

    def decode(data: bytes, shape=shape) -> np.ndarray:
        if zipped:
            data = _inflate(data, shape, feature.dtype)
        return np.frombuffer(data, stored).astype(feature.dtype).reshape(shape)

    return decode


def _inflate(data: bytes, shape, dtype: np.dtype) -> bytes:
    """zlib data -> the bytes of an array of ``shape``: never more than the shape holds (a
    record inflating beyond it is refused before it is inflated further). With an unknown
    dimension (-1) the size is not known before: zlib's own ratio (at most about 1032 to 1)
    bounds it."""
    if any(d < 0 for d in shape):
        return zlib.decompress(data)
    expected = math.prod(shape) * dtype.itemsize
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, expected + 1)
    if len(out) > expected:
        raise ValueError(
            f"its zlib data inflates to more than the {expected} bytes of shape "
            f"{tuple(shape)} of {dtype} (refused: a zlib bomb, or another "
            "tensor's data)"
        )
    if not inflater.eof:
        raise ValueError(f"its zlib data is cut short ({len(out)} of {expected} bytes)")
    return out


def element_decoder(feature: Feature) -> Optional[Callable[..., Any]]:
    """The function decoding one stored value of ``feature`` (bytes -> value), or None for a
    feature whose stored values are its values."""
    if isinstance(feature, Image):
        return functools.partial(decode_image, shape=feature.shape, dtype=feature.dtype)
    if isinstance(feature, Audio) and feature.lazy_decode:
        return functools.partial(decode_audio, feature=feature)
    if isinstance(feature, Tensor) and feature.encoding != "none":
        return _tensor_from_bytes(feature, _shape_arg(feature.shape))
    return None


def _static_or(shape_row, declared) -> tuple:
    """TFDS's merge_shape: the declared dimensions where known, the stored ones elsewhere."""
    return tuple(int(s) if d is None else d for s, d in zip(shape_row, declared))


def _object_array(items: list, shape) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(shape)


def _stack(elements: list, element_shape, dtype) -> np.ndarray:
    """A Sequence's decoded elements as one array; an empty one takes the declared shape (0 for
    unknown dimensions), as TFDS's empty-sequence output."""
    if not elements:
        return np.empty((0,) + tuple(d or 0 for d in element_shape), dtype=dtype)
    return np.stack(elements)


def _nest(values, nested_row_lengths: List[np.ndarray]) -> Any:
    """A tf.RaggedTensor.from_nested_row_lengths as nested tfrec_fast.Ragged."""
    for lengths in reversed(nested_row_lengths):
        values = Ragged(values, _splits(lengths))
    return values


def _shape_arg(shape) -> tuple:
    return tuple(-1 if d is None else d for d in shape)


_POOL: Optional[ThreadPoolExecutor] = None
PARALLEL_BYTES = 8 << 10  # images this large on average go to the pool


def _pool() -> ThreadPoolExecutor:
    """The threads decoding images, made on first use in each process."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(
            max_workers=min(8, os.cpu_count() or 1), thread_name_prefix="tfrec_fast.tfds-decode"
        )
    return _POOL


def _forget_pool() -> None:  # a forked child has the pool object but none of its threads
    global _POOL
    _POOL = None


after_fork_in_child(_forget_pool)


class _Nesting(ValueError):
    """Row lengths that do not fit the values they split (a damaged record)."""


def _splits(lengths: np.ndarray) -> np.ndarray:
    """Row lengths -> row splits (0, then their running sum)."""
    splits = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=splits[1:])
    return splits


def _check_nesting(levels: List[np.ndarray], count: int) -> None:
    """Each level's lengths must add up to the next level's entries (the last: ``count``)."""
    for k, lengths in enumerate(levels):
        below = len(levels[k + 1]) if k + 1 < len(levels) else count
        if (lengths < 0).any() or int(lengths.sum()) != below:
            raise _Nesting(
                f"ragged row lengths of level {k} add up to {int(lengths.sum())}, "
                f"but the level below holds {below} values"
            )


class LeafDecoder:
    """Turns the parsed columns of one leaf into one value per record.

    ``decode``: decode its elements (if it has any to decode); ``lists``: how many outer
    sequence levels (nested Datasets) make lists of elements instead of stacked arrays.
    """

    def __init__(self, leaf: Leaf, decode: bool, lists: int = 0):
        self.leaf = leaf
        self.path = leaf.path
        feature: Any = leaf.feature
        self.keys = value_keys(leaf)
        self.key, self.info = self.keys["value" if "value" in self.keys else ""]
        self.rank = self.info.sequence_rank
        self.dynamic = "shape" in self.keys
        self.element: Any = element_decoder(feature) if decode else None
        self.decoded = self.element is not None
        self.lists = lists if self.decoded else 0
        if self.decoded:
            self.out_shape, self.out_dtype = feature.shape, feature.dtype
        else:
            self.out_shape, self.out_dtype = self.info.inner_shape, self.info.dtype
        self.parallel = self.decoded and isinstance(feature, Image)

    def __call__(self, columns: Mapping[str, Any], n: int) -> list:
        try:
            if self.decoded:
                return self._decoded(columns, n)
            if self.dynamic:
                return self._dynamic_raw(columns, n)
            if self.rank > 1:
                return self._ragged(columns, n)
            column = columns[self.key]
            if isinstance(column, BytesColumn):
                return self._bytes(column, n)
            return self._numbers(column, n)
        except _Nesting as error:
            raise ExampleParseError(
                str(error), record_index=getattr(error, "record", None), feature=self.key
            ) from None

    # numbers: no element decoding, the whole column cast at once
    def _numbers(self, column, n: int) -> list:
        dtype = self.info.dtype
        if isinstance(column, np.ndarray):
            return list(_cast(column, dtype))
        values = _cast(column.values, dtype)
        splits = column.row_splits.tolist()
        shape = _shape_arg(self.info.shape)
        self._check_fill(column.row_splits, shape)
        return [values[a:b].reshape(shape) for a, b in zip(splits[:-1], splits[1:])]

    def _check_fill(self, row_splits: np.ndarray, shape) -> None:
        """VarLen values must fill the shape's known dimensions (TensorFlow's
        FixedLenSequenceFeature check): name the first record that does not."""
        per = math.prod(d for d in shape if d != -1)
        if per <= 1:
            return
        bad = np.flatnonzero(np.diff(row_splits) % per)
        if len(bad):
            i = int(bad[0])
            raise ExampleParseError(
                f"{int(row_splits[i + 1] - row_splits[i])} values do not "
                f"fill shape {self.info.shape}",
                record_index=i,
                feature=self.key,
            )

    # stored bytes, not decoded: strings, encoded images and tensors as they are
    def _bytes(self, column: BytesColumn, n: int) -> list:
        rows = column.to_list()
        if self.rank == 0 and self.info.shape == ():
            return rows
        return [_object_array(row, _shape_arg(self.info.shape)) for row in rows]

    # a Tensor that stores its shape ("<key>/shape", "<key>/value"), not decoded
    def _dynamic_raw(self, columns: Mapping[str, Any], n: int) -> list:
        shape_key, _ = self.keys["shape"]
        shapes = columns[shape_key]
        values = columns[self.key].to_list()
        if self.rank == 0:
            return [{"shape": s, "value": v} for s, v in zip(shapes.astype(np.int32), values)]
        rows = self._shape_rows(shapes, n)
        return [{"shape": s, "value": _object_array(v, (-1,))} for s, v in zip(rows, values)]

    def _shape_rows(self, shapes, n: int) -> List[np.ndarray]:
        """Each record's stored shapes, one row per element (under one Sequence)."""
        rank = len(self._feature_shape())
        splits = shapes.row_splits.tolist()
        flat = shapes.values.astype(np.int32)
        if len(flat) % rank:
            raise ExampleParseError(
                f"{len(flat)} shape values are not shapes of rank {rank}",
                feature=self.keys["shape"][0],
            )
        flat = flat.reshape(-1, rank)
        return [flat[splits[i] // rank : splits[i + 1] // rank] for i in range(n)]

    def _feature_shape(self) -> tuple:
        feature: Any = self.leaf.feature  # a Tensor
        return feature.shape

    # under two or more Sequences, not decoded: nested row lengths around flat values
    def _ragged(self, columns: Mapping[str, Any], n: int) -> list:
        flat_key, length_keys = ragged_keys(self.key, self.info)
        flat = columns[flat_key]
        inner = _shape_arg(self.info.inner_shape)
        per = max(1, math.prod(d for d in inner if d != -1))
        lengths = [columns[k] for k in length_keys]
        if isinstance(flat, BytesColumn):
            row_splits = flat.row_splits  # (None: one value a row)
            splits = (np.arange(len(flat) + 1) if row_splits is None else row_splits).tolist()
            items: Optional[list] = flat.to_list()
        else:
            values = _cast(flat.values, self.info.dtype)
            if len(values) % per:
                raise ExampleParseError(
                    f"{len(values)} values do not fill elements of shape {self.info.inner_shape}",
                    feature=flat_key,
                )
            values = values.reshape((-1,) + inner)
            splits = (flat.row_splits // per).tolist()
            items = None
        out = []
        for i in range(n):
            if items is None:
                row_values = values[splits[i] : splits[i + 1]]
            else:
                row_values = _object_array(items[i], (-1,) + inner)
            row_lengths = [c.values[c.row_splits[i] : c.row_splits[i + 1]] for c in lengths]
            self._nested(row_lengths, len(row_values), i)
            out.append(_nest(row_values, row_lengths))
        return out

    @staticmethod
    def _nested(row_lengths: List[np.ndarray], count: int, record: int) -> None:
        try:
            _check_nesting(row_lengths, count)
        except _Nesting as error:
            error.record = record  # type: ignore[attr-defined]
            raise

    # decoded elements, nested back as the Sequences and Datasets around them say
    def _decoded(self, columns: Mapping[str, Any], n: int) -> list:
        items, levels, args = self._items(columns, n)
        flat = [x for row in items for x in row]
        owners = [i for i, row in enumerate(items) for _ in row]
        flat_args = None if args is None else [a for row in args for a in row]
        decoded = self._decode_each(flat, owners, flat_args)
        out, pos = [], 0
        for i, row in enumerate(items):
            elements, pos = decoded[pos : pos + len(row)], pos + len(row)
            out.append(self._assemble(elements, levels[i], i))
        return out

    def _items(self, columns: Mapping[str, Any], n: int):
        """Per record: the stored values to decode (flat), the lengths of each sequence level
        (outermost first, the first being [number of outer elements]), and for Tensors that
        store their shapes, each value's shape (else None)."""
        args = None
        if self.rank <= 1:
            rows = columns[self.key].to_list()
            if self.rank == 0:
                items = [[v] for v in rows]
                levels: List[list] = [[] for _ in rows]
            else:
                items = rows
                levels = [[np.array([len(row)], dtype=np.int64)] for row in rows]
            if self.dynamic:
                declared = self._feature_shape()
                shapes = columns[self.keys["shape"][0]]
                per_record = (
                    [[s] for s in shapes] if self.rank == 0 else self._shape_rows(shapes, n)
                )
                args = [[_static_or(s, declared) for s in row] for row in per_record]
                for row, shapes_row, i in zip(items, args, range(n)):
                    if len(row) != len(shapes_row):
                        raise ExampleParseError(
                            f"{len(row)} values but {len(shapes_row)} shapes",
                            record_index=i,
                            feature=self.key,
                        )
                    bad = [s for s in shapes_row if min(s, default=0) < 0]
                    if bad:
                        raise ExampleParseError(
                            f"stored shape {bad[0]} has a negative dimension",
                            record_index=i,
                            feature=self.keys["shape"][0],
                        )
            return items, levels, args
        flat_key, length_keys = ragged_keys(self.key, self.info)
        items = columns[flat_key].to_list()
        lengths = [columns[k] for k in length_keys]
        levels = []
        for i in range(n):
            rows = [c.values[c.row_splits[i] : c.row_splits[i + 1]] for c in lengths]
            levels.append([np.array([len(rows[0])], dtype=np.int64)] + rows)
        return items, levels, args

    def _decode_each(self, items: list, records, args=None) -> list:
        """Decodes items (``records[j]`` holding item j); large images on a thread pool (Pillow
        and simplejpeg decode with the GIL released; a small image is decoded here, as it
        costs less than handing it to a thread)."""
        more = () if args is None else (args,)
        if self.parallel and len(items) > 1 and sum(map(len, items)) > PARALLEL_BYTES * len(items):
            return list(_pool().map(self._element, items, records, *more))
        return [self._element(*call) for call in zip(items, records, *more)]

    def _element(self, data: bytes, record: int, *args):
        try:
            return self.element(data, *args)
        except Exception as error:  # a damaged image, a tensor of the wrong size, ...
            raise ExampleParseError(
                f"cannot decode its value: {error}", record_index=record, feature=self.key
            ) from None

    def _assemble(self, elements: list, levels: List[np.ndarray], record: int) -> Any:
        """One record's decoded elements nested by its sequence levels: the outer ``lists``
        levels as lists, the Sequence levels below as a stacked array (one level) or a Ragged
        (more)."""
        if not levels:
            return elements[0]
        self._nested(levels, len(elements), record)
        splits = [_splits(lengths) for lengths in levels]
        depth_of_elements = len(levels)

        def node(depth: int, j: int) -> Any:
            if depth < self.lists:
                return [node(depth + 1, c) for c in range(splits[depth][j], splits[depth][j + 1])]
            if depth == depth_of_elements:
                return elements[j]
            lo, hi, inner = j, j + 1, []
            for k in range(depth, depth_of_elements):
                if k > depth:
                    inner.append(levels[k][lo:hi])
                lo, hi = int(splits[k][lo]), int(splits[k][hi])
            try:
                values = _stack(elements[lo:hi], self.out_shape, self.out_dtype)
            except ValueError as error:
                raise ExampleParseError(
                    f"its decoded values cannot be stacked into one array ({error}); values "
                    "of different shapes are read one by one in nested Datasets "
                    "(nested='steps')",
                    record_index=record,
                    feature=self.key,
                ) from None
            return _nest(values, inner) if inner else values

        return node(0, 0)


class RawDecoder:
    """An unknown feature read raw: {Example key: its values} for the keys under its path."""

    def __init__(self, leaf: Leaf):
        self.path = leaf.path

    def owns(self, key: str) -> bool:
        return key == self.path or key.startswith(self.path + "/")

    def __call__(self, columns: Mapping[str, Any], n: int) -> list:
        mine = {k: c for k, c in columns.items() if self.owns(k)}
        out: List[Dict[str, Any]] = [{} for _ in range(n)]
        for key, column in mine.items():
            values = column.to_list() if isinstance(column, BytesColumn) else list(column)
            for row, value in zip(out, values):
                row[key] = value
        return out
