"""TFRecordWriter: round trips, byte-exact framing, compression, flush/close semantics."""

from __future__ import annotations

import gzip
import io
import random
import zlib

import _oracle
import numpy as np
import pytest
from _util import read_all
from conftest import KeepBytesIO, make_payloads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfrec_fast

COMPRESSIONS = [None, "gzip", "zlib"]
WBITS = {"gzip": 31, "zlib": 15}


def decompress(data: bytes, compression):
    if compression is None:
        return data
    if compression == "gzip":
        return gzip.decompress(data)
    return zlib.decompress(data)


def write_path(path, payloads, compression=None, **kw):
    with tfrec_fast.TFRecordWriter(str(path), compression=compression, **kw) as w:
        for p in payloads:
            w.write(p)
    return path.read_bytes()


def write_mem(payloads, compression=None, **kw):
    buf = KeepBytesIO()
    with tfrec_fast.TFRecordWriter(buf, compression=compression, **kw) as w:
        for p in payloads:
            w.write(p)
    return buf.value()


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_round_trip_path(tmp_path, payloads, compression):
    """Write to a path, read back the same records (None/gzip/zlib)."""
    p = tmp_path / "w.tfrecord"
    write_path(p, payloads, compression)
    records, err = read_all(str(p), compression=compression)
    assert err is None and records == payloads
    assert tfrec_fast.count_records(str(p), compression=compression) == len(payloads)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_round_trip_file_like(payloads, compression):
    """Write to an io.BytesIO, read back the same records from the bytes."""
    data = write_mem(payloads, compression)
    records, err = read_all(data, compression=compression)
    assert err is None and records == payloads


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_decompressed_output_is_reference_framing(tmp_path, payloads, compression):
    """Output (after inflating) is byte-identical to the independent oracle framing."""
    want = _oracle.build_file(payloads)
    assert decompress(write_path(tmp_path / "a", payloads, compression), compression) == want
    assert decompress(write_mem(payloads, compression), compression) == want


def test_uncompressed_byte_identical_to_corpus(tmp_path, corpus_file):
    """Re-writing the records of TF-written uncompressed corpus files reproduces them byte for byte."""
    for rel in (
        "raw/crc_lengths.tfrecord",
        "example/mnist_like.tfrecord",
        "raw/one_empty_record.tfrecord",
        "raw/empty_file.tfrecord",
    ):
        src = corpus_file(rel)
        recs = list(tfrec_fast.read_records(str(src), copy=True))
        out = tmp_path / "re.tfrecord"
        with tfrec_fast.TFRecordWriter(str(out)) as w:
            w.write_batch(recs)
        assert out.read_bytes() == src.read_bytes(), rel


def test_write_accepts_bytes_like(tmp_path):
    """write() takes bytes, bytearray, memoryview (incl. slices) and numpy arrays."""
    recs = [
        b"abc",
        bytearray(b"defg"),
        memoryview(b"..hij..")[2:5],
        np.arange(10, dtype=np.uint8),
        np.arange(3, dtype=np.int32),
        b"",
    ]
    want = [r.tobytes() if isinstance(r, np.ndarray) else bytes(r) for r in recs]
    p = tmp_path / "t"
    with tfrec_fast.TFRecordWriter(str(p)) as w:
        for r in recs:
            w.write(r)
    assert p.read_bytes() == _oracle.build_file(want)


def test_write_rejects_str(tmp_path):
    """A str record is a TypeError (no implicit encoding)."""
    with tfrec_fast.TFRecordWriter(str(tmp_path / "t")) as w:
        with pytest.raises(TypeError):
            w.write("text")


def test_write_batch_record_batch(tmp_path, tfrecord_file):
    """write_batch accepts a RecordBatch and an iterable (generator) of bytes-likes."""
    src, payloads = tfrecord_file
    with tfrec_fast.TFRecordReader(str(src)) as r:
        batch = r.read_batch(max_records=len(payloads))
    out = tmp_path / "copy.tfrecord"
    with tfrec_fast.TFRecordWriter(str(out)) as w:
        w.write_batch(batch)
        w.write_batch(bytes(p) for p in payloads[:2])
        w.write_batch([])
    assert out.read_bytes() == _oracle.build_file(payloads + payloads[:2])


@st.composite
def record_lists(draw):
    n = draw(st.integers(0, 30))
    recs = []
    for _ in range(n):
        kind = draw(st.sampled_from(["empty", "small", "small", "small", "large"]))
        if kind == "empty":
            recs.append(b"")
        elif kind == "small":
            recs.append(draw(st.binary(min_size=0, max_size=300)))
        else:
            size = draw(st.integers(1 << 16, 3 << 17))
            seed = draw(st.integers(0, 2**32 - 1))
            recs.append(random.Random(seed).randbytes(size))
    return recs


@pytest.mark.parametrize("compression", COMPRESSIONS)
@settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(recs=record_lists(), data=st.data())
def test_property_round_trip(compression, recs, data):
    """Random binary records (empty, small, large), split between write and write_batch, round-trip."""
    buf = KeepBytesIO()
    with tfrec_fast.TFRecordWriter(buf, compression=compression) as w:
        i = 0
        while i < len(recs):
            k = data.draw(st.integers(1, max(1, len(recs) - i)))
            if data.draw(st.booleans()):
                for r in recs[i : i + k]:
                    w.write(r)
            else:
                w.write_batch(recs[i : i + k])
            i += k
    raw = buf.value()
    records, err = read_all(raw, compression=compression)
    assert err is None
    assert records == recs
    assert decompress(raw, compression) == _oracle.build_file(recs)


def test_gzip_output_readable_by_gzip_module(tmp_path, payloads):
    """gzip output is a standard gzip file (Python's gzip module reads it)."""
    p = tmp_path / "g.tfrecord.gz"
    write_path(p, payloads, "gzip")
    raw = p.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    with gzip.open(p, "rb") as f:
        assert f.read() == _oracle.build_file(payloads)


def test_zlib_output_readable_by_zlib(tmp_path, payloads):
    """zlib output is a standard zlib stream (zlib.decompress reads it)."""
    raw = write_path(tmp_path / "z", payloads, "zlib")
    assert zlib.decompress(raw) == _oracle.build_file(payloads)


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB", "Gzip", ""])
def test_compression_name_spellings(tmp_path, payloads, compression):
    """TF spellings and case variants are accepted by the writer."""
    p = tmp_path / "s"
    write_path(p, payloads, compression)
    records, err = read_all(str(p), compression=compression)
    assert err is None and records == payloads


def test_unknown_compression_value_error(tmp_path):
    """An unknown compression name is a ValueError."""
    with pytest.raises(ValueError):
        tfrec_fast.TFRecordWriter(str(tmp_path / "x"), compression="brotli")


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_write_after_close_raises(tmp_path, compression):
    """write/write_batch/flush after close raise ValueError; close is idempotent; closed is set."""
    p = tmp_path / "c"
    w = tfrec_fast.TFRecordWriter(str(p), compression=compression)
    assert not w.closed
    w.write(b"one")
    w.close()
    assert w.closed
    w.close()
    assert w.closed
    with pytest.raises(ValueError):
        w.write(b"two")
    with pytest.raises(ValueError):
        w.write_batch([b"two"])
    with pytest.raises(ValueError):
        w.flush()
    records, err = read_all(str(p), compression=compression)
    assert err is None and records == [b"one"]


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("target", ["path", "filelike"])
def test_exception_inside_with_keeps_records(tmp_path, compression, target):
    """An exception inside `with` propagates, closes the writer, and leaves earlier records intact."""
    payloads = make_payloads(5, (10, 0, 3000, 7))
    p = tmp_path / "e"
    buf = KeepBytesIO()
    with pytest.raises(KeyError):
        with tfrec_fast.TFRecordWriter(
            str(p) if target == "path" else buf, compression=compression
        ) as w:
            for x in payloads:
                w.write(x)
            raise KeyError("boom")
    assert w.closed
    raw = p.read_bytes() if target == "path" else buf.value()
    records, err = read_all(raw, compression=compression)
    assert err is None and records == payloads


def test_flush_uncompressed_visible_to_second_reader(tmp_path):
    """After flush(), a second reader sees every record written so far (before close)."""
    payloads = make_payloads(6, (5, 0, 100, 20000, 9))
    p = tmp_path / "f"
    with tfrec_fast.TFRecordWriter(str(p)) as w:
        for i, x in enumerate(payloads):
            w.write(x)
            w.flush()
            records, err = read_all(str(p))
            assert err is None and records == payloads[: i + 1]
            assert tfrec_fast.count_records(str(p)) == i + 1


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_flush_compressed_prefix_complete(tmp_path, compression):
    """After flush(), the compressed prefix inflates to complete framing of all records so far."""
    payloads = make_payloads(7, (5, 0, 100, 20000, 9, 300))
    p = tmp_path / "f"
    buf = KeepBytesIO()
    for target in ("path", "filelike"):
        with tfrec_fast.TFRecordWriter(
            str(p) if target == "path" else buf, compression=compression
        ) as w:
            for i, x in enumerate(payloads):
                w.write(x)
                w.flush()
                prefix = p.read_bytes() if target == "path" else buf.getvalue()
                d = zlib.decompressobj(WBITS[compression])
                got = d.decompress(prefix)
                assert got == _oracle.build_file(payloads[: i + 1]), (target, i)
        raw = p.read_bytes() if target == "path" else buf.value()
        assert decompress(raw, compression) == _oracle.build_file(payloads)


def test_multi_member_gzip(tmp_path):
    """Concatenated gzip members (including an empty member in the middle) read as one stream."""
    a = make_payloads(11, (3, 0, 500))
    b = make_payloads(12, (70000, 1))
    m1 = gzip.compress(_oracle.build_file(a))
    empty = gzip.compress(b"")
    p = tmp_path / "part2.gz"
    write_path(p, b, "gzip")
    m2 = p.read_bytes()
    data = m1 + empty + m2
    for src in (data, _write(tmp_path / "multi.gz", data)):
        records, err = read_all(src, compression="gzip")
        assert err is None, str(err)
        assert records == a + b
    with open(tmp_path / "multi.gz", "rb") as f:
        records, err = read_all(f, compression="gzip")
    assert err is None and records == a + b
    assert tfrec_fast.count_records(str(tmp_path / "multi.gz"), compression="gzip") == len(a + b)


def _write(path, data):
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_levels(tmp_path, compression):
    """level 0..9 all produce readable streams; level 0 is stored (bigger than level 9)."""
    payloads = [b"abcdefgh" * 2000, bytes(5000), b"xyz" * 333]
    sizes = {}
    for level in range(10):
        p = tmp_path / ("l%d" % level)
        raw = write_path(p, payloads, compression, level=level)
        sizes[level] = len(raw)
        assert decompress(raw, compression) == _oracle.build_file(payloads), level
        records, err = read_all(str(p), compression=compression)
        assert err is None and records == payloads
    assert sizes[0] > len(_oracle.build_file(payloads))
    assert sizes[9] < sizes[0] / 10


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_bad_level(tmp_path, compression):
    """A level outside 0..9 is a ValueError."""
    for level in (10, -5, 100):
        with pytest.raises(ValueError):
            tfrec_fast.TFRecordWriter(str(tmp_path / "b"), compression=compression, level=level)


def test_empty_writer_outputs(tmp_path):
    """Closing without writes: empty file uncompressed; a valid empty stream compressed."""
    assert write_path(tmp_path / "n", []) == b""
    for c in ("gzip", "zlib"):
        raw = write_path(tmp_path / c, [], c)
        assert decompress(raw, c) == b""
        records, err = read_all(raw, compression=c)
        assert err is None and records == []


def test_write_batch_from_a_generator_refilling_one_bytearray():
    """Each record keeps the contents it had when the generator yielded it."""
    buffer = bytearray(3)

    def refill():
        for i in range(10):
            buffer[:] = bytes([i]) * 3
            yield buffer

    out = io.BytesIO()
    with tfrec_fast.TFRecordWriter(out) as writer:
        writer.write_batch(refill())
    assert [bytes(r) for r in tfrec_fast.read_records(out.getvalue())] == [
        bytes([i]) * 3 for i in range(10)
    ]


def test_write_takes_one_record_by_position_or_name():
    """write() (a plain C method on the engine's writer, bound to each TFRecordWriter) takes its
    one argument by position or as ``record=``, and anything else is a TypeError."""
    out = io.BytesIO()
    with tfrec_fast.TFRecordWriter(out) as w:
        w.write(b"one")
        w.write(record=b"two")
        for bad_args, bad_kwargs in [
            ((), {}),
            ((b"a", b"b"), {}),
            ((), {"data": b"a"}),
            ((b"a",), {"record": b"b"}),
        ]:
            with pytest.raises(TypeError):
                w.write(*bad_args, **bad_kwargs)
        assert w.records_written == 2
    assert [bytes(r) for r in tfrec_fast.read_records(out.getvalue())] == [b"one", b"two"]


def test_a_subclass_keeps_its_own_write():
    """TFRecordWriter binds write() straight to the engine, unless a subclass overrides it."""

    class Upper(tfrec_fast.TFRecordWriter):
        def write(self, record):
            super().write(bytes(record).upper())

    out = io.BytesIO()
    with Upper(out) as w:
        w.write(b"abc")
        w.write_batch([b"def"])
    assert [bytes(r) for r in tfrec_fast.read_records(out.getvalue())] == [b"ABC", b"def"]


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(
        st.sampled_from([0, 1, 7, 8, 9, 64, 65, 844, 2047, 2048, 2049, 4096]), max_size=60
    ),
    kinds=st.lists(st.sampled_from(["bytes", "bytearray", "memoryview", "numpy"]), min_size=1),
    data=st.data(),
)
def test_mixed_bytes_likes_through_write_and_write_batch(sizes, kinds, data):
    """bytes (held by reference, no view) and other bytes-likes (copied when mutable), in any mix,
    one by one or in write_batch from a list or a generator, in records of repeated sizes (the
    writer reuses the header of the previous record when the size repeats) and sizes around a
    4 KiB buffer's thresholds (half the buffer, the whole of it)."""
    records = [bytes([(i * 7 + j) % 256 for j in range(n)]) for i, n in enumerate(sizes)]

    def as_kind(i, r):
        kind = kinds[i % len(kinds)]
        if kind == "bytearray":
            return bytearray(r)
        if kind == "memoryview":
            return memoryview(b"<" + r + b">")[1:-1]
        if kind == "numpy":
            return np.frombuffer(r, dtype=np.uint8).copy()
        return r

    out = io.BytesIO()
    with tfrec_fast.TFRecordWriter(out, buffer_size=4096) as w:
        i = 0
        while i < len(records):
            k = data.draw(st.integers(1, len(records) - i))
            how = data.draw(st.sampled_from(["write", "list", "generator"]))
            part = [as_kind(j, records[j]) for j in range(i, i + k)]
            if how == "write":
                for r in part:
                    w.write(r)
            else:
                w.write_batch(part if how == "list" else iter(part))
            i += k
        assert w.records_written == len(records)
    assert out.getvalue() == _oracle.build_file(records)
