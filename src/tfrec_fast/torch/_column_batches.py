"""Batches of exactly ``size`` rows, cut from and joined out of parsed pieces.

A piece is ``(rows, columns)``: the parsed columns of one read (numpy arrays with one row per
record, :class:`~tfrec_fast.columns.Ragged` numbers, or plain lists, one item per record).
Parsing each read as it arrives (cache-sized, still in cache) and batching the parsed columns
keeps large records from being copied into a batch-sized buffer first; whole pieces of the
right size pass through untouched, and cuts of numpy arrays are views.
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, Iterable, Iterator, List, Tuple

import numpy as np

from ..columns import Ragged

Columns = Dict[str, Any]


def rebatch(
    pieces: Iterable[Tuple[int, Columns]], size: int, drop_last: bool = False
) -> Iterator[Tuple[int, Columns]]:
    """(rows, columns) of exactly ``size`` rows each, in order (the last may be short unless
    ``drop_last``)."""
    pending: List[Columns] = []
    count = 0
    for rows, columns in pieces:
        start = 0
        while start < rows:
            take = min(size - count, rows - start)
            pending.append(columns if take == rows else _cut(columns, start, start + take))
            count += take
            start += take
            if count == size:
                yield size, _join(pending)
                pending, count = [], 0
    if count and not drop_last:
        yield count, _join(pending)


def _cut(columns: Columns, a: int, b: int) -> Columns:
    """Rows [a, b) of every column."""
    out: Columns = {}
    for name, col in columns.items():
        if isinstance(col, Ragged):
            out[name] = Ragged(col.values, col.row_splits[a : b + 1])
        else:
            out[name] = col[a:b]
    return out


def _join(parts: List[Columns]) -> Columns:
    """The rows of ``parts``, one after the other (the part itself when there is one)."""
    if len(parts) == 1:
        return parts[0]
    out: Columns = {}
    for name, first in parts[0].items():
        cols = [part[name] for part in parts]
        if isinstance(first, Ragged):
            out[name] = _join_ragged(cols)
        elif isinstance(first, np.ndarray):
            out[name] = np.concatenate(cols)
        else:
            out[name] = list(itertools.chain.from_iterable(cols))
    return out


def _join_ragged(cols: List[Ragged]) -> Ragged:
    values = np.concatenate([c.values[int(c.row_splits[0]) : int(c.row_splits[-1])] for c in cols])
    lengths = np.concatenate([np.diff(c.row_splits) for c in cols])
    splits = np.zeros(len(lengths) + 1, dtype=cols[0].row_splits.dtype)
    np.cumsum(lengths, out=splits[1:])
    return Ragged(values, splits)
