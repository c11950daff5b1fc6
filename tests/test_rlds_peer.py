"""tfrec_fast.tfds on RLDS episodes and the feature catalogue, against tensorflow-datasets itself
(run by CI's peers step, .ci/run).

1. The RLDS and catalogue fixtures rebuilt with the installed tensorflow-datasets match the
   committed ones (metadata, Examples, the tfds.as_numpy dumps), so test_rlds.py's
   expectations hold for the TFDS of today; and what tfrec_fast reads from the rebuilt
   directories equals the rebuilt dumps.
2. A larger RLDS dataset built here by TFDS's own GeneratorBasedBuilder (24 episodes of 0 to 14
   steps in 4 shards) read as TFDS reads it: every episode of many split strings, with nested
   decoders and read configs, random access, the columnar form against TFDS's steps stacked,
   and the torch steps view against TFDS's steps one by one.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings

import _tfds_dump
import numpy as np
import pytest
from _tfds_fixtures import (
    CATALOG,
    DATA,
    JPEG_TOLERANCE,
    RLDS,
    assert_all_same,
    assert_rebuilt_matches,
    normalized,
    tfds,
)

import tfrec_fast.tfds as ours

__all__ = ["tfds"]  # a fixture, imported

pytestmark = [
    pytest.mark.tfds,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow_datasets") is None,
        reason="tensorflow-datasets not installed (CI's peers step installs it)",
    ),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),  # pydub: "Couldn't find ffmpeg"
]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
DATASETS = (RLDS, CATALOG)
NEEDS_PYDUB = pytest.mark.skipif(
    importlib.util.find_spec("pydub") is None,
    reason="TFDS decodes the catalogue's WAV audio with pydub",
)


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """The fixtures built again, by the script that made the committed ones (its tests are
    marked NEEDS_PYDUB: the script needs pydub)."""
    out = tmp_path_factory.mktemp("rebuilt")
    run = subprocess.run(
        [sys.executable, os.path.join(TOOLS, "make_rlds_fixture.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return str(out)


@NEEDS_PYDUB
@pytest.mark.parametrize("name", DATASETS)
def test_rebuilt_fixture_matches_the_committed_one(rebuilt, name):
    assert_rebuilt_matches(
        os.path.join(DATA, name),
        os.path.join(rebuilt, name),
        os.path.join(DATA, name + ".as_numpy.json.gz"),
        os.path.join(rebuilt, name + ".as_numpy.json.gz"),
    )


@NEEDS_PYDUB
@pytest.mark.parametrize("name", DATASETS)
def test_rebuilt_fixture_reads_as_tfds_gave_it(rebuilt, name):
    dump = _tfds_dump.load(os.path.join(rebuilt, name + ".as_numpy.json.gz"))
    for key, ref in dump.items():
        split, mode = key.split("/")
        ds = ours.open(os.path.join(rebuilt, name), decode_images=mode == "decoded")
        assert_all_same(list(ds[split]), ref)


def test_the_fixture_tool_leaves_no_temporary_directory(tfds, tmp_path):
    """Importing tools/make_rlds_fixture.py (as the live tests below do) and making its
    builders' info writes the ClassLabel names files in a directory that is gone after."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import make_rlds_fixture as tool; "
        "tool.RldsFixture(data_dir=sys.argv[2]).info; print('made')"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, TOOLS, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=dict(os.environ, TMPDIR=str(scratch)),
    )
    assert run.returncode == 0 and "made" in run.stdout, run.stderr[-3000:]
    assert [p.name for p in scratch.iterdir() if p.name.startswith("rlds-")] == []


# ---- a larger RLDS dataset, read live ----------------------------------------------------------


@pytest.fixture(scope="module")
def live(tfds, tmp_path_factory):
    """(path, builder) of 24 RLDS episodes TFDS built here in 4 shards."""
    sys.path.insert(0, TOOLS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import make_rlds_fixture as tool
    finally:
        sys.path.remove(TOOLS)

    class RldsLive(tool.RldsFixture):
        VERSION = tfds.core.Version("2.0.0")

        def _split_generators(self, dl_manager):
            return {
                "train": self._generate_examples(24, seed=31),
                "test": self._generate_examples(6, seed=32),
            }

        def _generate_examples(self, n, seed):
            rng = np.random.default_rng(seed)
            for e in range(n):
                length = 0 if e == 5 else int(rng.integers(1, 15))
                yield f"{seed}-{e}", tool._episode(rng, seed * 1000 + e, length)

    builder = RldsLive(data_dir=str(tmp_path_factory.mktemp("live")))
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(num_shards=4))
    return os.fspath(builder.data_dir), builder


SPECS = [
    "train",
    "test",
    "train[:25%]",
    "train[5:17]",
    "train[-3:]",
    "train[1shard]",
    "train[:-1shard]+test[2:]",
    "all",
]


@pytest.mark.parametrize("spec", SPECS)
def test_every_episode_of_every_split_string(tfds, live, spec):
    path, builder = live
    theirs = normalized(tfds.as_numpy(builder.as_dataset(split=spec, shuffle_files=False)))
    split = ours.open(path, decode_images=True)[spec]
    assert_all_same(list(split), theirs)
    order = np.random.default_rng(len(theirs)).permutation(len(theirs))
    assert_all_same(split.get_batch(order), [theirs[i] for i in order])


def test_builder_from_directory_and_load(tfds, live):
    path, _ = live
    theirs = normalized(tfds.as_numpy(tfds.builder_from_directory(path).as_dataset(split="test")))
    assert_all_same(list(ours.builder_from_directory(path).as_dataset(split="test")), theirs)
    data_dir = os.path.dirname(os.path.dirname(path))
    theirs = normalized(
        tfds.as_numpy(tfds.load("rlds_live", split="train[3:9]", data_dir=data_dir, download=False))
    )
    assert_all_same(list(ours.load("rlds_live", split="train[3:9]", data_dir=data_dir)), theirs)


def test_nested_decoders_and_read_config(tfds, live):
    path, builder = live
    config = tfds.ReadConfig(interleave_cycle_length=2, interleave_block_length=3)
    skip = {
        "steps": {
            "observation": {
                "image": tfds.decode.SkipDecoding(),
                "wrist_image": tfds.decode.SkipDecoding(),
            }
        }
    }
    theirs = normalized(
        tfds.as_numpy(
            builder.as_dataset(
                split="train", decoders=skip, read_config=config, shuffle_files=False
            )
        )
    )
    mine = ours.open(path, decode_images=True).as_dataset(
        "train", decoders=skip, read_config=config
    )
    assert_all_same(list(mine), theirs)


def test_columns_are_tfds_steps_stacked(tfds, live):
    path, builder = live
    theirs = normalized(tfds.as_numpy(builder.as_dataset(split="train", shuffle_files=False)))
    mine = list(ours.open(path, decode_images=True, nested="columns")["train"])
    for columns, episode in zip(mine, theirs):
        steps = episode["steps"]
        assert_stacked(columns["steps"], steps, "steps")
        assert not _tfds_dump.differences(columns["episode_metadata"], episode["episode_metadata"])


def assert_stacked(columns, steps, path):
    if isinstance(columns, dict):
        for key, value in columns.items():
            assert_stacked(value, [s[key] for s in steps], f"{path}/{key}")
        return
    assert len(columns) == len(steps), path
    for t, step in enumerate(steps):
        value = columns[t]
        if isinstance(step, bytes):
            assert value == step, (path, t)
        else:
            assert np.asarray(value).dtype == np.asarray(step).dtype, path
            allowed = next((v for k, v in JPEG_TOLERANCE.items() if path.endswith(k)), 0)
            assert (
                np.array_equal(value, step)
                or np.abs(np.asarray(value, np.int64) - np.asarray(step, np.int64)).max() <= allowed
            ), (path, t)


def _as_is(item):  # module level: picklable into worker processes
    return item


@pytest.mark.torch
def test_torch_steps_are_tfds_steps(tfds, live):
    torch = pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import StepsDataset, collate

    path, builder = live
    theirs = normalized(tfds.as_numpy(builder.as_dataset(split="train", shuffle_files=False)))
    split = ours.open(path, decode_images=True)["train"]
    loader = torch.utils.data.DataLoader(
        StepsDataset(split), batch_size=None, num_workers=2, collate_fn=_as_is
    )
    seen = set()
    for item in loader:
        e, t = int(item["episode_index"]), int(item["step_index"])
        want = theirs[e]["steps"][t]
        assert not _tfds_dump.differences(item["steps"], want, tolerance=JPEG_TOLERANCE), (e, t)
        seen.add((e, t))
    assert seen == {(e, t) for e, ep in enumerate(theirs) for t in range(len(ep["steps"]))}
    windows = list(
        torch.utils.data.DataLoader(StepsDataset(split, window=4), batch_size=8, collate_fn=collate)
    )
    for batch in windows:
        for b, (e, t) in enumerate(zip(batch["episode_index"], batch["step_index"])):
            for k in range(4):
                want = theirs[int(e)]["steps"][int(t) + k]
                assert np.array_equal(batch["steps"]["action"][b, k].numpy(), want["action"])
                assert np.array_equal(
                    batch["steps"]["observation"]["image"][b, k].numpy(),
                    want["observation"]["image"],
                )


def test_info_of_nested_features_as_tfds(tfds, live):
    path, _ = live
    theirs = tfds.builder_from_directory(path).info.features
    mine = ours.open(path).info.features
    assert mine["steps"]["skill"].names == theirs["steps"]["skill"].names
    assert mine["episode_metadata"]["result"].names == theirs["episode_metadata"]["result"].names
    assert (
        mine["steps"]["observation"]["image"].shape == theirs["steps"]["observation"]["image"].shape
    )
