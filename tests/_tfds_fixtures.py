"""What the TFDS and RLDS tests share: the committed fixtures (tests/data/tfds, built by
tools/make_tfds_fixture.py and tools/make_rlds_fixture.py with tensorflow-datasets), copies of
them, their ``tfds.as_numpy`` dumps and the comparison with them, edits of a copy (its records,
its features.json), and for the peer tests TFDS itself and the comparison of a rebuilt fixture
with the committed one.

The test modules import what they use from here; a fixture imported into a test module is a
fixture there (conftest.py belongs to the whole suite).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import warnings

import _tfds_dump
import pytest

import tfrec_fast
from tfrec_fast import TFRecordWriter, proto, read_records

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tfds")
FIXTURE, ORDERED = "tfrec_fixture/1.2.0", "tfrec_ordered/0.1.0"
RLDS, CATALOG = "rlds_fixture/1.0.0", "tfds_catalog/1.0.0"

HAVE_SIMPLEJPEG = importlib.util.find_spec("simplejpeg") is not None
# Without simplejpeg, JPEGs are decoded by Pillow (accurate DCT) where TensorFlow uses the fast
# integer DCT: pixels may differ by a few levels (measured: at most 12 on the fixtures' JPEGs,
# images of noise, the worst case for JPEG). Keyed by the JPEG features' names, at any depth.
JPEG_TOLERANCE = {} if HAVE_SIMPLEJPEG else {"/photo": 16, "/wrist_image": 16}


def copy_data(target) -> str:
    """A copy of every fixture under ``target`` (random access writes indexes beside the
    shards; tests that damage a dataset damage their own copy)."""
    shutil.copytree(DATA, target)
    return str(target)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A copy of the fixtures for the module's tests to read."""
    return copy_data(tmp_path_factory.mktemp("tfds") / "data")


@pytest.fixture
def own_copy(tmp_path):
    """A copy this test may damage."""
    return copy_data(tmp_path / "data")


def load_dumps(*names) -> dict:
    """{name: {"<split>/<decoded|encoded>": [examples]}}: what tfds.as_numpy gave."""
    return {name: _tfds_dump.load(os.path.join(DATA, name + ".as_numpy.json.gz")) for name in names}


def assert_same(ours, ref, tolerance=None):
    """``ours`` equals a dumped value (types, dtypes, shapes, bits; JPEG pixels within
    JPEG_TOLERANCE when simplejpeg is missing)."""
    problems = _tfds_dump.differences(ours, ref, tolerance=tolerance or JPEG_TOLERANCE)
    assert not problems, problems[:10]


def rewrite(shard, change):
    """Rewrites a shard with ``change(list of tf.train.Example messages)`` applied."""
    examples = [tfrec_fast.proto.Example.FromString(r) for r in read_records(shard, copy=True)]
    change(examples)
    with TFRecordWriter(shard) as w:
        for example in examples:
            w.write(example.SerializeToString())


def read_json(path):
    with open(path) as f:
        return json.load(f)


def edit_features(path, edit):
    """Applies ``edit(tree)`` to a dataset directory's features.json."""
    features_path = os.path.join(path, "features.json")
    tree = read_json(features_path)
    edit(tree)
    with open(features_path, "w") as f:
        json.dump(tree, f)


def node(tree, *keys):
    """The features.json node at a path of keys ("[dataset]" / "[sequence]" go inside)."""
    for key in keys:
        if key in ("[dataset]", "[sequence]"):
            tree = tree["sequence"]["feature"]
        else:
            tree = tree["featuresDict"]["features"][key]
    return tree


# ---- the peer tests ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tfds():
    """tensorflow_datasets, with TensorFlow quiet and kept off GPUs."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow as tf
        import tensorflow_datasets
    tf.config.set_visible_devices([], "GPU")
    return tensorflow_datasets


def assert_rebuilt_matches(committed: str, fresh: str, committed_dump: str, fresh_dump: str):
    """A fixture rebuilt by the installed tensorflow-datasets equals the committed one: the same
    files (indexes aside), JSON, Examples (compared as messages: their maps serialize in no
    fixed order) and other bytes, and the same tfds.as_numpy dump."""
    files = sorted(f for f in os.listdir(committed) if not f.endswith(".idx"))
    assert sorted(os.listdir(fresh)) == files
    for file in files:
        a, b = os.path.join(committed, file), os.path.join(fresh, file)
        if file.endswith(".json"):
            assert read_json(b) == read_json(a), f"{file} changed: regenerate the fixture"
        elif ".tfrecord-" in file:
            old = [proto.Example.FromString(r) for r in read_records(a, copy=True)]
            new = [proto.Example.FromString(r) for r in read_records(b, copy=True)]
            assert len(new) == len(old), file
            for i, (x, y) in enumerate(zip(old, new)):
                assert x == y, f"{file} record {i} changed"
        else:
            with open(a, "rb") as fa, open(b, "rb") as fb:
                assert fa.read() == fb.read(), file
    old, new = _tfds_dump.load(committed_dump), _tfds_dump.load(fresh_dump)
    assert list(new) == list(old)
    for key in old:
        assert len(new[key]) == len(old[key])
        for i, (x, y) in enumerate(zip(new[key], old[key])):
            problems = _tfds_dump.differences(x, y)
            assert not problems, (key, i, problems[:5])


def normalized(values):
    """TFDS's values as the dumps hold them (nested datasets -> lists, tf.RaggedTensor ->
    Ragged)."""
    return [_tfds_dump.decode(_tfds_dump.encode(v)) for v in values]


def assert_all_same(mine, theirs, tolerance=None):
    """Two lists of examples are equal, example by example (``theirs``: TFDS's, normalized
    here)."""
    theirs = normalized(theirs)
    assert len(mine) == len(theirs)
    for i, (a, b) in enumerate(zip(mine, theirs)):
        problems = _tfds_dump.differences(a, b, tolerance=tolerance or JPEG_TOLERANCE)
        assert not problems, (i, problems[:5])


__all__ = [
    "DATA",
    "FIXTURE",
    "ORDERED",
    "RLDS",
    "CATALOG",
    "HAVE_SIMPLEJPEG",
    "JPEG_TOLERANCE",
    "copy_data",
    "data_dir",
    "own_copy",
    "load_dumps",
    "assert_same",
    "rewrite",
    "read_json",
    "edit_features",
    "node",
    "tfds",
    "assert_rebuilt_matches",
    "normalized",
    "assert_all_same",
]
