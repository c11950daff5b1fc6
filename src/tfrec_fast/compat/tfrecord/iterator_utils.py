"""The ``tfrecord`` package's iterator utilities (same names, arguments and randomness: numpy's
global generator, so ``np.random.seed`` governs them as there)."""

from __future__ import annotations

import warnings
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

__all__ = ["cycle", "sample_iterators", "shuffle_iterator"]


def cycle(iterator_fn: Callable[[], Iterable[Any]]) -> Iterator[Any]:
    """Repeats the iterables ``iterator_fn()`` makes, one after another, forever."""
    while True:
        yield from iterator_fn()


def sample_iterators(
    iterators: Sequence[Callable[[], Iterable[Any]]], ratios: Sequence[float], infinite: bool = True
) -> Iterator[Any]:
    """Draws each item from iterator k with probability ratios[k] / sum(ratios). ``iterators``
    are functions making the iterables; with ``infinite`` each restarts when it ends, otherwise
    an exhausted one drops out and the others' ratios are renormalised."""
    return sampled(iterators, ratios, infinite, np.random)


def sampled(iterators, ratios, infinite: bool, rng) -> Iterator[Any]:
    """:func:`sample_iterators` drawing from ``rng`` (``np.random`` or a RandomState)."""
    its = [cycle(fn) if infinite else iter(fn()) for fn in iterators]
    p = np.asarray(ratios, dtype=np.float64)
    p = p / p.sum()
    while its:
        choice = rng.choice(len(p), p=p)
        try:
            yield next(its[choice])
        except StopIteration:
            del its[choice]
            p = np.delete(p, choice)
            if len(p):
                p = p / p.sum()


def shuffle_iterator(iterator: Iterator[Any], queue_size: int) -> Iterator[Any]:
    """Shuffles through a buffer of ``queue_size`` items: each new item replaces a random
    buffered one, which is yielded (warns when the iterator holds fewer items than that)."""
    return shuffled(iterator, queue_size, np.random)


def shuffled(iterator: Iterator[Any], queue_size: int, rng) -> Iterator[Any]:
    """:func:`shuffle_iterator` drawing from ``rng`` (``np.random`` or a RandomState)."""
    buffer = []
    for item in iterator:
        buffer.append(item)
        if len(buffer) == queue_size:
            break
    else:
        warnings.warn(
            f"Number of elements in the iterator is less than the queue size (N={queue_size}).",
            stacklevel=2,
        )
    while buffer:
        index = rng.randint(len(buffer))
        try:
            item, buffer[index] = buffer[index], next(iterator)
            yield item
        except StopIteration:
            yield buffer.pop(index)
