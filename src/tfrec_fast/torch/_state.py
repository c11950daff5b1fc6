"""The states the datasets save and load: what they hold, and how they are found in what
torchdata's StatefulDataLoader saves.

A dataset's state is a small dict of plain values (StatefulDataLoader takes one after every
batch in every worker, and compares it with the previous one to send only what changed): the
epoch, its seed, the layout of the slot and the number of records it handed out, the runs of the
epoch before this one, and hints that spare a resume reading an index (see _stream.Place).
"""

from __future__ import annotations

import zlib
from typing import Any, List, Mapping, Sequence, Tuple

FORMAT = "tfrec_fast.torch/1"


def fingerprint(urls: Sequence[str]) -> list:
    """[number of files, CRC-32 of their names]: what a state checks it is loaded into."""
    return [len(urls), zlib.crc32("\n".join(urls).encode("utf-8"))]


def dataset_states(state: Mapping[str, Any], dataset: str) -> Tuple[List[dict], bool]:
    """(the dataset states in ``state``, by worker; whether ``state`` was a whole DataLoader's).

    ``state`` is a dataset's own state, or what ``StatefulDataLoader.state_dict()`` returned:
    its workers' dataset states are taken from it.

    Raises
    ------
    ValueError
        ``state`` holds no state of a ``dataset``, or one saved while batches it counts had not
        reached its snapshot (``snapshot_every_n_steps`` above 1).
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"a state is a dict, not {type(state).__name__}")
    if "_snapshot" in state:  # a StatefulDataLoader with workers
        if state.get("_steps_since_snapshot", 0):
            raise ValueError(
                "this DataLoader state was taken between snapshots: save it with "
                "StatefulDataLoader(..., snapshot_every_n_steps=1) (the default) "
                "to resume it with another layout"
            )
        workers = state["_snapshot"]["_worker_snapshots"]
        states = [workers[f"worker_{i}"].get("dataset_state") for i in range(len(workers))]
        return [_checked(s, dataset) for s in states], True
    if "_num_yielded" in state:  # a StatefulDataLoader without workers
        return [_checked(state.get("dataset_state"), dataset)], True
    return [_checked(state, dataset)], False


def _checked(state, dataset: str) -> dict:
    if not isinstance(state, Mapping) or state.get("format") != FORMAT:
        raise ValueError(f"not a state of a tfrec_fast {dataset} (no {FORMAT!r} format in it)")
    if state.get("dataset") != dataset:
        raise ValueError(f"a state of a {state.get('dataset')}, not of a {dataset}")
    return dict(state)


def check_same(state: Mapping[str, Any], now: Mapping[str, Any], keys: Sequence[str]) -> None:
    """Raises ValueError naming the first of ``keys`` whose value differs."""
    for key in keys:
        if state.get(key) != now.get(key):
            raise ValueError(
                f"the state was saved with {key}={state.get(key)!r}, this dataset "
                f"has {now.get(key)!r}: it cannot resume it"
            )
