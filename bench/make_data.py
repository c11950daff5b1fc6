#!/usr/bin/env python3
"""Generate the benchmark data files into bench/data/ (git-ignored).

  large: ~400 MB of random records of ~100 KB (uniform 75..125 KB)
  small: 2,000,000 random records of 64 bytes

Written with tfrec_fast.TFRecordWriter when importable, else with a tiny pure-Python framer
(CRCs from the `crc32c` package). A JSON sidecar next to each file records what was made; an
existing file with a matching sidecar is kept unless --force.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import _common as C
import numpy as np


def payloads(spec: dict):
    """Yield chunks (lists of bytes) of the data set's random payloads, deterministically."""
    rng = np.random.default_rng(spec["seed"])
    n, lo, hi = spec["n_records"], spec["min_size"], spec["max_size"]
    sizes = rng.integers(lo, hi + 1, size=n) if hi > lo else np.full(n, lo)
    chunk = max(1, (64 << 20) // max(1, int(sizes.mean())))  # ~64 MiB per chunk
    for start in range(0, n, chunk):
        sz = sizes[start : start + chunk]
        blob = rng.bytes(int(sz.sum()))
        ends = np.cumsum(sz)
        starts = ends - sz
        yield [blob[s:e] for s, e in zip(starts.tolist(), ends.tolist())], int(sz.sum())


def write_python(path, spec) -> int:
    import crc32c  # the `crc32c` package

    crc = crc32c.crc32c
    payload_bytes = 0
    with open(path, "wb") as f:
        for chunk, nbytes in payloads(spec):
            f.write(b"".join(C.frame_record(d, crc) for d in chunk))
            payload_bytes += nbytes
    return payload_bytes


def write_tfrec_fast(path, spec, tfr) -> int:
    payload_bytes = 0
    with tfr.TFRecordWriter(str(path)) as w:
        for chunk, nbytes in payloads(spec):
            w.write_batch(chunk)
            payload_bytes += nbytes
    return payload_bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--which", default="large,small", help="comma list of data sets (large, small)")
    C.add_writer_arguments(ap)
    ap.add_argument(
        "--large-records", type=int, help="override the record count of 'large' (quick tests)"
    )
    ap.add_argument(
        "--small-records", type=int, help="override the record count of 'small' (quick tests)"
    )
    args = ap.parse_args(argv)

    tfr, why = C.data_writer(args)

    for name in [w.strip() for w in args.which.split(",") if w.strip()]:
        spec = dict(C.DATASETS[name])
        override = getattr(args, f"{name}_records", None)
        if override:
            spec["n_records"] = override
        path, meta = C.data_path(name), C.load_meta(name)
        wanted = {k: spec[k] for k in ("n_records", "min_size", "max_size", "seed")}
        if meta and not args.force and all(meta.get(k) == v for k, v in wanted.items()):
            print(
                f"{path}: exists ({meta['n_records']} records, {meta['file_bytes'] / 1e6:.1f} MB), kept"
            )
            continue
        t0 = time.perf_counter()
        tmp = path.with_name(path.name + ".tmp")
        if tfr is not None:
            writer, payload_bytes = "tfrec_fast", write_tfrec_fast(tmp, spec, tfr)
        else:
            writer, payload_bytes = "python+crc32c", write_python(tmp, spec)
        os.replace(tmp, path)
        size = path.stat().st_size
        expect = payload_bytes + 16 * spec["n_records"]
        if size != expect:
            print(f"error: {path} is {size} bytes, expected {expect}", file=sys.stderr)
            return 1
        meta = dict(
            wanted, file_bytes=size, payload_bytes=payload_bytes, writer=writer, label=spec["label"]
        )
        C.meta_path(name).write_text(json.dumps(meta, indent=1) + "\n")
        dt = time.perf_counter() - t0
        print(
            f"{path}: {spec['n_records']} records, {size / 1e6:.1f} MB, writer={writer}, {dt:.1f} s"
        )
        if tfr is None and args.writer == "auto":
            print(f"  (note: {why}; used the pure-Python framer)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
