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

Python and numpy decide the kinds and build the columns (``tfrec_fast._columns``), one numpy
conversion per column. The C++ encoder takes only columns (``tfrec_fast._core.encode_examples``,
documented in ``_core.pyi``: int64/float32 arrays, bytes values as one buffer with int64 offsets
or as a list of bytes objects, int64 row_splits: the decoder's shapes), so a caller that already
has columns (numpy views of Arrow buffers, say) can call it directly. It owns every input before
it releases the GIL and encodes without it.
"""

from __future__ import annotations

import operator
from typing import Any, Mapping, Optional

import numpy as np

from . import _core
from ._columns import (
    BYTES,
    FLOAT,
    INT64,
    Partial,
    Typed,
    column_of,
    display,
    items,
    one_row,
    row_splits_of,
    splits_of,
)
from ._core import RecordBatch

# Arrays of these dtypes go to the encoder as they are.
_PLAIN_ARRAYS = {
    np.dtype(np.int64): INT64,
    np.dtype(np.float32): FLOAT,
    np.dtype(np.float64): FLOAT,
}

__all__ = [
    "encode_example",
    "encode_examples",
    "encode_sequence_example",
    "encode_sequence_examples",
    "Int64s",
    "Floats",
    "Bytes",
    "Partial",
]


class Int64s(Typed):
    """Stores ``values`` as an int64_list (ints, bools, integer arrays; ``Int64s()`` is empty).

    Parameters
    ----------
    values : optional
        A value or a column of ints, bools or integer arrays; omitted: an empty list of this kind.
    """

    __slots__ = ()
    kind = INT64


class Floats(Typed):
    """Stores ``values`` as a float_list (floats, and ints converted; ``Floats()`` is empty).

    Parameters
    ----------
    values : optional
        A value or a column of floats or ints (converted); omitted: an empty list of this kind.
    """

    __slots__ = ()
    kind = FLOAT


class Bytes(Typed):
    """Stores ``values`` as a bytes_list (bytes/str values; a numeric array as its raw bytes).

    Parameters
    ----------
    values : optional
        A value or a column of bytes or str values, or a numeric array (its raw bytes, one
        value); omitted: an empty list of this kind.
    """

    __slots__ = ()
    kind = BYTES


def encode_example(features: Mapping[str, Any]) -> bytes:
    """Serializes ``features`` as one tf.train.Example.

    Parameters
    ----------
    features : mapping of str to value
        Name -> value, each value of a kind described in the module docstring (int, float,
        bytes, str, numpy arrays, lists of one kind, :class:`Int64s` / :class:`Floats` /
        :class:`Bytes`, a protobuf ``Feature``).

    Returns
    -------
    bytes
        The serialized Example, features in the mapping's order.

    Raises
    ------
    TypeError
        A value of no kind (None, a dict, mixed bytes and numbers, nested lists), naming the
        feature.
    ValueError
        An empty plain list (no kind: use :class:`Int64s`, :class:`Floats` or :class:`Bytes`).
    OverflowError
        An integer outside the int64 range.
    """
    # (plain int, float and bytes values are taken by the encoder itself: the per-row fast path)
    return _core.encode_example(features, _value_column)


def _value_column(key: Any, value: Any) -> tuple:
    """encode_example's (kind, values, offsets) for a value that is not a plain int/float/bytes
    or a list of one of them (the encoder takes those itself)."""
    if type(value) is np.ndarray and value.dtype in _PLAIN_ARRAYS:
        return _PLAIN_ARRAYS[value.dtype], value.ravel(), None  # (C-contiguous)
    return one_row(display(key), value)


def encode_examples(columns: Mapping[str, Any], n: Optional[int] = None) -> RecordBatch:
    """Serializes N examples from columns (name -> column of N rows) into one RecordBatch.

    Record i is ``encode_example({name: row i of column for each column})``. ``n`` is needed only
    when there are no columns; given, every column must have n rows (``ValueError`` otherwise).

    Parameters
    ----------
    columns : mapping of str to column
        Name -> column of N rows: a numpy array ``[N, ...]``, a list of N values, a ``Ragged``,
        a ``BytesColumn``, any of them wrapped in :class:`Int64s` / :class:`Floats` /
        :class:`Bytes` or :class:`Partial` (see the module docstring).
    n : int, optional
        The number of records.

    Returns
    -------
    RecordBatch
        The N serialized Examples.

    Raises
    ------
    ValueError
        Columns of different lengths, ``n`` disagreeing with them, or no column and no ``n``.
    TypeError
        A column of no kind, naming it.
    OverflowError
        An integer outside the int64 range.
    """
    rows = _check_n(n)
    out, rows = _columns(columns, rows, "columns")
    if rows is None:
        raise ValueError("encode_examples needs n when there are no columns")
    return _core.encode_examples(out, rows)


def _check_n(n: Optional[int]) -> Optional[int]:
    if n is None:
        return None
    n = operator.index(n)
    if n < 0:
        raise ValueError("n must be >= 0")
    return n


def _columns(columns: Mapping[str, Any], rows: Optional[int], what: str):
    """{key: column tuple} of columns that all have `rows` rows (None: the first column's)."""
    out = {}
    first = None
    for key, col in items(columns, what):
        name = display(key)
        count, out[key] = column_of(name, col)
        if rows is None:
            rows, first = count, name
        elif count != rows:
            but = f"column '{first}' has" if first is not None else "n is"
            raise ValueError(f"column '{name}' has {count} rows, but {but} {rows}")
    return out, rows


def encode_sequence_example(context: Mapping[str, Any], feature_lists: Mapping[str, Any]) -> bytes:
    """Serializes one tf.train.SequenceExample.

    Parameters
    ----------
    context : mapping of str to value
        Name -> value, as in :func:`encode_example`.
    feature_lists : mapping of str to sequence
        Name -> a sequence of steps, each step a value as in :func:`encode_example` (one Feature
        per step).

    Returns
    -------
    bytes
        The serialized SequenceExample.

    Raises
    ------
    TypeError
        As for :func:`encode_example`.
    ValueError
        As for :func:`encode_example`.
    OverflowError
        As for :func:`encode_example`.
    """
    lists = {
        k: type(steps)([steps.values]) if isinstance(steps, Typed) else [steps]
        for k, steps in items(feature_lists, "feature_lists")
    }
    batch = encode_sequence_examples({k: [v] for k, v in items(context, "context")}, lists, 1)
    return batch[0].tobytes()


def encode_sequence_examples(
    context: Mapping[str, Any], feature_lists: Mapping[str, Any], n: Optional[int] = None
) -> RecordBatch:
    """Serializes N SequenceExamples into one RecordBatch, in C++.

    ``context``: columns of N rows, as for :func:`encode_examples`. ``feature_lists``: for each
    name, N records, each a sequence of step values; or a :class:`~tfrec_fast.example.Ragged`
    over steps as :func:`~tfrec_fast.parse_sequence_examples` returns it (``values``: a column
    with one row per step, ``row_splits``: each record's steps). Wrap a feature list in
    :class:`Int64s`/:class:`Floats`/:class:`Bytes` to force the kind of its steps.

    Parameters
    ----------
    context : mapping of str to column
        Columns of N rows, as for :func:`encode_examples`.
    feature_lists : mapping of str to column
        Name -> N records of steps, or a ``Ragged`` over steps.
    n : int, optional
        The number of records (needed only when there is no column).

    Returns
    -------
    RecordBatch
        The N serialized SequenceExamples.

    Raises
    ------
    ValueError
        Columns of different lengths, or nothing to tell N from.
    TypeError
        As for :func:`encode_examples`.
    OverflowError
        As for :func:`encode_examples`.
    """
    rows = _check_n(n)
    lists = {}
    for key, column in items(feature_lists, "feature_lists"):
        steps, splits = _feature_list(display(key), column)
        lists[key] = (steps, splits)
        if rows is None:
            rows = len(splits) - 1
    if rows is None and not len(context):
        raise ValueError("encode_sequence_examples needs n when there is no column")
    out, rows = _columns(context, rows, "context")
    return _core.encode_sequence_examples(out, lists, rows)


def _feature_list(name: str, column: Any):
    """(steps column, record splits) of one feature list: a Ragged over steps, or N records of
    steps; a kind wrapper around either forces the kind of the steps."""
    forced = None
    if isinstance(column, Typed):
        column, forced = column.values, column.kind
    if (
        not isinstance(column, np.ndarray)
        and hasattr(column, "values")
        and hasattr(column, "row_splits")
    ):
        steps, splits = column.values, row_splits_of(column.row_splits, name)
    else:
        records = [list(record) for record in column]
        steps = [step for record in records for step in record]
        splits = splits_of(map(len, records), len(records))
    if forced is None and not len(steps):  # no step anywhere: no kind to infer, none is written
        steps, forced = [], INT64
    return column_of(name, steps, forced)[1], splits
