"""The columns a parse returns: Ragged rows and BytesColumn, both viewing the batch's buffers."""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from . import _core

__all__ = ["Ragged", "BytesColumn"]


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
        return Ragged(self.values, self.row_splits[a : b + 1])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def row_lengths(self) -> np.ndarray:
        return np.diff(self.row_splits)

    def to_list(self) -> List[list]:
        return [row.tolist() if isinstance(row, np.ndarray) else row.to_list() for row in self]

    def __repr__(self):
        inner = (
            f"values of {self.values.dtype}"
            if isinstance(self.values, np.ndarray)
            else repr(self.values)
        )
        return f"Ragged({len(self)} rows, {len(self.values)} {inner})"


class BytesColumn:
    """Bytes values viewing the records' buffer: value ``j`` is ``values[starts[j]:ends[j]]``.

    With ``row_splits`` (VarLen, or FixedLen of shape (k,)) row ``i`` holds values
    ``row_splits[i]`` to ``row_splits[i + 1]``; otherwise row ``i`` is value ``i``. Indexing gives
    memoryviews (zero copy) and ``to_list()`` gives bytes. A start of -1 marks a missing
    feature's ``default`` (which does not live in ``values``).

    A column parsed from a batch of records views that batch (no copy of its values is made), and
    so keeps the whole batch alive while it lives; :meth:`copy` (or ``copy_bytes=True`` when
    parsing) gives a column that owns just its own values.
    """

    def __init__(
        self,
        values: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        row_splits: Optional[np.ndarray] = None,
        default: bytes = b"",
    ):
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
        return memoryview(self.values)[start : self.ends[j]]

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
        return BytesColumn(
            self.values, self.starts, self.ends, self.row_splits[a : b + 1], self.default
        )

    @property
    def lengths(self) -> np.ndarray:
        return np.where(self.starts < 0, len(self.default), self.ends - self.starts)

    def copy(self) -> "BytesColumn":
        """An owned copy of the column: its rows' values back to back in a buffer of its own.

        Returns
        -------
        BytesColumn
            The same rows (and default), no longer viewing (nor keeping alive) the records'
            batch; its ``values`` hold only this column's bytes.

        Raises
        ------
        IndexError
            If a value's range lies outside ``values``.
        """
        starts, ends, splits = self.starts, self.ends, self.row_splits
        if splits is not None:
            first, last = int(splits[0]), int(splits[-1])
            starts, ends = starts[first:last], ends[first:last]
            splits = np.asarray(splits, np.int64) - first
        values, starts, ends = _core.gather_bytes(
            np.ascontiguousarray(self.values).reshape(-1).view(np.uint8),
            np.ascontiguousarray(starts, np.int64),
            np.ascontiguousarray(ends, np.int64),
        )
        return BytesColumn(values, starts, ends, splits, self.default)

    def views(self, flat: bool = False) -> list:
        """The values as read-only memoryviews of ``values`` (no copy): one per row, or with
        ``row_splits`` a list per row (with ``flat``: the rows' values in one list).

        Parameters
        ----------
        flat : bool
            With ``row_splits``, every row's values in one list.

        Returns
        -------
        list
            memoryviews (a missing feature's default: a view of ``default``).
        """
        if self.row_splits is None:
            return [self._value(j) for j in range(len(self.starts))]
        if flat:
            return [
                self._value(j) for j in range(int(self.row_splits[0]), int(self.row_splits[-1]))
            ]
        return [self[i] for i in range(len(self))]

    def to_list(self, flat: bool = False) -> list:
        """The values as ``bytes``: one per row, or with ``row_splits`` a list per row (with
        ``flat``: the rows' values in one list)."""
        starts, ends = self.starts, self.ends
        if flat and self.row_splits is not None:
            first, last = int(self.row_splits[0]), int(self.row_splits[-1])
            starts, ends = starts[first:last], ends[first:last]
        values = _core.bytes_values(np.ascontiguousarray(self.values), starts, ends, self.default)
        if flat or self.row_splits is None:
            return values
        splits = self.row_splits.tolist()
        return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]

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
