"""MultiTFRecordDataset: several streaming datasets mixed by weight."""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from .. import _loader
from . import _mix, _plan, _shuffle, _state, _stream
from ._stream import Place, Progress
from ._streaming import _Pass, _Streaming

__all__ = ["MultiTFRecordDataset"]


class MultiTFRecordDataset(_Streaming):
    """Mixes several datasets, drawing each record from split ``name`` with probability
    ``splits[name] / sum(splits)``.

    With ``infinite=True`` (the default) each split restarts when it ends (with its next
    shuffle) and the stream never ends; otherwise a finished split drops out and the others'
    weights are renormalised. Each split is divided among the job's slots as in
    :class:`TFRecordDataset`; the mixing draws are seeded by (seed, epoch, slot).

    Parameters
    ----------
    paths : str or dict
        A pattern with ``{}`` (formatted with each split name) or a dict {name: path, glob or
        list}; URLs too, with ``storage_options`` / ``filesystem`` as in
        :class:`TFRecordDataset`.
    index : None, str or dict
        A pattern with ``{}`` (one file per split), a dict {name: index}, or None ("auto").
    splits : dict, optional
        {name: weight} (default: weight 1 for each name of a dict of paths).
    spec, shuffle_buffer, transform
        As in :class:`TFRecordDataset`.
    infinite : bool
        Restart each split when it ends (the stream never ends).
    batch_size, drop_last, ragged, seed, rank, world_size, compression, verify, shuffle_files, worker_ring, uneven, num_threads, copy_bytes, storage_options, filesystem
        As in :class:`TFRecordDataset`.

    Raises
    ------
    ValueError
        Weights that are negative or sum to zero, a pattern index for splits of several files.
    """

    def __init__(
        self,
        paths,
        index=None,
        splits: Optional[Mapping[str, float]] = None,
        spec=None,
        shuffle_buffer: int = 0,
        transform: Optional[Callable] = None,
        *,
        infinite: bool = True,
        batch_size: Optional[int] = None,
        drop_last: bool = False,
        ragged: str = "list",
        seed: Optional[int] = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        compression: Optional[str] = None,
        verify: bool = True,
        shuffle_files: Optional[bool] = None,
        worker_ring: bool = True,
        uneven: str = "pad",
        num_threads: Optional[int] = None,
        copy_bytes: bool = True,
        storage_options=None,
        filesystem=None,
    ):
        super().__init__()
        if (
            splits is None
            and isinstance(index, Mapping)
            and index
            and all(isinstance(v, (int, float)) for v in index.values())
        ):
            index, splits = None, index
        if splits is None:
            if not isinstance(paths, Mapping):
                raise TypeError("MultiTFRecordDataset needs splits={name: weight}")
            splits = {name: 1.0 for name in paths}
        self.splits = {str(k): float(v) for k, v in splits.items()}
        if (
            not self.splits
            or any(w < 0 for w in self.splits.values())
            or not sum(self.splits.values())
        ):
            raise ValueError("splits needs non-negative weights with a positive sum")
        self.files: Dict[str, List[str]] = {}
        self._locations: Dict[str, list] = {}
        self._index_paths: Dict[str, list] = {}
        for name in self.splits:
            p = paths.format(name) if isinstance(paths, str) else paths[name]
            self._locations[name] = _loader.expand_locations(p, storage_options, filesystem)
            self.files[name] = [loc.url for loc in self._locations[name]]
            if isinstance(index, str) and index != "auto":
                ix = [index.format(name)] if len(self.files[name]) == 1 else None
                if ix is None:
                    raise ValueError("an index pattern needs one file per split")
            elif isinstance(index, Mapping):
                ix = index.get(name)
            else:
                ix = None
            self._index_paths[name] = _loader.index_paths(
                self._locations[name], ix, storage_options, filesystem
            )
        self.infinite = bool(infinite)
        self._setup(
            spec,
            shuffle_buffer,
            transform,
            batch_size,
            drop_last,
            ragged,
            seed,
            rank,
            world_size,
            compression,
            verify,
            shuffle_files,
            worker_ring,
            uneven,
            num_threads,
            copy_bytes,
        )

    _resumes_elsewhere = False
    _kind = "MultiTFRecordDataset"

    def _fingerprint(self) -> list:
        if self._files_print is None:
            self._files_print = _state.fingerprint(
                [f"{name}:{url}" for name, urls in self.files.items() for url in urls]
            )
        return self._files_print

    def _cycle(self, k: int, name: str, slot, epoch: int, cycle: int):
        """(pieces, index_of) of split ``name``'s share for ``slot`` in one of its cycles."""
        files, index_paths = self._locations[name], self._index_paths[name]
        return (
            self._pieces(files, index_paths, slot, epoch, (), k, cycle),
            self._index_of(files, index_paths),
        )

    def _cycle_length(self, k: int, name: str, slot, epoch: int, cycle: int) -> int:
        pieces, index_of = self._cycle(k, name, slot, epoch, cycle)
        return int(_stream.piece_lengths(pieces, lambda i: index_of(i).count).sum())

    def _split_length(self, k: int, name: str, slot, epoch: int) -> Optional[int]:
        """The records a split's stream holds: None for an endless one."""
        first = self._cycle_length(k, name, slot, epoch, 0)
        return None if self.infinite and first else first

    def _split_place(self, k: int, name: str, slot, epoch: int, number: int) -> tuple:
        """(cycle, place in it) of record ``number`` of split ``name``'s stream."""
        cycle = 0
        while True:
            pieces, index_of = self._cycle(k, name, slot, epoch, cycle)
            count = _stream.piece_lengths(pieces, lambda i: index_of(i).count).sum()  # noqa: B023
            if not self.infinite or number < count:
                return cycle, _stream.place_by_counts(number, pieces, lambda i: index_of(i).count)  # noqa: B023 (called now)
            number -= int(count)
            cycle += 1

    def _split_records(self, k: int, name: str, slot, epoch: int, skip: int = 0):
        """The records of split ``name``'s stream from record number ``skip``: one pass over the
        slot's share (finite), or pass after pass, each with its own file order."""
        cycle, place = self._split_place(k, name, slot, epoch, skip) if skip else (0, None)
        files, index_paths = self._locations[name], self._index_paths[name]
        while True:
            pieces, _ = self._cycle(k, name, slot, epoch, cycle)
            if place is None:
                place = Place(0, 0, pieces[0].start if pieces else 0, None, ())
            got = place.number
            for batch in self._read(files, index_paths, pieces, place, None):
                got += len(batch)
                yield from batch
            if not self.infinite or (cycle == 0 and not got):
                return
            cycle, place = cycle + 1, None

    def _held(self, names, slot, epoch: int, mix, numbers: np.ndarray) -> List[bytes]:
        """The records at mixed numbers ``numbers``, fetched by random access."""
        sources = mix.sources
        within = np.zeros(len(sources), np.int64)  # each mixed record's number in its split
        for k in range(len(names)):
            at = np.flatnonzero(sources == k)
            within[at] = np.arange(len(at))
        out: List[bytes] = [b""] * len(numbers)
        groups: Dict[tuple, list] = {}
        for i, x in enumerate(numbers.tolist()):
            k = int(sources[x])
            cycle, place = self._split_place(k, names[k], slot, epoch, int(within[x]))
            groups.setdefault((k, cycle), []).append((place.number, i))
        for (k, cycle), where in groups.items():
            name = names[k]
            pieces, index_of = self._cycle(k, name, slot, epoch, cycle)
            end = _stream.place_by_counts(1 << 62, pieces, lambda f: index_of(f).count)  # noqa: B023
            got = _stream.fetch(
                self._locations[name],
                np.array([n for n, _ in where]),
                pieces,
                end,
                index_of,
                self.compression,
                self.verify,
            )
            for (_, i), record in zip(where, got):
                out[i] = record
        return out

    def __iter__(self):
        slot, epoch, runs, resumed, number = self._begin()
        names = [n for n, w in self.splits.items() if w > 0]
        weights = [self.splits[n] for n in names]
        size = self.shuffle_buffer
        rng = _plan.shuffle_rng(slot.seed, epoch, slot.position)
        mix_rng = _loader.epoch_rng(slot.seed, epoch, slot.position, 1)
        handed, at, held, mix = 0, None, None, _mix.start(weights)
        if resumed is not None:
            handed = int(resumed["handed_out"])
            if size and handed:
                at = _shuffle.position(size, rng, handed, resumed["length"])
            lengths = [self._split_length(k, n, slot, epoch) for k, n in enumerate(names)]
            mix = _mix.where(weights, lengths, mix_rng, at.cursor if at is not None else handed)
            if at is not None and len(at.held):
                held = self._held(names, slot, epoch, mix, at.held)
        progress = Progress(handed)
        self._pass = _Pass(slot, epoch, number, (), [], progress)
        streams = [
            self._split_records(k, n, slot, epoch, mix.taken[k]) for k, n in enumerate(names)
        ]
        records = _counted(_mix.mixed(streams, mix, mix_rng), progress, len(mix.sources))
        chunk = self.batch_size or _loader.SHUFFLE_CHUNK
        if size:
            batches = _loader.chunks(
                _shuffle.shuffled(map(bytes, records), size, rng, at, held), chunk
            )
        else:
            batches = _loader.chunks(records, chunk)
        return self._output(batches, progress)


def _counted(records, progress: Progress, first: int):
    """The records, setting ``progress.length`` (counted from ``first``) when they end."""
    n = first
    for record in records:
        n += 1
        yield record
    progress.length = n
