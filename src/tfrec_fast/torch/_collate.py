"""Collating records into batches, and handing batches from DataLoader workers to the training
process through the worker's shared-memory ring (see _worker_ring)."""

from __future__ import annotations

import operator
from typing import Callable, Optional

import numpy as np
import torch
import torch.utils.data

from ._tensors import Record, Rows


def worker_ring_handoff() -> Optional[Callable]:
    """In a DataLoader worker: puts dict-of-tensor batches into the worker's shared-memory ring
    (see tfrec_fast.torch._worker_ring), far cheaper to send than torch's per-tensor sharing."""
    if torch.utils.data.get_worker_info() is None:
        return None
    from ._worker_ring import ring_writer

    def handoff(batch):
        writer = ring_writer(batch)
        return writer.put(batch) if writer is not None else batch

    return handoff


def collate(samples):
    """A DataLoader ``collate_fn``: ``default_collate``, except that in a worker a batch of dicts
    of tensors is stacked in private memory and handed over through the worker's shared-memory
    ring (as :class:`TFRecordDataset` does with ``batch_size``).

    Use it with per-record datasets (``IndexedTFRecordDataset``, ``TFRecordDataset`` without
    ``batch_size``) and ``num_workers > 0``: the same batches, much cheaper to send. Bytes
    values that are memoryviews (``copy_bytes=False``) are collated as ``bytes`` are, into a
    list (``default_collate`` would take each for a sequence of ints).

    Parameters
    ----------
    samples : list
        The records of one batch (or the lazily made rows of an indexed batch).

    Returns
    -------
    dict or object
        What ``torch.utils.data.default_collate`` makes of ``samples``.
    """
    handoff = worker_ring_handoff()
    if type(samples) is Rows:
        return handoff(samples.batch) if handoff else samples.batch
    if (
        handoff is None
        or not samples
        or not all(
            type(s) is dict
            and s.keys() == samples[0].keys()
            and all(isinstance(v, torch.Tensor) for v in s.values())
            for s in samples
        )
    ):
        return _torch_collate(samples, collate_fn_map=_keeping_views(None))
    return handoff({k: torch.stack([s[k] for s in samples]) for k in samples[0]})


def _collate_records(batch, *, collate_fn_map=None):
    """default_collate of records: a plain dict of the collated values, as for plain dicts.
    Numeric arrays of one shape are stacked in one numpy call (default_collate makes a tensor
    of each first: 60% of a drop-in DataLoader's time); in a worker, tensors are stacked in
    private memory and go through the ring."""
    handoff = worker_ring_handoff()
    fns = _keeping_views(collate_fn_map if handoff is None else _private_stacking(collate_fn_map))
    out = {}
    for key in batch[0]:
        values = [d[key] for d in batch]
        stacked = _stacked_arrays(values)
        out[key] = stacked if stacked is not None else _torch_collate(values, collate_fn_map=fns)
    return handoff(out) if handoff is not None else out


def _stacked_arrays(values: list) -> Optional[torch.Tensor]:
    """What default_collate makes of numeric numpy arrays of one shape and dtype (a tensor of
    them stacked), or None for anything else (left to torch, errors included)."""
    first = values[0]
    if type(first) is not np.ndarray or not first.ndim or first.dtype.kind not in "biuf":
        return None
    shape, dtype = first.shape, first.dtype
    # Every value an array of that shape and dtype, checked in C (map and set: no Python frame
    # per value, which cost as much as the stacking).
    if set(map(type, values)) != _JUST_ARRAYS or set(map(_shape_and_dtype, values)) != {
        (shape, dtype)
    }:
        return None
    return torch.from_numpy(np.concatenate(values)).view((len(values),) + shape)


_JUST_ARRAYS = {np.ndarray}
_shape_and_dtype = operator.attrgetter("shape", "dtype")


def _keeping_views(collate_fn_map):
    """collate_fn_map with memoryviews (bytes values of copy_bytes=False) collated into a list,
    as torch collates bytes."""
    fns = dict(collate_fn_map or default_collate_fn_map)
    fns[memoryview] = _as_list
    return fns


def _as_list(batch, *, collate_fn_map=None):
    return batch


def _private_stacking(collate_fn_map):
    """collate_fn_map with tensors stacked in private memory (default_collate stacks into a new
    shared-memory segment inside a worker: the ring is that segment here)."""
    fns = dict(collate_fn_map or default_collate_fn_map)
    fns[torch.Tensor] = lambda batch, *, collate_fn_map=None: torch.stack(batch, 0)
    return fns


# torch >= 2.0 (the extra's floor) collates by this map: records are collated by our function.
from torch.utils.data._utils.collate import collate as _torch_collate  # noqa: E402
from torch.utils.data._utils.collate import default_collate_fn_map  # noqa: E402

default_collate_fn_map[Record] = _collate_records
