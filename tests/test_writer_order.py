"""Record order through every writer entry point and sink, for every mix of record sizes around
the writer's and the reader's buffer thresholds.

The writer once sent a record larger than half its buffer straight to the sink, ahead of the
small records still waiting in the buffer (found by TensorFlow's testCompressionOptions, ported
below). The output must always equal a pure-Python framer's, record for record.
"""

from __future__ import annotations

import gzip
import io
import zlib

import numpy as np
import pytest
from _oracle import build_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrec_fast as tfr

COMPRESSIONS = [None, "gzip", "zlib"]
MIN_BUFFER = 4096  # the writer's and reader's smallest buffer (smaller values are raised to it)
DIRECT_READ = 32 * 1024  # reads this large bypass the reader's buffer (buffered_input.h)
FRAMING = 16


def payloads_of(sizes):
    """Distinct, recognisable payloads: record i is filled with byte (i mod 251), its size first."""
    return [(i % 251).to_bytes(1, "little") * n for i, n in enumerate(sizes)]


def inflate(data: bytes, compression) -> bytes:
    if compression == "gzip":
        return gzip.decompress(data)
    if compression == "zlib":
        return zlib.decompress(data)
    return data


def write_with(entry, sink, records, compression, buffer_size):
    with tfr.TFRecordWriter(sink, compression, buffer_size=buffer_size) as w:
        if entry == "write":
            for r in records:
                w.write(r)
        elif entry == "write_batch":
            w.write_batch(records)
        elif entry == "write_batch_of_a_batch":
            w.write_batch(tfr.RecordBatch.from_records(records))
        elif entry == "write_batch_of_bytearrays":
            w.write_batch([bytearray(r) for r in records])


ENTRIES = ["write", "write_batch", "write_batch_of_a_batch", "write_batch_of_bytearrays"]


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("entry", ENTRIES)
def test_tensorflow_compression_options_case(tmp_path, compression, entry):
    """Small, big (over half the default buffer), small: read back in that order."""
    records = [b"a" * 10, b"b" * 600_000, b"c" * 10]
    path = tmp_path / "out.tfrecord"
    write_with(entry, path, records, compression, 1 << 20)
    assert [bytes(r) for r in tfr.read_records(path, compression)] == records
    assert inflate(path.read_bytes(), compression) == build_file(records)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_file_like_sink_keeps_order(compression):
    records = [b"a" * 10, b"b" * 600_000, b"c" * 10]
    sink = io.BytesIO()
    with tfr.TFRecordWriter(sink, compression) as w:
        for r in records:
            w.write(r)
    assert inflate(sink.getvalue(), compression) == build_file(records)


def test_write_example_keeps_order(tmp_path):
    examples = [{"x": b"a" * 10}, {"x": b"b" * 600_000}, {"x": b"c" * 10}]
    path = tmp_path / "ex.tfrecord"
    with tfr.TFRecordWriter(path) as w:
        for e in examples:
            w.write_example(e)
    (columns,) = tfr.read_examples(path, {"x": tfr.FixedLen((), "bytes")}, batch_size=10)
    assert columns["x"].to_list() == [e["x"] for e in examples]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_sharded_writer_keeps_order(tmp_path, compression):
    records = [b"a" * 10, b"b" * 600_000, b"c" * 10, b"d" * 700_000, b"e"]
    with tfr.ShardedWriter(tmp_path / "out", "part", num_shards=1, compression=compression) as w:
        for r in records:
            w.write(r)
    (shard,) = w.shards
    assert [bytes(r) for r in tfr.read_records(shard, compression)] == records


def sizes_near(capacity):
    """Record sizes at the edges that matter for a writer buffer of `capacity` bytes."""
    edges = [
        0,
        1,
        capacity // 2 - FRAMING,
        capacity - FRAMING,
        capacity,
        2 * capacity,
        DIRECT_READ,
        MIN_BUFFER,
    ]
    near = st.sampled_from(edges).flatmap(lambda e: st.integers(max(0, e - 2), e + 2))
    return st.one_of(near, st.integers(0, 3 * capacity))


@st.composite
def size_sequences(draw):
    capacity = draw(st.sampled_from([MIN_BUFFER, 3 * MIN_BUFFER + 5, 64 << 10]))
    sizes = draw(st.lists(sizes_near(capacity), min_size=1, max_size=12))
    return capacity, sizes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=size_sequences(),
    compression=st.sampled_from(COMPRESSIONS),
    entry=st.sampled_from(ENTRIES),
    to_file_like=st.booleans(),
)
def test_any_size_mix_matches_the_python_framer(
    tmp_path_factory, case, compression, entry, to_file_like
):
    capacity, sizes = case
    records = payloads_of(sizes)
    if to_file_like:
        sink = io.BytesIO()
        write_with(entry, sink, records, compression, capacity)
        data = sink.getvalue()
    else:
        path = tmp_path_factory.mktemp("mix") / "out.tfrecord"
        write_with(entry, path, records, compression, capacity)
        data = path.read_bytes()
    assert inflate(data, compression) == build_file(records)


@settings(max_examples=20, deadline=None)
@given(
    sizes=st.lists(
        st.sampled_from([0, 5, 1000, 4000, 4096, 30_000, 33_000, 70_000, 600_000, 1_100_000]),
        min_size=1,
        max_size=8,
    )
)
def test_default_buffer_size_mixes(tmp_path_factory, sizes):
    records = payloads_of(sizes)
    path = tmp_path_factory.mktemp("default") / "out.tfrecord"
    with tfr.TFRecordWriter(path) as w:
        for r in records:
            w.write(r)
    assert path.read_bytes() == build_file(records)


# ---- the reader's direct-read path, the same blind spot ---------------------------------------


class ReadOnly:
    """A file-like object with only read() (no readinto, no seek)."""

    def __init__(self, data):
        self._inner = io.BytesIO(data)

    def read(self, n=-1):
        return self._inner.read(n)


def sources(data):
    yield "bytes", data
    yield "bytearray", bytearray(data)
    yield "numpy", np.frombuffer(data, np.uint8).copy()
    yield "file_like", io.BytesIO(data)
    yield "read_only_stream", ReadOnly(data)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(sizes_near(MIN_BUFFER), min_size=1, max_size=12),
    compression=st.sampled_from(COMPRESSIONS),
    buffer_size=st.sampled_from([MIN_BUFFER, 3 * MIN_BUFFER + 5, 1 << 20]),
)
def test_reader_any_size_mix_any_source(tmp_path_factory, sizes, compression, buffer_size):
    records = payloads_of(sizes)
    plain = build_file(records)
    data = {None: plain, "gzip": gzip.compress(plain), "zlib": zlib.compress(plain)}[compression]
    path = tmp_path_factory.mktemp("read") / "in.tfrecord"
    path.write_bytes(data)
    for name, source in [("path", path), *sources(data)]:
        with tfr.TFRecordReader(source, compression, buffer_size=buffer_size) as reader:
            got = [bytes(r) for r in reader]
        assert got == records, name
        with tfr.TFRecordReader(path, compression, buffer_size=buffer_size) as reader:
            batched = [
                bytes(r) for b in reader.iter_batches(max_bytes=capacity_or(buffer_size)) for r in b
            ]
        assert batched == records


def capacity_or(buffer_size):
    return max(buffer_size // 3, 1)
