"""Parsed Example columns -> examples as ``tfds.as_numpy`` gives them.

A :class:`Decoder` reads a batch of records with one C++ parse (the spec from spec.py), then
turns each leaf's column into one value per record:

- numbers: cast from the stored int64/float32 to the declared dtype (uint64 bit-cast, bool as
  ``!= 0``), reshaped to the declared shape; shape () gives a numpy scalar (``np.int64(3)``);
- strings: ``bytes``, or an object array of bytes for a non-scalar shape;
- Tensors stored as bytes (encoding "bytes"/"zlib"): the raw array read back;
- Images (and Videos, Sequences of them): the encoded bytes, or with ``decode_images`` the
  pixels (uint8, uint16 or float32 of the declared shape), decoded by Pillow on a thread pool;
  JPEGs by simplejpeg where it is installed, which gives TensorFlow's pixels exactly (Pillow's
  DCT differs from TensorFlow's fast one by a few levels);
- under a Sequence: one array with a leading dimension; under two or more: a
  :class:`tfrec_fast.Ragged` (TensorFlow gives a tf.RaggedTensor), values of the innermost
  level first stacked;
- the leaves nested back into dicts along the '/' of their names.
"""

from __future__ import annotations

import io
import math
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import AbstractSet, Any, Callable, Dict, List, Mapping, Optional, Sequence as Seq, Set

import numpy as np

from .._platform import after_fork_in_child
from ..errors import ExampleParseError
from ..example import (_KIND_DTYPE, BytesColumn, Ragged, VarLen, _rows, feature_kinds,
                       parse_examples)
from .decode import is_skip
from .errors import UnknownFeatureError
from .features import Feature, Image, Tensor, UnknownFeature
from .spec import Leaf, example_spec, leaves, output_template, ragged_keys, value_keys

__all__ = ["Decoder", "decode_image", "skipped_paths"]


def skipped_paths(decoders: Optional[Mapping], paths: Set[str], prefix: str = "") -> Set[str]:
    """The leaf paths (and dict paths: everything below them) a TFDS-style ``decoders`` dict
    skips. Keys nest as the features do, or join with '/'."""
    out: Set[str] = set()
    for key, value in (decoders or {}).items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= skipped_paths(value, paths, path + "/")
        elif is_skip(value):
            if path not in paths and not any(p.startswith(path + "/") for p in paths):
                raise KeyError(f"decoders name {path!r}, which is not a feature; the features "
                               f"are {sorted(paths)}")
            out.add(path)
        else:
            raise TypeError(f"decoders[{path!r}]: only SkipDecoding() is supported (tfrec_fast "
                            f"decodes without TensorFlow), not {type(value).__name__}")
    return out


# ---- element decoders ---------------------------------------------------------------------------

def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Stored int64/float32 values -> the declared dtype, as TFDS's tf.cast (and its uint64
    bit-cast) do."""
    if values.dtype == dtype:
        return values
    if dtype == np.uint64:
        return values.view(np.uint64)
    return values.astype(dtype)


def _pillow():
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise ImportError("decode_images=True decodes images with Pillow: pip install pillow "
                          "(or tfrec_fast[tfds])") from None
    return PILImage


def decode_image(data: bytes, shape: Seq[Optional[int]], dtype: np.dtype) -> np.ndarray:
    """An encoded image (PNG, JPEG, BMP, GIF's first frame) -> an array of ``shape`` (None:
    any) and ``dtype`` (uint8, uint16, or float32 stored as RGBA PNG), converted to the
    declared number of channels as tf.image.decode_image(channels=...) does."""
    channels = shape[-1] if shape else None
    dtype = np.dtype(dtype)
    pixels = _jpeg(data, channels) if dtype == np.uint8 else None
    if pixels is None:
        pixels = _with_pillow(data, channels, dtype)
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    if len(pixels.shape) != len(shape) or any(
            d is not None and d != p for d, p in zip(shape, pixels.shape)):
        raise ValueError(f"decoded image of shape {pixels.shape} does not fit the declared "
                         f"shape {tuple(shape)}")
    return pixels


def _jpeg(data: bytes, channels: Optional[int]) -> Optional[np.ndarray]:
    """A JPEG decoded as TensorFlow decodes it (libjpeg-turbo's fast integer DCT, fancy
    upsampling), with simplejpeg where it is installed; None where it is not (Pillow then
    decodes with the accurate DCT: pixels may differ from TensorFlow's by a few levels)."""
    if data[:3] != b"\xff\xd8\xff" or channels not in (1, 3, None):
        return None
    try:
        import simplejpeg
    except ImportError:
        return None
    try:
        if channels is None:
            channels = 1 if simplejpeg.decode_jpeg_header(data)[2] == "Gray" else 3
        return simplejpeg.decode_jpeg(data, colorspace="GRAY" if channels == 1 else "RGB",
                                      fastdct=True, fastupsample=False)
    except ValueError:  # CMYK and other JPEGs simplejpeg does not take: Pillow's turn
        return None


def _with_pillow(data: bytes, channels: Optional[int], dtype: np.dtype) -> np.ndarray:
    PILImage = _pillow()
    with PILImage.open(io.BytesIO(data)) as image:
        if dtype == np.float32:  # TFDS bit-casts 1-channel float32 into 4-channel uint8 PNGs
            pixels = np.array(image.convert("RGBA")).view("<f4").astype(np.float32)
        elif dtype == np.uint16:
            pixels = _uint16(image, channels)
        elif dtype == np.uint8:
            pixels = np.array(_with_channels(image, channels))
        else:
            raise ValueError(f"images of dtype {dtype} are not decoded (TFDS stores uint8, "
                             "uint16 and float32 images)")
    return pixels


_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def _with_channels(image, channels: Optional[int]):
    if channels in _MODES:
        return image if image.mode == _MODES[channels] else image.convert(_MODES[channels])
    if image.mode == "P":  # a palette is expanded, as TensorFlow does
        return image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode not in ("L", "LA", "RGB", "RGBA"):
        return image.convert("RGB")
    return image


def _uint16(image, channels: Optional[int]) -> np.ndarray:
    if channels not in (1, None):
        raise ValueError("16-bit images with several channels are not decoded: Pillow reads "
                         "16-bit color PNGs as 8-bit")
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        return np.array(image).astype(np.uint16)
    return np.array(image.convert("L")).astype(np.uint16) * np.uint16(257)  # 8-bit scaled


def _tensor_from_bytes(feature: Tensor, shape) -> Callable[[bytes], np.ndarray]:
    """A Tensor stored as bytes ('bytes' / 'zlib' encoding) -> its array of ``shape``."""
    zipped = feature.encoding == "zlib"
    stored = feature.dtype.newbyteorder("<") if feature.dtype.itemsize > 1 else feature.dtype

    def decode(data: bytes, shape=shape) -> np.ndarray:
        if zipped:
            data = zlib.decompress(data)
        return np.frombuffer(data, stored).astype(feature.dtype).reshape(shape)
    return decode


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


_POOL: Optional[ThreadPoolExecutor] = None
PARALLEL_BYTES = 8 << 10  # images this large on average go to the pool


def _pool() -> ThreadPoolExecutor:
    """The threads decoding images, made on first use in each process."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1),
                                   thread_name_prefix="tfrec_fast.tfds-decode")
    return _POOL


def _forget_pool() -> None:  # a forked child has the pool object but none of its threads
    global _POOL
    _POOL = None


after_fork_in_child(_forget_pool)


# ---- one leaf ---------------------------------------------------------------------------------

class _LeafDecoder:
    """Turns the parsed columns of one leaf into one value per record."""

    def __init__(self, leaf: Leaf, decode: bool):
        self.leaf = leaf
        self.path = leaf.path
        feature = leaf.feature
        self.keys = value_keys(leaf)
        self.key, self.info = self.keys["value" if "value" in self.keys else ""]
        self.rank = self.info.sequence_rank
        self.dynamic = "shape" in self.keys
        self.element: Any = None  # bytes -> value, when this leaf's bytes are decoded
        if isinstance(feature, Image):
            self.element = (lambda data, f=feature: decode_image(data, f.shape, f.dtype)) \
                if decode else None
            self.out_shape, self.out_dtype = feature.shape, feature.dtype
        elif isinstance(feature, Tensor) and feature.encoding != "none":
            self.element = _tensor_from_bytes(feature, _shape_arg(feature.shape)) \
                if decode else None
            self.out_shape, self.out_dtype = feature.shape, feature.dtype
        else:
            self.element = None
            self.out_shape, self.out_dtype = self.info.inner_shape, self.info.dtype
        self.decoded = self.element is not None
        self.parallel = self.decoded and isinstance(feature, Image)
        if self.dynamic and self.rank > 1:
            raise NotImplementedError(f"feature {self.path!r}: a Tensor of several unknown "
                                      "dimensions under two Sequences (TFDS cannot decode it)")

    def __call__(self, columns: Mapping[str, Any], n: int) -> list:
        if self.dynamic:
            return self._dynamic(columns, n)
        if self.rank > 1:
            return self._ragged(columns, n)
        column = columns[self.key]
        if isinstance(column, BytesColumn):
            return self._bytes(column, n)
        return self._numbers(column, n)

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
            raise ExampleParseError(f"{int(row_splits[i + 1] - row_splits[i])} values do not "
                                    f"fill shape {self.info.shape}", record_index=i,
                                    feature=self.key)

    # bytes values: strings, encoded images and tensors
    def _bytes(self, column: BytesColumn, n: int) -> list:
        rows = column.to_list()
        scalar = self.rank == 0 and self.info.shape == ()
        if not self.decoded:
            return rows if scalar else [_object_array(row, _shape_arg(self.info.shape))
                                        for row in rows]
        if scalar:
            return self._decode_each(rows, range(len(rows)))
        return [_stack(elements, self.out_shape, self.out_dtype)
                for elements in self._decode_rows(rows)]

    def _decode_rows(self, rows: List[list]) -> List[list]:
        """Each record's elements decoded (all of them in one go, for the thread pool)."""
        flat = [data for row in rows for data in row]
        owners = [i for i, row in enumerate(rows) for _ in row]
        decoded = iter(self._decode_each(flat, owners))
        return [[next(decoded) for _ in row] for row in rows]

    def _decode_each(self, items: list, records) -> list:
        """Decodes items (``records[j]`` holding item j); large images on a thread pool (Pillow
        and simplejpeg decode with the GIL released; a small PNG costs less than handing it
        to a thread: measured ~90 us for 28x28 either way)."""
        if self.parallel and len(items) > 1 and sum(map(len, items)) > PARALLEL_BYTES * len(items):
            return list(_pool().map(self._element, items, records))
        return [self._element(data, record) for data, record in zip(items, records)]

    def _element(self, data: bytes, record: int, *args):
        try:
            return self.element(data, *args)
        except Exception as error:  # a damaged image, a tensor of the wrong size, ...
            raise ExampleParseError(f"cannot decode its value: {error}", record_index=record,
                                    feature=self.key) from None

    def _feature_shape(self) -> tuple:
        feature: Any = self.leaf.feature  # a Tensor
        return feature.shape

    # a Tensor that stores its shape ("<key>/shape", "<key>/value")
    def _dynamic(self, columns: Mapping[str, Any], n: int) -> list:
        shape_key, _ = self.keys["shape"]
        shapes = columns[shape_key]
        values = columns[self.key].to_list()
        declared = self._feature_shape()
        if self.rank == 0:
            shapes = shapes.astype(np.int32)
            if not self.decoded:
                return [{"shape": s, "value": v} for s, v in zip(shapes, values)]
            return [self._element(v, i, _static_or(s, declared))
                    for i, (s, v) in enumerate(zip(shapes, values))]
        splits = shapes.row_splits.tolist()
        flat = shapes.values.astype(np.int32).reshape(-1, len(declared))
        rows = [flat[splits[i] // len(declared):splits[i + 1] // len(declared)] for i in range(n)]
        if not self.decoded:
            return [{"shape": s, "value": _object_array(v, (-1,))} for s, v in zip(rows, values)]
        return [_stack([self._element(v, i, _static_or(s, declared)) for s, v in zip(ss, vs)],
                       declared, self.out_dtype)
                for i, (ss, vs) in enumerate(zip(rows, values))]

    # under two or more Sequences: nested row lengths around flat values
    def _ragged(self, columns: Mapping[str, Any], n: int) -> list:
        flat_key, length_keys = ragged_keys(self.key, self.info)
        flat = columns[flat_key]
        inner = _shape_arg(self.info.inner_shape)
        per = max(1, math.prod(d for d in inner if d != -1))
        lengths = [columns[k] for k in length_keys]
        if isinstance(flat, BytesColumn):
            row_splits = flat.row_splits  # (None: one value a row)
            splits = (np.arange(len(flat) + 1) if row_splits is None else row_splits).tolist()
            items = flat.to_list()
            if self.decoded:
                elements = self._decode_rows(items)
            else:
                elements = items
        else:
            values = _cast(flat.values, self.info.dtype).reshape((-1,) + inner)
            splits = (flat.row_splits // per).tolist()
            elements = None
        out = []
        for i in range(n):
            if elements is None:
                row_values = values[splits[i]:splits[i + 1]]
            elif self.decoded:
                row_values = _stack(elements[i], self.out_shape, self.out_dtype)
            else:
                row_values = _object_array(elements[i], (-1,) + inner)
            row_lengths = [c.values[c.row_splits[i]:c.row_splits[i + 1]] for c in lengths]
            out.append(_nest(row_values, row_lengths))
        return out


def _nest(values, nested_row_lengths: List[np.ndarray]) -> Ragged:
    """A tf.RaggedTensor.from_nested_row_lengths as nested tfrec_fast.Ragged."""
    for lengths in reversed(nested_row_lengths):
        splits = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=splits[1:])
        values = Ragged(values, splits)
    return values


def _shape_arg(shape) -> tuple:
    return tuple(-1 if d is None else d for d in shape)


class _RawDecoder:
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


# ---- the whole example ------------------------------------------------------------------------

class Decoder:
    """Parses batches of serialized Examples of a feature tree and builds the examples.

    ``decode_images``: Images and Videos come back decoded (else as encoded bytes);
    ``skip``: leaf paths left in their stored form (TFDS's SkipDecoding). A leaf of an unknown
    feature type must be skipped: otherwise :class:`UnknownFeatureError`.
    """

    def __init__(self, features: Feature, *, decode_images: bool = False,
                 skip: AbstractSet[str] = frozenset()):
        self.leaves = leaves(features)
        self.decoders: List[Any] = []
        self.raw: List[_RawDecoder] = []
        for leaf in self.leaves:
            skipped = any(leaf.path == s or leaf.path.startswith(s + "/") for s in skip)
            if isinstance(leaf.feature, UnknownFeature):
                if not skipped:
                    raise UnknownFeatureError(leaf.path, leaf.feature.type_name)
                raw = _RawDecoder(leaf)
                self.raw.append(raw)
                self.decoders.append(raw)
                continue
            decode = not skipped and (decode_images or not isinstance(leaf.feature, Image))
            self.decoders.append(_LeafDecoder(leaf, decode))
        self.spec = example_spec(self.leaves)
        numbering = {leaf.path: i for i, leaf in enumerate(self.leaves)}
        self._build = _builder(output_template(features, numbering))

    def parse(self, batch, name: str) -> Dict[str, Any]:
        """One C++ parse of a RecordBatch into the columns of every stored key."""
        spec = self.spec
        if self.raw:  # unknown features: read whatever keys they stored, typed by the data
            kinds = feature_kinds(batch, name, strict=False)
            extra = {k: VarLen(_KIND_DTYPE[kind] if kind is not None else "float32")
                     for k, kind in kinds.items() if any(r.owns(k) for r in self.raw)}
            spec = {**spec, **extra}
        return parse_examples(batch, spec, name=name)

    def examples(self, columns: Mapping[str, Any], n: int, a: int = 0,
                 b: Optional[int] = None) -> list:
        """The examples of rows a..b of parsed columns holding n rows."""
        b = n if b is None else b
        if (a, b) != (0, n):
            columns = {k: _rows(c, a, b) for k, c in columns.items()}
        try:
            per_leaf = [decoder(columns, b - a) for decoder in self.decoders]
        except ExampleParseError as error:  # rows are counted from a in the caller's batch
            raise ExampleParseError(error.detail, path=error.path,
                                    record_index=(error.record_index or 0) + a,
                                    feature=error.feature) from None
        return [self._build(values) for values in zip(*per_leaf)] if per_leaf else [
            {} for _ in range(b - a)]


def _builder(template) -> Callable[[tuple], dict]:
    """A function making one example (nested dicts) from the leaves' values in order."""
    keys = list(template)
    if all(isinstance(v, int) for v in template.values()):
        order = [template[k] for k in keys]
        if order == list(range(len(order))):
            return lambda values: dict(zip(keys, values))
        return lambda values: {k: values[i] for k, i in zip(keys, order)}
    parts = [(k, v if isinstance(v, int) else _builder(v)) for k, v in template.items()]
    return lambda values: {k: values[p] if isinstance(p, int) else p(values) for k, p in parts}
