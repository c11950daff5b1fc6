"""The Arrow types of a Ray read, and the conversion of each batch of records to them.

Without a schema the rules are Ray's: a feature holding one value (at most one, one somewhere)
is a plain column (int64, float, binary), null where a record has none; any other is a
``list<...>`` column. They are decided once, from a bounded prefix of a sample of the files
(:func:`summarize_batch`), so that every block agrees. A record that later breaks the
sample's rule loses nothing and fails nothing: the column of its block follows Ray's own rule per
record (the value where there is one, the list where there are more, None where there is none),
as a Python-object column, which Ray combines with the plain blocks of that column. A feature the
sample did not show is such a column too.

With Ray's ``tf_schema`` (TensorFlow Metadata's Schema, read field by field: TensorFlow is never
imported) every feature is a list of the schema's type, a feature the schema does not name is
Ray's ValueError, and so is a feature of another type.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
import pyarrow as pa

from .. import _core
from .. import arrow as _arrow
from ..errors import ExampleParseError
from ..example import _decode, _locate
from ..spec import _KIND_DTYPE, VarLen

logger = logging.getLogger(__name__)

_KIND_OF_NAME = {"int64": _core.Kind.INT64, "float32": _core.Kind.FLOAT, "bytes": _core.Kind.BYTES}
_ARROW_TYPE = {"int64": pa.int64(), "float32": pa.float32(), "bytes": pa.binary()}
# TensorFlow Metadata's FeatureType values, and the names Ray's messages give the kinds.
_TFMD_KINDS = {1: "bytes", 2: "int64", 3: "float32"}
_RAY_KIND_NAMES = {"bytes": "bytes", "int64": "int", "float32": "float"}


@dataclass(frozen=True)
class Column:
    """One column of a read without a spec: a feature, its kind, and whether it is scalar."""

    name: str
    kind: str  # "int64", "float32" or "bytes"
    scalar: bool

    @property
    def type(self) -> pa.DataType:
        value = _ARROW_TYPE[self.kind]
        return value if self.scalar else pa.list_(value)


@dataclass(frozen=True)
class TFSchema:
    """What Ray's reader takes from a TensorFlow Metadata Schema: the features' kinds, and the
    schema's text for its messages (the message class itself needs tensorflow_metadata)."""

    kinds: Tuple[Tuple[str, str], ...]
    text: str

    @classmethod
    def of(cls, tf_schema) -> "TFSchema":
        kinds = []
        for feature in getattr(tf_schema, "feature", None) or ():
            kind = _TFMD_KINDS.get(int(feature.type))
            if kind is None:
                raise TypeError(
                    f"tf_schema: feature {feature.name!r} has type {feature.type}; "
                    "an Example feature is BYTES, INT or FLOAT"
                )
            kinds.append((str(feature.name), kind))
        if not kinds and not hasattr(tf_schema, "feature"):
            raise TypeError(
                "tf_schema must be a tensorflow_metadata Schema (its `feature` "
                f"entries give names and types), not {type(tf_schema).__name__}"
            )
        return cls(tuple(kinds), str(tf_schema))


# ---- sampling ------------------------------------------------------------------------------------

# What a file's sample says of a feature: (kind or None if only empty lists of no kind were seen,
# most values in one record, whether some record holds exactly one).
Summary = Dict[str, Tuple[Optional[str], int, bool]]


def summarize_batch(batch, name: str, summary: Summary) -> None:
    """Adds what the records of ``batch`` say of their features to ``summary``."""
    kinds: Dict[str, Optional[str]] = {}
    for raw, code, _ in _core.feature_kinds(batch, name, False, True):
        kinds[raw.decode("utf-8", "surrogateescape")] = None if code is None else _KIND_DTYPE[code]
    typed = {k: VarLen(kind) for k, kind in kinds.items() if kind is not None}
    counts = {}
    if typed:
        for key, raw in zip(typed, _decode(batch, typed, name)):
            counts[key] = np.diff(raw[3])
    for key, kind in kinds.items():
        lengths = counts.get(key)
        most = int(lengths.max()) if lengths is not None and len(lengths) else 0
        one = bool(lengths is not None and (lengths == 1).any())
        old_kind, old_most, old_one = summary.get(key, (None, 0, False))
        summary[key] = (old_kind or kind, max(old_most, most), old_one or one)


def columns_of(summaries: Iterable[Summary]) -> List[Column]:
    """The columns a sample gives, in the order the features were first seen; Ray's rule for
    scalars. A feature whose every list was empty and of no kind reads as float lists."""
    merged: Summary = {}
    for summary in summaries:
        for key, (kind, most, one) in summary.items():
            old_kind, old_most, old_one = merged.get(key, (None, 0, False))
            merged[key] = (old_kind or kind, max(old_most, most), old_one or one)
    return [
        Column(key, kind or "float32", most <= 1 and one)
        for key, (kind, most, one) in merged.items()
    ]


# ---- batches to Arrow ----------------------------------------------------------------------------


class Converter:
    """RecordBatch -> pyarrow.Table for one read: with a spec (tfrec_fast's), the columns of the
    sample, or Ray's tf_schema."""

    def __init__(
        self,
        spec=None,
        columns: Optional[List[Column]] = None,
        tf_schema: Optional[TFSchema] = None,
    ):
        self._tf_schema = tf_schema
        if spec is not None:
            self._plan = _arrow._Plan(spec, None, None, (), "list", False, False)
            self._columns: Optional[List[Column]] = None
        else:
            if tf_schema is not None:
                columns = [Column(name, kind, False) for name, kind in tf_schema.kinds]
            self._columns = list(columns or [])
            spec = {c.name: VarLen(c.kind) for c in self._columns}
            self._plan = _arrow._Plan(spec, None, None, (), "list", True, False)
        self.schema = (
            _arrow.schema_of(self._plan)
            if self._columns is None
            else pa.schema([pa.field(c.name, c.type) for c in self._columns])
        )
        self._widened: set = set()

    def convert(self, batch, name: str, first: int) -> pa.Table:
        """The records of ``batch`` (records ``first``... of file ``name``) as a table."""
        segments = [(name, first, len(batch))]
        if self._columns is None:
            return pa.Table.from_batches([self._plan.convert(batch, segments)])
        kinds = self._kinds(batch, name, segments)
        arrays = self._plan.convert(batch, segments).columns if self._columns else []
        names, out = [], []
        for column, array in zip(self._columns, arrays):
            names.append(column.name)
            out.append(self._column(column, array, name, first))
        extra = {
            k: kind for k, kind in kinds.items() if kind is not None and k not in self._plan.spec
        }
        if extra:  # features the sample did not show: Ray's own rule, per record
            typed = {k: VarLen(kind) for k, kind in extra.items()}
            plan = _arrow._Plan(typed, None, None, (), "list", True, False)
            for key, array in zip(typed, plan.convert(batch, segments).columns):
                self._note(key, name, first, "a feature the sampled records did not hold")
                names.append(key)
                out.append(_ray_rule(array))
        return pa.Table.from_arrays(out, names=names)

    def _kinds(self, batch, name: str, segments) -> Dict[str, Optional[str]]:
        """The features of the batch and their kinds; with a tf_schema, Ray's errors for a
        feature it does not name or names with another kind."""
        try:
            found = _core.feature_kinds(batch, name, False, True)
        except ExampleParseError as error:
            raise _locate(error, segments) from None
        kinds = {
            raw.decode("utf-8", "surrogateescape"): None if kind is None else _KIND_DTYPE[kind]
            for raw, kind, _ in found
        }
        if self._tf_schema is not None:
            wanted = dict(self._tf_schema.kinds)
            for key, kind in kinds.items():
                if key not in wanted:
                    raise ValueError(
                        f"Found extra unexpected feature {key} not in specified "
                        f"schema: {self._tf_schema.text}"
                    )
                if kind is not None and kind != wanted[key]:
                    raise ValueError(
                        "Schema field type mismatch during read: specified type is "
                        f"{_RAY_KIND_NAMES[wanted[key]]}, but underlying type is "
                        f"{_RAY_KIND_NAMES[kind]}"
                    )
        return kinds

    def _column(self, column: Column, array: pa.Array, name: str, first: int) -> pa.Array:
        if not column.scalar:
            return _arrow._narrow(array)
        lengths = np.diff(array.offsets.to_numpy())
        if len(lengths) and lengths.max() > 1:
            record = first + int(np.argmax(lengths > 1))
            self._note(
                column.name,
                name,
                first,
                f"record {record} holds "
                f"{int(lengths.max())} values where every sampled record held one",
            )
            return _ray_rule(array)
        return _arrow._narrow(_scalar_values(array, lengths))

    def _note(self, key: str, name: str, first: int, why: str) -> None:
        """Logged once per feature and read task: a column that follows Ray's per-record rule
        (a Python-object column) from here."""
        if key not in self._widened:
            self._widened.add(key)
            logger.warning(
                "%s: feature %r: %s; its values follow Ray's rule (a value, or a list "
                "where there are more) as Python objects from record %d on. Pass a "
                "spec (tfrec_fast.VarLen) to read it as lists throughout.",
                name,
                key,
                why,
                first,
            )


def _scalar_values(array: pa.Array, lengths: np.ndarray) -> pa.Array:
    """A list column of at most one value per row as a plain column (null where empty)."""
    if not array.null_count and (lengths == 1).all():  # the values themselves: no copy
        return array.values.slice(int(array.offsets[0].as_py()), len(array))
    return _arrow._one_or_null(array)


def _ray_rule(array: pa.Array) -> pa.Array:
    """A list column as Ray's reader gives each record: the value where there is one, a numpy
    array where there are more, None where there is none; a Python-object column."""
    from ray.data.extensions import ArrowPythonObjectArray

    offsets = array.offsets.to_numpy()
    values = array.values.to_numpy(zero_copy_only=False)
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    rows: List[Any] = []
    for i in range(len(array)):
        start, end = int(offsets[i]), int(offsets[i + 1])
        if not valid[i] or end == start:
            rows.append(None)
        elif end - start == 1:
            value = values[start]
            rows.append(value.item() if isinstance(value, np.generic) else value)
        else:
            rows.append(values[start:end].copy())
    return ArrowPythonObjectArray.from_objects(rows)
