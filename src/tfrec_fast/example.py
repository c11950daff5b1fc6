"""tf.train.Example parsing: feature specs in, numpy columns out.

The C++ decoder reads a whole RecordBatch with the GIL released and fills one column per
requested feature; features not asked for are skipped without being decoded. Numeric features
come back as numpy arrays; bytes features as a :class:`BytesColumn` that views the batch's own
buffer (no copy).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _core
from .errors import ExampleParseError
from .records import (RecordBatch, TFRecordReader, _as_sources, _display, _is_path,
                      normalize_compression)

__all__ = ["FixedLen", "VarLen", "FixedLenSequence", "VarLenSequence", "Ragged", "BytesColumn",
           "parse_examples", "parse_example", "parse_sequence_examples", "read_examples"]

# Must match tfr::ValueKind and tfr::Layout in src/cpp/example_decoder.h.
_INT64, _FLOAT, _BYTES = 0, 1, 2
_FIXED, _VAR, _RAW_BYTES = 0, 1, 2
_NUMPY = {_INT64: np.dtype(np.int64), _FLOAT: np.dtype(np.float32)}

_KIND_NAMES = {
    "int64": _INT64, "int": _INT64,
    "float32": _FLOAT, "float": _FLOAT,
    "bytes": _BYTES, "byte": _BYTES, "string": _BYTES, "str": _BYTES,
}


def _kind_of(dtype) -> Optional[int]:
    """The list kind a dtype names (int64 / float32 / bytes), or None for other numeric dtypes."""
    if isinstance(dtype, str) and dtype in _KIND_NAMES:
        return _KIND_NAMES[dtype]
    if dtype in (bytes, str, object):
        return _BYTES
    name = getattr(dtype, "name", None)  # a TensorFlow DType, duck-typed
    if isinstance(name, str) and not isinstance(dtype, np.dtype) and name in _KIND_NAMES:
        return _KIND_NAMES[name]
    dt = np.dtype(dtype)
    if dt == np.int64:
        return _INT64
    if dt == np.float32:
        return _FLOAT
    return None


class FixedLen:
    """Exactly ``prod(shape)`` values per record, returned as an array ``[N, *shape]``.

    ``dtype`` is ``"int64"``, ``"float32"`` or ``"bytes"``. Any other numpy dtype (``"uint8"``,
    ``"float16"``, ...) reads a bytes feature holding the raw array, as
    ``np.frombuffer(value, dtype).reshape(shape)`` would (``from_bytes=True`` forces this for
    int64/float32 too). A missing feature takes ``default`` (broadcast to ``shape``); without one
    it is an :class:`~tfrec_fast.ExampleParseError`.
    """

    def __init__(self, shape=(), dtype="int64", default=None, *, from_bytes: Optional[bool] = None):
        self.shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(
            int(d) for d in shape)
        kind = _kind_of(dtype)
        self.from_bytes = kind is None if from_bytes is None else bool(from_bytes)
        if self.from_bytes and kind == _BYTES:
            raise ValueError("from_bytes needs a numeric dtype")
        self.kind = _BYTES if self.from_bytes else kind
        if self.from_bytes:
            self.dtype = np.dtype(_NUMPY[kind] if kind is not None else dtype)
        else:
            self.dtype = _NUMPY.get(kind, np.dtype(object))
        if kind == _BYTES and isinstance(default, str):
            default = default.encode()
        self.default = default

    def __repr__(self):
        dtype = "bytes" if self.kind == _BYTES and not self.from_bytes else str(self.dtype)
        return f"FixedLen({self.shape}, {dtype!r}, default={self.default!r})"


class VarLen:
    """Any number of values per record: a :class:`Ragged` (numeric) or a :class:`BytesColumn`."""

    def __init__(self, dtype="int64"):
        self.kind = _kind_of(dtype)
        if self.kind is None:
            raise ValueError(f"VarLen takes int64, float32 or bytes, not {dtype!r}")

    def __repr__(self):
        return f"VarLen({['int64', 'float32', 'bytes'][self.kind]!r})"


class FixedLenSequence:
    """A SequenceExample feature list whose every step holds exactly ``prod(shape)`` values."""

    def __init__(self, shape=(), dtype="int64"):
        self.shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(
            int(d) for d in shape)
        self.kind = _kind_of(dtype)
        if self.kind is None:
            raise ValueError(f"FixedLenSequence takes int64, float32 or bytes, not {dtype!r}")
        if self.kind == _BYTES and self.shape != ():
            raise ValueError("a bytes FixedLenSequence has shape ()")


class VarLenSequence:
    """A SequenceExample feature list whose steps hold any number of values."""

    def __init__(self, dtype="int64"):
        self.kind = _kind_of(dtype)
        if self.kind is None:
            raise ValueError(f"VarLenSequence takes int64, float32 or bytes, not {dtype!r}")


class Ragged:
    """Rows of different lengths: row ``i`` is ``values[row_splits[i]:row_splits[i + 1]]``."""

    def __init__(self, values: np.ndarray, row_splits: np.ndarray):
        self.values = values
        self.row_splits = row_splits

    def __len__(self) -> int:
        return len(self.row_splits) - 1

    def __getitem__(self, i: int):
        i = _index(i, len(self))
        return _rows(self.values, self.row_splits[i], self.row_splits[i + 1])

    def _rows(self, a, b) -> "Ragged":
        return Ragged(self.values, self.row_splits[a:b + 1])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def row_lengths(self) -> np.ndarray:
        return np.diff(self.row_splits)

    def to_list(self) -> List[list]:
        return [row.tolist() if isinstance(row, np.ndarray) else row.to_list() for row in self]

    def __repr__(self):
        inner = (f"values of {self.values.dtype}" if isinstance(self.values, np.ndarray)
                 else repr(self.values))
        return f"Ragged({len(self)} rows, {len(self.values)} {inner})"


class BytesColumn:
    """Bytes values viewing the records' buffer: value ``j`` is ``values[starts[j]:ends[j]]``.

    With ``row_splits`` (VarLen, or FixedLen of shape (k,)) row ``i`` holds values
    ``row_splits[i]`` to ``row_splits[i + 1]``; otherwise row ``i`` is value ``i``. Indexing gives
    memoryviews (zero copy) and ``to_list()`` gives bytes. A start of -1 marks a missing
    feature's ``default`` (which does not live in ``values``).
    """

    def __init__(self, values: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                 row_splits: Optional[np.ndarray] = None, default: bytes = b""):
        self.values = values
        self.starts = starts
        self.ends = ends
        self.row_splits = row_splits
        self.default = bytes(default)

    def __len__(self) -> int:
        return len(self.starts) if self.row_splits is None else len(self.row_splits) - 1

    def _value(self, j):
        start = self.starts[j]
        if start < 0:
            return memoryview(self.default)
        return memoryview(self.values)[start:self.ends[j]]

    def __getitem__(self, i: int):
        i = _index(i, len(self))
        if self.row_splits is None:
            return self._value(i)
        return [self._value(j) for j in range(self.row_splits[i], self.row_splits[i + 1])]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def _rows(self, a, b) -> "BytesColumn":
        if self.row_splits is None:
            return BytesColumn(self.values, self.starts[a:b], self.ends[a:b], None, self.default)
        return BytesColumn(self.values, self.starts, self.ends, self.row_splits[a:b + 1],
                           self.default)

    @property
    def lengths(self) -> np.ndarray:
        return np.where(self.starts < 0, len(self.default), self.ends - self.starts)

    def to_list(self) -> list:
        data = self.values.tobytes() if len(self.values) < (1 << 16) else memoryview(self.values)
        flat = [bytes(data[s:e]) if s >= 0 else self.default
                for s, e in zip(self.starts.tolist(), self.ends.tolist())]
        if self.row_splits is None:
            return flat
        splits = self.row_splits.tolist()
        return [flat[a:b] for a, b in zip(splits[:-1], splits[1:])]

    def __repr__(self):
        return f"BytesColumn({len(self)} rows, {len(self.starts)} values)"


def _rows(values, a, b):
    """Rows a..b of a column: a numpy slice, or a Ragged/BytesColumn view."""
    return values[a:b] if isinstance(values, np.ndarray) else values._rows(a, b)


def _index(i, n):
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError("row index out of range")
    return i


# ---- specs -------------------------------------------------------------------------------------

Spec = Union[FixedLen, VarLen]


def _from_tensorflow(feature) -> Spec:
    """A tf.io.FixedLenFeature / VarLenFeature, duck-typed (TensorFlow is never imported)."""
    kind = type(feature).__name__
    if kind == "VarLenFeature":
        return VarLen(feature.dtype)
    if kind == "FixedLenFeature":
        return FixedLen(tuple(feature.shape), feature.dtype, feature.default_value)
    raise TypeError(f"unsupported TensorFlow feature spec {kind}")


def normalize_spec(spec) -> Dict[str, Spec]:
    """Accepts {name: FixedLen | VarLen}, the `tfrecord` package's description
    ({name: "byte" | "float" | "int"}), TensorFlow's FixedLenFeature/VarLenFeature objects, or a
    list of names (kinds then come from the data). Returns {name: spec or None}."""
    if isinstance(spec, (list, tuple)):
        return {str(name): None for name in spec}
    out = {}
    for name, s in spec.items():
        if isinstance(s, (FixedLen, VarLen)) or s is None:
            out[name] = s
        elif isinstance(s, str):
            out[name] = VarLen(s)
        elif type(s).__name__ in ("FixedLenFeature", "VarLenFeature"):
            out[name] = _from_tensorflow(s)
        else:
            raise TypeError(f"feature {name!r}: unsupported spec {s!r}")
    return out


def _infer(batch: RecordBatch, names) -> Dict[str, Spec]:
    """VarLen specs for features given by name only, typed from the first record holding each.
    Names no record holds come back as None (still unknown)."""
    from google.protobuf.message import DecodeError

    from .proto import Example

    kinds = {}
    for record in batch:
        try:
            example = Example.FromString(bytes(record))
        except DecodeError:
            continue  # the decoder reports this record properly
        for name in names:
            if name not in kinds and name in example.features.feature:
                which = example.features.feature[name].WhichOneof("kind")
                if which:
                    kinds[name] = {"int64_list": "int64", "float_list": "float32",
                                   "bytes_list": "bytes"}[which]
        if len(kinds) == len(names):
            break
    return {name: VarLen(kinds[name]) if name in kinds else None for name in names}


def _typed(batch: RecordBatch, spec: Dict[str, Spec]) -> Dict[str, Spec]:
    """Resolves by-name specs from this batch (learning their kinds into `spec` once seen); a
    name no record has shown yet reads as an empty float32 VarLen for this batch only."""
    untyped = [k for k, s in spec.items() if s is None]
    if untyped:
        spec.update({k: s for k, s in _infer(batch, untyped).items() if s is not None})
    return {k: VarLen("float32") if s is None else s for k, s in spec.items()}


def _compile(spec: Mapping[str, Spec], sequence: Mapping[str, Any] = None) -> list:
    """Specs -> the tuples the C++ decoder takes:
    (name, kind, layout, count, default bytes, is a feature list)."""
    compiled = []
    for name, s in spec.items():
        if isinstance(s, VarLen):
            compiled.append((name, s.kind, _VAR, 0, None, False))
            continue
        count = math.prod(s.shape)
        default = None
        if s.from_bytes:
            count *= s.dtype.itemsize
            if s.default is not None:
                default = np.broadcast_to(np.asarray(s.default, s.dtype), s.shape).tobytes()
            compiled.append((name, _BYTES, _RAW_BYTES, count, default, False))
            continue
        if s.default is not None:
            default = (bytes(s.default) if s.kind == _BYTES else
                       np.broadcast_to(np.asarray(s.default, _NUMPY[s.kind]), s.shape).tobytes())
        compiled.append((name, s.kind, _FIXED, count, default, False))
    for name, s in (sequence or {}).items():
        layout = _VAR if isinstance(s, VarLenSequence) else _FIXED
        count = 0 if layout == _VAR else math.prod(s.shape)
        compiled.append((name, s.kind, layout, count, None, True))
    return compiled


def _columns(batch: RecordBatch, spec: Mapping[str, Spec], raw: list) -> Dict[str, Any]:
    n = len(batch)
    out = {}
    data = batch.data
    for (name, s), (values, starts, ends, row_splits, _) in zip(spec.items(), raw):
        if isinstance(s, VarLen):
            out[name] = (BytesColumn(data, starts, ends, row_splits) if s.kind == _BYTES
                         else Ragged(values.view(_NUMPY[s.kind]), row_splits))
        elif s.from_bytes:
            out[name] = values.view(s.dtype).reshape((n,) + s.shape)
        elif s.kind == _BYTES:
            splits = None if s.shape == () else np.arange(n + 1, dtype=np.int64) * math.prod(
                s.shape)
            out[name] = BytesColumn(data, starts, ends, splits, s.default or b"")
        else:
            out[name] = values.view(_NUMPY[s.kind]).reshape((n,) + s.shape)
    return out


def _as_batch(records) -> RecordBatch:
    return records if isinstance(records, RecordBatch) else RecordBatch.from_records(records)


def parse_examples(records, spec, *, name: Optional[str] = None) -> Dict[str, Any]:
    """Parses a RecordBatch (or any sequence of serialized Examples) into one column per feature.

    FixedLen numeric -> numpy ``[N, *shape]``; VarLen numeric -> :class:`Ragged`; bytes ->
    :class:`BytesColumn` (zero-copy views of the batch). Only the features in ``spec`` are
    decoded. Raises :class:`~tfrec_fast.ExampleParseError` naming the record and feature.
    """
    batch = _as_batch(records)
    spec = _typed(batch, normalize_spec(spec))
    raw = _core.decode_examples(batch, _compile(spec), name or "<records>")
    return _columns(batch, spec, raw)


def parse_sequence_examples(records, context_spec=None, sequence_spec=None, *,
                            name: Optional[str] = None):
    """Parses tf.train.SequenceExample records: returns ``(context, sequences)``.

    ``context_spec`` works as in :func:`parse_examples`. ``sequence_spec`` maps feature-list
    names to :class:`FixedLenSequence` (-> :class:`Ragged` over steps, values ``[steps, *shape]``)
    or :class:`VarLenSequence` (-> a :class:`Ragged` over steps whose values are a Ragged (or
    BytesColumn) over each step's values). A missing feature list has no steps.
    """
    batch = _as_batch(records)
    # Context and Example features share field 1, so names-only context specs are typed alike.
    context = _typed(batch, normalize_spec(context_spec or {}))
    sequence = dict(sequence_spec or {})
    for key, s in sequence.items():
        if not isinstance(s, (FixedLenSequence, VarLenSequence)):
            raise TypeError(f"feature list {key!r}: use FixedLenSequence or VarLenSequence")
    raw = _core.decode_examples(batch, _compile(context, sequence), name or "<records>", True)
    out = _columns(batch, context, raw[:len(context)])
    data = batch.data
    seqs = {}
    for (key, s), (values, starts, ends, row_splits, step_splits) in zip(sequence.items(),
                                                                           raw[len(context):]):
        if isinstance(s, FixedLenSequence):
            if s.kind == _BYTES:
                steps = BytesColumn(data, starts, ends)
            else:
                steps = values.view(_NUMPY[s.kind]).reshape((-1,) + s.shape)
        elif s.kind == _BYTES:
            steps = BytesColumn(data, starts, ends, step_splits)
        else:
            steps = Ragged(values.view(_NUMPY[s.kind]), step_splits)
        seqs[key] = Ragged(steps, row_splits)
    return out, seqs


def parse_example(record, spec=None) -> Dict[str, Any]:
    """Parses one serialized Example (or any message with SerializeToString).

    Without a spec every feature comes back as a Python list. With one, FixedLen features come
    back as arrays of ``shape`` (bytes as ``bytes``) and VarLen ones as 1-D arrays (lists of
    ``bytes``).
    """
    if not isinstance(record, (bytes, bytearray, memoryview, np.ndarray)):
        from .proto import as_serialized
        record = as_serialized(record)
    if spec is None:
        from .proto import example_to_dict
        return example_to_dict(record)
    columns = parse_examples([record], spec)
    row = {}
    for key, col in columns.items():
        if isinstance(col, BytesColumn):
            value = col.to_list()[0]
        elif isinstance(col, Ragged):
            value = col[0]
        else:
            value = col[0]
        row[key] = value
    return row


def read_examples(paths, spec, batch_size: int = 1024, compression: Optional[str] = None, *,
                  verify: bool = True, storage_options=None,
                  filesystem=None) -> Iterator[Dict[str, Any]]:
    """Reads and parses Examples in batches of ``batch_size`` records (the last may be smaller),
    across file boundaries. Errors name the file and the record's index in it. Paths may be
    globs and URLs (``storage_options`` / ``filesystem``: see :mod:`tfrec_fast.remote`)."""
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    compression = normalize_compression(compression)
    spec = normalize_spec(spec)
    pending: List[RecordBatch] = []
    segments: list = []  # (path, index of the pending batch's first record in its file, count)

    def flush():
        batch = pending[0] if len(pending) == 1 else RecordBatch.from_records(
            itertools.chain.from_iterable(pending))
        try:
            typed = _typed(batch, spec)
            columns = _columns(batch, typed, _core.decode_examples(batch, _compile(typed), ""))
        except ExampleParseError as error:
            raise _locate(error, segments) from None
        pending.clear()
        segments.clear()
        return columns

    for source in _as_sources(paths, storage_options, filesystem):
        name = _display(source) if _is_path(source) else "<records>"
        with TFRecordReader(source, compression, verify=verify) as reader:
            while True:
                have = sum(len(b) for b in pending)
                first = reader.records_read
                batch = reader.read_batch(max_records=batch_size - have)
                if not len(batch):
                    break
                pending.append(batch)
                segments.append((name, first, len(batch)))
                if have + len(batch) == batch_size:
                    yield flush()
    if pending:
        yield flush()


def _locate(error: ExampleParseError, segments) -> ExampleParseError:
    """Maps a batch-relative record index to (file, index in that file)."""
    index = error.record_index
    for path, first, count in segments:
        if index < count:
            return ExampleParseError(error.detail, path=path, record_index=first + index,
                                     feature=error.feature)
        index -= count
    return error
