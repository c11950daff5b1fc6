"""An epoch's order of records and its split among a job's (rank, worker) slots, over any number
of runs (a run: the epoch read by one layout of ranks and workers, until it stopped).

The epoch's *global order* depends on the seed, the epoch and the files only: the files in the
epoch's order (shuffled by (seed, epoch) when files are shuffled), their records one after the
other; a record's *global position* is its place in it. The first run splits it as
:func:`tfrec_fast._loader.plan_slot` / ``plan_ranks`` always have. A run that resumes a stopped
one reads what the stopped run had not handed out (:func:`remaining`), in global order, cut into
equal contiguous ranges among its own slots. What each slot of a stopped run handed out follows
from its number of records handed out alone: the slots' streams and shuffles are reproducible.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Sequence

import numpy as np

from .. import _loader
from . import _shuffle

FILE_ORDER = 0x66696C65  # "file": the word of the file order's seed


class Piece(NamedTuple):
    """Records [start, stop) of file number ``file`` (stop None: to the end)."""

    file: int
    start: int
    stop: Optional[int]


class Run(NamedTuple):
    """A stopped run: its layout and the records each worker of a rank handed out (every rank
    the same)."""

    world: int
    workers: int
    uneven: str
    shuffle_buffer: int
    handed_out: tuple

    def as_list(self) -> list:
        return [self.world, self.workers, self.uneven, self.shuffle_buffer, list(self.handed_out)]

    @classmethod
    def from_list(cls, values) -> "Run":
        world, workers, uneven, shuffle_buffer, handed = values
        return cls(
            int(world),
            int(workers),
            str(uneven),
            int(shuffle_buffer),
            tuple(int(c) for c in handed),
        )


def file_order(n_files: int, shuffle: bool, seed: int, epoch: int, *words: int) -> List[int]:
    """The files' order in an epoch: as given, or shuffled by (seed, epoch, words)."""
    order = list(range(n_files))
    if shuffle:
        _loader.epoch_rng(seed, epoch, FILE_ORDER, *words).shuffle(order)
    return order


def shuffle_rng(seed: int, epoch: int, slot: int, run: int = 0) -> np.random.Generator:
    """The generator of a slot's shuffle buffer in a run of an epoch."""
    words = (seed, epoch, slot) if run == 0 else (seed, epoch, slot, run)
    return _loader.epoch_rng(*words)


def first_run(
    n_files: int,
    order: Sequence[int],
    count: Callable[[int], int],
    rank: int,
    world: int,
    worker: int,
    workers: int,
    uneven: str,
) -> List[Piece]:
    """The pieces slot (rank, worker) reads in a job's first run of an epoch."""
    if world > 1:  # every rank the same number of records: cut by record ranges
        segments = _loader.plan_ranks(order, count, rank, world, worker, workers, uneven)
    else:
        _, segments = _loader.plan_slot(n_files, order, worker, workers, count)
    return [Piece(*s) for s in segments]


class GlobalOrder:
    """The epoch's records in global order: file ``order[k]`` holds positions
    [starts[k], starts[k] + counts[k])."""

    def __init__(self, order: Sequence[int], count: Callable[[int], int]):
        self.order = list(order)
        counts = np.array([count(i) for i in self.order], dtype=np.int64)
        self.total = int(counts.sum())
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._start_of = {f: int(self._starts[k]) for k, f in enumerate(self.order)}
        self._count_of = {f: int(counts[k]) for k, f in enumerate(self.order)}

    def intervals(self, pieces: Sequence[Piece]) -> np.ndarray:
        """The global positions of pieces, as [start, stop) rows in the pieces' order."""
        rows = [
            (
                self._start_of[p.file] + p.start,
                self._start_of[p.file] + (self._count_of[p.file] if p.stop is None else p.stop),
            )
            for p in pieces
        ]
        return np.array(rows, dtype=np.int64).reshape(-1, 2)

    def pieces(self, intervals: np.ndarray) -> List[Piece]:
        """Intervals of global positions, cut at file boundaries, as pieces."""
        out: List[Piece] = []
        for a, b in intervals.tolist():
            while a < b:
                k = int(np.searchsorted(self._starts, a, side="right")) - 1
                end = min(b, int(self._starts[k + 1]))
                base = int(self._starts[k])
                out.append(Piece(self.order[k], a - base, end - base))
                a = end
        return out


def cut(
    base: np.ndarray, rank: int, world: int, worker: int, workers: int, uneven: str
) -> np.ndarray:
    """Slot (rank, worker)'s share of ``base`` (intervals, in order) as plan_ranks cuts a run:
    equal ranges per rank (padded by wrapping to the start, or dropping the last), each cut
    among the rank's workers."""
    total = int((base[:, 1] - base[:, 0]).sum()) if len(base) else 0
    if total == 0:
        return np.empty((0, 2), np.int64)
    per_rank = -(-total // world) if uneven == "pad" else total // world
    first = rank * per_rank
    return slice_of(
        base, first + per_rank * worker // workers, first + per_rank * (worker + 1) // workers
    )


def slice_of(intervals: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The positions at sequence numbers [lo, hi) of the intervals concatenated, wrapping past
    the end, as intervals in sequence order."""
    lengths = intervals[:, 1] - intervals[:, 0]
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    rows = []
    while lo < hi and total:
        lap = lo - lo % total
        a, b = lo - lap, min(hi, lap + total) - lap
        k = int(np.searchsorted(ends, a, side="right"))
        while a < b:
            start_k = int(ends[k] - lengths[k])
            take = min(b, int(ends[k])) - a
            if take > 0:
                g = int(intervals[k, 0]) + a - start_k
                rows.append((g, g + take))
                a += take
            k += 1
        lo = lap + b
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def at_numbers(intervals: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """The global positions at sequence numbers ``numbers`` of the intervals concatenated."""
    lengths = intervals[:, 1] - intervals[:, 0]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    k = np.searchsorted(starts, numbers, side="right") - 1
    return intervals[k, 0] + (numbers - starts[k])


def _covered(events: List[np.ndarray], bounds: np.ndarray) -> np.ndarray:
    """How many times each elementary interval [bounds[i], bounds[i+1]) is covered by the rows
    (start, stop, weight) of ``events``."""
    delta = np.zeros(len(bounds), np.int64)
    for rows in events:
        if len(rows):
            np.add.at(delta, np.searchsorted(bounds, rows[:, 0]), rows[:, 2])
            np.add.at(delta, np.searchsorted(bounds, rows[:, 1]), -rows[:, 2])
    return np.cumsum(delta)[:-1]


def _weighted(intervals: np.ndarray, weight: int) -> np.ndarray:
    rows = np.empty((len(intervals), 3), np.int64)
    rows[:, :2] = intervals
    rows[:, 2] = weight
    return rows


def _points(points: np.ndarray, weight: int) -> np.ndarray:
    return _weighted(
        np.stack([points, points + 1], axis=1) if len(points) else np.empty((0, 2), np.int64),
        weight,
    )


def remaining(
    order: GlobalOrder,
    first: Callable[[int, int, int, int], List[Piece]],
    runs: Sequence[Run],
    seed: int,
    epoch: int,
) -> np.ndarray:
    """What the stopped ``runs`` of an epoch had not handed out, as sorted disjoint intervals of
    global positions: every record some slot would still have read, less every record some slot
    did hand out (a record read twice by padding counts as handed out once either was).

    ``first(rank, world, worker, workers)`` gives a slot's pieces in the first run.
    """
    base: Optional[np.ndarray] = None
    for r, run in enumerate(runs):
        left: List[np.ndarray] = []  # (start, stop, weight) rows
        taken: List[np.ndarray] = []
        for rank in range(run.world):
            for worker in range(run.workers):
                if base is None:
                    stream = order.intervals(first(rank, run.world, worker, run.workers))
                else:
                    stream = cut(base, rank, run.world, worker, run.workers, run.uneven)
                length = int((stream[:, 1] - stream[:, 0]).sum()) if len(stream) else 0
                count = min(run.handed_out[worker], length)
                if run.shuffle_buffer:
                    rng = shuffle_rng(seed, epoch, rank * run.workers + worker, r)
                    cursor, held = _shuffle.handed_out(run.shuffle_buffer, rng, count, length)
                else:
                    cursor, held = count, np.empty(0, np.int64)
                held_at = at_numbers(stream, held) if len(held) else held
                taken += [_weighted(slice_of(stream, 0, cursor), 1), _points(held_at, -1)]
                left += [_weighted(slice_of(stream, cursor, length), 1), _points(held_at, 1)]
        rows = [x for x in left + taken if len(x)]
        if not rows:
            return np.empty((0, 2), np.int64)
        bounds = np.unique(np.concatenate([x[:, :2].ravel() for x in rows]))
        keep = (_covered(left, bounds) > 0) & (_covered(taken, bounds) == 0)
        base = _merged(bounds, keep)
    return base if base is not None else np.array([[0, order.total]], np.int64)


def _merged(bounds: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The elementary intervals kept, neighbours joined."""
    idx = np.flatnonzero(keep)
    if not len(idx):
        return np.empty((0, 2), np.int64)
    starts, stops = bounds[idx], bounds[idx + 1]
    join = starts[1:] == stops[:-1]
    first = np.concatenate([[True], ~join])
    last = np.concatenate([~join, [True]])
    return np.stack([starts[first], stops[last]], axis=1).astype(np.int64)
