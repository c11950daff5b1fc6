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

import collections
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch.utils.data

from ..torch._epoch import SharedEpoch
from ..torch._shuffle import Tracker, position, shuffled
from ..torch._state import FORMAT
from .decoder import take_rows
from .features import Dataset as DatasetFeature
from .features import FeaturesDict

if TYPE_CHECKING:  # (dataset.py imports this module for Split.to_torch: no import back)
    from .dataset import Split

__all__ = ["SplitDataset", "StepsDataset", "collate"]


def _is_split(value: Any) -> bool:
    """Whether ``value`` is a tfrec_fast.tfds Split (by what the datasets use of it)."""
    return all(hasattr(value, name) for name in ("get_batch", "info", "name", "with_nested"))


class SplitDataset(torch.utils.data.Dataset):
    """Example ``i`` of a :class:`~tfrec_fast.tfds.Split` (TFDS's order), transformed."""

    def __init__(self, split: Split, transform: Optional[Callable[[Any], Any]] = None):
        if not _is_split(split):
            raise TypeError(
                f"SplitDataset takes a tfrec_fast.tfds Split, not {type(split).__name__}"
            )
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

    def state_dict(self) -> dict:
        """What a resume checks (for torchdata's ``StatefulDataLoader``, whose sampler state
        says where an epoch stands): the split and its number of examples.

        Returns
        -------
        dict
            ``format``, ``dataset``, ``split`` ([name, examples]).
        """
        return {
            "format": FORMAT,
            "dataset": "SplitDataset",
            "split": [self.split.name, len(self.split)],
        }

    def load_state_dict(self, state: dict) -> None:
        """Checks that a state was saved over this split, so that the sampler's indices mean
        the same examples.

        Parameters
        ----------
        state : dict
            What :meth:`state_dict` returned.

        Raises
        ------
        ValueError
            A state of another dataset, split or number of examples.
        """
        if state != self.state_dict():
            raise ValueError(
                f"the state {state!r} was not saved over this split "
                f"({self.split.name!r}, {len(self.split)} examples)"
            )

    def __repr__(self) -> str:
        return f"SplitDataset({self.split!r})"


# ---- steps ------------------------------------------------------------------------------------

EPISODE_INDEX, STEP_INDEX = "episode_index", "step_index"


def _steps_feature(split: Split, steps: Optional[str]) -> str:
    """The name of the episodes' steps: ``steps``, or the one top-level Dataset feature."""
    features = split.info.features
    if not isinstance(features, FeaturesDict):
        raise TypeError(
            "StepsDataset reads episodes: examples that are dicts holding a nested Dataset of steps"
        )
    datasets = [k for k, f in features.items() if isinstance(f, DatasetFeature)]
    if steps is None:
        if len(datasets) != 1:
            raise ValueError(
                f"{split.info.name} has {len(datasets)} top-level Dataset features "
                f"({datasets}): name the steps with steps="
            )
        return datasets[0]
    if steps not in datasets:
        raise ValueError(
            f"{steps!r} is not a top-level Dataset feature of {split.info.name} "
            f"(those are {datasets})"
        )
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

    def __init__(
        self,
        split: Split,
        *,
        steps: Optional[str] = None,
        window: Optional[int] = None,
        stride: int = 1,
        shuffle_episodes: Optional[bool] = None,
        shuffle_buffer: int = 0,
        seed: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        uneven: str = "pad",
        repeat: bool = False,
        read_episodes: int = 4,
        transform: Optional[Callable[[Any], Any]] = None,
    ):
        if not _is_split(split):
            raise TypeError(
                f"StepsDataset takes a tfrec_fast.tfds Split, not {type(split).__name__}"
            )
        if split._supervised is not None:
            raise ValueError(
                "StepsDataset reads whole episodes: open the split without as_supervised"
            )
        self.steps = _steps_feature(split, steps)
        features: Any = split.info.features
        clash = {EPISODE_INDEX, STEP_INDEX} & set(features)
        if clash:
            raise ValueError(
                f"the episodes already have features {sorted(clash)}: rename "
                "them with transform= on a SplitDataset instead"
            )
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
        self.shuffle_episodes = (
            self.shuffle_buffer > 0 if shuffle_episodes is None else bool(shuffle_episodes)
        )
        self.seed = seed
        self.uneven = uneven
        self.repeat = bool(repeat)
        self.read_episodes = int(read_episodes)
        self.transform = transform
        self._epoch = SharedEpoch()
        self._rank = None if rank is None else (int(rank), int(world_size or 1))
        # One step per item: steps as lists; windows: stacked columns, sliced.
        self.split = split.with_nested("steps" if self.window is None else "columns")
        self._passes = 0  # iterations begun in this process (seed=None: each its own seed)
        self._drawn: Optional[tuple] = None  # (pass, seed) drawn for seed=None outside workers
        self._pass: Optional[_StepsPass] = None  # the latest, for state_dict() and episodes()
        self._loaded: Optional[dict] = None  # a state for the next iteration

    @property
    def epoch(self) -> int:
        """The epoch the next iteration reads (see :meth:`set_epoch`)."""
        return self._epoch.epoch

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch: shuffles are a function of (seed, epoch).

        Call it before each epoch (as with DistributedSampler). The epoch is shared with the
        dataset's copies in DataLoader workers, persistent ones included.

        Parameters
        ----------
        epoch : int
            The epoch number.
        """
        self._epoch.epoch = int(epoch)

    def __getstate__(self):  # pin the rank while the main process's group is visible
        state = self.__dict__.copy()
        state["_pass"] = None
        if state["_rank"] is None:
            state["_rank"] = _distributed()
        return state

    def _who(self, number: int):
        """(rank, world, worker, workers, seed) of iteration ``number`` of this process."""
        rank, world = self._rank or _distributed() or (0, 1)
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.seed is not None:
            seed = int(self.seed)
        elif world > 1 and self.shuffle_episodes:
            raise ValueError(
                "with several ranks, shuffle_episodes needs seed=: every rank "
                "must shuffle the episodes alike"
            )
        elif info is not None:
            # DataLoader's base seed: new each time workers start, the same in every worker;
            # persistent workers count their iterations to draw a new order each epoch.
            seed = (info.seed - info.id + number) & 0x7FFFFFFFFFFFFFFF
        else:  # drawn once per iteration, so that episodes() tells that iteration's order
            if self._drawn is None or self._drawn[0] != number:
                self._drawn = (number, int(torch.empty((), dtype=torch.int64).random_().item()))
            seed = self._drawn[1]
        return rank, world, worker, workers, seed

    def episodes(self, epoch: Optional[int] = None) -> np.ndarray:
        """The indices of the episodes this process (rank and DataLoader worker) reads in an
        epoch, in its order: of the iteration in progress, else of the next one.

        Parameters
        ----------
        epoch : int, optional
            The epoch (default: the iteration's).

        Returns
        -------
        numpy.ndarray
            Episode indices (int64).
        """
        p = self._pass
        number = p.number if p is not None and not p.done else self._passes
        rank, world, worker, workers, seed = self._who(number)
        if epoch is None:
            epoch = p.epoch if p is not None and not p.done else self.epoch
        return self._mine(rank, world, worker, workers, seed, int(epoch))

    def _mine(self, rank, world, worker, workers, seed, epoch) -> np.ndarray:
        n = len(self.split)
        order = np.arange(n, dtype=np.int64)
        if self.shuffle_episodes:
            order = np.random.default_rng([seed & 0xFFFFFFFF, epoch, 0x65706973]).permutation(n)
        if world > 1:
            per = -(-n // world) if self.uneven == "pad" else n // world
            if n and per * world > n:
                order = np.resize(order, per * world)  # pad: wraps around
            order = order[rank * per : (rank + 1) * per]
        bounds = np.linspace(0, len(order), workers + 1).astype(np.int64)
        return order[bounds[worker] : bounds[worker + 1]]

    def _rng(self, p: "_StepsPass") -> np.random.Generator:
        """The generator of the shuffle buffer in the pass's current epoch."""
        return np.random.default_rng([p.seed & 0xFFFFFFFF, p.epoch, p.rank, p.worker, 0x62756666])

    def __iter__(self) -> Iterator[Any]:
        number = self._passes
        self._passes += 1
        loaded, self._loaded = self._loaded, None
        rank, world, worker, workers, seed = self._who(number)
        p = _StepsPass(number, self.epoch, rank, world, worker, workers, seed)
        if loaded is not None:
            if [loaded[k] for k in ("rank", "world", "worker", "workers")] != [
                rank,
                world,
                worker,
                workers,
            ]:
                raise ValueError(
                    f"a StepsDataset resumes only in the slot it was saved in (rank "
                    f"{loaded['rank']} of {loaded['world']}, worker {loaded['worker']} of "
                    f"{loaded['workers']}), not in rank {rank} of {world}, worker {worker} of "
                    f"{workers}: its ranks hand out different numbers of steps"
                )
            p.number, p.epoch = int(loaded["pass"]), int(loaded["epoch"])
            p.seed = int(loaded["seed"])
            self._passes = p.number + 1
        self._pass = p
        return self._run(p, loaded)

    def _run(self, p: "_StepsPass", resumed: Optional[dict]) -> Iterator[Any]:
        while True:
            episodes = self._mine(p.rank, p.world, p.worker, p.workers, p.seed, p.epoch)
            p.start_epoch(self._tracker(p, resumed))
            items = self._resumed(p, episodes, resumed) if resumed else self._items(p, episodes)
            resumed = None
            for item in items:
                p.handed += 1
                yield item if self.transform is None else self.transform(item)
            if not self.repeat:
                p.done = True
                return
            p.epoch += 1

    def _tracker(self, p: "_StepsPass", resumed: Optional[dict]):
        if not self.shuffle_buffer:
            return None
        handed = int(resumed["handed_out"]) if resumed else 0
        return Tracker(
            self.shuffle_buffer, self._rng(p), handed, resumed["length"] if resumed else None
        )

    def _items(
        self,
        p: "_StepsPass",
        episodes: np.ndarray,
        start: tuple = (0, 0, 0),
        rng=None,
        resumed=None,
        held=None,
    ) -> Iterator[Dict[str, Any]]:
        """The pass's items from episode ordinal ``start[0]``'s item ``start[1]`` (whose first
        item is number ``start[2]``), through the shuffle buffer when there is one (drawing
        from ``rng``, left by a resumed buffer's replay, or a fresh one)."""
        items = self._read_items(p, episodes, *start)
        if self.shuffle_buffer:
            return shuffled(items, self.shuffle_buffer, rng or self._rng(p), resumed, held)
        return items

    def _read_items(
        self, p: "_StepsPass", episodes: np.ndarray, first: int, skip: int, number: int
    ) -> Iterator[Dict[str, Any]]:
        for a in range(first, len(episodes), self.read_episodes):
            indices = episodes[a : a + self.read_episodes].tolist()
            for k, (index, episode) in enumerate(zip(indices, self.split.get_batch(indices))):
                items = list(self._episode_items(index, episode))
                p.log_episode(a + k, number, len(items))
                number += len(items)
                yield from items[skip:]
                skip = 0
        p.length = number

    def _resumed(
        self, p: "_StepsPass", episodes: np.ndarray, state: dict
    ) -> Iterator[Dict[str, Any]]:
        """The items from where ``state`` stopped: the shuffle replayed on item numbers, the
        items it held read again by episode."""
        handed = p.handed = int(state["handed_out"])
        rng = self._rng(p)
        at = (
            position(self.shuffle_buffer, rng, handed, state["length"])
            if (self.shuffle_buffer and handed)
            else None
        )
        cursor = at.cursor if at is not None else handed
        ordinal, item = state["place"] if state["place"] is not None else (0, 0)
        held = None
        if at is not None and len(at.held):
            held = self._held_items(episodes, state, at.held)
        if state["length"] is not None and cursor >= state["length"]:
            p.length = int(state["length"])
        return self._items(
            p, episodes, (int(ordinal), int(item), cursor - int(item)), rng, at, held
        )

    def _held_items(self, episodes: np.ndarray, state: dict, numbers: np.ndarray) -> list:
        """The items numbered ``numbers``, from the episodes the state says hold them."""
        first, first_number = state["held_from"]
        counts = np.asarray(state["counts"], dtype=np.int64)
        starts = first_number + np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        which = np.searchsorted(starts, numbers, side="right") - 1
        ordinals = sorted(set((first + which).tolist()))
        read = dict(zip(ordinals, self.split.get_batch(episodes[ordinals].tolist())))
        made: Dict[int, list] = {}
        out = []
        for k, number in zip(which.tolist(), numbers.tolist()):
            ordinal = first + k
            if ordinal not in made:
                made[ordinal] = list(self._episode_items(int(episodes[ordinal]), read[ordinal]))
            out.append(made[ordinal][number - int(starts[k])])
        return out

    def _episode_items(self, index: int, episode: Dict[str, Any]) -> Iterator[Dict[str, Any]]:
        steps = episode[self.steps]
        context = {k: v for k, v in episode.items() if k != self.steps}
        if self.window is None:
            for t, step in enumerate(steps):
                yield {**context, EPISODE_INDEX: index, STEP_INDEX: t, self.steps: step}
            return
        for t in range(0, _length(steps) - self.window + 1, self.stride):
            yield {
                **context,
                EPISODE_INDEX: index,
                STEP_INDEX: t,
                self.steps: take_rows(steps, t, t + self.window),
            }

    # ---- state -------------------------------------------------------------------------------

    def _settings(self) -> dict:
        return {
            "format": FORMAT,
            "dataset": "StepsDataset",
            "split": [self.split.name, len(self.split)],
            "window": self.window,
            "stride": self.stride,
            "shuffle_buffer": self.shuffle_buffer,
            "shuffle_episodes": self.shuffle_episodes,
            "uneven": self.uneven,
            "repeat": self.repeat,
        }

    def state_dict(self) -> dict:
        """Where the latest iteration in this process stands, for torchdata's
        ``StatefulDataLoader`` (which calls it in each worker after each batch).

        Returns
        -------
        dict
            Plain values: the epoch and its seed, the slot, the items handed out, and the
            episodes (by their place in the slot's order) holding the next item and the items
            in the shuffle buffer.
        """
        out = self._settings()
        p = self._pass
        if p is None:
            rank, world = self._rank or _distributed() or (0, 1)
            info = torch.utils.data.get_worker_info()
            worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
            out.update(
                epoch=self.epoch,
                seed=self.seed,
                **{"pass": self._passes},
                rank=rank,
                world=world,
                worker=worker,
                workers=workers,
                handed_out=0,
                length=None,
                place=None,
                held_from=[0, 0],
                counts=[],
            )
            return out
        out.update(
            epoch=p.epoch,
            seed=p.seed,
            **{"pass": p.number},
            rank=p.rank,
            world=p.world,
            worker=p.worker,
            workers=p.workers,
            **p.where(self.shuffle_buffer),
        )
        return out

    def load_state_dict(self, state: dict) -> None:
        """Resumes from a state :meth:`state_dict` returned: the next iteration goes on exactly
        where it stopped. Only the slot that saved it can (each rank hands out its own number of
        steps).

        Parameters
        ----------
        state : dict
            A state of a StepsDataset over the same split, with the same settings.

        Raises
        ------
        ValueError
            The state is not of a StepsDataset, or of another split or other settings.
        """
        if (
            not isinstance(state, dict)
            or state.get("format") != FORMAT
            or state.get("dataset") != "StepsDataset"
        ):
            raise ValueError("not a state of a tfrec_fast StepsDataset")
        for key, value in self._settings().items():
            if state.get(key) != value:
                raise ValueError(
                    f"the state was saved with {key}={state.get(key)!r}, this "
                    f"dataset has {value!r}: it cannot resume it"
                )
        if self.seed is not None and state["seed"] is not None and state["seed"] != self.seed:
            raise ValueError(
                f"the state was saved with seed={state['seed']}, this dataset has seed={self.seed}"
            )
        self._loaded = dict(state)
        if torch.utils.data.get_worker_info() is None:
            self._epoch.epoch = int(state["epoch"])

    def __repr__(self) -> str:
        what = "steps" if self.window is None else f"windows of {self.window} steps"
        return f"StepsDataset({what} of {self.split!r})"


class _StepsPass:
    """One iteration of a StepsDataset in a process: where it stands, for its state."""

    def __init__(self, number, epoch, rank, world, worker, workers, seed):
        self.number, self.epoch, self.seed = number, epoch, seed
        self.rank, self.world, self.worker, self.workers = rank, world, worker, workers
        self.done = False
        self.start_epoch(None)

    def start_epoch(self, tracker) -> None:
        self.handed = 0
        self.length: Optional[int] = None
        self.tracker = tracker
        self.log: collections.deque = collections.deque()  # (ordinal, first number, items)

    def log_episode(self, ordinal: int, first: int, items: int) -> None:
        self.log.append((ordinal, first, items))
        if len(self.log) > 64:  # forget what no state needs
            oldest = (
                self.handed
                if self.tracker is None
                else self.tracker.oldest(self.handed, self.length)
            )
            while len(self.log) > 1 and self.log[0][1] + self.log[0][2] <= oldest:
                self.log.popleft()

    def where(self, shuffle_buffer: int) -> dict:
        """The state's handed_out, length, place (episode ordinal and item of the next item to
        read), held_from (the ordinal and first item number of the oldest episode that holds a
        buffered item) and counts (the items of each episode from that one on)."""
        handed, length = self.handed, self.length
        cursor, oldest = handed, handed
        if shuffle_buffer and handed:
            cursor = (
                shuffle_buffer + handed if length is None else min(shuffle_buffer + handed, length)
            )
            oldest = self.tracker.oldest(handed, length)
        log = list(self.log)
        place = None
        if handed:
            place = [log[-1][0] + 1, 0] if log else [0, 0]
            for ordinal, first, items in log:
                if first <= cursor < first + items:
                    place = [ordinal, cursor - first]
                    break
        held_from = [0, 0]
        counts: List[int] = []
        for k, (ordinal, first, items) in enumerate(log):
            if first + items > oldest:  # the episode of the oldest item held, and those after
                held_from = [ordinal, first]
                counts = [n for _, _, n in log[k:]]
                break
        return dict(
            handed_out=handed, length=length, place=place, held_from=held_from, counts=counts
        )


def collate(items: List[Any]) -> Any:
    """A DataLoader ``collate_fn`` for the items of these datasets: dicts collated key by key,
    numbers and numeric arrays of one shape stacked into a tensor (sharing no memory with the
    items), anything else (bytes, arrays of bytes or of different shapes,
    :class:`~tfrec_fast.Ragged` values) a list of the items' values."""
    first = items[0]
    if isinstance(first, dict):
        return {k: collate([item[k] for item in items]) for k in first}
    if (
        isinstance(first, (np.ndarray, np.generic))
        and first.dtype.kind in "biufc"
        and all(
            isinstance(v, (np.ndarray, np.generic))
            and v.shape == first.shape
            and v.dtype == first.dtype
            for v in items
        )
    ):
        return torch.from_numpy(np.stack(items))
    if isinstance(first, (bool, int, float)) and all(type(v) is type(first) for v in items):
        return torch.tensor(items)
    return list(items)
