"""tfrec_fast.arrow against read_examples on the same file (numpy columns, the same batch size):
read_table against every batch of read_examples kept in a list, iter_batches against
read_examples streamed (each batch dropped); the Arrow hand-over should be nearly free (issue
target: within 1.2x). For reference: parse_examples on records already in memory, and Parquet
(the same table written as Parquet, read by pyarrow.parquet.read_table with 1 thread and with all
threads).

    python bench/bench_arrow.py [--repeats 7] [--datasets mnist,tutorial,voc] [--records N]
                                [--clock wall|cpu]

Data: bench/make_example_data.py's generators (MNIST-like, TF tutorial, VOC-like), written to a
temporary directory (page cache warm). The cases run in this process, interleaved round by
round after one warm-up round, so that a busy machine's noise falls on all of them alike; the
table shows each case's median and the median of its per-round ratio to its read_examples row.
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


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def interleaved(cases: dict, repeats: int, clock) -> dict:
    """{label: [seconds per round]}: one warm-up round, then ``repeats`` rounds of every case."""
    times = {label: [] for label in cases}
    for round_ in range(repeats + 1):
        for label, fn in cases.items():
            start = clock()
            fn()
            if round_:
                times[label].append(clock() - start)
    return times


KEPT = "read_examples, every batch kept (list)"
STREAMED = "read_examples, streamed (each batch dropped)"
TABLE = "arrow.read_table (file -> pyarrow.Table)"
BATCHES = "arrow.iter_batches, streamed"
BASE_OF = {TABLE: KEPT, BATCHES: STREAMED}  # the rows the targets compare


def drain(iterable) -> None:
    for _ in iterable:
        pass


def run(name: str, n: int, repeats: int, tmp: Path, batch_size: int, clock) -> list:
    meta = data.EXAMPLE_DATASETS[name]
    n = n or meta["n_records"]
    path = str(tmp / meta["file"])
    data.write_tfrec_fast(path, data.COLUMNS[name](n, meta["seed"]), n, tfr)
    spec = SPECS[name]
    batch = tfr.RecordBatch.from_records(tfr.read_records(path))
    parquet = tmp / (name + ".parquet")
    pq.write_table(ta.read_table(path, spec), parquet, compression="none")
    cases = {
        KEPT: lambda: list(tfr.read_examples(path, spec, batch_size=batch_size)),
        TABLE: lambda: ta.read_table(path, spec, batch_size=batch_size),
        STREAMED: lambda: drain(tfr.read_examples(path, spec, batch_size=batch_size)),
        BATCHES: lambda: drain(ta.iter_batches(path, spec, batch_size=batch_size)),
        "parse_examples (records in memory -> columns)": lambda: tfr.parse_examples(batch, spec),
        "pyarrow.parquet.read_table, 1 thread": lambda: pq.read_table(parquet, use_threads=False),
        "pyarrow.parquet.read_table, all threads": lambda: pq.read_table(parquet),
    }
    times = interleaved(cases, repeats, clock)
    return [(name, label, n / statistics.median(ts), _ratio(ts, times[BASE_OF.get(label, KEPT)]))
            for label, ts in times.items()]


def _ratio(times: list, base: list) -> float:
    """The median over rounds of this case's time over its base's."""
    return statistics.median(t / b for t, b in zip(times, base))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--datasets", default="mnist,tutorial,voc")
    ap.add_argument("--records", type=int, default=0, help="records per data set (0: default)")
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                    help="wall time, or this process's CPU time (steadier on a busy machine; "
                    "counts every thread, so Parquet's all-threads row is not comparable)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for name in args.datasets.split(","):
            results += run(name, args.records, args.repeats, Path(tmp), args.batch_size,
                           CLOCKS[args.clock])
    print(f"pyarrow {pa.__version__}, tfrec_fast {tfr.__version__}, median of {args.repeats} "
          f"interleaved rounds, batch_size {args.batch_size}, {args.clock} time\n")
    print("| data | reader | records/s | time vs read_examples (kept / streamed) |")
    print("|---|---|---|---|")
    for name, label, rate, ratio in results:
        mark = (" ✅" if ratio <= 1.2 else " ❌") + " (target ≤1.2x)" if label in BASE_OF else ""
        print(f"| {name} | {label} | {rate / 1e6:.2f} M | {ratio:.2f}x{mark} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
