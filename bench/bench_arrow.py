"""tfrec_fast.arrow.read_table against parse_examples on the same records (the Arrow hand-over
should be nearly free), and against Parquet: the same table written as Parquet and read by
pyarrow.parquet.read_table with 1 thread and with all threads.

    python bench/bench_arrow.py [--repeats 5] [--datasets mnist,tutorial,voc] [--records N]

Data: bench/make_example_data.py's generators (MNIST-like, TF tutorial, VOC-like), written to a
temporary directory. Records are read into memory first (page cache warm); each figure is the
median of --repeats runs in this process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import tfrec_fast as tfr  # noqa: E402
from tfrec_fast import arrow as ta  # noqa: E402

import make_example_data as data  # noqa: E402

SPECS = {
    "mnist": {"index": tfr.FixedLen((), "int64"), "label": tfr.FixedLen((), "int64"),
              "image_raw": tfr.FixedLen((), "bytes")},
    "tutorial": {"feature0": tfr.FixedLen((), "int64"), "feature1": tfr.FixedLen((), "int64"),
                 "feature2": tfr.FixedLen((), "bytes"), "feature3": tfr.FixedLen((), "float32")},
    "voc": {"image/encoded": tfr.FixedLen((), "bytes"),
            "image/height": tfr.FixedLen((), "int64"), "image/width": tfr.FixedLen((), "int64"),
            "image/object/bbox/xmin": tfr.VarLen("float32"),
            "image/object/bbox/ymin": tfr.VarLen("float32"),
            "image/object/bbox/xmax": tfr.VarLen("float32"),
            "image/object/bbox/ymax": tfr.VarLen("float32"),
            "image/object/class/label": tfr.VarLen("int64"),
            "image/object/class/text": tfr.VarLen("bytes")},
}


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(name: str, n: int, repeats: int, tmp: Path) -> list:
    meta = data.EXAMPLE_DATASETS[name]
    n = n or meta["n_records"]
    path = tmp / meta["file"]
    data.write_tfrec_fast(path, data.COLUMNS[name](n, meta["seed"]), n, tfr)
    spec = SPECS[name]
    batch = tfr.RecordBatch.from_records(tfr.read_records(str(path)))
    table = ta.read_table(str(path), spec)
    parquet = tmp / (name + ".parquet")
    pq.write_table(table, parquet, compression="none")
    rows = [
        ("parse_examples (columns, 1 batch)", lambda: tfr.parse_examples(batch, spec)),
        ("arrow.read_table (file -> pyarrow.Table)", lambda: ta.read_table(str(path), spec)),
        ("read_records + parse_examples (file -> columns)",
         lambda: tfr.parse_examples(tfr.RecordBatch.from_records(tfr.read_records(str(path))),
                                    spec)),
        ("pyarrow.parquet.read_table, 1 thread", lambda: pq.read_table(parquet, use_threads=False)),
        ("pyarrow.parquet.read_table, all threads", lambda: pq.read_table(parquet)),
    ]
    out = []
    for label, fn in rows:
        seconds = median_seconds(fn, repeats)
        out.append((name, label, n / seconds))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--datasets", default="mnist,tutorial,voc")
    ap.add_argument("--records", type=int, default=0, help="records per data set (0: default)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for name in args.datasets.split(","):
            results += run(name, args.records, args.repeats, Path(tmp))
    print(f"pyarrow {pa.__version__}, tfrec_fast {tfr.__version__}, median of {args.repeats}\n")
    print("| data | reader | records/s | vs read_table |")
    print("|---|---|---|---|")
    base = {name: rate for name, label, rate in results if label.startswith("arrow.read_table")}
    for name, label, rate in results:
        print(f"| {name} | {label} | {rate / 1e6:.2f} M | {rate / base[name]:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
