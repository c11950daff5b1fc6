"""tfrec_fast.tfds against a dataset built by tensorflow-datasets itself (tests/data/tfds, made
by tools/make_tfds_fixture.py) and the tfds.as_numpy dump of every split (expected.json)."""

import base64
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tfrec_fast.tfds as tfds_fast
from tfrec_fast.errors import ExampleParseError

DATA = Path(__file__).parent / "data" / "tfds"
NAME, VERSION = "tfrec_fast_fixture", "1.0.0"
EXPECTED = json.loads((DATA / "expected.json").read_text())


def from_json(node):
    if "dict" in node:
        return {k: from_json(v) for k, v in node["dict"].items()}
    if "bytes" in node:
        return base64.b64decode(node["bytes"])
    if "objects" in node:
        array = np.empty(len(node["objects"]), object)
        array[:] = [from_json(v) for v in node["objects"]]
        return array.reshape(node["shape"])
    array = np.frombuffer(base64.b64decode(node["data"]), np.dtype(node["dtype"]))
    array = array.reshape(node["shape"])
    return array[()] if node.get("scalar") else array


def assert_same(got, want, where="example"):
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), where
        for key in want:
            assert_same(got[key], want[key], f"{where}/{key}")
    elif isinstance(want, bytes):
        assert isinstance(got, bytes) and got == want, where
    elif isinstance(want, np.generic):
        assert type(got) is type(want) and got == want, (where, got, want)
    else:
        assert isinstance(got, np.ndarray), (where, type(got))
        assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype,
                                                                     got.shape, want.dtype,
                                                                     want.shape)
        assert np.array_equal(got, want), where


@pytest.fixture
def prepared(tmp_path):
    """A copy of the prepared dataset (indexes get written beside the shards)."""
    root = tmp_path / "tensorflow_datasets"
    shutil.copytree(DATA / NAME, root / NAME)
    return root


@pytest.fixture
def directory(prepared):
    return prepared / NAME / VERSION


@pytest.mark.parametrize("split", ["train", "test"])
def test_every_value_equals_tfds_as_numpy(directory, split):
    pytest.importorskip("PIL")
    ds = tfds_fast.open(directory, decode_images=True)
    got = list(ds[split])
    want = [from_json(e) for e in EXPECTED[split]]
    assert len(got) == len(want) == len(ds[split])
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, f"{split}[{i}]")


def test_images_stay_encoded_by_default(directory):
    example = next(iter(tfds_fast.open(directory)["train"]))
    assert isinstance(example["image"], bytes) and example["image"][:4] == b"\x89PNG"
    assert isinstance(example["mask"], bytes)
    clip = example["clip"]  # a Video: one encoded frame per step
    assert clip.dtype == object and all(frame[:4] == b"\x89PNG" for frame in clip)
    want = from_json(EXPECTED["train"][0])
    assert len(clip) == want["clip"].shape[0]
    assert_same(example["packed"], want["packed"])  # raw-bytes and zlib Tensors need no Pillow
    assert_same(example["zipped"], want["zipped"])
    want = from_json(EXPECTED["train"][0])
    assert_same(example["label"], want["label"])


def test_info(directory):
    info = tfds_fast.open(directory).info
    assert info.name == NAME and info.version == VERSION
    assert info.description.startswith("A small dataset") and "tfrec_fast_fixture" in info.citation
    assert {k: v.num_examples for k, v in info.splits.items()} == {"train": 24, "test": 10}
    assert info.splits["train"].shard_lengths == [8, 8, 8]
    labels = info.class_labels()
    assert labels["label"].names == ["cat", "dog", "bird"]
    assert labels["objects/kind"].names == ["small", "large"]
    assert labels["label"].int2str(2) == "bird"
    assert info.supervised_keys == ("image", "label")


def test_open_by_name_under_a_data_dir(prepared, monkeypatch):
    assert tfds_fast.open(NAME, data_dir=prepared).info.version == VERSION  # newest version
    assert len(tfds_fast.open(f"{NAME}:{VERSION}", data_dir=prepared)["test"]) == 10
    monkeypatch.setenv("TFDS_DATA_DIR", str(prepared))
    assert len(tfds_fast.open(f"{NAME}/{VERSION}")["train"]) == 24


def test_len_needs_no_scan(directory):
    split = tfds_fast.open(directory)["train"]
    assert len(split) == 24
    assert not list(directory.glob("*.idx"))  # nothing read or indexed for len()


@pytest.mark.parametrize("spec, expected", [
    ("train[:10%]", list(range(0, 2))),        # round(2.4) = 2
    ("train[10%:20%]", list(range(2, 5))),     # round(2.4)..round(4.8)
    ("train[-25%:]", list(range(18, 24))),
    ("train[5:9]", list(range(5, 9))),
    ("train[-3:]", list(range(21, 24))),
    ("train[1shard]", list(range(8, 16))),
    ("train[:2shard]", list(range(0, 16))),
    ("train[20:]+test[:2]", list(range(20, 24)) + ["test0", "test1"]),
])
def test_split_slicing(directory, spec, expected):
    ds = tfds_fast.open(directory)
    train = [e["meta"]["id"] for e in ds["train"]]
    test = [e["meta"]["id"] for e in ds["test"]]
    want = [test[int(x[4:])] if isinstance(x, str) else train[x] for x in expected]
    got = [e["meta"]["id"] for e in ds[spec]]
    assert got == want
    assert len(ds[spec]) == len(want)


def test_bad_split_strings(directory):
    ds = tfds_fast.open(directory)
    for bad in ("valid", "train[", "train[1]", "train[:200]", "all[:5]"):
        with pytest.raises(ValueError):
            ds[bad]
    assert len(ds["all"]) == 34


def test_random_access_matches_iteration(directory):
    pytest.importorskip("PIL")
    split = tfds_fast.open(directory, decode_images=True)["train[3:21]"]
    in_order = list(split)
    for i in (0, 7, 17, -1):
        assert_same(split[i], in_order[i])
    batch = split.get_batch([17, 0, 5, 5, 9])
    for got, i in zip(batch, [17, 0, 5, 5, 9]):
        assert_same(got, in_order[i])
    with pytest.raises(IndexError):
        split[18]
    assert sorted(p.name for p in directory.glob("*.idx")) == [
        f"{NAME}-train.tfrecord-0000{i}-of-00003.idx" for i in range(3)]


def test_cache_used_when_the_directory_is_not_writable(directory, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("TFREC_FAST_CACHE", str(cache))
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    split = tfds_fast.open(directory)["test"]
    assert split[2]["meta"]["id"] == list(split)[2]["meta"]["id"]
    assert not list(directory.glob("*.idx")) and len(list(cache.rglob("*.idx"))) >= 1


def test_raw_values(directory):
    raw = tfds_fast.open(directory)["train"].raw(0)
    assert "objects/bbox" in raw and "meta/inner/weight" in raw and isinstance(raw["caption"],
                                                                              list)


def test_load_and_as_numpy_like_tfds(prepared):
    pytest.importorskip("PIL")
    split = tfds_fast.load(NAME, split="test", data_dir=prepared)
    examples = list(tfds_fast.as_numpy(split))
    assert_same(examples[0], from_json(EXPECTED["test"][0]))
    pairs = list(tfds_fast.load(NAME, split="test", data_dir=prepared, as_supervised=True))
    assert len(pairs) == 10 and pairs[0][0].shape[-1] == 3 and pairs[0][1].dtype == np.int64
    both = tfds_fast.load(NAME, data_dir=prepared)
    assert sorted(both) == ["test", "train"]
    with pytest.raises(ValueError, match="prepared"):
        tfds_fast.load(NAME, split="test", data_dir=prepared, download=True)


# ---- broken datasets -------------------------------------------------------------------------

def test_missing_features_json(directory):
    (directory / "features.json").unlink()
    with pytest.raises(tfds_fast.TFDSMetadataError, match="features.json"):
        tfds_fast.open(directory)


def test_not_a_dataset(tmp_path):
    with pytest.raises(tfds_fast.TFDSMetadataError, match="no prepared TFDS dataset"):
        tfds_fast.open(tmp_path / "nothing")


def test_missing_shard(directory):
    (directory / f"{NAME}-train.tfrecord-00001-of-00003").unlink()
    with pytest.raises(tfds_fast.TFDSMetadataError, match="00001-of-00003 is missing"):
        tfds_fast.open(directory)


def _set_shard_lengths(directory, split, lengths):
    path = directory / "dataset_info.json"
    info = json.loads(path.read_text())
    for s in info["splits"]:
        if s["name"] == split:
            s["shardLengths"] = [str(n) for n in lengths]
    path.write_text(json.dumps(info))


def test_shard_lengths_disagreeing_with_the_files(directory):
    _set_shard_lengths(directory, "train", [8, 9, 8])
    split = tfds_fast.open(directory)["train"]
    assert len(split) == 25
    with pytest.raises(tfds_fast.TFDSMetadataError, match="holds 8 records.*says 9"):
        list(split)
    with pytest.raises(tfds_fast.TFDSMetadataError, match="holds 8 records.*says 9"):
        split[10]
    _set_shard_lengths(directory, "test", [3, 3, 3])
    with pytest.raises(tfds_fast.TFDSMetadataError, match="says 3"):
        list(tfds_fast.open(directory)["test"])


def test_unknown_feature_type(directory):
    path = directory / "features.json"
    tree = json.loads(path.read_text())
    tree["featuresDict"]["features"]["caption"] = {
        "pythonClassName": "my_package.features.Audio", "audio": {"sampleRate": "16000"}}
    path.write_text(json.dumps(tree))
    split = tfds_fast.open(directory)["train"]
    with pytest.raises(tfds_fast.UnknownFeatureError, match="caption.*my_package.*Audio|Audio"):
        split[0]
    assert split.raw(0)["caption"][0].startswith(b"example")  # the raw bytes stay readable


def test_damaged_record_names_shard_and_record(directory):
    shard = directory / f"{NAME}-test.tfrecord-00001-of-00003"
    data = bytearray(shard.read_bytes())
    data[-2] ^= 0xFF
    shard.write_bytes(bytes(data))
    from tfrec_fast.errors import DataLossError
    with pytest.raises(DataLossError) as info:
        list(tfds_fast.open(directory)["test"])
    assert info.value.path.endswith("00001-of-00003") and info.value.record_index == 3


def test_wrong_shape_is_a_parse_error(directory):
    path = directory / "features.json"
    tree = json.loads(path.read_text())
    tree["featuresDict"]["features"]["matrix"]["tensor"]["shape"]["dimensions"] = ["4", "4"]
    path.write_text(json.dumps(tree))
    with pytest.raises(ExampleParseError) as info:
        list(tfds_fast.open(directory)["train"])
    assert info.value.feature == "matrix" and info.value.record_index == 0
    assert "00000-of-00003" in info.value.path


# ---- torch -----------------------------------------------------------------------------------

@pytest.mark.torch
def test_torch_map_style_dataset(directory):
    torch = pytest.importorskip("torch")
    split = tfds_fast.open(directory)["train"]

    def transform(example):
        return {"label": example["label"], "id": example["meta"]["id"]}
    data = split.to_torch(transform)
    assert len(data) == 24
    loader = torch.utils.data.DataLoader(data, batch_size=5, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    ids = sorted(int(i) for batch in loader for i in batch["id"])
    assert ids == list(range(24))
