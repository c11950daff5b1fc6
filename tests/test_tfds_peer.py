"""tfrec_fast.tfds against tensorflow-datasets itself (CI's peers step): the fixture rebuilt
with the installed tensorflow-datasets still matches the committed copy, and split slicing
selects what TFDS selects."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.tfds,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow_datasets") is None,
                       reason="optional peer tensorflow-datasets not installed (CI's peers "
                       "step runs this)"),
]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))

from test_tfds import EXPECTED, NAME, VERSION, assert_same, from_json  # noqa: E402

import tfrec_fast.tfds as tfds_fast  # noqa: E402


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    import make_tfds_fixture
    out = tmp_path_factory.mktemp("tfds")
    assert make_tfds_fixture.main(["--out", str(out)]) == 0
    return out


def test_committed_dump_matches_current_tensorflow_datasets(rebuilt):
    fresh = json.loads((rebuilt / "expected.json").read_text())
    for split in ("train", "test"):
        assert len(fresh[split]) == len(EXPECTED[split])
        for i, (a, b) in enumerate(zip(fresh[split], EXPECTED[split])):
            assert_same(from_json(a), from_json(b), f"{split}[{i}]")


def test_rebuilt_dataset_reads_as_tfds_gives_it(rebuilt):
    fresh = json.loads((rebuilt / "expected.json").read_text())
    ds = tfds_fast.open(rebuilt / NAME / VERSION, decode_images=True)
    for split in ("train", "test"):
        for i, (got, want) in enumerate(zip(ds[split], fresh[split])):
            assert_same(got, from_json(want), f"{split}[{i}]")


@pytest.mark.parametrize("spec", ["train[:10%]", "train[10%:20%]", "train[-25%:]",
                                  "train[33%:67%]", "train[5:9]", "train[-3:]",
                                  "train[1shard]", "train[:2shard]", "train[20:]+test[:2]",
                                  "test[15%:]", "all"])
def test_slicing_selects_what_tfds_selects(rebuilt, spec):
    import tensorflow_datasets as tfds
    directory = rebuilt / NAME / VERSION
    builder = tfds.builder_from_directory(str(directory))
    want = [int(e["meta"]["id"]) for e in tfds.as_numpy(
        builder.as_dataset(split=spec, shuffle_files=False))]
    got = [int(e["meta"]["id"]) for e in tfds_fast.open(directory)[spec]]
    assert got == want
