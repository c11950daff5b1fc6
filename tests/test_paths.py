"""Paths, glob patterns, compression="auto" and typed errors for bad sources (issue #10, C, D)."""

from __future__ import annotations

import gzip
import io
import os
import threading
import zlib

import _oracle
import pytest

import tfrec_fast
from tfrec_fast import _loader
from tfrec_fast.example import FixedLen


def example(i):
    return tfrec_fast.encode_example({"i": i})


@pytest.fixture
def shards(tmp_path):
    """train-0..2 written out of name order; their records are 10*k .. 10*k+2."""
    for k in (2, 0, 1):
        (tmp_path / f"train-{k}.tfrecord").write_bytes(
            _oracle.build_file([example(10 * k + j) for j in range(3)])
        )
    (tmp_path / "other.tfrecord").write_bytes(_oracle.build_file([example(99)]))
    return tmp_path


def ids(records):
    return [int(tfrec_fast.parse_example(r, {"i": FixedLen((), "int64")})["i"]) for r in records]


EXPECTED = [0, 1, 2, 10, 11, 12, 20, 21, 22]


# ---- globs ---------------------------------------------------------------------------------------


def test_read_records_glob_sorted(shards):
    assert ids(tfrec_fast.read_records(str(shards / "train-*.tfrecord"))) == EXPECTED
    # a pattern in a list, and a pathlib pattern
    assert ids(
        tfrec_fast.read_records([shards / "train-?.tfrecord", str(shards / "other.tfrecord")])
    ) == EXPECTED + [99]


def test_read_examples_glob(shards):
    batches = list(
        tfrec_fast.read_examples(
            str(shards / "train-*"), {"i": FixedLen((), "int64")}, batch_size=4
        )
    )
    assert [int(v) for b in batches for v in b["i"]] == EXPECTED


def test_count_records_glob(shards):
    assert tfrec_fast.count_records(str(shards / "train-*.tfrecord")) == 9
    assert tfrec_fast.count_records([str(shards / "*.tfrecord")]) == 10


def test_single_file_readers_take_a_pattern_matching_one(shards):
    with tfrec_fast.TFRecordReader(str(shards / "train-1*")) as reader:
        assert ids(reader) == [10, 11, 12]
        assert reader.name == str(shards / "train-1.tfrecord")
    offsets, _ = tfrec_fast.create_index(str(shards / "train-1*"))
    assert len(offsets) == 3
    assert len(tfrec_fast.IndexedTFRecordReader(str(shards / "oth*"))) == 1


def test_single_file_readers_refuse_a_pattern_matching_several(shards):
    pattern = str(shards / "train-*")
    for open_one in (
        tfrec_fast.TFRecordReader,
        tfrec_fast.create_index,
        tfrec_fast.IndexedTFRecordReader,
    ):
        with pytest.raises(ValueError, match=r"matches 3 files.*read_records"):
            open_one(pattern)
    with pytest.raises(TypeError, match="read_records"):
        tfrec_fast.TFRecordReader([str(shards / "train-0.tfrecord")])


@pytest.mark.parametrize(
    "call",
    [
        lambda p: list(tfrec_fast.read_records(p)),
        lambda p: list(tfrec_fast.read_records([p])),
        lambda p: list(tfrec_fast.read_examples(p, ["i"])),
        lambda p: tfrec_fast.count_records(p),
        lambda p: tfrec_fast.TFRecordReader(p),
        lambda p: tfrec_fast.create_index(p),
        lambda p: tfrec_fast.IndexedTFRecordReader(p),
        lambda p: _loader.expand_paths(p),
    ],
    ids=[
        "read_records",
        "list",
        "read_examples",
        "count_records",
        "TFRecordReader",
        "create_index",
        "IndexedTFRecordReader",
        "expand_paths",
    ],
)
def test_pattern_matching_nothing(shards, call):
    pattern = str(shards / "valid-*.tfrecord")
    with pytest.raises(FileNotFoundError) as info:
        call(pattern)
    assert info.value.filename == pattern
    assert pattern in str(info.value) and "no file matches" in str(info.value)


def test_a_literal_path_wins_over_glob_characters(tmp_path):
    literal = tmp_path / "data[1].tfrecord"  # as a pattern it would match data1.tfrecord
    literal.write_bytes(_oracle.build_file([b"literal"]))
    (tmp_path / "data1.tfrecord").write_bytes(_oracle.build_file([b"glob"]))
    assert [bytes(r) for r in tfrec_fast.read_records(str(literal))] == [b"literal"]
    assert [bytes(r) for r in tfrec_fast.TFRecordReader(literal)] == [b"literal"]
    assert _loader.expand_paths(str(literal)) == [str(literal)]
    assert tfrec_fast.count_records(str(tmp_path / "data?.tfrecord")) == 1


# ---- compression="auto" --------------------------------------------------------------------------


def compressed(kind, data):
    return {"none": data, "gzip": gzip.compress(data), "zlib": zlib.compress(data)}[kind]


@pytest.mark.parametrize("kind", ["none", "gzip", "zlib"])
def test_auto_detects_paths_memory_and_files(tmp_path, kind):
    raw = compressed(kind, _oracle.build_file([example(i) for i in range(5)]))
    path = tmp_path / f"f.{kind}"
    path.write_bytes(raw)
    assert ids(tfrec_fast.read_records(path, "auto")) == list(range(5))
    assert ids(tfrec_fast.read_records(raw, "AUTO")) == list(range(5))
    assert tfrec_fast.count_records(str(path), compression="auto") == 5
    with open(path, "rb") as f:
        f.read(0)
        with tfrec_fast.TFRecordReader(f, "auto") as reader:
            assert ids(reader) == list(range(5))
            assert reader.compression == ("" if kind == "none" else kind)
    batches = list(tfrec_fast.read_examples(path, {"i": FixedLen((), "int64")}, compression="auto"))
    assert batches[0]["i"].tolist() == list(range(5))


def test_auto_per_file_in_a_list(tmp_path):
    data = _oracle.build_file([example(1)])
    for kind in ("none", "gzip", "zlib"):
        (tmp_path / f"{kind}.tfrecord").write_bytes(compressed(kind, data))
    assert ids(tfrec_fast.read_records(str(tmp_path / "*.tfrecord"), "auto")) == [1, 1, 1]


@pytest.mark.parametrize("kind", ["none", "gzip", "zlib"])
def test_auto_on_a_pipe_loses_nothing(kind):
    """A non-seekable stream: its first bytes are read to tell the compression, then replayed."""
    raw = compressed(kind, _oracle.build_file([example(i) for i in range(200)]))
    read_fd, write_fd = os.pipe()

    def feed():
        try:
            with os.fdopen(write_fd, "wb") as w:
                for i in range(0, len(raw), 5):  # tiny writes: short reads on the other side
                    w.write(raw[i : i + 5])
                    w.flush()
        except BrokenPipeError:  # the reader failed and closed its end: the assert says how
            pass

    feeder = threading.Thread(target=feed)
    feeder.start()
    with os.fdopen(read_fd, "rb", buffering=0) as r:
        got = ids(tfrec_fast.read_records(r, "auto"))
    feeder.join()
    assert got == list(range(200))


@pytest.mark.parametrize("kind", ["gzip", "zlib"])
def test_compressed_file_read_as_plain_says_so(tmp_path, kind):
    path = tmp_path / "f.tfrecord"
    path.write_bytes(compressed(kind, _oracle.build_file([example(i) for i in range(5)])))
    hint = f"the file starts like a {kind} stream: pass compression='{kind}' or 'auto'"
    attempts = [
        lambda: list(tfrec_fast.read_records(path)),
        lambda: tfrec_fast.count_records(path),
        lambda: tfrec_fast.TFRecordReader(path).read_batch(),
        lambda: next(tfrec_fast.TFRecordReader(path)),
        lambda: list(tfrec_fast.TFRecordReader(path.read_bytes())),
    ]
    for attempt in attempts:
        with pytest.raises(tfrec_fast.DataLossError) as info:
            attempt()
        assert hint in str(info.value)
        assert info.value.path in (str(path), "<memory>") and info.value.offset == 0


class OneByteReads(io.RawIOBase):
    """A file-like whose reads return one byte each (a pipe fed slowly)."""

    def __init__(self, data):
        self._data = data
        self._pos = 0

    def readable(self):
        return True

    def readinto(self, b):
        if self._pos >= len(self._data):
            return 0
        b[0] = self._data[self._pos]
        self._pos += 1
        return 1


@pytest.mark.parametrize("kind", ["gzip", "zlib"])
def test_compression_hint_when_the_first_read_brings_one_byte(kind):
    data = compressed(kind, _oracle.build_file([example(i) for i in range(5)]))
    with pytest.raises(tfrec_fast.DataLossError) as info:
        list(tfrec_fast.read_records(OneByteReads(data)))
    assert f"pass compression='{kind}' or 'auto'" in str(info.value)


def test_plain_file_errors_carry_no_compression_hint(tmp_path):
    path = tmp_path / "f.tfrecord"
    path.write_bytes(_oracle.build_file([b"x" * 50])[:-3])
    with pytest.raises(tfrec_fast.DataLossError) as info:
        list(tfrec_fast.read_records(path))
    assert "starts like" not in str(info.value)


# ---- typed errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda s: list(tfrec_fast.read_records(s)),
        lambda s: tfrec_fast.count_records(s),
        lambda s: list(tfrec_fast.read_examples(s, ["i"])),
        lambda s: tfrec_fast.TFRecordReader(s),
        lambda s: list(tfrec_fast.read_records([s])),
    ],
    ids=["read_records", "count_records", "read_examples", "TFRecordReader", "list"],
)
def test_none_as_a_path(call):
    with pytest.raises(TypeError, match=r"path.*(bytes-like|file-like)"):
        call(None)


def test_text_mode_files(tmp_path):
    path = tmp_path / "f.tfrecord"
    path.write_bytes(_oracle.build_file([b"x"]))
    with open(path) as text:
        for call in (
            tfrec_fast.TFRecordReader,
            lambda s: list(tfrec_fast.read_records(s)),
            tfrec_fast.count_records,
        ):
            with pytest.raises(TypeError, match="open it in binary mode"):
                call(text)
    with open(tmp_path / "out", "w") as text:
        with pytest.raises(TypeError, match="open it in binary mode"):
            tfrec_fast.TFRecordWriter(text)
    with pytest.raises(TypeError, match="binary mode"):
        tfrec_fast.TFRecordReader(io.StringIO("text"))


def test_unknown_compression_lists_the_choices(tmp_path):
    for call in (
        lambda: tfrec_fast.TFRecordReader(b"", "bz2"),
        lambda: list(tfrec_fast.read_records(b"", "bz2")),
        lambda: tfrec_fast.count_records(b"", "bz2"),
    ):
        with pytest.raises(ValueError) as info:
            call()
        assert all(name in str(info.value) for name in ("'bz2'", "'gzip'", "'zlib'", "'auto'"))
    with pytest.raises(ValueError, match="for reading") as info:
        tfrec_fast.TFRecordWriter(tmp_path / "out", "auto")
    assert "'gzip'" in str(info.value)
    with pytest.raises(ValueError, match="for reading"):
        tfrec_fast.ShardedWriter(tmp_path / "shards", "x", compression="auto")
    assert not (tmp_path / "out").exists() and not (tmp_path / "shards").exists()
    with pytest.raises(TypeError, match="'gzip'"):
        tfrec_fast.TFRecordReader(b"", 1)


# ---- the storage layer's Locations for local files ------------------------------------------------


def test_local_locations_name_compare_pickle_and_stat(tmp_path):
    import pickle

    from tfrec_fast import storage

    path = tmp_path / "a.tfrecord"
    path.write_bytes(_oracle.build_file([example(1)]))
    location = storage.resolve(path)
    assert location.url == location.os_path == str(path) and location.name == str(path)
    assert storage.resolve(path.as_uri()) == location  # file:// URLs are local paths
    assert location.same_file(storage.resolve(os.path.join(str(tmp_path), ".", "a.tfrecord")))
    assert location.with_suffix(".idx").url == str(path) + ".idx"
    assert location.parent.url == str(tmp_path) and location.basename == "a.tfrecord"
    again = pickle.loads(pickle.dumps(location))
    assert again == location and again.stat() == location.stat()
    stat = location.stat()
    assert stat.size == path.stat().st_size and stat.version
    path.write_bytes(_oracle.build_file([example(1), example(2)]))
    assert location.stat(refresh=True).differs(stat)
    assert sorted([storage.resolve(tmp_path / "b"), location]) == [
        location,
        storage.resolve(tmp_path / "b"),
    ]


def test_options_for_and_resolve_beside(tmp_path):
    from tfrec_fast import storage

    options = {"anon": True, "retries": 2}
    assert storage.options_for("s3://bucket/x", options) == options
    assert storage.options_for(str(tmp_path / "x"), options) == {"retries": 2}
    assert storage.options_for(str(tmp_path / "x"), {"anon": True}) is None
    beside = storage.resolve_beside(str(tmp_path / "x.idx"), options)  # local: fsspec's keys left
    assert beside.os_path == str(tmp_path / "x.idx")
    with pytest.raises(ValueError, match="storage_options are for URLs"):
        storage.resolve(str(tmp_path / "x"), {"anon": True})


def test_local_writes_publish_whole_or_not_at_all(tmp_path):
    from tfrec_fast import storage

    target = storage.resolve(tmp_path / "out.bin")
    out = target.open_output()
    out.write(b"half")
    assert not os.path.exists(target.os_path)  # nothing under the name before close()
    out.discard()
    assert os.listdir(tmp_path) == []  # and nothing left after discard()
    out = target.open_output()
    out.write(b"whole")
    out.close()
    assert target.read() == b"whole" and os.listdir(tmp_path) == ["out.bin"]
    target.write_bytes(b"replaced", sync=True)
    assert target.read(2, 5) == b"pla"
