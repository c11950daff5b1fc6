"""A bounded shuffle buffer whose state after any number of items handed out is rebuilt from
that number alone.

Like the ``tfrecord`` package's shuffle_iterator and tf.data's shuffle: the buffer fills with the
first ``size`` items, then each new item replaces a uniformly chosen buffered one, which is
handed out; when the items end, what is left comes out in a random order. The random choices
are drawn from the generator in blocks of :data:`BLOCK`, and only then, so after ``n`` items
handed out the generator has drawn ``ceil(n / BLOCK)`` blocks whatever the items were. Replaying
the draws on item *numbers* instead of items (:func:`position`) says which items are in the
buffer and where the reading continues: a resumed buffer is refilled with those items (read by
random access) and goes on exactly as the uninterrupted one would.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, List, NamedTuple, Optional

import numpy as np

BLOCK = 4096  # choices drawn at a time


class Position(NamedTuple):
    """Where a shuffle stands after handing out some items.

    ``held``: the numbers (positions in the input) of the items in the buffer, by buffer slot;
    while draining, the items still to come, in their order. ``cursor``: the number of items
    read from the input. ``picks``/``used``: the current block of choices and how many of it
    were used. ``draining``: the input ended and the buffer is being emptied.
    """

    held: np.ndarray
    cursor: int
    picks: np.ndarray
    used: int
    draining: bool


def _draw(rng: np.random.Generator, size: int, steps: int) -> np.ndarray:
    """The choices of the first ``steps`` replacements (drawing whole blocks, as the buffer does)."""
    blocks = [rng.integers(0, size, BLOCK) for _ in range(-(-steps // BLOCK))]
    return np.concatenate(blocks) if blocks else np.empty(0, np.int64)


def _buffer_after(size: int, steps: int, choices: np.ndarray) -> np.ndarray:
    """The input numbers in each buffer slot after ``steps`` replacements of a full buffer."""
    last = np.full(size, -1, np.int64)
    if steps:
        np.maximum.at(last, choices[:steps], np.arange(steps, dtype=np.int64))
    return np.where(last >= 0, size + last, np.arange(size, dtype=np.int64))


def position(
    size: int, rng: np.random.Generator, handed_out: int, length: Optional[int] = None
) -> Position:
    """Where a shuffle of ``size`` over an input of ``length`` items (None: not known to have
    ended) stands after ``handed_out`` items. ``rng`` is a fresh generator of the shuffle's seed;
    it is left as the buffer's would be then."""
    if length is not None and handed_out > max(length - size, 0):  # draining
        steps_in_all = max(length - size, 0)
        choices = _draw(rng, size, steps_in_all)
        held = (
            _buffer_after(size, steps_in_all, choices)
            if length >= size
            else np.arange(length, dtype=np.int64)
        )
        order = held[rng.permutation(len(held))]
        return Position(order[handed_out - steps_in_all :], length, np.empty(0, np.int64), 0, True)
    choices = _draw(rng, size, handed_out)
    picks = choices[len(choices) - BLOCK :] if len(choices) else choices
    used = handed_out - (len(choices) - len(picks))
    return Position(_buffer_after(size, handed_out, choices), size + handed_out, picks, used, False)


def handed_out(size: int, rng: np.random.Generator, count: int, length: int) -> tuple:
    """(cursor, held) after ``count`` items handed out of an input of ``length``: the items
    handed out are the input numbers below ``cursor`` that are not ``held``."""
    if count == 0:
        return 0, np.empty(0, np.int64)
    at = position(size, rng, count, length)
    return min(at.cursor, length), at.held


def shuffled(
    items: Iterable[Any],
    size: int,
    rng: np.random.Generator,
    resumed: Optional[Position] = None,
    held: Optional[List[Any]] = None,
) -> Iterator[Any]:
    """The items through a ``size``-item shuffle buffer drawing from ``rng``; resumed at
    ``resumed`` with ``held`` the buffered items (by buffer slot, or in drain order) and
    ``items`` the input from ``resumed.cursor`` on."""
    buf: List[Any] = []
    picks = np.empty(0, np.int64)
    k = 0
    if resumed is not None:
        buf = list(held or [])
        if resumed.draining:
            yield from buf
            return
        picks, k = resumed.picks, resumed.used
    for item in items:
        if len(buf) < size:
            buf.append(item)
            continue
        if k == len(picks):
            picks = rng.integers(0, size, BLOCK)
            k = 0
        j = int(picks[k])
        k += 1
        out = buf[j]
        buf[j] = item
        yield out
    for i in rng.permutation(len(buf)).tolist():
        yield buf[i]


class Tracker:
    """Follows a shuffle's buffer on item numbers, in step with the items handed out, to tell
    the oldest item held (from where a saved state must be able to find the held items again).
    Costs one replayed choice per item handed out; ``rng`` is a fresh generator of the shuffle's
    seed."""

    def __init__(
        self, size: int, rng: np.random.Generator, handed: int = 0, length: Optional[int] = None
    ):
        self._size, self._rng = size, rng
        self._handed = 0
        self._held = np.arange(size, dtype=np.int64)
        self._picks, self._used = np.empty(0, np.int64), 0
        self._drain: Optional[np.ndarray] = None  # the drain order, once the input ended
        if handed:
            at = position(size, rng, handed, length)
            self._handed = handed
            if at.draining:
                self._drain, self._drained_from = at.held, handed
            else:
                self._held, self._picks, self._used = at.held, at.picks, at.used

    def oldest(self, handed: int, length: Optional[int]) -> int:
        """The smallest item number held once ``handed`` items were handed out of an input of
        ``length`` (None: not ended yet); the cursor when nothing is held."""
        if (
            self._drain is None
            and length is not None
            and (handed > length - self._size or length < self._size)
        ):
            self._advance(max(length - self._size, 0))
            held = self._held if length >= self._size else np.arange(length, dtype=np.int64)
            self._drain = held[self._rng.permutation(len(held))]
            self._drained_from = max(length - self._size, 0)
        if self._drain is not None:
            rest = self._drain[handed - self._drained_from :]
            return int(rest.min()) if len(rest) else length or 0
        self._advance(handed)
        return int(self._held.min()) if handed else 0

    def _advance(self, handed: int) -> None:
        while self._handed < handed:
            if self._used == len(self._picks):
                self._picks, self._used = self._rng.integers(0, self._size, BLOCK), 0
            n = min(handed - self._handed, len(self._picks) - self._used)
            numbers = self._size + self._handed + np.arange(n, dtype=np.int64)
            np.maximum.at(self._held, self._picks[self._used : self._used + n], numbers)
            self._used += n
            self._handed += n
