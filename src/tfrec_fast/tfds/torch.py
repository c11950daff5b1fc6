"""PyTorch datasets over a TFDS split (needs torch).

    from torch.utils.data import DataLoader
    from tfrec_fast.tfds.torch import SplitDataset, StepsDataset
    ds = SplitDataset(tfrec_fast.tfds.open(path, decode_images=True)["train"])
    loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=4)

- :class:`SplitDataset`: map-style, item ``i`` the split's example ``i`` (numpy values, as
  tfds.as_numpy gives them), passed through ``transform``; a DataLoader batch is read with one
  ``Split.get_batch`` (``__getitems__``): one indexed read and one parse per shard. Works with
  any sampler (RandomSampler: an exact shuffle; DistributedSampler).
- :class:`StepsDataset`: iterable, the steps of RLDS episodes (a split whose examples hold a
  nested ``tfds.features.Dataset``), one at a time or in windows of ``window`` consecutive
  steps of one episode; DataLoader workers and distributed ranks split the episodes.

torch's default collate turns numbers and arrays into tensors; :func:`collate` does too, and
also takes what it refuses (arrays of bytes, arrays of different shapes, Ragged values: lists).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch.utils.data

from .dataset import Split
from .decoder import take_rows
from .features import Dataset as DatasetFeature, FeaturesDict

__all__ = ["SplitDataset", "StepsDataset", "collate"]


class SplitDataset(torch.utils.data.Dataset):
    """Example ``i`` of a :class:`~tfrec_fast.tfds.Split` (TFDS's order), transformed."""

    def __init__(self, split: Split, transform: Optional[Callable[[Any], Any]] = None):
        if not isinstance(split, Split):
            raise TypeError(f"SplitDataset takes a tfrec_fast.tfds Split, not "
                            f"{type(split).__name__}")
        self.split = split
        self.transform = transform

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> Any:
        return self.__getitems__([i])[0]

    def __getitems__(self, indices: Sequence[int]) -> List[Any]:
        examples = self.split.get_batch(indices)
        if self.transform is not None:
            examples = [self.transform(example) for example in examples]
        return examples

    def __repr__(self) -> str:
        return f"SplitDataset({self.split!r})"


# ---- steps ------------------------------------------------------------------------------------

EPISODE_INDEX, STEP_INDEX = "episode_index", "step_index"


def _steps_feature(split: Split, steps: Optional[str]) -> str:
    """The name of the episodes' steps: ``steps``, or the one top-level Dataset feature."""
    features = split.info.features
    if not isinstance(features, FeaturesDict):
        raise TypeError("StepsDataset reads episodes: examples that are dicts holding a nested "
                        "Dataset of steps")
    datasets = [k for k, f in features.items() if isinstance(f, DatasetFeature)]
    if steps is None:
        if len(datasets) != 1:
            raise ValueError(f"{split.info.name} has {len(datasets)} top-level Dataset features "
                             f"({datasets}): name the steps with steps=")
        return datasets[0]
    if steps not in datasets:
        raise ValueError(f"{steps!r} is not a top-level Dataset feature of {split.info.name} "
                         f"(those are {datasets})")
    return steps


def _length(columns: Any) -> int:
    """The number of steps of an episode's steps in columns."""
    if isinstance(columns, dict):
        for value in columns.values():
            return _length(value)
        return 0
    return len(columns)


def _distributed() -> Optional[tuple]:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


class StepsDataset(torch.utils.data.IterableDataset):
    """The steps of a split's episodes (RLDS), for training on steps.

    Each item is a dict: the episode's features other than its steps as they are (e.g.
    ``episode_metadata``), ``episode_index`` (the episode's index in the split, TFDS's order),
    ``step_index`` (the step's index in its episode; a window's first step) and, under the
    steps' name, one step (a dict, as the episode's list of steps holds it) or, with
    ``window=n``, ``n`` consecutive steps of one episode stacked over time (a dict of arrays with
    a leading dimension ``n``; ragged values as :class:`~tfrec_fast.Ragged`). Windows never cross
    episodes: an episode of ``T`` steps gives the windows starting at 0, ``stride``, ... up to
    ``T - n``, none when it is shorter than ``n``. Batch items with
    ``DataLoader(..., collate_fn=tfrec_fast.tfds.torch.collate)`` (torch's default collate
    refuses bytes arrays and Ragged values).

    The episodes are split between distributed ranks (``rank``/``world_size``, or
    torch.distributed's) and then between DataLoader workers: each reads its own episodes (by
    random access, a few at a time), so every step is read once per epoch. Every rank gets as
    many episodes (``uneven="pad"``: a few are read twice, on the ranks that have one fewer;
    ``"drop"``: the last few are left out), but episodes differ in length, so ranks may take
    different numbers of steps: for torch's DistributedDataParallel, train for a fixed number of
    steps with ``repeat=True`` (or use torch's Join).

    Parameters
    ----------
    split : Split
        Episodes, e.g. ``tfrec_fast.tfds.open(path, decode_images=True)["train"]`` (opened with
        either ``nested`` form).
    steps : str, optional
        The name of the steps feature (default: the one top-level nested Dataset).
    window : int, optional
        Items of ``window`` consecutive steps (default: one step per item).
    stride : int
        Between the first steps of consecutive windows.
    shuffle_episodes : bool, optional
        A new order of the episodes each epoch (default: when ``shuffle_buffer`` is set).
    shuffle_buffer : int
        Items shuffled through a buffer of this size (0: in order).
    seed : int, optional
        Seed of the shuffles (with ``set_epoch``); required with several ranks and shuffling.
        None: a new seed each epoch (DataLoader's).
    rank, world_size : int, optional
        This process's share (default: torch.distributed's when initialized, else all).
    uneven : {"pad", "drop"}
        With several ranks and a number of episodes they do not divide.
    repeat : bool
        Epoch after epoch without end (each with a new shuffle).
    read_episodes : int
        Episodes read (and decoded) at a time.
    transform : callable, optional
        Applied to each item.

    Raises
    ------
    ValueError
        ``steps`` names no nested Dataset, the episodes already hold ``episode_index`` or
        ``step_index``, or a parameter is out of range.
    """

    def __init__(self, split: Split, *, steps: Optional[str] = None,
                 window: Optional[int] = None, stride: int = 1,
                 shuffle_episodes: Optional[bool] = None, shuffle_buffer: int = 0,
                 seed: Optional[int] = None, rank: Optional[int] = None,
                 world_size: Optional[int] = None, uneven: str = "pad", repeat: bool = False,
                 read_episodes: int = 4, transform: Optional[Callable[[Any], Any]] = None):
        if not isinstance(split, Split):
            raise TypeError(f"StepsDataset takes a tfrec_fast.tfds Split, not "
                            f"{type(split).__name__}")
        if split._supervised is not None:
            raise ValueError("StepsDataset reads whole episodes: open the split without "
                             "as_supervised")
        self.steps = _steps_feature(split, steps)
        features: Any = split.info.features
        clash = {EPISODE_INDEX, STEP_INDEX} & set(features)
        if clash:
            raise ValueError(f"the episodes already have features {sorted(clash)}: rename "
                             "them with transform= on a SplitDataset instead")
        if window is not None and int(window) < 1:
            raise ValueError(f"window must be positive, not {window}")
        if int(stride) < 1 or int(read_episodes) < 1 or int(shuffle_buffer) < 0:
            raise ValueError("stride and read_episodes must be positive, shuffle_buffer >= 0")
        if uneven not in ("pad", "drop"):
            raise ValueError(f"uneven must be 'pad' or 'drop', not {uneven!r}")
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if world_size is not None and not 0 <= int(rank or 0) < int(world_size):
            raise ValueError(f"rank {rank} out of range for world_size {world_size}")
        self.window = None if window is None else int(window)
        self.stride = int(stride)
        self.shuffle_buffer = int(shuffle_buffer)
        self.shuffle_episodes = (self.shuffle_buffer > 0 if shuffle_episodes is None
                                 else bool(shuffle_episodes))
        self.seed = seed
        self.uneven = uneven
        self.repeat = bool(repeat)
        self.read_episodes = int(read_episodes)
        self.transform = transform
        self.epoch = 0
        self._rank = None if rank is None else (int(rank), int(world_size or 1))
        # One step per item: steps as lists; windows: stacked columns, sliced.
        self.split = split.with_nested("steps" if self.window is None else "columns")

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch: shuffles are a function of (seed, epoch). Call it before each epoch
        (as with DistributedSampler); with ``persistent_workers=True`` the workers keep the
        epoch they started with."""
        self.epoch = int(epoch)

    def __getstate__(self):  # pin the rank while the main process's group is visible
        state = self.__dict__.copy()
        if state["_rank"] is None:
            state["_rank"] = _distributed()
        return state

    def _who(self):
        rank, world = self._rank or _distributed() or (0, 1)
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.seed is not None:
            seed = int(self.seed)
        elif world > 1 and self.shuffle_episodes:
            raise ValueError("with several ranks, shuffle_episodes needs seed=: every rank "
                             "must shuffle the episodes alike")
        elif info is not None:
            seed = info.seed - info.id  # DataLoader's base seed: new each epoch, same per worker
        else:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        return rank, world, worker, workers, seed

    def episodes(self, epoch: Optional[int] = None) -> np.ndarray:
        """The indices of the episodes this process (rank and DataLoader worker) reads in
        ``epoch`` (default: the current one), in its order."""
        rank, world, worker, workers, seed = self._who()
        return self._mine(rank, world, worker, workers, seed, self.epoch if epoch is None
                          else int(epoch))

    def _mine(self, rank, world, worker, workers, seed, epoch) -> np.ndarray:
        n = len(self.split)
        order = np.arange(n, dtype=np.int64)
        if self.shuffle_episodes:
            order = np.random.default_rng([seed & 0xFFFFFFFF, epoch, 0x65706973]).permutation(n)
        if world > 1:
            per = -(-n // world) if self.uneven == "pad" else n // world
            if n and per * world > n:
                order = np.resize(order, per * world)  # pad: wraps around
            order = order[rank * per:(rank + 1) * per]
        bounds = np.linspace(0, len(order), workers + 1).astype(np.int64)
        return order[bounds[worker]:bounds[worker + 1]]

    def __iter__(self) -> Iterator[Any]:
        rank, world, worker, workers, seed = self._who()
        epoch = self.epoch
        while True:
            items = self._items(self._mine(rank, world, worker, workers, seed, epoch))
            if self.shuffle_buffer:
                rng = np.random.default_rng([seed & 0xFFFFFFFF, epoch, rank, worker, 0x62756666])
                items = _shuffled(items, self.shuffle_buffer, rng)
            for item in items:
                yield item if self.transform is None else self.transform(item)
            if not self.repeat:
                return
            epoch += 1

    def _items(self, episodes: np.ndarray) -> Iterator[Dict[str, Any]]:
        for a in range(0, len(episodes), self.read_episodes):
            chunk = episodes[a:a + self.read_episodes]
            indices = chunk.tolist()
            for index, episode in zip(indices, self.split.get_batch(indices)):
                yield from self._episode_items(index, episode)

    def _episode_items(self, index: int, episode: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        steps = episode[self.steps]
        context = {k: v for k, v in episode.items() if k != self.steps}
        if self.window is None:
            for t, step in enumerate(steps):
                yield {**context, EPISODE_INDEX: index, STEP_INDEX: t, self.steps: step}
            return
        for t in range(0, _length(steps) - self.window + 1, self.stride):
            yield {**context, EPISODE_INDEX: index, STEP_INDEX: t,
                   self.steps: take_rows(steps, t, t + self.window)}

    def __repr__(self) -> str:
        what = "steps" if self.window is None else f"windows of {self.window} steps"
        return f"StepsDataset({what} of {self.split!r})"


def _shuffled(items: Iterator[Any], size: int, rng: np.random.Generator) -> Iterator[Any]:
    """A shuffle buffer: each item out is a random one of the last ``size`` in."""
    buffer: List[Any] = []
    for item in items:
        if len(buffer) < size:
            buffer.append(item)
            continue
        j = int(rng.integers(size))
        yield buffer[j]
        buffer[j] = item
    rng.shuffle(buffer)
    yield from buffer


def collate(items: List[Any]) -> Any:
    """A DataLoader ``collate_fn`` for the items of these datasets: dicts collated key by key,
    numbers and numeric arrays of one shape stacked into a tensor (sharing no memory with the
    items), anything else (bytes, arrays of bytes or of different shapes,
    :class:`~tfrec_fast.Ragged` values) a list of the items' values."""
    first = items[0]
    if isinstance(first, dict):
        return {k: collate([item[k] for item in items]) for k in first}
    if isinstance(first, (np.ndarray, np.generic)) and first.dtype.kind in "biufc" and all(
            isinstance(v, (np.ndarray, np.generic)) and v.shape == first.shape and
            v.dtype == first.dtype for v in items):
        return torch.from_numpy(np.stack(items))
    if isinstance(first, (bool, int, float)) and all(type(v) is type(first) for v in items):
        return torch.tensor(items)
    return list(items)
