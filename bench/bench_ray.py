"""tfrec_fast.ray.read_tfrecords against Ray Data's own ray.data.read_tfrecords (which imports
TensorFlow) on one local cluster (ray.init(num_cpus=2)): rows/s to materialize the dataset.

    python bench/bench_ray.py [--repeats 3] [--datasets mnist,voc] [--records N]

Needs ray[data] and, for Ray's own reader, tensorflow in the same environment (the peers'
venv); without TensorFlow only tfrec_fast's row is measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ray  # noqa: E402

import tfrec_fast as tfr  # noqa: E402
from tfrec_fast import ray as tray  # noqa: E402

import make_example_data as data  # noqa: E402


def rows_per_second(read, path: str, n: int, repeats: int) -> float:
    read(path).materialize()  # warm: workers started, page cache filled
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        count = read(path).materialize().count()
        times.append(time.perf_counter() - start)
        assert count == n, (count, n)
    return n / statistics.median(times)


def _cause(error: Exception) -> str:
    """The last "SomeError: ..." line of an error Ray passed on (its own hints come after)."""
    lines = [x.strip() for x in str(error).splitlines()]
    found = [x for x in lines if re.match(r"[\w.]*(Error|Exception): ", x)]
    return (found or lines or [type(error).__name__])[-1][:100]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--datasets", default="mnist,voc")
    ap.add_argument("--records", type=int, default=0, help="records per data set (0: default)")
    args = ap.parse_args(argv)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    ray.data.DataContext.get_current().enable_progress_bars = False
    have_tf = importlib.util.find_spec("tensorflow") is not None
    readers = [("tfrec_fast.ray.read_tfrecords", tray.read_tfrecords)]
    if have_tf:
        readers.append(("ray.data.read_tfrecords (TensorFlow)", ray.data.read_tfrecords))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            meta = data.EXAMPLE_DATASETS[name]
            n = args.records or meta["n_records"]
            path = str(Path(tmp) / (name + ".tfrecords"))
            data.write_tfrec_fast(path, data.COLUMNS[name](n, meta["seed"]), n, tfr)
            for label, read in readers:
                try:
                    rows.append((name, label, rows_per_second(read, path, n, args.repeats)))
                except Exception as error:  # Ray's own reader fails on mixed value counts
                    rows.append((name, label, f"fails: {_cause(error)}"))
    ray.shutdown()
    print(f"ray {ray.__version__}, median of {args.repeats}, ray.init(num_cpus=2)\n")
    print("| data | reader | rows/s | tfrec_fast vs it |")
    print("|---|---|---|---|")
    ours = {name: rate for name, label, rate in rows if label.startswith("tfrec_fast")}
    for name, label, rate in rows:
        if isinstance(rate, str):
            print(f"| {name} | {label} | {rate} | |")
        else:
            print(f"| {name} | {label} | {rate:,.0f} | {ours[name] / rate:.1f}x |")
    if not have_tf:
        print("\nray.data.read_tfrecords not measured: tensorflow is not installed here")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
