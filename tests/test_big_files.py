"""Very large files: a real > 5 GiB file streamed with bounded memory, records past 4 GiB, and
one record of more than 1 GiB. Opt-in (marker `bigdisk`, needs ~12 GiB free): `pytest -m bigdisk`;
.ci/run runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import tfrec_fast

GiB = 1 << 30
MiB = 1 << 20
FOUR_GIB = 4 * GiB
SEED = 20240601
RECORD = MiB - 37  # ~1 MiB payloads, not a power of two
SPAN = 64 * MiB  # every record is a window into one seeded 64 MiB buffer
N_RECORDS = 5400  # 5400 * (1 MiB - 21) ~ 5.27 GiB on disk
PER_BATCH = 64


def base_buffer(seed=SEED):
    return np.random.default_rng(seed).integers(0, 256, SPAN + RECORD, dtype=np.uint8).tobytes()


def window(i):
    """Start of record i's window in the base buffer (deterministic, varies per record)."""
    return (i * 7_919_981) % SPAN


def require_free_disk(path, needed):
    free = shutil.disk_usage(path).free
    if free < needed:
        pytest.fail(
            f"needs {needed / GiB:.0f} GiB free under {path}, only {free / GiB:.1f} GiB: "
            "free some space (this opt-in test is not skipped)"
        )


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    require_free_disk(d, 12 * GiB)
    path = d / "big.tfrecord"
    base = memoryview(base_buffer())
    t0 = time.perf_counter()
    with tfrec_fast.TFRecordWriter(path) as w:
        for start in range(0, N_RECORDS, PER_BATCH):
            w.write_batch(
                [
                    base[window(i) : window(i) + RECORD]
                    for i in range(start, min(start + PER_BATCH, N_RECORDS))
                ]
            )
    print(f"\nwrote {path.stat().st_size / GiB:.2f} GiB in {time.perf_counter() - t0:.1f} s")
    try:
        yield path
    finally:
        path.unlink()


STREAM_SCRIPT = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
import tfrec_fast
from test_big_files import base_buffer, window, RECORD, N_RECORDS, FOUR_GIB
def hwm_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
base = base_buffer()
# Reset the peak-RSS mark (Linux: "5" > clear_refs), so the temporaries of base_buffer() do not
# hide the growth; without it, fall back to ru_maxrss (a weaker bound).
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    peak_now = hwm_kib
except OSError:
    peak_now = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
before = peak_now()
t0 = time.perf_counter()
n = bad = past_4g = 0
first_past = None
with tfrec_fast.TFRecordReader(sys.argv[1]) as reader:
    while True:
        pos = reader.tell()
        try:
            record = next(reader)
        except StopIteration:
            break
        if pos > FOUR_GIB:
            past_4g += 1
            if first_past is None:
                first_past = (n, pos)
        if record != base[window(n):window(n) + RECORD]:
            bad += 1
        n += 1
    end = reader.tell()
peak = peak_now()
print(json.dumps({"records": n, "bad": bad, "past_4g": past_4g, "first_past": first_past,
                  "end": end, "rss_growth_kib": peak - before, "rss_before_kib": before,
                  "seconds": time.perf_counter() - t0}))
"""


@pytest.mark.bigdisk
def test_stream_5gib_file_with_bounded_memory(big_file):
    size = big_file.stat().st_size
    assert size > 5 * GiB
    proc = subprocess.run(
        [sys.executable, "-c", STREAM_SCRIPT, str(big_file), os.path.dirname(__file__)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    print(f"\nstreamed {size / GiB:.2f} GiB: {result}")
    assert result["records"] == N_RECORDS, result
    assert result["bad"] == 0, f"{result['bad']} records differ from the seeded content"
    assert result["end"] == size > FOUR_GIB, result
    assert result["past_4g"] > 1000, result
    assert result["rss_growth_kib"] < 128 * 1024, f"RSS grew too much: {result}"


@pytest.mark.bigdisk
def test_records_past_4gib_by_count_tell_and_index(big_file):
    size = big_file.stat().st_size
    framed = RECORD + 16
    assert tfrec_fast.count_records(big_file) == N_RECORDS
    offsets, sizes = tfrec_fast.create_index(big_file)
    assert len(offsets) == N_RECORDS
    assert offsets[-1] == (N_RECORDS - 1) * framed > FOUR_GIB
    assert (sizes == framed).all()
    base = base_buffer()
    picks = [0, 4095, FOUR_GIB // framed, FOUR_GIB // framed + 1, N_RECORDS - 2, N_RECORDS - 1]
    reader = tfrec_fast.IndexedTFRecordReader(big_file, (offsets, sizes))
    for i, rec in zip(picks, reader.get_batch(picks)):
        assert rec == base[window(i) : window(i) + RECORD], f"record {i} differs"
    assert bytes(reader[N_RECORDS - 1]) == base[window(N_RECORDS - 1) :][:RECORD]
    # Sequential reader: skip to just before 4 GiB by counting, then read and tell().
    with tfrec_fast.TFRecordReader(big_file) as r:
        first_past = FOUR_GIB // framed + 1
        for _ in range(first_past):
            next(r)
        assert r.tell() == first_past * framed > FOUR_GIB
        rec = next(r)
        assert rec == base[window(first_past) : window(first_past) + RECORD]
        assert r.records_read == first_past + 1
        assert r.count() == N_RECORDS - first_past - 1
        assert r.tell() == size


@pytest.mark.bigdisk
def test_one_record_over_1_gib(tmp_path):
    require_free_disk(tmp_path, 4 * GiB)
    n = GiB + GiB // 10  # 1.1 GiB
    tile = np.random.default_rng(SEED + 1).integers(0, 256, 8 * MiB + 13, dtype=np.uint8)
    payload = np.resize(tile, n)  # repeats the tile, misaligned to the 8 MiB blocks
    payload[:: (64 * MiB) + 1] ^= 0x5A  # sparse edits so no two tiles are identical
    payload = payload.tobytes()
    expected_crc = tfrec_fast.crc32c(payload)
    path = tmp_path / "huge_record.tfrecord"
    t0 = time.perf_counter()
    with tfrec_fast.TFRecordWriter(path) as w:
        w.write(b"small before")
        w.write(payload)
        w.write(b"small after")
    assert path.stat().st_size == n + 3 * 16 + len(b"small before") + len(b"small after")
    timings = {"write": time.perf_counter() - t0}
    del payload

    t0 = time.perf_counter()
    with tfrec_fast.TFRecordReader(path) as r:
        assert bytes(next(r)) == b"small before"
        big = next(r)
        assert len(big) == n
        assert tfrec_fast.crc32c(big) == expected_crc, "the 1.1 GiB payload differs"
        del big
        assert bytes(next(r)) == b"small after"
        with pytest.raises(StopIteration):
            next(r)
    timings["read_path"] = time.perf_counter() - t0

    # Through a Python file object (PyFileSource caps each call at 1 GiB: several calls).
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        batch = tfrec_fast.TFRecordReader(f).read_batch(max_records=3)
        assert len(batch) == 3 and len(batch[1]) == n
        assert tfrec_fast.crc32c(batch[1]) == expected_crc
        del batch
    timings["read_file_like"] = time.perf_counter() - t0

    idx = tfrec_fast.IndexedTFRecordReader(path)
    assert len(idx) == 3 and tfrec_fast.crc32c(idx[1]) == expected_crc
    idx.close()
    print(f"\n1.1 GiB record timings (s): { {k: round(v, 1) for k, v in timings.items()} }")
