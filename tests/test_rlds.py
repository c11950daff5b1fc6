"""tfrec_fast.tfds on RLDS episodes and the rest of the TFDS feature catalogue, without TF.

The fixtures (tests/data/tfds/rlds_fixture and tfds_catalog, made by tools/make_rlds_fixture.py
with tensorflow-datasets) hold what ``tfds.as_numpy`` gave for every split, nested datasets as
lists of their elements; every value read here is compared with it. test_rlds_peer.py rebuilds
them and compares with TFDS live.
"""

from __future__ import annotations

import os
import pickle
import shutil
import struct
import sys

import _tfds_dump
import numpy as np
import pytest
from _tfds_fixtures import (
    CATALOG,
    DATA,
    HAVE_SIMPLEJPEG,
    JPEG_TOLERANCE,
    RLDS,
    assert_same,
    data_dir,
    edit_features,
    load_dumps,
    node,
    own_copy,
    rewrite,
)

import tfrec_fast
import tfrec_fast.tfds as tfds
from tfrec_fast import DataLossError, ExampleParseError, read_records
from tfrec_fast.tfds import audio
from tfrec_fast.tfds import features as F

__all__ = ["data_dir", "own_copy"]  # fixtures, imported

STEP_KEYS = {
    "observation",
    "action",
    "reward",
    "discount",
    "is_first",
    "is_last",
    "is_terminal",
    "language_instruction",
    "language_embedding",
    "skill",
    "contacts",
}


@pytest.fixture(scope="module")
def dumps():
    return load_dumps(RLDS, CATALOG)


def episode_ids(episodes):
    return [int(e["episode_metadata"]["episode_id"]) for e in episodes]


# ---- every episode, as tfds.as_numpy gives it ---------------------------------------------------


@pytest.mark.parametrize("name", [RLDS, CATALOG])
@pytest.mark.parametrize("decoded", [True, False])
def test_every_episode_is_what_tfds_as_numpy_gave(data_dir, dumps, name, decoded):
    ds = tfds.open(os.path.join(data_dir, name), decode_images=decoded)
    for split in ds.info.splits:
        ref = dumps[name][_tfds_dump.key(split, decoded)]
        ours = list(ds[split])
        assert len(ours) == len(ds[split]) == len(ref)
        for i, (a, b) in enumerate(zip(ours, ref)):
            problems = _tfds_dump.differences(a, b, tolerance=JPEG_TOLERANCE)
            assert not problems, (split, i, problems[:10])


def test_steps_are_lists_of_step_dicts_with_tfds_types(data_dir):
    ds = tfds.open(os.path.join(data_dir, RLDS), decode_images=True)
    lengths = [len(e["steps"]) for e in ds["val"]]
    assert 0 in lengths and max(lengths) > 4  # an empty episode, and long ones
    episode = ds["train"][0]
    assert set(episode) == {"steps", "episode_metadata"}
    steps = episode["steps"]
    assert isinstance(steps, list) and len(steps) > 1
    step = steps[1]
    assert set(step) == STEP_KEYS and set(step["observation"]) == {
        "image",
        "wrist_image",
        "depth",
        "state",
    }
    obs = step["observation"]
    assert obs["image"].dtype == np.uint8 and obs["image"].shape == (12, 12, 3)
    assert obs["wrist_image"].dtype == np.uint8 and obs["wrist_image"].shape == (8, 8, 3)
    assert obs["depth"].dtype == np.uint16 and obs["depth"].shape == (6, 6, 1)
    assert obs["state"].dtype == np.float32 and obs["state"].shape == (7,)
    assert type(step["reward"]) is np.float32 and type(step["is_first"]) is np.bool_
    assert not step["is_first"] and steps[0]["is_first"] and steps[-1]["is_last"]
    assert type(step["language_instruction"]) is bytes and type(step["skill"]) is np.int64
    assert step["contacts"].dtype == np.int32 and step["contacts"].ndim == 1
    meta = episode["episode_metadata"]
    assert type(meta["file_path"]) is bytes and type(meta["episode_id"]) is np.int64
    encoded = tfds.open(os.path.join(data_dir, RLDS))["train"][0]["steps"][0]["observation"]
    assert encoded["image"][:4] == b"\x89PNG" and encoded["wrist_image"][:2] == b"\xff\xd8"


@pytest.mark.skipif(not HAVE_SIMPLEJPEG, reason="simplejpeg not installed")
def test_jpeg_steps_equal_tensorflows_with_simplejpeg(data_dir, dumps):
    ds = tfds.open(os.path.join(data_dir, RLDS), decode_images=True)
    for split in ds.info.splits:
        for ours, ref in zip(ds[split], dumps[RLDS][f"{split}/decoded"]):
            for step, want in zip(ours["steps"], ref["steps"]):
                assert (
                    step["observation"]["wrist_image"].tobytes()
                    == want["observation"]["wrist_image"].tobytes()
                )


def test_jpeg_steps_decoded_by_pillow_differ_by_a_few_levels_at_most(data_dir, dumps, monkeypatch):
    pytest.importorskip("PIL")
    monkeypatch.setitem(sys.modules, "simplejpeg", None)  # as if not installed
    ds = tfds.open(os.path.join(data_dir, RLDS), decode_images=True)
    for ours, ref in zip(ds["val"], dumps[RLDS]["val/decoded"]):
        for step, want in zip(ours["steps"], ref["steps"]):
            got, expected = step["observation"]["wrist_image"], want["observation"]["wrist_image"]
            assert got.shape == expected.shape and got.dtype == expected.dtype
            assert np.abs(got.astype(int) - expected).max() <= 16


def test_class_label_names_of_nested_features_come_from_their_files(data_dir):
    features = tfds.open(os.path.join(data_dir, RLDS)).info.features
    assert isinstance(features["steps"], F.Dataset)
    assert features["steps"]["skill"].names == ["reach", "grasp", "place"]
    assert features["episode_metadata"]["result"].names == ["failure", "partial", "success"]
    assert "Dataset(" in repr(features)


def test_random_access_to_episode_i(data_dir, dumps):
    split = tfds.open(os.path.join(data_dir, RLDS), decode_images=True)["train"]
    ref = dumps[RLDS]["train/decoded"]
    for i in np.random.default_rng(0).permutation(len(ref)):
        assert_same(split[int(i)], ref[i])
    batch = split.get_batch([7, 0, 7, -1])
    for got, i in zip(batch, [7, 0, 7, len(ref) - 1]):
        assert_same(got, ref[i])


def test_slices_of_splits_and_nested_skip_decoding(data_dir, dumps):
    ds = tfds.open(os.path.join(data_dir, RLDS), decode_images=True)
    ref = dumps[RLDS]
    split = ds.as_dataset(
        "train[2:-3]+val", decoders={"steps": {"observation": {"image": tfds.SkipDecoding()}}}
    )
    expected = ref["train/decoded"][2:-3] + ref["val/decoded"]
    assert episode_ids(split) == episode_ids(expected)
    encoded = {
        e: x
        for e, x in zip(
            episode_ids(ref["train/encoded"] + ref["val/encoded"]),
            ref["train/encoded"] + ref["val/encoded"],
        )
    }
    for ours, want in zip(split, expected):
        raw = encoded[int(want["episode_metadata"]["episode_id"])]
        for step, want_step, raw_step in zip(ours["steps"], want["steps"], raw["steps"]):
            assert step["observation"]["image"] == raw_step["observation"]["image"]
            assert_same(step["observation"]["depth"], want_step["observation"]["depth"])


# ---- the columnar form -----------------------------------------------------------------------


def _stacked(steps, template):
    """What nested='columns' should give: each leaf stacked over the steps."""
    out = {}
    for key, value in template.items():
        if isinstance(value, dict):
            out[key] = _stacked([s[key] for s in steps], value)
        else:
            out[key] = [s[key] for s in steps]
    return out


def test_columns_stack_every_leaf_over_time(data_dir, dumps):
    split = tfds.open(os.path.join(data_dir, RLDS), decode_images=True, nested="columns")["val"]
    ref = dumps[RLDS]["val/decoded"]
    for ours, want in zip(split, ref):
        columns = ours["steps"]
        n = len(want["steps"])
        assert columns["action"].shape == (n, 4) and columns["action"].dtype == np.float32
        assert columns["observation"]["image"].shape == (n, 12, 12, 3)
        assert columns["observation"]["depth"].dtype == np.uint16
        assert columns["is_first"].dtype == np.bool_ and columns["skill"].dtype == np.int64
        assert columns["language_instruction"].dtype == object
        for t, step in enumerate(want["steps"]):
            assert np.array_equal(columns["observation"]["image"][t], step["observation"]["image"])
            assert np.array_equal(columns["action"][t], step["action"])
            assert columns["language_instruction"][t] == step["language_instruction"]
            assert columns["reward"][t] == step["reward"]
            assert np.array_equal(columns["contacts"][t], step["contacts"])
        assert isinstance(columns["contacts"], tfrec_fast.Ragged)
        assert_same(ours["episode_metadata"], want["episode_metadata"])
    empty = [e for e in split if len(e["steps"]["reward"]) == 0]
    assert empty and empty[0]["steps"]["observation"]["image"].shape == (0, 12, 12, 3)


def test_columns_of_images_of_several_sizes_name_the_feature(data_dir):
    ds = tfds.open(os.path.join(data_dir, CATALOG), decode_images=True, nested="columns")
    with pytest.raises(ExampleParseError, match="nested='steps'") as error:
        list(ds["train"])
    assert error.value.feature == "steps/camera"
    skipped = ds.as_dataset(
        "train", decoders={"steps": {"camera": tfds.SkipDecoding(), "grid": tfds.SkipDecoding()}}
    )
    steps = [e["steps"] for e in skipped]
    assert all(s["camera"].dtype == object and s["grid"]["value"].dtype == object for s in steps)
    clips = [s["clip"] for s in steps]  # frames per step: ragged over the steps
    assert all(
        isinstance(c, tfrec_fast.Ragged) and c.values.shape[1:] == (4, 4, 3) for c in clips
    ) and any(len(c.values) for c in clips)
    encoded = tfds.open(os.path.join(data_dir, CATALOG)).as_dataset(
        "train", nested="columns", decoders={"steps": {"grid": tfds.SkipDecoding()}}
    )
    assert all(e["steps"]["camera"].dtype == object for e in encoded)


def test_nested_option_is_checked(data_dir):
    with pytest.raises(ValueError, match="nested"):
        tfds.open(os.path.join(data_dir, RLDS), nested="rows")
    split = tfds.open(os.path.join(data_dir, RLDS))["val"]
    assert split.with_nested("steps") is split
    assert isinstance(split.with_nested("columns")[1]["steps"], dict)


def test_batching_nested_datasets_is_refused_as_in_tensorflow(data_dir):
    batches = tfds.load("rlds_fixture", split="val", data_dir=data_dir, batch_size=2)
    with pytest.raises(TypeError, match="nested Datasets"):
        next(iter(batches))


# ---- the feature catalogue -------------------------------------------------------------------


def test_catalogue_values(data_dir):
    ds = tfds.open(os.path.join(data_dir, CATALOG), decode_images=True)
    info = ds.info.features
    assert info["wav16"].lazy_decode and info["wav16"].file_format == "wav"
    assert info["wav16"].sample_rate == 8000 and info["audio_zlib"].encoding == "zlib"
    assert info["text_ids"].encoded and info["text_ids"].shape == (None,)
    examples = list(ds["train"])
    assert [e["wav_stereo"].shape[1] for e in examples] == [2] * len(examples)
    assert all(e["wav16"].dtype == np.int16 and e["wav24"].dtype == np.int64 for e in examples)
    assert all(e["text_ids"].dtype == np.int64 for e in examples)
    steps = [s for e in examples for s in e["steps"]]
    assert len({s["camera"].shape for s in steps}) > 1  # each step has its own size
    assert all(s["clip"].ndim == 4 and s["grid"].dtype == np.uint16 for s in steps)
    assert any(s["inner"] for s in steps) and all(isinstance(s["inner"], list) for s in steps)
    assert any(len(e["episodes"]) for e in examples)
    for e in examples:
        for element in e["episodes"]:  # a Dataset in a Sequence: the Sequence's elements
            assert set(element) == {"x", "t", "c"} and element["x"].dtype == np.int32
        assert isinstance(e["scalars"], list) and all(type(x) is np.float32 for x in e["scalars"])
        assert len(e["group"]["eps"]) == len(e["group"]["y"])
    missing = [e for e in examples if e["opt_int"] == np.iinfo(np.int32).min]
    assert missing and all(e["opt_str"] == b"" and e["opt_bool"] == np.False_ for e in missing)


def test_wav_decoding_as_pydub(monkeypatch):
    stereo = F.Audio((None, 2), np.int16, lazy_decode=True, file_format="wav")
    mono = F.Audio((None,), np.int32, lazy_decode=True, file_format="wav")
    frames = np.array([[1, 2], [-1, -2], [-32768, -32767], [32767, 32767], [5, -6]], np.int16)
    data = _wav_bytes(frames.reshape(-1).tobytes(), channels=2, bits=16)
    assert np.array_equal(audio.decode_audio(data, stereo), frames)
    # audioop.tomono(0.5, 0.5): rounded down; below min + 1 clipped to min
    assert audio.decode_audio(data, mono).tolist() == [1, -2, -32768, 32767, -1]
    one = _wav_bytes(np.array([3, -4], "<i2").tobytes(), channels=1, bits=16)
    assert audio.decode_audio(one, stereo).tolist() == [[3, 3], [-4, -4]]
    eight = _wav_bytes(bytes([0, 128, 255]), channels=1, bits=8)
    assert audio.decode_audio(eight, mono).tolist() == [-128, 0, 127]
    wide = _wav_bytes(bytes([0x01, 0x02, 0x03, 0xFF, 0xFF, 0xFF]), channels=1, bits=24)
    # pydub widens 24 bits to 32 with a sign byte in front: 0x03020100, 0xFFFFFFFF
    assert audio.decode_audio(wide, mono).tolist() == [0x03020100, -1]
    three = _wav_bytes(np.array([3, 4, 9, -3, -4, -9], "<i2").tobytes(), channels=3, bits=16)
    assert audio.decode_audio(three, mono).tolist() == [1 + 1 + 3, -1 - 2 - 3]
    with pytest.raises(ValueError, match="'data' chunk"):
        audio.decode_audio(_wav_bytes(b"", channels=1, bits=16)[:-8], mono)
    with pytest.raises(ValueError, match="not PCM"):
        audio.decode_audio(_wav_bytes(b"", channels=1, bits=16, kind=3), mono)


def _wav_bytes(samples: bytes, channels: int, bits: int, kind: int = 1) -> bytes:
    fmt = struct.pack(
        "<HHIIHH", kind, channels, 8000, 8000 * channels * bits // 8, channels * bits // 8, bits
    )
    body = (
        b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(samples))
        + samples
    )
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_a_damaged_audio_file_names_its_record(own_copy):
    path = os.path.join(own_copy, CATALOG)
    shard = os.path.join(path, "tfds_catalog-train.tfrecord-00001-of-00003")

    def damage(examples):
        examples[1].features.feature["wav16"].bytes_list.value[0] = b"RIFF not a wav file"

    rewrite(shard, damage)
    with pytest.raises(ExampleParseError, match="cannot decode") as error:
        list(tfds.open(path)["train"])
    assert (error.value.path, error.value.record_index, error.value.feature) == (shard, 1, "wav16")
    skipped = tfds.open(path).as_dataset("train", decoders={"wav16": tfds.SkipDecoding()})
    assert b"RIFF not a wav file" in [e["wav16"] for e in skipped]


# ---- refused up front ------------------------------------------------------------------------


def _refused(path, feature, type_name, match, **kwargs):
    ds = tfds.open(path, **kwargs)
    with pytest.raises(tfds.UnknownFeatureError, match=match) as error:
        ds["train"]
    assert (error.value.feature, error.value.type_name) == (feature, type_name)
    clone = pickle.loads(pickle.dumps(error.value))
    assert (clone.feature, clone.reason, clone.remedy, str(clone)) == (
        feature,
        error.value.reason,
        error.value.remedy,
        str(error.value),
    )
    return ds


def _nothing_read(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a shard was read")

    monkeypatch.setattr(tfds._files, "open_records", refuse)
    monkeypatch.setattr(tfds._files, "open_indexed", refuse)


def test_audio_without_a_decoder_is_refused_before_reading(own_copy, monkeypatch):
    path = os.path.join(own_copy, CATALOG)
    edit_features(path, lambda t: node(t, "wav16")["audio"].update(fileFormat="mp3"))
    monkeypatch.setattr(audio, "_have_pydub", lambda: False)
    _nothing_read(monkeypatch)
    ds = _refused(path, "wav16", "Audio", "stored as mp3.*pip install pydub.*decoders=")
    assert ds.info.features["wav16"].file_format == "mp3"
    ds.as_dataset("train", decoders={"wav16": tfds.SkipDecoding()})  # bytes are bytes


def _programs(directory, *names):
    """A directory holding executables of these names (what pydub looks for on PATH)."""
    directory.mkdir(exist_ok=True)
    for name in names:
        program = directory / name
        program.write_text("#!/bin/sh\nexit 1\n")
        program.chmod(0o755)
    return str(directory)


@pytest.mark.posix
def test_audio_without_ffmpeg_is_refused_before_reading(own_copy, monkeypatch, tmp_path):
    pytest.importorskip("pydub")
    path = os.path.join(own_copy, CATALOG)
    edit_features(path, lambda t: node(t, "wav16")["audio"].update(fileFormat="mp3"))
    monkeypatch.chdir(tmp_path)  # (pydub looks in the working directory too)
    monkeypatch.setenv("PATH", _programs(tmp_path / "none"))
    ds = tfds.open(path)
    with pytest.raises(
        tfds.UnknownFeatureError, match="stored as mp3.*finds no ffmpeg .or avconv. nor ffprobe"
    ):
        ds["train"]
    monkeypatch.setenv("PATH", _programs(tmp_path / "half", "ffmpeg"))
    with pytest.raises(tfds.UnknownFeatureError, match="finds no ffprobe .or avprobe.: "):
        ds["train"]
    monkeypatch.setenv("PATH", _programs(tmp_path / "both", "avconv", "avprobe"))
    assert ds["train"] is not None  # pydub would run them (made, not read)
    assert len(ds.as_dataset("train", decoders={"wav16": tfds.SkipDecoding()})) == 6


def test_flac_audio_is_refused_as_tfds_decodes_it_with_tensorflow_io(own_copy, monkeypatch):
    path = os.path.join(own_copy, CATALOG)
    edit_features(path, lambda t: node(t, "wav16")["audio"].update(fileFormat="flac"))
    _nothing_read(monkeypatch)
    ds = _refused(path, "wav16", "Audio", "stored as FLAC.*tensorflow-io's decode_flac")
    ds.as_dataset("train", decoders={"wav16": tfds.SkipDecoding()})  # bytes are bytes


def test_sixteen_bit_color_images_are_refused_when_decoded(own_copy):
    path = os.path.join(own_copy, RLDS)

    def three_channels(tree):
        node(tree, "steps", "[dataset]", "observation", "depth")["image"]["shape"]["dimensions"] = [
            "6",
            "6",
            "3",
        ]

    edit_features(path, three_channels)
    ds = tfds.open(path, decode_images=True)
    with pytest.raises(tfds.UnknownFeatureError, match="16-bit images with several channels"):
        ds["val"]
    assert len(list(tfds.open(path)["val"])) == 5  # bytes are bytes


def test_decoded_values_in_a_dataset_in_a_sequence_are_refused_as_tfds_does(own_copy):
    path = os.path.join(own_copy, CATALOG)

    def image_in_sequence_of_dataset(tree):
        x = node(tree, "episodes", "[sequence]", "[dataset]", "x")
        x.clear()
        x.update(
            {
                "pythonClassName": "tensorflow_datasets.core.features.image_feature.Image",
                "image": {
                    "shape": {"dimensions": ["2", "2", "3"]},
                    "dtype": "uint8",
                    "encodingFormat": "png",
                },
            }
        )

    edit_features(path, image_in_sequence_of_dataset)
    _refused(path, "episodes/x", "Image", "TFDS cannot decode either", decode_images=True)
    assert len(tfds.open(path, decode_images=True, nested="columns")["train"]) == 6  # made


def test_unknown_features_in_steps_are_read_raw_only_as_columns(own_copy):
    path = os.path.join(own_copy, RLDS)
    edit_features(
        path,
        lambda t: node(t, "steps", "[dataset]", "action").update(
            pythonClassName="my_robot.features.Action"
        ),
    )
    skip = {"steps": {"action": tfds.SkipDecoding()}}
    with pytest.raises(tfds.UnknownFeatureError, match="nested Dataset") as error:
        tfds.open(path).as_dataset("val", decoders=skip)
    # SkipDecoding is what was asked for here: the message says what does read it
    assert "nested='columns'" in str(
        error.value
    ) and "are read with decoders={'steps/action': SkipDecoding()} (" not in str(error.value)
    with pytest.raises(tfds.UnknownFeatureError, match="my_robot.features.Action"):
        tfds.open(path)["val"]
    raw = tfds.open(path, nested="columns").as_dataset("val", decoders=skip)[1]
    assert set(raw["steps"]["action"]) == {"steps/action"}


def test_dynamic_tensors_under_two_sequences_are_refused(own_copy):
    path = os.path.join(own_copy, CATALOG)

    def dynamic(tree):
        area = node(tree, "steps", "[dataset]", "objects", "[sequence]", "area")
        area["tensor"] = {
            "shape": {"dimensions": ["-1", "-1"]},
            "dtype": "float32",
            "encoding": "zlib",
        }

    edit_features(path, dynamic)
    for skip in (None, {"steps/objects/area": tfds.SkipDecoding()}):
        with pytest.raises(tfds.UnknownFeatureError, match="several unknown dimensions") as error:
            tfds.open(path).as_dataset("train", decoders=skip)
        message = str(error.value)  # SkipDecoding does not help: not advised
        assert "SkipDecoding() does not help" in message and "dataset.records(split)" in message
        assert "are read with decoders=" not in message
    records = tfds.open(path).records("train")  # what the message advises
    assert list(records) == list(tfds.open(os.path.join(DATA, CATALOG)).records("train"))
    assert records[3] == list(records)[3] and type(records[3]) is bytes and len(records) == 6


# ---- damaged episodes ------------------------------------------------------------------------


def _first_shard(path):
    return os.path.join(path, "rlds_fixture-train.tfrecord-00000-of-00003")


@pytest.mark.parametrize("nested", ["steps", "columns"])
def test_steps_of_different_lengths_name_the_episode(own_copy, nested):
    path = os.path.join(own_copy, RLDS)
    shard = _first_shard(path)
    rewrite(shard, lambda ex: ex[1].features.feature["steps/reward"].float_list.value.pop())
    split = tfds.open(path, nested=nested)["train"]
    original = os.path.join(DATA, RLDS, os.path.basename(shard))
    record = list(read_records(original, copy=True))[1]
    wanted = tfrec_fast.parse_example(record)["episode_metadata/episode_id"]
    position = episode_ids(tfds.open(os.path.join(DATA, RLDS))["train"]).index(wanted[0])
    for read in (lambda: list(split), lambda: split[position]):
        with pytest.raises(ExampleParseError, match="different numbers of elements") as error:
            read()
        assert (error.value.path, error.value.record_index, error.value.feature) == (
            shard,
            1,
            "steps",
        )


@pytest.mark.torch
def test_windows_of_steps_of_different_lengths_are_an_error(own_copy):
    pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import StepsDataset

    path = os.path.join(own_copy, RLDS)
    rewrite(
        _first_shard(path),
        lambda ex: ex[1].features.feature["steps/is_last"].int64_list.value.pop(),
    )
    with pytest.raises(ExampleParseError, match="different numbers of elements"):
        list(StepsDataset(tfds.open(path)["train"], window=2))


@pytest.mark.parametrize("nested", ["steps", "columns"])
def test_inner_datasets_of_different_lengths_name_the_record(own_copy, nested):
    """A Dataset in a Dataset (the catalogue's steps/inner) given a second feature "y": its
    lengths must agree with "x"'s in every step."""
    path = os.path.join(own_copy, CATALOG)

    def add_y(tree):
        inner = node(tree, "steps", "[dataset]", "inner", "[dataset]")["featuresDict"]
        inner["features"]["y"] = dict(inner["features"]["x"])

    edit_features(path, add_y)
    shard = os.path.join(path, "tfds_catalog-train.tfrecord-00000-of-00003")
    keys = ("ragged_flat_values", "ragged_row_lengths_0")

    def y_as_x(examples):
        for example in examples:
            f = example.features.feature
            for key in keys:
                f[f"steps/inner/y/{key}"].CopyFrom(f[f"steps/inner/x/{key}"])

    for k in range(3):
        rewrite(os.path.join(path, f"tfds_catalog-train.tfrecord-0000{k}-of-00003"), y_as_x)
    skip = {"steps": {"grid": tfds.SkipDecoding()}}  # (its tensors differ in shape per step)
    read = tfds.open(path, nested=nested).as_dataset("train", decoders=skip)
    for episode in read:
        if nested == "steps":
            for step in episode["steps"]:
                assert [e["y"] for e in step["inner"]] == [e["x"] for e in step["inner"]]
        else:
            assert (
                episode["steps"]["inner"]["y"].row_splits.tolist()
                == episode["steps"]["inner"]["x"].row_splits.tolist()
            )
    damaged = []

    def move_one_element(examples):  # the same values, one step's element in another step
        for i, example in enumerate(examples):
            lengths = example.features.feature["steps/inner/y/ragged_row_lengths_0"].int64_list
            if list(lengths.value) != list(reversed(lengths.value)):
                lengths.value.reverse()
                damaged.append(i)
                return

    rewrite(shard, move_one_element)
    with pytest.raises(ExampleParseError, match="different numbers of elements") as error:
        list(tfds.open(path, nested=nested).as_dataset("train", decoders=skip))
    assert (error.value.path, error.value.record_index, error.value.feature) == (
        shard,
        damaged[0],
        "steps/inner",
    )


def test_ragged_row_lengths_that_do_not_fit_are_an_error(own_copy):
    path = os.path.join(own_copy, RLDS)
    shard = _first_shard(path)

    def damage(examples):
        lengths = examples[2].features.feature["steps/contacts/ragged_row_lengths_0"]
        lengths.int64_list.value[0] += 5

    rewrite(shard, damage)
    for nested in ("steps", "columns"):
        with pytest.raises(ExampleParseError, match="row lengths") as error:
            list(tfds.open(path, nested=nested)["train"])
        assert (error.value.path, error.value.record_index) == (shard, 2)
        assert error.value.feature.startswith("steps/contacts")


def test_a_damaged_episode_record_names_its_offset(own_copy):
    path = os.path.join(own_copy, RLDS)
    shard = _first_shard(path)
    offsets, _ = tfrec_fast.create_index(shard)
    with open(shard, "r+b") as f:
        f.seek(int(offsets[2]) + 40)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x55]))
    with pytest.raises(DataLossError) as error:
        list(tfds.open(path)["train"])
    assert (error.value.path, error.value.record_index, error.value.offset) == (
        shard,
        2,
        offsets[2],
    )


# ---- entering a shard in the middle ----------------------------------------------------------


def test_a_kept_index_enters_shards_in_the_middle(own_copy, monkeypatch):
    path = os.path.join(own_copy, RLDS)
    fresh = os.path.join(own_copy, "fresh")
    shutil.copytree(path, fresh)  # no index kept: read from the start
    tfds.open(path)["train"].get_batch(range(10))  # keeps every shard's index beside it
    tfds.open(path)["val"].get_batch(range(5))
    opened, indexed = [], []
    real_open, real_indexed = tfds._files.open_records, tfds._files.open_indexed
    monkeypatch.setattr(
        tfds._files, "open_records", lambda p, **k: opened.append(p.name) or real_open(p, **k)
    )
    monkeypatch.setattr(
        tfds._files,
        "open_indexed",
        lambda p, *a, **k: indexed.append(p.name) or real_indexed(p, *a, **k),
    )
    for spec in ("train[1:]", "train[5:9]", "train[-1:]", "val[1:]+train[4:]"):
        ours = list(tfds.open(path, decode_images=True)[spec])
        theirs = list(tfds.open(fresh, decode_images=True)[spec])
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert not _tfds_dump.differences(a, b)
        entered = [i for i in tfds.open(path)[spec]._instructions if i.skip]
        assert entered
        for ins in entered:
            assert ins.path in indexed and ins.path not in opened
            fresh_shard = os.path.join(fresh, os.path.basename(ins.path))
            assert fresh_shard in opened and fresh_shard not in indexed
        opened.clear()
        indexed.clear()


def test_a_stale_kept_index_is_not_used_to_enter_a_shard(own_copy):
    path = os.path.join(own_copy, RLDS)
    expected = episode_ids(tfds.open(path)["train[1:3]"])
    with open(_first_shard(path) + ".idx", "w") as f:
        f.write("0 10\n10 10\n20 10\n")  # three records, but not this file's
    assert episode_ids(tfds.open(path)["train[1:3]"]) == expected


# ---- TFDS's names: download, try_gcs, URLs --------------------------------------------------


def test_download_says_preparing_needs_tfds(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not download or build.*tfds build rlds_x"):
        tfds.load("rlds_x", split="train", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        tfds.load("rlds_x", split="train", data_dir=tmp_path, download=False)
    assert "tfds build" not in str(error.value)


def test_try_gcs_reads_the_bucket_when_it_holds_the_dataset(data_dir, tmp_path, monkeypatch):
    """TFDS's try_gcs, with the bucket's URL pointed at a directory (tests of the bucket
    itself, through gcsfs, are in test_tfds_remote.py)."""
    assert tfds.GCS_DATA_DIR == "gs://tfds-data/datasets" == tfds.gcs_data_dir()
    monkeypatch.setenv("TFREC_FAST_TFDS_GCS_DATA_DIR", data_dir)
    assert tfds.gcs_data_dir() == data_dir
    split = tfds.load("rlds_fixture", split="val", try_gcs=True)
    assert episode_ids(split) == episode_ids(tfds.open(os.path.join(data_dir, RLDS))["val"])
    assert tfds.builder("rlds_fixture", try_gcs=True).data_dir == os.path.join(data_dir, RLDS)
    with pytest.raises(ValueError, match="Cannot have both `try_gcs=True` and `data_dir="):
        tfds.load("rlds_fixture", split="train", try_gcs=True, data_dir=data_dir)
    # not in the bucket: the data dir, as TFDS
    own = tmp_path / "own"
    shutil.copytree(os.path.join(data_dir, "tfrec_ordered"), own / "tfrec_ordered_x")
    monkeypatch.setenv("TFREC_FAST_TFDS_GCS_DATA_DIR", str(tmp_path / "empty"))
    assert len(tfds.load("tfrec_ordered_x", split="train", try_gcs=True, data_dir=own)) == 40
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "nothing"))
    with pytest.raises(FileNotFoundError, match="tfds build rlds_fixture"):
        tfds.load("rlds_fixture", split="train", try_gcs=True)


# ---- torch: the steps view -------------------------------------------------------------------


def _all_steps(ref):
    """(episode index, step index) of every step of the dump's episodes."""
    return [(e, t) for e, episode in enumerate(ref) for t in range(len(episode["steps"]))]


def _key(item):
    return int(item["episode_index"]), int(item["step_index"])


@pytest.mark.torch
def test_steps_one_by_one(data_dir, dumps):
    pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import StepsDataset

    split = tfds.open(os.path.join(data_dir, RLDS), decode_images=True)["train"]
    ref = dumps[RLDS]["train/decoded"]
    items = list(StepsDataset(split))
    assert [_key(i) for i in items] == _all_steps(ref)
    for item in items:
        e, t = _key(item)
        assert set(item) == {"episode_metadata", "episode_index", "step_index", "steps"}
        assert_same(item["steps"], ref[e]["steps"][t])
        assert_same(item["episode_metadata"], ref[e]["episode_metadata"])


@pytest.mark.torch
@pytest.mark.parametrize("window, stride", [(3, 1), (2, 2), (6, 1)])
def test_windows_of_consecutive_steps_never_cross_episodes(data_dir, dumps, window, stride):
    pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import StepsDataset

    split = tfds.open(os.path.join(data_dir, RLDS), decode_images=True)["val"]
    ref = dumps[RLDS]["val/decoded"]
    items = list(StepsDataset(split, window=window, stride=stride))
    expected = [
        (e, t)
        for e, episode in enumerate(ref)
        for t in range(0, len(episode["steps"]) - window + 1, stride)
    ]
    assert [_key(i) for i in items] == expected and expected
    for item in items:
        e, t = _key(item)
        steps = item["steps"]
        assert steps["action"].shape == (window, 4)
        assert steps["observation"]["image"].shape == (window, 12, 12, 3)
        assert isinstance(steps["contacts"], tfrec_fast.Ragged) and len(steps["contacts"]) == window
        for k in range(window):
            want = ref[e]["steps"][t + k]
            assert_same(
                {"wrist_image": steps["observation"]["wrist_image"][k]},
                {"wrist_image": want["observation"]["wrist_image"]},
            )
            assert steps["language_instruction"][k] == want["language_instruction"]
            assert np.array_equal(steps["contacts"][k], want["contacts"])
        assert steps["contacts"].row_splits[0] == 0  # its own values only
        assert len(steps["contacts"].values) == sum(len(x) for x in steps["contacts"])


@pytest.mark.torch
def test_workers_and_ranks_split_by_episode(data_dir, dumps):
    torch = pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import StepsDataset, collate

    split = tfds.open(os.path.join(data_dir, RLDS))["train"]
    everything = _all_steps(dumps[RLDS]["train/encoded"])
    seen = []
    per_rank = []
    for rank in range(3):
        ds = StepsDataset(split, rank=rank, world_size=3, uneven="drop")
        loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=collate)
        keys = [
            (int(e), int(t))
            for batch in loader
            for e, t in zip(batch["episode_index"], batch["step_index"])
        ]
        episodes = {e for e, _ in keys}
        per_rank.append(episodes)
        assert len(episodes) == 3  # 10 episodes, 3 ranks, the last dropped
        for e in episodes:  # every step of an episode on one rank
            assert sorted(t for x, t in keys if x == e) == [t for x, t in everything if x == e]
        seen.extend(keys)
    assert len(set(seen)) == len(seen)
    assert not (per_rank[0] & per_rank[1]) and not (per_rank[1] & per_rank[2])
    padded = [StepsDataset(split, rank=r, world_size=3).episodes() for r in range(3)]
    assert [len(p) for p in padded] == [4, 4, 4]
    assert sorted(np.concatenate(padded).tolist()) == sorted(list(range(10)) + [0, 1])


@pytest.mark.torch
def test_shuffles_are_reproducible_per_seed_and_epoch(data_dir, dumps):
    pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import StepsDataset

    split = tfds.open(os.path.join(data_dir, RLDS))["train"]
    everything = sorted(_all_steps(dumps[RLDS]["train/encoded"]))
    ds = StepsDataset(split, shuffle_buffer=16, seed=5)
    first = [_key(i) for i in ds]
    assert sorted(first) == everything and first != everything
    assert [_key(i) for i in StepsDataset(split, shuffle_buffer=16, seed=5)] == first
    ds.set_epoch(1)
    second = [_key(i) for i in ds]
    assert sorted(second) == everything and second != first
    episodes = StepsDataset(split, shuffle_episodes=True, seed=5)
    order = [e for e, _ in (_key(i) for i in episodes)]
    assert sorted(set(order)) == list(range(10)) and order != sorted(order)
    with pytest.raises(ValueError, match="seed="):
        list(StepsDataset(split, shuffle_episodes=True, rank=0, world_size=2))


@pytest.mark.torch
def test_repeat_runs_epoch_after_epoch(data_dir):
    pytest.importorskip("torch")
    import itertools

    from tfrec_fast.tfds.torch import StepsDataset

    split = tfds.open(os.path.join(data_dir, RLDS))["val"]
    n = len(list(StepsDataset(split)))
    items = list(
        itertools.islice(StepsDataset(split, repeat=True, shuffle_episodes=True, seed=1), 3 * n)
    )
    assert len(items) == 3 * n
    epochs = [sorted(_key(i) for i in items[k * n : (k + 1) * n]) for k in range(3)]
    assert epochs[0] == epochs[1] == epochs[2]


@pytest.mark.torch
def test_steps_dataset_arguments_and_collate(data_dir):
    torch = pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import StepsDataset, collate

    split = tfds.open(os.path.join(data_dir, RLDS), decode_images=True)["val"]
    with pytest.raises(ValueError, match="not a top-level Dataset"):
        StepsDataset(split, steps="episode_metadata")
    with pytest.raises(ValueError, match="2 top-level Dataset features"):
        StepsDataset(tfds.open(os.path.join(data_dir, CATALOG))["train"])
    for bad in (
        dict(window=0),
        dict(stride=0),
        dict(uneven="spread"),
        dict(rank=1),
        dict(rank=2, world_size=2),
    ):
        with pytest.raises(ValueError):
            StepsDataset(split, **bad)
    with pytest.raises(ValueError, match="as_supervised"):
        StepsDataset(
            tfds.open(os.path.join(data_dir, "tfrec_fixture/1.2.0")).as_dataset(
                "train", as_supervised=True
            )
        )
    items = list(split.to_torch_steps(transform=lambda item: item["steps"]["observation"]))
    batch = collate(items[:3])
    assert batch["image"].shape == (3, 12, 12, 3) and batch["image"].dtype == torch.uint8
    assert batch["depth"].dtype == torch.uint16
    mixed = collate([{"a": np.zeros(2), "b": b"x", "c": 1}, {"a": np.zeros(3), "b": b"y", "c": 2}])
    assert isinstance(mixed["a"], list) and mixed["b"] == [b"x", b"y"]
    assert mixed["c"].tolist() == [1, 2]
    assert "windows of 2 steps" in repr(StepsDataset(split, window=2))
