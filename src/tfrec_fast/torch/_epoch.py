"""The epoch a dataset is in, shared with its copies in DataLoader workers.

A DataLoader worker iterates its own copy of the dataset; with ``persistent_workers=True`` the
copy lives across epochs, so an epoch set on the training process's object would never reach
it. The epoch is kept in a small tensor in shared memory instead, which the copies share (forked
workers inherit it, spawned ones receive it through torch's sharing); a worker reads it when an
iteration starts. The same memory records which DataLoader iteration took up a state loaded for
a new layout (see :meth:`claim`), so that only that iteration resumes from it.
"""

from __future__ import annotations

import torch

_EPOCH, _CLAIMED, _BY = 0, 1, 2


class SharedEpoch:
    """An epoch number (and a claim) visible to every copy of the object made by pickling for,
    or forking, DataLoader workers."""

    def __init__(self, epoch: int = 0):
        self._cell = torch.zeros(3, dtype=torch.int64)
        try:
            self._cell.share_memory_()
        except RuntimeError:  # no shared memory here: copies then keep their own epoch
            pass
        self._cell[_EPOCH] = int(epoch)

    @property
    def epoch(self) -> int:
        return int(self._cell[_EPOCH])

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._cell[_EPOCH] = int(value)

    def unclaim(self) -> None:
        self._cell[_CLAIMED] = 0

    def claim(self, who: int) -> bool:
        """Whether iteration ``who`` (a DataLoader's base seed) may take up the loaded state:
        the first to ask takes it, and only the workers of that iteration are let in after."""
        if int(self._cell[_CLAIMED]) == 0:
            self._cell[_BY] = int(who)
            self._cell[_CLAIMED] = 1
            return True
        return int(self._cell[_BY]) == int(who)
