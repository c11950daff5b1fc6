"""tfrec_fast.tfds against tensorflow-datasets itself (run by CI's peers step, .ci/run).

1. The fixture rebuilt with the installed tensorflow-datasets matches the committed one (same
   metadata, the same Examples in every shard, the same tfds.as_numpy dump), so test_tfds.py's
   expectations still hold for the TFDS of today.
2. What tfrec_fast.tfds reads equals what TFDS gives live, for many split strings, decoders,
   read configs and random access.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from _tfds_fixtures import (
    DATA,
    FIXTURE,
    ORDERED,
    assert_all_same,
    assert_rebuilt_matches,
    data_dir,
    tfds,
)

import tfrec_fast.tfds as ours

__all__ = ["data_dir", "tfds"]  # fixtures, imported

pytestmark = [
    pytest.mark.tfds,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow_datasets") is None,
        reason="tensorflow-datasets not installed (CI's peers step installs it)",
    ),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATASETS = (FIXTURE, ORDERED)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """The fixture built again, by the script that made the committed one."""
    out = tmp_path_factory.mktemp("rebuilt")
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "make_tfds_fixture.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return str(out)


@pytest.mark.parametrize("name", DATASETS)
def test_rebuilt_fixture_matches_the_committed_one(rebuilt, name):
    assert_rebuilt_matches(
        os.path.join(DATA, name),
        os.path.join(rebuilt, name),
        os.path.join(DATA, name + ".as_numpy.json.gz"),
        os.path.join(rebuilt, name + ".as_numpy.json.gz"),
    )


SPECS = [
    "train",
    "test",
    "train[:10%]",
    "train[33%:66%]",
    "train[5%:15%]",
    "train[-7:]",
    "train[10:60]",
    "train[1shard]",
    "train[:-1shard]",
    "test[:50%]+train[60:]",
    "all",
    "train[-1shard:]+test[1:2]",
]


@pytest.mark.parametrize("spec", SPECS)
def test_every_split_string_reads_as_tfds_reads_it(tfds, data_dir, spec):
    path = os.path.join(data_dir, DATASETS[0])
    builder = tfds.builder_from_directory(path)
    theirs = list(tfds.as_numpy(builder.as_dataset(split=spec, shuffle_files=False)))
    split = ours.open(path, decode_images=True)[spec]
    assert_all_same(list(split), theirs)
    order = np.random.default_rng(len(theirs)).permutation(len(theirs))
    assert_all_same(split.get_batch(order), [theirs[i] for i in order])


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
    assert_all_same(list(ours.open(path, decode_images=True)["train"]), theirs)


@pytest.mark.parametrize("cycle, block", [(1, 16), (2, 3), (4, 1), (16, 5)])
def test_read_config_interleave(tfds, data_dir, cycle, block):
    path = os.path.join(data_dir, DATASETS[0])
    config = tfds.ReadConfig(interleave_cycle_length=cycle, interleave_block_length=block)
    theirs = tfds.as_numpy(
        tfds.builder_from_directory(path).as_dataset(
            split="train+test[5:]",
            read_config=config,
            decoders={"image": tfds.decode.SkipDecoding(), "photo": tfds.decode.SkipDecoding()},
        )
    )
    split = ours.open(path, decode_images=True).as_dataset(
        "train+test[5:]",
        read_config=config,
        decoders={"image": ours.SkipDecoding(), "photo": tfds.decode.SkipDecoding()},
    )
    assert_all_same(list(split), list(theirs))


def test_load_drop_in(tfds, data_dir):
    kwargs = dict(split="test", data_dir=data_dir, as_supervised=True)
    theirs = list(tfds.as_numpy(tfds.load("tfrec_fixture", download=False, **kwargs)))
    mine = list(ours.as_numpy(ours.load("tfrec_fixture", **kwargs)))
    assert_all_same(mine, theirs)
    theirs = list(
        tfds.as_numpy(
            tfds.load(
                "tfrec_ordered", split="train", data_dir=data_dir, batch_size=16, download=False
            )
        )
    )
    mine = list(ours.load("tfrec_ordered", split="train", data_dir=data_dir, batch_size=16))
    assert_all_same(mine, theirs)


def test_info_as_tfds(tfds, data_dir):
    path = os.path.join(data_dir, DATASETS[0])
    theirs = tfds.builder_from_directory(path).info
    mine = ours.open(path).info
    assert (mine.name, mine.version, mine.description, mine.citation) == (
        theirs.name,
        str(theirs.version),
        theirs.description,
        theirs.citation,
    )
    assert {k: v.shard_lengths for k, v in mine.splits.items()} == {
        k: list(v.shard_lengths) for k, v in theirs.splits.items()
    }
    assert [os.path.basename(p) for p in mine.splits["train"].filenames] == [
        os.path.basename(os.fspath(p)) for p in theirs.splits["train"].filepaths
    ]
    for key in ("label", "meta/info/tag", "objects/kind"):
        parts = key.split("/")
        feature = theirs.features
        for part in parts:
            feature = feature[part]
        assert mine.features[key].names == feature.names
