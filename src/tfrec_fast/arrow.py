"""TFRecord <-> Apache Arrow (extra ``arrow``: ``pip install ".[arrow]"``).

A RecordBatch is one byte buffer plus int64 offsets (Arrow's LargeBinary layout) and a VarLen
column is values plus row_splits (Arrow's LargeList), so the hand-over is zero-copy where the
values are contiguous: numeric columns and lists are wrapped, not copied; bytes values, which lie
between protobuf tags in the records, are gathered once in C++.

=============================  ===========================================================
spec                           Arrow type (``large_types=False``: 32-bit list / binary)
=============================  ===========================================================
FixedLen((), int64/float32)    int64 / float (numpy dtypes of ``from_bytes`` specs: theirs)
FixedLen((k, ...), numeric)    fixed_size_list per dimension, or ``fixed_shape="tensor"``:
                               the ``arrow.fixed_shape_tensor`` extension type
FixedLen((), bytes)            large_binary (large_string for features named in ``text``)
VarLen(kind)                   large_list<kind>, null where a record lacks the feature
FixedLenSequence(shape, kind)  large_list<FixedLen's type> over steps
VarLenSequence(kind)           large_list<large_list<kind>> over steps
no spec (inferred)             large_list<kind> per feature, null where missing (as tfx-bsl);
                               ``scalars=True``: a feature with at most one value in every
                               record (one somewhere) becomes a plain column, null where empty
=============================  ===========================================================
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from . import _core
from .errors import ExampleParseError
from .example import _decode, _locate, _typed, batches_across_files, feature_kinds
from .spec import (
    _BYTES,
    _FLOAT,
    _INT64,
    _KIND_DTYPE,
    _NUMPY,
    FixedLen,
    FixedLenSequence,
    VarLen,
    VarLenSequence,
    normalize_spec,
)

try:
    import pyarrow as pa
    import pyarrow.compute as pc
except ImportError as error:  # pragma: no cover - exercised where pyarrow is absent
    raise ImportError("tfrec_fast.arrow needs pyarrow: pip install 'tfrec_fast[arrow]'") from error

__all__ = [
    "batch_to_arrow",
    "read_table",
    "iter_batches",
    "write_table",
    "encoded_batches",
    "schema_of",
]

RecordBatch = _core.RecordBatch
_ARROW_KIND: Dict[_core.Kind, pa.DataType] = {_INT64: pa.int64(), _FLOAT: pa.float32()}


# ---- raw records ----------------------------------------------------------------------------


def batch_to_arrow(batch: RecordBatch, *, large_types: bool = True) -> pa.Array:
    """The records of a RecordBatch as a ``pyarrow.LargeBinaryArray`` sharing its memory (the
    Arrow buffers keep the batch alive).

    Parameters
    ----------
    batch : RecordBatch
        The records.
    large_types : bool, default True
        False: a ``BinaryArray`` (int32 offsets, copied; payloads still shared).

    Returns
    -------
    pyarrow.Array
        One value per record.
    """
    offsets = pa.py_buffer(batch.offsets)
    array = pa.Array.from_buffers(
        pa.large_binary(), len(batch), [None, offsets, pa.py_buffer(batch.data)]
    )
    return array if large_types else array.cast(pa.binary())


# ---- columns -> Arrow arrays ------------------------------------------------------------------


def _buffer(values: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.ascontiguousarray(values))


def _validity(present: Optional[np.ndarray]) -> Optional[pa.Buffer]:
    if present is None or present.all():
        return None
    return pa.py_buffer(np.packbits(present.astype(bool), bitorder="little"))


def _primitive(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    return pa.Array.from_buffers(type_, len(values), [None, _buffer(values)])


def _binary(
    batch: RecordBatch, starts: np.ndarray, ends: np.ndarray, default: bytes, text: bool
) -> pa.Array:
    values = _gathered(batch, starts, ends, default)
    if not text:
        return values
    array = pa.Array.from_buffers(pa.large_string(), len(values), values.buffers())
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        raise _NotText(_first_not_utf8(values)) from None
    return array


def _gathered(batch: RecordBatch, starts: np.ndarray, ends: np.ndarray, default: bytes) -> pa.Array:
    """The byte ranges [starts[j], ends[j]) of the batch's buffer (a start of -1: ``default``)
    as one LargeBinaryArray, copied once in C++ into memory from Arrow's pool (reused from batch
    to batch, where the first touch of each page of a fresh buffer costs as much as the copy)."""
    lengths = np.where(starts < 0, len(default), ends - starts)
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = pa.allocate_buffer(int(offsets[-1]))
    RecordBatch.gather(batch, starts, ends, default, data)
    return pa.Array.from_buffers(
        pa.large_binary(), len(starts), [None, pa.py_buffer(offsets), data]
    )


class _NotText(ValueError):
    """Value ``index`` of a column declared as text is not UTF-8."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


def _first_not_utf8(values: pa.Array) -> int:
    for j, value in enumerate(values):
        try:
            value.as_py().decode("utf-8")
        except UnicodeDecodeError:
            return j
    return 0


def _list(values: pa.Array, splits: np.ndarray, present: Optional[np.ndarray]) -> pa.Array:
    """A large_list over ``values`` with row_splits ``splits`` (wrapped, not copied); rows
    where ``present`` is 0 are null."""
    return pa.Array.from_buffers(
        pa.large_list(values.type),
        len(splits) - 1,
        [_validity(present), _buffer(splits)],
        children=[values],
    )


def _fixed(values: pa.Array, shape: Tuple[int, ...], tensor: bool) -> pa.Array:
    """Flat values -> nested fixed_size_lists of ``shape`` (or one fixed_shape_tensor)."""
    if tensor and shape:
        storage = pa.FixedSizeListArray.from_arrays(values, math.prod(shape))
        return pa.ExtensionArray.from_storage(
            pa.fixed_shape_tensor(values.type, list(shape)), storage
        )
    for size in reversed(shape):
        values = pa.FixedSizeListArray.from_arrays(values, size)
    return values


def _values(
    batch: RecordBatch,
    kind: _core.Kind,
    raw_values: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    default: bytes,
    text: bool,
) -> pa.Array:
    if kind == _BYTES:
        return _binary(batch, starts, ends, default, text)
    return _primitive(raw_values.view(_NUMPY[kind]), _ARROW_KIND[kind])


def _column(batch: RecordBatch, key: str, s, raw: tuple, *, text: bool, tensor: bool) -> pa.Array:
    try:
        return _arrow_column(batch, s, raw, text=text, tensor=tensor)
    except _NotText as error:
        raise ExampleParseError(
            "a value of this text column is not UTF-8 (read it as bytes: leave it out of `text`)",
            path="<records>",
            record_index=_record_of(s, raw, error.index),
            feature=key,
        ) from None


def _record_of(s, raw: tuple, value: int) -> int:
    """The record holding value number ``value`` of a decoded column."""
    row_splits, step_splits = raw[3], raw[4]
    if isinstance(s, FixedLen):
        return value // max(1, math.prod(s.shape))
    if isinstance(s, VarLenSequence):  # value -> step, then step -> record
        value = int(np.searchsorted(step_splits, value, "right")) - 1
    elif isinstance(s, FixedLenSequence):
        value //= max(1, math.prod(s.shape))
    return int(np.searchsorted(row_splits, value, "right")) - 1


def _arrow_column(batch: RecordBatch, s, raw: tuple, *, text: bool, tensor: bool) -> pa.Array:
    values, starts, ends, row_splits, step_splits, present = raw
    if isinstance(s, VarLen):
        flat = _values(batch, s.kind, values, starts, ends, b"", text)
        return _list(flat, row_splits, present)
    if isinstance(s, FixedLenSequence):
        flat = _values(batch, s.kind, values, starts, ends, b"", text)
        return _list(_fixed(flat, s.shape, tensor), row_splits, None)
    if isinstance(s, VarLenSequence):
        flat = _values(batch, s.kind, values, starts, ends, b"", text)
        return _list(_list(flat, step_splits, None), row_splits, None)
    # FixedLen
    if s.from_bytes:
        flat = _primitive(values.view(s.dtype), pa.from_numpy_dtype(s.dtype))
        return _fixed(flat, s.shape, tensor)
    flat = _values(
        batch,
        s.kind,
        values,
        starts,
        ends,
        bytes(s.default or b"") if s.kind == _BYTES else b"",
        text,
    )
    return _fixed(flat, s.shape, tensor)


def _strict_scalar(array: pa.Array, key: str) -> pa.Array:
    """A list column that must hold at most one value in each record, as a plain column (empty
    or missing: null)."""
    lengths = np.diff(array.offsets.to_numpy())
    bad = np.flatnonzero(lengths > 1)
    if len(bad):
        raise ExampleParseError(
            f"holds {int(lengths[bad[0]])} values where the schema has a scalar (one value in "
            "every record sampled); pass a spec (VarLen) to read it as lists",
            path="<records>",
            record_index=int(bad[0]),
            feature=key,
        )
    return _one_or_null(array)


def _narrow(array: pa.Array) -> pa.Array:
    """large_list / large_binary / large_string -> their 32-bit forms, recursively."""
    return array.cast(_narrow_type(array.type))


def _narrow_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_list(t):
        return pa.list_(pa.field(t.value_field.name, _narrow_type(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field(t.value_field.name, _narrow_type(t.value_type)), t.list_size)
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_string(t):
        return pa.string()
    return t


def _one_or_null(array: pa.Array) -> pa.Array:
    """A list column whose rows hold at most one value, as a plain column: the value, or null
    for an empty or missing row."""
    lengths = np.diff(array.offsets.to_numpy())
    taken = np.cumsum(lengths) - 1
    mask = (lengths == 0) | array.is_null().to_numpy(zero_copy_only=False)
    return pc.take(array.flatten(), pa.array(taken, mask=mask))


def _scalar(array: pa.Array) -> pa.Array:
    """A list column with at most one value in every row (and one somewhere) as a plain column,
    empty rows null, as Ray reads them; else as is."""
    if not (pa.types.is_large_list(array.type) or pa.types.is_list(array.type)) or not len(array):
        return array
    lengths = np.diff(array.offsets.to_numpy())
    if np.all(lengths <= 1) and np.any(lengths == 1):
        return _one_or_null(array)
    return array


# ---- reading --------------------------------------------------------------------------------


def _var_len(kind: Optional[_core.Kind]) -> Optional[VarLen]:
    """A VarLen of a kind seen in the data; None (still unknown) for a feature not seen."""
    return None if kind is None else VarLen(_KIND_DTYPE[kind])


class _Plan:
    """What to decode: the context/Example spec, the feature lists, and the output options."""

    def __init__(self, spec, sequence_spec, columns, text, fixed_shape, large_types, scalars):
        if fixed_shape not in ("list", "tensor"):
            raise ValueError(f"fixed_shape must be 'list' or 'tensor', not {fixed_shape!r}")
        self.spec = None if spec is None else normalize_spec(spec)
        self.sequence = dict(sequence_spec or {})
        for key, s in self.sequence.items():
            if not isinstance(s, (FixedLenSequence, VarLenSequence)):
                raise TypeError(f"feature list {key!r}: use FixedLenSequence or VarLenSequence")
        self.columns = None if columns is None else list(columns)
        self.text = frozenset(text)
        self.tensor = fixed_shape == "tensor"
        self.large_types = large_types
        # True: a column is scalar where this batch has one value in every record; a set of
        # names: exactly those columns, and a record breaking the rule is an error.
        self.scalars = scalars if isinstance(scalars, bool) else frozenset(scalars)
        # Where the spec was inferred from part of the records (what the first batch or block
        # holds), what it says about the rest: a feature outside it is an error, never dropped.
        self.inferred_from: Optional[str] = None

    @property
    def is_sequence(self) -> bool:
        return bool(self.sequence)

    @property
    def untyped(self) -> bool:
        """No spec, or names whose kinds the data must tell."""
        return self.spec is None or any(s is None for s in self.spec.values())

    def infer(self, batches: Iterable[RecordBatch]) -> None:
        """Without a spec: every feature the batches hold, as VarLen of the kind it holds first
        (a feature with no values at all reads as float32, as the `schema` command says). With
        names only: their kinds, so that every batch agrees."""
        if not self.untyped:
            return
        kinds: Dict[str, Optional[_core.Kind]] = {}
        for batch in batches:
            for key, kind in feature_kinds(batch, "<records>", self.is_sequence).items():
                if kinds.get(key) is None:
                    kinds[key] = kind
        if self.spec is None:
            self.spec = {
                k: VarLen(_KIND_DTYPE[_FLOAT if kind is None else kind])
                for k, kind in sorted(kinds.items())
            }
        else:
            self.spec = {
                k: s if s is not None else _var_len(kinds.get(k)) for k, s in self.spec.items()
            }

    def selected(self) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        spec = dict(self.spec or {})
        sequence = dict(self.sequence)
        if self.columns is not None:
            missing = [c for c in self.columns if c not in spec and c not in sequence]
            if missing:
                raise KeyError(
                    f"columns {missing} are not in the spec (features: "
                    f"{sorted(spec) + sorted(sequence)})"
                )
            spec = {k: spec[k] for k in self.columns if k in spec}
            sequence = {k: sequence[k] for k in self.columns if k in sequence}
        return spec, sequence

    def convert(self, batch: RecordBatch, segments=None) -> pa.RecordBatch:
        spec, sequence = self.selected()
        try:
            if self.inferred_from is not None:
                self._refuse_unknown(batch)
            typed = _typed(batch, spec, "<records>", self.is_sequence)
            raw = _decode(batch, typed, "<records>", sequence if self.is_sequence else None)
            arrays = [
                _column(batch, key, s, r, text=key in self.text, tensor=self.tensor)
                for (key, s), r in zip(list(typed.items()) + list(sequence.items()), raw)
            ]
        except ExampleParseError as error:
            raise (_locate(error, segments) if segments else error) from None
        names = list(typed) + list(sequence)
        if isinstance(self.scalars, frozenset):
            try:
                arrays = [
                    _strict_scalar(a, key) if key in self.scalars else a
                    for key, a in zip(names, arrays)
                ]
            except ExampleParseError as error:
                raise (_locate(error, segments) if segments else error) from None
        elif self.scalars:
            arrays = [_scalar(a) for a in arrays]
        if not self.large_types:
            arrays = [_narrow(a) for a in arrays]
        return pa.RecordBatch.from_arrays(arrays, names=names)

    def _refuse_unknown(self, batch: RecordBatch) -> None:
        """A record holding a feature the inferred spec does not have: an ExampleParseError."""
        known = self.spec or {}
        for raw, _, record in _core.feature_kinds(batch, "<records>", self.is_sequence, False):
            key = raw.decode("utf-8", "surrogateescape")
            if key not in known:
                raise ExampleParseError(
                    f"a feature the schema does not have: the schema was inferred from "
                    f"{self.inferred_from}; pass a spec that names it (or read_table, which "
                    "infers it from every record)",
                    path="<records>",
                    record_index=record,
                    feature=key,
                )


def _record_batches(paths, batch_size, compression, verify, storage_options, filesystem):
    return batches_across_files(
        paths,
        batch_size,
        compression,
        verify=verify,
        storage_options=storage_options,
        filesystem=filesystem,
    )


def iter_batches(
    paths,
    spec=None,
    *,
    sequence_spec=None,
    columns: Optional[Sequence[str]] = None,
    batch_size: int = 4096,
    compression: Optional[str] = None,
    verify: bool = True,
    text: Iterable[str] = (),
    fixed_shape: str = "list",
    large_types: bool = True,
    scalars: bool = False,
    storage_options=None,
    filesystem=None,
) -> pa.RecordBatchReader:
    """A ``pyarrow.RecordBatchReader`` over the Examples of ``paths`` (paths, globs, URLs, or a
    list of them, as everywhere), ``batch_size`` records per Arrow batch.

    ``spec``: {name: FixedLen | VarLen} or names (kinds from the data); None infers every
    feature from the first batch (a later record holding another feature raises
    ExampleParseError naming it: pass a spec, or use read_table, which looks at every record
    first). ``sequence_spec``: SequenceExample feature lists (then ``spec`` reads the
    context). ``text``: bytes features to type as strings (UTF-8 checked). See the module's
    table for the types. Damage raises DataLossError, bad records ExampleParseError, naming the
    file and the record.

    Parameters
    ----------
    paths : str, os.PathLike, or a list of them
        Paths, globs or URLs.
    spec : mapping or sequence of str, optional
        ``{name: FixedLen | VarLen}``, or names (kinds from the data); None: every feature of
        the first batch.
    sequence_spec : mapping, optional
        SequenceExample feature lists: ``{name: FixedLenSequence | VarLenSequence}``.
    columns : sequence of str, optional
        Only these features (of an inferred spec).
    batch_size : int, default 4096
        Records per Arrow batch.
    compression : {None, "gzip", "zlib", "auto"}, optional
        As for :func:`~tfrec_fast.read_records`.
    verify : bool, default True
        Check both CRC32Cs of every record.
    text : iterable of str, default ()
        Bytes features to read as ``large_string`` (UTF-8 checked).
    fixed_shape : {"list", "tensor"}, default "list"
        FixedLen shapes as nested ``fixed_size_list`` or as ``arrow.fixed_shape_tensor``.
    large_types : bool, default True
        64-bit ``large_list`` / ``large_binary`` / ``large_string`` (False: 32-bit ones).
    scalars : bool, default False
        Without a spec: features with at most one value per record as plain columns
        (Ray's rule).
    storage_options
        For URLs, as for readers.
    filesystem
        For URLs, as for readers.

    Returns
    -------
    pyarrow.RecordBatchReader
        Its schema is fixed by the spec, or by the first batch.

    Raises
    ------
    ExampleParseError
        A record that is not an Example or does not fit the spec, or (without a spec) holds a
        feature the first batch did not, naming the file and the record.
    DataLossError
        A damaged record.
    """
    plan = _Plan(spec, sequence_spec, columns, text, fixed_shape, large_types, scalars)
    batches = _record_batches(paths, batch_size, compression, verify, storage_options, filesystem)
    first = next(batches, None)
    if first is None:
        plan.infer([])
        return pa.RecordBatchReader.from_batches(schema_of(plan), iter(()))
    if plan.spec is None:
        plan.inferred_from = f"the first batch ({len(first[0])} records)"
    plan.infer([first[0]])
    head = plan.convert(*first)
    if plan.scalars is True:  # the first batch decides; later records must agree
        plan.scalars = frozenset(
            f.name
            for f in head.schema
            if not pa.types.is_list(f.type) and not pa.types.is_large_list(f.type)
        )

    def rest() -> Iterator[pa.RecordBatch]:
        yield head
        for batch, segments in batches:
            yield plan.convert(batch, segments)

    return pa.RecordBatchReader.from_batches(head.schema, rest())


def read_table(
    paths,
    spec=None,
    *,
    sequence_spec=None,
    columns: Optional[Sequence[str]] = None,
    batch_size: int = 4096,
    compression: Optional[str] = None,
    verify: bool = True,
    text: Iterable[str] = (),
    fixed_shape: str = "list",
    large_types: bool = True,
    scalars: bool = False,
    storage_options=None,
    filesystem=None,
) -> pa.Table:
    """All the Examples of ``paths`` as one ``pyarrow.Table``.

    Without a spec, every feature of every record is a column (every record is looked at
    first).

    Parameters
    ----------
    paths
        As for :func:`iter_batches`.
    spec
        As for :func:`iter_batches`.
    sequence_spec
        As for :func:`iter_batches`.
    columns
        As for :func:`iter_batches`.
    batch_size
        As for :func:`iter_batches`.
    compression
        As for :func:`iter_batches`.
    verify
        As for :func:`iter_batches`.
    text
        As for :func:`iter_batches`.
    fixed_shape
        As for :func:`iter_batches`.
    large_types
        As for :func:`iter_batches`.
    scalars
        As for :func:`iter_batches`.
    storage_options
        As for :func:`iter_batches`.
    filesystem
        As for :func:`iter_batches`.

    Returns
    -------
    pyarrow.Table
        One row per record.

    Raises
    ------
    ExampleParseError
        A record that is not an Example or does not fit the spec.
    DataLossError
        A damaged record.
    """
    plan = _Plan(spec, sequence_spec, columns, text, fixed_shape, large_types, scalars)
    batches = _record_batches(paths, batch_size, compression, verify, storage_options, filesystem)
    if plan.untyped:  # the kinds come from every record first
        batches = list(batches)
        plan.infer(b for b, _ in batches)
    # else each batch of records is converted and dropped as it comes (less memory, warm pages)
    scalars = plan.scalars
    if scalars is True:
        plan.scalars = False  # decided below, over every batch at once
    converted = [plan.convert(b, segments) for b, segments in batches]
    table = pa.Table.from_batches(converted, schema_of(plan) if not converted else None)
    if scalars is True and table.num_rows:
        table = pa.table(
            {name: _scalar(table.column(name).combine_chunks()) for name in table.column_names}
        )
    return table


def schema_of(plan: _Plan) -> pa.Schema:
    """The Arrow schema a plan produces (used for empty inputs).

    Parameters
    ----------
    plan : _Plan
        What :func:`iter_batches` / :func:`read_table` make of their arguments.

    Returns
    -------
    pyarrow.Schema
        The schema of the batches the plan converts.
    """
    spec, sequence = plan.selected()
    empty = RecordBatch.from_records([])
    fields = []
    for key, s in list(spec.items()) + list(sequence.items()):
        raw = (
            np.zeros(0, np.uint8),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(1, np.int64),
            np.zeros(1, np.int64),
            np.zeros(0, np.uint8),
        )
        if s is None:
            s = VarLen("float32")
        array = _arrow_column(empty, s, raw, text=key in plan.text, tensor=plan.tensor)
        if not plan.large_types:
            array = _narrow(array)
        fields.append(pa.field(key, array.type))
    return pa.schema(fields)


# ---- writing --------------------------------------------------------------------------------

NULLS = ("omit", "empty")  # what write_table makes of a null row


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _plain(array: pa.Array) -> pa.Array:
    """Extension arrays as their storage, dictionaries decoded, binary/string views as large
    binary/string: the layouts the encoder reads."""
    t = array.type
    if isinstance(t, pa.ExtensionType):
        return _plain(array.storage)
    if pa.types.is_dictionary(t):
        return _plain(array.dictionary_decode())
    if pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        return array.cast(pa.large_binary() if pa.types.is_binary_view(t) else pa.large_string())
    return array


def _to_encoder_column(name: str, array, nulls: str, float64: str = "exact", first_row: int = 0):
    """One Arrow column -> what encode_examples takes: a numpy array for numbers, Ragged /
    BytesColumn for lists and bytes (views of the Arrow buffers). A null row leaves the feature
    out of its record (``nulls="omit"``: Partial) or holds an empty list (``"empty"``).
    ``float64`` and ``first_row`` (the table's row of this chunk's first): see _floats."""
    from .encode import Int64s, Partial

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    array = _plain(array)
    where = _Where(name, float64, first_row)
    if not array.null_count:
        return _encoder_column(where, array)
    if nulls == "empty":
        if pa.types.is_null(array.type):
            raise _no_kind(name)
        return _encoder_column(where, _nulls_as_empty(array))
    present = array.is_valid().to_numpy(zero_copy_only=False)
    if not present.any():  # no record holds it: any kind will do, nothing is written
        return Partial(Int64s(np.zeros(len(array), np.int64)), present)
    return Partial(_encoder_column(where, array), present)


class _Where:
    """A column being encoded: its name, the float64 rule, and the table row of its first."""

    def __init__(self, name: str, float64: str, first_row: int):
        self.name = name
        self.float64 = float64
        self.first_row = first_row


def _no_kind(name: str) -> ValueError:
    return ValueError(
        f"column {name!r} holds only nulls or empty lists of nulls: no Example "
        "kind (int64, float or bytes) to write them as; cast the column to a "
        "typed one"
    )


def _nulls_as_empty(array: pa.Array) -> pa.Array:
    """A large_list column with null rows made empty lists (what Ray's writer does)."""
    if _is_list(array.type):
        lengths = pc.list_value_length(array).fill_null(0).to_numpy()
        values = array.flatten()  # the values of the rows that are not null
    else:
        lengths = array.is_valid().to_numpy(zero_copy_only=False)
        values = array.drop_null()
    offsets = np.zeros(len(array) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeListArray.from_arrays(pa.array(offsets), values)


def _encoder_column(where: "_Where", array: pa.Array):
    from .encode import Bytes, Floats, Int64s
    from .example import BytesColumn, Ragged

    name = where.name
    if not _is_list(array.type):
        flat = _flat_values(where, array, None)
        if isinstance(flat, tuple):
            data, starts, ends = flat
            return Bytes(BytesColumn(data, starts, ends))
        return flat
    values, splits = _list_values(array)
    if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        raise TypeError(
            f"column {name!r}: lists of lists have no Example form (use a "
            "fixed_size_list for a fixed shape)"
        )
    if values.null_count and _nulls_inside(array):  # (null rows' values do not count)
        raise ValueError(f"column {name!r} holds null values inside its lists")
    flat = _flat_values(where, values, splits)
    if isinstance(flat, tuple):
        data, starts, ends = flat
        return BytesColumn(data, starts, ends, splits)
    return (Int64s if flat.dtype == np.int64 else Floats)(Ragged(flat, splits))


def _nulls_inside(array: pa.Array) -> bool:
    """Whether the lists of the rows that are not null hold a null, at any depth."""
    values = array.flatten()  # the values of the rows that are not null
    while not values.null_count:
        if not _is_list(values.type):
            return False
        values = values.flatten()
    return True


def _list_values(array: pa.Array) -> Tuple[pa.Array, np.ndarray]:
    """The values a list column's rows span, and its int64 row splits into them (views; the
    values of null rows are spanned too). Nested fixed_size_lists flatten into their rows."""
    t = array.type
    if pa.types.is_fixed_size_list(t):
        values = array.values.slice(array.offset * t.list_size, len(array) * t.list_size)
        splits = np.arange(len(array) + 1, dtype=np.int64) * t.list_size
    else:
        offsets = array.offsets.to_numpy().astype(np.int64)
        values = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        splits = offsets - offsets[0]
    values = _plain(values)
    while pa.types.is_fixed_size_list(values.type):
        size = values.type.list_size
        values = _plain(values.values.slice(values.offset * size, len(values) * size))
        splits = splits * size
    return values, splits


def _flat_values(where: "_Where", array: pa.Array, splits: Optional[np.ndarray]):
    """Numeric -> an int64 / float32 numpy array (a view where the type already matches);
    binary / string -> (data, starts, ends) views of the Arrow buffers. ``splits``: the row
    splits of a list column's values (to name a row in errors), None for a plain column."""
    name = where.name
    t = array.type
    if (
        pa.types.is_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_large_string(t)
    ):
        wide = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
        _, offsets_buf, data_buf = array.buffers()
        offsets = np.frombuffer(offsets_buf, np.int64 if wide else np.int32)
        offsets = offsets[array.offset : array.offset + len(array) + 1].astype(np.int64)
        data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        return data, offsets[:-1], offsets[1:]
    if array.null_count and not pa.types.is_null(t):  # null rows are left out: any value will do
        array = array.fill_null(0)
    if pa.types.is_boolean(t) or pa.types.is_integer(t):
        values = array.to_numpy(zero_copy_only=False)
        if values.dtype == np.uint64 and len(values) and values.max() > np.iinfo(np.int64).max:
            raise OverflowError(f"column {name!r}: uint64 values beyond int64")
        return values.astype(np.int64, copy=False)
    if pa.types.is_floating(t):
        return _floats(where, array.to_numpy(zero_copy_only=False), splits)
    if pa.types.is_null(t):
        raise _no_kind(name)
    raise TypeError(
        f"column {name!r}: Arrow type {t} has no Example form (numbers, "
        "binary/string, and lists or fixed_size_lists of them)"
    )


FLOAT64 = ("exact", "round")  # what write_table does with float64 values


def _floats(where: "_Where", values: np.ndarray, splits: Optional[np.ndarray]) -> np.ndarray:
    """Values as float32, TFRecord's only float. Narrower floats convert exactly; a float64 value
    that float32 cannot hold exactly is an error naming the column and its row, unless the
    rule is "round" (the nearest float32, as TensorFlow's FloatList does)."""
    with np.errstate(over="ignore"):  # (beyond float32's range: inf, reported below)
        narrowed = values.astype(np.float32, copy=False)
    if values.dtype != np.float64 or where.float64 == "round":
        return narrowed
    lost = narrowed.astype(np.float64) != values
    if lost.any():
        lost &= ~np.isnan(values)  # NaN stays NaN
    if lost.any():
        k = int(np.argmax(lost))
        row = k if splits is None else int(np.searchsorted(splits, k, "right")) - 1
        raise ValueError(
            f"column {where.name!r}: the float64 value {float(values[k])!r} (row "
            f"{where.first_row + row}) has no exact float32 form, and TFRecord floats are "
            "float32: cast the column to float32 first (table.cast, pyarrow.compute.cast) or "
            "pass float64='round' to round every value to the nearest float32"
        )
    return narrowed


def encoded_batches(
    table, *, batch_size: int = 4096, nulls: str = "omit", float64: str = "exact"
) -> Iterator[RecordBatch]:
    """The rows of a ``pyarrow.Table`` / ``RecordBatch`` / ``RecordBatchReader`` encoded as
    tf.train.Examples, as :class:`RecordBatch` es of at most ``batch_size`` records.

    Parameters
    ----------
    table : pyarrow.Table, RecordBatch or RecordBatchReader
        As for :func:`write_table`.
    batch_size : int, default 4096
        Rows encoded at a time.
    nulls : {"omit", "empty"}, default "omit"
        As for :func:`write_table`.
    float64 : {"exact", "round"}, default "exact"
        As for :func:`write_table`.

    Yields
    ------
    RecordBatch
        The encoded Examples, in row order.

    Raises
    ------
    ValueError
        As for :func:`write_table`.
    TypeError
        As for :func:`write_table`.
    OverflowError
        As for :func:`write_table`.
    """
    from .encode import encode_examples

    if nulls not in NULLS:
        raise ValueError(f"nulls must be one of {NULLS}, not {nulls!r}")
    if float64 not in FLOAT64:
        raise ValueError(f"float64 must be one of {FLOAT64}, not {float64!r}")
    if isinstance(table, pa.RecordBatchReader):
        chunks: Iterable[pa.RecordBatch] = table
    elif isinstance(table, pa.RecordBatch):
        chunks = [table]
    elif isinstance(table, pa.Table):
        chunks = table.to_batches(max_chunksize=batch_size)
    else:
        raise TypeError(
            "write_table takes a pyarrow Table, RecordBatch or RecordBatchReader, "
            f"not {type(table).__name__}"
        )
    first = 0
    for chunk in chunks:
        if not chunk.num_rows:
            continue
        columns = {
            name: _to_encoder_column(name, chunk.column(i), nulls, float64, first)
            for i, name in enumerate(chunk.schema.names)
        }
        yield encode_examples(columns, chunk.num_rows)
        first += chunk.num_rows


def write_table(
    table,
    destination,
    *,
    batch_size: int = 4096,
    compression: Optional[str] = None,
    nulls: str = "omit",
    float64: str = "exact",
    storage_options=None,
    filesystem=None,
) -> int:
    """Encodes the rows of a table as tf.train.Examples and writes them to a TFRecord file.

    ``read_table`` reads the result back (list columns as large_list).

    Parameters
    ----------
    table : pyarrow.Table, RecordBatch or RecordBatchReader
        One Example per row, a feature per column. Columns: numbers, binary/string (views and
        dictionaries too), and list / large_list / fixed_size_list of them (nested
        fixed_size_lists and fixed_shape_tensor flatten).
    destination : str, path, TFRecordWriter or ShardedWriter
        A path or URL (a new TFRecord file), or an open writer.
    batch_size : int
        Rows encoded at a time.
    compression : str, optional
        "gzip" or "zlib" for a new file.
    nulls : {"omit", "empty"}
        A null row leaves the feature out of that record ("omit", what ``read_table`` reads
        as null) or writes an empty list of the column's kind ("empty", as Ray's writer does).
    float64 : {"exact", "round"}
        TFRecord floats are float32. "exact": a float64 value float32 cannot hold exactly is a
        ValueError naming the column and the row (cast the column to float32 to round
        knowingly); "round": every value rounds to the nearest float32.
    storage_options
        For a URL destination, as for readers.
    filesystem
        For a URL destination, as for readers.

    Returns
    -------
    int
        The number of records written.

    Raises
    ------
    ValueError
        Nulls inside lists; a column of no kind (only nulls) that would have to be written; a
        float64 value with no exact float32 form (``float64="exact"``).
    TypeError
        A column of a type with no Example form (lists of lists, timestamps, ...).
    OverflowError
        uint64 values beyond int64.
    """
    from .records import TFRecordWriter

    batches = encoded_batches(table, batch_size=batch_size, nulls=nulls, float64=float64)
    owned = None
    if hasattr(destination, "write_batch"):
        writer = destination
    else:
        owned = writer = TFRecordWriter(
            destination, compression, storage_options=storage_options, filesystem=filesystem
        )
    written = 0
    try:
        for batch in batches:
            writer.write_batch(batch)
            written += len(batch)
    except BaseException:
        if owned is not None:
            owned.close()
        raise
    if owned is not None:
        owned.close()
    return written
