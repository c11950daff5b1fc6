"""Encoding tf.train.Example records, in C++ (no protobuf, no TensorFlow needed).

:func:`encode_example` turns one mapping ``{name: value}`` into the serialized bytes of a
``tf.train.Example``; :func:`encode_examples` turns columns of N rows into N of them at once, as a
:class:`~tfrec_fast.RecordBatch` that ``TFRecordWriter.write_batch`` writes in one call.

Values (the kind of the Feature follows from the value):

- ``int``, ``bool`` (0/1), numpy integer/bool scalars and arrays -> ``int64_list``; values outside
  the int64 range raise ``OverflowError`` naming the feature.
- ``float``, numpy floating scalars and arrays -> ``float_list``, rounded to float32 as protobuf
  does (beyond float32's range: +-inf). NaN payloads, inf and -0.0 of float32 input keep their bits.
- ``bytes``, ``str`` (UTF-8), ``bytearray``, ``memoryview``, numpy ``S``/``U`` arrays, object
  arrays of those -> ``bytes_list``.
- a ``list``/``tuple`` of values of one of those kinds; ints mixed with floats make a
  ``float_list`` (as in numpy). Mixing bytes with numbers, or nesting lists, is a ``TypeError``.
- numpy arrays of any shape are flattened in C order (non-contiguous arrays too).
- a protobuf ``Feature`` message (TensorFlow's ``tf.train.Feature`` or ``tfrec_fast.proto.Feature``:
  any object of a class named ``Feature`` with ``SerializeToString``) is embedded as it is.
- :class:`Int64s`, :class:`Floats`, :class:`Bytes` force a kind: needed for empty lists (a plain
  ``[]`` has no kind and raises ``ValueError``), and to store ints as floats. ``Bytes(array)`` of a
  numeric numpy array stores the array's raw bytes as ONE value (what ``FixedLen(shape, dtype)``
  with a numpy dtype decodes).
- ``None``, dicts and any other type raise ``TypeError`` naming the feature.

Byte identity with protobuf. The encoder writes the features in the mapping's iteration order,
packed int64/float lists (as TensorFlow writes them), and otherwise exactly the fields protobuf
writes, so the output parses to the same values everywhere. Whether protobuf's bytes are the same
depends on the order *it* gives the map entries (verified with protobuf 7.36 / TensorFlow 2.21):

- ``SerializeToString(deterministic=True)`` sorts the keys. Pass the features sorted the same way
  (``dict(sorted(d.items()))``) and the bytes are identical. Caveat: the default upb runtime sorts
  a key after every longer key it is a prefix of (``"ab"`` before ``"a"``), the pure-Python and C++
  runtimes before (plain ``sorted``); prefix-free key sets agree everywhere.
- plain ``SerializeToString()``: the pure-Python runtime writes entries in insertion order, so a
  message built in the same order gives identical bytes. The upb runtime (the default, also behind
  ``tf.train.Example`` in Python) writes them in hash-table order, neither insertion nor sorted, so
  its bytes match ours only for examples with at most one feature (the values always match).

Columns for :func:`encode_examples` (N rows each; ``n`` is inferred and all columns must agree):

- a numpy array ``[N, ...]``: row i is ``column[i]`` flattened (``S`` arrays: bytes per element).
- a list/tuple of N per-row values, each taking any of the value forms above (e.g. a list of
  bytes, or a list of lists of bytes); empty plain lists take the column's kind.
- a :class:`~tfrec_fast.example.Ragged` (anything with ``values`` and ``row_splits``): row i is
  ``values[row_splits[i]:row_splits[i + 1]]``.
- a :class:`~tfrec_fast.example.BytesColumn` (``values``, ``starts``, ``ends``, optional
  ``row_splits``), as the decoder returns it: round trips without a copy per value.
- any of these wrapped in :class:`Int64s`/:class:`Floats`/:class:`Bytes` to force the kind;
  ``Bytes(uint8_array[N, ...])`` stores each row's raw bytes as one value.
- any of these wrapped in :class:`Partial` with N ``present`` flags: the records whose flag is
  false do not hold the feature at all (what readers see as a missing feature, not an empty
  list).

Conversion happens in C++ with the GIL held; encoding a batch releases it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from . import _core
from ._core import RecordBatch

__all__ = ["encode_example", "encode_examples", "encode_sequence_example",
           "encode_sequence_examples", "Int64s", "Floats", "Bytes", "Partial"]


class _Typed:
    """A value (or column) with a forced Feature kind."""

    __slots__ = ("values",)
    _tfrec_kind = ""  # read by the C++ converter

    def __init__(self, values: Any = ()) -> None:
        self.values = values

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.values!r})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.values == getattr(other, "values")

    __hash__ = None  # type: ignore[assignment]


class Int64s(_Typed):
    """Stores ``values`` as an int64_list (ints, bools, integer arrays; ``Int64s()`` is empty)."""

    __slots__ = ()
    _tfrec_kind = "int64"


class Floats(_Typed):
    """Stores ``values`` as a float_list (floats, and ints converted; ``Floats()`` is empty)."""

    __slots__ = ()
    _tfrec_kind = "float"


class Bytes(_Typed):
    """Stores ``values`` as a bytes_list (bytes/str values; a numeric array as its raw bytes)."""

    __slots__ = ()
    _tfrec_kind = "bytes"


class Partial:
    """A column of N rows that some records lack: record i holds the feature only where
    ``present[i]`` is true (N booleans); elsewhere the row's values are not read. For
    :func:`encode_examples` and the context of :func:`encode_sequence_examples`."""

    __slots__ = ("column", "present")
    _tfrec_partial = True  # read by the C++ converter

    def __init__(self, column: Any, present: Any) -> None:
        self.column = column
        self.present = present

    def __repr__(self) -> str:
        return f"Partial({self.column!r}, present={self.present!r})"


def encode_example(features: Mapping[str, Any]) -> bytes:
    """Serializes ``features`` (name -> value, see the module docstring) as one tf.train.Example."""
    return _core.encode_example(features)


def encode_examples(columns: Mapping[str, Any], n: Optional[int] = None) -> RecordBatch:
    """Serializes N examples from columns (name -> column of N rows) into one RecordBatch.

    Record i is ``encode_example({name: row i of column for each column})``. ``n`` is needed only
    when there are no columns; given, every column must have n rows (``ValueError`` otherwise).
    """
    return _core.encode_examples(columns, n)


def encode_sequence_example(context: Mapping[str, Any],
                            feature_lists: Mapping[str, Any]) -> bytes:
    """Serializes one tf.train.SequenceExample: ``context`` maps names to values as in
    :func:`encode_example`; ``feature_lists`` maps names to a sequence of steps, each step a
    value as in :func:`encode_example` (one Feature per step)."""
    lists = {k: type(steps)([steps.values]) if isinstance(steps, _Typed) else [steps]
             for k, steps in feature_lists.items()}
    batch = encode_sequence_examples({k: [v] for k, v in context.items()}, lists, 1)
    return batch[0].tobytes()


def encode_sequence_examples(context: Mapping[str, Any], feature_lists: Mapping[str, Any],
                             n: Optional[int] = None) -> RecordBatch:
    """Serializes N SequenceExamples into one RecordBatch, in C++.

    ``context``: columns of N rows, as for :func:`encode_examples`. ``feature_lists``: for each
    name, N records, each a sequence of step values; or a :class:`~tfrec_fast.example.Ragged`
    over steps as :func:`~tfrec_fast.parse_sequence_examples` returns it (``values``: a column
    with one row per step, ``row_splits``: each record's steps). Wrap a feature list in
    :class:`Int64s`/:class:`Floats`/:class:`Bytes` to force the kind of its steps.
    """
    lists = {}
    for name, column in feature_lists.items():
        wrapper = type(column) if isinstance(column, _Typed) else None
        if wrapper is not None:
            column = column.values
        if hasattr(column, "values") and hasattr(column, "row_splits"):
            steps, splits = column.values, np.asarray(column.row_splits, np.int64)
        else:
            records = [list(r) for r in column]
            steps = [step for r in records for step in r]
            splits = np.cumsum([0] + [len(r) for r in records], dtype=np.int64)
        if wrapper is not None:
            steps = wrapper(steps)
        elif not len(steps):  # no step anywhere: no kind to infer, and none is written
            steps = Int64s([])
        lists[name] = (steps, splits)
    if n is None:
        rows = [len(s) - 1 for _, s in lists.values()]
        if not context and not rows:
            raise ValueError("encode_sequence_examples needs n when there is no column")
        n = rows[0] if rows else None
    if n is None:
        return _core.encode_sequence_examples(context, lists, _rows_of(context))
    return _core.encode_sequence_examples(context, lists, int(n))


def _rows_of(context: Mapping[str, Any]) -> int:
    """The row count of the first context column (the encoder checks the rest)."""
    first = next(iter(context.values()))
    if hasattr(first, "row_splits"):
        return len(first.row_splits) - 1
    if isinstance(first, _Typed):
        return _rows_of({"": first.values})
    return len(first)
