"""A slot's stream: the records of its pieces one after the other, read from any record number,
with what a saved state needs to find its place again without reading what came before.

The *number* of a record is its place in the slot's stream. While reading, :class:`Progress`
keeps where the recent reads started (piece, record in the file, byte offset: the saved offsets)
and the record count of each piece read to its end, so that :meth:`Progress.place` gives, for a
number not far behind the reading, where to enter the files again: no index is needed to
resume an uncompressed file mid-way. Without that (a state of another rank), places come from
the files' record counts and indexes (:func:`place_by_counts`).
"""

from __future__ import annotations

import collections
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .. import _loader
from ..records import RecordBatch
from ._plan import Piece

FRAMING = 16  # bytes around a record's payload (length, its CRC, the data's CRC)


class Place(NamedTuple):
    """Where record number ``number`` of a stream is: piece ``piece``, record ``record`` of its
    file, at byte ``offset`` (None: unknown, or a compressed file); ``counts``: the records of
    each piece before it."""

    number: int
    piece: int
    record: int
    offset: Optional[int]
    counts: Tuple[int, ...]


class _Read(NamedTuple):
    first: int  # number of the read's first record
    end: int  # number after its last
    piece: int
    record: int  # the first record's index in its file
    offsets: Optional[
        np.ndarray
    ]  # byte offset of each record, and after the last (None: compressed)


class Progress:
    """One pass of a slot over its stream, as far as a saved state needs it.

    ``handed_out`` is counted by whoever hands the records out; the reading side (possibly
    another thread) logs its reads, pruned below ``keep_from()``, and sets ``length`` at the end.
    """

    def __init__(
        self,
        handed_out: int = 0,
        counts: Sequence[int] = (),
        keep_from: Callable[[], int] = lambda: 0,
    ):
        self.handed_out = handed_out
        self.length: Optional[int] = None
        self.counts: List[int] = list(counts)
        self.keep_from = keep_from
        self._reads: collections.deque = collections.deque()

    def read(
        self, first: int, piece: int, record: int, base: Optional[int], batch: RecordBatch
    ) -> None:
        """Logs a read of ``batch`` (numbers from ``first``) entered at byte ``base``."""
        n = len(batch)
        offsets = None
        if base is not None:
            positions = batch.positions
            last = int(batch.offsets[-1] - batch.offsets[-2]) + FRAMING
            offsets = np.append(positions, positions[-1] + last) + base
        self._reads.append(_Read(first, first + n, piece, record, offsets))
        keep = self.keep_from()
        while len(self._reads) > 1 and self._reads[0].end < keep:
            self._reads.popleft()

    def place(self, number: int, n_pieces: int) -> Optional[Place]:
        """Where number ``number`` is, from the reads logged (None: not among them)."""
        if self.length is not None and number >= self.length:
            return Place(number, n_pieces, 0, None, tuple(self.counts))
        for read in tuple(self._reads):  # (a snapshot: the reading thread may append)
            if read.first <= number <= read.end:
                i = number - read.first
                offset = None if read.offsets is None else int(read.offsets[i])
                return Place(
                    number, read.piece, read.record + i, offset, tuple(self.counts[: read.piece])
                )
        return None


def piece_lengths(pieces: Sequence[Piece], count: Callable[[int], int]) -> np.ndarray:
    return np.array(
        [(count(p.file) if p.stop is None else p.stop) - p.start for p in pieces], dtype=np.int64
    )


def place_by_counts(number: int, pieces: Sequence[Piece], count: Callable[[int], int]) -> Place:
    """Where number ``number`` is, from the files' record counts (offsets left to the index)."""
    lengths = piece_lengths(pieces, count)
    ends = np.cumsum(lengths)
    k = int(np.searchsorted(ends, number, side="right"))
    if k >= len(pieces):
        return Place(number, len(pieces), 0, None, tuple(lengths.tolist()))
    before = int(ends[k] - lengths[k])
    return Place(number, k, pieces[k].start + number - before, None, tuple(lengths[:k].tolist()))


def records_at(
    numbers: np.ndarray, pieces: Sequence[Piece], place: Place, count: Callable[[int], int]
) -> Dict[int, List[Tuple[int, int]]]:
    """{file: [(record, i), ...]}: where the records numbered ``numbers[i]`` (all before
    ``place``) are."""
    lengths = (
        list(place.counts) + [place.record - pieces[place.piece].start]
        if place.piece < len(pieces)
        else list(place.counts)
    )
    lengths_arr = np.array(lengths, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths_arr)[:-1]]).astype(np.int64)
    k = np.searchsorted(starts, numbers, side="right") - 1
    out: Dict[int, List[Tuple[int, int]]] = {}
    for i, (kk, number) in enumerate(zip(k.tolist(), numbers.tolist())):
        piece = pieces[kk]
        out.setdefault(piece.file, []).append((piece.start + number - int(starts[kk]), i))
    return out


def fetch(
    files,
    numbers: np.ndarray,
    pieces: Sequence[Piece],
    place: Place,
    index_of: Callable[[int], "_loader.RecordIndex"],
    compression: str,
    verify: bool,
) -> List[bytes]:
    """The records numbered ``numbers`` (before ``place``), as bytes in that order: by random
    access through the files' indexes, or for a compressed file by reading it up to the last."""
    from ..index import IndexedTFRecordReader

    out: List[Optional[bytes]] = [None] * len(numbers)
    wanted = records_at(numbers, pieces, place, lambda f: index_of(f).count)
    for f, where in wanted.items():
        records = np.array([r for r, _ in where], dtype=np.int64)
        index = index_of(f)
        if index.offsets is not None and index.sizes is not None:
            with IndexedTFRecordReader(
                files[f], (index.offsets, index.sizes), verify=verify
            ) as reader:
                batch = reader.get_batch(records)
            got = [bytes(r) for r in batch]
        else:
            found: Dict[int, bytes] = {}
            want = set(records.tolist())
            k = 0
            for batch in _loader.read_range(
                files[f], 0, int(records.max()) + 1, compression=compression, verify=verify
            ):
                for r in batch:
                    if k in want:
                        found[k] = bytes(r)
                    k += 1
            got = [found[r] for r in records.tolist()]
        for (_, i), record in zip(where, got):
            out[i] = record
    return out  # type: ignore[return-value]


def read(
    files,
    pieces: Sequence[Piece],
    place: Place,
    progress: Optional[Progress],
    index_of: Callable[[int], "_loader.RecordIndex"],
    *,
    compression: str,
    verify: bool,
    on_read: Callable[[RecordBatch, int, int], None] = lambda batch, f, record: None,
    **read_options,
) -> Iterator[RecordBatch]:
    """The stream's records from ``place`` on, in RecordBatches (``read_options`` as for
    :func:`tfrec_fast._loader.read_range`), logged in ``progress``; ``on_read(batch, file,
    first record)`` is told of each read."""
    number = place.number
    for k in range(place.piece, len(pieces)):
        piece = pieces[k]
        start = place.record if k == place.piece else piece.start
        at = place.offset if k == place.piece and not compression else None
        offsets = None  # (a compressed file is entered by reading and dropping what is before)
        if not compression and (piece.stop is not None or (start > 0 and at is None)):
            offsets = index_of(piece.file).offsets  # enter at start, fetch nothing past stop
        base: Optional[int] = None
        if not compression:
            base = (
                at
                if at is not None
                else (int(offsets[start]) if offsets is not None and start < len(offsets) else 0)
            )
        record = start
        for batch in _loader.read_range(
            files[piece.file],
            start,
            piece.stop,
            offsets=offsets,
            compression=compression,
            verify=verify,
            at=at,
            **read_options,
        ):
            if not len(batch):
                continue
            if progress is not None:
                progress.read(number, k, record, base, batch)
            on_read(batch, piece.file, record)
            number += len(batch)
            record += len(batch)
            yield batch
        if progress is not None:
            progress.counts.append(record - piece.start)
    if progress is not None:
        progress.length = number
