"""Hands batches from DataLoader worker processes to the training process through shared memory.

Why: torch sends every tensor a worker yields through a shared-memory segment of its own,
created for it and passed by file descriptor over a socket. That costs about a millisecond per
batch here, more than reading and parsing the batch. So each worker allocates one ring of slots
once and sends it through torch once; later batches travel as ``(slot, layout)`` only, and the
training process rebuilds tensors that view the slot. When the last of those tensors is freed,
the slot is marked free in the ring's header and the worker may fill it again.

A batch is a dict: its dense CPU tensors go through the slot, and so do its lists of ``bytes``
(a bytes feature's values; copied into the slot when the batch is pickled, rebuilt as ``bytes``
in one C call: through torch's pipe they cost more than the tensors). Its other values are
pickled as usual beside ``(slot, layout)``. A batch the ring cannot take goes
torch's usual way, so nothing is ever wrong, only slower: no free slot (a training loop that
keeps many batches), tensors larger than a slot, a tensor that needs its autograd history or
lives elsewhere than in CPU memory, or a batch changed after it was yielded (a collate_fn or a
wrapping dataset). A slot whose batch left any other way than through its own pickling is
never reused.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from .. import _core
from .._platform import process_alive

__all__ = ["RingWriter", "ring_writer"]

ALIGN = 64  # each value starts on a cache line (also any dtype's alignment)
MAX_SLOTS = 8  # > prefetch_factor (2) + batches a training step holds
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


def _bytes_list(value) -> bool:
    """A list of exactly ``bytes`` (checked in C: map and set, not a generator)."""
    return type(value) is list and set(map(type, value)) <= _JUST_BYTES


_JUST_BYTES = {bytes}
_MISSING = object()


def _list_bytes(values: list) -> int:
    """Slot bytes for a list of ``bytes``: its ends (int64), then its bytes back to back."""
    return _round_up(8 * len(values)) + _round_up(sum(map(len, values)))


def _pack_lists(ring: np.ndarray, offset: int, lists, values: dict, others: dict) -> list:
    """Copies each list of ``bytes`` into the room put() kept for it in the slot at ``offset``;
    one changed since so that it no longer fits goes into ``others`` (pickled) instead."""
    packed = []
    for name, at, room in lists:
        items = list(values[name])  # one snapshot: another thread may change the list meanwhile
        n = len(items)
        ends = np.cumsum(np.fromiter(map(len, items), np.int64, n)) if _bytes_list(items) else None
        nbytes = int(ends[-1]) if n and ends is not None else 0
        if ends is None or _round_up(8 * n) + _round_up(nbytes) > room:
            others[name] = items
            continue
        start = offset + at
        ring[start : start + 8 * n].view(np.int64)[:] = ends
        ring[start + _round_up(8 * n) : start + _round_up(8 * n) + nbytes] = np.frombuffer(
            b"".join(items), np.uint8
        )
        packed.append((name, n, at, nbytes))
    return packed


def _unpack_list(owner: np.ndarray, n: int, at: int, nbytes: int) -> list:
    ends = owner[at : at + 8 * n].view(np.int64)
    starts = np.zeros(n, np.int64)
    starts[1:] = ends[:-1]
    data = owner[at + _round_up(8 * n) : at + _round_up(8 * n) + nbytes]
    return _core.bytes_values(data, starts, ends, b"")  # (every range checked)


def _rebuild(
    key,
    ring: Optional[torch.Tensor],
    slot: int,
    offset: int,
    layout,
    size: int,
    names: tuple = (),
    others: Optional[dict] = None,
    lists: tuple = (),
):
    """Runs in the training process when a batch is unpickled: tensors viewing the slot, and
    the batch's lists of bytes (``lists``) and other values (``others``) in their places (the
    key order ``names``)."""
    if ring is not None and key not in _rings:
        _forget_dead_rings()
        _rings[key] = (ring, ring[:_HEADER].numpy())
    ring, header = _rings[key]
    header[_ACK] = 1
    # One array per batch that every tensor of the batch keeps alive (torch.from_numpy holds
    # it): its finalizer runs when the last of them is gone, and frees the slot.
    owner = ring.numpy()[offset : offset + size]
    weakref.finalize(owner, _free_slot, header, slot)
    whole = torch.from_numpy(owner)
    slotted: Dict[str, Any] = {
        name: whole[start : start + nbytes].view(dtype).view(shape)
        for name, dtype, shape, start, nbytes in layout
    }
    for name, n, at, nbytes in lists:
        slotted[name] = _unpack_list(owner, n, at, nbytes)
    if not others and not lists:
        return slotted  # (in the batch's order: its tensors are all it has)
    others = others or {}
    return {name: slotted[name] if name in slotted else others[name] for name in names}


class _RingBatch(dict):
    """A batch in a ring slot: a plain dict of tensors to anything in the worker; pickles small."""

    def _bind(self, args, values, writer, lists=(), sent=None) -> "_RingBatch":
        self._args, self._values, self._writer, self._lists = args, values, writer, lists
        self._generation = writer._generations[args[2]]
        self._sent = [False] if sent is None else sent  # shared with copies: the slot goes once
        return self

    def __copy__(self):
        return _RingBatch(self)._bind(
            self._args, self._values, self._writer, self._lists, self._sent
        )

    def _unchanged(self) -> bool:
        """Every value still the one put() took; an equal list of bytes counts (torch's
        default_convert, for DataLoader(batch_size=None), rebuilds a dict's lists)."""
        if len(self) != len(self._values):
            return False
        for name, value in self._values.items():
            now = self.get(name, _MISSING)
            if now is not value and not (_bytes_list(value) and _bytes_list(now) and now == value):
                return False
        return True

    def __reduce__(self):
        slot = self._args[2]
        if self._sent[0]:  # pickled before (or a copy was): the training process may own the slot
            if self._writer._generations[slot] != self._generation:
                raise RuntimeError(
                    "a DataLoader batch sent through tfrec_fast's worker ring was "
                    "pickled again after its slot was reused: send a batch once"
                )
            return dict, (
                {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in self.items()},
            )
        self._sent[0] = True
        if not self._unchanged():
            return dict, (
                dict(self),
            )  # changed after it was yielded: torch's way; slot stays taken
        if not self._lists:
            return _rebuild, self._args
        # The lists are copied now, not when put: what is sent is what they hold at this moment.
        *head, others = self._args
        others = dict(others)
        packed = _pack_lists(self._writer._bytes, head[3], self._lists, self._values, others)
        return _rebuild, (*head, others, tuple(packed))


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
        self._generations = [0] * slots  # batches put in each slot so far

    @staticmethod
    def _dense(batch) -> bool:
        """A dict holding tensors or lists of bytes, every tensor a plain CPU tensor the slot
        can hold."""
        if type(batch) is not dict:
            return False
        tensors = [v for v in batch.values() if isinstance(v, torch.Tensor)]
        return (bool(tensors) or any(_bytes_list(v) for v in batch.values())) and all(
            v.device.type == "cpu" and v.layout == torch.strided and not v.requires_grad
            for v in tensors
        )

    def _free(self) -> Optional[int]:
        for i in range(self.slots):
            slot = (self._next + i) % self.slots
            if self._header[slot] == 0:
                self._next = slot + 1
                return slot
        return None

    def put(self, batch):
        """``batch`` in a ring slot when it fits and a slot is free, else ``batch`` itself."""
        if not self._dense(batch) or _batch_bytes(batch, lists=False) > self.slot_bytes:
            return batch
        slot = self._free()
        if slot is None:
            return batch
        offset = _HEADER + slot * self.slot_bytes
        layout, lists, values, others, pos = [], [], dict(batch), {}, 0
        for name, value in batch.items():
            if not isinstance(value, torch.Tensor):
                continue
            nbytes = value.nbytes
            view = (
                self.ring[offset + pos : offset + pos + nbytes].view(value.dtype).view(value.shape)
            )
            view.copy_(value)
            layout.append((name, value.dtype, tuple(value.shape), pos, nbytes))
            values[name] = view
            pos += _round_up(nbytes)
        for name, value in batch.items():  # then the lists of bytes, as many as fit
            if isinstance(value, torch.Tensor):
                continue
            room = _list_bytes(value) if _bytes_list(value) else self.slot_bytes + 1
            if pos + room <= self.slot_bytes:
                lists.append((name, pos, room))
                pos += room
            else:
                others[name] = value
        self._header[slot] = 1
        self._generations[slot] += 1
        send_ring = self.ring if self._header[_ACK] == 0 else None
        args = (self._key, send_ring, slot, offset, layout, pos, tuple(values), others)
        return _RingBatch(values)._bind(args, values, self, tuple(lists))


_writer: Optional[RingWriter] = None
_writer_pid = 0


def _batch_bytes(batch, lists: bool = True) -> int:
    """Slot bytes for the batch's tensors (and its lists of bytes)."""
    total = 0
    for value in batch.values():
        if isinstance(value, torch.Tensor):
            total += _round_up(value.nbytes)
        elif lists and _bytes_list(value):
            total += _list_bytes(value)
    return total


def ring_writer(batch) -> Optional[RingWriter]:
    """This worker process's ring for ``batch``: made for the first batch, grown (doubling) for a
    bigger one; None for batches too big to be worth it or that hold nothing it can take."""
    global _writer, _writer_pid
    if _writer_pid != os.getpid():
        _writer, _writer_pid = None, os.getpid()
    if not RingWriter._dense(batch):
        return None
    # With its lists of bytes if a ring can take them, else its tensors alone.
    for need in (_batch_bytes(batch), _batch_bytes(batch, lists=False)):
        if need == 0:
            return None
        if _writer is not None and need <= _writer.slot_bytes:
            return _writer
        slot_bytes = max(_round_up(need), 2 * _writer.slot_bytes if _writer else 0)
        if min(MAX_SLOTS, MAX_RING_BYTES // slot_bytes) >= MIN_SLOTS:
            _writer = RingWriter(slot_bytes, min(MAX_SLOTS, MAX_RING_BYTES // slot_bytes))
            return _writer  # the old ring lives on while its tensors do
    return None
