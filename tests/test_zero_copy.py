"""Zero-copy hand-over: read-only views into batch memory, lifetimes, no aliasing."""

from __future__ import annotations

import gc
import hashlib

import _oracle
import numpy as np
import pytest

import tfrec_fast


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
    for rec in b:
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


@pytest.fixture
def example_file(tmp_path):
    """~2 MB of Examples: a bytes image (several sizes), a label and a list of bytes words."""
    from tfrec_fast.encode import encode_examples

    n = 600
    images = [bytes([i % 251]) * (1000 + 37 * (i % 50)) for i in range(n)]
    words = [[b"w%d" % j for j in range(i % 4)] for i in range(n)]
    path = tmp_path / "examples.tfrecord"
    with tfrec_fast.TFRecordWriter(str(path)) as w:
        w.write_batch(encode_examples({"image": images, "label": np.arange(n), "words": words}))
    spec = {
        "image": tfrec_fast.FixedLen((), "bytes"),
        "label": tfrec_fast.FixedLen((), "int64"),
        "words": tfrec_fast.VarLen("bytes"),
    }
    return path, spec, images, words


def test_parsed_bytes_view_the_batch_and_keep_it_alive(example_file):
    """parse_examples' bytes columns are views of the batch (no copy), valid after the batch and
    reader are gone; copy_bytes=True gives columns owning only their own values."""
    path, spec, images, words = example_file
    with tfrec_fast.TFRecordReader(str(path)) as r:
        batch = r.read_batch(max_records=1000)
    cols = tfrec_fast.parse_examples(batch, spec)
    assert np.shares_memory(cols["image"].values, batch.data)
    assert np.shares_memory(cols["words"].values, batch.data)
    owned = tfrec_fast.parse_examples(batch, spec, copy_bytes=True)
    for key in ("image", "words"):
        assert not np.shares_memory(owned[key].values, batch.data)
    assert len(owned["image"].values) == sum(map(len, images))
    del batch
    gc.collect()
    junk = [bytearray(b"\xaa" * 65536) for _ in range(200)]
    assert cols["image"].to_list() == images == owned["image"].to_list()
    assert cols["words"].to_list() == words == owned["words"].to_list()
    assert [bytes(v) for v in cols["image"].views()] == images
    del junk


@pytest.mark.parametrize("num_threads", [1, 2])
def test_read_examples_hands_over_views_or_owned_copies(example_file, num_threads):
    """read_examples: each batch's bytes columns view one buffer (the batch read; no second copy
    of the values), shared by every bytes column of the batch; copy_bytes=True: owned values."""
    path, spec, images, words = example_file
    got_images, got_words = [], []
    for cols in tfrec_fast.read_examples(str(path), spec, batch_size=128, num_threads=num_threads):
        assert cols["image"].values is not None
        assert np.shares_memory(cols["image"].values, cols["words"].values)  # the batch's buffer
        assert cols["image"].values.nbytes > sum(len(v) for v in cols["image"].to_list())
        got_images += cols["image"].to_list()
        got_words += cols["words"].to_list()
    assert got_images == images and got_words == words
    owned = list(
        tfrec_fast.read_examples(
            str(path), spec, batch_size=128, num_threads=num_threads, copy_bytes=True
        )
    )
    for cols in owned:
        assert not np.shares_memory(cols["image"].values, cols["words"].values)
        assert cols["image"].values.nbytes == sum(len(v) for v in cols["image"].to_list())
    assert [v for cols in owned for v in cols["image"].to_list()] == images
