#!/usr/bin/env python3
"""Print a Markdown description of the machine and of every package version the benchmarks use.
Versions come from package metadata, so TensorFlow is not imported here."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version

import _common as C

PACKAGES = ["tfrec_fast", "numpy", "protobuf", "tensorflow-cpu", "tensorflow", "tfrecord", "crc32c",
            "google-crc32c", "tqdm", "torch"]


def sh(*cmd) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def cpu_model() -> str:
    for line in sh("lscpu").splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def lines() -> list[str]:
    lscpu = dict(ln.split(":", 1) for ln in sh("lscpu").splitlines() if ":" in ln)
    flags = lscpu.get("Flags", "")
    out = [
        f"- CPU: {cpu_model()}; {os.cpu_count()} logical CPUs"
        f" (threads/core {lscpu.get('Thread(s) per core', '?').strip()},"
        f" sse4_2={'yes' if 'sse4_2' in flags else 'no'}, pclmulqdq={'yes' if 'pclmulqdq' in flags else 'no'},"
        f" hypervisor {lscpu.get('Hypervisor vendor', 'none').strip()})",
        f"- Memory: {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB;"
        f" kernel {platform.release()}; {platform.platform()}",
        f"- Python {platform.python_version()} ({sys.executable})",
    ]
    vers = []
    for p in PACKAGES:
        try:
            vers.append(f"{p} {version(p)}")
        except PackageNotFoundError:
            if p not in ("tensorflow",):  # tensorflow-cpu is what we install
                vers.append(f"{p} (not installed)")
    out.append("- Packages: " + ", ".join(vers))
    tfr, why = C.probe_tfrec_fast()
    if tfr is not None:
        backends, note = C.crc_backends(tfr)
        backends = f"{backends}{' -- ' + note if note else ''}"
        out.append(f"- tfrec_fast: CRC32C backend `{tfr.crc32c_backend()}` (available: {backends});"
                   f" TFREC_FAST_CRC32C={os.environ.get('TFREC_FAST_CRC32C', '(unset)')}")
    else:
        out.append(f"- tfrec_fast: {why}")
    repo = C.BENCH_DIR.parent
    commit = sh("git", "-C", str(repo), "rev-parse", "--short", "HEAD")
    dirty = sh("git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no")
    if commit:
        out.append(f"- tfrec_fast source: {repo} at commit {commit}{' (+ uncommitted changes)' if dirty else ''}")
    for name in C.DATASETS:
        meta = C.load_meta(name)
        if meta:
            out.append(f"- Data `{C.data_path(name).name}`: {meta['n_records']:,} records, "
                       f"{meta['file_bytes']:,} bytes, written by {meta['writer']}, page cache warm (read before timing)")
    return out


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__).parse_args(argv)
    print("\n".join(lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
