#!/usr/bin/env python3
"""CRC32C throughput (GB/s) on 4 KiB, 64 KiB, 1 MiB and 64 MiB buffers, all implementations in this run:
tfrec_fast.crc32c, every backend via tfrec_fast._core.crc32c_with, the `crc32c` package and
google_crc32c.value. Ratios are against the `crc32c` package. Samples of all implementations are
interleaved round-robin; each sample loops until it has taken at least --min-time seconds.
All implementations must agree on the checksum of each buffer, else the row says MISMATCH.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import _common as C

SIZES = {"4 KiB": 4 << 10, "64 KiB": 64 << 10, "1 MiB": 1 << 20, "64 MiB": 64 << 20}


def implementations():
    """[(label, fn, extra_args_before_data)], plus notes about what is missing."""
    impls, notes = [], []
    tfr, why = C.probe_tfrec_fast()
    if tfr is not None:
        impls.append((f"tfrec_fast.crc32c ({tfr.crc32c_backend()})", tfr.crc32c, ()))
        backends, note = C.crc_backends(tfr)
        for b in backends:
            impls.append((f"tfrec_fast._core.crc32c_with('{b}')", tfr._core.crc32c_with, (b,)))
        if note:
            notes.append(note)
    else:
        notes.append(f"tfrec_fast rows skipped: {why}")
    try:
        import crc32c

        impls.append((f"`crc32c` package {_version('crc32c')} (hw={crc32c.hardware_based})", crc32c.crc32c, ()))
    except ImportError as e:
        notes.append(f"`crc32c` package missing: {e}")
    try:
        import google_crc32c

        impls.append((f"google_crc32c.value {_version('google-crc32c')} (impl={google_crc32c.implementation})",
                      google_crc32c.value, ()))
    except ImportError as e:
        notes.append(f"google-crc32c missing: {e}")
    return impls, notes


def _version(dist):
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def sample(fn, args, min_time, loops):
    """Seconds per call, looping `loops` times (grown until the sample takes >= min_time)."""
    while True:
        t0 = time.perf_counter()
        for _ in range(loops):
            fn(*args)
        dt = time.perf_counter() - t0
        if dt >= min_time:
            return dt / loops, loops
        loops = max(loops * 2, int(loops * min_time / max(dt, 1e-9) * 1.2))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=9, help="samples per implementation and size (median shown)")
    ap.add_argument("--min-time", type=float, default=0.1, help="minimum seconds per sample")
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma list of: " + ", ".join(SIZES))
    ap.add_argument("--markdown", help="also write the table to this Markdown file")
    args = ap.parse_args(argv)

    import numpy as np

    impls, notes = implementations()
    ref_label = next((lab for lab, _, _ in impls if lab.startswith("`crc32c`")), None)
    rows = []
    for size_name in [s.strip() for s in args.sizes.split(",") if s.strip()]:
        n = SIZES[size_name]
        data = np.random.default_rng(n).bytes(n)  # bytes: the one type every implementation accepts
        sums = {lab: fn(*extra, data) for lab, fn, extra in impls}
        agree = len(set(sums.values())) == 1
        loops = {lab: 1 for lab, _, _ in impls}
        times = {lab: [] for lab, _, _ in impls}
        for lab, fn, extra in impls:  # warm-up, and find the loop count
            _, loops[lab] = sample(fn, extra + (data,), args.min_time, 1)
        for r in range(args.repeats):
            k = r % len(impls)
            for lab, fn, extra in impls[k:] + impls[:k]:
                t, _ = sample(fn, extra + (data,), args.min_time / 2, loops[lab])
                times[lab].append(t)
        ref = statistics.median(times[ref_label]) if ref_label else None
        for lab, _, _ in impls:
            t = statistics.median(times[lab])
            rows.append([
                size_name,
                lab,
                C.fmt_num(n / t / 1e9, ".2f"),
                C.fmt_num(ref / t if ref else None, ".2f", "x"),
                C.fmt_num(t * 1e6, ".2f"),
                C.fmt_num(100 * C.spread(times[lab]), ".0f", "%"),
                "ok" if agree and sums[lab] == sums[ref_label or lab] else "MISMATCH",
            ])
        print(f"  {size_name} done", file=sys.stderr)

    headers = ["buffer", "implementation", "GB/s", "vs crc32c pkg", "us/call", "IQR/median", "checksum"]
    out = [f"### CRC32C throughput (median of {args.repeats} interleaved samples, >= {args.min_time}s each)",
           "", C.md_table(headers, rows)]
    if notes:
        out += [""] + [f"- {x}" for x in notes]
    text = "\n".join(out) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
