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

Every case runs in its own process (imports never timed, TF never next to tfrec_fast); repeats are
interleaved round-robin across cases; tables show medians. GB/s counts file bytes (headers and
CRCs included), the bytes a reader must read and checksum, as the ceiling probe does.
"""

from __future__ import annotations

import argparse
import sys
import time

import _common as C
from _runner import measure, measure_rss

READ_CASES = ["ceiling", "ceiling_pkg", "tfrec_fast_batches", "tfrec_fast_records", "tf", "tfrecord"]
WRITE_CASES = ["w_tfrec_fast_batch", "w_tfrec_fast_each", "w_tfrecord", "w_tf"]
RSS_CASES = ["tfrec_fast_batches", "tfrec_fast_records", "tf", "tfrecord"]


def ratio(a, b):
    """How many times faster a time `a` is than a time `b` (b / a)."""
    return None if a is None or b is None else b / a


def _by(results, case):
    r = next((x for x in results if x.case == case), None)
    return r.median if r is not None and r.ok else None


def read_table(results, meta) -> tuple[str, list[str]]:
    t_ceil, t_tfr, t_tf = _by(results, "ceiling"), _by(results, "tfrecord"), _by(results, "tf")
    rows, notes = [], []
    for r in results:
        if not r.ok:
            notes.append(f"{r.label}: {'skipped' if r.skip else 'FAILED'} -- {r.skip or r.error}")
            continue
        t = r.median
        rows.append([
            r.label,
            "—" if r.case.startswith("ceiling") else C.fmt_rate(meta["n_records"] / t),
            C.fmt_num(meta["file_bytes"] / t / 1e9, ".3f"),
            C.fmt_num(ratio(t, t_ceil) if t_ceil else None, ".2f"),
            C.fmt_num(ratio(t, t_tfr), ".2f", "x"),
            C.fmt_num(ratio(t, t_tf), ".2f", "x"),
            C.fmt_num(t, ".4f"),
            C.fmt_num(100 * C.spread(r.times), ".0f", "%"),
            str(r.loops),
        ])
        if r.info:
            notes.append(f"{r.label}: {r.info}")
    headers = ["implementation", "records/s", "GB/s", "of ceiling", "vs tfrecord", "vs TF", "median s", "IQR/median",
               "runs/sample"]
    return C.md_table(headers, rows), notes


def write_table(results, meta) -> tuple[str, list[str]]:
    t_tfr, t_tf = _by(results, "w_tfrecord"), _by(results, "w_tf")
    rows, notes = [], []
    for r in results:
        if not r.ok:
            notes.append(f"{r.label}: {'skipped' if r.skip else 'FAILED'} -- {r.skip or r.error}")
            continue
        t = r.median
        rows.append([
            r.label,
            C.fmt_rate(meta["n_records"] / t),
            C.fmt_num(meta["file_bytes"] / t / 1e6, ".0f"),
            C.fmt_num(ratio(t, t_tfr), ".2f", "x"),
            C.fmt_num(ratio(t, t_tf), ".2f", "x"),
            C.fmt_num(t, ".3f"),
            C.fmt_num(100 * C.spread(r.times), ".0f", "%"),
        ])
        if r.info:
            notes.append(f"{r.label}: {r.info}")
    headers = ["implementation", "records/s", "MB/s", "vs tfrecord", "vs TF", "median s", "IQR/median"]
    return C.md_table(headers, rows), notes


def rss_table(rss: dict) -> tuple[str, list[str]]:
    from _cases import CASES

    rows, notes = [], []
    for case, m in rss.items():
        label = CASES[case][0]
        if "skip" in m or "error" in m:
            notes.append(f"{label}: {'skipped' if 'skip' in m else 'FAILED'} -- {m.get('skip') or m.get('error')}")
            continue
        rows.append([
            label,
            C.fmt_num(m["rss_base_kib"] / 1024, ".0f"),
            C.fmt_num(m["maxrss_kib"] / 1024, ".0f"),
            C.fmt_num((m["maxrss_kib"] - m["rss_base_kib"]) / 1024, ".1f"),
        ])
        if m["maxrss_base_kib"] > m["rss_base_kib"] + 4096:
            notes.append(f"{label}: imports peaked at {m['maxrss_base_kib'] / 1024:.0f} MiB before the baseline")
    headers = ["implementation", "RSS after imports MiB", "peak RSS MiB", "peak - baseline MiB"]
    return C.md_table(headers, rows), notes


def section(title, table, notes) -> str:
    out = [f"### {title}", "", table]
    if notes:
        out += [""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def check_counts(results, meta):
    for r in results:
        if r.ok and not r.case.startswith("ceiling") and r.records != meta["n_records"]:
            r.error = f"read {r.records} records, the file has {meta['n_records']}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="measured runs per case (median shown)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured runs per case first")
    ap.add_argument("--write-repeats", type=int, default=3,
                    help="measured runs per write case (tfrecord's writer needs ~40 s a run)")
    ap.add_argument("--datasets", default="large,small", help="comma list: large, small")
    ap.add_argument("--cases", help="comma list of case names to run (default: all)")
    ap.add_argument("--min-time", type=float, default=0.5,
                    help="a read sample loops a fast case until it takes about this long (0: one run per sample)")
    ap.add_argument("--batch-records", type=int, default=None, help="max_records for iter_batches (default None)")
    ap.add_argument("--no-read", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--no-rss", action="store_true")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per single run")
    ap.add_argument("--markdown", help="also write the tables to this Markdown file")
    ap.add_argument("--json", help="also write the raw timings to this JSON file")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)

    want = set(args.cases.split(",")) if args.cases else None
    pick = lambda names: [c for c in names if want is None or c in want]  # noqa: E731
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    metas = {}
    for name in names + ([] if args.no_write else ["small"]):
        metas[name] = C.load_meta(name)
        if metas[name] is None:
            print(f"error: {C.data_path(name)} missing or stale: run bench/make_data.py first", file=sys.stderr)
            return 2

    tfr, why = C.probe_tfrec_fast()
    header = [f"Median of {args.repeats} runs ({args.write_repeats} for writing) after {args.warmup} warm-up, cases interleaved round-robin, "
              "each in its own process; a read sample averages K back-to-back runs of a case faster than "
              f"{args.min_time} s (K shown as 'runs/sample'). Ratios: how many times faster than that row's peer (>1 = faster); "
              "'of ceiling' = fraction of the readinto+CRC32C probe's speed on the same file."]
    if tfr is None:
        header.append(f"**tfrec_fast rows skipped: {why}.**")
    md, raw = ["\n".join(header) + "\n"], {}
    verbose = not args.quiet

    if not args.no_read:
        for name in names:
            meta = metas[name]
            print(f"== read {name}: {C.data_path(name)}", file=sys.stderr)
            t0 = time.time()
            res = measure([dict(case=c, file=C.data_path(name), batch_records=args.batch_records)
                           for c in pick(READ_CASES)], repeats=args.repeats, warmup=args.warmup,
                          timeout=args.timeout, min_time=args.min_time, verbose=verbose)
            check_counts(res, meta)
            title = f"Read: {meta['label']} ({meta['n_records']:,} records, {meta['file_bytes'] / 1e6:.0f} MB)"
            md.append(section(title, *read_table(res, meta)))
            raw[f"read_{name}"] = {r.case: vars(r) for r in res}
            print(f"   ({time.time() - t0:.0f} s)", file=sys.stderr)

    if not args.no_write:
        meta = metas["small"]
        print("== write small records", file=sys.stderr)
        specs = [dict(case=c, file=C.data_path("small"), out=C.OUT_DIR / f"{c}.tfrecord") for c in pick(WRITE_CASES)]
        res = measure(specs, repeats=args.write_repeats, warmup=args.warmup, timeout=args.timeout, verbose=verbose)
        for s in specs:
            s["out"].unlink(missing_ok=True)
        title = f"Write: {meta['label']} ({meta['n_records']:,} records, {meta['file_bytes'] / 1e6:.0f} MB out)"
        md.append(section(title, *write_table(res, meta)))
        raw["write_small"] = {r.case: vars(r) for r in res}

    if not args.no_rss and "large" in metas:
        print("== peak RSS streaming the large file", file=sys.stderr)
        rss = {c: measure_rss(c, C.data_path("large"), timeout=args.timeout) for c in pick(RSS_CASES)}
        title = "Peak RSS while streaming the large file (ru_maxrss minus VmRSS right after the imports)"
        md.append(section(title, *rss_table(rss)))
        raw["rss_large"] = rss

    return C.emit(md, raw, args.markdown, args.json)


if __name__ == "__main__":
    sys.exit(main())
