#!/usr/bin/env python3
"""Time to the first batch after resuming late in an epoch, against a fresh start and against
torchdata's fallback.

Data: --records records (default 1,000,000) in --shards shards (default 4) with their indexes
(FILE.idx), written by this script into bench/data/resume/ (untimed; kept for later runs). Each
record is an Example of an int64 ``id`` and 16 float32s. Every case hands the training loop
batches of --batch-size records (default 256) from a ``StatefulDataLoader`` with --workers
workers (default 2), and is timed from making the dataset and the DataLoader to its first batch
(worker start included):

  fresh            tfrec_fast.torch.TFRecordDataset(shards, spec) + StatefulDataLoader: the
                   epoch's first batch
  resumed          the same, given the DataLoader state saved after --at of the epoch (default
                   0.9) with ``load_state_dict``: the next batch, read from the saved offsets
  fallback         a dataset without state (the same reading behind a plain IterableDataset),
                   which StatefulDataLoader fast-forwards by reading the batches again
  fresh, shuffled / resumed, shuffled
                   with shuffle_buffer=--shuffle-buffer (default 10,000): a fresh start fills
                   the buffer first; a resume fetches the buffered records by index

Each resumed case checks (untimed) that its first batch is the one the uninterrupted run gave
after the saved state. Every case runs in its own process; repeats are interleaved round-robin;
the table shows medians.

    python bench/bench_resume.py                                   # the table
    python bench/bench_resume.py --records 20000 --repeats 2       # a quick smoke run
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _common as C
import numpy as np
from _common import harness as H

FEATURE_WIDTH = 16


def data_dir(records: int, shards: int) -> Path:
    return C.DATA_DIR / "resume" / f"{records}x{shards}"


def shard_paths(records: int, shards: int):
    directory = data_dir(records, shards)
    return [directory / f"part-{k:05d}-of-{shards:05d}.tfrecord" for k in range(shards)]


def make_data(records: int, shards: int) -> list:
    """The shards and their indexes (written once, untimed)."""
    import tfrec_fast as tfr

    paths = shard_paths(records, shards)
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, records, shards + 1).astype(np.int64)
    for k, path in enumerate(paths):
        index = Path(str(path) + ".idx")
        if path.exists() and index.exists():
            continue
        ids = np.arange(bounds[k], bounds[k + 1], dtype=np.int64)
        x = np.random.default_rng(k).random((len(ids), FEATURE_WIDTH), dtype=np.float32)
        with tfr.TFRecordWriter(str(path)) as writer:
            for a in range(0, len(ids), 65536):
                writer.write_examples({"id": ids[a : a + 65536], "x": x[a : a + 65536]})
        tfr.create_index(str(path), str(index))
    return [str(p) for p in paths]


def _spec():
    import tfrec_fast as tfr

    return {"id": tfr.FixedLen((), "int64"), "x": tfr.FixedLen((FEATURE_WIDTH,), "float32")}


try:
    import torch.utils.data

    class Stateless(torch.utils.data.IterableDataset):
        """A dataset's records without its state: StatefulDataLoader then fast-forwards by
        reading the batches again."""

        def __init__(self, inner):
            self.inner = inner

        def __iter__(self):
            return iter(self.inner)
except ImportError:  # the cases skip (H.need)
    Stateless = None


def _setup(opts, shuffled: bool, resumed: bool, stateless: bool = False) -> H.Body:
    H.need("torch")
    H.need("tfrec_fast")
    stateful = H.need("torchdata.stateful_dataloader")
    from tfrec_fast.torch import TFRecordDataset

    kw = dict(spec=_spec(), shuffle_buffer=opts.shuffle_buffer if shuffled else 0, seed=1)

    def dataset():
        ds = TFRecordDataset(opts.files, **kw)
        return Stateless(ds) if stateless else ds

    def loader(ds):
        return stateful.StatefulDataLoader(ds, batch_size=opts.batch_size, num_workers=opts.workers)

    state, expected = None, None
    if resumed:  # untimed: a run to --at of the epoch, its state, and the batch that follows
        batches = -(-opts.records // opts.batch_size)
        stop = int(batches * opts.at)
        dl = loader(dataset())
        it = iter(dl)
        for _ in range(stop):
            next(it)
        state = dl.state_dict()
        expected = next(it)["id"].tolist()
        del it, dl
    held = []

    def prepare():
        held.clear()  # the previous run's DataLoader (and its workers) go, untimed

    def run():
        dl = loader(dataset())
        if state is not None:
            dl.load_state_dict(state)
        batch = next(iter(dl))
        held.append((dl, batch))
        return len(batch["id"])

    def check():
        if expected is None:
            return None
        dl = loader(dataset())
        dl.load_state_dict(state)
        got = next(iter(dl))["id"].tolist()
        return (
            None
            if got == expected
            else "the first batch after the resume is not the one the uninterrupted run gave"
        )

    what = f"shuffle_buffer={kw['shuffle_buffer']}, batch {opts.batch_size}, {opts.workers} workers"
    if resumed:
        what += f", resumed after {opts.at:.0%} of the epoch"
    return H.Body(run, prepare=prepare, check=check, info=what)


def fresh(opts):
    return _setup(opts, shuffled=False, resumed=False)


def resumed(opts):
    return _setup(opts, shuffled=False, resumed=True)


def fallback(opts):
    return _setup(opts, shuffled=False, resumed=True, stateless=True)


def fresh_shuffled(opts):
    return _setup(opts, shuffled=True, resumed=False)


def resumed_shuffled(opts):
    return _setup(opts, shuffled=True, resumed=True)


CASES = [
    H.Case("fresh", "fresh start: first batch", fresh),
    H.Case("resumed", "resumed at 90%: first batch", resumed),
    H.Case("fallback", "torchdata fallback (no state) at 90%: first batch", fallback),
    H.Case("fresh_shuffled", "fresh start, shuffle buffer: first batch", fresh_shuffled),
    H.Case("resumed_shuffled", "resumed at 90%, shuffle buffer: first batch", resumed_shuffled),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=5, min_time=0.0)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--at", type=float, default=0.9, help="where in the epoch the state is saved")
    ap.add_argument("--shuffle-buffer", type=int, default=10_000)
    args = ap.parse_args(argv)
    H.need("tfrec_fast")
    files = make_data(args.records, args.shards)
    md = [
        C.header(
            args,
            "Time from making the dataset and a StatefulDataLoader to its first "
            "batch (DataLoader workers started in the timed region).",
        )
    ]
    opts = {
        "files": files,
        "records": args.records,
        "batch_size": args.batch_size,
        "workers": args.workers,
        "at": args.at,
        "shuffle_buffer": args.shuffle_buffer,
    }
    res = H.measure(
        H.select(CASES, args.cases), opts, log_dir=C.log_dir("resume"), **H.timing_options(args)
    )
    columns = [H.Versus("vs fallback", "fallback"), H.Versus("vs fresh", "fresh"), *H.timing()]
    title = (
        f"Resuming: first batch, {args.records:,} records in {args.shards} shards, batches of "
        f"{args.batch_size}, num_workers={args.workers}"
    )
    md.append(H.section(title, *H.table(res, columns, first="case")))
    return H.emit(md, {"resume": H.raw(res)}, args.markdown, args.json, [])


if __name__ == "__main__":
    sys.exit(main())
