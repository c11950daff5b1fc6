"""The ``tfrecord`` package's ``TFRecordDataset`` and ``MultiTFRecordDataset``: same arguments,
same values (each record a dict of numpy arrays / ``bytes``, handed to ``transform`` as they are;
tensors come from the DataLoader's collate). Examples are read by tfrec_fast's datasets (CRCs
checked, parsed in C++, split among workers with or without an index); SequenceExamples
(``sequence_description``) by the package-compatible loaders, sharded among workers.

As in the package, each pass shuffles anew: its seed comes from numpy's global generator
(``np.random.seed`` makes the passes reproducible), in DataLoader workers from the DataLoader's
seed, which is new each epoch (persistent workers: counted on with their iterations).

Both resume under torchdata's ``StatefulDataLoader`` as the native datasets do. SequenceExamples
(read by the package-compatible loaders) resume in the layout they were saved in only: a pass
draws its shuffles from a generator of its own, seeded as the package seeds numpy's (so nothing
else drawing from numpy's generator changes them), and a resume reads the pass again up to its
place, skipping what was handed out (these loaders have no saved offsets)."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional

import numpy as np
import torch.utils.data

from ....example import BytesColumn, Ragged
from ....records import TFRecordReader, normalize_compression
from ....torch import MultiTFRecordDataset as _Multi
from ....torch import TFRecordDataset as _Single
from ....torch._state import FORMAT
from ....torch._tensors import Record
from .. import iterator_utils, reader

__all__ = ["TFRecordDataset", "MultiTFRecordDataset"]


def _all_keys(path: str, compression_type) -> list:
    """Every feature name of the file's first record: the package's description=None."""
    from ....example import feature_kinds

    with TFRecordReader(path, normalize_compression(compression_type)) as r:
        batch = r.read_batch(max_records=1)
    return list(feature_kinds(batch, path)) if len(batch) else []


def _numpy_rows(col, n: int) -> list:
    """The package's per-record values of a column: int64/float32 arrays, ``bytes`` for one bytes
    value and an ``|S`` array for several (what its transforms are written for)."""
    if isinstance(col, BytesColumn):
        if col.row_splits is None or bool(np.all(np.diff(col.row_splits) == 1)):
            return col.to_list(flat=True)
        return [r[0] if len(r) == 1 else np.array(r, dtype=bytes) for r in col.to_list()]
    if isinstance(col, Ragged):  # views of the batch's own (fresh, private) column
        values, splits = col.values, col.row_splits
        if (
            n
            and splits[0] == 0
            and splits[-1] % n == 0
            and np.all(np.diff(splits) == splits[-1] // n)
        ):  # every row as long: rows of a 2-D view
            return list(values.reshape(n, splits[-1] // n))
        splits = splits.tolist()
        return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
    return list(col)


def _package_records(columns: Mapping[str, Any], n: int, record=Record) -> Iterator[dict]:
    """n records as the package gives them: dicts of numpy values (tensors come from the
    DataLoader's collate), by default of a type torch's default collate stacks in one numpy
    call."""
    per_feature: List[list] = [_numpy_rows(col, n) for col in columns.values()]
    names = list(columns)
    if not names:
        return (record() for _ in range(n))
    return map(record, map(zip, itertools.repeat(names), zip(*per_feature)))


class _PackageSeeds:
    """Each pass its own seed, as the package's shuffle draws from numpy's global generator;
    and the passes over SequenceExamples, with their states."""

    _sequence_state: Optional[dict] = None  # a loaded state, for the next pass
    _sequence_pass: Optional[dict] = None  # the latest pass's state
    sequence_description: Any
    shuffle_queue_size: Optional[int]
    transform: Optional[Callable]

    def _fresh_seed(self) -> int:
        return int(np.random.randint(np.iinfo(np.int64).max))

    def _sequence_records(self, shard, rng) -> Iterator[Any]:
        raise NotImplementedError

    def _sequence_iter(self) -> Iterator[Any]:
        """A pass over SequenceExamples: seeded from numpy's generator (in a worker seeded by
        the DataLoader, as the package does), shuffled with a generator of its own, counted."""
        shard = _shard()
        loaded, self._sequence_state = self._sequence_state, None
        wid, workers = shard or (0, 1)
        if loaded is not None and (loaded["worker"], loaded["workers"]) != (wid, workers):
            raise ValueError(
                f"a state of worker {loaded['worker']} of {loaded['workers']} cannot resume "
                f"worker {wid} of {workers}: SequenceExamples resume in the layout they were "
                "saved in only"
            )
        seed = int(loaded["seed"]) if loaded else int(np.random.randint(np.iinfo(np.int32).max))
        rng = np.random.RandomState(seed)
        skip = int(loaded["handed_out"]) if loaded else 0
        state = {
            "format": FORMAT,
            "dataset": self._sequence_kind(),
            "seed": seed,
            "worker": wid,
            "workers": workers,
            "handed_out": skip,
        }
        self._sequence_pass = state
        it = self._sequence_records(shard, rng)
        if self.shuffle_queue_size:
            it = iterator_utils.shuffled(it, self.shuffle_queue_size, rng)
        return self._counted(itertools.islice(it, skip, None), state)

    def _counted(self, it, state: dict) -> Iterator[Any]:
        for item in it:
            state["handed_out"] += 1
            yield self.transform(item) if self.transform else item

    def _sequence_kind(self) -> str:
        return f"compat {type(self).__name__} of SequenceExamples"

    def state_dict(self) -> dict:
        if self.sequence_description is None:
            return super().state_dict()  # type: ignore[misc]
        if self._sequence_pass is not None:
            return dict(self._sequence_pass)
        wid, workers = _shard_of_worker()
        return {
            "format": FORMAT,
            "dataset": self._sequence_kind(),
            "seed": None,
            "worker": wid,
            "workers": workers,
            "handed_out": 0,
        }

    def load_state_dict(self, state: dict) -> None:
        if self.sequence_description is None:
            return super().load_state_dict(state)  # type: ignore[misc]
        if (
            not isinstance(state, Mapping)
            or state.get("format") != FORMAT
            or state.get("dataset") != self._sequence_kind()
        ):
            raise ValueError(
                f"not a state of a {self._sequence_kind()} (SequenceExamples "
                "resume in the layout they were saved in only: load the "
                "DataLoader's state with StatefulDataLoader.load_state_dict)"
            )
        self._sequence_state = None if state["seed"] is None else dict(state)


def _shard():
    info = torch.utils.data.get_worker_info()
    if info is None:
        return None
    np.random.seed(info.seed % np.iinfo(np.uint32).max)
    return info.id, info.num_workers


def _shard_of_worker():
    info = torch.utils.data.get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)


class TFRecordDataset(_PackageSeeds, _Single):
    """``TFRecordDataset(data_path, index_path, description=None, shuffle_queue_size=None,
    transform=None, sequence_description=None, compression_type=None)``, as in the package."""

    def __init__(
        self,
        data_path: str,
        index_path: Optional[str],
        description=None,
        shuffle_queue_size: Optional[int] = None,
        transform: Optional[Callable] = None,
        sequence_description=None,
        compression_type: Optional[str] = None,
    ) -> None:
        self.data_path, self.index_path = data_path, index_path
        self.description, self.sequence_description = description, sequence_description
        self.shuffle_queue_size, self.compression_type = shuffle_queue_size, compression_type
        spec = description or _all_keys(data_path, compression_type)
        super().__init__(
            data_path,
            index_path,
            spec=list(spec) if not isinstance(spec, dict) else spec,
            shuffle_buffer=shuffle_queue_size or 0,
            transform=transform,
            compression=compression_type,
            seed=None,
        )

    def _records(self, columns, n, views=False):  # bytes always, as the package gives
        return _package_records(columns, n, Record if self.worker_ring else dict)

    def __iter__(self):
        if self.sequence_description is None:
            return super().__iter__()
        return self._sequence_iter()

    def _sequence_records(self, shard, rng):
        return reader.sequence_loader(
            self.data_path,
            self.index_path,
            self.description,
            self.sequence_description,
            shard,
            self.compression_type,
        )


class MultiTFRecordDataset(_PackageSeeds, _Multi):
    """``MultiTFRecordDataset(data_pattern, index_pattern, splits, description=None,
    shuffle_queue_size=None, transform=None, sequence_description=None, compression_type=None,
    infinite=True)``, as in the package."""

    def __init__(
        self,
        data_pattern: str,
        index_pattern: Optional[str],
        splits: Dict[str, float],
        description=None,
        shuffle_queue_size: Optional[int] = None,
        transform: Optional[Callable] = None,
        sequence_description=None,
        compression_type: Optional[str] = None,
        infinite: bool = True,
    ) -> None:
        self.data_pattern, self.index_pattern = data_pattern, index_pattern
        self.description, self.sequence_description = description, sequence_description
        self.shuffle_queue_size, self.compression_type = shuffle_queue_size, compression_type
        spec = description or _all_keys(data_pattern.format(next(iter(splits))), compression_type)
        super().__init__(
            data_pattern,
            index_pattern,
            splits,
            spec=list(spec) if not isinstance(spec, dict) else spec,
            shuffle_buffer=shuffle_queue_size or 0,
            transform=transform,
            infinite=infinite,
            compression=compression_type,
            seed=None,
        )

    def _records(self, columns, n, views=False):  # bytes always, as the package gives
        return _package_records(columns, n, Record if self.worker_ring else dict)

    def __iter__(self):
        if self.sequence_description is None:
            return super().__iter__()
        return self._sequence_iter()

    def _sequence_records(self, shard, rng):
        return reader.mixed_loader(
            self.data_pattern,
            self.index_pattern,
            self.splits,
            self.description,
            self.sequence_description,
            self.compression_type,
            self.infinite,
            shard,
            rng,
        )
