#!/usr/bin/env python3
"""PyTorch DataLoader throughput and random access of tfrec_fast against its peers, all measured in this run.

DataLoader, on the MNIST-like records of make_example_data.py (ex_mnist.tfrecord: 60,000 records of
index, label, 784-byte image_raw). One full epoch per sample; every case hands the training loop
batches of 256 samples: image_raw a uint8 [256, 28, 28] tensor, label int64 [256].
  tfrec_fast   tfrec_fast.torch.TFRecordDataset(spec={image_raw: FixedLen((28, 28), 'uint8'),
               label: FixedLen((), 'int64')}) per sample
               + DataLoader(batch_size=256, num_workers=2, collate_fn=tfrec_fast.torch.collate);
               the same dataset with batch_size=256 + DataLoader(batch_size=None, num_workers=2), with the
               worker ring (default) and with worker_ring=False (torch's per-tensor hand-over);
               IndexedTFRecordDataset + RandomSampler (exact shuffle) + DataLoader(batch_size=256,
               num_workers=2, collate_fn=tfrec_fast.torch.collate) (one get_batch + parse_examples per
               batch through __getitems__);
               informational: the batch_size=256 dataset with num_workers=0 (in the training process,
               as tf.data runs; not the issue's setting)
  tfrecord     tfrecord.torch.dataset.TFRecordDataset(file, FILE.idx, description={'image_raw': 'byte',
               'label': 'int'}, transform=decode to tensors) + DataLoader(batch_size=256, num_workers=2)
  TensorFlow   tf.data.TFRecordDataset(file).batch(256).map(tf.io.parse_example + tf.io.decode_raw +
               reshape, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE), each batch torch.from_numpy(t.numpy())
DataLoaders are created in setup with persistent_workers=True (worker start-up falls in the warm-up
epoch, as in any multi-epoch training); an epoch's output is checked after the warm-up (shapes, dtypes,
label histogram and pixel sum against the generator).

Random access, on bench/data/small_64b.tfrecord (64-byte records) and large_100k.tfrecord (~100 KB
records): the same seeded uniform random record numbers for every case, read through the index:
  tfrec_fast   IndexedTFRecordReader.get_batch(256 indices) per call; r[i] per record
  probe        os.pread(fd, size, offset) of each (offset, size) from the index + both CRC32Cs checked in
               Python with the `crc32c` package (the tfrecord package has no random access)

The index of each file (FILE.idx, the tfrecord/DALI text format) is written once by this script with
a pure-Python header scan (untimed) and used by every case. Every case runs in its own process
(imports never timed, TF and tfrecord never next to tfrec_fast); repeats are interleaved round-robin;
tables show medians. Targets (tfrec_fast issue 4; reported, not enforced): DataLoader >= 10x the
tfrecord package and >= 2x TensorFlow's pipeline.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys

import _common as C
import make_example_data as D
import numpy as np
from _common import harness as H

# ---- cases -----------------------------------------------------------------------------------------
# --file is ex_mnist.tfrecord (index, label, 784-byte image_raw; 60k records) with its index
# FILE.idx (made by bench_torch.py). Every case yields batches of TORCH_BATCH samples to the
# training loop: image_raw as a uint8 [B, 28, 28] tensor and label as int64 [B]; run() iterates one
# full epoch and counts samples. DataLoaders are persistent (workers forked once, in setup/warm-up).

TORCH_BATCH = 256
TORCH_WORKERS = 2


def _torch_setup(opts):
    torch = H.need("torch")
    if D.dataset_of(opts.file) != "mnist":
        raise H.Skip("the DataLoader cases take the mnist data set")
    meta = D.example_meta("mnist")
    if meta is None:
        raise H.Skip(f"{opts.file} missing or stale: run bench/make_example_data.py")
    idx = C.index_path(opts.file)
    if not idx.exists():
        raise H.Skip(f"{idx} missing: bench_torch.py writes it")
    bs = opts.batch_records or TORCH_BATCH
    workers = TORCH_WORKERS if opts.workers is None else opts.workers
    return torch, meta, str(idx), bs, workers


def _dl_kwargs(workers):
    return dict(num_workers=workers, persistent_workers=workers > 0)


def _loader_case(torch, meta, loader, info, img="image_raw", label="label"):
    def run():
        n = 0
        for b in loader:
            n += len(b[label])
        return n

    def check():
        """One more epoch, untimed: types/shapes/dtypes of every batch, and the label histogram and the
        pixel sum of the whole epoch against the generator (the order differs between cases)."""
        hist, pix, n = np.zeros(10, np.int64), 0, 0
        for b in loader:
            x, y = b[img], b[label]
            if (
                not isinstance(x, torch.Tensor)
                or x.dtype != torch.uint8
                or tuple(x.shape[1:]) != (28, 28)
            ):
                return f"image batch is {type(x).__name__} {getattr(x, 'dtype', '')} {tuple(getattr(x, 'shape', ()))}"
            if (
                not isinstance(y, torch.Tensor)
                or y.dtype != torch.int64
                or y.dim() != 1
                or len(y) != len(x)
            ):
                return f"label batch is {type(y).__name__} {getattr(y, 'dtype', '')} {tuple(getattr(y, 'shape', ()))}"
            hist += np.bincount(y.numpy(), minlength=10)
            pix += int(x.sum(dtype=torch.int64))
            n += len(y)
        cols = D.mnist_columns(meta["n_records"], meta["seed"])
        if n != meta["n_records"]:
            return f"{n} samples in an epoch, expected {meta['n_records']}"
        if hist.tolist() != np.bincount(cols["label"], minlength=10).tolist():
            return "label histogram differs from the generated data"
        if pix != int(cols["image_raw"].sum(dtype=np.int64)):
            return "pixel sum differs from the generated data"
        return None

    return H.Body(run, check=check, info=info)


def _mnist_spec():
    from tfrec_fast.example import FixedLen

    return {"image_raw": FixedLen((28, 28), "uint8"), "label": FixedLen((), "int64")}


def dl_tfrec_fast_records(opts):
    H.need("tfrec_fast")
    torch, meta, idx, bs, workers = _torch_setup(opts)
    from tfrec_fast.torch import TFRecordDataset, collate

    ds = TFRecordDataset(opts.file, index=idx, spec=_mnist_spec())
    loader = torch.utils.data.DataLoader(
        ds, batch_size=bs, collate_fn=collate, **_dl_kwargs(workers)
    )
    return _loader_case(
        torch,
        meta,
        loader,
        f"tfrec_fast.torch.TFRecordDataset(file, index=FILE.idx, spec={{image_raw: FixedLen((28, 28), "
        f"'uint8'), label: FixedLen((), 'int64')}}) -> a dict of tensor views per sample; "
        f"DataLoader(batch_size={bs}, num_workers={workers}, collate_fn=tfrec_fast.torch.collate)",
    )


def dl_tfrec_fast_batched(opts):
    H.need("tfrec_fast")
    torch, meta, idx, bs, workers = _torch_setup(opts)
    from tfrec_fast.torch import TFRecordDataset

    ds = TFRecordDataset(opts.file, index=idx, spec=_mnist_spec(), batch_size=bs)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, **_dl_kwargs(workers))
    return _loader_case(
        torch,
        meta,
        loader,
        f"the same dataset with batch_size={bs} (one parse_examples per batch, columns -> "
        f"torch.from_numpy; batches reach the training process through the worker's "
        f"shared-memory ring); DataLoader(batch_size=None, num_workers={workers})",
    )


def dl_tfrec_fast_batched_noring(opts):
    """The batched dataset with worker_ring=False: torch's own per-tensor hand-over from the workers."""
    H.need("tfrec_fast")
    torch, meta, idx, bs, workers = _torch_setup(opts)
    from tfrec_fast.torch import TFRecordDataset

    ds = TFRecordDataset(opts.file, index=idx, spec=_mnist_spec(), batch_size=bs, worker_ring=False)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, **_dl_kwargs(workers))
    return _loader_case(
        torch,
        meta,
        loader,
        f"the same dataset with batch_size={bs}, worker_ring=False: each tensor of each batch "
        "handed over by torch (a new shared-memory segment, its file descriptor sent over a "
        f"socket); DataLoader(batch_size=None, num_workers={workers})",
    )


def dl_tfrec_fast_batched_inproc(opts):
    """The batched dataset with num_workers=0: reading and parsing in the training process (GIL released
    while reading and parsing), as tf.data runs there -- no worker -> main tensor transfer."""
    H.need("tfrec_fast")
    torch, meta, idx, bs, _ = _torch_setup(opts)
    from tfrec_fast.torch import TFRecordDataset

    ds = TFRecordDataset(opts.file, index=idx, spec=_mnist_spec(), batch_size=bs)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    return _loader_case(
        torch,
        meta,
        loader,
        f"the same dataset with batch_size={bs}; DataLoader(batch_size=None, num_workers=0): in "
        "the training process, like the tf.data row (informational: not the issue's setting)",
    )


def dl_tfrec_fast_indexed(opts):
    H.need("tfrec_fast")
    torch, meta, idx, bs, workers = _torch_setup(opts)
    from tfrec_fast.torch import IndexedTFRecordDataset, collate

    ds = IndexedTFRecordDataset(opts.file, _mnist_spec(), index=idx)
    sampler = torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(0))
    loader = torch.utils.data.DataLoader(
        ds, batch_size=bs, sampler=sampler, collate_fn=collate, **_dl_kwargs(workers)
    )
    return _loader_case(
        torch,
        meta,
        loader,
        f"tfrec_fast.torch.IndexedTFRecordDataset(file, spec, index=FILE.idx), RandomSampler "
        f"(exact shuffle, a new permutation every epoch); DataLoader(batch_size={bs}, "
        f"num_workers={workers}, collate_fn=tfrec_fast.torch.collate): __getitems__ = one "
        "get_batch + parse_examples per batch, then stacked and handed over through the ring",
    )


def _tfrecord_decode(x):
    """The transform given to the tfrecord package's dataset: bytes -> uint8 [28, 28], [label] -> int64 []."""
    import torch

    return {
        "image_raw": torch.from_numpy(
            np.frombuffer(x["image_raw"], dtype=np.uint8).reshape(28, 28)
        ),
        "label": torch.from_numpy(x["label"]).reshape(()),
    }


def dl_tfrecord(opts):
    torch, meta, idx, bs, workers = _torch_setup(opts)
    TFRecordDataset = H.need("tfrecord.torch.dataset").TFRecordDataset
    import warnings

    # np.frombuffer(bytes) is read-only; torch.from_numpy warns once about it (no copy is made)
    warnings.filterwarnings("ignore", message=".*not writable.*")
    ds = TFRecordDataset(
        opts.file,
        idx,
        description={"image_raw": "byte", "label": "int"},
        transform=_tfrecord_decode,
    )
    loader = torch.utils.data.DataLoader(ds, batch_size=bs, **_dl_kwargs(workers))
    return _loader_case(
        torch,
        meta,
        loader,
        f"tfrecord.torch.dataset.TFRecordDataset(file, FILE.idx, description={{'image_raw': 'byte', "
        f"'label': 'int'}}, transform=np.frombuffer(...).reshape(28, 28) -> torch.from_numpy); "
        f"DataLoader(batch_size={bs}, num_workers={workers}); the index shards the file across workers",
    )


class _TFToTorch:
    """Iterating yields the tf.data pipeline's batches as dicts of torch tensors."""

    def __init__(self, tf, torch, ds):
        self.tf, self.torch, self.ds = tf, torch, ds

    def __iter__(self):
        from_numpy = self.torch.from_numpy
        for b in self.ds:
            yield {
                "image_raw": from_numpy(b["image_raw"].numpy()),
                "label": from_numpy(b["label"].numpy()),
            }


def dl_tf(opts):
    torch, meta, idx, bs, workers = _torch_setup(opts)
    tf = H.need("tensorflow")
    features = {
        "image_raw": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(serialized):
        ex = tf.io.parse_example(serialized, features)
        img = tf.reshape(tf.io.decode_raw(ex["image_raw"], tf.uint8), [-1, 28, 28])
        return {"image_raw": img, "label": ex["label"]}

    ds = (
        tf.data.TFRecordDataset(opts.file)
        .batch(bs)
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    return _loader_case(
        torch,
        meta,
        _TFToTorch(tf, torch, ds),
        f"TF {tf.__version__}: tf.data.TFRecordDataset(file).batch({bs}).map(tf.io.parse_example + "
        "tf.io.decode_raw + reshape, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE); each batch "
        "-> torch.from_numpy(t.numpy()); no DataLoader (tf.data runs its own threads)",
    )


# ---------------------------------------------------------------------------------- random access
# --file is small_64b.tfrecord or large_100k.tfrecord with its index FILE.idx. Every case reads the
# same records: n_access indices drawn uniformly (seeded) in setup. Records/s counts records read.

RA_SEED = 7
RA_BATCH = 256
RA_DEFAULT_ACCESS = {"small_64b.tfrecord": 256 * 1024, "large_100k.tfrecord": 256 * 16}


def _ra_setup(opts):
    idx = C.index_path(opts.file)
    if not idx.exists():
        raise H.Skip(f"{idx} missing: bench_torch.py writes it")
    raw = np.array(idx.read_bytes().split(), dtype=np.int64).reshape(-1, 2)  # setup only
    offsets, sizes = raw[:, 0].copy(), raw[:, 1].copy()
    n = opts.n_access or RA_DEFAULT_ACCESS.get(os.path.basename(opts.file), 256 * 256)
    which = np.random.default_rng(RA_SEED).integers(0, len(offsets), size=n, dtype=np.int64)
    return idx, offsets, sizes, which


def _ra_expected(path, offsets, sizes, which, k=RA_BATCH) -> list[bytes]:
    """Payloads of the first k accessed records, read with plain pread (no CRC check)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return [os.pread(fd, int(sizes[i]) - 16, int(offsets[i]) + 12) for i in which[:k]]
    finally:
        os.close(fd)


def _ra_check(got, want) -> str | None:
    if len(got) != len(want):
        return f"{len(got)} records, expected {len(want)}"
    for j, (g, w) in enumerate(zip(got, want)):
        if bytes(g) != w:
            return f"access {j}: payload differs from pread at the index's offset"
    return None


def ra_tfrec_fast_batch(opts):
    H.need("tfrec_fast")
    from tfrec_fast.index import IndexedTFRecordReader, load_index

    idx, offsets, sizes, which = _ra_setup(opts)
    reader = IndexedTFRecordReader(opts.file, load_index(idx))
    chunks = [which[a : a + RA_BATCH] for a in range(0, len(which), RA_BATCH)]

    def check():
        return _ra_check(
            reader.get_batch(which[:RA_BATCH]).to_list(),
            _ra_expected(opts.file, offsets, sizes, which),
        )

    return H.Body(
        H.summing(lambda: map(reader.get_batch, chunks)),
        check=check,
        info=f"IndexedTFRecordReader(file, load_index(FILE.idx)).get_batch(int64 array of {RA_BATCH} "
        "random indices) per call; both CRCs and the index's sizes verified",
    )


def ra_tfrec_fast_single(opts):
    H.need("tfrec_fast")
    from tfrec_fast.index import IndexedTFRecordReader, load_index

    idx, offsets, sizes, which = _ra_setup(opts)
    reader = IndexedTFRecordReader(opts.file, load_index(idx))
    indices = which.tolist()

    def run():
        for i in indices:
            reader[i]
        return len(indices)

    def check():
        return _ra_check(
            [reader[i] for i in indices[:RA_BATCH]], _ra_expected(opts.file, offsets, sizes, which)
        )

    return H.Body(run, check=check, info="r[i] per record (Python int), both CRCs verified")


def ra_probe(opts):
    crc32c = H.need("crc32c")

    idx, offsets, sizes, which = _ra_setup(opts)
    offs, szs = offsets.tolist(), sizes.tolist()
    indices = which.tolist()
    path = opts.file
    crc, masked, unpack_from = crc32c.crc32c, C.masked, struct.unpack_from

    def read(fd, i):
        off, size = offs[i], szs[i]
        buf = os.pread(fd, size, off)
        (length,) = unpack_from("<Q", buf, 0)
        mv = memoryview(buf)
        if len(buf) != size or length != size - 16:
            raise ValueError(f"record {i}: length {length} does not match the index's size {size}")
        if unpack_from("<I", buf, 8)[0] != masked(crc(mv[:8])):
            raise ValueError(f"record {i}: length CRC mismatch")
        data = mv[12 : 12 + length]
        if unpack_from("<I", buf, 12 + length)[0] != masked(crc(data)):
            raise ValueError(f"record {i}: data CRC mismatch")
        return data

    def run():
        fd = os.open(path, os.O_RDONLY)
        try:
            for i in indices:
                read(fd, i)
        finally:
            os.close(fd)
        return len(indices)

    def check():
        fd = os.open(path, os.O_RDONLY)
        try:
            got = [read(fd, i) for i in indices[:RA_BATCH]]
        finally:
            os.close(fd)
        return _ra_check(got, _ra_expected(path, offsets, sizes, which))

    return H.Body(
        run,
        check=check,
        info="per record: os.pread(fd, size, offset) from the index + both CRCs with the "
        "`crc32c` package, in Python (the tfrecord package has no random access)",
    )


# name -> (row label, setup). Labels are what the tables show.


DATALOADER = [
    H.Case(
        "dl_tfrec_fast_batched", "tfrec_fast TFRecordDataset(batch_size=256)", dl_tfrec_fast_batched
    ),
    H.Case(
        "dl_tfrec_fast_records", "tfrec_fast TFRecordDataset (per sample)", dl_tfrec_fast_records
    ),
    H.Case(
        "dl_tfrec_fast_indexed",
        "tfrec_fast IndexedTFRecordDataset + RandomSampler",
        dl_tfrec_fast_indexed,
    ),
    H.Case(
        "dl_tfrec_fast_batched_noring",
        "tfrec_fast TFRecordDataset(batch_size=256, worker_ring=False)",
        dl_tfrec_fast_batched_noring,
    ),
    H.Case(
        "dl_tfrec_fast_batched_inproc",
        "tfrec_fast TFRecordDataset(batch_size=256), num_workers=0",
        dl_tfrec_fast_batched_inproc,
    ),
    H.Case("dl_tfrecord", "tfrecord TFRecordDataset (with index)", dl_tfrecord),
    H.Case("dl_tf", "TensorFlow tf.data -> torch.from_numpy", dl_tf),
]
RANDOM_ACCESS = [
    H.Case("ra_tfrec_fast_batch", "tfrec_fast get_batch(256 random)", ra_tfrec_fast_batch),
    H.Case("ra_tfrec_fast_single", "tfrec_fast r[i]", ra_tfrec_fast_single),
    H.Case("ra_probe", "probe: os.pread + crc32c in Python", ra_probe),
]
TARGET_TFRECORD, TARGET_TF = 10.0, 2.0

# ---- tables ------------------------------------------------------------------------------------------


def dl_columns(meta):
    def mine(r):
        return r.name.startswith("dl_tfrec_fast")

    return [
        H.per_second("samples/s", meta["n_records"]),
        H.Versus("vs tfrecord", "dl_tfrecord", target=TARGET_TFRECORD, mine=mine),
        H.Versus("vs TF tf.data", "dl_tf", target=TARGET_TF, mine=mine),
        *H.timing(".3f"),
    ]


def ra_columns(meta, n_access):
    payload = meta["payload_bytes"] / meta["n_records"] if meta.get("payload_bytes") else None
    return [
        H.per_second("records/s", n_access),
        H.per_second("MB/s (payload, approx.)", payload and n_access * payload / 1e6, ".0f"),
        H.Versus("vs probe", "ra_probe"),
        *H.timing(".4f"),
    ]


HAND_OVER = (
    "With num_workers > 0 every batch crosses from a DataLoader worker to the training process. torch's own "
    "way (the worker_ring=False row, and the tfrecord row) moves each tensor to a new shared-memory segment "
    "and hands its file descriptor over a socket, a fixed cost per tensor; tfrec_fast's batches "
    "(batch_size=B, or collate_fn=tfrec_fast.torch.collate) go through a shared-memory ring each worker "
    "sends once. The tf.data row runs in the training process"
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=5, min_time=0.5)
    ap.add_argument(
        "--datasets", default="small,large", help="random access: comma list of small, large"
    )
    ap.add_argument("--workers", type=int, default=TORCH_WORKERS, help="DataLoader num_workers")
    ap.add_argument("--batch-size", type=int, default=TORCH_BATCH, help="DataLoader batch size")
    ap.add_argument(
        "--n-access",
        type=int,
        default=None,
        help="random accesses per run (default: 262,144 small, 4,096 large)",
    )
    ap.add_argument("--no-dataloader", action="store_true")
    ap.add_argument("--no-random-access", action="store_true")
    args = ap.parse_args(argv)

    md = [
        C.header(
            args,
            "✅/❌ mark the tfrec_fast targets (DataLoader ≥10x the tfrecord package, ≥2x TensorFlow's "
            "tf.data pipeline). Indexes (FILE.idx, tfrecord/DALI format) are made before timing.",
        )
    ]
    raw, summary = {}, []
    timing = H.timing_options(args)

    if not args.no_dataloader:
        meta, path = D.example_meta("mnist"), D.example_path("mnist")
        if meta is None:
            print(
                f"error: {path} missing or stale: run bench/make_example_data.py first",
                file=sys.stderr,
            )
            return 2
        C.ensure_index_py(path)
        print(f"== DataLoader: {path}", file=sys.stderr)
        res = H.measure(
            H.select(DATALOADER, args.cases),
            {"file": str(path), "batch_records": args.batch_size, "workers": args.workers},
            log_dir=C.log_dir("dataloader"),
            **timing,
        )
        H.expect_records(res, meta["n_records"])
        columns = dl_columns(meta)
        text, notes = H.table(res, columns)
        title = (
            f"DataLoader: one epoch of {meta['label']} ({meta['n_records']:,} records), batches of "
            f"{args.batch_size}, num_workers={args.workers}"
        )
        md.append(H.section(title, text, notes + [HAND_OVER]))
        summary += H.targets(res, columns, "DataLoader")
        raw["dataloader"] = H.raw(res)

    if not args.no_random_access:
        for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
            meta, path = C.load_meta(name), C.data_path(name)
            if meta is None:
                print(
                    f"error: {path} missing or stale: run bench/make_data.py first", file=sys.stderr
                )
                return 2
            C.ensure_index_py(path)
            n_access = args.n_access or RA_DEFAULT_ACCESS.get(path.name, RA_BATCH * 256)
            print(f"== random access {name}: {path} ({n_access} accesses per run)", file=sys.stderr)
            res = H.measure(
                H.select(RANDOM_ACCESS, args.cases),
                {"file": str(path), "n_access": n_access},
                log_dir=C.log_dir(f"random-{name}"),
                **timing,
            )
            H.expect_records(res, n_access)
            title = (
                f"Random access: {meta.get('label', name)} ({meta['n_records']:,} records), "
                f"{n_access:,} uniform random records per run"
            )
            md.append(H.section(title, *H.table(res, ra_columns(meta, n_access))))
            raw[f"random_{name}"] = H.raw(res)

    return H.emit(md, raw, args.markdown, args.json, summary)


if __name__ == "__main__":
    sys.exit(main())
