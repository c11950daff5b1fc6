"""Parsed columns -> what the datasets yield: tensors made with ``torch.from_numpy`` (no copy,
each record's tensors view its batch's column), bytes as copies or (``copy_bytes=False``) as
memoryviews of the batch, one dict per record or one per batch."""

from __future__ import annotations

import collections.abc
import itertools
import warnings
from typing import Any, Dict, Iterator, List, Mapping, Optional

import numpy as np
import torch

from .._core import Kind
from ..columns import Ragged
from ..spec import FixedLen, VarLen


def tensor(array: np.ndarray) -> torch.Tensor:
    """torch.from_numpy, sharing memory; read-only views (of file data) are shared as well
    (torch has no read-only tensors: writing into one changes only that batch's buffer)."""
    if array.flags.writeable:
        return torch.from_numpy(array)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


def byte_values(column, views: bool) -> list:
    """A BytesColumn's values: memoryviews of the batch, or bytes (a list per row with
    row_splits). The views are what ``BytesColumn.views()`` gives, sliced from one memoryview
    (a tenth of the cost of a memoryview of the column per value)."""
    if not views:
        return column.to_list()
    starts, ends, splits = column.starts, column.ends, column.row_splits
    first = 0
    if splits is not None:
        first = int(splits[0])
        starts, ends = starts[first : int(splits[-1])], ends[first : int(splits[-1])]
    whole, default = memoryview(column.values), memoryview(column.default)
    values = [whole[a:b] if a >= 0 else default for a, b in zip(starts.tolist(), ends.tolist())]
    if splits is None:
        return values
    bounds = (splits - first).tolist()
    return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def sendable(item, where: str):
    """``item``, after checking that no memoryview is in it (in dicts, lists and tuples): what a
    DataLoader worker yields is pickled, memoryviews do not pickle, and the pickling fails in a
    queue's feeder thread, where the DataLoader never hears of it (it waits for the batch).

    Raises
    ------
    TypeError
        Naming where the memoryview is.
    """
    stack = [(item, where)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, memoryview):
            raise TypeError(
                f"{path} is a memoryview (copy_bytes=False) in a DataLoader worker, and "
                "memoryviews cannot be sent to the training process: turn the views into "
                "bytes or tensors in `transform`, or pass copy_bytes=True"
            )
        if isinstance(value, Mapping):
            stack.extend((v, f"{path}[{k!r}]") for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
    return item


class Record(dict):
    """A record as a plain dict of its values, of a type whose batches torch's default collate
    hands to tfrec_fast.torch's collate (registered in ``default_collate_fn_map``): in a
    DataLoader worker, their tensors then travel through the worker's shared-memory ring instead
    of a new shared-memory segment and a file descriptor each (~1 ms a batch). Datasets with
    ``worker_ring=False`` give plain dicts."""


def rows(columns: Mapping[str, Any], n: int, record=Record, views: bool = False) -> Iterator[dict]:
    """Parsed columns of n records -> n dicts (of type ``record``) of per-record values: tensor
    views, ``bytes`` (memoryviews with ``views``) or lists of them. Each dict is made when it
    is asked for: dicts are what the garbage collector follows, and the fewer of them live at
    once the rarer its full passes (a full pass over a DataLoader worker's heap took ~0.4 s
    per epoch, measured)."""
    per_feature: List[Any] = []
    for col in columns.values():
        if isinstance(col, np.ndarray):
            per_feature.append(tensor(col).unbind(0) if n else ())
        elif isinstance(col, Ragged):
            values = tensor(col.values)
            splits = col.row_splits.tolist()
            per_feature.append([values[a:b] for a, b in zip(splits[:-1], splits[1:])])
        else:
            per_feature.append(byte_values(col, views))
    names = list(columns)
    if not names:
        return (record() for _ in range(n))
    return map(record, map(zip, itertools.repeat(names), zip(*per_feature)))  # (no frame a row)


def batch(columns: Mapping[str, Any], ragged: str, views: bool = False) -> dict:
    """Parsed columns of a batch -> one dict of batched values (bytes: memoryviews with
    ``views``)."""
    out: Dict[str, Any] = {}
    for name, col in columns.items():
        if isinstance(col, np.ndarray):
            out[name] = tensor(col)
        elif isinstance(col, Ragged):
            values = tensor(col.values)
            if ragged == "splits":
                s = col.row_splits
                out[name] = (values[int(s[0]) : int(s[-1])], torch.from_numpy(s - s[0]))
            else:
                splits = col.row_splits.tolist()
                out[name] = [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
        elif isinstance(col, list):  # bytes made into Python objects already (piece_columns)
            out[name] = col
        else:
            out[name] = byte_values(col, views)
    return out


def piece_columns(columns: Mapping[str, Any], views: bool = False) -> Dict[str, Any]:
    """Columns of a read to be cut and joined into batches: bytes made into Python objects now
    (bytes, or memoryviews with ``views``), while the read is in cache."""
    return {
        name: col if isinstance(col, (np.ndarray, Ragged)) else byte_values(col, views)
        for name, col in columns.items()
    }


def arrays_only(spec: Optional[Mapping[str, Any]]) -> bool:
    """Whether every feature of a spec parses into numpy arrays or Ragged numbers (no bytes
    column, nothing typed only from the data)."""
    if not spec:
        return False
    for s in spec.values():
        if isinstance(s, FixedLen) and (s.from_bytes or s.kind != Kind.BYTES):
            continue
        if isinstance(s, VarLen) and s.kind != Kind.BYTES:
            continue
        return False
    return True


class Rows(collections.abc.Sequence):
    """The rows of one batch from its parsed columns, made only when someone looks at them
    (default_collate does); tfrec_fast.torch.collate takes the columns as the batch instead, so
    neither the per-row dicts nor the stacking are paid for."""

    def __init__(self, columns: Mapping[str, np.ndarray], n: int):
        self._columns, self._n = columns, n
        self._rows: Optional[list] = None
        self.batch = {name: tensor(c) for name, c in columns.items()}

    def _made(self) -> list:
        if self._rows is None:
            self._rows = list(rows(self._columns, self._n))
        return self._rows

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        return self._made()[i]

    def __iter__(self):
        return iter(self._made())

    def __eq__(self, other):
        return self._made() == (other._made() if isinstance(other, Rows) else other)

    def __repr__(self):
        return repr(self._made())
