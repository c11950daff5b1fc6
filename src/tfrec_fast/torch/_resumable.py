"""Saving and taking up a streaming dataset's place in an epoch (see docs/resumption.md).

The datasets (_streaming._Streaming) mix this in: ``state_dict()`` reports the latest iteration
of the process, ``load_state_dict()`` keeps a state for the next one, which ``_begin()`` takes
up, exactly (a state of the same slot) or as a new run of the epoch (another layout).
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.utils.data

from . import _state
from ._epoch import SharedEpoch
from ._plan import Run
from ._slots import distributed, worker


class Resumable:
    """state_dict() / load_state_dict() of a streaming dataset, and the start of an iteration
    from a loaded state. Expects the dataset's settings (shuffle_buffer, ...), its slot
    (``_slot``, ``_rank``), its shared epoch (``_epoch``), ``_passes``, ``_pass`` (the latest
    iteration: slot, epoch, number, runs, pieces, progress) and ``_loaded``."""

    _resumes_elsewhere = True  # a state of another layout is taken up (see _plan.remaining)
    _kind = "TFRecordDataset"  # what states name

    # What the dataset has (set by _Streaming._setup):
    shuffle_buffer: int
    shuffle_files: bool
    batch_size: Optional[int]
    drop_last: bool
    uneven: str
    seed: Optional[int]
    _epoch: SharedEpoch
    _passes: int
    _pass: Any
    _loaded: Optional[tuple]
    _rank: Optional[tuple]

    def _fingerprint(self) -> list:
        """What a state checks the files by."""
        raise NotImplementedError

    def _settings(self) -> dict:
        """What a state records of this dataset, and checks when it is loaded."""
        return {
            "format": _state.FORMAT,
            "dataset": self._kind,
            "files": self._fingerprint(),
            "shuffle_files": self.shuffle_files,
            "shuffle_buffer": self.shuffle_buffer,
            "batch_size": self.batch_size,
            "drop_last": self.drop_last,
            "uneven": self.uneven,
        }

    def state_dict(self) -> dict:
        """Where the latest iteration in this process stands, for torchdata's
        ``StatefulDataLoader`` (which calls it in each worker after each batch).

        Returns
        -------
        dict
            Plain values: the epoch and its seed, the slot (rank, world size, worker, workers),
            the records it handed out, and where its files are to be entered again.
        """
        out = self._settings()
        p = self._pass
        if p is None:  # nothing read yet here
            rank, world = self._rank or distributed() or (0, 1)
            wid, workers = worker()
            out.update(
                epoch=self._epoch.epoch,
                seed=self.seed,
                **{"pass": self._passes},
                runs=[],
                rank=rank,
                world=world,
                worker=wid,
                workers=workers,
                handed_out=0,
                length=None,
                place=None,
                counts=[],
            )
            return out
        progress = p.progress
        handed, length = progress.handed_out, progress.length
        number = self._cursor(handed, length)
        place = progress.place(number, len(p.pieces)) if handed else None
        out.update(
            epoch=p.epoch,
            seed=p.slot.seed,
            **{"pass": p.number},
            runs=[run.as_list() for run in p.runs],
            rank=p.slot.rank,
            world=p.slot.world,
            worker=p.slot.worker,
            workers=p.slot.workers,
            handed_out=handed,
            length=length,
            place=None if place is None else [place.piece, place.record, place.offset],
            counts=[] if place is None else list(place.counts),
        )
        return out

    def _cursor(self, handed: int, length: Optional[int]) -> int:
        """The number of records read from the stream once ``handed`` were handed out."""
        if not self.shuffle_buffer or not handed:
            return handed
        return (
            self.shuffle_buffer + handed
            if length is None
            else min(self.shuffle_buffer + handed, length)
        )

    def load_state_dict(self, state: dict) -> None:
        """Resumes from a state: the next iteration goes on where it stopped.

        ``state`` is what :meth:`state_dict` returned (StatefulDataLoader gives each worker its
        own), or a whole ``StatefulDataLoader.state_dict()`` of a job with another layout. A
        state of the same slot (same world size, workers and worker; the rank may differ, as
        every rank hands out as many records) resumes exactly: the same records, in the same
        order. Any other layout takes up what the stopped job had not handed out, split among
        its own slots (see docs/resumption.md); then the state must describe a whole rank:
        a DataLoader's state, or the state of a job without workers.

        Parameters
        ----------
        state : dict
            A dataset state, or a StatefulDataLoader state.

        Raises
        ------
        ValueError
            The state is not one of this kind of dataset, or of other files, another seed or
            another file shuffling.
        """
        states, from_loader = _state.dataset_states(state, self._kind)
        first = states[0]
        _state.check_same(first, self._settings(), ["files", "shuffle_files"])
        if self.seed is not None and first["seed"] is not None and first["seed"] != self.seed:
            raise ValueError(
                f"the state was saved with seed={first['seed']}, this dataset has "
                f"seed={self.seed}: it cannot resume it"
            )
        for other in states[1:]:
            _state.check_same(other, first, ["epoch", "seed", "runs", "world", "workers"])
        if from_loader and len(states) != first["workers"]:
            raise ValueError(
                f"a DataLoader state with {len(states)} workers' states, saved "
                f"by datasets in {first['workers']} workers"
            )
        self._loaded = (states, from_loader)
        if torch.utils.data.get_worker_info() is None:  # the training process: the epoch
            self._epoch.epoch = int(first["epoch"])
            self._epoch.unclaim()

    def _begin(self):
        """Starts an iteration: (slot, epoch, earlier runs of the epoch, the state it resumes
        exactly or None, the iteration's number in this process). A loaded state is taken up
        once."""
        number = self._passes
        self._passes += 1
        loaded, self._loaded = self._loaded, None
        slot = self._slot(number)
        if loaded is None:
            return slot, self._epoch.epoch, (), None, number
        states, from_loader = loaded
        first = states[0]
        slot = slot._replace(seed=int(first["seed"]) if first["seed"] is not None else slot.seed)
        same = (first["world"], first["workers"], first["worker"]) == (
            slot.world,
            slot.workers,
            slot.worker,
        )
        runs = tuple(Run.from_list(r) for r in first["runs"])
        if same and not from_loader:
            _state.check_same(
                first, self._settings(), ["shuffle_buffer", "batch_size", "drop_last", "uneven"]
            )
            self._passes = int(first["pass"]) + 1
            return slot, int(first["epoch"]), runs, first, int(first["pass"])
        if not self._resumes_elsewhere:
            raise ValueError(
                f"a {self._kind} resumes only in the layout it was saved in (world size "
                f"{first['world']}, {first['workers']} DataLoader workers, each its own state), "
                f"not in world size {slot.world} with {slot.workers} workers"
            )
        if not from_loader and first["workers"] != 1:
            raise ValueError(
                f"the state of worker {first['worker']} of {first['workers']} cannot resume a "
                f"job of {slot.workers} workers: load the whole DataLoader's state_dict() "
                "(StatefulDataLoader(...).state_dict()) into the dataset instead"
            )
        info = torch.utils.data.get_worker_info()
        who = info.seed - info.id if info is not None else self._fresh_seed()
        if int(first["epoch"]) != self._epoch.epoch or not self._epoch.claim(who):
            return self._slot(number), self._epoch.epoch, (), None, number  # taken up before
        stopped = Run(
            int(first["world"]),
            int(first["workers"]),
            str(first["uneven"]),
            int(first["shuffle_buffer"]),
            tuple(int(s["handed_out"]) for s in states),
        )
        return slot, int(first["epoch"]), runs + (stopped,), None, number
