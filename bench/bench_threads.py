#!/usr/bin/env python3
"""Issue #12's table: every entry point on 64 B .. 10 MB records, 1 and 2 threads, against the peers
(TensorFlow tf.data / tf.io.parse_example, the `tfrecord` package, Parquet via pyarrow) measured in
the same run, on the project's harness (bench/harness.py, see bench/README.md).

    python bench/bench_threads.py --make-data          # bench/data/threads/ (~1.5 GB), seeded
    python bench/bench_threads.py [--repeats 3] [--only SUBSTR] [--no-rss] [--markdown out.md] [--json out.json]

Run it with a Python that has tfrec_fast (PYTHONPATH=src with the built _core) and the peers.
Each table is one harness.measure(): every row is a case in its own process (peers are never
imported next to tfrec_fast; OPENBLAS_NUM_THREADS=1, see main()), the processes stay alive and are
driven round-robin, a warm-up run, then ``--repeats`` samples (a sample averages K back-to-back
runs of a case faster than ``--min-time``); the table shows the median sample, and every ratio is
between two rows of the same table. Page cache warm (every case reads its file in its setup).
Peak RSS: harness.measure_rss, one run in a fresh process (ru_maxrss, and ru_maxrss minus VmRSS
after the setup).

A row's case name is ``CASE:DATA:THREADS`` (plus ``:VARIANT`` for a few), for example
``read_examples:ex100k:2``; ``--cases`` takes a comma list of them, ``--only`` a substring of the
table title or row label.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import _common as C
from _common import harness as H

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "threads")

# name -> (records, payload size of the bytes feature) of the Example files {image_raw, label}
SIZED = {
    "ex64": (1_000_000, 30),
    "ex1k": (200_000, 1000),
    "ex100k": (4_000, 110_000),
    "ex10m": (40, 10_000_000),
}
# records in each data file
N_RECORDS = {
    **{k: n for k, (n, _) in SIZED.items()},
    "mnist": 60_000,
    "tutorial": 100_000,
    "voc": 20_000,
    "raw64": 2_000_000,
}


# ---- data --------------------------------------------------------------------------------------


def make_data() -> None:
    import numpy as np

    import tfrec_fast as tfr

    os.makedirs(DATA, exist_ok=True)
    rng = np.random.default_rng(12)
    for name, (n, size) in SIZED.items():
        with tfr.TFRecordWriter(_path(name)) as w:
            for start in range(0, n, 1000):
                k = min(1000, n - start)
                blob = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
                w.write_examples(
                    {
                        "image_raw": [blob] * k,  # incompressible, JPEG-like
                        "label": np.arange(start, start + k) % 10,
                    }
                )
    n = 60_000  # MNIST-like: index, label, 784 raw pixels
    mnist = {
        "index": np.arange(n),
        "label": rng.integers(0, 10, n),
        "image_raw": [rng.integers(0, 256, 784, dtype=np.uint8).tobytes() for _ in range(n)],
    }
    n = 100_000  # TensorFlow's tutorial records: a bool, an int, a word, a float
    words = [b"cat", b"dog", b"chicken", b"horse", b"goat"]
    tutorial = {
        "feature0": rng.integers(0, 2, n),
        "feature1": rng.integers(0, 5, n),
        "feature2": [words[i] for i in rng.integers(0, 5, n)],
        "feature3": rng.standard_normal(n).astype(np.float32),
    }
    n = 20_000  # VOC-like: image bytes, size, 0..6 boxes (VarLen floats, labels, texts)
    objects = rng.integers(0, 7, n)
    voc = {
        "image": [
            rng.integers(0, 256, int(s), dtype=np.uint8).tobytes()
            for s in rng.integers(2000, 6000, n)
        ],
        "height": rng.integers(200, 500, n),
        "width": rng.integers(200, 500, n),
        "xmin": [rng.random(k).astype(np.float32) for k in objects],
        "ymin": [rng.random(k).astype(np.float32) for k in objects],
        "label": [rng.integers(0, 20, k) for k in objects],
        "text": [[b"person"] * int(k) for k in objects],
    }
    for name, cols in (("mnist", mnist), ("tutorial", tutorial), ("voc", voc)):
        with tfr.TFRecordWriter(_path(name)) as w:
            w.write_examples(cols)
        _write_parquet(name, cols)
    with tfr.TFRecordWriter(_path("raw64")) as w:  # 2M raw 64-byte records
        blob = rng.integers(0, 256, 64 * 2_000_000, dtype=np.uint8).tobytes()
        for start in range(0, len(blob), 64 * 65536):
            chunk = blob[start : start + 64 * 65536]
            w.write_batch([chunk[i : i + 64] for i in range(0, len(chunk), 64)])
    for name in list(SIZED) + ["mnist"]:
        with open(_path(name) + ".idx", "w") as f:  # the tfrecord package's index format
            offsets, sizes = tfr.create_index(_path(name))
            f.writelines(f"{o} {s}\n" for o, s in zip(offsets.tolist(), sizes.tolist()))


def _write_parquet(name, cols) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            k: (
                pa.array(v)
                if isinstance(v, np.ndarray)
                else pa.array([list(x) if isinstance(x, (list, np.ndarray)) else x for x in v])
            )
            for k, v in cols.items()
        }
    )
    pq.write_table(table, _path(name).replace(".tfrecord", ".parquet"), compression="none")


def _scratch() -> str:
    """A path for a case's output, removed when its process exits."""
    import atexit
    import shutil
    import tempfile

    d = tempfile.mkdtemp(dir=DATA, prefix="scratch-")
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return os.path.join(d, "out")


def _path(name: str) -> str:
    return os.path.join(DATA, name + ".tfrecord")


# ---- cases: each returns run() -> records handled ---------------------------------------------


def _specs(tfr):
    return {
        "mnist": {
            "index": tfr.FixedLen((), "int64"),
            "label": tfr.FixedLen((), "int64"),
            "image_raw": tfr.FixedLen((), "bytes"),
        },
        "tutorial": {
            "feature0": tfr.FixedLen((), "int64"),
            "feature1": tfr.FixedLen((), "int64"),
            "feature2": tfr.FixedLen((), "bytes"),
            "feature3": tfr.FixedLen((), "float32"),
        },
        "voc": {
            "image": tfr.FixedLen((), "bytes"),
            "height": tfr.FixedLen((), "int64"),
            "width": tfr.FixedLen((), "int64"),
            "xmin": tfr.VarLen("float32"),
            "ymin": tfr.VarLen("float32"),
            "label": tfr.VarLen("int64"),
            "text": tfr.VarLen("bytes"),
        },
        "sized": {"image_raw": tfr.FixedLen((), "bytes"), "label": tfr.FixedLen((), "int64")},
    }


def _spec_for(tfr, data):
    return _specs(tfr)["sized" if data in SIZED else data]


_CHECK_KEY = {"mnist": "label", "tutorial": "feature1", "voc": "height"}


def _check_first(data, first_batch: Callable[[], dict]) -> Callable[[], Optional[str]]:
    """A check(): the first batch's int64 column against what make_data() wrote (sized files:
    label = record number % 10; the others: the Parquet file of the same columns)."""
    import numpy as np

    def check():
        cols = first_batch()
        if data in SIZED:
            key, got = "label", np.asarray(cols["label"]).reshape(-1)
            want = np.arange(len(got)) % 10
        else:
            import pyarrow.parquet as pq

            key = _CHECK_KEY[data]
            got = np.asarray(cols[key]).reshape(-1)
            want = (
                pq.read_table(_path(data).replace(".tfrecord", ".parquet"), columns=[key])
                .column(0)
                .to_numpy()[: len(got)]
            )
        if len(got) == 0 or not np.array_equal(got, want):
            return f"{data}: column {key} of the first batch differs from the data written"
        return None

    return check


def case_raw_batches(data, threads):
    import tfrec_fast as tfr

    def run():
        with tfr.TFRecordReader(_path(data)) as r:
            return sum(len(b) for b in r.iter_batches(num_threads=threads))

    return run


def case_raw_batches_x4(data, threads):
    """read_batches over the file named 4 times (4 shards), 512 KiB batches, 1 thread."""
    import tfrec_fast as tfr

    def run():
        return sum(len(b) for b in tfr.read_batches([_path(data)] * 4, num_threads=1))

    return run


def case_read_examples_x4(data, threads):
    """read_examples over the file named 4 times: one call long enough for the steady state."""
    import tfrec_fast as tfr

    spec = _spec_for(tfr, data)
    first = next(iter(spec))

    def run():
        return sum(
            len(c[first]) for c in tfr.read_examples([_path(data)] * 4, spec, num_threads=threads)
        )

    return run


def case_read_records(data, threads):
    import tfrec_fast as tfr

    def run():
        n = 0
        for _ in tfr.read_records(_path(data), num_threads=threads):
            n += 1
        return n

    return run


def case_read_examples(data, threads):
    import tfrec_fast as tfr

    spec = _spec_for(tfr, data)
    first = next(iter(spec))

    def run():
        return sum(len(c[first]) for c in tfr.read_examples(_path(data), spec, num_threads=threads))

    return H.Body(
        run,
        check=_check_first(
            data, lambda: next(iter(tfr.read_examples(_path(data), spec, num_threads=threads)))
        ),
        info=f"read_examples(path, spec, num_threads={threads}), default batch_size",
    )


def case_iter_parse(data, threads):
    import tfrec_fast as tfr

    spec = _spec_for(tfr, data)
    first = next(iter(spec))

    def run():
        with tfr.TFRecordReader(_path(data)) as r:
            return sum(
                len(tfr.parse_examples(b, spec)[first]) for b in r.iter_batches(num_threads=1)
            )

    def first_batch():
        with tfr.TFRecordReader(_path(data)) as r:
            return tfr.parse_examples(next(r.iter_batches(num_threads=1)), spec)

    return H.Body(run, check=_check_first(data, first_batch))


def _batch_size(variant: str) -> int:
    """Records a batch: 1024, or N for a variant "bN"."""
    return int(variant[1:]) if variant.startswith("b") else 1024


def _in_cache(batches: list, variant: str, first: Callable[[int], object]) -> list:
    """Variant "hot": in place of each batch, the first batch again, cut to the same number of
    records by first(n) (the same records parsed, one batch's bytes in cache), to tell the
    parse's cost from the memory's."""
    if variant != "hot":
        return batches
    return [batches[0] if len(b) == len(batches[0]) else first(len(b)) for b in batches]


def _parse_setup(tfr, data, size: int = 1024) -> tuple:
    """The parse rows' set-up: the data set's spec, its first feature's name (the one counted),
    and the file's RecordBatches of `size` records, read into memory."""
    spec = _spec_for(tfr, data)
    with tfr.TFRecordReader(_path(data)) as r:
        batches = list(r.iter_batches(max_records=size, num_threads=1))
    return spec, next(iter(spec)), batches


def _as_arrays(tfr, data, spec: dict) -> dict:
    """Variant "arr" of the sized files: image_raw as FixedLen((size,), "uint8"), one array of
    [records, size] a batch (a large fixed-size column: decoded into the shared buffer pool)."""
    return {**spec, "image_raw": tfr.FixedLen((SIZED[data][1],), "uint8")}


def case_parse_memory(data, threads, variant=""):
    """parse_examples(batch, spec, num_threads=threads) on 1024-record RecordBatches already in
    memory (variant "pool": num_threads=1 calls on a ThreadPoolExecutor(threads).map instead;
    variant "bN": batches of N records; variant "hot": see _in_cache; variant "arr": see
    _as_arrays; "arrfresh": the same with a buffer pool that keeps nothing, so every column is
    fresh memory, as before columns were pooled)."""
    from concurrent.futures import ThreadPoolExecutor

    import tfrec_fast as tfr

    size = _batch_size(variant)
    spec, first, batches = _parse_setup(tfr, data, size)
    if variant.startswith("arr"):
        spec = _as_arrays(tfr, data, spec)
    if variant == "arrfresh":  # private: the pool parse_examples takes its column buffers from
        from tfrec_fast import _buffers, _core

        _buffers._POOL = _core.BufferPool(0)
    batches = _in_cache(
        batches, variant, lambda n: tfr.RecordBatch.from_records(batches[0].to_list()[:n])
    )
    pool = ThreadPoolExecutor(threads) if variant == "pool" else None
    inner = 1 if pool else threads

    def parse(b):
        return len(tfr.parse_examples(b, spec, num_threads=inner)[first])

    def run():
        return sum(pool.map(parse, batches) if pool else map(parse, batches))

    how = (
        f"num_threads=1 calls on a ThreadPoolExecutor({threads}).map"
        if pool
        else f"num_threads={threads}"
    )
    return H.Body(
        run,
        check=_check_first(data, lambda: tfr.parse_examples(batches[0], spec)),
        info=f"{len(batches)} RecordBatches of {size} read in setup, {how}",
    )


def case_parse_alternated(data, threads, variant=""):
    """parse_examples on the same 1024-record batches as parse_memory, each batch parsed with
    num_threads=1 and with num_threads=`threads`, in turns (which goes first alternates), timed
    call by call. One process and the same moments for both: on this VM one process can run the
    same loop up to 2x slower than the next, and one for seconds at a time, which decides a ratio
    of rows measured in separate processes. extras: each setting's seconds a run. Variant "gapN":
    N us of busy work (not timed) before each call, as a training step between batches: longer
    than the pool's workers look for work (1 ms), so every call finds them asleep."""
    import tfrec_fast as tfr

    spec, first, batches = _parse_setup(tfr, data)
    clock = time.perf_counter
    settings = (1, threads)
    spent = [0.0, 0.0]  # seconds of the calls at each setting, this sample so far
    runs = [0]
    gap_us = int(variant[len("gap") :]) if variant.startswith("gap") else 0
    gap = gap_us / 1e6

    def run():
        n = 0
        for i, b in enumerate(batches):
            for k in (0, 1) if i % 2 == 0 else (1, 0):
                busy_until = clock() + gap
                while clock() < busy_until:
                    pass
                start = clock()
                n += len(tfr.parse_examples(b, spec, num_threads=settings[k])[first])
                spent[k] += clock() - start
        runs[0] += 1
        return n // 2

    def extras():
        out = {"one_thread_s": spent[0] / runs[0], "threads_s": spent[1] / runs[0]}
        spent[:] = [0.0, 0.0]
        runs[0] = 0
        return out

    return H.Body(
        run,
        check=_check_first(data, lambda: tfr.parse_examples(batches[0], spec)),
        extras=extras,
        info=f"{len(batches)} RecordBatches of 1024 read in setup; records/s "
        "counts each record once, the time is both calls'"
        + (f" and the gaps ({gap_us} us before each)" if gap_us else ""),
    )


def alternated_ratio(r: H.Result) -> Optional[float]:
    """parse_alternated: the median over its samples of 1-thread seconds / k-thread seconds."""
    one, many = r.extra.get("one_thread_s"), r.extra.get("threads_s")
    if not r.ok or not one or not many:
        return None
    return statistics.median(a / b for a, b in zip(one, many))


def case_torch_batched(data, threads, variant=""):
    """TFRecordDataset(batch_size=256) iterated in this process (the in-worker path). Variant
    "keepheap": glibc told to keep freed memory (what MALLOC_TRIM_THRESHOLD_,
    MALLOC_TOP_PAD_ and MALLOC_MMAP_THRESHOLD_ do from the environment), so the per-record ``bytes`` of large records
    reuse pages instead of faulting in fresh ones every batch. Variant "array": image_raw read as
    FixedLen((size,), "uint8"), a [256, size] uint8 tensor per batch, as the peers' default
    collate gives, instead of a list of ``bytes``."""
    import tfrec_fast as tfr

    if variant == "keepheap":
        _keep_heap()
    from tfrec_fast.torch import TFRecordDataset

    spec = _spec_for(tfr, data)
    if variant == "array":
        spec = {
            "image_raw": tfr.FixedLen((SIZED[data][1],), "uint8"),
            "label": tfr.FixedLen((), "int64"),
        }
    ds = TFRecordDataset(_path(data), spec=spec, batch_size=256, num_threads=threads)

    def run():
        return sum(len(b["label"]) for b in ds)

    return H.Body(run, check=_check_first(data, lambda: next(iter(ds))))


def _keep_heap() -> None:
    import ctypes

    libc = ctypes.CDLL(None)
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3  # glibc's malloc.h
    if not (
        libc.mallopt(m_trim_threshold, 1 << 30)
        and libc.mallopt(m_top_pad, 256 << 20)
        and libc.mallopt(m_mmap_threshold, 32 << 20)
    ):
        raise RuntimeError("mallopt refused")


def case_raw_copy(data, threads):
    """The raw batched read plus one copy of each batch's bytes into a buffer of 256 records'
    worth (the file's, if fewer) that stays allocated, as a caller's batch does: what any entry
    point pays at least when it hands out its own copy of the records (torch_batched's arrays or
    list of bytes), whatever it does in between."""
    import numpy as np

    import tfrec_fast as tfr

    n, size = SIZED[data]
    held = np.empty(min(n, 256) * (size + 64), np.uint8)  # (64: the label and the framing)

    def run():
        at = count = 0
        with tfr.TFRecordReader(_path(data)) as r:
            for batch in r.iter_batches(num_threads=1):
                src = batch.data
                if at + len(src) > len(held):
                    at = 0
                np.copyto(held[at : at + len(src)], src)
                at += len(src)
                count += len(batch)
        return count

    return run


def case_get_batch(data, threads):
    """IndexedTFRecordReader.get_batch of 256 random records (all of them in random order when
    the file has fewer), 64 MiB of records per pass at least."""
    import numpy as np

    import tfrec_fast as tfr

    r = tfr.IndexedTFRecordReader(_path(data))
    n = len(r)
    rng = np.random.default_rng(3)
    per = min(256, n)
    calls = max(1, (64 << 20) // max(1, r.get_batch(range(per)).nbytes))
    # choice, not permutation(n)[:per]: a view would keep each call's whole permutation alive
    picks = [rng.choice(n, per, replace=False) for _ in range(calls)]

    def run():
        return sum(len(r.get_batch(p)) for p in picks)

    return run


def case_convert(data, threads):
    """convert_numpy of the records' bytes (as a [N, size] uint8 array) and labels to shards."""
    import shutil

    import numpy as np

    from tfrec_fast.convert import convert_numpy

    n = _convert_n(data)
    size = SIZED[data][1]
    arrays = {
        "image": np.random.default_rng(1).integers(0, 256, (n, size), dtype=np.uint8),
        "label": np.arange(n),
    }
    out = _scratch()

    def run():
        shutil.rmtree(out, ignore_errors=True)
        convert_numpy(arrays, out, workers=threads, progress=False, overwrite=True)
        return n

    return H.Body(run, info=f"{n:,} rows, workers={threads}")


def case_probe(data, threads):
    """pread(1 MiB) + CRC32C of the whole file: the ceiling, no framing."""
    import tfrec_fast as tfr

    meta = {"raw64": 2_000_000}

    def run():
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        c = 0
        with open(_path(data), "rb", buffering=0) as f:
            while True:
                k = f.readinto(buf)
                if not k:
                    break
                c = tfr.crc32c(view[:k], c)
        return meta.get(data, 0)

    return run


def case_write_each(data, threads):
    import tfrec_fast as tfr

    with tfr.TFRecordReader(_path(data)) as r:
        records = [bytes(x) for x in r]
    out = _scratch()

    def run():
        with tfr.TFRecordWriter(out) as w:
            write = w.write
            for rec in records:
                write(rec)
        return len(records)

    return H.Body(run, check=_check_written(tfr, out, records))


def case_write_batch(data, threads):
    import tfrec_fast as tfr

    with tfr.TFRecordReader(_path(data)) as r:
        records = [bytes(x) for x in r]
    out = _scratch()

    def run():
        with tfr.TFRecordWriter(out) as w:
            w.write_batch(records)
        return len(records)

    return H.Body(run, check=_check_written(tfr, out, records))


def _check_written(tfr, out, records):
    def check():
        with tfr.TFRecordReader(out) as r:
            back = [bytes(x) for x in r]
        return (
            None if back == records else f"{out}: the records read back differ from those written"
        )

    return check


# -- peers


def case_tfrecord_examples(data, threads):
    """The tfrecord package's example loader: reading plus per-record protobuf parsing."""
    tfrecord_loader = H.need("tfrecord.reader").tfrecord_loader
    desc = {
        "mnist": {"index": "int", "label": "int", "image_raw": "byte"},
        "tutorial": {"feature0": "int", "feature1": "int", "feature2": "byte", "feature3": "float"},
        "voc": {
            "image": "byte",
            "height": "int",
            "width": "int",
            "xmin": "float",
            "ymin": "float",
            "label": "int",
            "text": "byte",
        },
    }.get(data, {"image_raw": "byte", "label": "int"})

    def run():
        n = 0
        for _ in tfrecord_loader(_path(data), None, desc):
            n += 1
        return n

    return run


def case_tfrecord_records(data, threads):
    tfrecord_iterator = H.need("tfrecord.reader").tfrecord_iterator

    def run():
        n = 0
        for _ in tfrecord_iterator(_path(data)):
            n += 1
        return n

    return run


def case_tfrecord_write(data, threads):
    from tfrecord.reader import tfrecord_loader
    from tfrecord.writer import TFRecordWriter

    desc = {"index": "int", "label": "int", "image_raw": "byte"}
    rows = [
        {
            "index": (int(e["index"][0]), "int"),
            "label": (int(e["label"][0]), "int"),
            "image_raw": (bytes(e["image_raw"]), "byte"),
        }
        for e in tfrecord_loader(_path(data), None, desc)
    ]
    return _tfrecord_writes(TFRecordWriter, rows)


def _tfrecord_writes(writer_class, items):
    """A run: the tfrecord package's writer writes `items` (one write() each) to a scratch file."""
    out = _scratch()

    def run():
        w = writer_class(out)
        for item in items:
            w.write(item)
        w.close()
        return len(items)

    return run


def case_tfrecord_write_raw(data, threads):
    """The tfrecord package's writer on serialized records (its Example building bypassed, as
    bench/_cases.py does): only its framing code runs."""
    from tfrecord.writer import TFRecordWriter

    import tfrec_fast as tfr

    TFRecordWriter.serialize_tf_example = staticmethod(lambda datum: datum)
    with tfr.TFRecordReader(_path(data)) as r:
        records = [bytes(x) for x in r]
    return _tfrecord_writes(TFRecordWriter, records)


def _tf_features(tf, data):
    fixed = tf.io.FixedLenFeature
    if data == "mnist":
        return {
            "index": fixed([], tf.int64),
            "label": fixed([], tf.int64),
            "image_raw": fixed([], tf.string),
        }
    if data == "tutorial":
        return {
            "feature0": fixed([], tf.int64),
            "feature1": fixed([], tf.int64),
            "feature2": fixed([], tf.string),
            "feature3": fixed([], tf.float32),
        }
    if data == "voc":
        var = tf.io.VarLenFeature
        return {
            "image": fixed([], tf.string),
            "height": fixed([], tf.int64),
            "width": fixed([], tf.int64),
            "xmin": var(tf.float32),
            "ymin": var(tf.float32),
            "label": var(tf.int64),
            "text": var(tf.string),
        }
    return {"image_raw": fixed([], tf.string), "label": fixed([], tf.int64)}


def case_tf_data(data, threads, batch="1024"):
    """tf.data: TFRecordDataset -> batch(1024) -> map(parse_example, AUTOTUNE) -> prefetch."""
    tf = H.need("tensorflow")
    features = _tf_features(tf, data)
    ds = (
        tf.data.TFRecordDataset(_path(data))
        .batch(int(batch))
        .map(lambda s: tf.io.parse_example(s, features), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    key = next(iter(features))

    def run():
        n = 0
        for b in ds:
            n += (
                int(tf.shape(b[key])[0])
                if not isinstance(b[key], tf.SparseTensor)
                else int(b[key].dense_shape[0])
            )
        return n

    return run


def case_tf_parse(data, threads, variant="", eager=False):
    """tf.io.parse_example (tf.function) on 1024-record batches already in memory (variant "bN":
    batches of N records; variant "hot": see _in_cache; variant "arr": image_raw decoded to
    [records, size] uint8 by tf.io.decode_raw). threads 1: TensorFlow's op thread pools
    cut to one thread (its parse splits a batch into minibatches it parses on all cores);
    otherwise its default pools."""
    tf = H.need("tensorflow")
    if threads == 1:  # before any op runs: this case has its process to itself
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    features = _tf_features(tf, data)
    records = [r.numpy() for r in tf.data.TFRecordDataset(_path(data))]
    size = _batch_size(variant)
    batches = _in_cache(
        [tf.constant(records[i : i + size]) for i in range(0, len(records), size)],
        variant,
        lambda n: tf.constant(records[:n]),
    )

    def parse_example(s):
        parsed = tf.io.parse_example(s, features)
        if variant == "arr":  # TF has no uint8 feature: bytes, then decode_raw as its users do
            parsed["image_raw"] = tf.io.decode_raw(parsed["image_raw"], tf.uint8)
        return parsed

    parse = parse_example if eager else tf.function(parse_example)

    def run():
        for b in batches:
            parse(b)
        return len(records)

    return run


def case_tf_parse_eager(data, threads, variant=""):
    """tf.io.parse_example called eagerly (a small batch's call costs less than a tf.function's)."""
    return case_tf_parse(data, threads, variant, eager=True)


def case_tf_records(data, threads):
    tf = H.need("tensorflow")
    ds = tf.data.TFRecordDataset(_path(data)).batch(1024).prefetch(tf.data.AUTOTUNE)

    def run():
        return sum(int(tf.shape(b)[0]) for b in ds)

    return run


def case_parquet(data, threads):
    """pyarrow.parquet.read_table of the same data (threads 1: use_threads=False)."""
    pq = H.need("pyarrow.parquet")
    path = _path(data).replace(".tfrecord", ".parquet")

    def run():
        return pq.read_table(path, use_threads=threads > 1).num_rows

    return run


# -- DataLoader (MNIST-like, 2 workers, 256 per batch): run() is one epoch; the workers persist,
#    so the warm-up pass pays their start and the timed passes are the steady state


def _dl(loader, first_key, persistent):
    """run() is one epoch; extras: the seconds from iter(loader) to the first batch (with
    persistent workers, after the first epoch: no worker start). With persistent workers the
    first epoch runs here, untimed, and its first batch (the workers' start) goes into info."""
    firsts: list = []

    def epoch():
        t0 = time.perf_counter()
        it = iter(loader)
        n = len(next(it)[first_key])
        firsts.append(time.perf_counter() - t0)
        return n + sum(len(b[first_key]) for b in it)

    info = ""
    if persistent:
        epoch()
        info = f"cold start (first epoch, untimed): first batch after {firsts[0]:.3f} s"
        firsts.clear()

    def extras():
        out = {"first_batch_s": statistics.mean(firsts)} if firsts else {}
        firsts.clear()
        return out

    return H.Body(epoch, info=info, extras=extras)


def _loader(ds, batch_size, workers, variant):
    import torch

    persistent = variant == "p" and workers > 0
    return torch.utils.data.DataLoader(
        ds, batch_size=batch_size, num_workers=workers, persistent_workers=persistent
    ), persistent


def case_dl_dropin(data, threads, variant="p"):
    """tfrec_fast.torch.TFRecordDataset(path, index, description), torch's default collate."""
    H.need("torch")
    from tfrec_fast.torch import TFRecordDataset

    ds = TFRecordDataset(_path(data), _path(data) + ".idx", {"image_raw": "byte", "label": "int"})
    loader, persistent = _loader(ds, 256, threads, variant)
    return _dl(loader, "label", persistent)


def case_dl_batched(data, threads, variant="p"):
    """TFRecordDataset(batch_size=256) + DataLoader(batch_size=None, num_workers=threads)."""
    H.need("torch")
    import tfrec_fast as tfr
    from tfrec_fast.torch import TFRecordDataset

    ds = TFRecordDataset(
        _path(data),
        spec={"image_raw": tfr.FixedLen((28, 28), "uint8"), "label": tfr.FixedLen((), "int64")},
        batch_size=256,
    )
    loader, persistent = _loader(ds, None, threads, variant)
    return _dl(loader, "label", persistent)


def case_dl_tfrecord(data, threads, variant="p"):
    """The tfrecord package's TFRecordDataset(path, index, description) in the same DataLoader."""
    H.need("torch")
    TFRecordDataset = H.need("tfrecord.torch.dataset").TFRecordDataset
    ds = TFRecordDataset(_path(data), _path(data) + ".idx", {"image_raw": "byte", "label": "int"})
    loader, persistent = _loader(ds, 256, threads, variant)
    return _dl(loader, "label", persistent)


# ---- rows and their processes -------------------------------------------------------------------


@dataclass
class Row:
    table: str
    name: str  # CASE:DATA:THREADS[:VARIANT]
    label: str
    rss: bool = False  # also measured by harness.measure_rss

    @property
    def case(self) -> str:
        return self.name.split(":")[0]

    @property
    def data(self) -> str:
        return self.name.split(":")[1]

    @property
    def threads(self) -> int:
        return int(self.name.split(":")[2])

    @property
    def variant(self) -> str:
        parts = self.name.split(":")
        return parts[3] if len(parts) > 3 else ""


def _warm(path: str) -> None:
    """The file into the page cache, through a small buffer (the RSS baseline stays small)."""
    if not os.path.exists(path):
        return
    buf = bytearray(1 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def setup(opts) -> H.Body:
    """Every row's setup: the case function named by the row, on its data and thread count."""
    row = ROWS[opts.case]
    if not os.path.exists(_path(row.data)):
        raise H.Skip(f"{_path(row.data)} missing: run bench/bench_threads.py --make-data")
    if row.case.startswith(("tf_", "dl_", "tfrecord", "parquet")):
        pass
    else:
        H.need("tfrec_fast")
    made = globals()["case_" + row.case](
        row.data, row.threads, *([row.variant] if row.variant else [])
    )
    body = made if isinstance(made, H.Body) else H.Body(made)
    _warm(_path(row.data))
    return body


ROWS: Dict[str, Row] = {}
TABLES: Dict[str, List[Row]] = {}


def _add(table: str, name: str, label: str, rss: bool = False) -> None:
    row = Row(table, name, label, rss)
    ROWS.setdefault(name, row)  # a case can be a row of several tables (measured in each)
    TABLES.setdefault(table, []).append(row)


T_LARGE = "read_examples, 110 KB JPEG-like Examples (ex100k: 4,000 records, 440 MB)"
T_RAW = "raw 64 B records (raw64: 2,000,000 records)"
T_SMALL_PARSE = "small-batch parse in memory"
T_HOT = (
    "memory: parse the whole file's 1024-record batches, or the first one over and over (in cache)"
)
SMALL_BATCHES = (32, 256)
T_WRITE = "write MNIST-like (60,000 records of 844 B)"
T_DL = "DataLoader(batch 256), MNIST-like (60,000 records), epochs"
PARSE_DATA = {
    "mnist": "MNIST-like: index, label, 784 B image (60,000 records)",
    "tutorial": "TF tutorial records: 4 scalar features (100,000 records)",
    "voc": "VOC-like: image bytes, size, VarLen boxes/labels/texts (20,000 records)",
}


def _rows() -> None:
    t = T_LARGE
    _add(t, "raw_batches:ex100k:1", "raw batched read (iter_batches, 1 thread)", rss=True)
    for n in (1, 2):
        _add(
            t,
            f"read_examples:ex100k:{n}",
            f"read_examples() default batch_size, {n} thread(s)",
            rss=True,
        )
    _add(t, "iter_parse:ex100k:1", "iter_batches() + parse_examples, 1 thread", rss=True)
    _add(t, "raw_batches_x4:ex100k:1", "raw batched read of 4 shards (read_batches, 1 thread)")
    for n in (1, 2):
        _add(
            t,
            f"read_examples_x4:ex100k:{n}",
            f"read_examples() of 4 shards in one call, {n} thread(s)",
        )
    _add(t, "tfrecord_examples:ex100k:1", "tfrecord tfrecord_loader (peer)", rss=True)
    _add(t, "tf_data:ex100k:1", "TF tf.data + parse_example AUTOTUNE (peer)", rss=True)
    for d, title in PARSE_DATA.items():
        t = f"parse {title}"
        _add(
            t,
            f"tf_parse:{d}:1",
            "TF tf.io.parse_example, 1024/batch in memory, tf.function, 1 thread (peer)",
        )
        _add(t, f"tf_parse:{d}:2", "TF tf.io.parse_example, same, its default thread pool (peer)")
        _add(t, f"tf_data:{d}:1", "TF tf.data file -> batch(1024) -> parse AUTOTUNE (peer)")
        _add(t, f"tfrecord_examples:{d}:1", "tfrecord tfrecord_loader (peer)")
        _add(t, f"parquet:{d}:1", "Parquet read_table, 1 thread (peer)")
        _add(t, f"parquet:{d}:2", "Parquet read_table, all threads (peer)")
        for n in (1, 2):
            _add(
                t, f"parse_memory:{d}:{n}", f"parse_examples(num_threads={n}) in memory, 1024/batch"
            )
        _add(
            t,
            f"parse_alternated:{d}:2",
            "parse_examples(num_threads=1) and (num_threads=2) alternated per batch, one process",
        )
        _add(
            t,
            f"parse_alternated:{d}:2:gap2000",
            "same, 2 ms of busy work before each call (a training step): the workers asleep at each",
        )
        _add(
            t,
            f"parse_memory:{d}:2:pool",
            "parse_examples(num_threads=1) on a ThreadPoolExecutor(2).map over the batches",
        )
        for n in (1, 2):
            _add(
                t,
                f"read_examples:{d}:{n}",
                f"read_examples() file -> columns, {n} thread(s)",
                rss=d == "mnist",
            )
    for d in PARSE_DATA:  # each case on the whole file's batches and on the first one repeated
        for variant, batches in (("", "whole file"), (":hot", "first batch repeated")):
            for n, pool in ((1, "1 thread"), (2, "default pool")):
                _add(
                    T_HOT,
                    f"tf_parse:{d}:{n}{variant}",
                    f"{d}, {batches}: TF tf.io.parse_example, tf.function, {pool} (peer)",
                )
            for n in (1, 2):
                _add(
                    T_HOT,
                    f"parse_memory:{d}:{n}{variant}",
                    f"{d}, {batches}: parse_examples(num_threads={n})",
                )
    for size in SMALL_BATCHES:
        t = f"{T_SMALL_PARSE}, {size} records a batch"
        for d in PARSE_DATA:
            for n, pool in ((1, "1 thread"), (2, "default pool")):
                _add(
                    t,
                    f"tf_parse:{d}:{n}:b{size}",
                    f"{d}: TF tf.io.parse_example, tf.function, {pool} (peer)",
                )
                _add(
                    t,
                    f"tf_parse_eager:{d}:{n}:b{size}",
                    f"{d}: TF tf.io.parse_example, eager, {pool} (peer)",
                )
            _add(t, f"parse_memory:{d}:1:b{size}", f"{d}: parse_examples(num_threads=1)")
    t = T_RAW
    _add(t, "probe:raw64:1", "probe: readinto(1 MiB) + CRC32C, no framing")
    _add(t, "tfrecord_records:raw64:1", "tfrecord tfrecord_iterator (peer, no CRC)")
    _add(t, "tf_records:raw64:1", "TF TFRecordDataset.batch(1024) (peer)")
    for n in (1, 2):
        _add(t, f"raw_batches:raw64:{n}", f"iter_batches, {n} thread(s)")
    for n in (1, 2):
        _add(t, f"read_records:raw64:{n}", f"read_records per record, {n} thread(s)")
    t = T_WRITE
    _add(t, "tfrecord_write:mnist:1", "tfrecord TFRecordWriter.write(Example dict) (peer)")
    _add(
        t,
        "tfrecord_write_raw:mnist:1",
        "tfrecord TFRecordWriter.write(serialized), Example building bypassed (peer)",
    )
    _add(t, "write_each:mnist:1", "write() per serialized record")
    _add(t, "write_batch:mnist:1", "write_batch(serialized records)")
    t = T_DL
    for persistent, how in (
        ("p", "persistent_workers=True (steady state)"),
        ("np", "persistent_workers=False (start-up every epoch)"),
    ):
        _add(
            t,
            f"dl_tfrecord:mnist:2:{persistent}",
            f"tfrecord TFRecordDataset(path, index, description), 2 workers, {how} (peer)",
        )
        _add(
            t,
            f"dl_dropin:mnist:2:{persistent}",
            f"TFRecordDataset(path, index, description), default collate, 2 workers, {how}",
        )
        _add(
            t,
            f"dl_batched:mnist:2:{persistent}",
            f"TFRecordDataset(batch_size=256), DataLoader(batch_size=None), 2 workers, {how}",
        )
    _add(
        t,
        "dl_batched:mnist:0:p",
        "TFRecordDataset(batch_size=256), DataLoader(batch_size=None, num_workers=0)",
    )
    _add(
        t,
        "dl_dropin:mnist:0:p",
        "TFRecordDataset(path, index, description), default collate, num_workers=0",
    )
    _add(
        t,
        "dl_tfrecord:mnist:0:p",
        "tfrecord TFRecordDataset(path, index, description), num_workers=0 (peer)",
    )
    _add(
        t,
        "tf_data:mnist:1:256",
        "TF tf.data file -> batch(256) -> parse AUTOTUNE -> prefetch (peer, in process)",
    )
    for d in SIZED:
        n, size = SIZED[d]
        t = f"entry points, {d} ({n:,} Examples of {size:,} B image_raw + label)"
        _add(t, f"raw_batches:{d}:1", "raw batched read (iter_batches, 1 thread)", rss=True)
        if d in ("ex100k", "ex10m"):
            _add(
                t,
                f"raw_copy:{d}:1",
                "raw batched read + a copy of each batch into a held buffer "
                "of 256 records: the floor of an entry point that hands out a copy",
            )
        for k in (1, 2):
            _add(t, f"read_records:{d}:{k}", f"read_records, {k} thread(s)", rss=True)
            _add(t, f"read_examples:{d}:{k}", f"read_examples, {k} thread(s)", rss=True)
            _add(
                t,
                f"torch_batched:{d}:{k}",
                f"torch TFRecordDataset(batch_size=256) in-process, {k} thread(s)",
                rss=True,
            )
        if d in ("ex100k", "ex10m"):
            _add(
                t,
                f"torch_batched:{d}:1:keepheap",
                "same, 1 thread, glibc keeps freed memory (mallopt: trim 1 GiB, "
                "top pad 256 MiB, mmap 32 MiB)",
                rss=True,
            )
            _add(
                t,
                f"torch_batched:{d}:1:array",
                "same, 1 thread, image_raw as FixedLen((size,), 'uint8'): "
                "a [256, size] tensor per batch, as the peers' collate makes",
                rss=True,
            )
        _add(t, f"tfrecord_examples:{d}:1", "tfrecord tfrecord_loader, per record (peer)")
        _add(
            t,
            f"dl_tfrecord:{d}:0:p",
            "tfrecord TFRecordDataset(path, index, description) in DataLoader(batch_size=256, "
            "num_workers=0): what torch_batched replaces (peer)",
        )
        _add(
            t,
            f"tf_data:{d}:1:256",
            "TF tf.data file -> batch(256) -> parse AUTOTUNE -> prefetch (peer)",
        )
        _add(t, f"get_batch:{d}:1", "IndexedTFRecordReader.get_batch(256 random)")
        if d in ("ex100k", "ex10m"):
            for k, pool in ((1, "1 thread"), (2, "default pool")):
                _add(
                    t,
                    f"tf_parse:{d}:{k}:arr",
                    "TF tf.io.parse_example + decode_raw(uint8) in a tf.function, "
                    f"1024/batch in memory, {pool} (peer)",
                )
            for k in (1, 2):
                _add(
                    t,
                    f"parse_memory:{d}:{k}:arr",
                    "parse_examples in memory, 1024/batch, image_raw as "
                    f"FixedLen((size,), 'uint8'), {k} thread(s)",
                )
            _add(
                t,
                f"parse_memory:{d}:1:arrfresh",
                "same, 1 thread, a buffer pool that keeps nothing: every column fresh memory",
            )
        for k in (1, 2):
            _add(t, f"convert:{d}:{k}", f"convert_numpy (write), workers={k}")


_rows()


# ---- columns -------------------------------------------------------------------------------------


class VsOneThread(H.Versus):
    """A row with k > 1 threads against the same case with 1 thread (its median over this one)."""

    def __init__(self, target: Optional[float] = None, mine: Callable = lambda r: False):
        super().__init__("vs 1 thread", target=target, mine=mine)
        self.peer = "the same call with 1 thread"

    def ratio(self, r, results):
        parts = r.name.split(":")
        if len(parts) < 3 or parts[2] in ("0", "1") or not r.ok:
            return None
        one = ":".join([parts[0], parts[1], "1", *parts[3:]])
        plain = ":".join([parts[0], parts[1], "1"])  # a variant without a 1-thread row of its own
        base = next((x for x in results if x.name == one and x.ok), None) or next(
            (x for x in results if x.name == plain and x.ok), None
        )
        return None if base is None else base.median / r.median


class VsSameBatchTF(H.Versus):
    """parse_examples against the fastest of tf.io.parse_example in a tf.function and eager, each
    with one thread and with TensorFlow's default pool, on the same data in batches of the same
    size."""

    def __init__(self):
        super().__init__("vs TF parse_example (faster), same batch size")

    def ratio(self, r, results):
        case, data, _, *variant = r.name.split(":")
        if case.startswith("tf_") or not r.ok:
            return None
        peers = [
            ":".join([tf, data, n, *variant]) for tf in ("tf_parse", "tf_parse_eager") for n in "12"
        ]
        peer = H.fastest(results, peers)
        return None if peer is None else peer.median / r.median


class VsSameThreadsTF(H.Versus):
    """parse_examples against tf.io.parse_example (tf.function) on the same batches, ours at one
    thread against TF's one thread, at two against TF's default pool."""

    def __init__(self):
        super().__init__("vs TF parse_example, same threads")

    def ratio(self, r, results):
        case, data, threads, *variant = r.name.split(":")
        if case != "parse_memory" or not r.ok:
            return None
        peer = H.fastest(results, [":".join(["tf_parse", data, threads, *variant])])
        return None if peer is None else peer.median / r.median


class VsFreshColumns(H.Versus):
    """parse_examples of large arrays (variant "arr") against the same call with every column in
    fresh memory (variant "arrfresh", 1 thread): what the pooled column buffers bring."""

    def __init__(self):
        super().__init__("vs fresh columns")

    def ratio(self, r, results):
        case, data, _, *variant = r.name.split(":")
        if case != "parse_memory" or variant != ["arr"] or not r.ok:
            return None
        peer = H.fastest(results, [f"parse_memory:{data}:1:arrfresh"])
        return None if peer is None else peer.median / r.median


class VsWholeFile(H.Versus):
    """How much faster the same number of records parses from one batch in cache than from the
    whole file's batches (the row without the variant, same table): what memory costs."""

    def __init__(self):
        super().__init__("in cache vs whole file")

    def ratio(self, r, results):
        case, data, threads, *variant = r.name.split(":")
        peer = H.fastest(results, [":".join([case, data, threads])]) if variant == ["hot"] else None
        return None if peer is None or not r.ok else peer.median / r.median


def _bytes(row: Row) -> float:
    if row.case == "convert":
        return float(_convert_n(row.data) * SIZED[row.data][1])
    size = os.path.getsize(_path(row.data)) if os.path.exists(_path(row.data)) else 0
    return float(size * (4 if row.case.endswith("_x4") else 1))


def _expected(row: Row) -> Optional[int]:
    if row.case in ("get_batch",):
        return None
    if row.case == "convert":
        return _convert_n(row.data)
    return N_RECORDS[row.data] * (4 if row.case.endswith("_x4") else 1)


def _convert_n(data: str) -> int:
    n, size = SIZED[data]
    return min(n, max(1, (256 << 20) // size))


def _is(*cases: str, data: Optional[tuple] = None, threads: Optional[tuple] = None) -> Callable:
    def mine(r) -> bool:
        row = ROWS[r.name]
        return (
            row.case in cases
            and (data is None or row.data in data)
            and (threads is None or row.threads in threads)
        )

    return mine


PARSE_TARGET = {"mnist": 12.0, "tutorial": 15.0, "voc": 12.0}


def columns(title: str, rss: Dict[str, H.Result]) -> List[H.Column]:
    rows = {r.name: r for r in TABLES[title]}
    cols: List[H.Column] = [
        H.per_second("records/s", lambda r: r.records),
        H.per_second("GB/s", lambda r: _bytes(rows[r.name]) / 1e9, ".2f"),
    ]
    if title == T_LARGE:
        cols += [
            H.Versus(
                "vs raw batched",
                "raw_batches:ex100k:1",
                target=0.9,
                mine=_is("read_examples", "iter_parse"),
            ),
            H.Versus(
                "vs raw 4 shards",
                "raw_batches_x4:ex100k:1",
                target=0.9,
                mine=_is("read_examples_x4"),
            ),
            H.Versus(
                "vs tfrecord", "tfrecord_examples:ex100k:1", target=2.0, mine=_is("read_examples")
            ),
            H.Versus("vs TF tf.data", "tf_data:ex100k:1"),
            VsOneThread(),
        ]
    elif title.startswith("parse "):
        d = next(iter(rows)).split(":")[1]
        cols += [
            H.Versus(
                "vs TF parse_example, 1 thread",
                f"tf_parse:{d}:1",
                target=PARSE_TARGET[d],
                mine=_is("parse_memory", threads=(1,)),
            ),
            H.Versus(
                "vs TF parse_example, default pool",
                f"tf_parse:{d}:2",
                target=PARSE_TARGET[d],
                mine=_is("parse_memory", threads=(2,)),
            ),
            H.Versus("vs TF tf.data", f"tf_data:{d}:1"),
            H.Versus("vs tfrecord", f"tfrecord_examples:{d}:1"),
            H.Versus("vs Parquet (faster)", f"parquet:{d}:1", f"parquet:{d}:2"),
            VsOneThread(target=1.6, mine=_is("parse_memory", "read_examples", threads=(2,))),
            H.figure("2 threads vs 1, alternated", alternated_ratio, ".2f", "x"),
        ]
    elif title.startswith(T_SMALL_PARSE):
        cols += [VsSameBatchTF()]
    elif title == T_HOT:
        cols += [VsSameThreadsTF(), VsWholeFile(), VsOneThread()]
    elif title == T_RAW:
        cols += [
            H.Versus("vs probe", "probe:raw64:1", target=0.8, mine=_is("raw_batches")),
            H.Versus(
                "vs tfrecord", "tfrecord_records:raw64:1", target=10.0, mine=_is("read_records")
            ),
            H.Versus("vs TF", "tf_records:raw64:1"),
            VsOneThread(),
        ]
    elif title == T_WRITE:
        cols += [
            H.Versus(
                "vs tfrecord (serialized)",
                "tfrecord_write_raw:mnist:1",
                target=10.0,
                mine=_is("write_each", "write_batch"),
            ),
            H.Versus("vs tfrecord (Example dict)", "tfrecord_write:mnist:1"),
        ]
    elif title == T_DL:

        def first(r):
            x = r.extra.get("first_batch_s")
            return statistics.median(x) if x else None

        cols += [
            H.Versus(
                "vs tfrecord (persistent)",
                "dl_tfrecord:mnist:2:p",
                target=5.0,
                mine=lambda r: r.name == "dl_dropin:mnist:2:p",
            ),
            H.Versus(
                "vs tfrecord (batched target)",
                "dl_tfrecord:mnist:2:p",
                target=10.0,
                mine=lambda r: r.name == "dl_batched:mnist:2:p",
            ),
            H.Versus("vs tfrecord (not persistent)", "dl_tfrecord:mnist:2:np"),
            H.Versus("vs tfrecord (0 workers)", "dl_tfrecord:mnist:0:p"),
            H.Versus(
                "vs TF tf.data",
                "tf_data:mnist:1:256",
                target=2.0,
                mine=lambda r: r.name == "dl_batched:mnist:2:p",
            ),
            H.figure("first batch s", first, ".3f"),
        ]
    else:  # entry points
        d = next(iter(rows)).split(":")[1]
        cols += [
            H.Versus(
                "vs raw batched",
                f"raw_batches:{d}:1",
                target=0.9,
                mine=_is("read_examples", "torch_batched", data=("ex100k", "ex10m")),
            ),
            H.Versus("vs tfrecord loader", f"tfrecord_examples:{d}:1"),
            H.Versus("vs tfrecord DataLoader", f"dl_tfrecord:{d}:0:p"),
            H.Versus("vs TF tf.data", f"tf_data:{d}:1:256"),
            VsSameThreadsTF(),
            VsFreshColumns(),
            VsOneThread(),
        ]
    if any(r.rss for r in TABLES[title]):

        def mib(key):
            def value(r):
                x = rss.get(r.name)
                return x.extra[key][0] / 1024 if x is not None and x.ok else None

            return value

        def added(r):
            peak, base = mib("maxrss_kib")(r), mib("rss_base_kib")(r)
            return None if peak is None or base is None else peak - base

        cols += [
            H.figure("peak RSS MiB", mib("maxrss_kib"), ".0f"),
            H.figure("peak - setup MiB", added, ".0f"),
        ]
    return cols + H.timing(".4f")


# ---- the headline table: issue #12's rows ---------------------------------------------------------

# (issue row, my row, peers (the faster one counts), target ratio or None, what the target says)
HEADLINE = [
    (
        "read_examples(path, spec) default batch_size, 110 KB JPEG Examples, 1 thread",
        "read_examples:ex100k:1",
        ["tfrecord_examples:ex100k:1"],
        2.0,
        ">= 2x tfrecord",
    ),
    (
        "  same, vs batched raw read",
        "read_examples:ex100k:1",
        ["raw_batches:ex100k:1"],
        0.9,
        ">= 0.9x raw batched",
    ),
    (
        "read_examples, 110 KB, 2 threads",
        "read_examples:ex100k:2",
        ["tfrecord_examples:ex100k:1"],
        2.0,
        ">= 2x tfrecord",
    ),
    (
        "  same, vs batched raw read (1 thread)",
        "read_examples:ex100k:2",
        ["raw_batches:ex100k:1"],
        0.9,
        ">= 0.9x raw batched",
    ),
    (
        "same data, iter_batches() + parse_examples",
        "iter_parse:ex100k:1",
        ["raw_batches:ex100k:1"],
        None,
        "(vs raw batched)",
    ),
    (
        "parse MNIST-like (3 features, 844 B), 1 thread",
        "parse_memory:mnist:1",
        ["tf_parse:mnist:1"],
        12.0,
        ">= 12x TF (1 thread)",
    ),
    (
        "parse MNIST-like, 2 threads",
        "parse_memory:mnist:2",
        ["tf_parse:mnist:2"],
        12.0,
        ">= 12x TF (default pool)",
    ),
    (
        "parse 4-feature tutorial records, 1 thread",
        "parse_memory:tutorial:1",
        ["tf_parse:tutorial:1"],
        15.0,
        ">= 15x TF (1 thread)",
    ),
    (
        "parse tutorial, 2 threads",
        "parse_memory:tutorial:2",
        ["tf_parse:tutorial:2"],
        15.0,
        ">= 15x TF (default pool)",
    ),
    (
        "parse VOC-like VarLen, 1 thread",
        "parse_memory:voc:1",
        ["tf_parse:voc:1"],
        12.0,
        ">= 12x TF (1 thread)",
    ),
    (
        "parse VOC-like, 2 threads",
        "parse_memory:voc:2",
        ["tf_parse:voc:2"],
        12.0,
        ">= 12x TF (default pool)",
    ),
    (
        "parse MNIST-like: 2 threads vs 1",
        "parse_memory:mnist:2",
        ["parse_memory:mnist:1"],
        1.6,
        ">= 1.6x",
    ),
    (
        "parse tutorial: 2 threads vs 1",
        "parse_memory:tutorial:2",
        ["parse_memory:tutorial:1"],
        1.6,
        ">= 1.6x",
    ),
    (
        "parse VOC-like: 2 threads vs 1",
        "parse_memory:voc:2",
        ["parse_memory:voc:1"],
        1.6,
        ">= 1.6x",
    ),
    (
        "parse MNIST-like: 2 threads vs 1, alternated per batch in one process",
        "parse_alternated:mnist:2",
        [],
        1.6,
        ">= 1.6x",
    ),
    (
        "parse tutorial: 2 threads vs 1, alternated per batch",
        "parse_alternated:tutorial:2",
        [],
        1.6,
        ">= 1.6x",
    ),
    (
        "parse VOC-like: 2 threads vs 1, alternated per batch",
        "parse_alternated:voc:2",
        [],
        1.6,
        ">= 1.6x",
    ),
    (
        "raw read 64 B records, batched, 1 thread",
        "raw_batches:raw64:1",
        ["probe:raw64:1"],
        0.8,
        ">= 0.8x pread+CRC probe",
    ),
    (
        "raw read 64 B records, per record, 1 thread",
        "read_records:raw64:1",
        ["tfrecord_records:raw64:1"],
        10.0,
        ">= 10x tfrecord",
    ),
    (
        "write MNIST-like, write() per record",
        "write_each:mnist:1",
        ["tfrecord_write_raw:mnist:1"],
        10.0,
        ">= 10x tfrecord",
    ),
    (
        "write MNIST-like, write_batch",
        "write_batch:mnist:1",
        ["tfrecord_write_raw:mnist:1"],
        10.0,
        ">= 10x tfrecord",
    ),
    (
        "DataLoader(2 workers, batch 256) MNIST-like, TFRecordDataset(batch_size=256), steady state",
        "dl_batched:mnist:2:p",
        ["dl_tfrecord:mnist:2:p"],
        10.0,
        ">= 10x tfrecord",
    ),
    (
        "  same, vs TF tf.data (batch 256, in process)",
        "dl_batched:mnist:2:p",
        ["tf_data:mnist:1:256"],
        2.0,
        ">= 2x TF",
    ),
    (
        "DataLoader drop-in TFRecordDataset(path, index, description), default collate, steady state",
        "dl_dropin:mnist:2:p",
        ["dl_tfrecord:mnist:2:p"],
        5.0,
        ">= 5x tfrecord",
    ),
]


def headline(results: Dict[str, H.Result]) -> str:
    out = [
        "| case | tfrec_fast rec/s | peer | peer rec/s | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for what, mine, peers, target, says in HEADLINE:
        r = results.get(mine)
        if not peers:  # a ratio within the row itself (parse_alternated)
            ratio = None if r is None else alternated_ratio(r)
            if ratio is None:
                out.append(f"| {what} | — | — | — | — | {says} | not measured |")
            else:
                met = "✅ met" if ratio >= target else "❌ not met"
                out.append(
                    f"| {what} | {H.fmt_rate(r.records / r.median)} | the same calls with 1 "
                    f"thread | — | {ratio:.2f}x | {says} | {met} |"
                )
            continue
        ps = [results[p] for p in peers if p in results and results[p].ok]
        peer = min(ps, key=lambda p: p.median, default=None)
        if r is None or not r.ok or peer is None:
            out.append(
                f"| {what} | {'—' if r is None or not r.ok else H.fmt_rate(r.records / r.median)} | "
                f"{peers[0]} | — | — | {says} | not measured |"
            )
            continue
        ratio = peer.median / r.median
        met = "" if target is None else ("✅ met" if ratio >= target else "❌ not met")
        out.append(
            f"| {what} | {H.fmt_rate(r.records / r.median)} | {peer.label} | "
            f"{H.fmt_rate(peer.records / peer.median)} | {ratio:.2f}x | {says} | {met} |"
        )
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=3, min_time=0.25)
    ap.add_argument("--make-data", action="store_true", help="write bench/data/threads/ and exit")
    ap.add_argument("--only", default="", help="tables or rows whose title or label contains this")
    ap.add_argument("--no-rss", action="store_true", help="skip the peak-RSS runs")
    args = ap.parse_args(argv)
    if args.make_data:
        make_data()
        return 0
    # numpy's OpenBLAS starts a server thread at import that spins for a few hundred ms (perf:
    # blas_thread_server, 20% of a short case's samples) although nothing here calls BLAS: on 2
    # cores it takes one from whatever is measured, threads above all. Every case runs without it.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    timing = H.timing_options(args)
    want = set(args.cases.split(",")) if args.cases else None
    md = [
        C.header(
            args,
            "Each table is one harness.measure() (rows interleaved round-robin, each in its own "
            "process); ✅/❌ mark issue #12's targets. GB/s counts the file's bytes (x4 for the 4-shard "
            "rows; convert: the arrays' image bytes).",
        )
    ]
    everything: Dict[str, H.Result] = {}
    raw, summary = {}, []
    for title, rows in TABLES.items():
        rows = [
            r
            for r in rows
            if (want is None or r.name in want)
            and (not args.only or args.only in title or args.only in r.label)
        ]
        if not rows:
            continue
        print(f"== {title}", file=sys.stderr)
        tag = title.split(" ")[0] + "-" + rows[0].data
        t0 = time.perf_counter()
        res = H.measure(
            [H.Case(r.name, r.label, setup) for r in rows],
            {},
            log_dir=C.log_dir(f"threads-{tag}"),
            **timing,
        )
        for r in res:
            n = _expected(ROWS[r.name])
            if r.ok and n is not None and r.records != n:
                r.error = f"handled {r.records} records, expected {n}"
        rss: Dict[str, H.Result] = {}
        if not args.no_rss:
            rss_rows = [r for r in rows if r.rss]
            rss = {
                x.name: x
                for x in H.measure_rss(
                    [H.Case(r.name, r.label, setup) for r in rss_rows],
                    {},
                    log_dir=C.log_dir(f"threads-rss-{tag}"),
                )
            }
        print(f"   {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        cols = columns(title, rss)
        text, notes = H.table(res, cols, first="case")
        md.append(H.section(title, text, notes))
        summary += H.targets(res, cols, title.split(" (")[0])
        raw[title] = {"timings": H.raw(res), "rss": H.raw(list(rss.values()))}
        for r in res:  # a case in several tables: the headline takes the first, with its peers
            everything.setdefault(r.name, r)
    md.insert(1, "### Issue #12's rows\n\n" + headline(everything))
    return H.emit(md, raw, args.markdown, args.json, summary)


if __name__ == "__main__":
    sys.exit(main())
