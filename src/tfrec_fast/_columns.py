"""Python values -> the C++ encoder's columns: the value rules of :mod:`tfrec_fast.encode`.

A column, as ``_core.encode_examples`` takes it (see ``_core.pyi``), is a tuple
``(kind, values, offsets, row_splits)``: int64, float32 or float64 values, or bytes values (one buffer
with int64 offsets, or a list of bytes objects), plus int64 row_splits: the shape the decoder
returns (Ragged, BytesColumn). This module decides the kinds and builds those arrays with numpy:
the values of a column are converted by one numpy call, not one per value; bytes values that
are Python bytes objects go as one list of them, which the encoder reads in place (a bytes
object never changes, so it needs no copy).

Every Python container is copied (a list of references) before it is looked at, so another
thread changing it meanwhile cannot make the kinds and the values disagree; the C++ side then
copies what can still change (see py_encode.cc) and checks every bound before it reads a value.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import _core

Kind = _core.Kind
INT64, FLOAT, BYTES, FEATURE = Kind.INT64, Kind.FLOAT, Kind.BYTES, Kind.FEATURE
_NAMES = {INT64: "int64", FLOAT: "float", BYTES: "bytes", FEATURE: "Feature"}
_EXACT = {
    int: INT64,
    bool: INT64,
    float: FLOAT,
    bytes: BYTES,
    str: BYTES,
    bytearray: BYTES,
    memoryview: BYTES,
}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_DTYPES = {INT64: np.int64, FLOAT: np.float32}

Column = Tuple[Any, ...]  # (kind, values, offsets, row_splits[, present])
Values = Tuple[Optional[Kind], Any]  # one row's kind (None: an empty plain list) and values


class Typed:
    """A value (or column) with a forced Feature kind: the base of Int64s, Floats and Bytes."""

    __slots__ = ("values",)
    kind: Kind = INT64

    def __init__(self, values: Any = ()) -> None:
        self.values = values

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.values!r})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.values == other.values

    __hash__ = None  # type: ignore[assignment]


class Partial:
    """A column of N rows that some records lack: record i holds the feature only where
    ``present[i]`` is true (N booleans); elsewhere the row's values are not read. For
    :func:`~tfrec_fast.encode_examples` and the context of
    :func:`~tfrec_fast.encode_sequence_examples`."""

    __slots__ = ("column", "present")

    def __init__(self, column: Any, present: Any) -> None:
        self.column = column
        self.present = present

    def __repr__(self) -> str:
        return f"Partial({self.column!r}, present={self.present!r})"


# ---- errors ------------------------------------------------------------------------------------


def display(key: Any) -> str:
    """A feature name as error messages show it."""
    if isinstance(key, bytes):
        return key.decode("utf-8", "backslashreplace")
    if isinstance(key, str):
        return key
    raise TypeError(f"feature names must be str, not {_type_name(key)}")


def error(exc: type, name: str, row: Optional[int], what: str) -> Exception:
    where = f"feature '{name}'" if row is None else f"feature '{name}', row {row}"
    return exc(f"{where}: {what}")


def _type_name(v: Any) -> str:
    t = type(v)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def items(mapping: Any, what: str) -> List[Tuple[Any, Any]]:
    """The (key, value) pairs of a mapping, copied (nothing changes them while they are read)."""
    if not hasattr(mapping, "items"):
        raise TypeError(
            f"{what} must be a mapping of feature name to value, not {_type_name(mapping)}"
        )
    return list(mapping.items())


# ---- one row's values --------------------------------------------------------------------------


def _scalar_kind(x: Any) -> Optional[Kind]:
    """The kind a scalar holds, or None for what is no scalar we take."""
    kind = _EXACT.get(type(x))
    if kind is not None:
        return kind
    if isinstance(x, int):
        return INT64
    if isinstance(x, float):  # numpy.float64 too
        return FLOAT
    if isinstance(x, (bytes, str, bytearray, memoryview)):  # numpy.bytes_ and numpy.str_ too
        return BYTES
    if isinstance(x, np.generic):
        return {"b": INT64, "i": INT64, "u": INT64, "f": FLOAT}.get(x.dtype.kind)
    return None


def _bytes_of(x: Any, name: str, row: Optional[int]) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, str):
        try:
            return x.encode()
        except UnicodeEncodeError:
            raise error(ValueError, name, row, "str is not encodable as UTF-8") from None
    return bytes(x)  # bytearray, memoryview


def _compatible(have: Kind, want: Kind) -> bool:
    """Values of kind `have` may be stored as `want` (ints as floats, as numpy promotes)."""
    return have is want or (have is INT64 and want is FLOAT)


def values_of(v: Any, forced: Optional[Kind], name: str, row: Optional[int] = None) -> Values:
    """One feature value -> (kind, values): a list of Python numbers or bytes, or a numpy array."""
    if isinstance(v, (list, tuple)):
        return _sequence(v, forced, name, row)
    if isinstance(v, np.ndarray):
        return _array(v, forced, name, row)
    kind = _scalar_kind(v)
    if kind is not None:
        if isinstance(v, np.generic) and not isinstance(v, (float, bytes, str)):
            return _array(np.asarray(v), forced, name, row)
        if forced is not None:
            if not _compatible(kind, forced):
                raise error(
                    TypeError, name, row, f"a {_NAMES[kind]} value cannot be {_NAMES[forced]}"
                )
            kind = forced
        return kind, [_bytes_of(v, name, row) if kind is BYTES else v]
    if isinstance(v, Typed):
        if forced is not None and forced is not v.kind:
            raise error(
                TypeError, name, row, f"conflicting kinds {_NAMES[forced]} and {_NAMES[v.kind]}"
            )
        return values_of(v.values, v.kind, name, row)
    if type(v).__name__ == "Feature" and hasattr(v, "SerializeToString"):
        if forced is not None:
            raise error(
                TypeError, name, row, "a Feature message cannot be wrapped in Int64s/Floats/Bytes"
            )
        serialized = v.SerializeToString()
        if not isinstance(serialized, bytes):
            raise error(TypeError, name, row, "SerializeToString() did not return bytes")
        return FEATURE, [serialized]
    if v is None:
        raise error(
            TypeError, name, row, "None is not a feature value (leave the feature out instead)"
        )
    raise error(
        TypeError,
        name,
        row,
        f"unsupported value of type {_type_name(v)} (use int, float, bytes, str, a list "
        "of one of those, a numpy array, Int64s/Floats/Bytes(...) or a Feature message)",
    )


def _sequence(seq: Sequence, forced: Optional[Kind], name: str, row: Optional[int]) -> Values:
    seq = list(seq)  # one snapshot: the kinds and the values come from the same elements
    if not seq:
        return forced, seq
    types = set(map(type, seq))
    first = types.pop() if len(types) == 1 else type(None)
    kind = _EXACT.get(first)
    if forced is None and kind is not None:  # all of one builtin type
        if kind is BYTES and first is not bytes:
            seq = [_bytes_of(x, name, row) for x in seq]
        return kind, seq
    kinds = [_scalar_kind(x) for x in seq]
    target = forced
    if target is None:
        target = kinds[0] or INT64  # an unsupported element 0 is reported below
        if target is INT64 and FLOAT in kinds:
            target = FLOAT
    for i, k in enumerate(kinds):
        if k is None:
            x = seq[i]
            what = (
                "nested lists are not supported"
                if isinstance(x, (list, tuple, np.ndarray))
                else "unsupported list element"
            )
            raise error(TypeError, name, row, f"{what} (element {i} is {_type_name(x)})")
        if not _compatible(k, target):
            raise error(
                TypeError,
                name,
                row,
                f"mixed kinds in a list: element {i} is {_NAMES[k]}, expected {_NAMES[target]}",
            )
    if target is BYTES:
        return BYTES, [_bytes_of(x, name, row) for x in seq]
    return target, seq


def _array(arr: np.ndarray, forced: Optional[Kind], name: str, row: Optional[int]) -> Values:
    k = arr.dtype.kind
    if k == "O":
        return _sequence(arr.ravel().tolist(), forced, name, row)
    if k == "U":
        if forced not in (None, BYTES):
            raise error(TypeError, name, row, f"a str array cannot be {_NAMES[forced]}")
        return _sequence(arr.ravel().tolist(), BYTES, name, row)
    if forced is BYTES:  # S: one value per element; anything else: its raw bytes as ONE value
        return BYTES, arr.ravel().tolist() if k == "S" else [np.ascontiguousarray(arr).tobytes()]
    if k == "S":
        if forced is not None:
            raise error(TypeError, name, row, f"a bytes array cannot be {_NAMES[forced]}")
        return BYTES, arr.ravel().tolist()
    kind = _numeric_kind(arr, forced, name, row)
    return kind, _numeric(arr, kind, name, row)


def _numeric_kind(arr: np.ndarray, forced: Optional[Kind], name: str, row: Optional[int]) -> Kind:
    k = arr.dtype.kind
    if k not in "biuf":
        raise error(TypeError, name, row, f"unsupported numpy dtype {arr.dtype}")
    kind = FLOAT if k == "f" else INT64
    if forced is not None:
        if not _compatible(kind, forced):
            raise error(
                TypeError,
                name,
                row,
                "a floating array cannot be int64 (cast it first if that is meant)",
            )
        kind = forced
    return kind


def _numeric(arr: np.ndarray, kind: Kind, name: str, row: Optional[int]) -> np.ndarray:
    """A numeric array's values, flattened in C order, as int64 or float32/float64 (`kind`;
    the encoder rounds float64 to float32)."""
    flat = np.ascontiguousarray(arr).reshape(-1)  # a view of `arr` when it already is
    if kind is FLOAT:
        if flat.dtype == np.float32 or flat.dtype == np.float64:
            return flat
        with np.errstate(
            over="ignore"
        ):  # long double: as protobuf, beyond float32's range is +-inf
            return flat.astype(np.float32)
    out = flat.astype(np.int64, copy=False)
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and (out < 0).any():  # wrapped around
        big = int(flat.astype(np.uint64)[out < 0][0])
        raise error(OverflowError, name, row, f"uint64 value {big} out of int64 range")
    return out


# ---- many rows' values, packed ------------------------------------------------------------------


def splits_of(lengths: Iterable[int], n: int) -> np.ndarray:
    out = np.zeros(n + 1, np.int64)
    np.cumsum(np.fromiter(lengths, np.int64, n), out=out[1:])
    return out


def _from_list(
    values: list, kind: Kind, name: str, rows: Optional[Sequence[list]] = None
) -> np.ndarray:
    """Python numbers as int64 or float64 (`kind`; the encoder rounds float64 to float32);
    `rows`: the rows they came from, for errors (None: one value per row)."""
    try:
        return np.array(values, np.int64 if kind is INT64 else np.float64)
    except OverflowError:  # say which value of which row
        rows = [[x] for x in values] if rows is None else rows
        for i, part in enumerate(rows):
            for x in part:
                what = _out_of_range(x, kind)
                if what:
                    raise error(OverflowError, name, i if len(rows) > 1 else None, what) from None
        raise


def _out_of_range(x: Any, kind: Kind) -> Optional[str]:
    if kind is INT64:
        return None if _INT64_MIN <= int(x) <= _INT64_MAX else f"int {int(x)} out of int64 range"
    try:
        float(x)
        return None
    except OverflowError as e:
        return f"{x!r}: {e}"


def pack(kind: Kind, parts: List[Any], name: str) -> Any:
    """The values of rows `parts` (each a list or an array) of one kind, back to back: a numpy
    array of numbers, or a list of bytes objects (read in place by the encoder)."""
    if kind is BYTES or kind is FEATURE:
        return parts[0] if len(parts) == 1 else list(chain.from_iterable(parts))
    if all(type(p) is list for p in parts):
        flat = parts[0] if len(parts) == 1 else list(chain.from_iterable(parts))
        return _from_list(flat, kind, name, parts)
    arrays = [p if isinstance(p, np.ndarray) else _from_list(p, kind, name, [p]) for p in parts]
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.zeros(0, _DTYPES[kind])


# ---- columns ------------------------------------------------------------------------------------


def column_of(name: str, col: Any, forced: Optional[Kind] = None) -> Tuple[int, Column]:
    """A column of N rows (see tfrec_fast.encode) -> (N, column tuple)."""
    if isinstance(col, Typed):
        if forced is not None and forced is not col.kind:
            raise error(TypeError, name, None, "conflicting kind wrappers")
        return column_of(name, col.values, col.kind)
    if isinstance(col, Partial):
        n, column = column_of(name, col.column, forced)
        present = np.ascontiguousarray(col.present).astype(np.bool_, copy=False)
        if present.shape != (n,):
            raise error(
                ValueError,
                name,
                None,
                f"Partial needs one `present` flag per row ({n}), not {present.size}",
            )
        return n, (*column[:4], present)
    if isinstance(col, np.ndarray):
        return _array_column(name, col, forced)
    if isinstance(col, (list, tuple)):
        return _rows_column(name, col, forced)
    if hasattr(col, "starts") and hasattr(col, "ends") and hasattr(col, "values"):
        return _bytes_column(name, col, forced)
    if hasattr(col, "values") and hasattr(col, "row_splits"):
        splits = row_splits_of(col.row_splits, name)
        kind, values = values_of(col.values, forced, name)
        if kind is None:
            raise error(
                ValueError,
                name,
                None,
                "empty values have no kind: wrap the column in tfrec_fast.Int64s/Floats/Bytes",
            )
        if kind is FEATURE:
            raise error(TypeError, name, None, "Ragged values cannot be a Feature message")
        return len(splits) - 1, (kind, pack(kind, [values], name), None, splits)
    raise error(
        TypeError,
        name,
        None,
        f"unsupported column of type {_type_name(col)} (use a numpy array [N, ...], a "
        "list of N row values, a Ragged or a BytesColumn)",
    )


def row_splits_of(splits: Any, name: str) -> np.ndarray:
    out = np.ascontiguousarray(splits, np.int64)
    if out.ndim != 1 or out.size < 1:
        raise error(ValueError, name, None, "row_splits needs N + 1 entries")
    return out


def _fixed_splits(n: int, per_row: int) -> Optional[np.ndarray]:
    return None if per_row == 1 else np.arange(n + 1, dtype=np.int64) * per_row


def _array_column(name: str, arr: np.ndarray, forced: Optional[Kind]) -> Tuple[int, Column]:
    if arr.ndim == 0:
        raise error(ValueError, name, None, "a column needs a first dimension of N rows")
    n, k = arr.shape[0], arr.dtype.kind
    if k == "O" or (k == "U" and forced not in (None, BYTES)):
        return _rows_column(name, list(arr), forced)
    if k == "U":
        try:
            arr = np.char.encode(arr, "utf-8")
        except UnicodeEncodeError:
            raise error(ValueError, name, None, "str is not encodable as UTF-8") from None
        k = "S"
    if forced is BYTES and k != "S":  # each row's raw bytes as one value
        raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        width = raw.size // n if n else 0
        return n, (BYTES, raw, np.arange(n + 1, dtype=np.int64) * width, None)
    per_row = arr.size // n if n else 0
    if k == "S":
        if forced is not None and forced is not BYTES:
            raise error(TypeError, name, None, "a bytes array cannot be numeric")
        flat = np.ascontiguousarray(arr).reshape(-1)
        starts = np.arange(flat.size, dtype=np.int64) * flat.dtype.itemsize
        ends = starts + np.char.str_len(flat)  # numpy strips trailing NULs, as its bytes do
        return n, (BYTES, flat.view(np.uint8), (starts, ends), _fixed_splits(n, per_row))
    kind = _numeric_kind(arr, forced, name, None)
    return n, (kind, _numeric(arr, kind, name, None), None, _fixed_splits(n, per_row))


def _bytes_column(name: str, col: Any, forced: Optional[Kind]) -> Tuple[int, Column]:
    """A BytesColumn (values, starts, ends, optional row_splits and default): zero copy."""
    if forced not in (None, BYTES):
        raise error(TypeError, name, None, "a BytesColumn holds bytes")
    data = col.values
    if isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    starts = np.ascontiguousarray(col.starts, np.int64)
    ends = np.ascontiguousarray(col.ends, np.int64)
    if starts.shape != ends.shape or starts.ndim != 1:
        raise error(ValueError, name, None, "BytesColumn starts and ends differ in length")
    missing = starts == -1  # the decoder's mark for a missing feature's default
    if missing.any():
        size, default = len(memoryview(data).cast("B")), bytes(getattr(col, "default", b""))
        data = bytes(memoryview(data)) + default
        starts, ends = np.where(missing, size, starts), np.where(missing, len(data), ends)
    splits = getattr(col, "row_splits", None)
    if splits is None:
        return len(starts), (BYTES, data, (starts, ends), None)
    splits = row_splits_of(splits, name)
    return len(splits) - 1, (BYTES, data, (starts, ends), splits)


def _rows_column(name: str, rows: Sequence, forced: Optional[Kind]) -> Tuple[int, Column]:
    """A column given as N per-row values."""
    rows = list(rows)  # one snapshot (another thread may change the caller's list)
    n = len(rows)
    types = set(map(type, rows))
    first = types.pop() if len(types) == 1 else type(None)
    kind = _EXACT.get(first)
    if forced is None and kind is not None:  # one scalar of one builtin type per row
        if kind is BYTES:
            if first is not bytes:
                rows = [_bytes_of(r, name, i) for i, r in enumerate(rows)]
            return n, (BYTES, rows, None, None)
        return n, (kind, _from_list(rows, kind, name), None, None)
    parts = [values_of(r, forced, name, i) for i, r in enumerate(rows)]
    kinds = {k for k, _ in parts if k is not None}
    column_kind = forced or next((k for k, _ in parts if k is not None), None)
    if column_kind is None:
        if n:
            raise error(
                ValueError,
                name,
                None,
                "only empty lists, so no kind: wrap the column in tfrec_fast.Int64s/Floats/Bytes",
            )
        column_kind = INT64
    if len(kinds) > 1:
        return n, _mixed_column(name, parts, column_kind)
    lengths = [len(v) for _, v in parts]
    splits = None if all(x == 1 for x in lengths) else splits_of(lengths, n)
    return n, (column_kind, pack(column_kind, [v for _, v in parts], name), None, splits)


def _mixed_column(name: str, parts: List[Values], default_kind: Kind) -> Column:
    """Rows of different kinds: each row becomes its serialized Feature message (the encoder
    writes one kind per column), encoded per kind in one call each."""
    features: List[Any] = [None] * len(parts)
    rows_of_kind: dict = {}
    for i, (kind, _) in enumerate(parts):
        rows_of_kind.setdefault(kind or default_kind, []).append(i)
    for kind, rows in rows_of_kind.items():
        if kind is FEATURE:
            for i in rows:
                if not parts[i][1]:  # an empty plain list among Feature messages
                    raise error(
                        ValueError,
                        name,
                        i,
                        "an empty list has no kind: use "
                        "tfrec_fast.Int64s([]), Floats([]) or Bytes([])",
                    )
                features[i] = parts[i][1][0]
            continue
        sub = [parts[i][1] for i in rows]
        column = (kind, pack(kind, sub, name), None, splits_of(map(len, sub), len(sub)))
        for i, feature in zip(rows, _core.encode_features(name, column).to_list()):
            features[i] = feature
    return (FEATURE, features, None, None)


def one_row(name: str, value: Any) -> Tuple[Kind, Any, Any]:
    """One feature of one Example -> (kind, values, offsets)."""
    kind, values = values_of(value, None, name)
    if kind is None:
        raise error(
            ValueError,
            name,
            None,
            "an empty list has no kind: use tfrec_fast.Int64s([]), Floats([]) or Bytes([])",
        )
    return kind, pack(kind, [values], name), None
