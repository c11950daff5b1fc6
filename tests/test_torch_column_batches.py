"""TFRecordDataset(batch_size=B) with a spec: each cache-sized read is parsed as it comes and the
batches are cut and joined from the parsed columns (tfrec_fast.torch._column_batches), so batches of
large records never pass through a batch-sized copy of their bytes; with arrays-only specs a read
is a whole batch instead. The batches must be exactly what the records one by one give, whatever
the record sizes and the reads' boundaries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

import tfrec_fast as tf_
from tfrec_fast import FixedLen, Ragged, TFRecordWriter, VarLen
from tfrec_fast.torch import TFRecordDataset
from tfrec_fast.torch._column_batches import rebatch

SPEC = {
    "id": FixedLen((), "int64"),
    "vec": VarLen("float32"),
    "blob": FixedLen((), "bytes"),
    "tags": VarLen("bytes"),
    "pair": FixedLen((2,), "int64"),
}
# Blobs from a few bytes to past the 512 KiB reads, so reads hold one record, several, or part
# of a batch, and batches span many reads.
BLOB_SIZES = [3, 100, 70_000, 300_000, 600_000]


def write(path, n, seed=0):
    rng = np.random.default_rng(seed)
    blobs = [bytes([i % 251]) * int(rng.choice(BLOB_SIZES)) for i in range(n)]
    vec_len = rng.integers(0, 4, n)
    tag_len = rng.integers(0, 3, n)
    vec = Ragged(
        np.arange(vec_len.sum(), dtype=np.float32) / 2, np.concatenate([[0], np.cumsum(vec_len)])
    )
    tags = [[f"t{i}.{j}".encode() for j in range(k)] for i, k in enumerate(tag_len)]
    with TFRecordWriter(str(path)) as w:
        w.write_examples(
            {
                "id": np.arange(n),
                "vec": vec,
                "blob": blobs,
                "tags": tags,
                "pair": np.arange(2 * n).reshape(n, 2),
            }
        )
    return str(path)


def one_by_one(path):
    return list(TFRecordDataset(path, spec=SPEC, worker_ring=False))


def check_batches(batches, records, size, drop_last, ragged):
    want = len(records) - len(records) % size if drop_last else len(records)
    assert sum(len(b["id"]) for b in batches) == want
    assert all(len(b["id"]) == size for b in batches[:-1])
    i = 0
    for b in batches:
        n = len(b["id"])
        rows = records[i : i + n]
        assert b["id"].tolist() == [int(r["id"]) for r in rows]
        assert b["pair"].shape == (n, 2)
        assert b["pair"].tolist() == [r["pair"].tolist() for r in rows]
        assert b["blob"] == [r["blob"] for r in rows]
        assert b["tags"] == [r["tags"] for r in rows]
        if ragged == "splits":
            values, splits = b["vec"]
            assert splits[0] == 0 and len(splits) == n + 1
            got = [values[splits[k] : splits[k + 1]].tolist() for k in range(n)]
        else:
            got = [v.tolist() for v in b["vec"]]
        assert got == [r["vec"].tolist() for r in rows]
        i += n


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ragged", ["list", "splits"])
@pytest.mark.parametrize(
    "size,drop_last", [(1, False), (3, False), (7, True), (16, False), (100, False)]
)
def test_batches_of_mixed_record_sizes_match_the_records(
    tmp_path, threads, ragged, size, drop_last
):
    path = write(tmp_path / "mixed.tfrecord", 37)
    records = one_by_one(path)
    ds = TFRecordDataset(
        path, spec=SPEC, batch_size=size, drop_last=drop_last, ragged=ragged, num_threads=threads
    )
    check_batches(list(ds), records, size, drop_last, ragged)


def test_batches_across_files_and_shuffled(tmp_path):
    paths = [write(tmp_path / f"p{k}.tfrecord", n, seed=k) for k, n in enumerate([5, 0, 9, 2])]
    records = [r for p in paths for r in one_by_one(p)]
    check_batches(list(TFRecordDataset(paths, spec=SPEC, batch_size=4)), records, 4, False, "list")
    shuffled = list(
        TFRecordDataset(
            paths, spec=SPEC, batch_size=4, shuffle_buffer=8, seed=1, shuffle_files=False
        )
    )
    ids = [int(i) for b in shuffled for i in b["id"]]
    assert sorted(ids) == sorted(int(r["id"]) for r in records) and len(ids) == 16
    assert all(len(b["id"]) == 4 for b in shuffled)


def test_a_parse_error_names_the_file_and_record(tmp_path):
    """The reads are parsed one by one, so a bad record is named exactly, after the batches
    before it."""
    good = write(tmp_path / "good.tfrecord", 6)
    bad = str(tmp_path / "bad.tfrecord")
    records = [r for r in tf_.read_records(good)]
    with TFRecordWriter(bad) as w:
        for k, r in enumerate(records):
            w.write(b"\xff\xff" if k == 4 else bytes(r))
    ds = TFRecordDataset([good, bad], spec=SPEC, batch_size=4, shuffle_files=False)
    got = []
    with pytest.raises(tf_.ExampleParseError) as info:
        for b in ds:
            got.append(len(b["id"]))
    assert got == [4, 4]  # the 8 records before it (6 of good, 2 of bad) in whole batches
    assert info.value.path == bad and info.value.record_index == 4


@settings(max_examples=80, deadline=None)
@given(
    pieces=st.lists(st.integers(0, 9), max_size=12),
    size=st.integers(1, 10),
    drop_last=st.booleans(),
)
def test_rebatch_cuts_and_joins_every_column_kind(pieces, size, drop_last):
    """Pieces of any sizes (empty ones too) -> batches of exactly `size` rows, in order, for
    arrays, ragged numbers whose row splits do not start at 0, and lists."""
    start, parts = 0, []
    for n in pieces:
        ids = np.arange(start, start + n)
        lengths = ids % 3
        base = 5  # splits offset into a larger values array, as cuts of Ragged are
        splits = base + np.concatenate([[0], np.cumsum(lengths)])
        values = np.concatenate(
            [np.full(base, -1)] + [np.full(k, i) for i, k in zip(ids, lengths)] + [np.full(2, -2)]
        )
        parts.append(
            (
                n,
                {
                    "a": ids.reshape(n, 1) * 10,
                    "r": Ragged(values, splits),
                    "l": [f"x{i}" for i in ids],
                },
            )
        )
        start += n
    total = start
    out = list(rebatch(iter(parts), size, drop_last))
    want = total - total % size if drop_last else total
    assert sum(n for n, _ in out) == want
    i = 0
    for n, cols in out:
        assert n == size or (not drop_last and n == total % size and n > 0)
        ids = list(range(i, i + n))
        assert cols["a"][:, 0].tolist() == [k * 10 for k in ids]
        assert cols["l"] == [f"x{k}" for k in ids]
        r = cols["r"]
        assert len(r.row_splits) == n + 1
        assert [r.values[r.row_splits[k] : r.row_splits[k + 1]].tolist() for k in range(n)] == [
            [k] * (k % 3) for k in ids
        ]
        i += n


@pytest.mark.parametrize("start,stop", [(0, None), (3, 97), (5, 6)])
def test_read_range_in_whole_multiples(tmp_path, start, stop):
    """read_range(whole_multiples=True): after the first batch, batches of as many multiples of
    max_records as max_bytes holds (records of one size here: the byte limit never cuts a
    multiple), every record once and in order."""
    from tfrec_fast import _loader

    path = str(tmp_path / "small.tfrecord")
    records = [bytes([i]) * 12 for i in range(100)]
    with TFRecordWriter(path) as w:
        w.write_batch(records)
    batches = list(
        _loader.read_range(path, start, stop, max_records=4, max_bytes=200, whole_multiples=True)
    )
    want = records[start:stop]
    assert [bytes(r) for b in batches for r in b] == want
    sizes = [len(b) for b in batches]
    assert all(n % 4 == 0 for n in sizes[:-1]) and all(n * 12 <= 200 for n in sizes)
    if len(want) > 40:
        assert max(sizes) > 4  # small records: several multiples a batch


# An arrays-only spec: every column a numpy array or Ragged numbers, so reads are whole batches
# (never cut by the 512 KiB limit) decoded straight into the batch's arrays.
ARRAY_SPEC = {
    "id": FixedLen((), "int64"),
    "vec": VarLen("float32"),
    "pair": FixedLen((2,), "int64"),
    "img": FixedLen((2, 150_000), "uint8"),
}


def write_images(path, n, bad=None):
    """n records holding a 300 KB uint8 "img" (two rows past the 512 KiB reads in a batch of 2);
    record `bad` (if any) gets a 3-byte img instead."""
    with TFRecordWriter(str(path)) as w:
        for i in range(n):
            img = bytes([i % 251]) * (3 if i == bad else 300_000)
            w.write_example(
                {
                    "id": i,
                    "vec": np.arange(i % 3, dtype=np.float32),
                    "pair": np.array([i, -i]),
                    "img": img,
                }
            )
    return str(path)


def read_sizes(monkeypatch):
    """The records of every read the datasets make (through _loader.read_range), as a list that
    fills while they iterate."""
    from tfrec_fast import _loader

    sizes = []
    original = _loader.read_range

    def read_range(*args, **kwargs):
        for batch in original(*args, **kwargs):
            sizes.append(len(batch))
            yield batch

    monkeypatch.setattr(_loader, "read_range", read_range)
    return sizes


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size,drop_last", [(1, False), (3, False), (4, True), (16, False)])
def test_arrays_only_batches_match_the_records(tmp_path, monkeypatch, threads, size, drop_last):
    path = write_images(tmp_path / "img.tfrecord", 11)
    reads = read_sizes(monkeypatch)
    ds = TFRecordDataset(
        path, spec=ARRAY_SPEC, batch_size=size, drop_last=drop_last, num_threads=threads
    )
    batches = list(ds)
    # Each read is whole batches (600 KB of records for 2, past the 512 KiB limit), none joined.
    assert sum(reads) == 11 and all(n % size == 0 for n in reads[:-1])
    want = 11 - 11 % size if drop_last else 11
    assert [len(b["id"]) for b in batches][:-1] == [size] * (len(batches) - 1)
    ids = np.concatenate([b["id"].numpy() for b in batches])
    assert ids.tolist() == list(range(want))
    for b in batches:
        for row, i in enumerate(b["id"].tolist()):
            assert b["img"].shape[1:] == (2, 150_000)
            assert int(b["img"][row].min()) == int(b["img"][row].max()) == i % 251
            assert b["pair"][row].tolist() == [i, -i]
            assert b["vec"][row].tolist() == list(range(i % 3))


def test_a_bytes_column_keeps_cache_sized_reads(tmp_path, monkeypatch):
    """The same records with their image as bytes: read in 512 KiB parts (one 300 KB record
    each), whose bytes objects are made while the read is in cache, then joined into batches."""
    path = write_images(tmp_path / "img.tfrecord", 6)
    reads = read_sizes(monkeypatch)
    spec = {**ARRAY_SPEC, "img": FixedLen((), "bytes")}
    batches = list(TFRecordDataset(path, spec=spec, batch_size=3))
    assert [len(b["id"]) for b in batches] == [3, 3]
    assert reads == [1] * 6
    assert [len(x) for b in batches for x in b["img"]] == [300_000] * 6


def test_arrays_only_parse_error_after_the_batches_before_it(tmp_path):
    path = write_images(tmp_path / "bad.tfrecord", 7, bad=5)
    got = []
    with pytest.raises(tf_.ExampleParseError) as info:
        for b in TFRecordDataset(path, spec=ARRAY_SPEC, batch_size=2):
            got.append(b["id"].tolist())
    assert got == [[0, 1], [2, 3]]
    assert info.value.path == path and info.value.record_index == 5
    assert info.value.feature == "img"


def test_read_range_unsplit_batches_hold_whole_multiples(tmp_path):
    """split_batches=False: max_bytes only chooses the multiple; a batch of records larger than
    max_bytes is still max_records whole records. Without whole_multiples it changes nothing."""
    from tfrec_fast import _loader

    path = str(tmp_path / "mixed.tfrecord")
    records = [bytes([i]) * (1000 if i % 7 else 5) for i in range(60)]
    with TFRecordWriter(path) as w:
        w.write_batch(records)
    batches = list(
        _loader.read_range(
            path, 0, None, max_records=4, max_bytes=600, whole_multiples=True, split_batches=False
        )
    )
    assert [bytes(r) for b in batches for r in b] == records
    assert all(len(b) % 4 == 0 for b in batches)
    plain = list(_loader.read_range(path, 0, None, max_bytes=600, split_batches=False))
    assert [bytes(r) for b in plain for r in b] == records
    assert max(len(b) for b in plain) < 60  # still cut by max_bytes
