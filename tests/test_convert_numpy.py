"""convert_numpy: arrays of an .npz sharing their first dimension -> one Example per row."""

from __future__ import annotations

import numpy as np
import pytest
from _images import shard_bytes

import tfrec_fast as tfr
from tfrec_fast.convert import arrays as arrays_module
from tfrec_fast.convert import convert_numpy
from tfrec_fast.sharded import read_manifest

N = 60


@pytest.fixture
def npz(tmp_path):
    rng = np.random.default_rng(0)
    data = {
        "images": rng.integers(0, 256, (N, 28, 28), dtype=np.uint8),
        "labels": np.arange(N, dtype=np.int64),
        "vectors": rng.standard_normal((N, 5)).astype(np.float32),
        "scores": rng.standard_normal(N),  # float64: stored as float32
        "flags": rng.integers(0, 2, N).astype(bool),
        "names": np.array([f"row {i} é" for i in range(N)]),
        "pairs": np.array([[b"a%d" % i, b"b%d" % i] for i in range(N)]),
        "wide": rng.integers(-5, 5, (N, 2, 3)).astype(">i4"),  # big-endian: stored little
    }
    path = tmp_path / "mnist_like.npz"
    np.savez(path, **data)
    return path, data


def read_all(manifest_path):
    manifest = read_manifest(manifest_path)
    batches = list(
        tfr.read_examples(
            manifest["paths"],
            manifest["spec"],
            batch_size=N,
            compression=manifest["compression"] or None,
        )
    )
    assert len(batches) == 1
    return manifest, batches[0]


def test_round_trip_every_layout(npz, tmp_path):
    path, data = npz
    summary = convert_numpy(path, tmp_path / "out")
    assert summary.records == N and summary.skipped == []
    assert summary.shards == [str(tmp_path / "out" / "mnist_like-00000-of-00001.tfrecord")]
    manifest, cols = read_all(summary.manifest)
    spec = manifest["spec"]
    np.testing.assert_array_equal(cols["images"], data["images"])
    assert spec["images"].shape == (28, 28) and spec["images"].dtype == np.uint8
    assert (cols["images/shape"] == [28, 28]).all()
    assert cols["images/dtype"].to_list() == [b"uint8"] * N
    np.testing.assert_array_equal(cols["labels"], data["labels"])
    np.testing.assert_array_equal(cols["vectors"], data["vectors"])  # raw float32 bytes
    assert cols["vectors/dtype"].to_list()[0] == b"float32"
    assert cols["scores"].dtype == np.float32
    np.testing.assert_array_equal(cols["scores"], data["scores"].astype(np.float32))
    np.testing.assert_array_equal(cols["flags"], data["flags"].astype(np.int64))
    assert cols["names"].to_list() == [s.encode() for s in data["names"]]
    assert cols["pairs"].to_list() == data["pairs"].tolist()
    assert (cols["pairs/shape"] == [2]).all()
    np.testing.assert_array_equal(cols["wide"], data["wide"])
    assert cols["wide/dtype"].to_list()[0] == b"int32"
    # one Example: the features and kinds documented
    first = tfr.parse_example(next(iter(tfr.read_records(summary.shards))))
    assert first["labels"] == [0] and first["flags"] == [int(data["flags"][0])]
    assert first["images"] == [data["images"][0].tobytes()]
    assert first["images/shape"] == [28, 28] and first["wide/shape"] == [2, 3]
    assert first["wide"] == [data["wide"][0].astype("<i4").tobytes()]


def test_keys_pick_and_order(npz, tmp_path):
    path, data = npz
    summary = convert_numpy(path, tmp_path / "out", keys=["labels", "images"], prefix="mnist")
    spec = read_manifest(summary.manifest)["spec"]
    assert list(spec) == ["labels", "images", "images/shape", "images/dtype"]
    record = next(iter(tfr.read_records(summary.shards)))
    assert list(tfr.parse_example(record)) == sorted(spec)
    with pytest.raises(KeyError, match="no array 'nope'"):
        convert_numpy(path, tmp_path / "out2", keys=["nope"])


def test_mismatched_first_dimensions(tmp_path):
    with pytest.raises(ValueError, match="x has 3, y has 4"):
        convert_numpy({"x": np.zeros(3), "y": np.zeros((4, 2))}, tmp_path / "out")
    with pytest.raises(ValueError, match="scalar"):
        convert_numpy({"x": np.float32(1)}, tmp_path / "out")
    with pytest.raises(ValueError, match="collides"):
        convert_numpy({"x": np.zeros((3, 2)), "x/shape": np.zeros(3)}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_mapping_input_and_shards(tmp_path):
    x = np.arange(N * 4, dtype=np.int16).reshape(N, 4)
    summary = convert_numpy({"x": x}, tmp_path / "out", records_per_shard=25)
    assert [p.rsplit("/", 1)[1] for p in summary.shards] == [
        f"data-{i:05d}-of-00003.tfrecord" for i in range(3)
    ]
    _, cols = read_all(summary.manifest)
    np.testing.assert_array_equal(cols["x"], x)


def test_shuffle_and_threads(npz, tmp_path, monkeypatch):
    path, data = npz
    monkeypatch.setattr(arrays_module, "_CHUNK_BYTES", 2000)  # several chunks of rows
    base = convert_numpy(path, tmp_path / "a", shuffle=True, seed=7, num_shards=3)
    same = convert_numpy(path, tmp_path / "b", shuffle=True, seed=7, num_shards=3, workers=3)
    other = convert_numpy(path, tmp_path / "c", shuffle=True, seed=8, num_shards=3)
    assert shard_bytes(base.shards) == shard_bytes(same.shards)
    assert shard_bytes(base.shards) != shard_bytes(other.shards)
    labels = np.concatenate(
        [
            next(tfr.read_examples(p, {"labels": tfr.FixedLen()}, batch_size=N))["labels"]
            for p in base.shards
        ]
    )
    # round robin over 3 shards: shard k holds written records k, k+3, ...
    written = np.empty(N, np.int64)
    n0, n1 = (N + 2) // 3, (N + 1) // 3
    written[0::3], written[1::3], written[2::3] = (
        labels[:n0],
        labels[n0 : n0 + n1],
        labels[n0 + n1 :],
    )
    assert sorted(written.tolist()) == list(range(N)) and written.tolist() != list(range(N))
    _, cols = read_all(base.manifest)
    np.testing.assert_array_equal(cols["images"], data["images"][cols["labels"]])


def test_compression(npz, tmp_path):
    path, data = npz
    summary = convert_numpy(path, tmp_path / "out", compression="zlib", keys=["images"])
    assert read_manifest(summary.manifest)["compression"] == "ZLIB"
    _, cols = read_all(summary.manifest)
    np.testing.assert_array_equal(cols["images"], data["images"])


def test_single_npy_and_object_arrays_are_refused(tmp_path):
    np.save(tmp_path / "one.npy", np.arange(3))
    with pytest.raises(ValueError, match="single array"):
        convert_numpy(tmp_path / "one.npy", tmp_path / "out")
    np.savez(tmp_path / "obj.npz", x=np.array([{"a": 1}, None], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        convert_numpy(tmp_path / "obj.npz", tmp_path / "out")
    with pytest.raises(ValueError, match="not numeric"):
        convert_numpy({"t": np.array(["2020-01-01"], "datetime64[D]")}, tmp_path / "out")
