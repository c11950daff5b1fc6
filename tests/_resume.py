"""Runs DataLoaders for the resumption tests: to the end, to a stop (returning the state), or
from a state. Cases are plain dicts, so that a state saved here can be resumed in a new process:

    python tests/_resume.py JOBS OUT

reads [(case, state), ...] (pickled) from JOBS, resumes each with a new dataset and a new
StatefulDataLoader, and writes the batches each gives (lists of record ids) to OUT.
"""

from __future__ import annotations

import os
import pickle
import sys

import torch
from torchdata.stateful_dataloader import StatefulDataLoader

import tfrec_fast as tfr

SPEC = {
    "id": tfr.FixedLen((), "int64"),
    "label": tfr.FixedLen((), "int64"),
    "img": tfr.FixedLen((2, 3), "uint8"),
}


def dataset(case):
    """The dataset a case describes: kind "stream" (TFRecordDataset), "multi", "indexed", or
    over a TFDS split (``paths``: its directory, ``split``): "split", "steps"."""
    from tfrec_fast.torch import IndexedTFRecordDataset, MultiTFRecordDataset, TFRecordDataset

    kw = dict(case.get("kw", {}))
    if case["kind"] in ("split", "steps"):
        import tfrec_fast.tfds
        from tfrec_fast.tfds.torch import SplitDataset, StepsDataset

        split = tfrec_fast.tfds.open(case["paths"])[case["split"]]
        return SplitDataset(split) if case["kind"] == "split" else StepsDataset(split, **kw)
    if case.get("storage_options"):
        kw["storage_options"] = case["storage_options"]
    if case["kind"] == "indexed":
        return IndexedTFRecordDataset(case["paths"], SPEC, **kw)
    if case["kind"] == "multi":
        return MultiTFRecordDataset(case["paths"], None, case["splits"], SPEC, **kw)
    return TFRecordDataset(case["paths"], spec=SPEC, **kw)


def loader(case, ds):
    options = dict(num_workers=case.get("workers", 0), batch_size=case.get("batch", 8))
    if case.get("kw", {}).get("batch_size"):
        options["batch_size"] = None
    if case["kind"] in ("split", "steps"):
        from tfrec_fast.tfds.torch import collate

        options["collate_fn"] = collate
    if case["kind"] in ("indexed", "split"):
        options["shuffle"] = True
        options["generator"] = torch.Generator().manual_seed(case.get("sampler_seed", 0))
    return StatefulDataLoader(ds, **options)


def ids(batch) -> list:
    """What identifies the records of a batch: ids, (episode, step) or episode ids."""
    if "step_index" in batch:
        return list(zip(batch["episode_index"].tolist(), batch["step_index"].tolist()))
    if "episode_metadata" in batch:
        return batch["episode_metadata"]["episode_id"].tolist()
    return batch["id"].tolist()


def batches(case, limit=None) -> list:
    """The batches of an uninterrupted run (the first ``limit`` of an endless one)."""
    out = []
    for batch in loader(case, dataset(case)):
        out.append(ids(batch))
        if limit is not None and len(out) == limit:
            break
    return out


def stop(case, after: int, limit=None):
    """(the first ``after`` batches, the DataLoader's state then, the batches it goes on to
    give uninterrupted: up to ``limit`` batches in all)."""
    dl = loader(case, dataset(case))
    it = iter(dl)
    got = [ids(next(it)) for _ in range(after)]
    state = pickle.loads(pickle.dumps(dl.state_dict()))  # as it would be saved
    rest = []
    for batch in it:
        if limit is not None and after + len(rest) == limit:
            break
        rest.append(ids(batch))
    del it, dl
    return got, state, rest


def resume(case, state, limit=None) -> list:
    """The batches of a new dataset and DataLoader given ``state``."""
    dl = loader(case, dataset(case))
    dl.load_state_dict(state)
    out = []
    for batch in dl:
        out.append(ids(batch))
        if limit is not None and len(out) == limit:
            break
    return out


def main(jobs_path: str, out_path: str) -> int:
    with open(jobs_path, "rb") as f:
        jobs = pickle.load(f)
    results = [resume(case, state, limit) for case, state, limit in jobs]
    with open(out_path, "wb") as f:
        pickle.dump({"pid": os.getpid(), "results": results}, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
