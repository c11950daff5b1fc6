#!/usr/bin/env python3
"""tfrec_fast.ray.read_tfrecords against Ray Data's own ray.data.read_tfrecords (which imports
TensorFlow): rows/s to materialize the dataset, each reader on a local cluster of its own
(ray.init(num_cpus=2)).

    python bench/bench_ray.py [--repeats 3] [--datasets mnist,voc] [--records N]

Needs ray[data] and, for Ray's own reader, tensorflow in the same environment (the peers'
venv); without TensorFlow only tfrec_fast's row is measured. Data: make_example_data.py's
generators, written to a temporary directory by a process of its own. Each reader runs in its own
process through the harness (src/tfrec_fast/bench.py): round-robin after a warm-up (workers
started, page cache filled), median of --repeats; every run must count all the records.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import tempfile

import _common as C
import make_example_data as D
from _common import harness as H

# ---- cases -----------------------------------------------------------------------------------------


class RayReadFailed(Exception):
    """A reader failed inside Ray; says the cause line of Ray's error."""


def _cause(error: Exception) -> str:
    """The last "SomeError: ..." line of an error Ray passed on (its own hints come after)."""
    lines = [x.strip() for x in str(error).splitlines()]
    found = [x for x in lines if re.match(r"[\w.]*(Error|Exception): ", x)]
    return (found or lines or [type(error).__name__])[-1][:100]


def _materializing(read, path: str) -> H.Body:
    """A local cluster for this process, and a Body that materializes read(path) and counts its rows."""
    ray = H.need("ray")
    H.need("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    ray.data.DataContext.get_current().enable_progress_bars = False

    def run() -> int:
        try:
            return read(path).materialize().count()
        except Exception as error:  # Ray's own reader fails on mixed value counts
            ray.shutdown()  # the cluster down before the harness ends this process
            raise RayReadFailed(_cause(error)) from None

    return H.Body(run, info=f"ray {ray.__version__}, ray.init(num_cpus=2), read(path).materialize().count()")


def ray_tfrec_fast(opts):
    tray = H.need("tfrec_fast.ray")
    return _materializing(tray.read_tfrecords, opts.file)


def ray_data(opts):
    if importlib.util.find_spec("tensorflow") is None:  # Ray imports it in its tasks
        raise H.Skip("tensorflow is not installed here")
    ray = H.need("ray")
    H.need("ray.data")
    return _materializing(ray.data.read_tfrecords, opts.file)


CASES = [H.Case("tfrec_fast", "tfrec_fast.ray.read_tfrecords", ray_tfrec_fast),
         H.Case("ray_data", "ray.data.read_tfrecords (TensorFlow)", ray_data)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    H.add_arguments(ap, repeats=3, min_time=0.5)
    ap.set_defaults(timeout=300.0)  # a run takes seconds; Ray can hang when its workers fail to start
    ap.add_argument("--datasets", default="mnist,voc", help="comma list: mnist, tutorial, voc")
    ap.add_argument("--records", type=int, default=0, help="records per data set (0: its default)")
    args = ap.parse_args(argv)
    md = [C.header(args, f"{H.versions(['ray', 'tensorflow-cpu'])}. 'vs ray.data.read_tfrecords': "
                         "how many times faster than Ray's own reader (>1 = faster).")]
    raw = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
            print(f"== ray {name}", file=sys.stderr)
            made = H.call(D.write_temp, {"dir": tmp, "dataset": name, "records": args.records},
                          log_dir=C.log_dir(f"ray-data-{name}"))
            res = H.measure(H.select(CASES, args.cases), {"file": made["file"]}, log_dir=C.log_dir(f"ray-{name}"),
                            **H.timing_options(args))
            n = made["n_records"]
            H.expect_records(res, n)
            text, notes = H.table(res, [H.per_second("rows/s", n), H.Versus("vs ray.data.read_tfrecords", "ray_data"),
                                        *H.timing(".3f")], first="reader")
            md.append(H.section(f"{made['label']} ({n:,} records, {made['file_bytes'] / 1e6:.1f} MB)", text, notes))
            raw[name] = H.raw(res)
    return H.emit(md, raw, args.markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
