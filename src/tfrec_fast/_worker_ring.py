"""Hands batches from DataLoader worker processes to the training process through shared memory.

Why: torch sends every tensor a worker yields through a shared-memory segment of its own,
created for it and passed by file descriptor over a socket. That costs about a millisecond per
batch here, more than reading and parsing the batch. So each worker allocates one ring of slots
once and sends it through torch once; later batches travel as ``(slot, layout)`` only, and the
training process rebuilds tensors that view the slot. When the last of those tensors is freed,
the slot is marked free in the ring's header and the worker may fill it again.

A batch is a dict: its dense CPU tensors go through the slot, its other values (lists of
``bytes``, say) are pickled as usual beside ``(slot, layout)``. A batch the ring cannot take goes
torch's usual way, so nothing is ever wrong, only slower: no free slot (a training loop that
keeps many batches), tensors larger than a slot, a tensor that needs its autograd history or
lives elsewhere than in CPU memory, or a batch changed after it was yielded (a collate_fn or a
wrapping dataset). A slot whose batch left any other way than through its own pickling is
never reused.
"""

from __future__ import annotations

import os
import weakref
from typing import Dict, Optional, Tuple

import numpy as np
import torch

from ._platform import process_alive

__all__ = ["RingWriter", "ring_writer"]

ALIGN = 64                 # each value starts on a cache line (also any dtype's alignment)
MAX_SLOTS = 8              # > prefetch_factor (2) + batches a training step holds
MAX_RING_BYTES = 64 << 20  # per worker; with bigger batches the per-tensor cost hardly matters
MIN_SLOTS = 3

# Ring header: one byte per slot (1 = in use), then one byte set by the training process once
# it has registered the ring (until then every batch carries the ring itself).
_ACK = MAX_SLOTS
_HEADER = ALIGN

# Training process: rings by (worker pid, ring id) -> (ring tensor, header array).
_rings: Dict[Tuple[int, int], Tuple[torch.Tensor, np.ndarray]] = {}


def _round_up(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _free_slot(header: np.ndarray, slot: int) -> None:
    header[slot] = 0


def _forget_dead_rings() -> None:
    for key in list(_rings):
        if not process_alive(key[0]):
            del _rings[key]


def _rebuild(key, ring: Optional[torch.Tensor], slot: int, offset: int, layout, size: int,
             names: tuple = (), others: Optional[dict] = None):
    """Runs in the training process when a batch is unpickled: tensors viewing the slot, and
    the batch's other values (``others``) in their places (the key order ``names``)."""
    if ring is not None and key not in _rings:
        _forget_dead_rings()
        _rings[key] = (ring, ring[:_HEADER].numpy())
    ring, header = _rings[key]
    header[_ACK] = 1
    # One array per batch that every tensor of the batch keeps alive (torch.from_numpy holds
    # it): its finalizer runs when the last of them is gone, and frees the slot.
    owner = ring.numpy()[offset:offset + size]
    weakref.finalize(owner, _free_slot, header, slot)
    whole = torch.from_numpy(owner)
    tensors = {name: whole[start:start + nbytes].view(dtype).view(shape)
               for name, dtype, shape, start, nbytes in layout}
    if not others:
        return tensors
    return {name: tensors[name] if name in tensors else others[name] for name in names}


class _RingBatch(dict):
    """A batch in a ring slot: a plain dict of tensors to anything in the worker; pickles small."""

    def _bind(self, args, values) -> "_RingBatch":
        self._args, self._values = args, values
        return self

    def __copy__(self):
        return _RingBatch(self)._bind(self._args, self._values)

    def __reduce__(self):
        unchanged = len(self) == len(self._values) and all(
            self.get(k) is v for k, v in self._values.items())
        if unchanged:
            return _rebuild, self._args
        return dict, (dict(self),)  # changed after it was yielded: torch's way; slot stays taken


class RingWriter:
    """The worker side: copies dict-of-tensor batches into free slots of a shared ring."""

    def __init__(self, slot_bytes: int, slots: int):
        self.slot_bytes = slot_bytes
        self.slots = slots
        self.ring = torch.zeros(_HEADER + slots * slot_bytes, dtype=torch.uint8).share_memory_()
        self._bytes = self.ring.numpy()
        self._header = self._bytes[:_HEADER]
        # A fresh random id: pids are reused, and a stale ring must never be taken for this one.
        self._key = (os.getpid(), int.from_bytes(os.urandom(8), "little"))
        self._next = 0

    @staticmethod
    def _dense(batch) -> bool:
        """A dict holding tensors, every one of them a plain CPU tensor the slot can hold."""
        if type(batch) is not dict:
            return False
        tensors = [v for v in batch.values() if isinstance(v, torch.Tensor)]
        return bool(tensors) and all(
            v.device.type == "cpu" and v.layout == torch.strided and not v.requires_grad
            for v in tensors)

    def _free(self) -> Optional[int]:
        for i in range(self.slots):
            slot = (self._next + i) % self.slots
            if self._header[slot] == 0:
                self._next = slot + 1
                return slot
        return None

    def put(self, batch):
        """``batch`` in a ring slot when it fits and a slot is free, else ``batch`` itself."""
        if not self._dense(batch) or _batch_bytes(batch) > self.slot_bytes:
            return batch
        slot = self._free()
        if slot is None:
            return batch
        offset = _HEADER + slot * self.slot_bytes
        layout, values, others, pos = [], {}, {}, 0
        for name, value in batch.items():
            if not isinstance(value, torch.Tensor):
                values[name] = others[name] = value
                continue
            nbytes = value.nbytes
            view = self.ring[offset + pos:offset + pos + nbytes].view(value.dtype).view(value.shape)
            view.copy_(value)
            layout.append((name, value.dtype, tuple(value.shape), pos, nbytes))
            values[name] = view
            pos += _round_up(nbytes)
        self._header[slot] = 1
        send_ring = self.ring if self._header[_ACK] == 0 else None
        args = (self._key, send_ring, slot, offset, layout, pos, tuple(values), others)
        return _RingBatch(values)._bind(args, values)


_writer: Optional[RingWriter] = None
_writer_pid = 0


def _batch_bytes(batch) -> int:
    return sum(_round_up(v.nbytes) for v in batch.values() if isinstance(v, torch.Tensor))


def ring_writer(batch) -> Optional[RingWriter]:
    """This worker process's ring for ``batch``: made for the first batch, grown (doubling) for a
    bigger one; None for batches too big to be worth it or that hold no tensor it can take."""
    global _writer, _writer_pid
    if _writer_pid != os.getpid():
        _writer, _writer_pid = None, os.getpid()
    if not RingWriter._dense(batch):
        return None
    need = _batch_bytes(batch)
    if _writer is not None and need <= _writer.slot_bytes:
        return _writer
    slot_bytes = max(_round_up(need), 2 * _writer.slot_bytes if _writer else 0)
    slots = min(MAX_SLOTS, MAX_RING_BYTES // max(slot_bytes, 1))
    if slots < MIN_SLOTS:
        return None
    _writer = RingWriter(slot_bytes, slots)  # the old ring lives on while its tensors do
    return _writer
