#!/usr/bin/env python3
"""Print a Markdown description of the machine and of every package version the benchmarks use.
Versions come from package metadata, so TensorFlow is not imported here."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import _common as C
from _common import harness as H

PACKAGES = [
    "tfrec_fast",
    "numpy",
    "protobuf",
    "tensorflow-cpu",
    "tensorflow",
    "tfrecord",
    "crc32c",
    "google-crc32c",
    "torch",
    "pillow",
    "fsspec",
    "s3fs",
    "moto",
    "pyarrow",
    "ray",
    "tensorflow-datasets",
    "grain",
    "array-record",
]


def git(*args) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(C.BENCH_DIR.parent), *args], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return ""


def lines() -> list[str]:
    out = [*H.machine(), f"Packages: {H.versions(PACKAGES)}"]
    tfr, why = C.probe_tfrec_fast()
    if tfr is not None:
        out.append(
            f"tfrec_fast: CRC32C backend `{tfr.crc32c_backend()}` (available: {tfr._core.crc32c_backends()});"
            f" TFREC_FAST_CRC32C={os.environ.get('TFREC_FAST_CRC32C', '(unset)')}"
        )
    else:
        out.append(f"tfrec_fast: {why}")
    commit = git("rev-parse", "--short", "HEAD")
    if commit:
        dirty = (
            " (+ uncommitted changes)"
            if git("status", "--porcelain", "--untracked-files=no")
            else ""
        )
        out.append(f"tfrec_fast source: {C.BENCH_DIR.parent} at commit {commit}{dirty}")
    for name in C.DATASETS:
        meta = C.load_meta(name)
        if meta:
            out.append(
                f"Data `{C.data_path(name).name}`: {meta['n_records']:,} records, {meta['file_bytes']:,} bytes, "
                f"written by {meta['writer']}, page cache warm (read before timing)"
            )
    return [f"- {line}" for line in out]


def brief() -> list[str]:
    """Two list items for the head of a RESULTS.md section: the machine, and the installed versions."""
    installed = ", ".join(
        v for v in H.versions(PACKAGES).split(", ") if not v.endswith("(not installed)")
    )
    return [f"- Machine: {'; '.join(H.machine())}", f"- Packages: {installed}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--brief",
        action="store_true",
        help="two lines: the machine and the installed package versions",
    )
    args = ap.parse_args(argv)
    print("\n".join(brief() if args.brief else lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
