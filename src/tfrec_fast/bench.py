"""``tfrec-fast bench``: reading throughput of tfrec_fast, and of its peers when installed.

Each peer runs in its own subprocess (so TensorFlow is never imported next to us and its import
time is not counted); every number is the median of ``repeat`` runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

from .records import TFRecordReader, read_records
from .remote import is_url

# Each peer script gets argv = [compression or "", repeat, *files] and prints
# {"records": n, "seconds": [t, ...]} as JSON.
_TENSORFLOW = r"""
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
comp, repeat, files = sys.argv[1].upper(), int(sys.argv[2]), sys.argv[3:]
seconds = []
for _ in range(repeat):
    start, n = time.perf_counter(), 0
    for batch in tf.data.TFRecordDataset(files, compression_type=comp).batch(1024):
        n += int(batch.shape[0])
    seconds.append(time.perf_counter() - start)
print(json.dumps({"records": n, "seconds": seconds}))
"""

_TFRECORD = r"""
import json, sys, time
from tfrecord.reader import tfrecord_iterator
comp, repeat, files = sys.argv[1] or None, int(sys.argv[2]), sys.argv[3:]
seconds = []
for _ in range(repeat):
    start, n = time.perf_counter(), 0
    for path in files:
        for _record in tfrecord_iterator(path, compression_type=comp):
            n += 1
    seconds.append(time.perf_counter() - start)
print(json.dumps({"records": n, "seconds": seconds}))
"""

PEERS = [
    ("TensorFlow tf.data (batched 1024)", "tensorflow", _TENSORFLOW),
    ("tfrecord package (no CRC check)", "tfrecord", _TFRECORD),
]


def _time(repeat, func):
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        count = func()
        seconds.append(time.perf_counter() - start)
    return count, statistics.median(seconds)


def _batched(files, compression, storage_options):
    def run():
        n = 0
        for path in files:
            with TFRecordReader(path, compression, storage_options=storage_options) as reader:
                for batch in reader.iter_batches():
                    n += len(batch)
        return n
    return run


def _per_record(files, compression, storage_options):
    def run():
        n = 0
        for _record in read_records(files, compression, storage_options=storage_options):
            n += 1
        return n
    return run


def _peer(script, files, compression, repeat):
    proc = subprocess.run([sys.executable, "-c", script, compression or "", str(repeat), *files],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result["records"], statistics.median(result["seconds"])


def run_bench(files, compression=None, repeat=3, peers=True, storage_options=None) -> int:
    """URLs are read through fsspec (``storage_options``); the peers then are not run (they
    read local files only)."""
    files = [os.fspath(f) for f in files]
    payload = 0
    for path in files:
        with TFRecordReader(path, compression, storage_options=storage_options) as reader:
            payload += sum(batch.nbytes for batch in reader.iter_batches())
    rows = [("tfrec_fast batched (both CRCs)",
             *_time(repeat, _batched(files, compression, storage_options))),
            ("tfrec_fast per record (both CRCs)",
             *_time(repeat, _per_record(files, compression, storage_options)))]
    if peers and any(is_url(f) for f in files):
        print("(peers: they read local files only, skipped for URLs)")
    elif peers:
        for name, module, script in PEERS:
            if importlib.util.find_spec(module) is None:
                print(f"({name}: not installed, skipped)")
                continue
            try:
                rows.append((name, *_peer(script, files, compression, repeat)))
            except (RuntimeError, ValueError) as error:
                print(f"({name}: failed: {error})")

    base = rows[0][2]
    print(f"{'reader':38} {'records/s':>14} {'GB/s':>8} {'time vs tfrec_fast batched':>28}")
    for name, records, seconds in rows:
        print(f"{name:38} {records / seconds:14,.0f} {payload / seconds / 1e9:8.3f} "
              f"{seconds / base:27.2f}x")
    return 0
