"""Remote data: streaming and planning against a local HTTP server that behaves like an object
store across a network, and reading, random access and writing on an S3 server (moto).

    python bench/bench_remote.py [--sections streaming,planning,s3] [--shards 6 --shard-mb 24]
                                 [--latency-ms 20 --bandwidth-mb 40] [--repeats 3]

Sections (each case in its own process; the servers in processes of their own):
- streaming: tests/_servers.py's HTTP server (Range, ETag) adding --latency-ms before every
  answer and capping each connection at --bandwidth-mb MB/s. Many shards (--shards x --shard-mb
  MB) and one object of the same total size, read by ``read_records`` (both CRCs checked), each
  against fsspec's ``fs.cat(urls)`` (concurrent whole-object downloads into memory) in the same
  run; target >= 0.8x. Peak RSS of each case (a run of its own): tfrec_fast holds at most the
  ``read_ahead`` setting of ranges (64 MiB by default) beside its batches; fs.cat holds every
  object.
- planning: the bytes and requests the same server counts for planning and reading: a DDP job
  (2 ranks x 2 DataLoader workers, torch) over the shards with ``.idx`` files beside them
  (target <= 1.10x the data), without them, each rank on its own machine (its own index cache;
  target <= 3x: ranks + 1), its next epoch, ``IndexedTFRecordDataset`` without indexes (one scan),
  and ``tfrec_fast.storage.describe`` (sizes, versions, indexes: no data). Small data suffices
  (--plan-mb); ratios do not depend on the size.
- s3: moto's S3 server: sequential read MB/s vs s3fs ``fs.cat()`` and the ``tfrecord`` package on
  ``fs.open()``; random access (``get_batch`` of 256 records vs 256 ``reader[i]``) on an HTTP
  server with 0 and 20 ms added; writing vs ``fs.pipe_file()`` (--size-mb).

moto serves a range request by copying the whole object (a property of the test server, not of
S3), so on it fewer, larger requests win; the ratios to fs.cat() of the same run are the numbers
to read. Self-contained: needs fsspec, s3fs, aiohttp and moto[server]; planning needs torch; the
tfrecord row needs tfrecord==1.14.6.
bench/run_all.sh puts its tables in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import _common as C
import numpy as np
from _common import harness as H

SERVERS = C.BENCH_DIR.parent / "tests" / "_servers.py"
SECTIONS = ("streaming", "planning", "s3")
_MOTO = (
    "import sys; from moto.server import ThreadedMotoServer; "
    "s = ThreadedMotoServer(ip_address='127.0.0.1', port=int(sys.argv[1]), verbose=False); "
    "s.start(); print('ready', flush=True); sys.stdin.read()"
)
_HTTP = r"""
import http.server, os, re, sys, time
port, path, latency = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]) / 1000
data = open(path, "rb").read()

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
    def do_GET(self):
        time.sleep(latency)
        m = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        start, end = (int(m.group(1)), int(m.group(2))) if m else (0, len(data) - 1)
        self.send_response(206 if m else 200)
        self.send_header("Content-Length", str(end + 1 - start))
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.end_headers()
        self.wfile.write(data[start:end + 1])

server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
server.daemon_threads = True
print("ready", flush=True)
server.serve_forever()
"""
LATENCIES_MS = (0, 20)
BATCH = 256
# name -> (label, smallest and largest record): each data set is --size-mb MB of records.
DATASETS = {
    "large": ("75-125 KB records", 75_000, 125_000),
    "small": ("0.5-1.5 KB records", 500, 1_500),
    "tiny": ("64-256 B records", 64, 256),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(script: str, *args):
    """A server in its own process (so that it does not compete for a case's GIL): its port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(port), *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("server did not start")
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=30)


def make_records(size_mb: int, low: int, high: int, seed: int = 1):
    """Random records of ``low``-``high`` bytes adding up to ``size_mb`` MB."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(low, high + 1, size_mb * 2_000_000 // (low + high) + 1)
    data = rng.bytes(int(sizes.sum()))
    ends = np.cumsum(sizes)
    return [data[e - n : e] for e, n in zip(ends.tolist(), sizes.tolist())]


# ---- cases (opts: storage_options, files = [the s3:// URL], local = the same file on disk) -----------


def _s3(opts):
    return H.need("s3fs").S3FileSystem(**opts.storage_options, skip_instance_cache=True)


def cat(opts):
    fs = _s3(opts)

    def run():
        fs.cat(opts.files[0])
        return 0  # bytes, not records

    return H.Body(run, info="s3fs: concurrent range requests into memory")


def tfrecord_on_fsspec(opts):
    """The tfrecord package's reader over ``fs.open(path)``: its module's io.open and
    os.path.getsize pointed at the filesystem's (this process is the case's own)."""
    peer = H.need("tfrecord.reader")
    fs = _s3(opts)
    path = opts.files[0][len("s3://") :]

    class _IO:
        open = staticmethod(lambda p, mode="rb": fs.open(p, mode))

    class _OS:
        class path:
            getsize = staticmethod(fs.size)

    peer.io, peer.os = _IO, _OS
    return H.Body(
        lambda: sum(1 for _ in peer.tfrecord_iterator(path)),
        info=f"{H.versions(['tfrecord'])}, no CRC check",
    )


class RequestCounter:
    """Counts the GETs an async fsspec filesystem sends (its _cat_file coroutine)."""

    def __init__(self, fs):
        self.count = 0
        inner = fs._cat_file

        async def counted(*args, **kwargs):
            self.count += 1
            return await inner(*args, **kwargs)

        fs._cat_file = counted


def _random_reads(opts, read_all):
    """``read_all(reader, indices)`` of BATCH new random records every run, from the HTTP server
    whose added latency ends the case's name; figures: the range requests of each run."""
    fsspec, tfr = H.need("fsspec"), H.need("tfrec_fast")
    counter = RequestCounter(fsspec.filesystem("http"))
    url = opts.urls[opts.case.rsplit("_", 1)[1]]
    reader = tfr.IndexedTFRecordReader(url, tfr.create_index(opts.local))
    records = [bytes(r) for r in tfr.read_records(opts.local)]
    rng = np.random.default_rng(0)
    drawn = [np.zeros(0, np.int64)]

    def prepare():
        drawn[0] = rng.integers(0, len(records), BATCH)
        counter.count = 0

    def check():
        prepare()
        got = [bytes(r) for r in read_all(reader, drawn[0])]
        return None if got == [records[i] for i in drawn[0]] else "records differ from the file's"

    def run():
        return len(read_all(reader, drawn[0]))

    return H.Body(run, prepare=prepare, check=check, extras=lambda: {"requests": counter.count})


def get_batch(opts):
    return _random_reads(opts, lambda reader, indices: reader.get_batch(indices))


def one_by_one(opts):
    return _random_reads(opts, lambda reader, indices: [reader[i] for i in indices.tolist()])


def pipe_file(opts):
    fs, data = _s3(opts), Path(opts.local).read_bytes()

    def run():
        fs.pipe_file("bench/piped.tfrecord", data)
        return 0  # bytes, not records

    return H.Body(run)


def tfrec_fast_write(opts):
    tfr = H.need("tfrec_fast")
    records = [bytes(r) for r in tfr.read_records(opts.local)]
    url = "s3://bench/written.tfrecord"

    def run():
        with tfr.TFRecordWriter(url, storage_options=opts.storage_options) as writer:
            writer.write_batch(records)
        return len(records)

    def check():
        size = _s3(opts).size(url)
        return None if size == os.path.getsize(opts.local) else f"wrote {size} bytes"

    return H.Body(run, check=check, info="framing + CRCs, multipart upload")


CAT = H.Case("cat", "fs.cat() (transport limit)", cat)
SEQUENTIAL = [
    CAT,
    *H.READ_CASES[:2],
    H.Case("tfrecord", "tfrecord on fs.open()", tfrecord_on_fsspec),
]
BATCHES = [
    H.Case(
        f"get_batch_{ms}", f"get_batch(256): coalesced, concurrent; {ms} ms round trip", get_batch
    )
    for ms in LATENCIES_MS
]
SINGLES = [
    H.Case(
        f"single_{ms}", f"reader[i] 256 times, one after another; {ms} ms round trip", one_by_one
    )
    for ms in LATENCIES_MS
]
WRITE = [
    H.Case("pipe", "fs.pipe_file() of the bytes in memory (transport limit)", pipe_file),
    H.Case("tfrec_fast_write", "tfrec_fast TFRecordWriter('s3://...')", tfrec_fast_write),
]


# ---- streaming at link speed (opts: urls = the shards, one = the large object) -------------------


def _http_fs():
    return H.need("fsspec").filesystem("http", skip_instance_cache=True)


def cat_urls(opts):
    fs, urls = _http_fs(), opts.urls if opts.case.endswith("many") else [opts.one]

    def run():
        fs.cat(urls)
        return 0  # bytes, not records

    return H.Body(run, info="fsspec HTTP: one GET per object, all at once, into memory")


def read_urls(opts):
    tfr = H.need("tfrec_fast")
    urls = opts.urls if opts.case.endswith("many") else [opts.one]
    return H.Body(
        H.counting(lambda: tfr.read_records(urls, num_threads=1)),
        info="both CRCs checked; ranges of 4 MiB, at most 64 MiB and 32 requests held",
    )


STREAMING = {
    "many": [
        H.Case("cat_many", "fs.cat(urls) (all shards at once)", cat_urls),
        H.Case("read_many", "tfrec_fast read_records(urls)", read_urls),
    ],
    "one": [
        H.Case("cat_one", "fs.cat(url)", cat_urls),
        H.Case("read_one", "tfrec_fast read_records(url)", read_urls),
    ],
}


# ---- planning: bytes and requests (opts: base = the server, files = {name: [paths]}) ------------


def _stats(base: str, reset: bool = False) -> dict:
    import json
    import urllib.request

    with urllib.request.urlopen(f"{base}/{'_reset' if reset else '_stats'}") as answer:
        return json.loads(answer.read())


def _ddp(opts, pattern: str, caches, epochs: int = 1) -> int:
    """A DDP job of 2 ranks run one after another, 2 DataLoader workers each: records read."""
    torch = H.need("torch")
    tfr = H.need("tfrec_fast")
    from tfrec_fast.torch import TFRecordDataset

    n = 0
    for rank in range(2):
        ds = TFRecordDataset(
            pattern,
            spec={"id": tfr.FixedLen((), "int64")},
            batch_size=256,
            rank=rank,
            world_size=2,
            storage_options={"index_cache": caches[rank]},
        )
        loader = torch.utils.data.DataLoader(
            ds, batch_size=None, num_workers=2, multiprocessing_context="fork"
        )
        for epoch in range(epochs):
            ds.set_epoch(epoch)
            n += sum(len(b["id"]) for b in loader)
    return n


def plan_case(opts):
    """One planning case in a process of its own: {"bytes", "requests", "records"}."""
    import tempfile

    tfr = H.need("tfrec_fast")
    base, name = opts.base, opts.which
    caches = [tempfile.mkdtemp(prefix=f"tfrec-cache-{r}-") for r in range(2)]
    indexed, plain = f"{base}/indexed/part-*.tfrecord", f"{base}/plain/part-*.tfrecord"
    if name == "ddp_second_epoch":  # the counts of a first job are in the caches
        _ddp(opts, plain, caches)
    _stats(base, reset=True)
    if name == "ddp_indexed":
        records = _ddp(opts, indexed, caches)
    elif name.startswith("ddp_"):
        records = _ddp(opts, plain, caches)
    elif name == "indexed_dataset":
        from tfrec_fast.torch import IndexedTFRecordDataset

        records = len(
            IndexedTFRecordDataset(
                plain, {"id": tfr.FixedLen((), "int64")}, storage_options={"index_cache": caches[0]}
            )
        )
    else:
        records = sum(info.index is not None for info in tfr.storage.describe(indexed))
    return {**_stats(base), "records": records}


PLANNING = [
    ("ddp_indexed", "DDP job, 2 ranks x 2 workers, .idx beside the shards", 1.10),
    ("ddp_plain", "the same without indexes, each rank its own machine", 3.0),
    ("ddp_second_epoch", "the same, the next job (counts in the index cache)", 1.0),
    ("indexed_dataset", "IndexedTFRecordDataset without indexes (one scan)", 1.0),
    ("describe", "storage.describe(glob): sizes, versions, indexes", 0.10),
]


# ---- tables ------------------------------------------------------------------------------------------


def sequential_columns(size):
    return [
        H.per_second("MB/s", size / 1e6, ".0f"),
        H.Versus("of fs.cat()", "cat", suffix=""),
        H.Versus("vs tfrecord", "tfrecord"),
        *H.timing(".2f"),
    ]


RANDOM_COLUMNS = [
    H.Column(
        "latency per 256 records",
        lambda r, _: f"{r.median * 1e3:.0f} ms median (max {max(r.times) * 1e3:.0f})",
    ),
    H.Column(
        "range requests per 256 records",
        lambda r, _: f"{np.median(r.extra['requests']):.0f} median, {max(r.extra['requests'])} max",
    ),
]


def streaming_tables(args, tmp) -> tuple[list[str], dict]:
    """Many shards and one object of the same size on the slow HTTP server, against fs.cat."""
    root = Path(tmp) / "streaming"
    root.mkdir()
    # Written by a process of its own: a child's peak RSS starts at its parent's RSS when it is
    # forked, so this process must never hold the data.
    sizes, size = H.call(
        make_streaming_data, {"root": str(root), "shards": args.shards, "shard_mb": args.shard_mb}
    )
    md, raw = [], {}
    with http_server(root, args.latency_ms, args.bandwidth_mb) as base:
        opts = {
            "urls": [f"{base}/part-{k:05d}.tfrecord" for k in range(args.shards)],
            "one": f"{base}/one.tfrecord",
        }
        for which, total, what in (
            ("many", sizes, f"{args.shards} shards of {args.shard_mb} MB"),
            ("one", size, f"one object of {size / 1e6:.0f} MB"),
        ):
            cases = H.select(STREAMING[which], args.cases)
            log = C.log_dir(f"remote-streaming-{which}")
            res = H.measure(cases, opts, log_dir=log, **dict(H.timing_options(args), min_time=0))
            rss = {r.name: r for r in H.measure_rss(cases, opts, log_dir=log)}
            columns = [
                H.per_second("MB/s", total / 1e6, ".0f"),
                H.Versus(
                    "of fs.cat()",
                    f"cat_{which}",
                    target=0.8,
                    suffix="x",
                    mine=lambda r: r.name.startswith("read_"),
                ),
                H.Column("peak RSS", lambda r, _: _rss(rss.get(r.name))),  # noqa: B023 (used now)
                *H.timing(".2f"),
            ]
            title = (
                f"Streaming {what} ({total / 1e6:.0f} MB, ~100 KB records) over HTTP: "
                f"{args.latency_ms:g} ms before each answer, {args.bandwidth_mb:g} MB/s per "
                f"connection (median of {args.repeats})"
            )
            text, lines = H.table(res, columns, first="reader")
            md.append(H.section(title, text, lines + H.targets(res, columns, f"streaming {which}")))
            raw[f"streaming_{which}"] = {"time": H.raw(res), "rss": H.raw(list(rss.values()))}
    return md, raw


def _rss(r) -> str:
    """Peak RSS of the run, and how much above the process's RSS after its setup."""
    if r is None or not r.ok:
        return "—"
    peak, base = r.extra["maxrss_kib"][0], r.extra["rss_base_kib"][0]
    if peak <= r.extra["maxrss_base_kib"][0]:  # never above where it started: not measured
        return "—"
    return f"{peak / 1024:.0f} MiB (+{(peak - base) / 1024:.0f} MiB)"


def planning_tables(args, tmp) -> tuple[list[str], dict]:
    """Bytes and requests the server counts for each planning case, over the same shards with
    and without index files beside them."""
    root = Path(tmp) / "planning"
    data = H.call(
        make_planning_data, {"root": str(root), "shards": args.shards, "plan_mb": args.plan_mb}
    )
    rows, raw = [], {}
    with http_server(root, args.latency_ms, args.bandwidth_mb) as base:
        for name, label, target in PLANNING:
            if args.cases and name not in args.cases.split(","):
                continue
            try:
                got = H.call(
                    plan_case, {"base": base, "which": name}, log_dir=C.log_dir("remote-planning")
                )
            except (H.Skip, RuntimeError) as error:
                rows.append([label, "—", "—", f"not run: {error}"])
                continue
            raw[name] = got
            ratio = got["bytes"] / data
            rows.append(
                [
                    label,
                    f"{got['bytes'] / 1e6:.1f} MB = {ratio:.3f}x",
                    str(got["requests"]),
                    f"{'✅' if ratio <= target else '❌'} ≤ {target:g}x",
                ]
            )
    title = (
        f"Planning: bytes and requests the server counted, {args.shards} shards, "
        f"{data / 1e6:.0f} MB of Examples (~1 KB records)"
    )
    text = H.md_table(["case", "bytes fetched (x the data)", "requests", "target"], rows)
    return [
        H.section(
            title,
            text,
            [
                "Each case in a fresh process with fresh index caches "
                "(the second-epoch row ran a first job before counting)."
            ],
        )
    ], raw


def make_streaming_data(opts) -> tuple:
    """The shards and the one large object: (bytes of the shards, bytes of the object)."""
    root = Path(opts.root)
    sizes = sum(
        write_file(root / f"part-{k:05d}.tfrecord", opts.shard_mb, *DATASETS["large"][1:], seed=k)
        for k in range(opts.shards)
    )
    return sizes, write_file(
        root / "one.tfrecord", opts.shards * opts.shard_mb, *DATASETS["large"][1:], seed=99
    )


def make_planning_data(opts) -> int:
    """The same shards of ~1 KB Examples in indexed/ (with .idx files) and plain/: their bytes."""
    tfr = H.need("tfrec_fast")
    data = 0
    for kind in ("indexed", "plain"):
        (Path(opts.root) / kind).mkdir(parents=True)
        for k in range(opts.shards):
            path = Path(opts.root) / kind / f"part-{k:05d}.tfrecord"
            size = write_examples(path, opts.plan_mb, seed=k)
            data += size if kind == "plain" else 0
            if kind == "indexed":
                tfr.create_index(str(path), str(path) + ".idx")
    return data


def write_file(path: Path, size_mb: int, low: int, high: int, seed: int) -> int:
    tfr = H.need("tfrec_fast")
    with tfr.TFRecordWriter(str(path)) as writer:
        writer.write_batch(make_records(size_mb, low, high, seed))
    return os.path.getsize(path)


def write_examples(path: Path, size_mb: int, seed: int) -> int:
    """~1 KB Examples with an int64 id, unique across the shards (seed * 10M + i)."""
    tfr = H.need("tfrec_fast")
    n = size_mb * 1000
    rng = np.random.default_rng(seed)
    with tfr.TFRecordWriter(str(path)) as writer:
        writer.write_examples(
            {
                "id": np.arange(n) + seed * 10_000_000,
                "payload": [b"p" * int(k) for k in rng.integers(500, 1500, n)],
            }
        )
    return os.path.getsize(path)


@contextlib.contextmanager
def http_server(root: Path, latency_ms: float, bandwidth_mb: float):
    """tests/_servers.py serving ``root`` in its own process: its base URL."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(SERVERS),
            str(root),
            "--latency-ms",
            str(latency_ms),
            "--bandwidth-mb",
            str(bandwidth_mb),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline().split()
        if line[:1] != ["ready"]:
            raise RuntimeError("the HTTP server did not start")
        yield f"http://127.0.0.1:{line[1]}"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def s3_tables(args, options, tmp) -> tuple[list[str], dict]:
    fs = H.need("s3fs").S3FileSystem(**options, skip_instance_cache=True)
    fs.mkdir("bench")
    timing = dict(H.timing_options(args), min_time=0)
    md, raw = [], {}
    for name, (label, low, high) in DATASETS.items():
        url, local, records = upload(fs, tmp, name, make_records(args.size_mb, low, high))
        size = os.path.getsize(local)
        opts = dict(H.read_options([url], storage_options=options), local=local)
        res = H.measure(
            H.select(SEQUENTIAL, args.cases), opts, log_dir=C.log_dir(f"remote-{name}"), **timing
        )
        H.expect_records(res, len(records), exempt=["cat"])
        title = f"Sequential read: {size / 1e6:.0f} MB object, {len(records):,} {label} (median of {args.repeats})"
        md.append(H.section(title, *H.table(res, sequential_columns(size), first="reader")))
        raw[f"sequential_{name}"] = H.raw(res)
        fs.rm(url)

    url, local, records = upload(
        fs, tmp, "data", make_records(args.size_mb, *DATASETS["large"][1:])
    )
    size = os.path.getsize(local)
    with contextlib.ExitStack() as stack:
        urls = {
            str(
                ms
            ): f"http://127.0.0.1:{stack.enter_context(server(_HTTP, local, ms))}/data.tfrecord"
            for ms in LATENCIES_MS
        }
        opts = {"urls": urls, "local": local}
        log = C.log_dir("remote-random")
        res = H.measure(
            H.select(BATCHES, args.cases), opts, log_dir=log, **dict(timing, repeats=args.batches)
        ) + H.measure(H.select(SINGLES, args.cases), opts, log_dir=log, **timing)
    H.expect_records(res, BATCH)
    title = (
        f"Random access: 256 random records of the {size / 1e6:.0f} MB object ({len(records):,} records), "
        f"HTTP server with Range support (get_batch: {args.batches} batches; reader[i]: {args.repeats} x 256)"
    )
    md.append(H.section(title, *H.table(res, RANDOM_COLUMNS, first="how")))
    raw["random_access"] = H.raw(res)

    opts = dict(storage_options=options, local=local)
    res = H.measure(H.select(WRITE, args.cases), opts, log_dir=C.log_dir("remote-write"), **timing)
    H.expect_records(res, len(records), exempt=["pipe"])
    title = f"Write: {size / 1e6:.0f} MB (median of {args.repeats})"
    md.append(
        H.section(
            title,
            *H.table(
                res,
                [
                    H.per_second("MB/s", size / 1e6, ".0f"),
                    H.Versus("of fs.pipe_file()", "pipe", suffix=""),
                ],
                first="writer",
            ),
        )
    )
    raw["write"] = H.raw(res)
    return md, raw


def upload(fs, tmp, name, records):
    """Writes the records to a local file and puts it on the server: (url, local path, records)."""
    tfr = H.need("tfrec_fast")
    local = os.path.join(tmp, f"{name}.tfrecord")
    with tfr.TFRecordWriter(local) as writer:
        writer.write_batch(records)
    fs.put(local, f"bench/{name}.tfrecord")
    return f"s3://bench/{name}.tfrecord", local, records


def environment() -> str:
    from tfrec_fast.index import RANGE_MAX_GAP
    from tfrec_fast.storage import DEFAULTS

    return "\n".join(
        [
            *(f"- {line}" for line in H.machine()),
            f"- {H.versions(['tfrec_fast', 'fsspec', 's3fs', 'aiohttp', 'moto', 'aiobotocore', 'torch', 'tfrecord'])}",
            f"- The servers run on the same CPUs. Streaming: ranges of {DEFAULTS.range_size >> 20} MiB, at most "
            f"{DEFAULTS.read_ahead >> 20} MiB and {DEFAULTS.concurrency} requests held (the defaults); random "
            f"access: ranges within {RANGE_MAX_GAP >> 10} KiB coalesced, up to {DEFAULTS.concurrency} requests "
            "in flight",
        ]
    )


NOTES = """Reading the numbers:
- Streaming: each connection carries at most --bandwidth-mb, so throughput comes from requests
  in flight. fs.cat(urls) opens one connection per object (N shards: N connections) and holds
  every object in memory; on one object it has one connection. read_records keeps up to 16
  ranges of 4 MiB requested (the 64 MiB bound), across the shards' boundaries, while it checks
  and hands out records. Its peak RSS: the 64 MiB of ranges, what the HTTP client holds while
  a range arrives (aiohttp joins a body's chunks: a second copy of the ranges in flight, at
  worst) and the reader's batch buffers; fs.cat holds every object whole.
- Planning: rows count every byte the server sent, index files included; "x the data" is over
  the shards' bytes. Without indexes each rank scans once (then the index cache answers), so a
  2-rank job costs at most 3x; with indexes it costs the data plus the index files.
- S3: fs.cat() is s3fs's own transfer (concurrent 50 MiB range requests into memory). moto
  copies the whole object for every request, so on this server fewer requests win. On a cloud
  store the round trips dominate instead, and the ranges in flight hide them.
- Against the `tfrecord` package the ratio depends on the record size: with ~100 KB records
  both readers wait for the same transport; its Python loop (four reads per record) costs
  microseconds per record, so the smaller the records the larger the lead of a reader that
  frames and checks them in C++.
- get_batch(256): the distinct records are coalesced (neighbours within 256 KiB share a range
  request), and the requests go out together, 32 at a time (the concurrency setting):
  ceil(requests / 32) round trips, and no metadata request (the size and version are taken
  when the reader opens). reader[i] is one request, so 256 of them cost 256 round trips."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(parser, repeats=3, min_time=0)
    parser.add_argument(
        "--repeat",
        type=int,
        dest="repeats",
        default=argparse.SUPPRESS,
        help="the same as --repeats",
    )
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}"
    )
    parser.add_argument("--shards", type=int, default=6, help="streaming and planning: shards")
    parser.add_argument("--shard-mb", type=int, default=24, help="streaming: MB per shard")
    parser.add_argument("--plan-mb", type=int, default=4, help="planning: MB per shard")
    parser.add_argument(
        "--latency-ms", type=float, default=20.0, help="HTTP server: before each answer"
    )
    parser.add_argument(
        "--bandwidth-mb", type=float, default=40.0, help="HTTP server: MB/s per connection"
    )
    parser.add_argument("--size-mb", type=int, default=200, help="s3: MB per data set")
    parser.add_argument(
        "--batches", type=int, default=20, help="s3: get_batch(256) calls measured per latency"
    )
    args = parser.parse_args(argv)
    sections = args.sections.split(",")
    md, raw = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        if "streaming" in sections:
            part, data = streaming_tables(args, tmp)
            md, raw = md + part, {**raw, **data}
        if "planning" in sections:
            part, data = planning_tables(args, tmp)
            md, raw = md + part, {**raw, **data}
        if "s3" in sections:
            with server(_MOTO) as port:
                part, data = s3_tables(
                    args,
                    {"endpoint_url": f"http://127.0.0.1:{port}", "key": "bench", "secret": "bench"},
                    tmp,
                )
            md, raw = md + part, {**raw, **data}
    section = f"{environment()}\n- {H.method(args)}\n\n" + "\n".join(md) + f"\n{NOTES}"
    return H.emit([section], raw, args.markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
