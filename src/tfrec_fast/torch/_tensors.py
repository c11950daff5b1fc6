"""Parsed columns -> what the datasets yield: tensors made with ``torch.from_numpy`` (no copy,
each record's tensors view its batch's column), one dict per record or one per batch."""

from __future__ import annotations

import collections.abc
import itertools
import warnings
from typing import Any, Dict, Iterator, List, Mapping, Optional

import numpy as np
import torch

from .._core import Kind
from ..example import FixedLen, Ragged, VarLen


def tensor(array: np.ndarray) -> torch.Tensor:
    """torch.from_numpy, sharing memory; read-only views (of file data) are shared as well
    (torch has no read-only tensors: writing into one changes only that batch's buffer)."""
    if array.flags.writeable:
        return torch.from_numpy(array)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


class Record(dict):
    """A record as a plain dict of its values, of a type whose batches torch's default collate
    hands to tfrec_fast.torch's collate (registered in ``default_collate_fn_map``): in a
    DataLoader worker, their tensors then travel through the worker's shared-memory ring instead
    of a new shared-memory segment and a file descriptor each (~1 ms a batch). Datasets with
    ``worker_ring=False`` give plain dicts."""


def rows(columns: Mapping[str, Any], n: int, record=Record) -> Iterator[dict]:
    """Parsed columns of n records -> n dicts (of type ``record``) of per-record values: tensor
    views, ``bytes`` or lists of ``bytes``. Each dict is made when it is asked for: dicts are
    what the garbage collector follows, and the fewer of them live at once the rarer its full
    passes (a full pass over a DataLoader worker's heap took ~0.4 s per epoch, measured)."""
    per_feature: List[Any] = []
    for col in columns.values():
        if isinstance(col, np.ndarray):
            per_feature.append(tensor(col).unbind(0) if n else ())
        elif isinstance(col, Ragged):
            values = tensor(col.values)
            splits = col.row_splits.tolist()
            per_feature.append([values[a:b] for a, b in zip(splits[:-1], splits[1:])])
        else:
            per_feature.append(col.to_list())
    names = list(columns)
    if not names:
        return (record() for _ in range(n))
    return map(record, map(zip, itertools.repeat(names), zip(*per_feature)))  # (no frame a row)


def batch(columns: Mapping[str, Any], ragged: str) -> dict:
    """Parsed columns of a batch -> one dict of batched values."""
    out: Dict[str, Any] = {}
    for name, col in columns.items():
        if isinstance(col, np.ndarray):
            out[name] = tensor(col)
        elif isinstance(col, Ragged):
            values = tensor(col.values)
            if ragged == "splits":
                s = col.row_splits
                out[name] = (values[int(s[0]):int(s[-1])], torch.from_numpy(s - s[0]))
            else:
                splits = col.row_splits.tolist()
                out[name] = [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
        elif isinstance(col, list):  # bytes made into Python objects already (piece_columns)
            out[name] = col
        else:
            out[name] = col.to_list()
    return out


def piece_columns(columns: Mapping[str, Any]) -> Dict[str, Any]:
    """Columns of a read to be cut and joined into batches: bytes made into Python objects now,
    while the read is in cache."""
    return {name: col if isinstance(col, (np.ndarray, Ragged)) else col.to_list()
            for name, col in columns.items()}


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
