"""num_threads: read-ahead and parsing on threads give the same records and columns in the
same order as one thread, errors after the data before them, and no thread outlives a consumer
that stops early."""

import gc
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrec_fast as tfr
from tfrec_fast._parallel import parallel_map, read_ahead, resolve_threads

SPEC = {"id": tfr.FixedLen((), "int64"), "tags": tfr.VarLen("bytes"),
        "vec": tfr.VarLen("float32")}


def write_files(tmp_path, files=3, per_file=37, compression=None):
    paths = []
    for f in range(files):
        path = str(tmp_path / f"part-{f}.tfrecord")
        with tfr.TFRecordWriter(path, compression) as w:
            for i in range(per_file):
                n = f * per_file + i
                w.write_example({"id": [n], "tags": tfr.Bytes([b"t%d" % n] * (n % 3)),
                                 "vec": tfr.Floats([n / 2] * (n % 4))})
        paths.append(path)
    return paths


def flatten(batches):
    ids, tags, vecs = [], [], []
    for cols in batches:
        ids += cols["id"].tolist()
        tags += cols["tags"].to_list()
        vecs += cols["vec"].to_list()
    return ids, tags, vecs


def tfrec_threads():
    # (not tfrec_fast.tfds's image-decoding pool, which lives as long as the process)
    return [t for t in threading.enumerate()
            if t.name.startswith("tfrec_fast") and not t.name.startswith("tfrec_fast.tfds")]


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("threads", [2, 4])
def test_read_examples_same_as_one_thread(tmp_path, compression, threads):
    paths = write_files(tmp_path, compression=compression)
    one = flatten(tfr.read_examples(paths, SPEC, batch_size=10, num_threads=1,
                                    compression=compression))
    many = flatten(tfr.read_examples(paths, SPEC, batch_size=10, num_threads=threads,
                                     compression=compression))
    assert many == one
    assert one[0] == list(range(111))


def test_not_deterministic_gives_every_batch_once(tmp_path):
    paths = write_files(tmp_path, files=4)
    ids = flatten(tfr.read_examples(paths, SPEC, batch_size=7, num_threads=4,
                                    deterministic=False))[0]
    assert sorted(ids) == list(range(148))


def test_names_only_spec_with_threads(tmp_path):
    paths = write_files(tmp_path)
    got = [c["id"].to_list() for c in tfr.read_examples(paths, ["id"], batch_size=5,
                                                          num_threads=3)]
    assert [v for row in got for (v,) in row] == list(range(111))


def test_damage_comes_after_the_batches_before_it(tmp_path):
    paths = write_files(tmp_path)
    with open(paths[1], "r+b") as f:  # the data CRC of part-1's last record
        f.seek(-2, 2)
        byte = f.read(1)
        f.seek(-2, 2)
        f.write(bytes([byte[0] ^ 1]))
    seen = []
    with pytest.raises(tfr.DataLossError) as info:
        for cols in tfr.read_examples(paths, SPEC, batch_size=10, num_threads=4):
            seen += cols["id"].tolist()
    assert info.value.path.endswith("part-1.tfrecord") and info.value.record_index == 36
    assert seen == list(range(len(seen))) and len(seen) >= 60


def test_bad_record_names_file_and_index_with_threads(tmp_path):
    paths = write_files(tmp_path, files=2)
    with tfr.TFRecordWriter(str(tmp_path / "part-2.tfrecord")) as w:
        w.write_example({"id": [1]})
        w.write_example({"id": [0.5]})
    with pytest.raises(tfr.ExampleParseError) as info:
        list(tfr.read_examples(str(tmp_path / "part-*.tfrecord"), SPEC, batch_size=4,
                               num_threads=4))
    assert info.value.path.endswith("part-2.tfrecord") and info.value.record_index == 1


def test_stopping_early_leaves_no_thread(tmp_path):
    paths = write_files(tmp_path, files=3, per_file=200)
    it = tfr.read_examples(paths, SPEC, batch_size=5, num_threads=4)
    next(it)
    assert tfrec_threads()
    it.close()
    assert not tfrec_threads()
    records = tfr.read_records(paths, num_threads=2)
    next(records)
    del records
    gc.collect()
    for t in tfrec_threads():
        t.join(timeout=10)
    assert not tfrec_threads()


@pytest.mark.parametrize("copy", [False, True])
def test_read_records_read_ahead(tmp_path, copy):
    paths = write_files(tmp_path, compression="zlib")
    one = [bytes(r) for r in tfr.read_records(paths, "zlib", num_threads=1)]
    many = list(tfr.read_records(paths, "zlib", num_threads=2, copy=copy))
    assert all(isinstance(r, bytes if copy else memoryview) for r in many)
    assert [bytes(r) for r in many] == one and len(one) == 111


def test_read_records_error_order(tmp_path):
    paths = write_files(tmp_path, files=2)
    with open(paths[0], "ab") as f:
        f.write(b"\x01\x02\x03")  # a cut header after part-0's records
    got = []
    with pytest.raises(tfr.DataLossError) as info:
        for r in tfr.read_records(paths, num_threads=2):
            got.append(bytes(r))
    assert len(got) == 37 and info.value.path.endswith("part-0.tfrecord")


def test_num_threads_is_checked():
    assert resolve_threads(None) >= 1 and resolve_threads(3) == 3
    with pytest.raises(ValueError, match="num_threads"):
        resolve_threads(0)


@settings(max_examples=30, deadline=None)
@given(items=st.lists(st.integers(), max_size=60), threads=st.integers(1, 6),
       fail_at=st.one_of(st.none(), st.integers(0, 59)))
def test_parallel_map_order_and_errors(items, threads, fail_at):
    def fn(x):
        if fail_at is not None and x is items[fail_at % max(len(items), 1)] and items:
            raise KeyError(x)
        return x * 2
    out = []
    try:
        for y in parallel_map(fn, read_ahead(iter(items)), threads):
            out.append(y)
    except KeyError:
        first_bad = fail_at % len(items)
        assert out == [x * 2 for x in items[:first_bad]] or \
            out == [x * 2 for x in items[:items.index(items[first_bad])]]
    else:
        assert out == [x * 2 for x in items]
    assert not tfrec_threads()


def test_threads_read_large_records(tmp_path):
    path = str(tmp_path / "big.tfrecord")
    blobs = [np.random.default_rng(i).bytes(100_000) for i in range(30)]
    with tfr.TFRecordWriter(path) as w:
        for b in blobs:
            w.write_example({"image": [b], "id": [0]})
    spec = {"image": tfr.FixedLen((), "bytes")}
    got = [v for cols in tfr.read_examples(path, spec, batch_size=4, num_threads=3)
           for v in cols["image"].to_list()]
    assert got == blobs
