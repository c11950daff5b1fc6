#!/usr/bin/env python3
"""Read (and write) throughput of tfrec_fast against its peers, all measured in this one run.

Reading, on each data file (make_data.py):
  ceiling      plain f.readinto(1 MiB) + CRC32C of every chunk: the physical limit of this machine
  tfrec_fast   TFRecordReader(path).iter_batches() (both CRCs), and per-record read_records()
  TensorFlow   tf.data.TFRecordDataset(path).batch(1024) (CRCs checked, as TF always does)
  tfrecord     tfrecord.reader.tfrecord_iterator(path) (raw records; this package checks NO CRC)
Writing the 2M small records: tfrec_fast write_batch / write, tfrecord's writer, tf.io.TFRecordWriter
(every output is checked to be byte-identical to the input file).
Peak RSS of streaming the large file, over the RSS right after the imports.

The reading rows are harness.READ_CASES (tfrec_fast batched and per record, TensorFlow,
tfrecord). GB/s counts file bytes (headers and CRCs included), the bytes a reader must read
and checksum, as the ceiling probe does.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import sys
from pathlib import Path

import _common as C
from _common import harness as H

# ---- cases -----------------------------------------------------------------------------------------


def _probe(path, crc, info):
    def run():
        buf = bytearray(1 << 20)
        mv = memoryview(buf)
        c = 0
        with open(path, "rb", buffering=0) as f:
            while k := f.readinto(buf):
                c = crc(mv[:k], c)
        return 0  # the probe does not frame records

    return H.Body(run, info=info)


def ceiling(opts):
    """readinto(1 MiB) + CRC32C of each chunk (tfrec_fast.crc32c, else the `crc32c` package)."""
    tfr, _ = C.probe_tfrec_fast()
    if tfr is not None:
        return _probe(opts.files[0], tfr.crc32c, f"tfrec_fast.crc32c ({tfr.crc32c_backend()})")
    return _probe(
        opts.files[0], H.need("crc32c").crc32c, "`crc32c` package (tfrec_fast not importable)"
    )


def ceiling_pkg(opts):
    """The same probe with the `crc32c` package's CRC (shown when tfrec_fast is there)."""
    if C.probe_tfrec_fast()[0] is None:
        raise H.Skip("same as the ceiling row while tfrec_fast is not importable")
    return _probe(opts.files[0], H.need("crc32c").crc32c, "`crc32c` package")


def _writer(opts, write_all, info):
    """Records from opts.file (parsed in pure Python, untimed) written to a file of the case's own,
    which must come out byte-identical to opts.file (every writer here frames like TensorFlow)."""
    records = C.read_payloads_py(opts.file)
    out = str(C.OUT_DIR / f"{opts.case}.tfrecord")

    def run():
        write_all(out, records)
        return len(records)

    def check():
        if not os.path.exists(out):
            return "no output file"
        return (
            None
            if filecmp.cmp(out, opts.file, shallow=False)
            else f"output differs from {opts.file}"
        )

    return H.Body(run, prepare=lambda: Path(out).unlink(missing_ok=True), check=check, info=info)


def write_tfrec_fast_batch(opts):
    tfr = H.need("tfrec_fast")

    def write_all(out, records):
        with tfr.TFRecordWriter(out) as w:
            w.write_batch(records)

    return _writer(opts, write_all, "write_batch(list of bytes)")


def write_tfrec_fast_each(opts):
    tfr = H.need("tfrec_fast")

    def write_all(out, records):
        with tfr.TFRecordWriter(out) as w:
            write = w.write
            for r in records:
                write(r)

    return _writer(opts, write_all, "write(r) per record")


def write_tfrecord(opts):
    writer = H.need("tfrecord.writer").TFRecordWriter
    # The package only writes tf.train.Example dicts; its serializer made the identity, write()
    # runs exactly its own framing code (struct.pack + crc32c + 4 file writes) on raw records.
    writer.serialize_tf_example = staticmethod(lambda datum: datum)

    def write_all(out, records):
        w = writer(out)
        write = w.write
        for r in records:
            write(r)
        w.close()

    return _writer(
        opts, write_all, "tfrecord.writer.TFRecordWriter.write, Example serialization bypassed"
    )


def write_tf(opts):
    tf = H.need("tensorflow")

    def write_all(out, records):
        with tf.io.TFRecordWriter(out) as w:
            write = w.write
            for r in records:
                write(r)

    return _writer(opts, write_all, f"TF {tf.__version__}, tf.io.TFRecordWriter.write per record")


READ = [
    H.Case("ceiling", "ceiling: readinto(1 MiB) + CRC32C", ceiling),
    H.Case("ceiling_pkg", "probe: readinto(1 MiB) + `crc32c` pkg", ceiling_pkg),
    *H.READ_CASES,
]
WRITE = [
    H.Case("w_tfrec_fast_batch", "tfrec_fast TFRecordWriter.write_batch", write_tfrec_fast_batch),
    H.Case(
        "w_tfrec_fast_each", "tfrec_fast TFRecordWriter.write (per record)", write_tfrec_fast_each
    ),
    H.Case("w_tfrecord", "tfrecord TFRecordWriter.write", write_tfrecord),
    H.Case("w_tf", "TensorFlow tf.io.TFRecordWriter.write", write_tf),
]
CEILINGS = ("ceiling", "ceiling_pkg")

# ---- tables ------------------------------------------------------------------------------------------


def read_columns(meta):
    return [
        H.per_second("records/s", lambda r: None if r.name in CEILINGS else meta["n_records"]),
        H.per_second("GB/s", meta["file_bytes"] / 1e9, ".3f"),
        H.Versus("of ceiling", "ceiling", suffix=""),
        H.Versus("vs tfrecord", "tfrecord"),
        H.Versus("vs TF", "tf"),
        *H.timing(".4f"),
    ]


def write_columns(meta):
    return [
        H.per_second("records/s", meta["n_records"]),
        H.per_second("MB/s", meta["file_bytes"] / 1e6, ".0f"),
        H.Versus("vs tfrecord", "w_tfrecord"),
        H.Versus("vs TF", "w_tf"),
        *H.timing(".3f"),
    ]


def mib(key):
    return lambda r: r.extra[key][0] / 1024


RSS_COLUMNS = [
    H.figure("RSS after imports MiB", mib("rss_base_kib"), ".0f"),
    H.figure("peak RSS MiB", mib("maxrss_kib"), ".0f"),
    H.figure("peak - baseline MiB", lambda r: mib("maxrss_kib")(r) - mib("rss_base_kib")(r), ".1f"),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    H.add_arguments(ap, repeats=5, min_time=0.5)
    ap.add_argument(
        "--write-repeats",
        type=int,
        default=3,
        help="measured runs per write case (tfrecord's writer needs ~40 s a run)",
    )
    ap.add_argument("--datasets", default="large,small", help="comma list: large, small")
    ap.add_argument(
        "--batch-records",
        type=int,
        default=None,
        help="max_records for iter_batches (default None)",
    )
    ap.add_argument("--no-read", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--no-rss", action="store_true")
    args = ap.parse_args(argv)

    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    metas = {name: C.load_meta(name) for name in names + ([] if args.no_write else ["small"])}
    for name, meta in metas.items():
        if meta is None:
            print(
                f"error: {C.data_path(name)} missing or stale: run bench/make_data.py first",
                file=sys.stderr,
            )
            return 2
    C.ensure_dirs()
    md, raw = (
        [
            C.header(
                args,
                f"Writing: {args.write_repeats} runs, one run per sample. 'of ceiling': the "
                "fraction of the readinto+CRC32C probe's speed on the same file.",
            )
        ],
        {},
    )
    timing = H.timing_options(args)

    if not args.no_read:
        for name in names:
            meta, path = metas[name], C.data_path(name)
            print(f"== read {name}: {path}", file=sys.stderr)
            res = H.measure(
                H.select(READ, args.cases),
                H.read_options([path], batch_records=args.batch_records),
                log_dir=C.log_dir(f"read-{name}"),
                **timing,
            )
            H.expect_records(res, meta["n_records"], exempt=CEILINGS)
            title = f"Read: {meta['label']} ({meta['n_records']:,} records, {meta['file_bytes'] / 1e6:.0f} MB)"
            md.append(H.section(title, *H.table(res, read_columns(meta))))
            raw[f"read_{name}"] = H.raw(res)

    if not args.no_write:
        meta = metas["small"]
        print("== write small records", file=sys.stderr)
        res = H.measure(
            H.select(WRITE, args.cases),
            {"file": str(C.data_path("small"))},
            log_dir=C.log_dir("write"),
            **dict(timing, repeats=args.write_repeats, min_time=0),
        )
        for case in WRITE:
            (C.OUT_DIR / f"{case.name}.tfrecord").unlink(missing_ok=True)
        H.expect_records(res, meta["n_records"])
        title = f"Write: {meta['label']} ({meta['n_records']:,} records, {meta['file_bytes'] / 1e6:.0f} MB out)"
        md.append(H.section(title, *H.table(res, write_columns(meta))))
        raw["write_small"] = H.raw(res)

    if not args.no_rss and "large" in metas:
        print("== peak RSS streaming the large file", file=sys.stderr)
        res = H.measure_rss(
            H.select(H.READ_CASES, args.cases),
            H.read_options([C.data_path("large")]),
            timeout=args.timeout,
            log_dir=C.log_dir("rss"),
        )
        for r in res:
            if r.ok and r.extra["maxrss_base_kib"][0] > r.extra["rss_base_kib"][0] + 4096:
                r.notes.append(
                    f"imports peaked at {r.extra['maxrss_base_kib'][0] / 1024:.0f} MiB before the baseline"
                )
            r.info = ""  # said in the read tables
        title = "Peak RSS while streaming the large file (ru_maxrss minus VmRSS right after the imports)"
        md.append(H.section(title, *H.table(res, RSS_COLUMNS)))
        raw["rss_large"] = H.raw(res)

    return H.emit(md, raw, args.markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
