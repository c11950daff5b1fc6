"""tfrec_fast.tfds: datasets prepared by TensorFlow Datasets, read without TensorFlow.

The fixture (tests/data/tfds, made by tools/make_tfds_fixture.py with tensorflow-datasets)
holds two built datasets and what ``tfds.as_numpy`` gave for every split; every value read
here is compared with it. test_tfds_peer.py rebuilds it and compares with TFDS live.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import shutil
import tracemalloc
import zlib

import _tfds_dump
import numpy as np
import pytest
from _tfds_fixtures import (
    FIXTURE,
    HAVE_SIMPLEJPEG,
    JPEG_TOLERANCE,
    ORDERED,
    assert_same,
    data_dir,
    load_dumps,
    own_copy,
    read_json,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrec_fast
import tfrec_fast.tfds as tfds
import tfrec_fast.tfds.indexes
from tfrec_fast import DataLossError, ExampleParseError, TFRecordWriter, read_records
from tfrec_fast.tfds import features as F
from tfrec_fast.tfds.splits import interleave_runs

__all__ = ["data_dir", "own_copy"]  # fixtures, imported


@pytest.fixture(scope="module")
def dumps():
    return load_dumps(FIXTURE, ORDERED)


def meta_ids(examples):
    return [int(e["meta"]["id"]) for e in examples]


# ---- values ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [FIXTURE, ORDERED])
@pytest.mark.parametrize("decoded", [True, False])
def test_every_value_is_what_tfds_as_numpy_gave(data_dir, dumps, name, decoded):
    ds = tfds.open(os.path.join(data_dir, name), decode_images=decoded)
    for split in ds.info.splits:
        ref = dumps[name][_tfds_dump.key(split, decoded)]
        ours = list(ds[split])
        assert len(ours) == len(ds[split]) == len(ref)
        for i, (a, b) in enumerate(zip(ours, ref)):
            problems = _tfds_dump.differences(a, b, tolerance=JPEG_TOLERANCE)
            assert not problems, (split, i, problems[:10])


def test_value_types_as_tfds_gives_them(data_dir):
    ex = tfds.open(os.path.join(data_dir, FIXTURE), decode_images=True)["train"][0]
    assert type(ex["label"]) is np.int64 and type(ex["flag"]) is np.bool_
    assert type(ex["u64"]) is np.uint64 and type(ex["maybe"]) is np.int32
    assert type(ex["text"]) is bytes and type(ex["translation"]["fr"]) is bytes
    assert ex["image"].dtype == np.uint8 and ex["image"].ndim == 3 and ex["image"].shape[2] == 3
    assert ex["depth"].dtype == np.uint16 and ex["depth"].shape == (4, 3, 1)
    assert ex["heat"].dtype == np.float32 and ex["heat"].shape == (3, 2, 1)
    assert ex["bbox"].dtype == np.float32 and ex["bbox"].shape == (4,)
    assert ex["objects"]["bbox"].dtype == np.float32 and ex["objects"]["bbox"].shape[1:] == (4,)
    assert ex["objects"]["name"].dtype == object and ex["words"].dtype == object
    assert ex["f64"].dtype == np.float64 and ex["i16_rows"].dtype == np.int16
    assert ex["video"].shape[1:] == (4, 4, 3) and ex["steps"].shape == (3,)
    assert isinstance(ex["tokens"], tfrec_fast.Ragged) and isinstance(
        ex["phrases"], tfrec_fast.Ragged
    )
    assert ex["pairs"].shape == (2, 3, 3, 3) and ex["segmentation"].shape == (4, 4, 1)
    assert ex["audio"].dtype == np.int16 and ex["languages"]["language"].dtype == object
    assert all(a.flags.writeable for a in (ex["u8_bytes"], ex["f16_zlib"], ex["image"]))
    encoded = tfds.open(os.path.join(data_dir, FIXTURE))["train"][0]
    assert encoded["image"][:4] == b"\x89PNG" and encoded["photo"][:2] == b"\xff\xd8"
    assert encoded["video"].dtype == object  # a Sequence of encoded frames


@pytest.mark.skipif(not HAVE_SIMPLEJPEG, reason="simplejpeg not installed")
def test_jpeg_pixels_equal_tensorflows_with_simplejpeg(data_dir, dumps):
    ds = tfds.open(os.path.join(data_dir, FIXTURE), decode_images=True)
    for ours, ref in zip(ds["train"], dumps[FIXTURE]["train/decoded"]):
        assert ours["photo"].tobytes() == ref["photo"].tobytes()


def test_jpeg_pixels_decoded_by_pillow_differ_by_a_few_levels_at_most(data_dir, dumps, monkeypatch):
    pytest.importorskip("PIL")
    monkeypatch.setitem(__import__("sys").modules, "simplejpeg", None)  # as if not installed
    ds = tfds.open(os.path.join(data_dir, FIXTURE), decode_images=True)
    for ours, ref in zip(ds["test"], dumps[FIXTURE]["test/decoded"]):
        assert ours["photo"].shape == ref["photo"].shape
        assert np.abs(ours["photo"].astype(int) - ref["photo"]).max() <= 16


def test_images_decoded_on_the_thread_pool(data_dir, dumps, monkeypatch):
    # every image, however small
    monkeypatch.setattr("tfrec_fast.tfds.leaf_decoders.PARALLEL_BYTES", 0)
    ds = tfds.open(os.path.join(data_dir, FIXTURE), decode_images=True)
    for ours, ref in zip(ds["test"], dumps[FIXTURE]["test/decoded"]):
        assert_same(ours, ref)


@pytest.mark.parametrize("pool", [False, True])
def test_an_image_that_does_not_decode_names_its_record(own_copy, monkeypatch, pool):
    if pool:
        monkeypatch.setattr("tfrec_fast.tfds.leaf_decoders.PARALLEL_BYTES", 0)
    path = os.path.join(own_copy, ORDERED)
    shard = os.path.join(path, "tfrec_ordered-train.tfrecord-00001-of-00003")
    records = list(read_records(shard, copy=True))
    example = tfrec_fast.proto.Example.FromString(records[6])
    example.features.feature["image"].bytes_list.value[0] = b"\x89PNG not really"
    records[6] = example.SerializeToString()
    with TFRecordWriter(shard) as w:
        for record in records:
            w.write(record)
    assert len(list(tfds.open(path)["train"])) == 40  # bytes are bytes
    split = tfds.open(path, decode_images=True)["train"]
    for attempt in (lambda: list(split), lambda: split[13 + 6]):
        with pytest.raises(ExampleParseError, match="cannot decode") as error:
            attempt()
        assert (error.value.path, error.value.record_index, error.value.feature) == (
            shard,
            6,
            "image",
        )


def test_skip_decoding_per_feature(data_dir, dumps):
    ds = tfds.open(os.path.join(data_dir, FIXTURE), decode_images=True)
    split = ds.as_dataset(
        "test",
        decoders={"image": tfds.SkipDecoding(), "meta": {"info": {"score": tfds.SkipDecoding()}}},
    )
    for ours, decoded, encoded in zip(
        split, dumps[FIXTURE]["test/decoded"], dumps[FIXTURE]["test/encoded"]
    ):
        assert ours["image"] == encoded["image"]
        assert_same(ours["photo"], decoded["photo"], {"": JPEG_TOLERANCE.get("/photo", 0)})
        assert_same(ours["meta"], decoded["meta"])
    with pytest.raises(KeyError, match="'nope'"):
        ds.as_dataset("test", decoders={"nope": tfds.SkipDecoding()})
    with pytest.raises(TypeError, match="only SkipDecoding"):
        ds.as_dataset("test", decoders={"image": lambda x: x})


def test_skip_decoding_keeps_bytes_of_encoded_tensors(data_dir):
    ds = tfds.open(os.path.join(data_dir, FIXTURE))
    skipped = ds.as_dataset(
        "train", decoders={"u8_bytes": tfds.SkipDecoding(), "f16_zlib": tfds.SkipDecoding()}
    )
    for plain, raw in zip(ds["train"], skipped):
        assert raw["u8_bytes"] == plain["u8_bytes"].tobytes()
        assert raw["f16_zlib"]["shape"].dtype == np.int32
        assert tuple(raw["f16_zlib"]["shape"]) == plain["f16_zlib"].shape


def _zlib_of_zeros(n: int) -> bytes:
    """zlib data inflating to ``n`` zero bytes, made without holding them."""
    deflater, chunk = zlib.compressobj(9), bytes(1 << 20)
    parts = [deflater.compress(chunk[: min(len(chunk), n - k)]) for k in range(0, n, len(chunk))]
    return b"".join(parts) + deflater.flush()


def test_zlib_tensors_inflate_to_their_shape_and_no_more():
    from tfrec_fast.tfds.leaf_decoders import element_decoder

    decode = element_decoder(F.Tensor((4, 8), np.float32, encoding="zlib"))
    values = np.arange(32, dtype="<f4").reshape(4, 8)
    assert np.array_equal(decode(zlib.compress(values.tobytes())), values)
    with pytest.raises(ValueError, match="inflates to more than the 128 bytes"):
        decode(zlib.compress(values.tobytes() + b"\0"))
    with pytest.raises(ValueError, match="cut short"):
        decode(zlib.compress(values.tobytes())[:-6])
    dynamic = element_decoder(F.Tensor((None, None), np.uint16, encoding="zlib"))
    with pytest.raises(ValueError, match="inflates to more than the 12 bytes"):
        dynamic(_zlib_of_zeros(1 << 24), (2, 3))


def test_a_zlib_bomb_is_refused_without_inflating_it(own_copy):
    path = os.path.join(own_copy, FIXTURE)
    shard = os.path.join(path, "tfrec_fixture-train.tfrecord-00001-of-00003")
    bomb = _zlib_of_zeros(1 << 30)  # 1 GiB of zeros in about 1 MB
    records = list(read_records(shard, copy=True))
    example = tfrec_fast.proto.Example.FromString(records[4])
    example.features.feature["f16_zlib/value"].bytes_list.value[0] = bomb
    records[4] = example.SerializeToString()
    with TFRecordWriter(shard) as w:
        for record in records:
            w.write(record)
    split = tfds.open(path)["train"]
    tracemalloc.start()
    try:
        with pytest.raises(ExampleParseError, match="inflates to more than") as error:
            list(split)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (error.value.path, error.value.record_index, error.value.feature) == (
        shard,
        4,
        "f16_zlib/value",
    )
    assert peak < 64 << 20  # the bomb itself is 1 MB; inflated it would be 1 GiB


def test_as_supervised_pairs(data_dir, dumps):
    ds = tfds.open(os.path.join(data_dir, FIXTURE), decode_images=True)
    assert ds.info.supervised_keys == ("image", "label")
    pairs = list(ds.as_dataset("test", as_supervised=True))
    for (image, label), ref in zip(pairs, dumps[FIXTURE]["test/decoded"]):
        assert_same(image, ref["image"])
        assert_same(label, ref["label"])
    assert ds.as_dataset("test", as_supervised=True)[3][1] == pairs[3][1]
    with pytest.raises(ValueError, match="supervised"):
        tfds.open(os.path.join(data_dir, ORDERED)).as_dataset("train", as_supervised=True)


# ---- metadata --------------------------------------------------------------------------------


def test_info(data_dir):
    ds = tfds.open(os.path.join(data_dir, FIXTURE))
    info = ds.info
    assert (info.name, info.version, info.full_name) == (
        "tfrec_fixture",
        "1.2.0",
        "tfrec_fixture/1.2.0",
    )
    assert info.description.startswith("A small dataset") and "tfrec_fixture" in info.citation
    assert info.homepage == "https://example.org/tfrec_fast"
    assert {k: v.shard_lengths for k, v in info.splits.items()} == {
        "train": [23, 24, 23],
        "test": [7, 6, 7],
    }
    assert info.splits["train"].num_examples == 70 and info.splits["test"].num_shards == 3
    assert [os.path.basename(f) for f in info.splits["test"].filenames] == [
        f"tfrec_fixture-test.tfrecord-0000{i}-of-00003" for i in range(3)
    ]
    assert set(ds.splits) == {"train", "test"} and len(ds.splits["test"]) == 20
    features = info.features
    assert isinstance(features, F.FeaturesDict)
    assert features["label"].names == ["cat", "dog", "bird"]
    assert features["label"].int2str(2) == "bird" and features["label"].str2int("dog") == 1
    assert features["meta"]["info"]["tag"].names == ["low", "high"]
    assert features["meta/info/tag"].num_classes == 2
    assert features["objects"]["kind"].names == ["car", "tree"]
    kinds = {k: type(v).__name__ for k, v in features.items()}
    assert (
        kinds["image"] == "Image"
        and kinds["video"] == "Video"
        and kinds["bbox"] == "BBoxFeature"
        and kinds["maybe"] == "Scalar"
        and kinds["translation"] == "Translation"
    )
    assert features["photo"].encoding_format == "jpeg" and features["depth"].dtype == np.uint16
    assert features["f16_zlib"].shape == (None, None) and features["f16_zlib"].encoding == "zlib"
    assert features["tokens"].feature.feature.dtype == np.int64
    assert features["steps"].length == 3 and features["maybe"].optional
    assert features["segmentation"].names == ["background", "thing"]
    assert isinstance(features["languages"], F.TranslationVariableLanguages)
    assert features["translation"].languages == ["en", "fr"]
    assert features["audio"].sample_rate == 8000 and features["audio"].dtype == np.int16
    assert features["pairs"].length == 2 and features["pairs"].feature.shape == (3, 3, 3)
    assert "ClassLabel" in repr(features) and "tfrec_fixture" in repr(info)


def test_len_comes_from_shard_lengths_without_reading(own_copy):
    path = os.path.join(own_copy, FIXTURE)
    for shard in os.listdir(path):
        if ".tfrecord-" in shard:
            with open(os.path.join(path, shard), "r+b") as f:
                f.write(b"\xff" * 16)  # no longer a TFRecord file
    ds = tfds.open(path)
    assert len(ds["train"]) == 70 and len(ds["train[:10%]+test"]) == 27
    with pytest.raises(DataLossError):
        next(iter(ds["train"]))


def test_locate_by_data_dir_and_name(data_dir):
    assert tfds.open(data_dir, name="tfrec_fixture").info.version == "1.2.0"
    assert tfds.open(data_dir, name="tfrec_fixture:1.2.0").info.version == "1.2.0"
    # as TFDS users write it: the name, with data_dir=
    assert tfds.open("tfrec_fixture", data_dir=data_dir).info.version == "1.2.0"
    assert tfds.open("tfrec_fixture:1.2.0", data_dir=data_dir).info.data_dir == os.path.join(
        data_dir, "tfrec_fixture", "1.2.0"
    )
    with pytest.raises(TypeError):
        tfds.open("tfrec_fixture", name="tfrec_fixture", data_dir=data_dir)
    assert tfds.open(os.path.join(data_dir, "tfrec_fixture")).data_dir.endswith("1.2.0")
    assert tfds.open(os.path.join(data_dir, "tfrec_fixture:1.2.0")).info.name == "tfrec_fixture"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tfds.open(data_dir, name="tfrec_fixture:9.9.9")


def test_newest_version_and_configs(own_copy):
    base = os.path.join(own_copy, "tfrec_ordered")
    shutil.copytree(os.path.join(base, "0.1.0"), os.path.join(base, "0.10.0"))
    assert tfds.open(base).data_dir.endswith("0.10.0")  # numeric, not lexical, order
    configs = os.path.join(own_copy, "multi")
    for config in ("small", "large"):
        shutil.copytree(os.path.join(base, "0.1.0"), os.path.join(configs, config, "0.1.0"))
    with pytest.raises(FileNotFoundError, match=r"configs: open one of \['large', 'small'\]"):
        tfds.open(configs)
    assert tfds.open(own_copy, name="multi/small").info.name == "tfrec_ordered"


# ---- errors ----------------------------------------------------------------------------------


def test_missing_features_json(own_copy):
    path = os.path.join(own_copy, FIXTURE)
    os.remove(os.path.join(path, "features.json"))
    with pytest.raises(FileNotFoundError, match="features.json is missing") as info:
        tfds.open(path)
    assert info.value.errno == errno.ENOENT
    assert info.value.filename == os.path.join(path, "features.json")


def test_not_a_dataset_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset_info.json"):
        tfds.open(tmp_path)


def test_malformed_and_unsupported_metadata(own_copy):
    path = os.path.join(own_copy, ORDERED)
    info_path = os.path.join(path, "dataset_info.json")
    info = read_json(info_path)
    with open(info_path, "w") as f:
        f.write("{not json")
    with pytest.raises(tfds.DatasetInfoError, match="not valid JSON") as error:
        tfds.open(path)
    assert error.value.where == info_path
    info["fileFormat"] = "array_record"
    with open(info_path, "w") as f:
        json.dump(info, f)
    with pytest.raises(tfds.DatasetInfoError, match="stored as array_record, not TFRecord"):
        tfds.open(path)
    info["fileFormat"] = "tfrecord"
    info["splits"][0]["shardLengths"] = ["13", "x", "13"]
    with open(info_path, "w") as f:
        json.dump(info, f)
    with pytest.raises(tfds.DatasetInfoError, match="'x'"):
        tfds.open(path)


def _rename_feature_class(path, feature, class_name):
    features_path = os.path.join(path, "features.json")
    tree = read_json(features_path)
    tree["featuresDict"]["features"][feature]["pythonClassName"] = class_name
    with open(features_path, "w") as f:
        json.dump(tree, f)


def test_unknown_feature_type_names_the_type_and_keeps_raw_values(own_copy, dumps):
    path = os.path.join(own_copy, FIXTURE)
    _rename_feature_class(path, "bbox", "my_project.features.FancyBox")
    ds = tfds.open(path)
    assert isinstance(ds.info.features["bbox"], F.UnknownFeature)
    with pytest.raises(
        tfds.UnknownFeatureError, match="'bbox' is a my_project.features.FancyBox"
    ) as error:
        ds["train"]
    assert (error.value.feature, error.value.type_name) == ("bbox", "my_project.features.FancyBox")
    assert pickle.loads(pickle.dumps(error.value)).feature == "bbox"
    assert "dataset.records(split)" in str(error.value)
    assert len(ds.records("train")) == 70 and type(ds.records("train")[0]) is bytes
    raw = list(ds.as_dataset("train", decoders={"bbox": tfds.SkipDecoding()}))
    for ours, ref in zip(raw, dumps[FIXTURE]["train/encoded"]):
        assert list(ours["bbox"]) == ["bbox"]
        assert np.array_equal(ours["bbox"]["bbox"], ref["bbox"])
        assert ours["label"] == ref["label"]
    records = list(ds.as_dataset("train", decoders={"bbox": tfds.SkipDecoding()}).records())
    assert (
        len(records) == 70
        and tfrec_fast.parse_example(records[0])["bbox"] == raw[0]["bbox"]["bbox"].tolist()
    )


def test_missing_shard(own_copy):
    path = os.path.join(own_copy, FIXTURE)
    shard = os.path.join(path, "tfrec_fixture-train.tfrecord-00001-of-00003")
    os.remove(shard)
    ds = tfds.open(path)
    assert len(ds["test"]) == 20  # other splits read on
    with pytest.raises(FileNotFoundError, match="shard 1 of the 3 of split 'train'") as error:
        ds["train"]
    assert error.value.filename == shard
    assert len(ds["train[:23]"]) == 23  # a slice not needing it


def _set_shard_lengths(path, split, lengths):
    info_path = os.path.join(path, "dataset_info.json")
    info = read_json(info_path)
    for entry in info["splits"]:
        if entry["name"] == split:
            entry["shardLengths"] = [str(n) for n in lengths]
    with open(info_path, "w") as f:
        json.dump(info, f)


def test_shard_lengths_larger_than_the_files(own_copy):
    path = os.path.join(own_copy, ORDERED)
    _set_shard_lengths(path, "train", [13, 15, 13])
    shard = os.path.join(path, "tfrec_ordered-train.tfrecord-00001-of-00003")
    split = tfds.open(path)["train"]
    assert len(split) == 41
    seen = []
    with pytest.raises(DataLossError) as error:
        for example in split:
            seen.append(int(example["index"]))
    assert seen == list(range(27))  # every record there was, first
    e = error.value
    assert (e.path, e.record_index, e.reason) == (shard, 14, "shard_lengths")
    assert e.offset == os.path.getsize(shard) and "holds 15 records" in str(e)
    with pytest.raises(DataLossError) as error:
        split[20]
    assert (error.value.path, error.value.record_index) == (shard, 14)


def test_shard_lengths_smaller_than_the_files(own_copy):
    path = os.path.join(own_copy, ORDERED)
    _set_shard_lengths(path, "train", [12, 14, 13])
    shard = os.path.join(path, "tfrec_ordered-train.tfrecord-00000-of-00003")
    split = tfds.open(path)["train"]
    seen = []
    with pytest.raises(DataLossError) as error:
        for example in split:
            seen.append(int(example["index"]))
    assert seen == list(range(12))
    e = error.value
    assert (e.path, e.record_index, e.reason) == (shard, 12, "shard_lengths")
    offsets, _ = tfrec_fast.create_index(shard)
    assert e.offset == offsets[12] and "holds more" in str(e)
    with pytest.raises(DataLossError, match="holds more"):
        split[0]


def test_damaged_shard_names_file_and_record(own_copy):
    path = os.path.join(own_copy, ORDERED)
    shard = os.path.join(path, "tfrec_ordered-train.tfrecord-00002-of-00003")
    offsets, _ = tfrec_fast.create_index(shard)
    with open(shard, "r+b") as f:
        f.seek(int(offsets[5] + 20))
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(DataLossError) as error:
        list(tfds.open(path)["train"])
    assert (error.value.path, error.value.record_index, error.value.offset) == (
        shard,
        5,
        offsets[5],
    )
    with pytest.raises(DataLossError):
        tfds.open(path)["train"][27 + 5]


def test_record_that_is_not_an_example(own_copy):
    path = os.path.join(own_copy, ORDERED)
    shard = os.path.join(path, "tfrec_ordered-train.tfrecord-00001-of-00003")
    records = list(read_records(shard, copy=True))
    records[4] = b"\x0a\x05not an example"
    with TFRecordWriter(shard) as w:
        for record in records:
            w.write(record)
    split = tfds.open(path)["train"]
    with pytest.raises(ExampleParseError) as error:
        list(split)
    assert (error.value.path, error.value.record_index) == (shard, 4)
    with pytest.raises(ExampleParseError) as error:
        split.get_batch([0, 13 + 4])
    assert (error.value.path, error.value.record_index) == (shard, 4)


def test_a_missing_required_feature_is_named(own_copy):
    path = os.path.join(own_copy, ORDERED)
    shard = os.path.join(path, "tfrec_ordered-train.tfrecord-00000-of-00003")
    records = list(read_records(shard, copy=True))
    example = tfrec_fast.proto.Example.FromString(records[2])
    del example.features.feature["index"]
    records[2] = example.SerializeToString()
    with TFRecordWriter(shard) as w:
        for record in records:
            w.write(record)
    with pytest.raises(ExampleParseError) as error:
        list(tfds.open(path)["train"])
    assert (error.value.path, error.value.record_index, error.value.feature) == (shard, 2, "index")


# ---- splits and order ------------------------------------------------------------------------


def _tf_interleave(lengths, cycle, block):
    """TensorFlow's InterleaveDatasetOp iterator, element by element: (input, element)."""
    out, slots = [], [None] * cycle
    index = block_index = opened = next_input = 0
    end_of_input = False
    while not end_of_input or opened:
        if slots[index] is not None:
            k, pos = slots[index]
            if pos < lengths[k]:
                out.append((k, pos))
                slots[index][1] += 1
                block_index += 1
                if block_index == block:
                    index, block_index = (index + 1) % cycle, 0
                continue
            slots[index] = None
            opened -= 1
            index, block_index = (index + 1) % cycle, 0
        elif not end_of_input:
            if next_input < len(lengths):
                slots[index] = [next_input, 0]
                next_input += 1
                opened += 1
            else:
                end_of_input = True
        else:
            index, block_index = (index + 1) % cycle, 0
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=20), st.integers(1, 5), st.integers(1, 6))
def test_interleave_runs_follow_tensorflows_interleave(lengths, cycle, block):
    runs = interleave_runs(lengths, cycle, block)
    expanded = [(k, start + j) for k, start, count in runs.tolist() for j in range(count)]
    assert expanded == _tf_interleave(lengths, cycle, block)


def _file_order_ids(path, split):
    """meta/id of each record, shard by shard (file order)."""
    info = tfds.open(path).info
    ids = []
    for shard in info.splits[split].filenames:
        for record in read_records(shard):
            ids.append(
                tfrec_fast.parse_example(record, {"meta/id": tfrec_fast.FixedLen()})[
                    "meta/id"
                ].item()
            )
    return ids


def _expected_ids(path, parts):
    """The ids TFDS's order gives for [(split, from, to)]: each shard's part, interleaved."""
    info = tfds.open(path).info
    pieces = []
    for split, a, b in parts:
        ids = _file_order_ids(path, split)
        start = 0
        for length in info.splits[split].shard_lengths:
            lo, hi = max(a, start), min(b, start + length)
            if lo < hi:
                pieces.append(ids[lo:hi])
            start += length
    return [pieces[k][pos] for k, pos in _tf_interleave([len(p) for p in pieces], 16, 16)]


@pytest.mark.parametrize(
    "spec, parts",
    [
        ("train", [("train", 0, 70)]),
        ("train[:10%]", [("train", 0, 7)]),
        ("train[10:50]", [("train", 10, 50)]),
        ("train[-5:]", [("train", 65, 70)]),
        ("train[:-60]", [("train", 0, 10)]),
        ("train[25%:75%]", [("train", 18, 52)]),  # 17.5 -> 18 and 52.5 -> 52: halves to even
        ("train[5%:15%]", [("train", 4, 10)]),  # 3.5 -> 4, 10.5 -> 10
        ("train[1shard]", [("train", 23, 47)]),
        ("train[1shard:]", [("train", 23, 70)]),
        ("train[:-1shard]", [("train", 0, 47)]),
        ("test[:50%] + train[60:]", [("test", 0, 10), ("train", 60, 70)]),
        ("all", [("train", 0, 70), ("test", 0, 20)]),
    ],
)
def test_split_slicing_as_tfds(data_dir, spec, parts):
    path = os.path.join(data_dir, FIXTURE)
    split = tfds.open(path)[spec]
    expected = _expected_ids(path, parts)
    assert len(split) == len(expected)
    assert meta_ids(split) == expected
    assert [int(split[i]["meta"]["id"]) for i in range(len(split))] == expected


@pytest.mark.parametrize(
    "spec, message",
    [
        ("train[:71]", "Requested slice"),
        ("train[-71:]", "Requested slice"),
        ("train[:101%]", "percent slice boundaries"),
        ("validation", "Unknown split 'validation'"),
        ("train[10]", "Absolute or percent only support slice syntax"),
        ("train[a:b]", "Unrecognized split format"),
        ("train[::]", "Unrecognized split format"),
        ("train[1:2", "Unrecognized split format"),
        ("train[30:20]", "selects no examples"),
        ("test[3:3]", "selects no examples"),
    ],
)
def test_bad_split_strings(data_dir, spec, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        tfds.open(os.path.join(data_dir, FIXTURE))[spec]


def test_read_instruction_objects(data_dir):
    ds = tfds.open(os.path.join(data_dir, FIXTURE))
    by_string = meta_ids(ds["train[:20%]"])
    assert meta_ids(ds[tfds.ReadInstruction("train", to=20, unit="%")]) == by_string
    pct1 = tfds.ReadInstruction("train", to=20, unit="%", rounding="pct1_dropremainder")
    with pytest.raises(ValueError, match="less than 100 elements"):
        ds[pct1]


def test_disable_shuffling_reads_shards_one_after_another(data_dir):
    split = tfds.open(os.path.join(data_dir, ORDERED))["train"]
    assert [int(e["index"]) for e in split] == list(range(40))


def test_read_config_cycle_length_one_is_file_order(data_dir):
    path = os.path.join(data_dir, FIXTURE)
    split = tfds.open(path).as_dataset(
        "train", read_config=tfds.ReadConfig(interleave_cycle_length=1)
    )
    assert meta_ids(split) == _file_order_ids(path, "train") != meta_ids(tfds.open(path)["train"])
    assert [int(split[i]["meta"]["id"]) for i in (0, 30, 69)] == [
        _file_order_ids(path, "train")[i] for i in (0, 30, 69)
    ]
    with pytest.raises(ValueError, match="AUTOTUNE"):
        tfds.open(path).as_dataset("train", read_config=tfds.ReadConfig(-1))


def test_shuffle_files_reads_every_example_once(data_dir):
    ds = tfds.open(os.path.join(data_dir, FIXTURE))
    split = ds.as_dataset("train", shuffle_files=True, read_config=tfds.ReadConfig(shuffle_seed=3))
    first, second = meta_ids(split), meta_ids(split)
    assert sorted(first) == sorted(second) == sorted(meta_ids(ds["train"]))
    assert first != second or first != meta_ids(ds["train"])


# ---- random access ---------------------------------------------------------------------------


def test_random_access_matches_iteration(data_dir, dumps):
    split = tfds.open(os.path.join(data_dir, FIXTURE), decode_images=True)["train"]
    ref = dumps[FIXTURE]["train/decoded"]
    order = np.random.default_rng(0).permutation(70)
    for i in order[:20]:
        assert_same(split[int(i)], ref[i])
    batch = split.get_batch([5, 69, 5, 0, -1])
    for got, i in zip(batch, [5, 69, 5, 0, 69]):
        assert_same(got, ref[i])
    assert meta_ids(split.get_batch(order)) == [meta_ids(ref)[i] for i in order]
    assert meta_ids(split[60:65]) == meta_ids(ref[60:65])
    assert split.get_batch([]) == []
    with pytest.raises(IndexError, match="70 out of range"):
        split[70]
    with pytest.raises(IndexError):
        split.get_batch([0, -71])
    with pytest.raises(TypeError):
        split[1.0]
    with pytest.raises(TypeError):
        split.get_batch([[1, 2]])


def test_indexes_are_built_once_and_kept_beside_the_shards(own_copy, monkeypatch):
    path = os.path.join(own_copy, ORDERED)
    split = tfds.open(path)["train"]
    assert int(split[30]["index"]) == 30
    index = os.path.join(path, "tfrec_ordered-train.tfrecord-00002-of-00003.idx")
    assert os.path.exists(index)
    assert (
        tfrec_fast.load_index(index)[0].tolist() == tfrec_fast.create_index(index[:-4])[0].tolist()
    )
    calls = []
    monkeypatch.setattr(
        "tfrec_fast.tfds._files.create_index",
        lambda *a, **k: calls.append(a) or tfrec_fast.create_index(*a, **k),
    )
    assert int(tfds.open(path)["train"][31]["index"]) == 31
    assert calls == []  # the kept index was used


def test_read_only_dataset_keeps_indexes_in_the_cache(own_copy, tmp_path, monkeypatch):
    path = os.path.join(own_copy, ORDERED)
    real_write = tfrec_fast.tfds._files.write_index

    def read_only_beside_the_data(index_path, *args):
        if os.path.dirname(os.path.abspath(index_path.os_path)) == path:
            raise PermissionError(errno.EACCES, "read-only", index_path)
        return real_write(index_path, *args)

    monkeypatch.setattr("tfrec_fast.tfds._files.write_index", read_only_beside_the_data)
    monkeypatch.setenv("TFREC_FAST_CACHE_DIR", str(tmp_path / "cache"))
    assert int(tfds.open(path)["train"][15]["index"]) == 15
    assert not [f for f in os.listdir(path) if f.endswith(".idx")]
    kept = os.listdir(tmp_path / "cache" / "index")
    assert len(kept) == 1 and kept[0].startswith("tfrec_ordered-train.tfrecord-00001-of-00003.")
    calls = []
    monkeypatch.setattr(
        "tfrec_fast.tfds._files.create_index",
        lambda *a, **k: calls.append(a) or tfrec_fast.create_index(*a, **k),
    )
    assert int(tfds.open(path)["train"][16]["index"]) == 16 and calls == []


def test_index_dir_keeps_indexes_out_of_the_dataset(own_copy, tmp_path):
    path = os.path.join(own_copy, ORDERED)
    split = tfds.open(path, index_dir=tmp_path / "idx")["train"]
    assert [int(e["index"]) for e in split.get_batch([39, 0, 14])] == [39, 0, 14]
    assert not [f for f in os.listdir(path) if f.endswith(".idx")]
    assert len(os.listdir(tmp_path / "idx" / "index")) == 3


def test_a_stale_index_is_made_again(own_copy):
    path = os.path.join(own_copy, ORDERED)
    shard = os.path.join(path, "tfrec_ordered-train.tfrecord-00000-of-00003")
    assert int(tfds.open(path)["train"][3]["index"]) == 3
    records = list(read_records(shard, copy=True))
    with TFRecordWriter(shard) as w:  # the same examples, each with one more byte of padding
        for record in records:
            w.write(record + b"\x12\x00")
    os.utime(shard, (os.path.getmtime(shard) + 10,) * 2)
    assert [int(e["index"]) for e in tfds.open(path)["train"].get_batch([3, 12])] == [3, 12]


def test_records_and_pickling(data_dir, dumps):
    split = tfds.open(os.path.join(data_dir, FIXTURE))["test[:12]"]
    records = list(split.records())
    assert [
        tfrec_fast.parse_example(r, {"meta/id": tfrec_fast.FixedLen()})["meta/id"].item()
        for r in records
    ] == meta_ids(split)
    assert split[2]["meta"]["id"] == meta_ids(split)[2]  # opens a reader
    clone = pickle.loads(pickle.dumps(split))
    assert meta_ids(clone) == meta_ids(split) and clone[2]["meta"]["id"] == split[2]["meta"]["id"]
    split.close()


# ---- TFDS's names ----------------------------------------------------------------------------


def test_load_as_tfds(data_dir, dumps, monkeypatch):
    ref = dumps[FIXTURE]["test/decoded"]
    split = tfds.load("tfrec_fixture", split="test", data_dir=data_dir)
    for ours, b in zip(tfds.as_numpy(split), ref):
        assert_same(ours, b)
    both, info = tfds.load("tfrec_fixture:1.2.0", data_dir=data_dir, with_info=True)
    assert set(both) == {"train", "test"} and info.splits["test"].num_examples == 20
    monkeypatch.setenv("TFDS_DATA_DIR", data_dir)
    _, labels = zip(*tfds.load("tfrec_fixture", split="test[:3]", as_supervised=True))
    assert [int(x) for x in labels] == [int(e["label"]) for e in ref[:3]]
    skipped = tfds.load(
        "tfrec_fixture", split="test", decoders={"image": tfds.decode.SkipDecoding()}
    )
    assert next(iter(skipped))["image"][:4] == b"\x89PNG"
    builder = tfds.builder("tfrec_fixture", data_dir=data_dir)
    builder.download_and_prepare()
    assert meta_ids(builder.as_dataset(split="test")) == meta_ids(ref)
    assert tfds.builder_from_directory(os.path.join(data_dir, FIXTURE)).info.name == "tfrec_fixture"
    assert tfds.as_numpy(both)["test"] is both["test"]
    with pytest.raises(TypeError):
        tfds.as_numpy(object())


def test_batches_as_tf_data_batch(data_dir, dumps):
    ref = dumps[ORDERED]["train/decoded"]
    batches = list(tfds.load("tfrec_ordered", split="train", data_dir=data_dir, batch_size=16))
    assert [len(b["index"]) for b in batches] == [16, 16, 8]
    assert batches[0]["image"].shape == (16, 2, 2, 3) and batches[2]["index"].dtype == np.int64
    assert np.array_equal(
        np.concatenate([b["image"] for b in batches]), np.stack([e["image"] for e in ref])
    )
    whole = list(tfds.load("tfrec_ordered", split="train", data_dir=data_dir, batch_size=-1))
    assert len(whole) == 1 and whole[0]["index"].tolist() == list(range(40))
    encoded = next(iter(tfds.open(os.path.join(data_dir, ORDERED))["train"].batches(4)))
    assert encoded["image"].dtype == object and encoded["image"].shape == (4,)
    with pytest.raises(TypeError, match="ragged"):
        next(iter(tfds.open(os.path.join(data_dir, FIXTURE))["train"].batches(8)))


def test_batches_pad_as_padded_batch(data_dir, dumps):
    from tfrec_fast.tfds.dataset import _stack  # what Batched does with each batch

    ragged = ("tokens", "phrases")  # cannot be batched (nor by TensorFlow)
    examples = tfds.open(os.path.join(data_dir, FIXTURE))["test[:6]"]
    batch = _stack([{k: v for k, v in e.items() if k not in ragged} for e in examples])
    ref = dumps[FIXTURE]["test/encoded"]
    longest = max(len(e["i32_var"]) for e in ref[:6])
    assert batch["i32_var"].shape == (6, longest) and batch["i32_var"].dtype == np.int32
    for row, example in zip(batch["i32_var"], ref[:6]):
        n = len(example["i32_var"])
        assert row[:n].tolist() == example["i32_var"].tolist() and not row[n:].any()
    assert batch["text"].dtype == object and batch["text"].tolist() == [e["text"] for e in ref[:6]]
    words = max(len(e["words"]) for e in ref[:6])
    assert batch["words"].shape == (6, words)
    assert batch["words"][0].tolist() == ref[0]["words"].tolist() + [b""] * (
        words - len(ref[0]["words"])
    )
    assert batch["label"].dtype == np.int64 and batch["objects"]["bbox"].shape[2] == 4


# ---- torch -----------------------------------------------------------------------------------


def _image_and_index(example):
    return example["image"], example["index"]


def _meta_id(example):  # module level: picklable into worker processes
    return int(example["meta"]["id"])


@pytest.mark.torch
def test_torch_map_style_dataset(data_dir, dumps):
    torch = pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import SplitDataset

    split = tfds.open(os.path.join(data_dir, ORDERED), decode_images=True)["train"]
    ds = SplitDataset(split, transform=_image_and_index)
    assert len(ds) == 40 and int(ds[7][1]) == 7
    loader = torch.utils.data.DataLoader(
        ds, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    seen = []
    for images, index in loader:
        assert images.shape[1:] == (2, 2, 3) and images.dtype == torch.uint8
        ref = np.stack([dumps[ORDERED]["train/decoded"][int(i)]["image"] for i in index])
        assert np.array_equal(images.numpy(), ref)
        seen.extend(index.tolist())
    assert sorted(seen) == list(range(40))
    with pytest.raises(TypeError):
        SplitDataset([1, 2])
    same = split.to_torch(_image_and_index)
    assert isinstance(same, SplitDataset) and len(same) == 40 and int(same[7][1]) == 7


@pytest.mark.torch
def test_torch_dataset_in_worker_processes(data_dir):
    torch = pytest.importorskip("torch")
    from tfrec_fast.tfds.torch import SplitDataset

    split = tfds.open(os.path.join(data_dir, FIXTURE))["train"]
    ds = SplitDataset(split, transform=_meta_id)
    loader = torch.utils.data.DataLoader(ds, batch_size=10, num_workers=2)
    assert [int(x) for batch in loader for x in batch] == meta_ids(split)
