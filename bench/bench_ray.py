#!/usr/bin/env python3
"""tfrec_fast.ray.read_tfrecords against Ray Data's own ray.data.read_tfrecords (which imports
TensorFlow), on one node and on a cluster of two nodes in the same run, from local files and from
an S3 server (moto on 127.0.0.1 in a process of its own, read through pyarrow's S3FileSystem by both
readers).

    python bench/bench_ray.py [--repeats 3] [--datasets mnist,voc2,voc] [--records N] [--shards 8]
                              [--sources local,s3] [--nodes 1,2]

Data: make_example_data.py's MNIST-like and VOC-like records, and "voc2", VOC-like records with
2..6 objects each: Ray's own reader fails on the VOC-like set (a record with one box gives a
scalar, one with two a list), so voc2 is the VOC shape it is compared on.

A run streams the whole dataset as a training loop does: ``read(path).iter_batches(batch_size=
4096, batch_format="numpy")``, counting rows (every run must see every record); once per case, after
the warm-up, the batches' values are checked against the data written (per column: how many numbers
and their sum, how many byte strings and the sum of their bytes; row order aside). Topologies:
"1 node" is one Ray node with 2 CPUs; "2 nodes" is ray.cluster_utils.Cluster with two nodes of
1 CPU each (the same CPUs, with blocks crossing between nodes). Each (reader, topology, source)
runs in a process of its own with a cluster of its own (harness: bench/harness.py).

Columns beside rows/s: the peak of the cluster's object store use (sampled every 50 ms), and
where the time of the last run went, summed over tasks, from Ray's own stats: "tasks s" (the read
tasks, start to end), "blocks s" (of which making blocks: read + parse + Arrow), "store s"
(putting blocks into the object store), "held s" (read tasks Ray held back before submitting
them: Ray 2.60 runs one task at a time until its resource budget arrives, about a second into an
execution), "fetch s" and "format s" (the iterator getting blocks and formatting numpy batches).
For tfrec_fast the note under the table splits the block making, measured in one process on the
local shards: reading (framing, CRCs), parsing (the C++ decoder), building the Arrow columns.

Ray 2.60's read_tfrecords has no ``tfx_read_options`` (its tfx-bsl path was removed from Ray), so
there is no row for it. Needs ray[data] (+ moto, s3fs for S3) and, for Ray's own reader,
tensorflow (e.g. CI's peers venv, `.venv-peers`); without TensorFlow only tfrec_fast's rows.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import _common as C
import make_example_data as D
from _common import harness as H

BATCH = 4096
BUCKET = "bench"
NODE_STORE = 512 << 20


# ---- data ----------------------------------------------------------------------------------------

# "voc2": VOC-like records with 2..6 objects each, so that every list feature holds at least two
# values in every record: data Ray's own reader can read (it fails on 0/1/2+ objects mixed).
VOC2_LABEL = "VOC-like, 2..6 objects in every record (what Ray's own reader can read)"


def _columns(dataset: str, n: int):
    if dataset != "voc2":
        spec = D.EXAMPLE_DATASETS[dataset]
        return D.COLUMNS[dataset](n, spec["seed"]), spec["label"]
    cols = D.voc_columns(2 * n + 100, D.EXAMPLE_DATASETS["voc"]["seed"])
    keep = [i for i, row in enumerate(cols["image/object/class/label"]) if len(row) >= 2][:n]
    return {
        k: ([v[i] for i in keep] if isinstance(v, list) else v[keep]) for k, v in cols.items()
    }, VOC2_LABEL


def write_shards(opts) -> dict:
    """(harness.call) data set ``opts.dataset`` as ``opts.shards`` files in ``opts.dir``."""
    tfr = H.need("tfrec_fast")
    base = "voc" if opts.dataset == "voc2" else opts.dataset
    n = opts.records or D.EXAMPLE_DATASETS[base]["n_records"]
    cols, label = _columns(opts.dataset, n)
    directory = os.path.join(opts.dir, opts.dataset)
    os.makedirs(directory, exist_ok=True)
    cuts = [n * k // opts.shards for k in range(opts.shards + 1)]
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        part = {name: values[a:b] for name, values in cols.items()}
        D.write_tfrec_fast(os.path.join(directory, f"part-{k:05d}.tfrecords"), part, b - a, tfr)
    size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    return {
        "dir": directory,
        "n_records": n,
        "file_bytes": size,
        "label": label,
        "digest": digest(cols),
    }


def digest(columns) -> dict:
    """Per column, whatever the order of the rows: [how many numbers, their sum, how many byte
    strings, the sum of their bytes]. Written columns (numpy arrays, a 2-D uint8 array of byte
    strings, lists of lists) and numpy batches (object arrays of values or arrays) alike."""
    import numpy as np

    out = {}
    for name, values in columns.items():
        d = out.setdefault(name, [0, 0.0, 0, 0])
        _add(d, values, np)
    return out


def _add(d: list, v, np) -> None:
    if v is None:
        return
    if isinstance(v, (bytes, bytearray)) or (isinstance(v, np.ndarray) and v.dtype == np.uint8):
        if isinstance(v, np.ndarray) and v.ndim == 2:  # rows of bytes
            d[2] += len(v)
            d[3] += int(v.sum(dtype=np.int64))
            return
        d[2] += 1
        d[3] += int(np.frombuffer(bytes(v), np.uint8).sum(dtype=np.int64))
    elif isinstance(v, np.ndarray) and v.dtype != object:
        d[0] += v.size
        d[1] += float(v.sum(dtype=np.float64))
    elif isinstance(v, (list, tuple, np.ndarray)):
        for x in v:
            _add(d, x, np)
    else:
        d[0] += 1
        d[1] += float(v)


def digest_mismatch(want: dict, got: dict) -> "str | None":
    """What differs between two digests (float sums to 1e-6), or None."""
    import math

    if sorted(want) != sorted(got):
        return f"columns {sorted(got)}, expected {sorted(want)}"
    for name, (n, total, nb, byte_sum) in want.items():
        g = got[name]
        if (g[0], g[2], g[3]) != (n, nb, byte_sum) or not math.isclose(
            g[1], total, rel_tol=1e-6, abs_tol=1e-3
        ):
            return f"column {name!r}: {g}, expected {[n, total, nb, byte_sum]}"
    return None


# ---- a cluster, a source, a body -----------------------------------------------------------------


def _cluster(nodes: int):
    """This process's Ray: one node of 2 CPUs, or two nodes of 1 CPU (127.0.0.1 only)."""
    ray = H.need("ray")
    H.need("ray.data")
    if nodes == 1:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",
            object_store_memory=2 * NODE_STORE,
        )
    else:
        from ray._private import ray_constants
        from ray.cluster_utils import Cluster

        # Ray maps 127.0.0.1 in an address to the machine's IP unless told it is the loopback.
        os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
        ray_constants.ENABLE_RAY_CLUSTER = False
        common = dict(num_cpus=1, node_ip_address="127.0.0.1", object_store_memory=NODE_STORE)
        cluster = Cluster(
            initialize_head=True, head_node_args=dict(common, include_dashboard=False)
        )
        cluster.add_node(**common)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        atexit.register(cluster.shutdown)
    atexit.register(ray.shutdown)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    return ray


def _source(opts):
    """(path, filesystem) of the shards: the local directory, or a copy on a moto S3 server on
    127.0.0.1, in a process of its own (an object store does not share the driver's
    interpreter: in this process, moto's request handling would compete with the driver for the
    GIL)."""
    if opts.source == "local":
        return opts.dir, None
    H.need("moto.server")
    import pyarrow.fs as pafs

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", S3_SERVER, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    atexit.register(_stop, server)
    fs = pafs.S3FileSystem(
        access_key="testing",
        secret_key="testing",
        region="us-east-1",
        endpoint_override=f"127.0.0.1:{port}",
        scheme="http",
        allow_bucket_creation=True,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            fs.create_dir(BUCKET)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("moto's S3 server did not start") from None
            time.sleep(0.2)
    for name in sorted(os.listdir(opts.dir)):
        with (
            open(os.path.join(opts.dir, name), "rb") as f,
            fs.open_output_stream(f"{BUCKET}/data/{name}") as out,
        ):
            out.write(f.read())
    return f"{BUCKET}/data", fs


# moto's server on 127.0.0.1:PORT, until the process that started it ends (even killed).
S3_SERVER = """
import os, sys, time
from moto.server import ThreadedMotoServer
parent = os.getppid()
server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]), verbose=False)
server.start()
while os.getppid() == parent:
    time.sleep(0.5)
server.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class _PeakStore:
    """The cluster's object store use, sampled every 50 ms while running: its maximum."""

    def __init__(self, ray):
        from ray._private.internal_api import get_memory_info_reply, get_state_from_address

        self._state = get_state_from_address(ray.get_runtime_context().gcs_address)
        self._reply = get_memory_info_reply
        self.peak = 0
        self._stop = threading.Event()

    def _used(self) -> int:
        return int(self._reply(self._state).store_stats.object_store_bytes_used)

    def __enter__(self):
        self.peak = self._used()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self):
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self._used())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._used())


def _breakdown(ds) -> dict:
    """Seconds of the last run, summed over tasks, from Ray Data's stats."""
    summary = ds._get_stats_summary()
    figures = {
        "blocks_s": "block_generation_time",
        "store_s": "block_serialization_time_s",
        "held_s": "task_submission_backpressure_time",
    }
    out = dict.fromkeys(figures, 0.0)
    out["tasks_s"] = 0.0
    for stats in [summary, *summary.parents]:
        metrics = stats.extra_metrics or {}
        for key, metric in figures.items():
            out[key] += float(metrics.get(metric) or 0)
        for op in stats.operators_stats:  # (from the blocks' own metadata: complete)
            out["tasks_s"] += float(op.wall_time.sum if op.wall_time else 0)
    it = summary.iter_stats
    return {**out, "fetch_s": it.get_time.get(), "format_s": it.format_time.get()}


def _streaming(read, opts, info: str) -> H.Body:
    ray = _cluster(opts.nodes)
    path, fs = _source(opts)
    peak = _PeakStore(ray)
    last: dict = {}

    def run() -> int:
        ds = read(path, filesystem=fs)
        with peak:
            try:
                rows = sum(
                    len(next(iter(b.values())))
                    for b in ds.iter_batches(batch_size=BATCH, batch_format="numpy")
                )
            except Exception as error:  # Ray's own reader fails on mixed value counts
                raise RayReadFailed(_cause(error)) from None
        last.update(_breakdown(ds), peak_store_mib=peak.peak / 2**20)
        return rows

    def check():
        ds = read(path, filesystem=fs)
        got: dict = {}
        for batch in ds.iter_batches(batch_size=BATCH, batch_format="numpy"):
            for name, values in digest(batch).items():
                total = got.setdefault(name, [0, 0.0, 0, 0])
                for i, v in enumerate(values):
                    total[i] += v
        return digest_mismatch(opts.digest, got)

    topology = "1 node x 2 CPUs" if opts.nodes == 1 else "2 nodes x 1 CPU"
    return H.Body(
        run,
        check=check,
        info=f"ray {ray.__version__}, {topology}, {opts.source}; {info}",
        extras=lambda: dict(last),
    )


class RayReadFailed(Exception):
    """A reader failed inside Ray; says the cause line of Ray's error."""


def _cause(error: Exception) -> str:
    """The last "SomeError: ..." line of an error Ray passed on (its own hints come after)."""
    lines = [x.strip() for x in str(error).splitlines()]
    found = [x for x in lines if re.match(r"[\w.]*(Error|Exception): ", x)]
    return (found or lines or [type(error).__name__])[-1][:100]


# ---- cases ---------------------------------------------------------------------------------------


def ray_tfrec_fast(opts):
    tray = H.need("tfrec_fast.ray")
    body = _streaming(tray.read_tfrecords, opts, "tfrec_fast.ray.read_tfrecords(path)")
    body.info += "; " + _in_process_split(opts.dir)
    return body


def _in_process_split(directory: str) -> str:
    """Block making in one process, on the local shards, as the read tasks do it: reading
    (framing, CRCs), parsing (the C++ decoder: the features' kinds, then their values), and
    the rest of the conversion (building the Arrow columns)."""
    import pyarrow.fs as pafs

    from tfrec_fast import _core
    from tfrec_fast.example import VarLen, _decode
    from tfrec_fast.ray._datasource import _Reading, _sample_files
    from tfrec_fast.ray._schema import Converter, columns_of
    from tfrec_fast.records import TFRecordReader

    files = sorted(os.path.join(directory, f) for f in os.listdir(directory))
    reading = _Reading(pafs.LocalFileSystem(), "", {}, True, None, 128 << 20, sample_records=1024)
    columns = columns_of(_sample_files(reading, [(f, None) for f in files]))
    converter = Converter(None, columns)
    typed = {c.name: VarLen(c.kind) for c in columns}
    read_s = parse_s = convert_s = 0.0
    rows = 0
    for path in files:
        with TFRecordReader(path) as reader:
            while True:
                start = time.perf_counter()
                batch = reader.read_batch(max_bytes=128 << 20)
                read_s += time.perf_counter() - start
                if not len(batch):
                    break
                start = time.perf_counter()
                _core.feature_kinds(batch, path, False, True)
                _decode(batch, typed, path)
                parse_s += time.perf_counter() - start
                start = time.perf_counter()
                rows += converter.convert(batch, path, 0).num_rows
                convert_s += time.perf_counter() - start
    # Arrow building is what converting costs beyond parsing alone: a difference of two timings,
    # so it is given only where it stands out of their noise (a tenth of the conversion).
    arrow_s = convert_s - parse_s
    arrow = (
        f"{rows / arrow_s / 1e6:.2f}"
        if arrow_s > 0.1 * convert_s
        else "(within the noise of parsing)"
    )
    return (
        f"in one process, M rows/s: reading {rows / read_s / 1e6:.2f}, parsing "
        f"{rows / parse_s / 1e6:.2f}, converting (parsing + Arrow) "
        f"{rows / convert_s / 1e6:.2f}, building Arrow blocks {arrow}"
    )


def ray_data(opts):
    if importlib.util.find_spec("tensorflow") is None:  # Ray imports it in its tasks
        raise H.Skip("tensorflow is not installed here")
    ray = H.need("ray")
    H.need("ray.data")
    return _streaming(ray.data.read_tfrecords, opts, "ray.data.read_tfrecords(path) (TensorFlow)")


CASES = [
    H.Case("tfrec_fast", "tfrec_fast.ray.read_tfrecords", ray_tfrec_fast),
    H.Case("ray_data", "ray.data.read_tfrecords (TensorFlow)", ray_data),
]


def _median_extra(key: str):
    return lambda r: statistics.median(r.extra[key]) if r.extra.get(key) else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=3, min_time=0.0)
    ap.set_defaults(timeout=600.0)  # Ray can hang when its workers fail to start
    ap.add_argument(
        "--datasets",
        default="mnist,voc2,voc",
        help="comma list: mnist, tutorial, voc, voc2 (VOC-like, 2+ objects each)",
    )
    ap.add_argument("--records", type=int, default=0, help="records per data set (0: its default)")
    ap.add_argument("--shards", type=int, default=8, help="files per data set")
    ap.add_argument("--sources", default="local,s3", help="comma list: local, s3")
    ap.add_argument("--nodes", default="1,2", help="comma list: 1 (one node), 2 (two nodes)")
    args = ap.parse_args(argv)
    md = [
        C.header(
            args,
            f"{H.versions(['ray', 'tensorflow-cpu'])}. 'vs ray.data.read_tfrecords': "
            "how many times faster than Ray's own reader (>1 = faster), same "
            "topology and source. Ray 2.60 has no tfx_read_options path.",
        )
    ]
    columns = [
        H.Versus(
            "vs ray.data.read_tfrecords",
            "ray_data",
            target=30,
            mine=lambda r: r.name == "tfrec_fast",
        ),
        H.figure("peak store MiB", _median_extra("peak_store_mib"), ".0f"),
        *(
            H.figure(h, _median_extra(k), ".2f")
            for h, k in (
                ("tasks s", "tasks_s"),
                ("blocks s", "blocks_s"),
                ("store s", "store_s"),
                ("held s", "held_s"),
                ("fetch s", "fetch_s"),
                ("format s", "format_s"),
            )
        ),
        *H.timing(".3f"),
    ]
    raw, targets = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
            made = H.call(
                write_shards,
                {"dir": tmp, "dataset": name, "records": args.records, "shards": args.shards},
                log_dir=C.log_dir(f"ray-data-{name}"),
            )
            n = made["n_records"]
            for source in [s.strip() for s in args.sources.split(",") if s.strip()]:
                for nodes in [int(k) for k in args.nodes.split(",") if k.strip()]:
                    where = f"{'1 node' if nodes == 1 else '2 nodes'}, {source}"
                    print(f"== ray {name}, {where}", file=sys.stderr)
                    res = H.measure(
                        H.select(CASES, args.cases),
                        {
                            "dir": made["dir"],
                            "source": source,
                            "nodes": nodes,
                            "digest": made["digest"],
                        },
                        log_dir=C.log_dir(f"ray-{name}-{source}-{nodes}"),
                        **H.timing_options(args),
                    )
                    H.expect_records(res, n)
                    cols = [H.per_second("rows/s", n), *columns]
                    text, notes = H.table(res, cols, first="reader")
                    targets += H.targets(res, cols, f"{name}, {where}")
                    md.append(
                        H.section(
                            f"{made['label']}, {where} ({n:,} records in "
                            f"{args.shards} files, {made['file_bytes'] / 1e6:.1f} "
                            "MB)",
                            text,
                            notes,
                        )
                    )
                    raw[f"{name}-{source}-{nodes}"] = H.raw(res)
    if targets:
        md.append(H.section("Targets (tfrec_fast ≥ 30x Ray's own reader)", "", targets))
    return H.emit(md, raw, args.markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
