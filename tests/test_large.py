"""64-bit lengths and offsets, and memory that stays flat while streaming a large file."""

import json
import os
import subprocess
import sys

import _oracle

import tfrec_fast

FOUR_GIB = 1 << 32


def test_offsets_past_4_gib(tmp_path):
    """A sparse file whose first record is > 4 GiB: the header-only scan skips it and reports the
    later records' positions and the damage offset as full 64-bit numbers."""
    big = FOUR_GIB + 100
    path = tmp_path / "sparse.tfrecord"
    with open(path, "wb") as f:
        f.write(_oracle.header(big))
        f.seek(12 + big)  # the payload is a hole: no disk space used
        f.write(b"\0\0\0\0")  # data CRC (not checked by a header-only scan)
        f.write(_oracle.frame(b"after the big one"))
        f.write(_oracle.header(7)[:5])  # cut inside the next header
    second = 12 + big + 4
    third = second + 16 + len(b"after the big one")
    with tfrec_fast.TFRecordReader(path) as reader:
        try:
            reader.count()
        except tfrec_fast.DataLossError as error:
            assert error.reason == "truncated"
            assert error.record_index == 2
            assert error.offset == third > FOUR_GIB
            assert str(third) in str(error)
        else:
            raise AssertionError("a cut header must not look like a clean end")


def test_length_above_4_gib_is_not_truncated_to_32_bits(tmp_path):
    """2**32 + 3 must never be read as a 3-byte record."""
    data = _oracle.header(FOUR_GIB + 3) + b"abc" + b"\0" * 4 + _oracle.frame(b"x")
    try:
        list(tfrec_fast.read_records(data))
    except tfrec_fast.DataLossError as error:
        assert error.record_index == 0 and error.offset == 0
        assert error.reason == "length_too_large"
    else:
        raise AssertionError("expected DataLossError")


STREAM_SCRIPT = r"""
import json, resource, sys
import numpy, tfrec_fast
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
n = nbytes = 0
for record in tfrec_fast.read_records(sys.argv[1]):
    n += 1
    nbytes += len(record)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"records": n, "bytes": nbytes, "rss_growth_kib": peak - base}))
"""


def test_streaming_memory_is_bounded(tmp_path):
    """Streaming a 256 MiB file record by record grows RSS by far less than the file."""
    path = tmp_path / "stream.tfrecord"
    record = os.urandom(100_000)
    count = 2684  # ~256 MiB
    with tfrec_fast.TFRecordWriter(path) as writer:
        for _ in range(count):
            writer.write(record)
    proc = subprocess.run(
        [sys.executable, "-c", STREAM_SCRIPT, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["records"] == count and result["bytes"] == count * len(record)
    assert result["rss_growth_kib"] < 64 * 1024, result
