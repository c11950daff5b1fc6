"""BytesColumn.to_list, made in C++ (_core.bytes_values): what the torch datasets and Arrow call for
every bytes feature, checked against the column's own zero-copy views."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfrec_fast import _core
from tfrec_fast.example import BytesColumn


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=30), st.data())
def test_bytes_column_to_list_matches_its_views(values, data):
    buffer = np.frombuffer(b"".join(values) or b"\0", np.uint8)
    ends = np.cumsum([len(v) for v in values], dtype=np.int64)
    starts = ends - [len(v) for v in values]
    missing = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    starts = np.where(missing, -1, starts)
    want = [b"dflt" if m else v for v, m in zip(values, missing)]
    column = BytesColumn(buffer, starts, ends, None, b"dflt")
    assert column.to_list() == want == [bytes(column[i]) for i in range(len(values))]
    cut = data.draw(st.integers(0, len(values)))
    splits = np.array([0, cut, len(values)], dtype=np.int64)
    rows = BytesColumn(buffer, starts, ends, splits, b"dflt")
    assert rows.to_list() == [want[:cut], want[cut:]]
    assert rows._rows(1, 2).to_list(flat=True) == want[cut:]


def test_bytes_values_checks_every_range():
    buffer = np.frombuffer(b"abcdef", np.uint8)
    for start, end in ((0, 7), (4, 3), (-2, 1)):
        with pytest.raises(IndexError):
            _core.bytes_values(buffer, np.array([start]), np.array([end]), b"")
    with pytest.raises(ValueError):
        _core.bytes_values(buffer, np.array([0, 1]), np.array([1]), b"")
    assert _core.bytes_values(buffer[::2].copy(), np.array([0]), np.array([3]), b"") == [b"ace"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=30), st.data())
def test_copy_owns_just_its_values(values, data):
    """copy(): the same rows in a compact buffer of its own (a default stays a default), for a
    column with or without row_splits and for a window of rows cut from one."""
    padding = data.draw(st.binary(max_size=8))
    buffer = np.frombuffer(padding + b"".join(values) + padding + b"\0", np.uint8)
    ends = len(padding) + np.cumsum([len(v) for v in values], dtype=np.int64)
    starts = ends - [len(v) for v in values]
    missing = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    starts = np.where(missing, -1, starts)
    ends = np.where(missing, -1, ends)
    column = BytesColumn(buffer, starts, ends, None, b"dflt")
    owned = column.copy()
    assert owned.to_list() == column.to_list()
    assert not np.shares_memory(owned.values, buffer)
    assert len(owned.values) == sum(len(v) for v, m in zip(values, missing) if not m)
    assert [bytes(v) for v in owned.views()] == column.to_list()
    cut = data.draw(st.integers(0, len(values)))
    rows = BytesColumn(buffer, starts, ends, np.array([0, cut, len(values)], np.int64), b"dflt")
    window = rows._rows(1, 2)
    assert window.copy().to_list() == window.to_list()
    assert window.copy().row_splits.tolist() == [0, len(values) - cut]
    assert [[bytes(v) for v in row] for row in rows.views()] == rows.to_list()
    assert [bytes(v) for v in rows.views(flat=True)] == rows.to_list(flat=True)


def test_gather_bytes_checks_every_range():
    buffer = np.frombuffer(b"abcdef", np.uint8)
    for start, end in ((0, 7), (4, 3), (-2, 1)):
        with pytest.raises(IndexError):
            _core.gather_bytes(buffer, np.array([start]), np.array([end]))
    with pytest.raises(ValueError):
        _core.gather_bytes(buffer, np.array([0, 1]), np.array([1]))
    values, starts, ends = _core.gather_bytes(buffer, np.array([4, -1, 0]), np.array([6, -1, 2]))
    assert (
        values.tobytes() == b"efab"
        and starts.tolist() == [0, -1, 2]
        and ends.tolist() == [2, -1, 4]
    )
