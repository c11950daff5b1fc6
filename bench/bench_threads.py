"""Issue #12's table: every entry point on 64 B .. 10 MB records, 1 and 2 threads, against the peers
(TensorFlow tf.data / tf.io.parse_example, the `tfrecord` package, Parquet via pyarrow) measured in
the same run.

    python bench/bench_threads.py --make-data          # bench/data/threads/ (~2 GB), seeded
    python bench/bench_threads.py [--procs 3] [--only SUBSTR] [--json out.json]

Run it with a Python that has tfrec_fast (PYTHONPATH=src with the built _core) and the peers.
Every case runs in its own fresh process (peers are never imported next to tfrec_fast;
OPENBLAS_NUM_THREADS=1, see _CHILD_ENV), ``--procs`` processes per case, interleaved; each process
does a warm-up pass and then ``--repeats`` timed samples of >= 0.25 s (back-to-back passes) and
reports their median; the table shows the median over the processes, and each ratio is between
two rows of this run. Page cache warm (every file is read before timing). Peak RSS is the
process's ru_maxrss after its passes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "threads")

# name -> (records, payload size of the bytes feature) of the Example files {image_raw, label}
SIZED = {"ex64": (1_000_000, 30), "ex1k": (200_000, 1000), "ex100k": (4_000, 110_000),
         "ex10m": (40, 10_000_000)}


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
                w.write_examples({"image_raw": [blob] * k,  # incompressible, JPEG-like
                                  "label": np.arange(start, start + k) % 10})
    n = 60_000  # MNIST-like: index, label, 784 raw pixels
    mnist = {"index": np.arange(n), "label": rng.integers(0, 10, n),
             "image_raw": [rng.integers(0, 256, 784, dtype=np.uint8).tobytes()
                           for _ in range(n)]}
    n = 100_000  # TensorFlow's tutorial records: a bool, an int, a word, a float
    words = [b"cat", b"dog", b"chicken", b"horse", b"goat"]
    tutorial = {"feature0": rng.integers(0, 2, n), "feature1": rng.integers(0, 5, n),
                "feature2": [words[i] for i in rng.integers(0, 5, n)],
                "feature3": rng.standard_normal(n).astype(np.float32)}
    n = 20_000  # VOC-like: image bytes, size, 0..6 boxes (VarLen floats, labels, texts)
    objects = rng.integers(0, 7, n)
    voc = {"image": [rng.integers(0, 256, int(s), dtype=np.uint8).tobytes()
                     for s in rng.integers(2000, 6000, n)],
           "height": rng.integers(200, 500, n), "width": rng.integers(200, 500, n),
           "xmin": [rng.random(k).astype(np.float32) for k in objects],
           "ymin": [rng.random(k).astype(np.float32) for k in objects],
           "label": [rng.integers(0, 20, k) for k in objects],
           "text": [[b"person"] * int(k) for k in objects]}
    for name, cols in (("mnist", mnist), ("tutorial", tutorial), ("voc", voc)):
        with tfr.TFRecordWriter(_path(name)) as w:
            w.write_examples(cols)
        _write_parquet(name, cols)
    with tfr.TFRecordWriter(_path("raw64")) as w:  # 2M raw 64-byte records
        blob = rng.integers(0, 256, 64 * 2_000_000, dtype=np.uint8).tobytes()
        for start in range(0, len(blob), 64 * 65536):
            chunk = blob[start:start + 64 * 65536]
            w.write_batch([chunk[i:i + 64] for i in range(0, len(chunk), 64)])
    for name in list(SIZED) + ["mnist"]:
        with open(_path(name) + ".idx", "w") as f:  # the tfrecord package's index format
            offsets, sizes = tfr.create_index(_path(name))
            f.writelines(f"{o} {s}\n" for o, s in zip(offsets.tolist(), sizes.tolist()))


def _write_parquet(name, cols) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.table({k: (pa.array(v) if isinstance(v, np.ndarray) else
                          pa.array([list(x) if isinstance(x, (list, np.ndarray)) else x
                                    for x in v])) for k, v in cols.items()})
    pq.write_table(table, _path(name).replace(".tfrecord", ".parquet"), compression="none")


def _path(name: str) -> str:
    return os.path.join(DATA, name + ".tfrecord")


# ---- cases: each returns run() -> records handled ---------------------------------------------

def _specs(tfr):
    return {
        "mnist": {"index": tfr.FixedLen((), "int64"), "label": tfr.FixedLen((), "int64"),
                  "image_raw": tfr.FixedLen((), "bytes")},
        "tutorial": {"feature0": tfr.FixedLen((), "int64"), "feature1": tfr.FixedLen((), "int64"),
                     "feature2": tfr.FixedLen((), "bytes"),
                     "feature3": tfr.FixedLen((), "float32")},
        "voc": {"image": tfr.FixedLen((), "bytes"), "height": tfr.FixedLen((), "int64"),
                "width": tfr.FixedLen((), "int64"), "xmin": tfr.VarLen("float32"),
                "ymin": tfr.VarLen("float32"), "label": tfr.VarLen("int64"),
                "text": tfr.VarLen("bytes")},
        "sized": {"image_raw": tfr.FixedLen((), "bytes"), "label": tfr.FixedLen((), "int64")},
    }


def _spec_for(tfr, data):
    return _specs(tfr)["sized" if data in SIZED else data]


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
        return sum(len(c[first]) for c in tfr.read_examples([_path(data)] * 4, spec,
                                                            num_threads=threads))
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
        return sum(len(c[first]) for c in tfr.read_examples(_path(data), spec,
                                                            num_threads=threads))
    return run


def case_iter_parse(data, threads):
    import tfrec_fast as tfr
    spec = _spec_for(tfr, data)
    first = next(iter(spec))

    def run():
        with tfr.TFRecordReader(_path(data)) as r:
            return sum(len(tfr.parse_examples(b, spec)[first])
                       for b in r.iter_batches(num_threads=1))
    return run


def case_parse_memory(data, threads):
    """parse_examples on 1024-record RecordBatches already in memory (threads: a pool's map)."""
    import tfrec_fast as tfr
    from concurrent.futures import ThreadPoolExecutor
    spec = _spec_for(tfr, data)
    first = next(iter(spec))
    with tfr.TFRecordReader(_path(data)) as r:
        batches = list(r.iter_batches(max_records=1024, num_threads=1))
    pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def parse(b):
        return len(tfr.parse_examples(b, spec)[first])

    def run():
        return sum(pool.map(parse, batches) if pool else map(parse, batches))
    return run


def case_torch_batched(data, threads):
    """TFRecordDataset(batch_size=256) iterated in this process (the in-worker path)."""
    import tfrec_fast as tfr
    from tfrec_fast.torch import TFRecordDataset
    ds = TFRecordDataset(_path(data), spec=_spec_for(tfr, data), batch_size=256,
                         num_threads=threads)

    def run():
        return sum(len(b["label"]) for b in ds)
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
    picks = [rng.permutation(n)[:per] for _ in range(calls)]

    def run():
        return sum(len(r.get_batch(p)) for p in picks)
    return run


def case_convert(data, threads):
    """convert_numpy of the records' bytes (as a [N, size] uint8 array) and labels to shards."""
    import shutil
    import tempfile
    import numpy as np
    from tfrec_fast.convert import convert_numpy
    n, size = SIZED[data]
    n = min(n, max(1, (256 << 20) // size))
    arrays = {"image": np.random.default_rng(1).integers(0, 256, (n, size), dtype=np.uint8),
              "label": np.arange(n)}
    out = tempfile.mkdtemp(dir=DATA)

    def run():
        shutil.rmtree(out, ignore_errors=True)
        convert_numpy(arrays, out, workers=threads, progress=False, overwrite=True)
        return n
    return run


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
    import tempfile
    import tfrec_fast as tfr
    with tfr.TFRecordReader(_path(data)) as r:
        records = [bytes(x) for x in r]
    out = tempfile.mktemp(dir=DATA)

    def run():
        with tfr.TFRecordWriter(out) as w:
            write = w.write
            for rec in records:
                write(rec)
        return len(records)
    return run


def case_write_batch(data, threads):
    import tempfile
    import tfrec_fast as tfr
    with tfr.TFRecordReader(_path(data)) as r:
        records = [bytes(x) for x in r]
    out = tempfile.mktemp(dir=DATA)

    def run():
        with tfr.TFRecordWriter(out) as w:
            w.write_batch(records)
        return len(records)
    return run


# -- peers

def case_tfrecord_examples(data, threads):
    """The tfrecord package's example loader: reading plus per-record protobuf parsing."""
    from tfrecord.reader import tfrecord_loader
    desc = {"mnist": {"index": "int", "label": "int", "image_raw": "byte"},
            "tutorial": {"feature0": "int", "feature1": "int", "feature2": "byte",
                         "feature3": "float"},
            "voc": {"image": "byte", "height": "int", "width": "int", "xmin": "float",
                    "ymin": "float", "label": "int", "text": "byte"}}.get(
        data, {"image_raw": "byte", "label": "int"})

    def run():
        n = 0
        for _ in tfrecord_loader(_path(data), None, desc):
            n += 1
        return n
    return run


def case_tfrecord_records(data, threads):
    from tfrecord.reader import tfrecord_iterator

    def run():
        n = 0
        for _ in tfrecord_iterator(_path(data)):
            n += 1
        return n
    return run


def case_tfrecord_write(data, threads):
    import tempfile
    from tfrecord.reader import tfrecord_loader
    from tfrecord.writer import TFRecordWriter
    desc = {"index": "int", "label": "int", "image_raw": "byte"}
    rows = [{"index": (int(e["index"][0]), "int"), "label": (int(e["label"][0]), "int"),
             "image_raw": (bytes(e["image_raw"]), "byte")}
            for e in tfrecord_loader(_path(data), None, desc)]
    out = tempfile.mktemp(dir=DATA)

    def run():
        w = TFRecordWriter(out)
        for row in rows:
            w.write(row)
        w.close()
        return len(rows)
    return run


def case_tfrecord_write_raw(data, threads):
    """The tfrecord package's writer on serialized records (its Example building bypassed, as
    bench/_cases.py does): only its framing code runs."""
    import tempfile
    import tfrec_fast as tfr
    from tfrecord.writer import TFRecordWriter
    TFRecordWriter.serialize_tf_example = staticmethod(lambda datum: datum)
    with tfr.TFRecordReader(_path(data)) as r:
        records = [bytes(x) for x in r]
    out = tempfile.mktemp(dir=DATA)

    def run():
        w = TFRecordWriter(out)
        for rec in records:
            w.write(rec)
        w.close()
        return len(records)
    return run


def _tf_features(tf, data):
    fixed = tf.io.FixedLenFeature
    if data == "mnist":
        return {"index": fixed([], tf.int64), "label": fixed([], tf.int64),
                "image_raw": fixed([], tf.string)}
    if data == "tutorial":
        return {"feature0": fixed([], tf.int64), "feature1": fixed([], tf.int64),
                "feature2": fixed([], tf.string), "feature3": fixed([], tf.float32)}
    if data == "voc":
        var = tf.io.VarLenFeature
        return {"image": fixed([], tf.string), "height": fixed([], tf.int64),
                "width": fixed([], tf.int64), "xmin": var(tf.float32), "ymin": var(tf.float32),
                "label": var(tf.int64), "text": var(tf.string)}
    return {"image_raw": fixed([], tf.string), "label": fixed([], tf.int64)}


def case_tf_data(data, threads):
    """tf.data: TFRecordDataset -> batch(1024) -> map(parse_example, AUTOTUNE) -> prefetch."""
    import tensorflow as tf
    features = _tf_features(tf, data)
    ds = (tf.data.TFRecordDataset(_path(data)).batch(1024)
          .map(lambda s: tf.io.parse_example(s, features), num_parallel_calls=tf.data.AUTOTUNE)
          .prefetch(tf.data.AUTOTUNE))
    key = next(iter(features))

    def run():
        n = 0
        for b in ds:
            n += int(tf.shape(b[key])[0]) if not isinstance(b[key], tf.SparseTensor) else int(
                b[key].dense_shape[0])
        return n
    return run


def case_tf_parse(data, threads):
    """tf.io.parse_example (tf.function) on 1024-record batches already in memory."""
    import tensorflow as tf
    features = _tf_features(tf, data)
    records = [r.numpy() for r in tf.data.TFRecordDataset(_path(data))]
    batches = [tf.constant(records[i:i + 1024]) for i in range(0, len(records), 1024)]
    parse = tf.function(lambda s: tf.io.parse_example(s, features))

    def run():
        for b in batches:
            parse(b)
        return len(records)
    return run


def case_tf_records(data, threads):
    import tensorflow as tf
    ds = tf.data.TFRecordDataset(_path(data)).batch(1024).prefetch(tf.data.AUTOTUNE)

    def run():
        return sum(int(tf.shape(b)[0]) for b in ds)
    return run


def case_parquet(data, threads):
    """pyarrow.parquet.read_table of the same data (threads 1: use_threads=False)."""
    import pyarrow.parquet as pq
    path = _path(data).replace(".tfrecord", ".parquet")

    def run():
        return pq.read_table(path, use_threads=threads > 1).num_rows
    return run


# -- DataLoader (MNIST-like, 2 workers, 256 per batch): run() is one epoch; the workers persist,
#    so the warm-up pass pays their start and the timed passes are the steady state

def _dl(loader, first_key):
    import time as _t
    t0 = _t.perf_counter()
    it = iter(loader)
    next(it)
    sys.stderr.write(f"first batch after {_t.perf_counter() - t0:.3f} s\n")
    for _ in it:
        pass

    def run():
        return sum(len(b[first_key]) for b in loader)
    return run


def case_dl_dropin(data, threads):
    """tfrec_fast.torch.TFRecordDataset(path, index, description), torch's default collate."""
    import torch
    from tfrec_fast.torch import TFRecordDataset
    ds = TFRecordDataset(_path(data), _path(data) + ".idx", {"image_raw": "byte", "label": "int"})
    return _dl(torch.utils.data.DataLoader(ds, batch_size=256, num_workers=2,
                                           persistent_workers=True), "label")


def case_dl_batched(data, threads):
    """TFRecordDataset(batch_size=256) + DataLoader(batch_size=None, num_workers=2)."""
    import torch
    import tfrec_fast as tfr
    from tfrec_fast.torch import TFRecordDataset
    ds = TFRecordDataset(_path(data), spec={"image_raw": tfr.FixedLen((28, 28), "uint8"),
                                            "label": tfr.FixedLen((), "int64")}, batch_size=256)
    return _dl(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                           persistent_workers=True), "label")


def case_dl_tfrecord(data, threads):
    """The tfrecord package's TFRecordDataset(path, index, description) in the same DataLoader."""
    import torch
    from tfrecord.torch.dataset import TFRecordDataset
    ds = TFRecordDataset(_path(data), _path(data) + ".idx", {"image_raw": "byte", "label": "int"})
    return _dl(torch.utils.data.DataLoader(ds, batch_size=256, num_workers=2,
                                           persistent_workers=True), "label")


# ---- the table ----------------------------------------------------------------------------------

# (group, row label, case, data, threads, reference row label for the ratio or None)
def rows():
    out = []
    add = out.append
    for d, label in (("ex100k", "110 KB JPEG-like Examples"),):
        g = f"read_examples, {label}"
        add((g, "raw batched read (iter_batches, 1 thread)", "raw_batches", d, 1, None))
        for t in (1, 2):
            add((g, f"read_examples() default batch_size, {t} thread(s)", "read_examples", d, t,
                 "raw batched read (iter_batches, 1 thread)"))
        add((g, "iter_batches() + parse_examples", "iter_parse", d, 1,
             "raw batched read (iter_batches, 1 thread)"))
        ref4 = "raw batched read of 4 shards (read_batches, 1 thread)"
        add((g, ref4, "raw_batches_x4", d, 1, None))
        for t in (1, 2):
            add((g, f"read_examples() of 4 shards in one call, {t} thread(s)",
                 "read_examples_x4", d, t, ref4))
        add((g, "tfrecord tfrecord_loader (peer)", "tfrecord_examples", d, 1, None))
        add((g, "TF tf.data + parse_example AUTOTUNE (peer)", "tf_data", d, 1, None))
    for d in ("mnist", "tutorial", "voc"):
        g = f"parse {d}"
        add((g, "TF tf.io.parse_example, 1024/batch in memory (peer)", "tf_parse", d, 1, None))
        add((g, "TF tf.data file -> parse AUTOTUNE (peer)", "tf_data", d, 1, None))
        add((g, "tfrecord tfrecord_loader (peer)", "tfrecord_examples", d, 1, None))
        add((g, "Parquet read_table, 1 thread (peer)", "parquet", d, 1, None))
        add((g, "Parquet read_table, all threads (peer)", "parquet", d, 2, None))
        for t in (1, 2):
            add((g, f"parse_examples in memory, {t} thread(s)", "parse_memory", d, t,
                 "TF tf.io.parse_example, 1024/batch in memory (peer)"))
        for t in (1, 2):
            add((g, f"read_examples() file -> columns, {t} thread(s)", "read_examples", d, t,
                 "TF tf.data file -> parse AUTOTUNE (peer)"))
    g = "raw 64 B records"
    add((g, "probe: readinto(1 MiB) + CRC32C, no framing", "probe", "raw64", 1, None))
    add((g, "tfrecord tfrecord_iterator (peer, no CRC)", "tfrecord_records", "raw64", 1, None))
    add((g, "TF TFRecordDataset.batch(1024)", "tf_records", "raw64", 1, None))
    for t in (1, 2):
        add((g, f"iter_batches, {t} thread(s)", "raw_batches", "raw64", t,
             "probe: readinto(1 MiB) + CRC32C, no framing"))
    for t in (1, 2):
        add((g, f"read_records per record, {t} thread(s)", "read_records", "raw64", t,
             "tfrecord tfrecord_iterator (peer, no CRC)"))
    g = "write MNIST-like"
    add((g, "tfrecord TFRecordWriter.write(Example dict) (peer)", "tfrecord_write", "mnist", 1,
         None))
    add((g, "tfrecord TFRecordWriter.write(serialized), Example building bypassed (peer)",
         "tfrecord_write_raw", "mnist", 1, None))
    add((g, "write() per serialized record", "write_each", "mnist", 1,
         "tfrecord TFRecordWriter.write(serialized), Example building bypassed (peer)"))
    add((g, "write_batch(serialized records)", "write_batch", "mnist", 1,
         "tfrecord TFRecordWriter.write(serialized), Example building bypassed (peer)"))
    g = "DataLoader(num_workers=2), MNIST-like, 256 per batch, steady state"
    add((g, "tfrecord TFRecordDataset(path, index, description) (peer)", "dl_tfrecord", "mnist",
         1, None))
    add((g, "TFRecordDataset(path, index, description), default collate", "dl_dropin", "mnist",
         1, "tfrecord TFRecordDataset(path, index, description) (peer)"))
    add((g, "TFRecordDataset(batch_size=256), DataLoader(batch_size=None)", "dl_batched",
         "mnist", 1, "tfrecord TFRecordDataset(path, index, description) (peer)"))
    for d in SIZED:
        g = f"entry points, {d}"
        ref = "raw batched read (iter_batches, 1 thread)"
        add((g, ref, "raw_batches", d, 1, None))
        for t in (1, 2):
            add((g, f"read_records, {t} thread(s)", "read_records", d, t, ref))
            add((g, f"read_examples, {t} thread(s)", "read_examples", d, t, ref))
            add((g, f"torch TFRecordDataset(batch_size=256) in-process, {t} thread(s)",
                 "torch_batched", d, t, ref))
        add((g, "IndexedTFRecordReader.get_batch(256 random)", "get_batch", d, 1, ref))
        add((g, "convert_numpy (write, 1 worker)", "convert", d, 1, None))
    return out


def _one_process(case, data, threads, repeats) -> dict:
    import resource
    run = globals()["case_" + case](data, threads)
    for name in (data,):  # page cache warm
        if os.path.exists(_path(name)):
            with open(_path(name), "rb") as f:
                while f.read(1 << 24):
                    pass
    t0 = time.perf_counter()
    records = run()  # warm-up
    # A sample runs the case k times back to back, k such that it lasts >= 0.25 s: short passes
    # are at the mercy of the scheduler.
    k = max(1, int(0.25 / max(time.perf_counter() - t0, 1e-6)))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(k):
            got = run()
            assert got == records, (got, records)
        times.append((time.perf_counter() - t0) / k)
    if case in ("probe",):
        records = records or 0
    return {"records": records, "seconds": statistics.median(times),
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# numpy's OpenBLAS starts a server thread at import that spins for a few hundred ms (perf:
# blas_thread_server, 20% of a short case's samples) although nothing here calls BLAS: on 2 cores
# it takes one from whatever is measured, threads above all. Every case runs without it.
_CHILD_ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--make-data", action="store_true")
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="", help="rows whose group or label contains this")
    ap.add_argument("--json")
    ap.add_argument("--one", nargs=3, metavar=("CASE", "DATA", "THREADS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(_one_process(a.one[0], a.one[1], int(a.one[2]), a.repeats)))
        return
    if a.make_data:
        make_data()
        return
    todo = [r for r in rows() if a.only in r[0] or a.only in r[1]]
    keys = list(dict.fromkeys((c, d, t) for _, _, c, d, t, _ in todo))
    samples: dict = {k: [] for k in keys}
    for p in range(a.procs):  # interleaved: each round runs every case once
        for k in keys[p % len(keys):] + keys[:p % len(keys)]:
            done = subprocess.run([sys.executable, __file__, "--one", k[0], k[1], str(k[2]),
                                   "--repeats", str(a.repeats)], capture_output=True, text=True,
                                  env=_CHILD_ENV)
            if done.returncode:
                samples[k].append({"error": done.stderr.strip().splitlines()[-1:]})
            else:
                samples[k].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"# bench_threads: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}; median of {a.procs} "
          f"processes x median of {a.repeats} samples of >= 0.25 s; load average before: "
          f"{os.getloadavg()[0]:.2f}\n")
    table = {}
    group = None
    for g, label, c, d, t, ref in todo:
        got = samples[(c, d, t)]
        ok = [s for s in got if "error" not in s]
        if group != g:
            print(f"\n## {g}\n\n| case | records/s | GB/s | ratio | vs | peak RSS MB |\n"
                  "|---|---|---|---|---|---|")
            group = g
        if not ok:
            print(f"| {label} | error: {got[0]['error']} | | | | |")
            continue
        sec = statistics.median(s["seconds"] for s in ok)
        recs = ok[0]["records"]
        size = os.path.getsize(_path(d)) if os.path.exists(_path(d)) else 0
        size *= 4 if c.endswith("_x4") else 1
        rate = recs / sec if recs else None
        table[(g, label)] = {"rate": rate, "gbps": size / sec / 1e9, "sec": sec,
                             "rss": max(s["rss_mb"] for s in ok)}
        cmp = table.get((g, ref)) if ref else None
        ratio = ""
        if cmp:
            ratio = (f"{rate / cmp['rate']:.2f}x" if rate and cmp["rate"]
                     else f"{cmp['sec'] / sec:.2f}x")
        print(f"| {label} | {_si(rate)} | {size / sec / 1e9:.2f} | {ratio} | "
              f"{ref if cmp else ''} | {table[(g, label)]['rss']:.0f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{g} / {lab}": v for (g, lab), v in table.items()}, f, indent=1)


def _si(rate) -> str:
    if not rate:
        return "—"
    for div, unit in ((1e6, "M"), (1e3, "K")):
        if rate >= div:
            return f"{rate / div:.2f} {unit}"
    return f"{rate:.1f}"


if __name__ == "__main__":
    main()
