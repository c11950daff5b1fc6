"""read_examples and read_records with num_threads=1 against num_threads=None (read-ahead thread +
parsing pool), records/s, page cache warm, median of --repeats runs in fresh processes.

    python bench/bench_threads.py [--repeats 3] [--datasets mnist,tutorial,voc,large]

Data: bench/make_example_data.py's MNIST-like, TF-tutorial and VOC-like sets, and "large":
2,000 Examples holding one 100 KB bytes value each (JPEG-sized records).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def make(name: str, directory: Path) -> str:
    import numpy as np

    import tfrec_fast as tfr
    path = directory / f"{name}.tfrecord"
    if name == "large":
        rng = np.random.default_rng(0)
        with tfr.TFRecordWriter(str(path)) as w:
            for i in range(2000):
                w.write_example({"image/encoded": [rng.bytes(100_000)], "label": [i % 10]})
        return str(path)
    import make_example_data as data
    meta = data.EXAMPLE_DATASETS[name]
    data.write_tfrec_fast(path, data.COLUMNS[name](meta["n_records"], meta["seed"]),
                          meta["n_records"], tfr)
    return str(path)


def spec_for(name: str):
    import tfrec_fast as tfr
    if name == "large":
        return {"image/encoded": tfr.FixedLen((), "bytes"), "label": tfr.FixedLen((), "int64")}
    import make_example_data as data
    return data.tfrec_fast_spec(name)


def worker(args) -> None:
    """One timing in this fresh process: prints records/s."""
    import tfrec_fast as tfr
    path, name, how, threads = args.worker
    threads = int(threads)
    spec = spec_for(name)
    sum(1 for _ in tfr.read_records(path))  # warm the page cache
    start = time.perf_counter()
    if how == "read_examples":
        n = sum(len(next(iter(cols.values()))) for cols in
                tfr.read_examples(path, spec, num_threads=threads))
    else:
        n = sum(1 for _ in tfr.read_records(path, num_threads=threads))
    print(json.dumps(n / (time.perf_counter() - start)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--datasets", default="mnist,tutorial,voc,large")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    from tfrec_fast._parallel import default_threads
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            path = make(name, Path(tmp))
            for how in ("read_examples", "read_records"):
                rates = {}
                for threads in (1, max(2, default_threads())):
                    runs = [float(subprocess.check_output(
                        [sys.executable, __file__, "--worker", path, name, how, str(threads)]))
                        for _ in range(args.repeats)]
                    rates[threads] = statistics.median(runs)
                rows.append((name, how, rates))
    print(f"median of {args.repeats} fresh processes; num_threads=None gives "
          f"{default_threads()}\n")
    print("| data | entry point | num_threads=1 | num_threads=None | speed-up |")
    print("|---|---|---|---|---|")
    for name, how, rates in rows:
        one, many = rates[1], rates[max(rates)]
        print(f"| {name} | {how} | {one / 1e6:.2f} M/s | {many / 1e6:.2f} M/s | "
              f"{many / one:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
