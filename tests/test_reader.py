"""Reader API behaviour: arguments, sources, TFRecordReader, batches, tell()."""

from __future__ import annotations

import bisect
import io
import os

import _oracle
import numpy as np
import pytest
from _util import read_all
from conftest import make_payloads
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrec_fast


def test_unknown_compression_value_error(tfrecord_file):
    """An unknown compression name is a ValueError (before any reading)."""
    path, _ = tfrecord_file
    for bad in ("lz4", "snappy", "gz", "zip"):
        with pytest.raises(ValueError):
            list(tfrec_fast.read_records(str(path), compression=bad))
        with pytest.raises(ValueError):
            tfrec_fast.TFRecordReader(str(path), compression=bad)


def test_empty_string_compression_is_none(tfrecord_file):
    """compression='' means uncompressed, like TF's default."""
    path, payloads = tfrecord_file
    assert [bytes(r) for r in tfrec_fast.read_records(str(path), compression="")] == payloads


def test_missing_file_not_found(tmp_path):
    """A missing path raises FileNotFoundError (an OSError, not a DataLossError)."""
    missing = tmp_path / "nope.tfrecord"
    with pytest.raises(FileNotFoundError):
        list(tfrec_fast.read_records(str(missing)))
    with pytest.raises(FileNotFoundError):
        tfrec_fast.TFRecordReader(str(missing)).read_batch()
    with pytest.raises(FileNotFoundError):
        tfrec_fast.count_records(str(missing))
    try:
        list(tfrec_fast.read_records(str(missing)))
    except FileNotFoundError as e:
        assert not isinstance(e, tfrec_fast.DataLossError)


def test_list_of_sources_concatenates(tmp_path):
    """A list/tuple of sources (paths, bytes, file objects) is read in order."""
    a = make_payloads(1, (3, 0, 10))
    b = make_payloads(2, (5, 6))
    c = make_payloads(3, (100,))
    pa = tmp_path / "a.tfrecord"
    pa.write_bytes(_oracle.build_file(a))
    pb = tmp_path / "b.tfrecord"
    pb.write_bytes(_oracle.build_file(b))
    got = [bytes(r) for r in tfrec_fast.read_records([str(pa), pb])]
    assert got == a + b
    with open(pb, "rb") as f:
        got = [bytes(r) for r in tfrec_fast.read_records((pa, _oracle.build_file(c), f, str(pa)))]
    assert got == a + c + b + a
    assert list(tfrec_fast.read_records([])) == []


def test_list_error_names_failing_file(tmp_path):
    """In a list, records of good files come out, then the bad file's error names that file."""
    a = make_payloads(1, (3, 4))
    pa = tmp_path / "good.tfrecord"
    pa.write_bytes(_oracle.build_file(a))
    pb = tmp_path / "bad.tfrecord"
    pb.write_bytes(_oracle.build_file(a)[:-1])
    records, err = read_all([str(pa), str(pb)])
    assert records == a + a[:1]
    assert err is not None and err.reason == "truncated" and err.record_index == 1
    assert os.path.samefile(err.path, pb)


def test_reader_iteration_and_records_read(tfrecord_file):
    """TFRecordReader iterates all records; records_read counts them."""
    path, payloads = tfrecord_file
    with tfrec_fast.TFRecordReader(str(path)) as r:
        assert r.records_read == 0
        got = []
        for i, rec in enumerate(r):
            got.append(bytes(rec))
            assert r.records_read == i + 1
    assert got == payloads


def test_reader_close(tfrecord_file):
    """close() is idempotent and a closed reader refuses to read (ValueError)."""
    path, _ = tfrecord_file
    r = tfrec_fast.TFRecordReader(str(path))
    r.read_batch(max_records=1)
    r.close()
    r.close()
    with pytest.raises(ValueError):
        r.read_batch()


def test_context_manager_closes_file_object(tfrecord_file):
    """Leaving the with-block closes the reader over a file object: further reads raise ValueError."""
    path, payloads = tfrecord_file
    with open(path, "rb") as f:
        with tfrec_fast.TFRecordReader(f) as r:
            assert bytes(next(iter(r))) == payloads[0]
        with pytest.raises(ValueError):
            r.read_batch()


def test_tell_after_each_record(tfrecord_file):
    """tell() is the header offset of the next record not yet handed out; file size at the end."""
    path, payloads = tfrecord_file
    offs = _oracle.record_offsets(payloads)
    with tfrec_fast.TFRecordReader(str(path)) as r:
        assert r.tell() == 0
        for i, _rec in enumerate(r):
            assert r.tell() == offs[i + 1], i
        assert r.tell() == offs[-1] == path.stat().st_size


def test_tell_after_batches(tfrecord_file):
    """tell() after read_batch(max_records=k) points at record k's header."""
    path, payloads = tfrecord_file
    offs = _oracle.record_offsets(payloads)
    with tfrec_fast.TFRecordReader(str(path)) as r:
        b = r.read_batch(max_records=3)
        assert len(b) == 3 and r.tell() == offs[3]
        b = r.read_batch(max_records=4)
        assert len(b) == 4 and r.tell() == offs[7]
        assert r.records_read == 7


@pytest.mark.parametrize("k", [1, 2, 3, 4, 9, 10, 11, 1000])
def test_read_batch_max_records(tfrecord_file, k):
    """read_batch(max_records=k) returns at most k records; all batches together = the file."""
    path, payloads = tfrecord_file
    got = []
    with tfrec_fast.TFRecordReader(str(path)) as r:
        while True:
            b = r.read_batch(max_records=k)
            if len(b) == 0:
                break
            assert 1 <= len(b) <= k
            got.extend(b.to_list())
        assert len(r.read_batch(max_records=k)) == 0  # still empty
    assert got == payloads


@pytest.mark.parametrize("max_bytes", [1, 50, 1000, 5000, 10**6])
def test_read_batch_max_bytes(tfrecord_file, max_bytes):
    """read_batch(max_bytes=m) returns at most m payload bytes, unless a single record is larger
    (a batch always holds at least one record); no record lost."""
    path, payloads = tfrecord_file
    got = []
    with tfrec_fast.TFRecordReader(str(path)) as r:
        while True:
            b = r.read_batch(max_bytes=max_bytes)
            if len(b) == 0:
                break
            sizes = [len(x) for x in b]
            assert sum(sizes) <= max_bytes or len(sizes) == 1, (sizes, max_bytes)
            got.extend(b.to_list())
    assert got == payloads


def test_read_batch_both_limits(tfrecord_file):
    """max_records and max_bytes together: both limits respected."""
    path, payloads = tfrecord_file
    got = []
    with tfrec_fast.TFRecordReader(str(path)) as r:
        for b in r.iter_batches(max_records=3, max_bytes=200):
            assert 1 <= len(b) <= 3
            assert b.nbytes <= 200 or len(b) == 1
            got.extend(b.to_list())
    assert got == payloads


def test_empty_batch_at_end_and_empty_file(tmp_path):
    """An empty file gives an empty RecordBatch (len 0, offsets [0]) and no records."""
    p = tmp_path / "empty.tfrecord"
    p.write_bytes(b"")
    assert list(tfrec_fast.read_records(str(p))) == []
    with tfrec_fast.TFRecordReader(str(p)) as r:
        b = r.read_batch()
        assert len(b) == 0
        assert list(b) == [] and b.to_list() == []
        assert b.offsets.tolist() == [0]
        assert b.data.size == 0 and b.positions.size == 0
        assert len(r.read_batch()) == 0
        assert r.tell() == 0


def test_iter_batches(tfrecord_file):
    """iter_batches yields non-empty batches covering every record in order."""
    path, payloads = tfrecord_file
    with tfrec_fast.TFRecordReader(str(path)) as r:
        batches = list(r.iter_batches(max_records=4))
    assert [len(b) for b in batches] == [4, 4, 2]
    assert [x for b in batches for x in b.to_list()] == payloads


def test_record_batch_api(tfrecord_file):
    """RecordBatch: len, indexing incl. negative, IndexError, data/offsets/positions, to_list."""
    path, payloads = tfrecord_file
    n = len(payloads)
    with tfrec_fast.TFRecordReader(str(path)) as r:
        b = r.read_batch(max_records=n)
    assert len(b) == n
    for i in range(n):
        assert bytes(b[i]) == payloads[i]
        assert bytes(b[i - n]) == payloads[i]
    with pytest.raises(IndexError):
        b[n]
    with pytest.raises(IndexError):
        b[-n - 1]
    assert [bytes(x) for x in b] == payloads
    assert b.to_list() == payloads and all(type(x) is bytes for x in b.to_list())
    assert b.data.dtype == np.uint8 and b.data.ndim == 1
    assert b.offsets.dtype == np.int64 and b.offsets.shape == (n + 1,)
    assert b.positions.dtype == np.int64 and b.positions.shape == (n,)
    assert b.offsets[0] == 0
    assert b.data.tobytes() == b"".join(payloads)
    for i in range(n):
        assert b.data[b.offsets[i] : b.offsets[i + 1]].tobytes() == payloads[i]
    assert b.positions.tolist() == _oracle.record_offsets(payloads)[:-1]
    assert b.nbytes >= int(b.offsets[-1])


def test_copy_true_yields_bytes(tfrecord_file):
    """copy=True yields bytes objects (read_records and TFRecordReader)."""
    path, payloads = tfrecord_file
    got = list(tfrec_fast.read_records(str(path), copy=True))
    assert all(type(x) is bytes for x in got) and got == payloads
    with tfrec_fast.TFRecordReader(str(path), copy=True) as r:
        got = list(r)
    assert all(type(x) is bytes for x in got) and got == payloads


def test_copy_false_yields_memoryview(tfrecord_file):
    """Default copy=False yields memoryviews."""
    path, payloads = tfrecord_file
    got = list(tfrec_fast.read_records(str(path)))
    assert all(isinstance(x, memoryview) for x in got)
    assert [x.tobytes() for x in got] == payloads


@pytest.mark.parametrize("buffer_size", [1, 16, 100, 4096, 1 << 20])
def test_small_buffer_sizes(tmp_path, buffer_size):
    """Records larger than buffer_size and records straddling buffer refills read correctly."""
    payloads = make_payloads(9, (0, 5000, 1, 17, 70000, 3, 0, 4096))
    p = tmp_path / "b.tfrecord"
    data = _oracle.build_file(payloads)
    p.write_bytes(data)
    if buffer_size == 1:
        try:
            tfrec_fast.TFRecordReader(data, buffer_size=1).close()
        except ValueError:
            return  # a minimum buffer size, refused up front, is acceptable
    for src in (str(p), data):
        with tfrec_fast.TFRecordReader(src, buffer_size=buffer_size) as r:
            assert [bytes(x) for x in r] == payloads
    with open(p, "rb") as f, tfrec_fast.TFRecordReader(f, buffer_size=buffer_size) as r:
        assert [bytes(x) for x in r] == payloads


def test_file_like_with_read_only(tfrecord_file):
    """A file-like object with only .read (no readinto) works as a source."""
    path, payloads = tfrecord_file

    class ReadOnly:
        def __init__(self, data):
            self._b = io.BytesIO(data)

        def read(self, n=-1):
            return self._b.read(n)

    got = [bytes(x) for x in tfrec_fast.read_records(ReadOnly(path.read_bytes()))]
    assert got == payloads


def test_non_seekable_stream(tfrecord_file, stream_only):
    """A non-seekable raw stream delivering short reads works."""
    path, payloads = tfrecord_file
    got = [bytes(x) for x in tfrec_fast.read_records(stream_only(path.read_bytes(), chunk=7))]
    assert got == payloads


def test_memory_source_types(tfrecord_file):
    """bytes, bytearray, memoryview and numpy uint8 arrays holding a whole file are sources."""
    path, payloads = tfrecord_file
    data = path.read_bytes()
    for src in (data, bytearray(data), memoryview(data), np.frombuffer(data, dtype=np.uint8)):
        assert [bytes(x) for x in tfrec_fast.read_records(src)] == payloads, type(src)


def test_many_records_large_file(tmp_path):
    """A file spanning several 1 MiB buffers: every record intact, count_records agrees."""
    payloads = [i.to_bytes(4, "little") * (i % 700) for i in range(4000)]
    p = tmp_path / "many.tfrecord"
    p.write_bytes(_oracle.build_file(payloads))
    got = [bytes(x) for x in tfrec_fast.read_records(str(p))]
    assert got == payloads
    assert tfrec_fast.count_records(str(p)) == len(payloads)


def test_concurrent_readers_in_threads(tmp_path):
    """Independent readers in threads (GIL released inside) all get every record intact."""
    import threading

    payloads = [(b"%05d" % i) * (i % 97) for i in range(3000)]
    p = tmp_path / "t.tfrecord"
    p.write_bytes(_oracle.build_file(payloads))
    results, errors = [None] * 4, []

    def work(k):
        try:
            results[k] = [bytes(x) for x in tfrec_fast.read_records(str(p))]
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert all(r == payloads for r in results)


# Sizes around the reader's size classes for whole buffered records (copies below 8, 8..16,
# 16..32, 32..64 and larger bytes) and around its groups of 8 checked together.
SMALL_SIZES = [0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.sampled_from(SMALL_SIZES), max_size=70),
    repeat=st.booleans(),
    max_records=st.one_of(st.none(), st.integers(1, 20)),
    max_bytes=st.one_of(st.none(), st.integers(1, 2000)),
    buffer_size=st.sampled_from([4096, 4103, 1 << 20]),
)
def test_small_records_in_batches_round_trip(sizes, repeat, max_records, max_bytes, buffer_size):
    """Records of small sizes (all one size, or mixed) come back whole, in order, at their header
    offsets, in batches that keep both limits (a batch's first record is taken whatever its
    size), whatever the read buffer."""
    if repeat and sizes:
        sizes = [sizes[0]] * len(sizes)
    records = [bytes([(i + j) % 251 for j in range(n)]) for i, n in enumerate(sizes)]
    data = _oracle.build_file(records)
    got, positions = [], []
    with tfrec_fast.TFRecordReader(data, buffer_size=buffer_size) as r:
        for batch in r.iter_batches(max_records=max_records, max_bytes=max_bytes, num_threads=1):
            assert max_records is None or len(batch) <= max_records
            assert max_bytes is None or len(batch) == 1 or batch.nbytes <= max_bytes
            got += [bytes(x) for x in batch]
            positions += batch.positions.tolist()
    assert got == records
    assert positions == np.cumsum([0] + [n + 16 for n in sizes])[:-1].tolist()


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 5, 10, 64, 266]), min_size=1, max_size=40),
    where=st.floats(0, 1, exclude_max=True),
    bit=st.integers(0, 7),
    max_records=st.one_of(st.none(), st.integers(1, 20)),
    max_bytes=st.one_of(st.none(), st.integers(1, 600)),
)
def test_one_flipped_bit_stops_at_its_record(sizes, where, bit, max_records, max_bytes):
    """A bit flipped anywhere in a file of many records of a few sizes (checked in groups, most
    headers by their length's known checksum): the records before the damaged one come out
    whole and in order, in batches that keep their limits, then a DataLossError names the
    damaged record and its offset."""
    records = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    data = _oracle.build_file(records)
    at = int(where * len(data))
    offsets = _oracle.record_offsets(records)
    victim = bisect.bisect_right(offsets, at) - 1
    got = []
    with pytest.raises(tfrec_fast.DataLossError) as info:
        with tfrec_fast.TFRecordReader(_oracle.flip_bit(data, at, bit)) as r:
            for batch in r.iter_batches(
                max_records=max_records, max_bytes=max_bytes, num_threads=1
            ):
                assert max_records is None or len(batch) <= max_records
                assert max_bytes is None or len(batch) == 1 or batch.nbytes <= max_bytes
                got += [bytes(x) for x in batch]
    assert got == records[:victim]
    assert info.value.record_index == victim and info.value.offset == offsets[victim]


@pytest.mark.parametrize("damage", ["length_crc", "length_to_known", "length_same_slot"])
@pytest.mark.parametrize("victim", [0, 5, 7, 8, 19])
def test_damaged_header_after_known_lengths_is_refused(damage, victim):
    """The reader computes a header's checksum once per length and then compares: a damaged
    checksum of a known length, a length field changed to another known length (its checksum
    left) or to one sharing the known length's table slot (256 apart) is still refused, at its
    record index and byte offset, after the good records before it."""
    sizes = [10 if i % 3 else 266 for i in range(20)]  # two lengths, one slot of the table
    records = [bytes([i]) * n for i, n in enumerate(sizes)]
    data = _oracle.build_file(records)
    at = _oracle.record_offsets(records)[victim]
    if damage == "length_crc":
        data = _oracle.flip_bit(data, at + 8, 3)
    elif damage == "length_to_known":
        data = _oracle.set_length(data, at, 266 if sizes[victim] == 10 else 10, fix_crc=False)
    else:
        data = _oracle.set_length(data, at, sizes[victim] + 256, fix_crc=False)
    got = []
    with pytest.raises(tfrec_fast.DataLossError) as info:
        for batch in tfrec_fast.TFRecordReader(data).iter_batches(num_threads=1):
            got += [bytes(x) for x in batch]
    assert got == records[:victim]
    assert info.value.record_index == victim and info.value.offset == at
