"""Zero-copy hand-over: read-only views into batch memory, lifetimes, no aliasing."""
from __future__ import annotations

import gc
import hashlib

import numpy as np
import pytest

import _oracle
import tfrec_fast
from conftest import make_payloads


@pytest.fixture
def distinct_file(tmp_path):
    """~3 MB of 3000 distinct non-empty records (several internal buffers' worth)."""
    payloads = [(b"%06d:" % i) * (50 + i % 300) for i in range(3000)]
    p = tmp_path / "distinct.tfrecord"
    p.write_bytes(_oracle.build_file(payloads))
    return p, payloads


def test_records_are_readonly_memoryviews(tfrecord_file):
    """Yielded records are read-only memoryviews: writing raises TypeError."""
    path, payloads = tfrecord_file
    recs = list(tfrec_fast.read_records(str(path)))
    for rec, want in zip(recs, payloads):
        assert isinstance(rec, memoryview)
        assert rec.readonly
        assert rec.tobytes() == want
        if len(rec):
            with pytest.raises(TypeError):
                rec[0] = 0
    with tfrec_fast.TFRecordReader(str(path)) as r:
        b = r.read_batch(max_records=len(payloads))
    for i in range(len(b)):
        assert b[i].readonly
    with pytest.raises(TypeError):
        b[1][0] = 0


def test_batch_records_share_batch_memory(tfrecord_file):
    """Records of a batch are views into batch.data (np.shares_memory), not copies."""
    path, payloads = tfrecord_file
    with tfrec_fast.TFRecordReader(str(path)) as r:
        b = r.read_batch(max_records=len(payloads))
    nonempty = [i for i in range(len(b)) if len(b[i])]
    assert nonempty
    for i in nonempty:
        arr = np.frombuffer(b[i], dtype=np.uint8)
        assert np.shares_memory(arr, b.data), i
    for i, rec in enumerate(b):
        if len(rec):
            assert np.shares_memory(np.frombuffer(rec, dtype=np.uint8), b.data)


def test_batch_arrays_are_readonly(tfrecord_file):
    """batch.data/offsets/positions are read-only numpy arrays."""
    path, payloads = tfrecord_file
    with tfrec_fast.TFRecordReader(str(path)) as r:
        b = r.read_batch()
    for name in ("data", "offsets", "positions"):
        arr = getattr(b, name)
        assert isinstance(arr, np.ndarray)
        assert not arr.flags.writeable, name
        with pytest.raises(ValueError):
            arr[0] = 1


def test_arrays_and_views_outlive_reader_and_batch(tfrecord_file):
    """data/offsets arrays and record views stay valid after reader and batch are gone."""
    path, payloads = tfrecord_file
    r = tfrec_fast.TFRecordReader(str(path))
    b = r.read_batch(max_records=len(payloads))
    data, offsets, positions = b.data, b.offsets, b.positions
    views = [b[i] for i in range(len(b))]
    r.close()
    del r, b
    gc.collect()
    # churn the allocator so freed memory would be overwritten
    junk = [bytes([i % 251]) * 4096 for i in range(2000)]
    gc.collect()
    assert data.tobytes() == b"".join(payloads)
    assert offsets.tolist() == list(np.cumsum([0] + [len(p) for p in payloads]))
    assert positions.tolist() == _oracle.record_offsets(payloads)[:-1]
    assert [v.tobytes() for v in views] == payloads
    del junk


def test_views_outlive_iterator(distinct_file):
    """Memoryviews from read_records stay valid after the iterator is exhausted and deleted."""
    path, payloads = distinct_file
    it = tfrec_fast.read_records(str(path))
    first = next(it)
    rest = list(it)
    del it
    gc.collect()
    junk = [bytearray(b"\xaa" * 65536) for _ in range(200)]
    assert first.tobytes() == payloads[0]
    assert [x.tobytes() for x in rest] == payloads[1:]
    del junk


def test_list_of_records_not_aliased(distinct_file):
    """list(read_records(...)) keeps every record distinct (no buffer reuse, unlike `tfrecord`)."""
    path, payloads = distinct_file
    recs = list(tfrec_fast.read_records(str(path)))
    assert len(recs) == len(payloads)
    digests = [hashlib.sha256(r).digest() for r in recs]
    assert len(set(digests)) == len(payloads)
    assert [r.tobytes() for r in recs] == payloads


def test_small_buffer_reader_not_aliased(distinct_file):
    """With a tiny buffer_size (many refills), earlier records are never overwritten."""
    path, payloads = distinct_file
    with tfrec_fast.TFRecordReader(str(path), buffer_size=4096) as r:
        recs = list(r)
    assert [x.tobytes() for x in recs] == payloads


def test_batches_not_aliased(distinct_file):
    """Batches from iter_batches keep their contents after later batches are read."""
    path, payloads = distinct_file
    with tfrec_fast.TFRecordReader(str(path), buffer_size=65536) as r:
        batches = list(r.iter_batches(max_records=100))
    assert [x for b in batches for x in b.to_list()] == payloads
    datas = [b.data for b in batches]
    del batches
    gc.collect()
    assert b"".join(d.tobytes() for d in datas) == b"".join(payloads)
