"""Who reads: the job's (rank, DataLoader worker) slots, from arguments, torch.distributed and the
DataLoader's worker info."""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch
import torch.utils.data


def distributed() -> Optional[tuple]:
    """(rank, world size) of an initialised torch.distributed process group, else None."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


def resolve_rank(rank, world_size) -> Optional[tuple]:
    """(rank, world size) given, or torch.distributed's, or None (decided when iterating)."""
    if rank is None and world_size is None:
        return distributed()
    if rank is None or world_size is None:
        raise ValueError("give both rank and world_size, or neither")
    rank, world_size = int(rank), int(world_size)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} out of range for world_size {world_size}")
    return rank, world_size


def worker() -> tuple:
    """(worker id, workers) of the DataLoader worker this runs in; (0, 1) outside workers."""
    info = torch.utils.data.get_worker_info()
    return (info.id, info.num_workers) if info is not None else (0, 1)


class Slot(NamedTuple):
    """One (rank, worker) pair of a job, and the base seed of its shuffles."""

    rank: int
    world: int
    worker: int
    workers: int
    seed: int

    @property
    def position(self) -> int:  # this (rank, worker) among all of the job's
        return self.rank * self.workers + self.worker

    @property
    def slots(self) -> int:  # (rank, worker) pairs in the job
        return self.world * self.workers
