"""MultiTFRecordDataset: several streaming datasets mixed by weight."""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from .. import _loader
from ._streaming import _Streaming

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
    batch_size, drop_last, ragged, seed, rank, world_size, compression, verify, shuffle_files, worker_ring, uneven, num_threads, storage_options, filesystem
        As in :class:`TFRecordDataset`.

    Raises
    ------
    ValueError
        Weights that are negative or sum to zero, a pattern index for splits of several files.
    """

    def __init__(self, paths, index=None, splits: Optional[Mapping[str, float]] = None,
                 spec=None, shuffle_buffer: int = 0, transform: Optional[Callable] = None, *,
                 infinite: bool = True, batch_size: Optional[int] = None, drop_last: bool = False,
                 ragged: str = "list", seed: Optional[int] = 0, rank: Optional[int] = None,
                 world_size: Optional[int] = None, compression: Optional[str] = None,
                 verify: bool = True, shuffle_files: Optional[bool] = None,
                 worker_ring: bool = True, uneven: str = "pad",
                 num_threads: Optional[int] = None, storage_options=None, filesystem=None):
        super().__init__()
        if splits is None and isinstance(index, Mapping) and index and all(
                isinstance(v, (int, float)) for v in index.values()):
            index, splits = None, index
        if splits is None:
            if not isinstance(paths, Mapping):
                raise TypeError("MultiTFRecordDataset needs splits={name: weight}")
            splits = {name: 1.0 for name in paths}
        self.splits = {str(k): float(v) for k, v in splits.items()}
        if not self.splits or any(w < 0 for w in self.splits.values()) or not sum(
                self.splits.values()):
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
            self._index_paths[name] = _loader.index_paths(self._locations[name], ix,
                                                          storage_options, filesystem)
        self.infinite = bool(infinite)
        self._setup(spec, shuffle_buffer, transform, batch_size, drop_last, ragged, seed, rank,
                    world_size, compression, verify, shuffle_files, worker_ring, uneven,
                    num_threads)

    def _split_records(self, k, name, slot):
        cycle = 0
        while True:
            got = 0
            for batch in self._segments(self._locations[name], self._index_paths[name], slot, k,
                                        cycle):
                got += len(batch)
                yield from batch
            if not self.infinite or not got:
                return
            cycle += 1

    def _mixed(self, slot, rng):
        names = [n for n, w in self.splits.items() if w > 0]
        streams = [self._split_records(k, n, slot) for k, n in enumerate(names)]
        weights = np.array([self.splits[n] for n in names])
        while streams:
            p = weights / weights.sum()
            for choice in rng.choice(len(streams), size=1024, p=p):
                try:
                    yield next(streams[choice])
                except StopIteration:
                    del streams[choice]
                    weights = np.delete(weights, choice)
                    break

    def __iter__(self):
        slot = self._slot()
        rng = _loader.epoch_rng(slot.seed, self.epoch, slot.position)
        records = self._mixed(slot, _loader.epoch_rng(slot.seed, self.epoch, slot.position, 1))
        if self.shuffle_buffer:
            batches = _loader.shuffle_records(records, self.shuffle_buffer, rng,
                                              self.batch_size or _loader.SHUFFLE_CHUNK)
        else:
            batches = _loader.chunks(records, self.batch_size or _loader.SHUFFLE_CHUNK)
        return self._output(batches, rng, shuffled_already=True)
