"""ShardedWriter and shard manifests: naming, sharding modes, crash safety, overwrite, specs."""

from __future__ import annotations

import json
import os
import pathlib
import random
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrec_fast
from tfrec_fast import sharded
from tfrec_fast.index import write_index
from tfrec_fast.sharded import (
    DEFAULT_SHARD_BYTES,
    ShardedWriter,
    read_manifest,
    spec_from_json,
    spec_to_json,
)


def records_of(path, compression=None) -> list:
    return [bytes(r) for r in tfrec_fast.read_records(path, compression)]


def framed(records) -> int:
    return sum(len(r) + 16 for r in records)


def visible(directory) -> list:
    return sorted(name for name in os.listdir(directory) if not name.startswith("."))


def hidden(directory) -> list:
    return sorted(name for name in os.listdir(directory) if name.startswith("."))


def payloads(n, seed=0, max_len=120) -> list:
    rnd = random.Random(seed)
    return [rnd.randbytes(rnd.randrange(max_len)) for _ in range(n)]


# ---- naming ------------------------------------------------------------------------------------


def test_prefix_names_and_creates_directory(tmp_path):
    out = tmp_path / "new" / "dir"
    with ShardedWriter(out, "train", num_shards=3) as w:
        w.write(b"x")
    assert w.shards == [str(out / f"train-{i:05d}-of-00003.tfrecord") for i in range(3)]
    assert visible(out) == [f"train-{i:05d}-of-00003.tfrecord" for i in range(3)] + [
        "train.manifest.json"
    ]
    assert w.manifest_path == str(out / "train.manifest.json")
    assert hidden(out) == []


@pytest.mark.parametrize("suffix", ["", ".rec", ".tfrecord.gz"])
def test_prefix_suffix(tmp_path, suffix):
    with ShardedWriter(tmp_path, "data", num_shards=2, suffix=suffix) as w:
        pass
    assert [os.path.basename(p) for p in w.shards] == [
        f"data-00000-of-00002{suffix}",
        f"data-00001-of-00002{suffix}",
    ]


@pytest.mark.parametrize(
    "pattern, names, manifest",
    [
        (
            "train-%05d-of-%05d.tfrecord",
            ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"],
            "train.manifest.json",
        ),
        ("shard_%d_of_%d.rec", ["shard_0_of_2.rec", "shard_1_of_2.rec"], "shard.manifest.json"),
        ("%03d-%03d", ["000-002", "001-002"], "shards.manifest.json"),
        ("100%%-%d-%d.bin", ["100%-0-2.bin", "100%-1-2.bin"], "100%.manifest.json"),
    ],
)
def test_pattern_names(tmp_path, pattern, names, manifest):
    with ShardedWriter(str(tmp_path / "out" / pattern), num_shards=2) as w:
        w.write_batch([b"a", b"b", b"c"])
    assert [os.path.basename(p) for p in w.shards] == names
    assert os.path.basename(w.manifest_path) == manifest
    assert visible(tmp_path / "out") == sorted(names + [manifest])
    assert [records_of(p) for p in w.shards] == [[b"a", b"c"], [b"b"]]


@pytest.mark.parametrize(
    "pattern",
    [
        "train.tfrecord",
        "train-%05d.tfrecord",
        "train-%d-%d-%d",
        "train-%s-of-%d",
        "train-%05d-of-%05d-%",
        "50%-%d-of-%d",
        "train-%x-of-%d",
        "dir-%d/train-%d",
    ],
)
def test_bad_patterns(tmp_path, pattern):
    with pytest.raises(ValueError, match="pattern|field"):
        ShardedWriter(str(tmp_path / pattern))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("prefix", ["", "a/b", ".."])
def test_bad_prefix(tmp_path, prefix):
    with pytest.raises(ValueError, match="prefix"):
        ShardedWriter(tmp_path, prefix)


def test_bad_suffix(tmp_path):
    with pytest.raises(ValueError, match="suffix"):
        ShardedWriter(tmp_path, "train", suffix="x/y")


# ---- sharding ----------------------------------------------------------------------------------


def test_round_robin_order(tmp_path):
    data = payloads(23)
    with ShardedWriter(tmp_path, "rr", num_shards=4) as w:
        w.write(data[0])
        w.write_batch(tfrec_fast.RecordBatch.from_records(data[1:9]))
        w.write_batch(iter(data[9:20]))
        for record in data[20:]:
            w.write(bytearray(record))
    assert len(w.shards) == 4
    for s, path in enumerate(w.shards):
        assert records_of(path) == data[s::4]
    assert w.records_written == 23 and w.bytes_written == framed(data)


def test_round_robin_writes_empty_shards(tmp_path):
    with ShardedWriter(tmp_path, "rr", num_shards=5) as w:
        w.write_batch([b"one", b"two"])
    assert [records_of(p) for p in w.shards] == [[b"one"], [b"two"], [], [], []]
    manifest = read_manifest(w.manifest_path)
    assert [s["records"] for s in manifest["shards"]] == [1, 1, 0, 0, 0]


def test_round_robin_no_records(tmp_path):
    with ShardedWriter(tmp_path, "rr", num_shards=3) as w:
        pass
    assert [records_of(p) for p in w.shards] == [[], [], []]


def split_into_shards(paths, compression=None) -> list:
    return [records_of(p, compression) for p in paths]


def check_cuts(shards, max_bytes=None, max_records=None):
    """Every shard within the limits (a lone oversized record excepted), none empty, and each
    cut was needed: the next shard's first record did not fit in the shard before."""
    max_bytes = max_bytes or float("inf")
    max_records = max_records or float("inf")
    for shard in shards:
        assert shard
        assert len(shard) <= max_records
        assert framed(shard) <= max_bytes or len(shard) == 1
    for a, b in zip(shards, shards[1:]):
        assert framed(a) + len(b[0]) + 16 > max_bytes or len(a) + 1 > max_records


def test_size_cutting_renames_with_total(tmp_path):
    data = payloads(200, seed=1)
    with ShardedWriter(tmp_path, "s", max_bytes_per_shard=1000) as w:
        w.write_batch(data[:150])
        for record in data[150:]:
            w.write(record)
    n = len(w.shards)
    assert n > 5
    assert visible(tmp_path) == [f"s-{i:05d}-of-{n:05d}.tfrecord" for i in range(n)] + [
        "s.manifest.json"
    ]
    shards = split_into_shards(w.shards)
    assert sum(shards, []) == data
    check_cuts(shards, max_bytes=1000)


def test_oversized_record_gets_its_own_shard(tmp_path):
    data = [b"a" * 10, b"b" * 10, b"c" * 500, b"d" * 10, b"e" * 600, b"f" * 600, b"g"]
    with ShardedWriter(tmp_path, "s", max_bytes_per_shard=100) as w:
        w.write_batch(data[:4])
        w.write(data[4])
        w.write_batch(data[5:])
    assert split_into_shards(w.shards) == [
        data[:2],
        [data[2]],
        [data[3]],
        [data[4]],
        [data[5]],
        [data[6]],
    ]


def test_exact_fit(tmp_path):
    data = [b"x" * 34] * 6  # 50 framed bytes each
    with ShardedWriter(tmp_path, "s", max_bytes_per_shard=100) as w:
        w.write_batch(data)
    assert [len(s) for s in split_into_shards(w.shards)] == [2, 2, 2]


def test_records_per_shard(tmp_path):
    data = payloads(10, seed=2)
    with ShardedWriter(tmp_path, "r", records_per_shard=3) as w:
        w.write_batch(data[:4])
        w.write(data[4])
        w.write_batch(data[5:])
    assert split_into_shards(w.shards) == [data[0:3], data[3:6], data[6:9], data[9:]]
    assert os.path.basename(w.shards[-1]) == "r-00003-of-00004.tfrecord"


def test_both_limits(tmp_path):
    data = [b"x" * 84] * 5 + [b""] * 7  # 100 framed bytes, then 16
    with ShardedWriter(tmp_path, "r", records_per_shard=4, max_bytes_per_shard=250) as w:
        w.write_batch(data)
    shards = split_into_shards(w.shards)
    assert [len(s) for s in shards] == [2, 2, 4, 4]
    check_cuts(shards, 250, 4)


def test_size_cut_output_without_records_is_one_empty_shard(tmp_path):
    with ShardedWriter(tmp_path, "e", max_bytes_per_shard=100) as w:
        w.write_batch([])
    assert visible(tmp_path) == ["e-00000-of-00001.tfrecord", "e.manifest.json"]
    assert records_of(w.shards[0]) == []


def test_default_shard_size(tmp_path):
    assert DEFAULT_SHARD_BYTES == 128 << 20
    data = payloads(50)
    with ShardedWriter(tmp_path, "d") as w:
        w.write_batch(data)
    assert split_into_shards(w.shards) == [data]


@pytest.mark.parametrize("compression, name", [("gzip", "GZIP"), ("ZLIB", "ZLIB")])
def test_compressed_shards(tmp_path, compression, name):
    data = payloads(40, seed=3)
    with ShardedWriter(
        tmp_path, "c", max_bytes_per_shard=800, compression=compression, level=9
    ) as w:
        w.write_batch(data)
    shards = split_into_shards(w.shards, compression)
    assert sum(shards, []) == data
    check_cuts(shards, max_bytes=800)  # the limit counts uncompressed bytes
    manifest = read_manifest(w.manifest_path)
    assert manifest["compression"] == name
    assert [s["bytes"] for s in manifest["shards"]] == [os.path.getsize(p) for p in w.shards]
    assert tfrec_fast.records.detect_compression(w.shards[0]) == compression.lower()


def test_compressed_round_robin(tmp_path):
    data = payloads(9)
    with ShardedWriter(tmp_path, "c", num_shards=4, compression="gzip") as w:
        w.write_batch(data)
    assert split_into_shards(w.shards, "gzip") == [data[0::4], data[1::4], data[2::4], data[3::4]]


# ---- index files -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [{"num_shards": 3}, {"max_bytes_per_shard": 500}])
def test_index_files(tmp_path, mode):
    with ShardedWriter(tmp_path, "i", index=True, **mode) as w:
        w.write_batch(payloads(30, seed=4))
    manifest = read_manifest(w.manifest_path)
    for path, entry in zip(w.shards, manifest["shards"]):
        assert entry["index"] == os.path.basename(path) + ".idx"
        offsets, sizes = tfrec_fast.load_index(path + ".idx")
        want_offsets, want_sizes = tfrec_fast.create_index(path)
        np.testing.assert_array_equal(offsets, want_offsets)
        np.testing.assert_array_equal(sizes, want_sizes)
        assert len(offsets) == entry["records"]
        with tfrec_fast.IndexedTFRecordReader(path, path + ".idx") as reader:
            assert [bytes(r) for r in reader.get_batch(range(len(reader)))] == records_of(path)


def test_index_needs_uncompressed(tmp_path):
    with pytest.raises(ValueError, match="index"):
        ShardedWriter(tmp_path, "i", index=True, compression="gzip")
    assert os.listdir(tmp_path) == []


# ---- manifest and spec -------------------------------------------------------------------------


def test_manifest_fields(tmp_path):
    data = payloads(25, seed=5)
    with ShardedWriter(tmp_path, "m", records_per_shard=10) as w:
        w.write_batch(data)
    with open(w.manifest_path) as f:
        raw = json.load(f)
    assert raw["format"] == "tfrec_fast.shards" and raw["version"] == 1
    assert raw["created_by"] == f"tfrec_fast {tfrec_fast.__version__}"
    assert raw["compression"] == "" and raw["spec"] is None
    assert raw["total_records"] == 25
    assert raw["shards"] == [
        {"file": os.path.basename(p), "records": n, "bytes": os.path.getsize(p), "index": None}
        for p, n in zip(w.shards, [10, 10, 5])
    ]
    assert raw["total_bytes"] == sum(os.path.getsize(p) for p in w.shards)
    manifest = read_manifest(w.manifest_path)
    assert manifest["paths"] == w.shards
    assert tfrec_fast.count_records(manifest["paths"]) == 25


def test_manifest_disabled(tmp_path):
    with ShardedWriter(tmp_path, "m", num_shards=2, manifest=False) as w:
        w.write(b"x")
    assert w.manifest_path is None
    assert visible(tmp_path) == ["m-00000-of-00002.tfrecord", "m-00001-of-00002.tfrecord"]


def test_manifest_at_custom_path(tmp_path):
    where = tmp_path / "meta" / "set.json"
    with ShardedWriter(tmp_path / "data", "m", num_shards=2, manifest=where) as w:
        w.write_batch([b"a", b"b", b"c"])
    assert w.manifest_path == str(where)
    assert visible(tmp_path / "data") == ["m-00000-of-00002.tfrecord", "m-00001-of-00002.tfrecord"]
    manifest = read_manifest(where)
    assert manifest["shards"][0]["file"] == os.path.join("..", "data", "m-00000-of-00002.tfrecord")
    assert manifest["paths"] == w.shards
    assert split_into_shards(manifest["paths"]) == [[b"a", b"c"], [b"b"]]


def test_read_manifest_rejects_other_files(tmp_path):
    (tmp_path / "a.json").write_text('{"format": "something else"}')
    (tmp_path / "b.json").write_text("not json")
    (tmp_path / "c.json").write_text('{"format": "tfrec_fast.shards", "version": 2, "shards": []}')
    for name in ("a.json", "b.json"):
        with pytest.raises(ValueError, match="not a tfrec_fast shard manifest"):
            read_manifest(tmp_path / name)
    with pytest.raises(ValueError, match="version 2"):
        read_manifest(tmp_path / "c.json")


SPEC = {
    "label": tfrec_fast.FixedLen((), "int64", default=-1),
    "box": tfrec_fast.FixedLen((2, 2), "float32", default=0.5),
    "name": tfrec_fast.FixedLen((), "bytes", default="none"),
    "pixels": tfrec_fast.FixedLen((2, 3), "uint8"),
    "wide": tfrec_fast.FixedLen((2,), "int64", from_bytes=True),
    "tags": tfrec_fast.VarLen("bytes"),
    "scores": tfrec_fast.VarLen("float32"),
    "ids": "int",
}


def test_spec_round_trip_and_parse(tmp_path):
    n = 6
    columns = {
        "label": np.arange(n),
        "box": np.random.default_rng(0).random((n, 2, 2), dtype=np.float32),
        "name": [f"item{i}".encode() for i in range(n)],
        "pixels": tfrec_fast.Bytes(np.arange(n * 6, dtype=np.uint8).reshape(n, 2, 3)),
        "wide": tfrec_fast.Bytes(np.arange(n * 2, dtype=np.int64).reshape(n, 2)),
        "tags": [[b"a"] * i for i in range(n)],
        "scores": [[0.25] * (i % 3) for i in range(n)],
        "ids": [list(range(i)) for i in range(n)],
    }
    with ShardedWriter(tmp_path, "ex", records_per_shard=4, spec=SPEC) as w:
        w.write_examples(columns)
        w.write_example(
            {
                "pixels": tfrec_fast.Bytes(np.zeros((2, 3), np.uint8)),
                "wide": tfrec_fast.Bytes(np.array([7, 8], np.int64)),
            }
        )
    manifest = read_manifest(w.manifest_path)
    rebuilt = manifest["spec"]
    assert list(rebuilt) == list(SPEC)
    assert spec_to_json(rebuilt) == spec_to_json(SPEC)
    assert type(rebuilt["ids"]) is tfrec_fast.VarLen
    records = [r for p in manifest["paths"] for r in records_of(p)]
    assert len(records) == n + 1
    want = tfrec_fast.parse_examples(records, SPEC)
    got = tfrec_fast.parse_examples(records, rebuilt)
    for key in SPEC:
        a, b = want[key], got[key]
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
        else:
            assert a.to_list() == b.to_list()
    assert got["label"].tolist() == list(range(n)) + [-1]  # the default survived
    assert got["name"].to_list()[-1] == b"none"
    np.testing.assert_array_equal(got["box"][-1], np.full((2, 2), 0.5, np.float32))


def test_spec_json_forms():
    spec = {
        "f": tfrec_fast.FixedLen([3], "float32", default=[0.1, 0.2, 0.3]),
        "h": tfrec_fast.FixedLen((), "float16", default=1.5),
        "big": tfrec_fast.FixedLen((2,), ">i4"),
        "named": None,
        "steps": tfrec_fast.FixedLenSequence((2,), "float32"),
        "words": tfrec_fast.VarLenSequence("bytes"),
    }
    data = spec_to_json(spec)
    assert data["f"] == {
        "kind": "FixedLen",
        "shape": [3],
        "dtype": "float32",
        "from_bytes": False,
        "default": np.float32([0.1, 0.2, 0.3]).tolist(),
    }
    assert data["h"]["dtype"] == "float16" and data["h"]["from_bytes"] is True
    assert data["big"]["dtype"] == ">i4"
    assert data["named"] is None
    assert data["steps"] == {"kind": "FixedLenSequence", "shape": [2], "dtype": "float32"}
    assert data["words"] == {"kind": "VarLenSequence", "dtype": "bytes"}
    assert json.loads(json.dumps(data)) == data
    rebuilt = spec_from_json(data)
    assert spec_to_json(rebuilt) == data
    assert rebuilt["big"].dtype == np.dtype(">i4")
    assert isinstance(rebuilt["steps"], tfrec_fast.FixedLenSequence)
    assert spec_to_json(["a", "b"]) == {"a": None, "b": None}
    assert spec_to_json(None) is None and spec_from_json(None) is None
    with pytest.raises(ValueError, match="unknown spec kind"):
        spec_from_json({"x": {"kind": "Sparse"}})


def test_bad_spec_fails_at_construction(tmp_path):
    with pytest.raises(TypeError, match="unsupported spec"):
        ShardedWriter(tmp_path, "s", spec={"x": 3})
    assert os.listdir(tmp_path) == []


# ---- crash safety ------------------------------------------------------------------------------


class Boom(Exception):
    pass


@pytest.mark.parametrize(
    "mode",
    [
        {"num_shards": 3},
        {"max_bytes_per_shard": 300},
        {"records_per_shard": 4, "compression": "gzip"},
    ],
)
def test_exception_leaves_only_temporaries(tmp_path, mode):
    data = payloads(20, seed=6)
    compression = mode.get("compression")
    with pytest.raises(Boom):
        with ShardedWriter(tmp_path, "t", index=not compression, **mode) as w:
            w.write_batch(data[:15])
            for record in data[15:]:
                w.write(record)
            raise Boom
    assert visible(tmp_path) == []  # no shard, index or manifest under a final name
    partial = w.partial_paths
    assert partial and sorted(os.path.basename(p) for p in partial) == hidden(tmp_path)
    for path in partial:
        name = os.path.basename(path)
        assert name.startswith(".t-") and ".tfrecord.tmp-" in name
        assert os.path.dirname(path) == str(tmp_path)
    got = split_into_shards(partial, compression)
    if "num_shards" in mode:
        assert got == [data[s::3] for s in range(3)]
    else:
        assert sum(got, []) == data
    assert w.shards == []
    with pytest.raises(ValueError, match="closed"):
        w.write(b"more")
    with pytest.raises(RuntimeError):
        w.close()


def test_temporaries_while_writing(tmp_path):
    w = ShardedWriter(tmp_path, "t", records_per_shard=2)
    w.write_batch([b"1", b"2", b"3"])
    assert visible(tmp_path) == []
    assert [os.path.basename(p) for p in w.partial_paths] == [
        f".t-0000{i}.tfrecord.tmp-{w.partial_paths[0].rsplit('-', 1)[1]}" for i in range(2)
    ]
    assert w.close() == [str(tmp_path / f"t-0000{i}-of-00002.tfrecord") for i in range(2)]
    assert w.partial_paths == [] and hidden(tmp_path) == []


class FailingWriter(tfrec_fast.TFRecordWriter):
    """Fails like a full disk on the fourth write call."""

    calls = 0

    def write(self, record):
        FailingWriter.calls += 1
        if FailingWriter.calls == 4:
            raise OSError(28, "No space left on device")
        super().write(record)


def test_close_after_failed_write(tmp_path, monkeypatch):
    monkeypatch.setattr(sharded, "TFRecordWriter", FailingWriter)
    FailingWriter.calls = 0
    w = ShardedWriter(tmp_path, "f", num_shards=2)
    for record in (b"a", b"b", b"c"):
        w.write(record)
    with pytest.raises(OSError, match="No space"):
        w.write(b"d")
    with pytest.raises(RuntimeError, match="earlier write"):
        w.write(b"e")
    with pytest.raises(RuntimeError, match="not finished") as info:
        w.close()
    assert isinstance(info.value.__cause__, OSError)
    assert visible(tmp_path) == []
    assert split_into_shards(w.partial_paths) == [[b"a", b"c"], [b"b"]]


def test_failed_write_inside_with(tmp_path, monkeypatch):
    monkeypatch.setattr(sharded, "TFRecordWriter", FailingWriter)
    FailingWriter.calls = 0
    with pytest.raises(OSError, match="No space"):
        with ShardedWriter(tmp_path, "f", max_bytes_per_shard=1000) as w:
            for record in (b"a", b"b", b"c", b"d"):
                w.write(record)
    assert visible(tmp_path) == []
    assert split_into_shards(w.partial_paths) == [[b"a", b"b", b"c"]]


def test_failure_while_indexing_leaves_only_temporaries(tmp_path, monkeypatch):
    calls = []

    def failing_write_index(index_path, offsets, sizes, **kwargs):
        calls.append(index_path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return write_index(index_path, offsets, sizes, **kwargs)

    monkeypatch.setattr(sharded, "write_index", failing_write_index)
    data = payloads(9)
    with pytest.raises(OSError, match="No space"):
        with ShardedWriter(tmp_path, "i", num_shards=3, index=True) as w:
            w.write_batch(data)
    assert visible(tmp_path) == []
    assert hidden(tmp_path) == sorted(os.path.basename(p) for p in w.partial_paths)  # no .idx
    assert split_into_shards(w.partial_paths) == [data[0::3], data[1::3], data[2::3]]


def test_failure_after_renaming_reports_final_paths(tmp_path, monkeypatch):
    def no_manifest(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sharded, "write_manifest", no_manifest)
    w = ShardedWriter(tmp_path, "m", num_shards=2)
    w.write_batch([b"a", b"b"])
    with pytest.raises(OSError, match="No space"):
        w.close()
    assert visible(tmp_path) == ["m-00000-of-00002.tfrecord", "m-00001-of-00002.tfrecord"]
    assert w.partial_paths == [str(tmp_path / n) for n in visible(tmp_path)]
    assert w.shards == []  # not a finished output: no manifest


def test_bad_record_is_not_a_failure(tmp_path):
    with ShardedWriter(tmp_path, "b", num_shards=2) as w:
        w.write(b"ok")
        with pytest.raises(TypeError):
            w.write("not bytes")
        with pytest.raises(TypeError):
            w.write_example({"x": None})
        w.write(b"still ok")
    assert split_into_shards(w.shards) == [[b"ok"], [b"still ok"]]


# ---- existing output ---------------------------------------------------------------------------


def make_old_output(directory):
    with ShardedWriter(directory, "train", num_shards=10, index=True) as w:
        w.write_batch(payloads(20))
    return w.shards


@pytest.mark.parametrize(
    "existing",
    [
        "train-00007-of-00010.tfrecord",
        "train-3-of-4.tfrecord",
        "train-00000-of-00001.tfrecord.idx",
        "train.manifest.json",
    ],
)
def test_refuses_existing_output(tmp_path, existing):
    (tmp_path / existing).write_bytes(b"old")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        ShardedWriter(tmp_path, "train", num_shards=2)
    assert visible(tmp_path) == [existing]


def test_refuses_existing_custom_manifest(tmp_path):
    (tmp_path / "m.json").write_text("{}")
    with pytest.raises(FileExistsError):
        ShardedWriter(tmp_path / "d", "train", manifest=tmp_path / "m.json")


def test_unrelated_files_do_not_conflict(tmp_path):
    for name in (
        "train.txt",
        "val-00000-of-00001.tfrecord",
        "train-00000-of-00001.rec",
        "xtrain-00000-of-00001.tfrecord",
        ".train-00000.tfrecord.tmp-deadbeef",
    ):
        (tmp_path / name).write_bytes(b"other")
    with ShardedWriter(tmp_path, "train", num_shards=1) as w:
        w.write(b"x")
    assert (tmp_path / "train-00000-of-00001.tfrecord").exists()


def test_refuses_output_that_appeared_while_writing(tmp_path):
    w = ShardedWriter(tmp_path, "train", num_shards=2)
    w.write(b"x")
    (tmp_path / "train-00000-of-00005.tfrecord").write_bytes(b"old")
    with pytest.raises(FileExistsError):
        w.close()
    assert visible(tmp_path) == ["train-00000-of-00005.tfrecord"]
    assert split_into_shards(w.partial_paths) == [[b"x"], []]  # both shards, for the record


def test_overwrite_removes_stale_members(tmp_path):
    make_old_output(tmp_path)
    keep = [".train-00000.tfrecord.tmp-0badc0de", "train.txt", "val-00000-of-00001.tfrecord"]
    for name in keep:
        (tmp_path / name).write_bytes(b"other")
    data = payloads(5)
    with ShardedWriter(tmp_path, "train", num_shards=2, overwrite=True) as w:
        w.write_batch(data)
    assert sorted(os.listdir(tmp_path)) == sorted(
        keep
        + ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord", "train.manifest.json"]
    )
    manifest = read_manifest(w.manifest_path)
    assert manifest["total_records"] == 5 and manifest["paths"] == w.shards


def test_overwrite_same_names_drops_old_indexes(tmp_path):
    make_old_output(tmp_path)
    with ShardedWriter(tmp_path, "train", num_shards=10, overwrite=True, manifest=False) as w:
        w.write(b"new")
    assert visible(tmp_path) == [f"train-{i:05d}-of-00010.tfrecord" for i in range(10)]
    assert records_of(w.shards[0]) == [b"new"]


def test_overwrite_keeps_old_output_when_failing(tmp_path):
    old = make_old_output(tmp_path)
    before = {p: pathlib.Path(p).read_bytes() for p in old}
    with pytest.raises(Boom):
        with ShardedWriter(tmp_path, "train", num_shards=2, overwrite=True) as w:
            w.write(b"new")
            raise Boom
    assert {p: pathlib.Path(p).read_bytes() for p in old} == before
    assert read_manifest(tmp_path / "train.manifest.json")["total_records"] == 20


# ---- arguments and state -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"num_shards": 2, "max_bytes_per_shard": 100}, ValueError),
        ({"num_shards": 2, "records_per_shard": 100}, ValueError),
        ({"num_shards": 0}, ValueError),
        ({"max_bytes_per_shard": -1}, ValueError),
        ({"records_per_shard": 0}, ValueError),
        ({"num_shards": 1.5}, TypeError),
        ({"records_per_shard": True}, TypeError),
        ({"compression": "lz4"}, ValueError),
    ],
)
def test_invalid_arguments(tmp_path, kwargs, error):
    with pytest.raises(error):
        ShardedWriter(tmp_path / "out", "x", **kwargs)
    assert not (tmp_path / "out").exists()


def test_bad_level_fails_at_construction(tmp_path):
    with pytest.raises(ValueError, match="level"):
        ShardedWriter(tmp_path, "x", compression="gzip", level=42)
    assert os.listdir(tmp_path) == []


def test_close_is_idempotent_and_ends_writing(tmp_path):
    w = ShardedWriter(tmp_path, "c", num_shards=2)
    w.write(b"x")
    first = w.close()
    assert w.close() == first == w.shards
    for call in (
        lambda: w.write(b"y"),
        lambda: w.write_batch([b"y"]),
        lambda: w.write_example({"a": 1}),
        lambda: w.write_examples({"a": [1]}),
    ):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_counters(tmp_path):
    data = payloads(30, seed=7)
    with ShardedWriter(tmp_path, "n", max_bytes_per_shard=400, sync=False) as w:
        assert (w.records_written, w.bytes_written) == (0, 0)
        w.write_batch(data[:20])
        assert (w.records_written, w.bytes_written) == (20, framed(data[:20]))
        w.write(data[20])
        w.write_batch(iter(data[21:]))
        assert (w.records_written, w.bytes_written) == (30, framed(data))
        assert w.shards == []
    assert len(w.shards) == len(read_manifest(w.manifest_path)["shards"])


def test_write_example_and_examples(tmp_path):
    with ShardedWriter(tmp_path, "e", num_shards=2) as w:
        w.write_example({"x": 1, "s": b"a"})
        w.write_examples({"x": np.array([2, 3, 4]), "s": [b"b", b"c", b"d"]})
    rows = [tfrec_fast.parse_example(r) for p in w.shards for r in records_of(p)]
    assert rows == [
        {"x": [1], "s": [b"a"]},
        {"x": [3], "s": [b"c"]},
        {"x": [2], "s": [b"b"]},
        {"x": [4], "s": [b"d"]},
    ]


def test_iterable_batches_larger_than_a_chunk(tmp_path):
    data = [i.to_bytes(4, "little") for i in range(sharded._ITERABLE_CHUNK * 2 + 5)]
    with ShardedWriter(tmp_path, "big", records_per_shard=3000, sync=False) as w:
        w.write_batch(x for x in data)
    shards = split_into_shards(w.shards)
    assert sum(shards, []) == data
    check_cuts(shards, max_records=3000)


# ---- property: shards concatenate back to the input --------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(max_size=80), max_size=40),
    max_bytes=st.one_of(st.none(), st.integers(1, 400)),
    max_records=st.one_of(st.none(), st.integers(1, 12)),
    cuts=st.lists(st.integers(0, 40), max_size=4),
)
def test_round_trip_property(records, max_bytes, max_records, cuts):
    with tempfile.TemporaryDirectory() as directory:
        with ShardedWriter(
            directory, "p", max_bytes_per_shard=max_bytes, records_per_shard=max_records, sync=False
        ) as w:
            bounds = sorted({0, len(records), *(c for c in cuts if c < len(records))})
            for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
                if k % 2:  # alternate record by record and batched writes
                    for record in records[a:b]:
                        w.write(record)
                else:
                    w.write_batch(records[a:b])
        n = len(w.shards)
        assert visible(directory) == [f"p-{i:05d}-of-{n:05d}.tfrecord" for i in range(n)] + [
            "p.manifest.json"
        ]
        shards = split_into_shards(w.shards)
        assert sum(shards, []) == records
        if records:
            check_cuts(shards, max_bytes or DEFAULT_SHARD_BYTES, max_records)
        else:
            assert shards == [[]]
        manifest = read_manifest(w.manifest_path)
        assert [s["records"] for s in manifest["shards"]] == [len(s) for s in shards]
