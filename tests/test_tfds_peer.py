"""tfrec_fast.tfds against tensorflow-datasets itself (run by CI's peers step, .ci/run).

1. The fixture rebuilt with the installed tensorflow-datasets matches the committed one (same
   metadata, the same Examples in every shard, the same tfds.as_numpy dump), so test_tfds.py's
   expectations still hold for the TFDS of today.
2. What tfrec_fast.tfds reads equals what TFDS gives live, for many split strings, decoders,
   read configs and random access.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

import _tfds_dump
import tfrec_fast.tfds as ours
from tfrec_fast import proto, read_records

pytestmark = [
    pytest.mark.tfds,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow_datasets") is None,
                       reason="tensorflow-datasets not installed (CI's peers step installs it)"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "tfds")
DATASETS = ("tfrec_fixture/1.2.0", "tfrec_ordered/0.1.0")
HAVE_SIMPLEJPEG = importlib.util.find_spec("simplejpeg") is not None
TOLERANCE = {} if HAVE_SIMPLEJPEG else {"/photo": 16}  # see test_tfds.py


@pytest.fixture(scope="module")
def tfds():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow as tf
        import tensorflow_datasets
    tf.config.set_visible_devices([], "GPU")
    return tensorflow_datasets


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """The fixture built again, by the script that made the committed one."""
    out = tmp_path_factory.mktemp("rebuilt")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_tfds_fixture.py"),
                          str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return str(out)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    target = tmp_path_factory.mktemp("committed") / "data"
    shutil.copytree(DATA, target)
    return str(target)


def _files(directory):
    return sorted(os.listdir(directory))


def _json(path):
    with open(path) as f:
        return json.load(f)


@pytest.mark.parametrize("name", DATASETS)
def test_rebuilt_fixture_matches_the_committed_one(rebuilt, name):
    committed, fresh = os.path.join(DATA, name), os.path.join(rebuilt, name)
    assert _files(fresh) == _files(committed)
    for file in _files(committed):
        a, b = os.path.join(committed, file), os.path.join(fresh, file)
        if file.endswith(".json"):
            assert _json(b) == _json(a), f"{file} changed: regenerate the fixture"
        elif ".tfrecord-" in file:
            # Example maps serialize in no fixed order: compare the messages.
            old = [proto.Example.FromString(r) for r in read_records(a, copy=True)]
            new = [proto.Example.FromString(r) for r in read_records(b, copy=True)]
            assert len(new) == len(old), file
            for i, (x, y) in enumerate(zip(old, new)):
                assert x == y, f"{file} record {i} changed"
        else:
            with open(a, "rb") as fa, open(b, "rb") as fb:
                assert fa.read() == fb.read(), file
    old = _tfds_dump.load(os.path.join(DATA, name + ".as_numpy.json.gz"))
    new = _tfds_dump.load(os.path.join(rebuilt, name + ".as_numpy.json.gz"))
    assert list(new) == list(old)
    for key in old:
        assert len(new[key]) == len(old[key])
        for i, (x, y) in enumerate(zip(new[key], old[key])):
            problems = _tfds_dump.differences(x, y)
            assert not problems, (key, i, problems[:5])


def _normalized(values):
    """TFDS's values as the dump holds them (tf.RaggedTensor -> Ragged)."""
    return [_tfds_dump.decode(_tfds_dump.encode(v)) for v in values]


def _assert_equal(ours_values, theirs):
    assert len(ours_values) == len(theirs)
    for i, (a, b) in enumerate(zip(ours_values, _normalized(theirs))):
        problems = _tfds_dump.differences(a, b, tolerance=TOLERANCE)
        assert not problems, (i, problems[:5])


SPECS = ["train", "test", "train[:10%]", "train[33%:66%]", "train[5%:15%]", "train[-7:]",
         "train[10:60]", "train[1shard]", "train[:-1shard]", "test[:50%]+train[60:]", "all",
         "train[-1shard:]+test[1:2]"]


@pytest.mark.parametrize("spec", SPECS)
def test_every_split_string_reads_as_tfds_reads_it(tfds, data_dir, spec):
    path = os.path.join(data_dir, DATASETS[0])
    builder = tfds.builder_from_directory(path)
    theirs = list(tfds.as_numpy(builder.as_dataset(split=spec, shuffle_files=False)))
    split = ours.open(path, decode_images=True)[spec]
    _assert_equal(list(split), theirs)
    order = np.random.default_rng(len(theirs)).permutation(len(theirs))
    _assert_equal(split.get_batch(order), [theirs[i] for i in order])


@pytest.mark.parametrize("spec", ["test[3:3]", "train[50:40]"])
def test_selecting_nothing_is_an_error_in_both(tfds, data_dir, spec):
    path = os.path.join(data_dir, DATASETS[0])
    with pytest.raises(ValueError, match="corresponds to no data"):
        tfds.builder_from_directory(path).as_dataset(split=spec)
    with pytest.raises(ValueError, match="corresponds to no data"):
        ours.open(path)[spec]


def test_disable_shuffling_dataset(tfds, data_dir):
    path = os.path.join(data_dir, DATASETS[1])
    theirs = list(tfds.as_numpy(tfds.builder_from_directory(path).as_dataset(split="train")))
    _assert_equal(list(ours.open(path, decode_images=True)["train"]), theirs)


@pytest.mark.parametrize("cycle, block", [(1, 16), (2, 3), (4, 1), (16, 5)])
def test_read_config_interleave(tfds, data_dir, cycle, block):
    path = os.path.join(data_dir, DATASETS[0])
    config = tfds.ReadConfig(interleave_cycle_length=cycle, interleave_block_length=block)
    theirs = tfds.as_numpy(tfds.builder_from_directory(path).as_dataset(
        split="train+test[5:]", read_config=config, decoders={"image": tfds.decode.SkipDecoding(),
                                                              "photo": tfds.decode.SkipDecoding()}))
    split = ours.open(path, decode_images=True).as_dataset(
        "train+test[5:]", read_config=config, decoders={"image": ours.SkipDecoding(),
                                                        "photo": tfds.decode.SkipDecoding()})
    _assert_equal(list(split), list(theirs))


def test_load_drop_in(tfds, data_dir):
    kwargs = dict(split="test", data_dir=data_dir, as_supervised=True)
    theirs = list(tfds.as_numpy(tfds.load("tfrec_fixture", download=False, **kwargs)))
    mine = list(ours.as_numpy(ours.load("tfrec_fixture", **kwargs)))
    _assert_equal(mine, theirs)
    theirs = list(tfds.as_numpy(tfds.load("tfrec_ordered", split="train", data_dir=data_dir,
                                          batch_size=16, download=False)))
    mine = list(ours.load("tfrec_ordered", split="train", data_dir=data_dir, batch_size=16))
    _assert_equal(mine, theirs)


def test_info_as_tfds(tfds, data_dir):
    path = os.path.join(data_dir, DATASETS[0])
    theirs = tfds.builder_from_directory(path).info
    mine = ours.open(path).info
    assert (mine.name, mine.version, mine.description, mine.citation) == (
        theirs.name, str(theirs.version), theirs.description, theirs.citation)
    assert {k: v.shard_lengths for k, v in mine.splits.items()} == {
        k: list(v.shard_lengths) for k, v in theirs.splits.items()}
    assert [os.path.basename(p) for p in mine.splits["train"].filenames] == [
        os.path.basename(os.fspath(p)) for p in theirs.splits["train"].filepaths]
    for key in ("label", "meta/info/tag", "objects/kind"):
        parts = key.split("/")
        feature = theirs.features
        for part in parts:
            feature = feature[part]
        assert mine.features[key].names == feature.names
