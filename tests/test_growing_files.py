"""Files still being written: a flushed, unclosed writer's output and files that grow while read.

- flush() makes everything written so far decodable: reading a flushed, still-open gzip/zlib
  file returns every record and ends cleanly (as TensorFlow does), instead of `truncated`.
- A record cut by the end of a file that is still being written raises `truncated`; once the
  rest arrives the same reader reads it (retrying from the record's header, as TensorFlow does),
  with nothing lost or repeated. Records appended after a clean end are read too.
"""

from __future__ import annotations

import io

import pytest
from _oracle import frame

import tfrec_fast as tfr

COMPRESSIONS = [None, "gzip", "zlib"]
RECORDS = [b"a" * 10, b"b" * 100_000, b"", b"c" * 7]


def read_all(source, compression):
    return [bytes(r) for r in tfr.read_records(source, compression)]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_flushed_unclosed_writer_output_reads_cleanly(tmp_path, compression):
    path = tmp_path / "open.tfrecord"
    w = tfr.TFRecordWriter(path, compression)
    try:
        for r in RECORDS:
            w.write(r)
        w.flush()
        assert read_all(path, compression) == RECORDS  # no DataLossError at the end
        w.write(b"later")
        w.flush()
        assert read_all(path, compression) == RECORDS + [b"later"]
    finally:
        w.close()
    assert read_all(path, compression) == RECORDS + [b"later"]


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_flushed_unclosed_file_like_output_reads_cleanly(compression):
    sink = io.BytesIO()
    w = tfr.TFRecordWriter(sink, compression)
    for r in RECORDS:
        w.write(r)
    w.flush()
    assert read_all(sink.getvalue(), compression) == RECORDS
    w.close()


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_one_reader_follows_a_flushing_writer(tmp_path, compression):
    path = tmp_path / "follow.tfrecord"
    with (
        tfr.TFRecordWriter(path, compression) as w,
        tfr.TFRecordReader(path, compression) as reader,
    ):
        seen = []
        for i in range(5):
            w.write(b"%d" % i * (1 + 30_000 * (i % 2)))
            w.flush()
            batch = reader.read_batch()
            seen += batch.to_list()
            assert len(seen) == i + 1
        assert reader.read_batch().to_list() == []


@pytest.mark.parametrize("api", ["read_batch", "iterate", "count"])
@pytest.mark.parametrize("cut", [3, 12, 20, 12 + 3000, 12 + 3000 + 2])
def test_record_cut_by_the_end_is_read_once_complete(tmp_path, api, cut):
    first, second, third = b"x" * 30, b"y" * 3000, b"z" * 5
    data = frame(first) + frame(second)
    path = tmp_path / "grow.tfrecord"
    head = len(frame(first))
    path.write_bytes(data[: head + cut])
    reader = tfr.TFRecordReader(path)
    it = iter(reader)
    # What one call gives: the records it read (count: how many), or raises.
    step = {
        "read_batch": lambda: reader.read_batch().to_list(),
        "iterate": lambda: [bytes(r) for r in [next(it, None)] if r is not None],
        "count": reader.count,
    }[api]

    if api != "count":  # count() reads on to the cut record and raises: `first` is counted
        assert step() == [first]
    for _ in range(2):  # as often as asked, while the record is incomplete
        with pytest.raises(tfr.DataLossError) as info:
            step()
        assert info.value.reason == "truncated" and info.value.offset == head
        assert info.value.record_index == 1
    with open(path, "ab") as f:
        f.write(data[head + cut :])
    assert step() in ([second], 1)
    assert step() in ([], 0)  # a clean end
    with open(path, "ab") as f:
        f.write(frame(third))
    assert step() in ([third], 1)  # appended after the clean end
    if api != "count":
        assert reader.records_read == 3


def test_other_damage_stays_reported(tmp_path):
    """Only a cut record is retried: a checksum error is raised again on every call."""
    data = bytearray(frame(b"ok") + frame(b"bad" * 10))
    data[-1] ^= 1
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    reader = tfr.TFRecordReader(path)
    assert reader.read_batch().to_list() == [b"ok"]
    for _ in range(2):
        with pytest.raises(tfr.DataLossError) as info:
            reader.read_batch()
        assert info.value.reason == "data_checksum"


def test_compressed_record_cut_inside_stays_truncated(tmp_path):
    """A compressed stream cannot be re-read from a record's start, so a record cut inside keeps
    its error (the reader never hands out part of it)."""
    path = tmp_path / "cut.tfrecord.gz"
    with tfr.TFRecordWriter(path, "gzip") as w:
        w.write(b"first")
        w.write(bytes(range(256)) * 400)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    reader = tfr.TFRecordReader(path, "gzip")
    assert reader.read_batch().to_list() == [b"first"]
    for _ in range(2):
        with pytest.raises(tfr.DataLossError) as info:
            reader.read_batch()
        assert info.value.reason == "truncated"
