"""Mixing several streams by weight, and where a mix stands after any number of records.

Each record is drawn from stream k with probability weights[k] / sum(weights); the choices come
from the generator in blocks of :data:`BLOCK`. A stream that ends drops out (the rest of the
block is dropped with it) and the others' weights are renormalised. Replaying the choices on the
streams' lengths instead of their records (:func:`where`) says, for a number of records mixed,
which stream each came from, how far each stream was read, and what the mix does next.
"""

from __future__ import annotations

from typing import Any, Iterator, List, NamedTuple, Optional, Sequence

import numpy as np

BLOCK = 1024  # choices drawn at a time


class Mix(NamedTuple):
    """A mix after some records: the streams still in it (by number) and their weights, the
    current block of choices and how many of it were used, the records taken from each stream,
    and for each record mixed the stream it came from."""

    alive: List[int]
    weights: np.ndarray
    choices: np.ndarray
    used: int
    taken: List[int]
    sources: np.ndarray


def where(
    weights: Sequence[float], lengths: Sequence[Optional[int]], rng: np.random.Generator, mixed: int
) -> Mix:
    """The mix of streams of ``lengths`` (None: endless) after ``mixed`` records (at most all
    of them); ``rng`` is a fresh generator of the mix's seed, left as the mix's would be."""
    alive = list(range(len(weights)))
    w = np.asarray(weights, dtype=np.float64)
    taken = [0] * len(weights)
    sources: List[np.ndarray] = []
    produced = 0
    choices, used = np.empty(0, np.int64), 0
    while alive and produced < mixed:
        choices = rng.choice(len(alive), size=BLOCK, p=w / w.sum())
        ids = np.asarray(alive)[choices]
        end = BLOCK  # the first choice of a stream that has ended
        for k in set(ids.tolist()):
            if lengths[k] is not None:
                at = np.flatnonzero(ids == k)
                left = lengths[k] - taken[k]
                if left < len(at):
                    end = min(end, int(at[left]))
        used = min(end, mixed - produced)
        sources.append(ids[:used])
        for k, n in zip(*np.unique(ids[:used], return_counts=True)):
            taken[int(k)] += int(n)
        produced += used
        if produced < mixed and end < BLOCK:  # that stream ended: it drops out with the block
            j = int(choices[end])
            del alive[j]
            w = np.delete(w, j)
            choices, used = np.empty(0, np.int64), 0
    return Mix(
        alive,
        w,
        choices,
        used,
        taken,
        np.concatenate(sources) if sources else np.empty(0, np.int64),
    )


def mixed(streams: List[Iterator[Any]], mix: Mix, rng: np.random.Generator) -> Iterator[Any]:
    """The records of ``streams`` (one per stream number, from where ``mix`` left each) mixed
    as from ``mix`` on, drawing from ``rng``."""
    alive = list(mix.alive)
    weights = mix.weights
    choices: Sequence[int] = mix.choices[mix.used :].tolist()
    while alive:
        for choice in choices:
            try:
                yield next(streams[alive[choice]])
            except StopIteration:
                del alive[choice]
                weights = np.delete(weights, choice)
                break
        if alive:
            choices = rng.choice(len(alive), size=BLOCK, p=weights / weights.sum()).tolist()


def start(weights: Sequence[float]) -> Mix:
    """A mix before its first record."""
    n = len(weights)
    return Mix(
        list(range(n)),
        np.asarray(weights, dtype=np.float64),
        np.empty(0, np.int64),
        0,
        [0] * n,
        np.empty(0, np.int64),
    )
